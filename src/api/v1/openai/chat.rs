//! `POST /v1/chat/completions`: checks the model, maps the request onto the completion
//! core ([`chat_request`](super::chat_request)) and answers a `chat.completion`, or
//! streams chunks ([`chat_stream`](super::chat_stream)); `model: "knowledge-base"`
//! answers from the knowledge base ([`knowledge`](super::knowledge)).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::chat_request::{map, ChatRequest, ReplyKind, JSON_TOOL};
use super::models::{llm_id, unix_now};
use super::{chat_stream, knowledge, model_not_found, OaiCaller, OaiJson, KNOWLEDGE_BASE};
use crate::api::v1::openai_error::OpenAiError;
use crate::error::Error;
use crate::ml::llm::completion::{Completion, CompletionEvent};
use crate::ml::llm::generator::SharedGenerator;
use crate::ml::llm::tool_grammar::OPEN;
use crate::ml::llm::FinishReason;
use crate::state::AppState;

/// A tool call of the reply.
#[derive(Debug, Clone)]
pub struct OutCall {
    /// Its id (`call_` and nine characters).
    pub id: String,
    /// The function.
    pub name: String,
    /// Its arguments as JSON text.
    pub arguments: String,
}

impl OutCall {
    /// OpenAI's `tool_calls` entry; `index` is given in streamed deltas.
    pub fn to_json(&self, index: Option<usize>) -> Value {
        let mut v = json!({"id": self.id, "type": "function",
            "function": {"name": self.name, "arguments": self.arguments}});
        if let Some(i) = index {
            v["index"] = json!(i);
        }
        v
    }
}

/// A fresh tool-call id.
pub fn call_id() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &u[..24])
}

/// A fresh completion id.
pub fn completion_id() -> String {
    format!("chatcmpl-{}", uuid::Uuid::new_v4().simple())
}

/// OpenAI's `usage`.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion})
}

/// The `finish_reason` of a generation.
pub fn finish_reason(reason: FinishReason, calls: bool) -> &'static str {
    if calls {
        return "tool_calls";
    }
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop | FinishReason::StopSequence(_) | FinishReason::Cancelled => "stop",
    }
}

/// The text of a JSON reply: the hidden call's arguments, or what the model wrote of them
/// when it was cut short.
pub fn json_reply(completion: &Completion, call: Option<&Value>) -> String {
    if let Some(args) = call {
        return args.to_string();
    }
    let out = completion.output();
    let prefix = format!("{OPEN}{{\"name\": \"{JSON_TOOL}\", \"arguments\": ");
    out.strip_prefix(&prefix).unwrap_or(out).to_owned()
}

/// The LLM for `model`, or the error OpenAI's clients expect.
pub fn chat_model(state: &AppState, model: &str) -> Result<SharedGenerator, OpenAiError> {
    let id = llm_id(state);
    if id.as_deref() == Some(model) {
        if let Some(llm) = state.models.llm.current() {
            return Ok(llm);
        }
    }
    if model == state.models.embedder.name()
        || state
            .models
            .reranker
            .as_ref()
            .is_some_and(|r| r.name() == model)
    {
        return Err(OpenAiError::invalid(
            "model",
            format!("'{model}' is not a chat model; use it with /v1/embeddings or /v1/rerank"),
        ));
    }
    if id.is_none() {
        let why = state
            .models
            .llm
            .failure()
            .unwrap_or_else(|| "no LLM is installed".into());
        return Err(OpenAiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no language model is loaded ({why}); model 'knowledge-base' still answers extractively"),
        )
        .with_code("model_not_loaded"));
    }
    Err(model_not_found(model))
}

/// `POST /v1/chat/completions`.
#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "openai",
    operation_id = "v1_chat_completions",
    description = "OpenAI chat completions: messages, stream, tools and tool_choice, response_format (json_object, json_schema), stop, seed, max_tokens; `model: knowledge-base` answers from the knowledge base with citations. See docs/openai.md.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "The response in OpenAI's shape", body = serde_json::Value),
        (status = 200, description = "With `stream: true`: server-sent events", content_type = "text/event-stream"),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("bearer" = [])),
)]
pub async fn completions(
    State(state): State<AppState>,
    OaiCaller(caller): OaiCaller,
    OaiJson(req): OaiJson<ChatRequest>,
) -> Result<Response, OpenAiError> {
    tracing::info!(caller = %caller.label(), model = %req.model, stream = req.stream,
        messages = req.messages.len(), tools = req.tools.as_ref().map_or(0, Vec::len), "chat completion");
    if req.model == KNOWLEDGE_BASE {
        return knowledge::answer(state, req).await;
    }
    let llm = chat_model(&state, &req.model)?;
    let mapped = map(&req)?;
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let completion = Completion::start(llm, mapped.completion)
        .await
        .map_err(|e| OpenAiError::from(Error::from(e)))?;
    if req.stream {
        return Ok(
            chat_stream::respond(completion, mapped.reply, req.model, include_usage)
                .into_response(),
        );
    }
    whole(completion, mapped.reply, &req.model).await
}

/// Runs `completion` to its end and answers one `chat.completion`.
async fn whole(
    mut completion: Completion,
    reply: ReplyKind,
    model: &str,
) -> Result<Response, OpenAiError> {
    let mut calls = Vec::new();
    let mut json_args = None;
    while let Some(event) = completion
        .next()
        .await
        .map_err(|e| OpenAiError::from(Error::from(e)))?
    {
        match event {
            CompletionEvent::Text(_) => {}
            CompletionEvent::Call(Ok(c)) if reply == ReplyKind::Json => {
                json_args.get_or_insert(c.arguments);
            }
            CompletionEvent::Call(Ok(c)) => calls.push(OutCall {
                id: call_id(),
                name: c.name,
                arguments: c.arguments.to_string(),
            }),
            CompletionEvent::Call(Err(e)) => {
                tracing::warn!(error = %e, "the model's tool call did not parse; left out")
            }
        }
    }
    let done = completion.finished();
    let content = match reply {
        ReplyKind::Json => json_reply(&completion, json_args.as_ref()),
        ReplyKind::Text => completion.text().to_owned(),
    };
    let mut message = json!({"role": "assistant", "content": content, "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = calls.iter().map(|c| c.to_json(None)).collect();
        if content.is_empty() {
            message["content"] = Value::Null;
        }
    }
    let finish = finish_reason(done.finish_reason, !calls.is_empty());
    tracing::info!(
        prompt_tokens = done.prompt_tokens,
        completion_tokens = done.completion_tokens,
        finish,
        tool_calls = calls.len(),
        "chat completion done"
    );
    Ok(Json(json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": usage(done.prompt_tokens, done.completion_tokens),
    }))
    .into_response())
}
