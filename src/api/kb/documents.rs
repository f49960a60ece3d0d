//! `GET /documents` and `GET /documents/{doc_id}`.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiJson, ApiPath, ApiQuery};
use crate::kb::documents::{BatchDelete, DeleteOutcome, DocumentStats};
use crate::kb::filter::MetadataFilter;
use crate::kb::{Document, DocumentPage};
use crate::state::AppState;

/// Paging of `GET /documents`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page number, at least 1.
    #[param(default = 1, minimum = 1)]
    pub page: Option<i64>,
    /// Documents per page, 1-100.
    #[param(default = 20, minimum = 1, maximum = 100)]
    pub page_size: Option<i64>,
}

/// A page of stored documents (chunks) in ingestion order.
#[utoipa::path(get, path = "/api/v1/documents", tag = "documents", params(ListQuery),
    responses((status = 200, body = DocumentPage), (status = 400, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<DocumentPage>, ApiError> {
    let page = check_range("page", q.page.unwrap_or(1), 1, i64::MAX)? as u64;
    let page_size = check_range("page_size", q.page_size.unwrap_or(20), 1, 100)? as u64;
    Ok(Json(state.kb.documents(page, page_size).await?))
}

/// One stored document.
#[utoipa::path(get, path = "/api/v1/documents/{doc_id}", tag = "documents",
    params(("doc_id" = String, Path, description = "document (chunk) id")),
    responses((status = 200, body = Document), (status = 404, body = ErrorBody)))]
pub async fn get_one(
    State(state): State<AppState>,
    ApiPath(doc_id): ApiPath<String>,
) -> Result<Json<Document>, ApiError> {
    Ok(Json(state.kb.document(doc_id).await?))
}

/// Result of `DELETE /documents/{doc_id}`.
#[utoipa::path(delete, path = "/api/v1/documents/{doc_id}", tag = "documents",
    params(("doc_id" = String, Path, description = "document (chunk) id")),
    responses((status = 200, body = DeleteOutcome)))]
pub async fn delete_one(
    State(state): State<AppState>,
    ApiPath(doc_id): ApiPath<String>,
) -> Result<Json<DeleteOutcome>, ApiError> {
    Ok(Json(state.kb.delete_document(doc_id).await?))
}

/// Body of `POST /documents/delete`.
#[derive(Deserialize, ToSchema)]
pub struct BatchRequest {
    pub doc_ids: Vec<String>,
}

/// Most ids in one batch delete.
const MAX_BATCH: usize = 1000;

/// Deletes several documents; unknown ids count as skipped.
#[utoipa::path(post, path = "/api/v1/documents/delete", tag = "documents", request_body = BatchRequest,
    responses((status = 200, body = BatchDelete), (status = 400, body = ErrorBody)))]
pub async fn delete_batch(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<BatchRequest>,
) -> Result<Json<BatchDelete>, ApiError> {
    if req.doc_ids.len() > MAX_BATCH {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_BATCH} doc_ids per request"
        )));
    }
    Ok(Json(state.kb.delete_documents(req.doc_ids).await?))
}

/// Body of `POST /documents/delete/by-source`.
#[derive(Deserialize, ToSchema)]
pub struct BySourceRequest {
    /// The source (file name or URL) whose documents are deleted.
    pub source: String,
}

/// Result of `POST /documents/delete/by-source`.
#[derive(Serialize, ToSchema)]
pub struct BySourceResult {
    pub source: String,
    pub deleted: u64,
}

/// Deletes every document of one source.
#[utoipa::path(post, path = "/api/v1/documents/delete/by-source", tag = "documents", request_body = BySourceRequest,
    responses((status = 200, body = BySourceResult), (status = 400, body = ErrorBody)))]
pub async fn delete_by_source(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<BySourceRequest>,
) -> Result<Json<BySourceResult>, ApiError> {
    if req.source.trim().is_empty() {
        return Err(ApiError::bad_request("source must not be empty"));
    }
    let deleted = state.kb.delete_source(req.source.clone()).await?;
    Ok(Json(BySourceResult {
        source: req.source,
        deleted,
    }))
}

/// Body of `POST /documents/delete/by-filter`.
#[derive(Deserialize, ToSchema)]
pub struct ByFilterRequest {
    /// Metadata key to value; several keys are AND-ed; a value may be
    /// `{"$in": [..]}` or `{"$ne": v}`. Empty is refused.
    #[serde(rename = "where")]
    #[schema(value_type = Object)]
    pub filter: Map<String, Value>,
}

/// Result of `POST /documents/delete/by-filter`.
#[derive(Serialize, ToSchema)]
pub struct ByFilterResult {
    #[serde(rename = "where")]
    #[schema(value_type = Object)]
    pub filter: Map<String, Value>,
    pub deleted: u64,
}

/// Deletes every document whose metadata matches the filter.
#[utoipa::path(post, path = "/api/v1/documents/delete/by-filter", tag = "documents", request_body = ByFilterRequest,
    responses((status = 200, body = ByFilterResult), (status = 400, body = ErrorBody)))]
pub async fn delete_by_filter(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ByFilterRequest>,
) -> Result<Json<ByFilterResult>, ApiError> {
    let filter = MetadataFilter::parse(&req.filter, "where")?;
    let deleted = state.kb.delete_by_filter(filter).await?;
    Ok(Json(ByFilterResult {
        filter: req.filter,
        deleted,
    }))
}

/// Unique sources.
#[derive(Serialize, ToSchema)]
pub struct Sources {
    pub sources: Vec<String>,
    pub count: usize,
}

/// Every stored source.
#[utoipa::path(get, path = "/api/v1/documents/sources", tag = "documents", responses((status = 200, body = Sources)))]
pub async fn sources(State(state): State<AppState>) -> Result<Json<Sources>, ApiError> {
    let sources = state.kb.sources().await?;
    Ok(Json(Sources {
        count: sources.len(),
        sources,
    }))
}

/// Document counts by source and language.
#[utoipa::path(get, path = "/api/v1/documents/stats", tag = "documents", responses((status = 200, body = DocumentStats)))]
pub async fn stats(State(state): State<AppState>) -> Result<Json<DocumentStats>, ApiError> {
    Ok(Json(state.kb.document_stats().await?))
}
