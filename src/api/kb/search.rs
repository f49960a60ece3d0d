//! `POST /search`: dense semantic search.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiJson};
use crate::kb::search::SearchParams;
use crate::kb::SearchResponse;
use crate::state::AppState;

fn default_top_k() -> i64 {
    5
}
fn default_initial_k() -> i64 {
    20
}

/// Search request.
#[derive(Deserialize, ToSchema)]
pub struct SearchRequest {
    pub query: String,
    /// Results returned, 1-50.
    #[serde(default = "default_top_k")]
    #[schema(default = 5, minimum = 1, maximum = 50)]
    pub top_k: i64,
    /// Candidates retrieved before ranking, 1-100 (at least `top_k` are always taken).
    #[serde(default = "default_initial_k")]
    #[schema(default = 20, minimum = 1, maximum = 100)]
    pub initial_k: i64,
}

/// Semantic search over stored chunks; scores are cosine similarities (higher is better).
#[utoipa::path(post, path = "/api/v1/search", tag = "search", request_body = SearchRequest,
    responses((status = 200, body = SearchResponse), (status = 400, body = ErrorBody),
        (status = 429, description = "Overloaded; retry after `Retry-After` seconds", body = ErrorBody),
        (status = 503, description = "The stored vectors were made by another embedder: run `ragd reindex` or POST /api/v1/reindex", body = ErrorBody)))]
pub async fn search(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<SearchRequest>,
) -> Result<Json<SearchResponse>, ApiError> {
    let top_k = check_range("top_k", req.top_k, 1, 50)? as usize;
    let initial_k = check_range("initial_k", req.initial_k, 1, 100)? as usize;
    let out = state
        .kb
        .search(SearchParams {
            query: req.query,
            top_k,
            initial_k,
            mode: Default::default(),
        })
        .await?;
    Ok(Json(out))
}
