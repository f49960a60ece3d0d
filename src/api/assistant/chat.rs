//! Assistant API: the chat — `chat_with_tools` (JSON, form or query), `chat_with_tools_multimodal`
//! (multipart with `files[]`, parsed by the knowledge base's parsers, images OCR'd) and
//! `stream_ai_response` (SSE: `content`, `tool_start`, `tool_result`, then `done`, which
//! carries the cited `sources`, or `error`). All count against the chat rate limit. A
//! stream whose client goes away stops the model.

use std::convert::Infallible;

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::{Stream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::envelope::{ok, TokensUsed};
use super::limits::{Chat, RateLimited};
use super::params::Params;
use crate::api::error::ApiError;
use crate::api::kb::form::Form;
use crate::api::sse;
use crate::assistant::chat::attachments::MAX_ATTACHMENTS;
use crate::assistant::chat::{ChatEvent, ChatReply, ChatRequest, ToolChoice};
use crate::assistant::AssistantError;
use crate::state::AppState;

/// Routes of this group.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assistant.api.chat_with_tools", post(chat_with_tools))
        .route(
            "/assistant.api.chat_with_tools_multimodal",
            post(chat_multimodal),
        )
        .route(
            "/assistant.api.stream_ai_response",
            get(stream_ai_response).post(stream_ai_response),
        )
}

fn tool_choice(p: &Params) -> Result<ToolChoice, AssistantError> {
    Ok(match p.str("tool_choice")?.as_deref().map(str::trim) {
        None | Some("") | Some("auto") => ToolChoice::Auto,
        Some("none") => ToolChoice::None,
        Some(name) => ToolChoice::Required(name.to_owned()),
    })
}

/// A turn's parameters (shared by the JSON and the streaming operation).
fn chat_request(p: &Params, user_message: String) -> Result<ChatRequest, AssistantError> {
    Ok(ChatRequest {
        user_message,
        conversation_id: p.str("conversation_id")?,
        // Low and medium risk tools run unless the caller says otherwise; high risk is
        // always held for confirmation.
        auto_execute_tools: p.bool_or("auto_execute_tools", true)?,
        system_prompt: p.str("system_prompt")?,
        max_tokens: p
            .u64("max_tokens")?
            .map(|v| v.min(usize::MAX as u64) as usize),
        tool_choice: tool_choice(p)?,
        attachments: Vec::new(),
    })
}

fn reply_envelope(reply: ChatReply) -> Result<Response, AssistantError> {
    let tokens = TokensUsed {
        input: reply.tokens_in,
        output: reply.tokens_out,
    };
    let data = serde_json::to_value(&reply).map_err(|e| AssistantError::Internal(e.into()))?;
    Ok(ok(data, tokens))
}

async fn chat_with_tools(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let req = chat_request(&p, p.required_str("user_message")?)?;
    reply_envelope(state.assistant.chat(&limited.user, req, None).await?)
}

fn from_api(e: ApiError) -> AssistantError {
    let body = e.body();
    match body.status_code {
        429 => AssistantError::Overloaded {
            detail: body.detail,
            retry_after: e
                .retry_after
                .unwrap_or(crate::error::OVERLOAD_RETRY_AFTER_SECS),
        },
        503 => AssistantError::Unavailable(body.detail),
        500.. => AssistantError::Internal(anyhow::anyhow!(body.detail)),
        _ => AssistantError::BadRequest(body.detail),
    }
}

async fn chat_multimodal(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, AssistantError> {
    let form = Form::read(multipart, state.config.max_upload_bytes, MAX_ATTACHMENTS)
        .await
        .map_err(from_api)?;
    let user_message = form.text("user_message", "");
    if user_message.trim().is_empty() {
        return Err(AssistantError::BadRequest(
            "user_message is required".into(),
        ));
    }
    let conversation_id = Some(form.text("conversation_id", "")).filter(|c| !c.trim().is_empty());
    let files = form
        .files
        .into_iter()
        .map(|(field, f)| (field, f.name, f.bytes))
        .collect();
    let attachments = state.assistant.attachments(files).await?;
    let req = ChatRequest {
        user_message,
        conversation_id,
        auto_execute_tools: true,
        system_prompt: None,
        max_tokens: None,
        tool_choice: ToolChoice::Auto,
        attachments,
    };
    reply_envelope(state.assistant.chat(&limited.user, req, None).await?)
}

async fn stream_ai_response(
    limited: RateLimited<Chat>,
    State(state): State<AppState>,
    p: Params,
) -> Result<Response, AssistantError> {
    let prompt = p
        .str("prompt")?
        .or(p.str("user_message")?)
        .unwrap_or_default();
    if prompt.trim().is_empty() {
        return Err(AssistantError::BadRequest("prompt is required".into()));
    }
    let req = chat_request(&p, prompt)?;
    // Refused with a status, not as an event of a stream that has begun.
    state.kb.ensure_searchable()?;
    Ok(sse::respond(stream_chat(state, limited.user, req)).into_response())
}

fn error_object(e: &AssistantError) -> Value {
    let detail = match e {
        AssistantError::Internal(inner) => {
            tracing::error!(error = %inner, "chat stream failed");
            "internal error".to_owned()
        }
        other => other.to_string(),
    };
    json!({"type": e.kind(), "detail": detail, "status_code": e.status().as_u16()})
}

fn chat_event(e: ChatEvent) -> Event {
    match e {
        ChatEvent::Content(delta) => sse::event("content", json!({ "delta": delta })),
        // A knowledge-base answer's piece says where it comes from.
        ChatEvent::Answer(piece) => sse::event(
            "content",
            json!({ "delta": piece.text, "origin": piece.origin.as_str() }),
        ),
        ChatEvent::ToolStart { tool_name, params } => sse::event(
            "tool_start",
            json!({ "tool_name": tool_name, "params": params }),
        ),
        ChatEvent::ToolResult(r) => sse::event(
            "tool_result",
            json!({
                "tool_name": r.tool_name,
                "success": r.status == "executed",
                "status": r.status,
                "result": r.result,
                "error": r.error,
                "execution_time_ms": r.execution_time_ms,
                "requires_confirmation": r.status == "pending_confirmation",
                "action_id": r.action_id,
            }),
        ),
    }
}

/// Runs the turn on its own task; its events become SSE events, then `done` or `error`.
fn stream_chat(
    state: AppState,
    user: crate::assistant::users::CurrentUser,
    req: ChatRequest,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let (out, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        let (events_tx, mut events) = mpsc::channel::<ChatEvent>(64);
        let assistant = state.assistant.clone();
        let turn = tokio::spawn(async move { assistant.chat(&user, req, Some(&events_tx)).await });
        while let Some(e) = events.recv().await {
            if out.send(chat_event(e)).await.is_err() {
                // The client left: closing the events channel makes the engine stop, and
                // dropping its generation frees the model.
                drop(events);
                let _ = turn.await;
                return;
            }
        }
        let last = match turn.await {
            Ok(Ok(reply)) => sse::event(
                "done",
                json!({
                    "conversation_id": reply.conversation_id,
                    "message_id": reply.message_id,
                    "response": reply.response,
                    "requires_confirmation": reply.requires_confirmation,
                    "answer_mode": reply.answer_mode,
                    // The passages the reply cites as [n] (the web page opens them).
                    "sources": reply.sources,
                    "grounding": reply.grounding,
                    "tokens_used": {
                        "input": reply.tokens_in,
                        "output": reply.tokens_out,
                        "total": reply.tokens_in + reply.tokens_out,
                    },
                }),
            ),
            Ok(Err(e)) => sse::event("error", error_object(&e)),
            Err(e) => sse::event(
                "error",
                error_object(&AssistantError::Internal(anyhow::anyhow!("chat task: {e}"))),
            ),
        };
        let _ = out.send(last).await;
    });
    ReceiverStream::new(rx).map(Ok)
}
