//! The `/api/v1` error body `{error, detail, status_code, timestamp}` and the one
//! mapping from library errors to it. 5xx details go to the log, never to the client.

use std::any::Any;

use axum::extract::OriginalUri;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{Error, OVERLOAD_RETRY_AFTER_SECS};

/// The contract's error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Error type: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `method_not_allowed`, `conflict`, `payload_too_large`, `rate_limited`,
    /// `service_unavailable`, `internal_error`.
    pub error: String,
    pub detail: String,
    pub status_code: u16,
    pub timestamp: String,
}

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: String,
    /// Seconds the client should wait before retrying, sent as `Retry-After`.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with this status and client-safe detail.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// 429 with `Retry-After`: the server sheds load; the request did nothing.
    pub fn overloaded(detail: impl Into<String>) -> Self {
        Self {
            retry_after: Some(OVERLOAD_RETRY_AFTER_SECS),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, detail)
        }
    }

    /// 400.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// The body this error is sent as.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: kind(self.status).into(),
            detail: self.detail.clone(),
            status_code: self.status.as_u16(),
            timestamp: crate::time::now_iso(),
        }
    }
}

fn kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        413 => "payload_too_large",
        429 => "rate_limited",
        503 => "service_unavailable",
        _ => "internal_error",
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::BadRequest(m) => Self::new(StatusCode::BAD_REQUEST, m),
            Error::NotFound(m) => Self::new(StatusCode::NOT_FOUND, m),
            Error::TooLarge(m) => Self::new(StatusCode::PAYLOAD_TOO_LARGE, m),
            Error::Overloaded(m) => Self::overloaded(m),
            Error::Unavailable(m) => Self::new(StatusCode::SERVICE_UNAVAILABLE, m),
            Error::Conflict(m) => Self::new(StatusCode::CONFLICT, m),
            Error::Cancelled => Self::new(StatusCode::CONFLICT, "the operation was cancelled"),
            Error::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "internal error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal server error; see the server log",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), detail = %self.detail, "request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), detail = %self.detail, "request rejected");
        }
        let mut resp = (self.status, Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        resp
    }
}

/// Fallback for unknown routes.
pub async fn not_found(uri: OriginalUri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {}", uri.path()),
    )
}

/// Fallback for a known route with the wrong method.
pub async fn method_not_allowed(method: axum::http::Method, uri: OriginalUri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// A handler panicked: log it and answer 500 in the error shape.
pub fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response {
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    tracing::error!(panic = msg, "handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal server error; see the server log",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_is_429_with_retry_after_and_the_error_body() {
        let r = ApiError::from(Error::Overloaded("the queue is full".into())).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let e = ApiError::from(Error::Overloaded("x".into()));
        assert_eq!(e.body().error, "rate_limited");
        assert_eq!(e.body().status_code, 429);
        let r = ApiError::from(Error::Unavailable("no model".into())).into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }
}
