//! Streamed chat completions: `chat.completion.chunk`s as `data:` events ending with
//! `data: [DONE]`. Text streams as it is generated; each tool call comes as a delta with
//! its id, type, name and empty arguments, then one with the arguments, as OpenAI
//! streams them. When the client goes away the channel closes, the completion is
//! dropped and the model stops.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::chat::{call_id, completion_id, finish_reason, json_reply, usage, OutCall};
use super::chat_request::ReplyKind;
use super::models::unix_now;
use crate::api::v1::openai_error::OpenAiError;
use crate::error::Error;
use crate::ml::llm::completion::{Completion, CompletionEvent};

/// Writes chunks with one id, time and model.
#[derive(Clone)]
pub struct Chunks {
    id: String,
    created: i64,
    model: String,
    include_usage: bool,
}

impl Chunks {
    /// Chunks of one completion of `model`.
    pub fn new(model: String, include_usage: bool) -> Self {
        Self {
            id: completion_id(),
            created: unix_now(),
            model,
            include_usage,
        }
    }

    /// A chunk with this delta and finish reason.
    pub fn delta(&self, delta: Value, finish: Option<&str>) -> Value {
        let mut v = json!({"id": self.id, "object": "chat.completion.chunk",
            "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]});
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    /// The usage chunk (no choices), sent when `stream_options.include_usage` asks.
    pub fn usage(&self, prompt: usize, completion: usize) -> Option<Value> {
        self.include_usage.then(|| {
            json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "choices": [], "usage": usage(prompt, completion)})
        })
    }
}

/// One `data:` event.
pub fn data(v: &Value) -> Event {
    Event::default().data(v.to_string())
}

/// The end of every stream.
pub fn done() -> Event {
    Event::default().data("[DONE]")
}

/// An SSE response over `rx`, with keep-alive comments.
pub fn sse(rx: mpsc::Receiver<Event>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(ReceiverStream::new(rx).map(Ok))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// An error inside a stream that has begun, in OpenAI's shape.
pub fn error_event(e: OpenAiError) -> Event {
    tracing::warn!(message = %e.message, "chat stream failed");
    data(
        &json!({"error": {"message": e.message, "type": e.kind(), "param": e.param, "code": e.code}}),
    )
}

/// Streams `completion` as chunks.
pub fn respond(
    completion: Completion,
    reply: ReplyKind,
    model: String,
    include_usage: bool,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::channel::<Event>(64);
    let chunks = Chunks::new(model, include_usage);
    tokio::spawn(async move {
        if run(completion, reply, &chunks, &tx).await.is_err() {
            tracing::info!("the client left a chat stream; generation stopped");
        }
    });
    sse(rx)
}

/// Sends the chunks; `Err` when the client has gone.
async fn run(
    mut completion: Completion,
    reply: ReplyKind,
    chunks: &Chunks,
    tx: &mpsc::Sender<Event>,
) -> Result<(), mpsc::error::SendError<Event>> {
    tx.send(data(
        &chunks.delta(json!({"role": "assistant", "content": ""}), None),
    ))
    .await?;
    let mut calls = 0usize;
    let mut json_args = None;
    loop {
        let event = match completion.next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                tx.send(error_event(OpenAiError::from(Error::from(e))))
                    .await?;
                return tx.send(done()).await;
            }
        };
        match event {
            CompletionEvent::Text(t) if reply == ReplyKind::Text => {
                tx.send(data(&chunks.delta(json!({"content": t}), None)))
                    .await?;
            }
            CompletionEvent::Text(_) => {}
            CompletionEvent::Call(Ok(c)) if reply == ReplyKind::Json => {
                json_args.get_or_insert(c.arguments);
            }
            CompletionEvent::Call(Ok(c)) => {
                let call = OutCall {
                    id: call_id(),
                    name: c.name,
                    arguments: String::new(),
                };
                tx.send(data(&chunks.delta(
                    json!({"tool_calls": [call.to_json(Some(calls))]}),
                    None,
                )))
                .await?;
                let args = json!({"tool_calls": [{"index": calls,
                    "function": {"arguments": c.arguments.to_string()}}]});
                tx.send(data(&chunks.delta(args, None))).await?;
                calls += 1;
            }
            CompletionEvent::Call(Err(e)) => {
                tracing::warn!(error = %e, "the model's tool call did not parse; left out")
            }
        }
    }
    if reply == ReplyKind::Json {
        let text = json_reply(&completion, json_args.as_ref());
        tx.send(data(&chunks.delta(json!({"content": text}), None)))
            .await?;
    }
    let fin = completion.finished();
    let finish = finish_reason(fin.finish_reason, calls > 0);
    tracing::info!(
        prompt_tokens = fin.prompt_tokens,
        completion_tokens = fin.completion_tokens,
        finish,
        tool_calls = calls,
        "chat stream done"
    );
    tx.send(data(&chunks.delta(json!({}), Some(finish))))
        .await?;
    if let Some(u) = chunks.usage(fin.prompt_tokens, fin.completion_tokens) {
        tx.send(data(&u)).await?;
    }
    tx.send(done()).await
}
