//! Assistant API: `confirm_action` (counts against the tools rate limit), `reject_action`
//! and `list_pending_actions`. Another user's action answers 404; deciding an action that
//! is no longer pending (decided or expired) answers 409.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use super::auth::CurrentUser;
use super::conversations::data;
use super::limits::{RateLimited, Tools};
use super::params::Params;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assistant.api.confirm_action", post(confirm))
        .route("/assistant.api.reject_action", post(reject))
        .route(
            "/assistant.api.list_pending_actions",
            get(pending).post(pending),
        )
}

async fn confirm(
    limited: RateLimited<Tools>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let id = p.required_str("action_id")?;
    data(s.assistant.confirm_action(&limited.user, &id).await?)
}

async fn reject(
    user: CurrentUser,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let id = p.required_str("action_id")?;
    data(
        s.assistant
            .reject_action(&user, &id, p.str("reason")?)
            .await?,
    )
}

async fn pending(user: CurrentUser, State(s): State<AppState>) -> Result<Response, AssistantError> {
    data(s.assistant.list_pending_actions(&user).await?)
}
