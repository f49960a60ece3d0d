//! Routes of the knowledge-base API under `/api/v1`.

pub mod documents;
pub mod health;
pub mod search;
pub mod upload;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use crate::config::Config;
use crate::state::AppState;

/// Multipart overhead allowed on top of the file itself.
const FORM_OVERHEAD: u64 = 1024 * 1024;

/// The `/api/v1` router (auth is layered on by the caller).
pub fn routes(config: &Config) -> Router<AppState> {
    let upload_limit = usize::try_from(config.max_upload_bytes.saturating_add(FORM_OVERHEAD))
        .unwrap_or(usize::MAX);
    Router::new()
        .route("/health", get(health::health))
        .route("/health/ready", get(health::ready))
        .route("/health/stats", get(health::stats))
        .route("/search", post(search::search))
        .route("/documents", get(documents::list))
        .route("/documents/{doc_id}", get(documents::get_one))
        .route(
            "/upload",
            post(upload::upload).layer(DefaultBodyLimit::max(upload_limit)),
        )
}
