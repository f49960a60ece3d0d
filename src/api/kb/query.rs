//! `POST /query`: an answer from the knowledge base with its sources and timing.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiJson};
use crate::kb::query::{QueryParams, QueryResponse};
use crate::state::AppState;

fn default_top_k() -> i64 {
    5
}
fn default_initial_k() -> i64 {
    20
}
fn yes() -> bool {
    true
}

/// Question request.
#[derive(Deserialize, ToSchema)]
pub struct QueryRequest {
    pub question: String,
    /// Passages used as context, 1-20.
    #[serde(default = "default_top_k")]
    #[schema(default = 5, minimum = 1, maximum = 20)]
    pub top_k: i64,
    /// Candidates retrieved before reranking, 1-100.
    #[serde(default = "default_initial_k")]
    #[schema(default = 20, minimum = 1, maximum = 100)]
    pub initial_k: i64,
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub include_timing: bool,
    #[serde(default)]
    #[schema(default = false)]
    pub include_context: bool,
    /// LLM temperature override, 0.0-2.0.
    #[schema(minimum = 0.0, maximum = 2.0)]
    pub temperature: Option<f64>,
}

/// Answers a question from the stored documents, citing its sources.
#[utoipa::path(post, path = "/api/v1/query", tag = "query", request_body = QueryRequest,
    responses((status = 200, body = QueryResponse), (status = 400, body = ErrorBody)))]
pub async fn query(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<QueryRequest>,
) -> Result<Json<QueryResponse>, ApiError> {
    let top_k = check_range("top_k", req.top_k, 1, 20)? as usize;
    let initial_k = check_range("initial_k", req.initial_k, 1, 100)? as usize;
    let temperature = match req.temperature {
        Some(t) if !(0.0..=2.0).contains(&t) || t.is_nan() => {
            return Err(ApiError::bad_request(format!(
                "temperature must be between 0.0 and 2.0, got {t}"
            )))
        }
        t => t.map(|t| t as f32),
    };
    if req.question.trim().is_empty() {
        return Err(ApiError::bad_request("question must not be empty"));
    }
    let params = QueryParams {
        question: req.question,
        top_k,
        initial_k,
        include_timing: req.include_timing,
        include_context: req.include_context,
        temperature,
    };
    Ok(Json(state.kb.query(params).await?))
}
