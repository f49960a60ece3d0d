//! Scraping one URL into the knowledge base: duplicate rules of DECISIONS.md, then
//! fetch, then the same ingestion as files.

use std::time::Duration;

use super::fetch::{self, Fetched};
use super::ingest::{IngestSource, Progress, SourceType};
use super::{IngestionResult, KnowledgeBase};
use crate::error::{Error, Result};
use crate::parse::Format;

/// One scrape.
pub struct ScrapeRequest {
    pub url: String,
    pub timeout: Duration,
    pub skip_duplicates: bool,
    /// The task this scrape belongs to, if any.
    pub task: Option<String>,
    pub progress: Option<Progress>,
}

/// The format of a fetched body, by media type, else by the URL's extension.
fn format_of(f: &Fetched) -> Result<&'static Format> {
    Format::for_media_type(&f.media_type)
        .or_else(|| Format::for_filename(f.final_url.path()).ok())
        .ok_or_else(|| {
            Error::bad_request(format!(
                "{}: unsupported content type '{}'",
                f.final_url, f.media_type
            ))
        })
}

/// A URL in canonical form (the source identity of a scraped page).
pub fn canonical_url(url: &str) -> Result<String> {
    let mut u = reqwest::Url::parse(url.trim())
        .map_err(|e| Error::bad_request(format!("invalid URL '{url}': {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(Error::bad_request(format!(
            "only http and https URLs can be scraped, not '{url}'"
        )));
    }
    u.set_fragment(None);
    Ok(u.to_string())
}

impl KnowledgeBase {
    /// Scrapes one URL and ingests it.
    #[tracing::instrument(skip_all, fields(url = %req.url))]
    pub async fn scrape(&self, req: ScrapeRequest) -> Result<IngestionResult> {
        let url = canonical_url(&req.url)?;
        if req.skip_duplicates {
            if let Some((existing, first)) = self.source_exists(&url).await? {
                tracing::info!("URL already stored; skipped");
                return Ok(IngestionResult {
                    success: true,
                    url: Some(url.clone()),
                    title: existing.title.clone(),
                    is_duplicate: true,
                    duplicate_type: Some("url".into()),
                    existing_doc_id: first,
                    existing_doc_title: Some(existing.title),
                    duplicate_message: Some(format!(
                        "{url} is already stored; skipped (skip_duplicates is true)"
                    )),
                    ..Default::default()
                });
            }
        }
        let started = std::time::Instant::now();
        let fetched = fetch::fetch(&url, req.timeout, &self.fetch_policy).await?;
        tracing::info!(bytes = fetched.body.len(), media_type = %fetched.media_type,
            elapsed_ms = started.elapsed().as_millis() as u64, "fetched");
        if let Some(p) = &req.progress {
            p(0.2);
        }
        let format = format_of(&fetched)?;
        let title_hint = fetched
            .final_url
            .host_str()
            .map(|h| format!("{h}{}", fetched.final_url.path()));
        self.ingest(IngestSource {
            name: url,
            source_type: SourceType::Url,
            format,
            bytes: fetched.body,
            section: "uploaded".into(),
            title_hint,
            check_duplicates: req.skip_duplicates,
            task: req.task,
            progress: req.progress,
        })
        .await
    }
}
