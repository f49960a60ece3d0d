//! `X-API-Key` on `/api/v1`: missing -> 401, wrong -> 403, compared in constant time.
//! Open without a key: everything under `/api/v1/health`. An empty key list turns
//! authentication off (development mode).
//!
//! The web page never holds a key: a request without `X-API-Key` that carries
//! `X-Requested-With: ragd-web` and the `sid` cookie of a signed-in assistant user is let
//! through as that user. Browsers send a custom header to another origin only after a
//! CORS preflight, which ragd never grants, so another site cannot ride on the session.

use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::assistant::auth::session_cookie;
use super::error::ApiError;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Header carrying the key.
pub const HEADER: &str = "x-api-key";

/// Header (and value) the web page sends with its `/api/v1` calls.
pub const WEB_CLIENT_HEADER: (&str, &str) = ("x-requested-with", "ragd-web");

fn is_open(path: &str) -> bool {
    path == "/api/v1/health" || path.starts_with("/api/v1/health/")
}

/// Whether `given` matches one of `keys`. Hashing first makes every comparison the
/// same length, so timing reveals neither the key nor its length.
pub fn key_matches(keys: &[String], given: &str) -> bool {
    let g = Sha256::digest(given.as_bytes());
    keys.iter()
        .fold(subtle::Choice::from(0), |acc, k| {
            acc | Sha256::digest(k.as_bytes()).ct_eq(&g)
        })
        .into()
}

/// The session cookie of a request made by the web page (see the module docs).
fn web_session(headers: &HeaderMap) -> Option<String> {
    let (name, expected) = WEB_CLIENT_HEADER;
    let from_page = headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(expected));
    from_page.then(|| session_cookie(headers)).flatten()
}

/// Middleware enforcing the key on `/api/v1`.
pub async fn require_api_key(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let path = req
        .extensions()
        .get::<OriginalUri>()
        .map(|u| u.0.path().to_owned())
        .unwrap_or_else(|| req.uri().path().to_owned());
    if !state.config.auth_enabled() || is_open(&path) {
        return Ok(next.run(req).await);
    }
    let Some(value) = req.headers().get(HEADER) else {
        if let Some(sid) = web_session(req.headers()) {
            let user = state
                .assistant
                .users
                .by_session(&sid)
                .await
                .map_err(|e| match e {
                    AssistantError::Unauthorized(_) => ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "session expired or invalid: sign in again",
                    ),
                    other => {
                        tracing::error!(error = %other, "checking a session failed");
                        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
                    }
                })?;
            tracing::debug!(user_id = %user.id, %path, "knowledge base called by a signed-in user");
            return Ok(next.run(req).await);
        }
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing API key: send it in the X-API-Key header",
        ));
    };
    let ok = value
        .to_str()
        .map(|v| key_matches(&state.config.api_keys, v))
        .unwrap_or(false);
    if !ok {
        tracing::warn!(%path, "rejected an invalid API key");
        return Err(ApiError::new(StatusCode::FORBIDDEN, "invalid API key"));
    }
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_exactly() {
        let keys = vec!["alpha".to_string(), "beta".to_string()];
        assert!(key_matches(&keys, "beta"));
        assert!(!key_matches(&keys, "bet"));
        assert!(!key_matches(&keys, "betaa"));
        assert!(!key_matches(&[], "x"));
        assert!(is_open("/api/v1/health/ready"));
        assert!(!is_open("/api/v1/healthz"));
    }

    #[test]
    fn a_session_counts_only_with_the_page_header() {
        let mut h = HeaderMap::new();
        h.insert("cookie", "theme=x; sid=abc".parse().unwrap());
        assert_eq!(web_session(&h), None);
        h.insert("x-requested-with", "ragd-web".parse().unwrap());
        assert_eq!(web_session(&h).as_deref(), Some("abc"));
        h.insert("x-requested-with", "XMLHttpRequest".parse().unwrap());
        assert_eq!(web_session(&h), None);
        h.insert("x-requested-with", "ragd-web".parse().unwrap());
        h.remove("cookie");
        assert_eq!(web_session(&h), None);
    }
}
