//! Anthropic's error shape, `{"type": "error", "error": {"type", "message"}}`, for the
//! Messages API routes. 5xx details go to the log, never to the client; 429 carries
//! `Retry-After`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::api::error::ApiError;
use crate::api::v1::caller::CallerError;
use crate::api::v1::openai_error::OpenAiError;
use crate::error::Error;

/// An error on its way to an Anthropic client.
#[derive(Debug)]
pub struct AnthropicError {
    /// HTTP status.
    pub status: StatusCode,
    /// Client-safe text.
    pub message: String,
    /// Seconds to wait before retrying (429).
    pub retry_after: Option<u64>,
}

impl AnthropicError {
    /// An error with this status and text.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 invalid_request_error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// Anthropic's error `type` for this status.
    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 405 | 409 | 413 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            _ => "api_error",
        }
    }

    /// The body Anthropic's clients parse.
    pub fn body(&self) -> serde_json::Value {
        json!({"type": "error", "error": {"type": self.kind(), "message": self.message}})
    }
}

impl From<CallerError> for AnthropicError {
    fn from(e: CallerError) -> Self {
        Self::new(e.status, e.message)
    }
}

/// The status, text and `Retry-After` of `/api/v1`'s error, in Anthropic's shape.
impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> Self {
        Self {
            retry_after: e.retry_after,
            ..Self::new(e.status, e.detail)
        }
    }
}

/// The one mapping of library errors to statuses (`/api/v1`'s), in Anthropic's shape.
impl From<Error> for AnthropicError {
    fn from(e: Error) -> Self {
        ApiError::from(e).into()
    }
}

/// A check shared with the OpenAI routes: the field at fault leads the message, as
/// Anthropic writes it (`max_tokens: ...`).
impl From<OpenAiError> for AnthropicError {
    fn from(e: OpenAiError) -> Self {
        let message = match e.param {
            Some(p) if !e.message.starts_with(&p) => format!("{p}: {}", e.message),
            _ => e.message,
        };
        Self {
            retry_after: e.retry_after,
            ..Self::new(e.status, message)
        }
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), message = %self.message, "request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), message = %self.message, "request rejected");
        }
        let mut resp = (self.status, Json(self.body())).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_anthropic_types() {
        let kind = |s: u16| AnthropicError::new(StatusCode::from_u16(s).unwrap(), "m").kind();
        assert_eq!(kind(400), "invalid_request_error");
        assert_eq!(kind(401), "authentication_error");
        assert_eq!(kind(403), "permission_error");
        assert_eq!(kind(404), "not_found_error");
        assert_eq!(kind(429), "rate_limit_error");
        assert_eq!(kind(503), "overloaded_error");
        assert_eq!(kind(500), "api_error");
    }

    #[test]
    fn overload_is_429_with_retry_after() {
        let resp = AnthropicError::from(Error::Overloaded("queue full".into())).into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(resp.headers().get(header::RETRY_AFTER).is_some());
    }

    #[test]
    fn body_has_anthropic_shape() {
        let b = AnthropicError::invalid("max_tokens: field required").body();
        assert_eq!(b["type"], "error");
        assert_eq!(b["error"]["type"], "invalid_request_error");
        assert_eq!(b["error"]["message"], "max_tokens: field required");
    }
}
