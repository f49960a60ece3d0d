//! `POST /upload`: one file, parsed, chunked, embedded and stored before the answer.

use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use axum::Json;
use utoipa::ToSchema;

use crate::api::error::{ApiError, ErrorBody};
use crate::kb::ingest::FileUpload;
use crate::kb::IngestionResult;
use crate::state::AppState;

/// The multipart form of `/upload`.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct UploadForm {
    /// The file (`.txt`, `.md`, `.markdown`).
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
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<IngestionResult>, ApiError> {
    let mut multipart = multipart.map_err(|e| {
        ApiError::bad_request(format!(
            "expected a multipart/form-data body: {}",
            e.body_text()
        ))
    })?;
    let limit = state.config.max_upload_bytes;
    let mut file: Option<(String, Vec<u8>)> = None;
    let mut section = String::from("uploaded");
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file") => {
                let name = field.file_name().unwrap_or_default().to_owned();
                if file.is_some() {
                    return Err(ApiError::bad_request(
                        "send exactly one 'file' field (use /upload/bulk for many)",
                    ));
                }
                file = Some((name, read_limited(field, limit).await?));
            }
            Some("section") => section = field.text().await.map_err(multipart_error)?,
            _ => {}
        }
    }
    let (filename, bytes) =
        file.ok_or_else(|| ApiError::bad_request("missing form field 'file'"))?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request(format!("'{filename}' is empty")));
    }
    let result = state
        .kb
        .ingest_file(FileUpload {
            filename,
            bytes,
            section,
        })
        .await?;
    Ok(Json(result))
}

/// Reads a file field, refusing it with 413 as soon as it passes `limit` bytes.
pub async fn read_limited(mut field: Field<'_>, limit: u64) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if out.len() as u64 + chunk.len() as u64 > limit {
            return Err(too_large(limit));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the upload exceeds the limit of {limit} bytes"),
    )
}

fn multipart_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the upload exceeds the size limit",
        );
    }
    ApiError::bad_request(format!("malformed multipart body: {}", e.body_text()))
}
