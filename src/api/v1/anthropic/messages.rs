//! `POST /v1/messages`: checks the model, maps the request onto the completion core
//! ([`request`](super::request)) and answers a `message`, or streams Anthropic's events
//! ([`stream`](super::stream)); `POST /v1/messages/count_tokens` counts the same prompt
//! without generating.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::request::{map, MessagesRequest};
use super::{stream, AnthCaller, AnthJson, AnthropicError};
use crate::api::v1::openai::chat::chat_model;
use crate::error::Error;
use crate::ml::llm::completion::{Completion, CompletionEvent};
use crate::ml::llm::generator::SharedGenerator;
use crate::ml::llm::FinishReason;
use crate::state::AppState;

/// A fresh message id.
pub fn message_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// A fresh `tool_use` id.
pub fn tool_use_id() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("toolu_{}", &u[..24])
}

/// `stop_reason` and `stop_sequence` of a generation.
pub fn stop_reason(
    reason: FinishReason,
    calls: bool,
    stops: &[String],
) -> (&'static str, Option<String>) {
    if calls {
        return ("tool_use", None);
    }
    match reason {
        FinishReason::StopSequence(i) => ("stop_sequence", stops.get(i).cloned()),
        FinishReason::Length => ("max_tokens", None),
        FinishReason::Stop | FinishReason::Cancelled => ("end_turn", None),
    }
}

/// A `tool_use` content block.
pub fn tool_use(id: &str, name: &str, input: &Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// The LLM for `model`, in Anthropic's error shape.
fn model(state: &AppState, model: &str) -> Result<SharedGenerator, AnthropicError> {
    chat_model(state, model).map_err(AnthropicError::from)
}

/// `POST /v1/messages`.
#[utoipa::path(
    post,
    path = "/v1/messages",
    tag = "anthropic",
    operation_id = "v1_messages",
    description = "Anthropic's Messages API: system, messages with text, tool_use and tool_result blocks, max_tokens, stop_sequences, tools and tool_choice, stream (Anthropic's event sequence). Errors in Anthropic's shape. See docs/openai.md.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "The message in Anthropic's shape", body = serde_json::Value),
        (status = 200, description = "With `stream: true`: server-sent events", content_type = "text/event-stream"),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("x_api_key" = []), ("bearer" = [])),
)]
pub async fn create(
    State(state): State<AppState>,
    AnthCaller(caller): AnthCaller,
    AnthJson(req): AnthJson<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    tracing::info!(caller = %caller.label(), model = %req.model, stream = req.stream,
        messages = req.messages.len(), tools = req.tools.as_ref().map_or(0, Vec::len), "messages");
    let max_tokens = req
        .max_tokens
        .ok_or_else(|| AnthropicError::invalid("max_tokens: Field required"))?;
    let completion = map(&req, max_tokens)?;
    let llm = model(&state, &req.model)?;
    let stops = completion.params.stop.clone();
    let running = Completion::start(llm, completion)
        .await
        .map_err(|e| AnthropicError::from(Error::from(e)))?;
    if req.stream {
        return Ok(stream::respond(running, req.model, stops).into_response());
    }
    whole(running, &req.model, &stops).await
}

/// Runs `completion` to its end and answers one `message`.
async fn whole(
    mut completion: Completion,
    model: &str,
    stops: &[String],
) -> Result<Response, AnthropicError> {
    let mut calls = Vec::new();
    while let Some(event) = completion
        .next()
        .await
        .map_err(|e| AnthropicError::from(Error::from(e)))?
    {
        match event {
            CompletionEvent::Text(_) => {}
            CompletionEvent::Call(Ok(c)) => {
                calls.push(tool_use(&tool_use_id(), &c.name, &c.arguments))
            }
            CompletionEvent::Call(Err(e)) => {
                tracing::warn!(error = %e, "the model's tool call did not parse; left out")
            }
        }
    }
    let done = completion.finished();
    let mut content = Vec::new();
    if !completion.text().is_empty() || calls.is_empty() {
        content.push(json!({"type": "text", "text": completion.text()}));
    }
    let (reason, sequence) = stop_reason(done.finish_reason, !calls.is_empty(), stops);
    content.extend(calls);
    tracing::info!(
        prompt_tokens = done.prompt_tokens,
        completion_tokens = done.completion_tokens,
        stop_reason = reason,
        "messages done"
    );
    Ok(Json(json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": {"input_tokens": done.prompt_tokens, "output_tokens": done.completion_tokens},
    }))
    .into_response())
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens"}` of the prompt the request would
/// give the model (system, messages, tools), as the model's template lays it out.
#[utoipa::path(
    post,
    path = "/v1/messages/count_tokens",
    tag = "anthropic",
    operation_id = "v1_messages_count_tokens",
    description = "The prompt tokens a Messages request would take: `{input_tokens}`.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "`{input_tokens}`", body = serde_json::Value),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("x_api_key" = []), ("bearer" = [])),
)]
pub async fn count_tokens(
    State(state): State<AppState>,
    AnthCaller(caller): AnthCaller,
    AnthJson(req): AnthJson<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    let completion = map(&req, 1)?;
    let llm = model(&state, &req.model)?;
    let tokens = Completion::count(llm, completion)
        .await
        .map_err(|e| AnthropicError::from(Error::from(e)))?;
    tracing::info!(caller = %caller.label(), model = %req.model, tokens, "count_tokens");
    Ok(Json(json!({"input_tokens": tokens})).into_response())
}
