//! Reading stored sources (one uploaded file or scraped URL each) as whole texts: a page
//! of them by id, and one source's text rebuilt from its chunks. What the MCP server's
//! resources are made of.

use super::KnowledgeBase;
use crate::error::{Error, Result};
use crate::store::chunks as repo;

/// Most sources one page may hold.
pub const MAX_SOURCE_PAGE: u64 = 200;

/// One stored source, as a listing shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceInfo {
    /// Stable id.
    pub id: String,
    /// File name or URL.
    pub source: String,
    /// `file` or `url` (as ingestion recorded it).
    pub source_type: String,
    pub title: String,
    pub file_type: String,
    pub chunk_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<repo::SourceRow> for SourceInfo {
    fn from(r: repo::SourceRow) -> Self {
        Self {
            id: r.id,
            source: r.source,
            source_type: r.source_type,
            title: r.title,
            file_type: r.file_type,
            chunk_count: r.chunk_count,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// A page of sources and the id to continue after, when there may be more.
#[derive(Debug, Clone)]
pub struct SourcePage {
    pub sources: Vec<SourceInfo>,
    pub next_after: Option<String>,
}

/// A source with its text.
#[derive(Debug, Clone)]
pub struct SourceText {
    pub info: SourceInfo,
    /// Its chunks' texts in order, separated by blank lines (chunks cut with an overlap
    /// repeat those few words).
    pub text: String,
}

impl KnowledgeBase {
    /// Up to `limit` (1..=[`MAX_SOURCE_PAGE`]) sources whose id sorts after `after`.
    pub async fn source_page(&self, after: Option<String>, limit: u64) -> Result<SourcePage> {
        let limit = limit.clamp(1, MAX_SOURCE_PAGE);
        let rows = self
            .store
            .read(move |c| repo::sources_after(c, after.as_deref(), limit + 1))
            .await?;
        let more = rows.len() as u64 > limit;
        let sources: Vec<SourceInfo> = rows
            .into_iter()
            .take(limit as usize)
            .map(SourceInfo::from)
            .collect();
        let next_after = more.then(|| sources.last().map(|s| s.id.clone())).flatten();
        Ok(SourcePage {
            sources,
            next_after,
        })
    }

    /// One source and its text, or `NotFound`.
    pub async fn source_text(&self, id: String) -> Result<SourceText> {
        let wanted = id.clone();
        let (row, texts) = self
            .store
            .read(move |c| {
                let Some(row) = repo::source_by_id(c, &wanted)? else {
                    return Ok((None, Vec::new()));
                };
                let texts = repo::source_texts(c, &row.id)?;
                Ok((Some(row), texts))
            })
            .await?;
        let row = row.ok_or_else(|| Error::NotFound(format!("source '{id}' not found")))?;
        Ok(SourceText {
            info: row.into(),
            text: texts.join("\n\n"),
        })
    }
}
