//! `X-API-Key` on `/api/v1`: missing -> 401, wrong -> 403, compared in constant time.
//! Open without a key: everything under `/api/v1/health`. An empty key list turns
//! authentication off (development mode).

use axum::extract::{OriginalUri, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use crate::state::AppState;

/// Header carrying the key.
pub const HEADER: &str = "x-api-key";

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
}
