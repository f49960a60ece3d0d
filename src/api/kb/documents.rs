//! `GET /documents` and `GET /documents/{doc_id}`.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiQuery};
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
    Path(doc_id): Path<String>,
) -> Result<Json<Document>, ApiError> {
    Ok(Json(state.kb.document(doc_id).await?))
}
