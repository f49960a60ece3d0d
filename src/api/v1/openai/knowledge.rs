//! The `knowledge-base` model: the last user message is answered as `/api/v1/query`
//! answers it (retrieval, grounding, `[n]` citations), the text followed by a "Sources:"
//! list; the sources also come as the extension field `sources` (top level of the
//! response, and on the final stream chunk), beside `answer_mode` and a brief `grounding`
//! (where the answer's sentences come from). Streamed, the answer's pieces are content
//! deltas as `/query` sends them: sentences quoted from the sources first, then the
//! LLM's checked sentences. Usage counts the question and the answer
//! in the LLM's tokens (the retrieved context is not counted).

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::chat::{completion_id, usage};
use super::chat_request::{messages, params, ChatRequest};
use super::chat_stream::{data, done, error_event, sse, Chunks};
use super::models::unix_now;
use crate::api::v1::openai_error::OpenAiError;
use crate::kb::answer::AnswerPiece;
use crate::kb::query::{QueryParams, QueryResponse, QuerySource};
use crate::ml::llm::Role;
use crate::state::AppState;

/// Passages the answer is drawn from.
const TOP_K: usize = 5;
/// Candidates before reranking.
const INITIAL_K: usize = 20;

/// The "Sources:" list appended to the answer.
pub fn sources_text(sources: &[QuerySource]) -> String {
    if sources.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\nSources:");
    for (i, s) in sources.iter().enumerate() {
        let title = if s.title.is_empty() {
            &s.source
        } else {
            &s.title
        };
        out.push_str(&format!("\n[{}] {} ({})", i + 1, title, s.source));
    }
    out
}

fn sources_json(sources: &[QuerySource]) -> Value {
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"index": i + 1, "title": s.title, "source": s.source, "section": s.section,
                "doc_id": s.doc_id, "score": s.score as f64})
        })
        .collect()
}

/// What was checked of the answer, in brief: where its sentences come from, with the
/// counts (`/api/v1/query` has the per-sentence record).
fn grounding_json(resp: &QueryResponse) -> Value {
    let g = &resp.grounding;
    json!({"outcome": g.outcome, "generated_sentences": g.generated_sentences,
        "extractive_sentences": g.extractive_sentences, "repeated": g.repeated,
        "supported": g.supported, "unsupported": g.unsupported, "off_topic": g.off_topic,
        "answerable": g.answerable})
}

/// Tokens of `question` and `answer` (the LLM's tokenizer, else the embedder's).
async fn count(state: &AppState, question: String, answer: String) -> (usize, usize) {
    let llm = state.models.llm.current();
    let embedder = state.models.embedder.token_counter().clone();
    tokio::task::spawn_blocking(move || match llm {
        Some(l) => (l.count_tokens(&question), l.count_tokens(&answer)),
        None => (embedder.count(&question), embedder.count(&answer)),
    })
    .await
    .unwrap_or((0, 0))
}

/// Answers `req` (whose model is `knowledge-base`).
pub async fn answer(state: AppState, req: ChatRequest) -> Result<Response, OpenAiError> {
    let p = params(&req)?;
    let (_, conversation) = messages(&req.messages)?;
    let question = conversation
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.trim().to_owned())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| {
            OpenAiError::invalid("messages", "knowledge-base needs a non-empty user message")
        })?;
    let query = QueryParams {
        question: question.clone(),
        top_k: TOP_K,
        initial_k: INITIAL_K,
        include_timing: false,
        include_context: false,
        temperature: req.temperature.map(|_| p.temperature),
    };
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    if req.stream {
        state.kb.ensure_searchable().map_err(OpenAiError::from)?;
        return Ok(stream(state, query, Chunks::new(req.model, include_usage)).into_response());
    }
    let resp: QueryResponse = state.kb.query(query).await.map_err(OpenAiError::from)?;
    let content = format!("{}{}", resp.answer, sources_text(&resp.sources));
    let (prompt, completion) = count(&state, question, resp.answer.clone()).await;
    tracing::info!(sources = resp.sources.len(), mode = %resp.answer_mode, "knowledge-base answer");
    Ok(Json(json!({
        "id": completion_id(),
        "object": "chat.completion",
        "created": unix_now(),
        "model": req.model,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
            "message": {"role": "assistant", "content": content, "refusal": null}}],
        "usage": usage(prompt, completion),
        "sources": sources_json(&resp.sources),
        "answer_mode": resp.answer_mode,
        "grounding": grounding_json(&resp),
    }))
    .into_response())
}

/// Streams the answer's pieces as content deltas; the sources follow as a last delta and
/// on the final chunk.
fn stream(state: AppState, query: QueryParams, chunks: Chunks) -> impl IntoResponse {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let question = query.question.clone();
        let (pieces_tx, mut pieces) = mpsc::channel::<AnswerPiece>(64);
        let kb = state.kb.clone();
        let answering =
            tokio::spawn(async move { kb.query_streaming(query, Some(&pieces_tx)).await });
        if tx
            .send(data(
                &chunks.delta(json!({"role": "assistant", "content": ""}), None),
            ))
            .await
            .is_err()
        {
            answering.abort();
            return;
        }
        while let Some(piece) = pieces.recv().await {
            if tx
                .send(data(&chunks.delta(json!({"content": piece.text}), None)))
                .await
                .is_err()
            {
                tracing::info!("the client left a knowledge-base stream; generation stopped");
                drop(pieces);
                answering.abort();
                return;
            }
        }
        let resp = match answering.await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let _ = tx.send(error_event(OpenAiError::from(e))).await;
                let _ = tx.send(done()).await;
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "knowledge-base answer task failed");
                let _ = tx.send(done()).await;
                return;
            }
        };
        let (prompt, completion) = count(&state, question, resp.answer.clone()).await;
        let tail = sources_text(&resp.sources);
        let mut last = chunks.delta(json!({}), Some("stop"));
        last["sources"] = sources_json(&resp.sources);
        last["answer_mode"] = json!(resp.answer_mode);
        last["grounding"] = grounding_json(&resp);
        let mut events = Vec::new();
        if !tail.is_empty() {
            events.push(data(&chunks.delta(json!({"content": tail}), None)));
        }
        events.push(data(&last));
        if let Some(u) = chunks.usage(prompt, completion) {
            events.push(data(&u));
        }
        events.push(done());
        for e in events {
            if tx.send(e).await.is_err() {
                return;
            }
        }
    });
    sse(rx)
}
