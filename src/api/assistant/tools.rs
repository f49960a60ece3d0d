//! Assistant API: `get_available_tools` and `execute_tool`. Unknown tool 404, invalid
//! params 400 (naming the field), admin-only tool by a non-admin 403; a high-risk tool
//! answers `requires_confirmation` with an `action_id` and does not run.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::auth::CurrentUser;
use super::conversations::data;
use super::envelope::{ok, TokensUsed};
use super::limits::{RateLimited, Tools};
use super::params::Params;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/assistant.api.get_available_tools",
            get(available).post(available),
        )
        .route("/assistant.api.execute_tool", post(execute))
}

async fn available(
    user: CurrentUser,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let category = p.str("category")?;
    let include_schema = p.bool_or("include_schema", false)?;
    let tools = s
        .assistant
        .tools
        .list(category.as_deref(), include_schema, &user)?;
    Ok(ok(
        json!({ "count": tools.len(), "tools": tools }),
        TokensUsed::default(),
    ))
}

async fn execute(
    limited: RateLimited<Tools>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let name = p.required_str("tool_name")?;
    let params = p
        .object("params")?
        .map(Value::Object)
        .unwrap_or(Value::Null);
    data(
        s.assistant
            .execute_tool(&limited.user, &name, &params)
            .await?,
    )
}
