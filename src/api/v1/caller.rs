//! Who calls `/v1` and `/mcp`: the credential comes as `Authorization: Bearer <key>` (what
//! OpenAI's SDKs and MCP clients send) or `x-api-key: <key>` (what Anthropic's SDKs send).
//! The key is one of the server's `API_KEYS` ([`Caller::Service`]), or a user's
//! `api_key:api_secret` or a user's HS256 token ([`Caller::User`], acting as that user
//! with that user's permissions). With no `API_KEYS` configured (development mode) a
//! request without a credential is the service; a credential that is sent is still
//! checked. A missing credential is 401, a wrong one 401 too (clients of these APIs treat
//! 401 as "fix the key"; 403 is kept for a user who lacks a permission).
//!
//! Each surface turns a [`CallerError`] into its own error shape.

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};

use super::super::auth::key_matches;
use crate::assistant::users::CurrentUser;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// The header Anthropic's SDKs carry the key in.
pub const X_API_KEY: &str = "x-api-key";

/// An authenticated caller of `/v1` or `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A key of `API_KEYS` (or any request in development mode): the knowledge base's
    /// service identity, as on `/api/v1`.
    Service,
    /// A user, by their API key and secret or token.
    User(CurrentUser),
}

impl Caller {
    /// The user, if the caller is one.
    pub fn user(&self) -> Option<&CurrentUser> {
        match self {
            Self::User(u) => Some(u),
            Self::Service => None,
        }
    }

    /// A short label for logs: `service` or the user's id.
    pub fn label(&self) -> String {
        match self {
            Self::Service => "service".into(),
            Self::User(u) => format!("user:{}", u.id),
        }
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerError {
    /// 401, or 500 when checking a credential failed inside the server.
    pub status: StatusCode,
    /// Client-safe text.
    pub message: String,
}

impl CallerError {
    fn unauthorized(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            message: message.into(),
        }
    }
}

/// The credential a request carries, if any (`Bearer` first, then `x-api-key`).
pub fn credential(headers: &HeaderMap) -> Result<Option<String>, CallerError> {
    if let Some(h) = headers.get(AUTHORIZATION) {
        let h = h
            .to_str()
            .map_err(|_| CallerError::unauthorized("malformed Authorization header"))?
            .trim();
        let (scheme, cred) = h.split_once(' ').unwrap_or((h, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(CallerError::unauthorized(
                "unsupported Authorization scheme: send 'Authorization: Bearer <key>'",
            ));
        }
        let cred = cred.trim();
        if cred.is_empty() {
            return Err(CallerError::unauthorized("empty bearer credential"));
        }
        return Ok(Some(cred.to_owned()));
    }
    match headers.get(X_API_KEY) {
        Some(v) => {
            let v = v
                .to_str()
                .map_err(|_| CallerError::unauthorized("malformed x-api-key header"))?
                .trim();
            if v.is_empty() {
                return Err(CallerError::unauthorized("empty x-api-key header"));
            }
            Ok(Some(v.to_owned()))
        }
        None => Ok(None),
    }
}

/// The caller of a request (cached in its extensions, so resolving twice checks once).
pub async fn resolve(parts: &mut Parts, state: &AppState) -> Result<Caller, CallerError> {
    if let Some(c) = parts.extensions.get::<Caller>() {
        return Ok(c.clone());
    }
    let caller = resolve_headers(&parts.headers, state).await?;
    tracing::debug!(caller = %caller.label(), "authenticated");
    parts.extensions.insert(caller.clone());
    Ok(caller)
}

/// The caller named by `headers` (see the module docs).
pub async fn resolve_headers(headers: &HeaderMap, state: &AppState) -> Result<Caller, CallerError> {
    let Some(cred) = credential(headers)? else {
        if !state.config.auth_enabled() {
            return Ok(Caller::Service);
        }
        return Err(CallerError::unauthorized(
            "missing API key: send 'Authorization: Bearer <key>' (a server key, or a user's api_key:api_secret)",
        ));
    };
    if key_matches(&state.config.api_keys, &cred) {
        return Ok(Caller::Service);
    }
    let users = &state.assistant.users;
    let found = if let Some((key, secret)) = cred.split_once(':') {
        users.by_api_key(key, secret).await
    } else if cred.matches('.').count() == 2 {
        users.by_jwt(&cred).await
    } else {
        tracing::warn!("rejected an invalid key on /v1 or /mcp");
        return Err(CallerError::unauthorized("invalid API key"));
    };
    match found {
        Ok(user) => Ok(Caller::User(user)),
        Err(AssistantError::Unauthorized(m)) => Err(CallerError::unauthorized(m)),
        Err(other) => {
            tracing::error!(error = %other, "checking a credential failed");
            Err(CallerError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: "checking the credential failed; see the server log".into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn bearer_then_x_api_key() {
        let h = headers(&[("authorization", "Bearer abc"), ("x-api-key", "def")]);
        assert_eq!(credential(&h).unwrap().as_deref(), Some("abc"));
        let h = headers(&[("x-api-key", " def ")]);
        assert_eq!(credential(&h).unwrap().as_deref(), Some("def"));
        assert_eq!(credential(&HeaderMap::new()).unwrap(), None);
    }

    #[test]
    fn other_schemes_and_empty_keys_are_refused() {
        for h in [
            headers(&[("authorization", "token a:b")]),
            headers(&[("authorization", "Bearer ")]),
            headers(&[("x-api-key", "")]),
        ] {
            let e = credential(&h).unwrap_err();
            assert_eq!(e.status, StatusCode::UNAUTHORIZED, "{e:?}");
        }
    }
}
