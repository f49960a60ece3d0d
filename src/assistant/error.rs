//! The assistant's error type; `api::assistant` maps it to the envelope of DECISIONS.md.

/// Every way an assistant operation fails, with the HTTP status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum AssistantError {
    /// 400: invalid parameters.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no or bad credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: authenticated but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown id, or another user's record.
    #[error("{0}")]
    NotFound(String),
    /// 409: a state conflict (e.g. confirming an action twice).
    #[error("{0}")]
    Conflict(String),
    /// 429: over the rate limit; retry after this many seconds.
    #[error("rate limit exceeded; retry in {retry_after} s")]
    RateLimited {
        /// Seconds until the window resets.
        retry_after: u64,
    },
    /// 429: the server is shedding load (a bounded queue is full); retry after this many
    /// seconds.
    #[error("{detail}")]
    Overloaded {
        /// What is full, safe to show.
        detail: String,
        /// Seconds to wait before retrying.
        retry_after: u64,
    },
    /// 503: a needed service is missing.
    #[error("{0}")]
    Unavailable(String),
    /// 500: details are logged, never sent.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<crate::error::Error> for AssistantError {
    fn from(e: crate::error::Error) -> Self {
        use crate::error::Error as E;
        match e {
            E::BadRequest(m) => Self::BadRequest(m),
            E::NotFound(m) => Self::NotFound(m),
            E::Conflict(m) => Self::Conflict(m),
            E::TooLarge(m) => Self::BadRequest(m),
            E::Overloaded(detail) => Self::Overloaded {
                detail,
                retry_after: crate::error::OVERLOAD_RETRY_AFTER_SECS,
            },
            E::Unavailable(m) => Self::Unavailable(m),
            other => Self::Internal(anyhow::Error::new(other)),
        }
    }
}
