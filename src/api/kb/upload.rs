//! `POST /upload`: one file, parsed, chunked, embedded and stored before the answer.

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::Json;
use utoipa::ToSchema;

use super::form::Form;
use crate::api::error::{ApiError, ErrorBody};
use crate::jobs::TaskAck;
use crate::kb::bulk::BulkResult;
use crate::kb::ingest::FileUpload;
use crate::kb::IngestionResult;
use crate::state::AppState;

/// The multipart form of `/upload`.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct UploadForm {
    /// The file.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// Section label stored with every chunk; default `uploaded`.
    section: Option<String>,
}

/// Uploads one file and ingests it synchronously.
#[utoipa::path(post, path = "/api/v1/upload", tag = "upload",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = IngestionResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn upload(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<IngestionResult>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let file = form.one_file("file")?;
    let section = form.text("section", "uploaded");
    let result = state
        .kb
        .ingest_file(FileUpload {
            filename: file.name,
            bytes: file.bytes,
            section,
        })
        .await?;
    Ok(Json(result))
}

/// Uploads one file and queues its ingestion; the file is saved before the task id is returned.
#[utoipa::path(post, path = "/api/v1/upload/async", tag = "upload",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = TaskAck), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn upload_async(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<TaskAck>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let file = form.one_file("file")?;
    let section = form.text("section", "uploaded");
    Ok(Json(
        state
            .jobs
            .submit_upload(file.name, file.bytes, section)
            .await?,
    ))
}

/// The multipart form of `/upload/bulk`.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct BulkForm {
    /// The files (repeat the field).
    #[schema(value_type = Vec<String>, format = Binary)]
    files: Vec<Vec<u8>>,
    /// Section label for every chunk; default `uploaded`.
    section: Option<String>,
}

/// Uploads many files and ingests each synchronously.
#[utoipa::path(post, path = "/api/v1/upload/bulk", tag = "upload",
    request_body(content = BulkForm, content_type = "multipart/form-data"),
    responses((status = 200, body = BulkResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn upload_bulk(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<BulkResult>, ApiError> {
    let form = Form::read(
        multipart,
        state.config.max_upload_bytes,
        state.config.max_bulk_files,
    )
    .await?;
    let section = form_section(&form.text("section", "uploaded"));
    let files: Vec<(String, Vec<u8>)> = form
        .files
        .into_iter()
        .filter(|(k, _)| k == "files" || k == "files[]")
        .map(|(_, f)| (f.name, f.bytes))
        .collect();
    if files.is_empty() {
        return Err(ApiError::bad_request(
            "send at least one file in the 'files' field",
        ));
    }
    Ok(Json(state.kb.ingest_many(files, section).await))
}

/// Uploads a ZIP archive; every file inside is ingested.
#[utoipa::path(post, path = "/api/v1/upload/bulk/zip", tag = "upload",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 200, body = BulkResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn upload_zip(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<BulkResult>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let file = form.one_file("file")?;
    let section = form.text("section", "uploaded");
    Ok(Json(state.kb.ingest_zip(file.bytes, section).await?))
}

fn form_section(s: &str) -> String {
    if s.trim().is_empty() {
        "uploaded".into()
    } else {
        s.trim().to_owned()
    }
}
