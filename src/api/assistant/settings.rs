//! `get_settings` (admin only; secrets masked) and `get_config` (guests allowed;
//! client-safe values only). Both answer GET and POST, as Frappe methods do.

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use super::auth::{CurrentUser, MaybeUser};
use super::envelope::{ok, TokensUsed};
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/assistant.api.get_settings",
            get(get_settings).post(get_settings),
        )
        .route(
            "/assistant.api.get_config",
            get(get_config).post(get_config),
        )
}

async fn get_settings(
    user: CurrentUser,
    State(state): State<AppState>,
) -> Result<Response, AssistantError> {
    user.require_admin()?;
    let view = state.assistant.settings.admin_view().await?;
    Ok(ok(view, TokensUsed::default()))
}

async fn get_config(
    user: MaybeUser,
    State(state): State<AppState>,
) -> Result<Response, AssistantError> {
    let mut view = state.assistant.settings.client_config().await?;
    if let Some(obj) = view.as_object_mut() {
        obj.insert("authenticated".into(), user.0.is_some().into());
    }
    Ok(ok(view, TokensUsed::default()))
}
