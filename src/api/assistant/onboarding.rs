//! Onboarding operations: `start_onboarding`, `submit_onboarding_answer`,
//! `execute_onboarding_configuration`, `get_onboarding_status`. Chat rate-limit scope.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use super::envelope::{ok, TokensUsed};
use super::limits::{Chat, RateLimited};
use super::params::Params;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assistant.api.start_onboarding", post(start))
        .route("/assistant.api.submit_onboarding_answer", post(submit))
        .route(
            "/assistant.api.execute_onboarding_configuration",
            post(execute),
        )
        .route(
            "/assistant.api.get_onboarding_status",
            get(status).post(status),
        )
}

async fn start(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let modules = p.json("modules");
    let company = p.value("company_name").cloned();
    let view = state
        .assistant
        .onboarding
        .start(&limited.user, modules, company)
        .await?;
    Ok(ok(view, TokensUsed::default()))
}

async fn submit(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let session_id = p.required_str("session_id")?;
    let key = p.required_str("question_key")?;
    let answer = p
        .json("answer")
        .ok_or_else(|| AssistantError::BadRequest("parameter 'answer' is required".into()))?;
    let view = state
        .assistant
        .onboarding
        .submit(&limited.user, &session_id, &key, answer)
        .await?;
    Ok(ok(view, TokensUsed::default()))
}

async fn execute(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let session_id = p.required_str("session_id")?;
    let view = state
        .assistant
        .onboarding
        .execute(&limited.user, &session_id)
        .await?;
    Ok(ok(view, TokensUsed::default()))
}

async fn status(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let session_id = p.required_str("session_id")?;
    let view = state
        .assistant
        .onboarding
        .status(&limited.user, &session_id)
        .await?;
    Ok(ok(view, TokensUsed::default()))
}
