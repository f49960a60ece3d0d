//! Routes of the knowledge-base API under `/api/v1`.

pub mod backup;
pub mod documents;
pub mod form;
pub mod health;
pub mod parse;
pub mod query;
pub mod reindex;
pub mod scrape;
pub mod search;
pub mod tasks;
pub mod upload;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use crate::config::Config;
use crate::state::AppState;

/// Multipart overhead allowed on top of the files, plus what is drained after a
/// refusal (see `form::DRAIN_AFTER_REFUSAL`), so the size check that answers is ours.
const FORM_OVERHEAD: u64 = 1024 * 1024 + form::DRAIN_AFTER_REFUSAL;

/// The `/api/v1` router (auth is layered on by the caller).
pub fn routes(config: &Config) -> Router<AppState> {
    let upload_limit = usize::try_from(config.max_upload_bytes.saturating_add(FORM_OVERHEAD))
        .unwrap_or(usize::MAX);
    let bulk_limit = usize::try_from(
        config
            .max_upload_bytes
            .saturating_mul(config.max_bulk_files as u64)
            .saturating_add(FORM_OVERHEAD),
    )
    .unwrap_or(usize::MAX);
    Router::new()
        .route("/health", get(health::health))
        .route("/health/ready", get(health::ready))
        .route("/health/stats", get(health::stats))
        .route("/search", post(search::search))
        .route("/query", post(query::query))
        .route("/documents", get(documents::list))
        .route("/documents/sources", get(documents::sources))
        .route("/documents/stats", get(documents::stats))
        .route("/documents/delete", post(documents::delete_batch))
        .route(
            "/documents/delete/by-source",
            post(documents::delete_by_source),
        )
        .route(
            "/documents/delete/by-filter",
            post(documents::delete_by_filter),
        )
        .route(
            "/documents/{doc_id}",
            get(documents::get_one).delete(documents::delete_one),
        )
        .route(
            "/upload",
            post(upload::upload).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/upload/async",
            post(upload::upload_async).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/upload/bulk",
            post(upload::upload_bulk).layer(DefaultBodyLimit::max(bulk_limit)),
        )
        .route(
            "/upload/bulk/zip",
            post(upload::upload_zip).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/scrape", post(scrape::scrape))
        .route("/scrape/async", post(scrape::scrape_async))
        .route("/reindex", post(reindex::reindex))
        .route("/admin/backup", post(backup::backup))
        .route("/tasks", get(tasks::list))
        .route(
            "/tasks/{task_id}",
            get(tasks::get_one).delete(tasks::cancel),
        )
        .route(
            "/parse",
            post(parse::parse).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/parse/formats", get(parse::formats))
        .route(
            "/parse/sections",
            post(parse::sections).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/parse/sections/stream",
            post(parse::sections_stream).layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/parse/sections/incremental",
            post(parse::sections_incremental).layer(DefaultBodyLimit::max(upload_limit)),
        )
}
