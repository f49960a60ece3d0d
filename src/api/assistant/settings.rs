//! `get_settings` (admin only; secrets masked), `get_config` (guests allowed;
//! client-safe values only) and `list_models` (admin only: the installed LLM files). All
//! answer GET and POST, as Frappe methods do.

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
        .route(
            "/assistant.api.list_models",
            get(list_models).post(list_models),
        )
}

/// The installed GGUF files and the running one (admin only).
async fn list_models(
    user: CurrentUser,
    State(state): State<AppState>,
) -> Result<Response, AssistantError> {
    user.require_admin()?;
    let view = state.assistant.list_models().await?;
    Ok(ok(view, TokensUsed::default()))
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
