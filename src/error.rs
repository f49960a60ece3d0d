//! The library's error type. Each API maps it to its own wire shape in one place.

use thiserror::Error;

/// Seconds an overloaded server asks a client to wait (`Retry-After`): queues drain in
/// well under that at the load ragd sheds.
pub const OVERLOAD_RETRY_AFTER_SECS: u64 = 1;

/// What went wrong, in terms a transport can map to a status code.
#[derive(Debug, Error)]
pub enum Error {
    /// The caller sent something invalid; the message is safe to show.
    #[error("{0}")]
    BadRequest(String),
    /// The named resource does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request body or file is larger than the configured limit.
    #[error("{0}")]
    TooLarge(String),
    /// A bounded queue is full, or a request waited its longest in one; the caller may
    /// retry after [`OVERLOAD_RETRY_AFTER_SECS`]. Both APIs answer 429 with `Retry-After`.
    #[error("{0}")]
    Overloaded(String),
    /// A component is not available (e.g. a model failed to load).
    #[error("{0}")]
    Unavailable(String),
    /// The request conflicts with the resource's state (e.g. cancelling a finished task).
    #[error("{0}")]
    Conflict(String),
    /// The work was cancelled before it was committed.
    #[error("cancelled")]
    Cancelled,
    /// Anything else; details go to the log, not to the client.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl Error {
    /// Shorthand for a 400 with a message.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::BadRequest(msg.into())
    }
}

impl From<crate::ml::MlError> for Error {
    fn from(e: crate::ml::MlError) -> Self {
        use crate::ml::MlError;
        match e {
            MlError::Overloaded => Self::Overloaded(e.to_string()),
            MlError::InvalidInput(m) => Self::BadRequest(m),
            MlError::WorkerGone | MlError::Load(_) | MlError::Unavailable(_) => {
                Self::Unavailable(e.to_string())
            }
            MlError::Inference(_) => Self::Internal(anyhow::Error::new(e)),
        }
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::Internal(anyhow::Error::new(e).context("blocking task failed"))
    }
}

/// Result with the library's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
