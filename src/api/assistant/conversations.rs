//! Assistant API: conversations — `create_conversation`, `list_conversations`,
//! `get_conversation_history`, `delete_conversation`, `search_conversations`. All count
//! against the chat rate limit; another user's conversation answers 404.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;

use super::envelope::{ok, TokensUsed};
use super::limits::{Chat, RateLimited};
use super::params::Params;
use crate::assistant::conversations::ListQuery;
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group (each also answers POST, as Frappe methods do).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assistant.api.create_conversation", post(create))
        .route("/assistant.api.list_conversations", get(list).post(list))
        .route(
            "/assistant.api.get_conversation_history",
            get(history).post(history),
        )
        .route(
            "/assistant.api.delete_conversation",
            post(delete).delete(delete),
        )
        .route(
            "/assistant.api.search_conversations",
            get(search).post(search),
        )
}

/// The success envelope around a serialisable record.
pub(super) fn data<T: Serialize>(v: T) -> Result<Response, AssistantError> {
    let v = serde_json::to_value(v).map_err(|e| AssistantError::Internal(e.into()))?;
    Ok(ok(v, TokensUsed::default()))
}

/// An optional integer parameter (the service checks its range).
pub(super) fn int(p: &Params, key: &str) -> Result<Option<i64>, AssistantError> {
    Ok(p.u64(key)?.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

async fn create(
    limited: RateLimited<Chat>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    data(
        s.assistant
            .conversations
            .create(&limited.user.id, p.str("title")?)
            .await?,
    )
}

async fn list(
    limited: RateLimited<Chat>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let q = ListQuery {
        page: int(&p, "page")?,
        page_size: int(&p, "page_size")?,
        status: p.str("status")?,
    };
    data(s.assistant.conversations.list(&limited.user.id, q).await?)
}

async fn history(
    limited: RateLimited<Chat>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let id = p.required_str("conversation_id")?;
    let h = s
        .assistant
        .history(&limited.user.id, &id, int(&p, "limit")?, int(&p, "offset")?)
        .await?;
    data(h)
}

async fn delete(
    limited: RateLimited<Chat>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let id = p.required_str("conversation_id")?;
    data(
        s.assistant
            .conversations
            .delete(&limited.user.id, &id)
            .await?,
    )
}

async fn search(
    limited: RateLimited<Chat>,
    State(s): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let query = p.required_str("query")?;
    let r = s
        .assistant
        .conversations
        .search(
            &limited.user.id,
            &query,
            int(&p, "page")?,
            int(&p, "page_size")?,
        )
        .await?;
    data(r)
}
