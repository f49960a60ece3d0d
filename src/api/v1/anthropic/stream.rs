//! Streamed messages, in Anthropic's event sequence: `message_start`, `ping`, for each
//! content block `content_block_start`, its deltas (`text_delta`, or one
//! `input_json_delta` with a tool call's whole input) and `content_block_stop`, then
//! `message_delta` (stop reason and usage) and `message_stop`. An error after the start
//! is an `error` event. When the client goes away the channel closes, the completion is
//! dropped and the model stops.

use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use futures::Stream;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::messages::{message_id, stop_reason, tool_use, tool_use_id};
use super::AnthropicError;
use crate::api::v1::openai::chat_stream::sse;
use crate::error::Error;
use crate::ml::llm::completion::{Completion, CompletionEvent};

/// One named event.
fn event(name: &str, data: Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// Streams `completion` as Anthropic's events.
pub fn respond(
    completion: Completion,
    model: String,
    stops: Vec<String>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        if run(completion, &model, &stops, &tx).await.is_err() {
            tracing::info!("the client left a messages stream; generation stopped");
        }
    });
    sse(rx)
}

/// Sends the events; `Err` when the client has gone.
async fn run(
    mut completion: Completion,
    model: &str,
    stops: &[String],
    tx: &mpsc::Sender<Event>,
) -> Result<(), mpsc::error::SendError<Event>> {
    let start = json!({"type": "message_start", "message": {
        "id": message_id(), "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": completion.prompt_tokens(), "output_tokens": 0}}});
    tx.send(event("message_start", start)).await?;
    tx.send(event("ping", json!({"type": "ping"}))).await?;
    // The index of the next block, and whether a text block is open.
    let mut index = 0usize;
    let mut text_open = false;
    let mut calls = 0usize;
    loop {
        let next = match completion.next().await {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                let e = AnthropicError::from(Error::from(e));
                tracing::warn!(message = %e.message, "messages stream failed");
                return tx.send(event("error", e.body())).await;
            }
        };
        match next {
            CompletionEvent::Text(t) => {
                if !text_open {
                    tx.send(event(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                    ))
                    .await?;
                    text_open = true;
                }
                tx.send(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": t}}),
                ))
                .await?;
            }
            CompletionEvent::Call(Ok(c)) => {
                if text_open {
                    tx.send(stop_block(index)).await?;
                    text_open = false;
                    index += 1;
                }
                let block = tool_use(&tool_use_id(), &c.name, &json!({}));
                tx.send(event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": block}),
                ))
                .await?;
                tx.send(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": c.arguments.to_string()}}),
                ))
                .await?;
                tx.send(stop_block(index)).await?;
                index += 1;
                calls += 1;
            }
            CompletionEvent::Call(Err(e)) => {
                tracing::warn!(error = %e, "the model's tool call did not parse; left out")
            }
        }
    }
    if text_open {
        tx.send(stop_block(index)).await?;
    }
    let done = completion.finished();
    let (reason, sequence) = stop_reason(done.finish_reason, calls > 0, stops);
    tracing::info!(
        prompt_tokens = done.prompt_tokens,
        completion_tokens = done.completion_tokens,
        stop_reason = reason,
        "messages stream done"
    );
    tx.send(event(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": sequence},
            "usage": {"input_tokens": done.prompt_tokens, "output_tokens": done.completion_tokens}}),
    ))
    .await?;
    tx.send(event("message_stop", json!({"type": "message_stop"})))
        .await
}

fn stop_block(index: usize) -> Event {
    event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}
