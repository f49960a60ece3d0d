//! OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, for every `/v1`
//! route but Anthropic's (which has its own). 5xx details go to the log, never to the
//! client; 429 carries `Retry-After`.

use axum::extract::OriginalUri;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::caller::CallerError;
use crate::api::error::ApiError;
use crate::error::Error;

/// An error on its way to an OpenAI client.
#[derive(Debug)]
pub struct OpenAiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Client-safe text.
    pub message: String,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable code (`model_not_found`, `invalid_api_key`, ...).
    pub code: Option<&'static str>,
    /// Seconds to wait before retrying (429).
    pub retry_after: Option<u64>,
}

impl OpenAiError {
    /// An error with this status and text.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            param: None,
            code: None,
            retry_after: None,
        }
    }

    /// 400 about the field `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.to_owned()),
            ..Self::new(StatusCode::BAD_REQUEST, message)
        }
    }

    /// With a machine-readable code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// With another client-safe text.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// OpenAI's `type` for this status.
    pub fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 404 | 405 | 409 | 413 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            503 => "service_unavailable",
            _ => "server_error",
        }
    }
}

impl From<CallerError> for OpenAiError {
    fn from(e: CallerError) -> Self {
        let code = (e.status == StatusCode::UNAUTHORIZED).then_some("invalid_api_key");
        Self {
            code,
            ..Self::new(e.status, e.message)
        }
    }
}

/// The status, text and `Retry-After` of `/api/v1`'s error, in OpenAI's shape.
impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        Self {
            retry_after: e.retry_after,
            ..Self::new(e.status, e.detail)
        }
    }
}

/// The one mapping of library errors to statuses (`/api/v1`'s), in OpenAI's shape.
impl From<Error> for OpenAiError {
    fn from(e: Error) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), message = %self.message, "request failed");
        } else {
            tracing::debug!(status = self.status.as_u16(), message = %self.message, "request rejected");
        }
        let body = json!({"error": {
            "message": self.message,
            "type": self.kind(),
            "param": self.param,
            "code": self.code,
        }});
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        resp
    }
}

/// Fallback for unknown `/v1` routes.
pub async fn not_found(uri: OriginalUri) -> OpenAiError {
    OpenAiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {}", uri.path()),
    )
    .with_code("unknown_url")
}

/// Fallback for a known `/v1` route with the wrong method.
pub async fn method_not_allowed(method: axum::http::Method, uri: OriginalUri) -> OpenAiError {
    OpenAiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
