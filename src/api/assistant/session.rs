//! `POST /api/method/login` (`usr`, `pwd`) sets the HttpOnly `sid` cookie;
//! `/api/method/logout` (GET or POST) ends the session and clears it.

use axum::extract::State;
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::json;

use super::auth::{session_cookie, SESSION_COOKIE};
use super::envelope::{ok, TokensUsed};
use super::params::Params;
use crate::assistant::users::SESSION_TTL_SECS;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/login", post(login))
        .route("/logout", post(logout).get(logout))
}

async fn login(State(state): State<AppState>, p: Params) -> Result<Response, AssistantError> {
    let usr = match p.str("usr")? {
        Some(u) => u,
        None => p.required_str("usr")?,
    };
    let pwd = p
        .str("pwd")?
        .ok_or_else(|| AssistantError::BadRequest("parameter 'pwd' is required".into()))?;
    let session = state.assistant.users.login(&usr, &pwd).await?;
    let mut resp = ok(
        json!({
            "message": "Logged In",
            "user": session.user,
            "expires_at": session.expires_at,
        }),
        TokensUsed::default(),
    );
    let cookie = format!(
        "{SESSION_COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={SESSION_TTL_SECS}",
        session.sid
    );
    let value = HeaderValue::from_str(&cookie).map_err(|e| AssistantError::Internal(e.into()))?;
    resp.headers_mut().insert(SET_COOKIE, value);
    Ok(resp)
}

async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, AssistantError> {
    let ended = match session_cookie(&headers) {
        Some(sid) => state.assistant.users.logout(&sid).await?,
        None => false,
    };
    let mut resp = ok(json!({"logged_out": ended}), TokensUsed::default());
    resp.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_static("sid=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0"),
    );
    Ok(resp)
}
