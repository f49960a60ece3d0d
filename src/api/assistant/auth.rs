//! Who is calling: extractors over the three auth methods of DECISIONS.md, tried in this
//! order: `Authorization: token <api_key>:<api_secret>`, `Authorization: Bearer <jwt>`
//! (HS256), then the `sid` cookie of `login`. A request with bad credentials is a 401
//! even on guest-open operations (it is never silently treated as a guest).
//!
//! - [`CurrentUser`]: the operation needs a user; none -> 401 envelope.
//! - [`MaybeUser`]: guests allowed (e.g. `get_config`).
//!
//! The result is cached in the request's extensions, so extracting twice (e.g. by
//! `RateLimited` and a handler) authenticates once.

use axum::extract::FromRequestParts;
use axum::http::header::{AUTHORIZATION, COOKIE};
use axum::http::request::Parts;
use axum::http::HeaderMap;

pub use crate::assistant::users::CurrentUser;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Name of the login cookie.
pub const SESSION_COOKIE: &str = "sid";

/// The caller, if any: `MaybeUser(None)` for a guest.
#[derive(Debug, Clone)]
pub struct MaybeUser(pub Option<CurrentUser>);

#[derive(Clone)]
struct Resolved(Option<CurrentUser>);

impl FromRequestParts<AppState> for CurrentUser {
    type Rejection = AssistantError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        authenticate(parts, state).await?.ok_or_else(|| {
            AssistantError::Unauthorized(
                "authentication required: log in, or send 'Authorization: token <api_key>:<api_secret>' or a bearer token".into(),
            )
        })
    }
}

impl FromRequestParts<AppState> for MaybeUser {
    type Rejection = AssistantError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(authenticate(parts, state).await?))
    }
}

/// The `sid` cookie's value, if sent.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty() && v != "Guest")
}

/// The authenticated user of this request, `None` for a guest; bad credentials are 401.
pub async fn authenticate(
    parts: &mut Parts,
    state: &AppState,
) -> Result<Option<CurrentUser>, AssistantError> {
    if let Some(Resolved(user)) = parts.extensions.get::<Resolved>() {
        return Ok(user.clone());
    }
    let users = &state.assistant.users;
    let user = if let Some(h) = parts.headers.get(AUTHORIZATION) {
        let h = h
            .to_str()
            .map_err(|_| AssistantError::Unauthorized("malformed Authorization header".into()))?
            .trim();
        let (scheme, cred) = h.split_once(' ').unwrap_or((h, ""));
        let cred = cred.trim();
        match scheme.to_ascii_lowercase().as_str() {
            "token" => {
                let (key, secret) = cred.split_once(':').ok_or_else(|| {
                    AssistantError::Unauthorized(
                        "expected 'Authorization: token <api_key>:<api_secret>'".into(),
                    )
                })?;
                Some(users.by_api_key(key, secret).await?)
            }
            "bearer" => Some(users.by_jwt(cred).await?),
            _ => {
                return Err(AssistantError::Unauthorized(
                    "unsupported Authorization scheme: use 'token' or 'Bearer'".into(),
                ))
            }
        }
    } else if let Some(sid) = session_cookie(&parts.headers) {
        Some(users.by_session(&sid).await?)
    } else {
        None
    };
    if let Some(u) = &user {
        tracing::debug!(user_id = %u.id, is_admin = u.is_admin, "authenticated");
    }
    parts.extensions.insert(Resolved(user.clone()));
    Ok(user)
}
