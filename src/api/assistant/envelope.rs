//! The assistant API's envelope (DECISIONS.md): every success is
//! `{"message": {"success": true, "data": .., "tokens_used": {input, output, total}}}`, every
//! error `{"message": {"success": false, "error": {type, detail}, "data": null,
//! "tokens_used": ..}, "exc_type": type}` with the HTTP status set. This is the one mapping
//! from [`AssistantError`] to the wire; 5xx details go to the log, never to the client.

use axum::extract::OriginalUri;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};

use crate::assistant::AssistantError;

/// Tokens an operation consumed; serialised with a computed `total`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "TokensWire")]
pub struct TokensUsed {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
}

impl TokensUsed {
    /// `input + output`.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

#[derive(Serialize)]
struct TokensWire {
    input: u64,
    output: u64,
    total: u64,
}

impl From<TokensUsed> for TokensWire {
    fn from(t: TokensUsed) -> Self {
        Self {
            input: t.input,
            output: t.output,
            total: t.total(),
        }
    }
}

/// 200 with the success envelope around `data`.
pub fn ok(data: Value, tokens: TokensUsed) -> Response {
    Json(json!({
        "message": {"success": true, "data": data, "tokens_used": tokens}
    }))
    .into_response()
}

/// The error envelope with this status, type and client-safe detail.
pub fn error_response(status: StatusCode, kind: &str, detail: &str) -> Response {
    let body = json!({
        "message": {
            "success": false,
            "error": {"type": kind, "detail": detail},
            "data": null,
            "tokens_used": TokensUsed::default(),
        },
        "exc_type": kind,
    });
    (status, Json(body)).into_response()
}

impl AssistantError {
    /// The HTTP status this error is sent with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::RateLimited { .. } | Self::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `error.type` / `exc_type` name (Frappe's exception names where one fits).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "ValidationError",
            Self::Unauthorized(_) => "AuthenticationError",
            Self::Forbidden(_) => "PermissionError",
            Self::NotFound(_) => "DoesNotExistError",
            Self::Conflict(_) => "ConflictError",
            Self::RateLimited { .. } => "RateLimitExceededError",
            Self::Overloaded { .. } => "ServerBusyError",
            Self::Unavailable(_) => "ServiceUnavailableError",
            Self::Internal(_) => "InternalServerError",
        }
    }
}

impl IntoResponse for AssistantError {
    fn into_response(self) -> Response {
        let status = self.status();
        let kind = self.kind();
        let detail = match &self {
            Self::Internal(e) => {
                tracing::error!(error = ?e, "assistant operation failed");
                "internal server error".to_owned()
            }
            other => other.to_string(),
        };
        let mut resp = error_response(status, kind, &detail);
        if let Self::RateLimited { retry_after } | Self::Overloaded { retry_after, .. } = self {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after.max(1)));
        }
        resp
    }
}

/// Fallback for unknown `/api/method/...` paths: 404 in the envelope.
pub async fn not_found(OriginalUri(uri): OriginalUri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "DoesNotExistError",
        &format!("no such method: {}", uri.path()),
    )
}

/// Fallback for a known method called with the wrong HTTP verb: 405 in the envelope.
pub async fn method_not_allowed(method: Method, OriginalUri(uri): OriginalUri) -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowedError",
        &format!("{method} is not allowed on {}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_serialise_with_total() {
        let t = TokensUsed {
            input: 3,
            output: 4,
        };
        assert_eq!(
            serde_json::to_value(t).unwrap(),
            json!({"input": 3, "output": 4, "total": 7})
        );
    }

    #[test]
    fn rate_limited_sets_retry_after() {
        let r = AssistantError::RateLimited { retry_after: 12 }.into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "12");
    }

    #[test]
    fn server_overload_is_429_with_retry_after() {
        let e = AssistantError::from(crate::error::Error::Overloaded("queue full".into()));
        assert_eq!(e.kind(), "ServerBusyError");
        let r = e.into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }
}
