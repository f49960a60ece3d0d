//! `/parse`, `/parse/formats`, `/parse/sections` and the two SSE variants. Nothing is
//! stored.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::response::sse::{Event, Sse};
use axum::Json;
use futures::Stream;
use serde::Serialize;
use serde_json::json;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use utoipa::ToSchema;

use super::form::Form;
use crate::api::error::{ApiError, ErrorBody};
use crate::api::sse;
use crate::chunk::sections::{ChunkMode, Sizes};
use crate::kb::parsing::{ParseEvent, ParseJob, ParseResult, SectionsResult};
use crate::parse::clean::CleanOptions;
use crate::parse::{TableMode, FORMATS};
use crate::state::AppState;

/// Bounds on chunk sizes, in words.
const MAX_TARGET_WORDS: i64 = 10_000;
const MAX_CHUNK_WORDS: i64 = 20_000;

/// The multipart form of `/parse` (all fields but `file` optional).
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct ParseForm {
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    #[schema(default = true)]
    include_tables: Option<bool>,
    #[schema(default = true)]
    include_images: Option<bool>,
    #[schema(default = false)]
    enable_ocr: Option<bool>,
    #[schema(default = true)]
    enable_image_description: Option<bool>,
    /// `fast` or `accurate`.
    #[schema(default = "fast")]
    table_mode: Option<String>,
    #[schema(default = true)]
    remove_urls: Option<bool>,
    #[schema(default = true)]
    normalize_arabic: Option<bool>,
    #[schema(default = true)]
    summarize_llm_ready: Option<bool>,
}

/// The multipart form of `/parse/sections`.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct SectionsForm {
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    #[schema(default = false)]
    enable_ocr: Option<bool>,
    #[schema(default = true)]
    enable_picture_description: Option<bool>,
    #[schema(default = "fast")]
    table_mode: Option<String>,
    #[schema(default = true)]
    remove_urls: Option<bool>,
    #[schema(default = true)]
    normalize_arabic: Option<bool>,
    /// `auto`, `semantic`, `page`, `paragraph` or `disabled`.
    #[schema(default = "auto")]
    chunking_mode: Option<String>,
    #[schema(default = 500, minimum = 1, maximum = 10000)]
    target_chunk_words: Option<i64>,
    #[schema(default = 1500, minimum = 1, maximum = 20000)]
    max_chunk_words: Option<i64>,
    #[schema(default = false)]
    include_full_text: Option<bool>,
}

/// Supported formats.
#[derive(Serialize, ToSchema)]
pub struct Formats {
    pub formats: Vec<String>,
    pub descriptions: BTreeMap<String, String>,
}

/// The file and the parse options every /parse form shares.
fn job(form: &mut Form, describe_key: &str, with_options: bool) -> Result<ParseJob, ApiError> {
    let file = form.one_file("file")?;
    let table_mode = if with_options {
        form.choice("table_mode", "fast", &["fast", "accurate"])?
    } else {
        "fast".into()
    };
    Ok(ParseJob {
        filename: file.name,
        bytes: file.bytes,
        enable_ocr: with_options && form.bool("enable_ocr", false)?,
        table_mode: if table_mode == "accurate" {
            TableMode::Accurate
        } else {
            TableMode::Fast
        },
        clean: CleanOptions {
            remove_urls: form.bool("remove_urls", true)?,
            normalize_arabic: form.bool("normalize_arabic", true)?,
        },
        describe_images: !with_options || form.bool(describe_key, true)?,
    })
}

fn sizes(form: &Form) -> Result<Sizes, ApiError> {
    let target = form.int("target_chunk_words", 500, 1, MAX_TARGET_WORDS)?;
    let max = form.int("max_chunk_words", 1500, 1, MAX_CHUNK_WORDS)?;
    if max < target {
        return Err(ApiError::bad_request(format!(
            "max_chunk_words ({max}) must be at least target_chunk_words ({target})"
        )));
    }
    Ok(Sizes {
        target_words: target as usize,
        max_words: max as usize,
    })
}

/// Parses a file without storing it.
#[utoipa::path(post, path = "/api/v1/parse", tag = "parse",
    request_body(content = ParseForm, content_type = "multipart/form-data"),
    responses((status = 200, body = ParseResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn parse(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<ParseResult>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let job = job(&mut form, "enable_image_description", true)?;
    let include_tables = form.bool("include_tables", true)?;
    let include_images = form.bool("include_images", true)?;
    // Without an LLM (or above the contract's size limits) the LLM-ready text is the
    // clean Markdown; `llm_ready_mode` says which.
    let summarize = form.bool("summarize_llm_ready", true)?;
    Ok(Json(
        state
            .kb
            .parse_file(job, include_tables, include_images, summarize)
            .await?,
    ))
}

/// The formats `/parse` and `/upload` accept.
#[utoipa::path(get, path = "/api/v1/parse/formats", tag = "parse", responses((status = 200, body = Formats)))]
pub async fn formats() -> Json<Formats> {
    let each = || {
        FORMATS
            .iter()
            .flat_map(|f| f.extensions.iter().map(move |e| (*e, f.description)))
    };
    let formats = each().map(|(e, _)| e.to_owned()).collect();
    let descriptions = each().map(|(e, d)| (e.to_owned(), d.to_owned())).collect();
    Json(Formats {
        formats,
        descriptions,
    })
}

/// Parses and chunks a file without storing it.
#[utoipa::path(post, path = "/api/v1/parse/sections", tag = "parse",
    request_body(content = SectionsForm, content_type = "multipart/form-data"),
    responses((status = 200, body = SectionsResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn sections(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<SectionsResult>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let job = job(&mut form, "enable_picture_description", true)?;
    let mode = form.choice(
        "chunking_mode",
        "auto",
        &["auto", "semantic", "page", "paragraph", "disabled"],
    )?;
    let mode = ChunkMode::parse(&mode).unwrap_or(ChunkMode::Auto);
    let sizes = sizes(&form)?;
    let full = form.bool("include_full_text", false)?;
    Ok(Json(state.kb.parse_sections(job, mode, sizes, full).await?))
}

/// Parses the whole file, then streams its sections (SSE: status, metadata, section,
/// stats, error, done).
#[utoipa::path(post, path = "/api/v1/parse/sections/stream", tag = "parse",
    request_body(content = SectionsForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "text/event-stream"), (status = 400, body = ErrorBody)))]
pub async fn sections_stream(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let job = job(&mut form, "enable_picture_description", true)?;
    let rx = state.kb.parse_sections_stream(
        job,
        Sizes {
            target_words: 500,
            max_words: 1500,
        },
    );
    Ok(sse::respond(
        ReceiverStream::new(rx).map(|e| Ok(to_event(e))),
    ))
}

/// Parses page by page and streams each chunk when its page is done (SSE: metadata,
/// progress, chunk, stats, error, done).
#[utoipa::path(post, path = "/api/v1/parse/sections/incremental", tag = "parse",
    request_body(content = SectionsForm, content_type = "multipart/form-data"),
    responses((status = 200, description = "text/event-stream"), (status = 400, body = ErrorBody)))]
pub async fn sections_incremental(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let mut form = Form::read(multipart, state.config.max_upload_bytes, 1).await?;
    let job = job(&mut form, "enable_picture_description", false)?;
    let sizes = sizes(&form)?;
    let rx = state.kb.parse_sections_incremental(job, sizes);
    Ok(sse::respond(
        ReceiverStream::new(rx).map(|e| Ok(to_event(e))),
    ))
}

fn to_event(e: ParseEvent) -> Event {
    match e {
        ParseEvent::Status(stage) => sse::event("status", json!({ "stage": stage })),
        ParseEvent::Metadata {
            source_file,
            format,
            metadata,
        } => sse::event(
            "metadata",
            json!({ "source_file": source_file, "format": format, "metadata": metadata }),
        ),
        ParseEvent::Progress { page, total_pages } => sse::event(
            "progress",
            json!({ "page": page, "total_pages": total_pages, "message": format!("page {page} of {total_pages}") }),
        ),
        ParseEvent::Section(c) => {
            let headers: Vec<&str> = c
                .section_path
                .split(" > ")
                .filter(|h| !h.is_empty())
                .collect();
            let mut v = serde_json::to_value(&c).unwrap_or_default();
            v["headers"] = json!(headers);
            sse::event("section", v)
        }
        ParseEvent::Chunk(c) => sse::event("chunk", serde_json::to_value(&c).unwrap_or_default()),
        ParseEvent::Stats(s) => sse::event("stats", serde_json::to_value(&s).unwrap_or_default()),
        ParseEvent::Error(e) => {
            let api: ApiError = e.into();
            sse::event(
                "error",
                serde_json::to_value(api.body()).unwrap_or_default(),
            )
        }
        ParseEvent::Done => sse::event("done", json!({})),
    }
}
