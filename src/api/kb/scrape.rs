//! `/scrape` and `/scrape/async`.

use std::time::Duration;

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{check_range, ApiJson};
use crate::jobs::TaskAck;
use crate::kb::scrape::ScrapeRequest;
use crate::kb::IngestionResult;
use crate::state::AppState;

fn default_timeout() -> i64 {
    30
}
fn yes() -> bool {
    true
}

/// Body of `POST /scrape`.
#[derive(Deserialize, ToSchema)]
pub struct ScrapeBody {
    pub url: String,
    /// Seconds, 5-120.
    #[serde(default = "default_timeout")]
    #[schema(default = 30, minimum = 5, maximum = 120)]
    pub timeout: i64,
    /// Skip when the URL or its content is already stored.
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub skip_duplicates: bool,
}

/// Body of `POST /scrape/async`.
#[derive(Deserialize, ToSchema)]
pub struct ScrapeManyBody {
    /// 1-50 URLs.
    pub urls: Vec<String>,
    /// Seconds per URL, 5-120.
    #[serde(default = "default_timeout")]
    #[schema(default = 30, minimum = 5, maximum = 120)]
    pub timeout: i64,
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub skip_duplicates: bool,
}

/// Scrapes one URL and ingests it.
#[utoipa::path(post, path = "/api/v1/scrape", tag = "scrape", request_body = ScrapeBody,
    responses((status = 200, body = IngestionResult), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn scrape(
    State(state): State<AppState>,
    ApiJson(b): ApiJson<ScrapeBody>,
) -> Result<Json<IngestionResult>, ApiError> {
    let timeout = check_range("timeout", b.timeout, 5, 120)? as u64;
    let req = ScrapeRequest {
        url: b.url,
        timeout: Duration::from_secs(timeout),
        skip_duplicates: b.skip_duplicates,
        task: None,
        progress: None,
    };
    Ok(Json(state.kb.scrape(req).await?))
}

/// Queues a scrape of 1-50 URLs; follow it through `/tasks/{task_id}`.
#[utoipa::path(post, path = "/api/v1/scrape/async", tag = "scrape", request_body = ScrapeManyBody,
    responses((status = 200, body = TaskAck), (status = 400, body = ErrorBody)))]
pub async fn scrape_async(
    State(state): State<AppState>,
    ApiJson(b): ApiJson<ScrapeManyBody>,
) -> Result<Json<TaskAck>, ApiError> {
    let timeout = check_range("timeout", b.timeout, 5, 120)? as u64;
    check_range("number of urls", b.urls.len(), 1, 50)?;
    Ok(Json(
        state
            .jobs
            .submit_scrape(b.urls, timeout, b.skip_duplicates)
            .await?,
    ))
}
