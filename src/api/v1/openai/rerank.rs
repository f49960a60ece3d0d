//! `POST /v1/rerank` in the Jina/Cohere shape llama.cpp's server serves: `query`,
//! `documents`, `top_n`, results with `index` and `relevance_score` (0-1, best first)
//! and, with `return_documents`, the document echoed. Without an installed reranker the
//! route answers 404 `model_not_found` (no such model is listed by `GET /v1/models`).

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{OaiCaller, OaiJson};
use crate::api::v1::openai_error::OpenAiError;
use crate::error::Error;
use crate::state::AppState;

/// Most documents in one request.
pub const MAX_DOCUMENTS: usize = 256;

/// The request body.
#[derive(Debug, Deserialize)]
pub struct RerankRequest {
    /// The reranker's id; optional.
    pub model: Option<String>,
    /// What the documents are scored against.
    pub query: String,
    /// The documents: strings, or objects with `text`.
    pub documents: Vec<Value>,
    /// How many results to return (default: all).
    pub top_n: Option<usize>,
    /// Echo each document in its result.
    #[serde(default)]
    pub return_documents: bool,
}

/// `POST /v1/rerank`.
#[utoipa::path(
    post,
    path = "/v1/rerank",
    tag = "openai",
    operation_id = "v1_rerank",
    description = "Rerank documents for a query (the Jina/Cohere shape); 404 without a reranker.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "The response in OpenAI's shape", body = serde_json::Value),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("bearer" = [])),
)]
pub async fn rerank(
    State(state): State<AppState>,
    OaiCaller(caller): OaiCaller,
    OaiJson(req): OaiJson<RerankRequest>,
) -> Result<Json<Value>, OpenAiError> {
    let Some(reranker) = state.models.reranker.clone() else {
        return Err(
            super::model_not_found(req.model.as_deref().unwrap_or("reranker"))
                .with_message("no reranker is installed on this server (see docs/openai.md)"),
        );
    };
    if let Some(m) = req.model.as_deref().filter(|m| *m != reranker.name()) {
        return Err(super::model_not_found(m));
    }
    if req.query.trim().is_empty() {
        return Err(OpenAiError::invalid("query", "query must not be empty"));
    }
    if req.documents.is_empty() || req.documents.len() > MAX_DOCUMENTS {
        return Err(OpenAiError::invalid(
            "documents",
            format!("send 1 to {MAX_DOCUMENTS} documents"),
        ));
    }
    let texts: Vec<String> = req
        .documents
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) => o
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    OpenAiError::invalid(
                        &format!("documents[{i}]"),
                        "a document object needs 'text'",
                    )
                }),
            _ => Err(OpenAiError::invalid(
                &format!("documents[{i}]"),
                "a document is a string or {\"text\"}",
            )),
        })
        .collect::<Result<_, _>>()?;
    let scores = reranker
        .score(req.query.clone(), texts.clone())
        .await
        .map_err(|e| OpenAiError::from(Error::from(e)))?;
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    order.truncate(req.top_n.unwrap_or(order.len()));
    tracing::info!(caller = %caller.label(), documents = texts.len(), returned = order.len(), "rerank");
    let results: Vec<Value> = order
        .into_iter()
        .map(|i| {
            let mut r = json!({"index": i, "relevance_score": scores[i] as f64});
            if req.return_documents {
                r["document"] = json!({"text": texts[i]});
            }
            r
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "model": reranker.name(),
        "results": results,
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    })))
}
