//! The knowledge base's request and result records, as the contract names them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Outcome of ingesting one file or URL.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, Default)]
pub struct IngestionResult {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub title: String,
    pub chunks_added: u64,
    pub chunks_updated: u64,
    pub chunks_skipped: u64,
    pub error: Option<String>,
    pub is_duplicate: bool,
    /// `filepath` or `content_hash` for uploads; `url` or `content_hash` for scrapes.
    pub duplicate_type: Option<String>,
    pub existing_doc_id: Option<String>,
    pub existing_doc_title: Option<String>,
    pub duplicate_message: Option<String>,
}

/// One stored chunk as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Document {
    pub id: String,
    pub text: String,
    /// `title`, `source`, `section`, `language`, `source_type`, `file_type`,
    /// `chunk_index`, `total_chunks`, `heading`, `page_start`, `page_end`,
    /// `content_hash`, `ingested_at`.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
}

/// A page of documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentPage {
    pub documents: Vec<Document>,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
    pub pages: u64,
}

/// One search hit.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchHit {
    pub text: String,
    pub source: String,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// Relevance to the query in [0, 1], the same across queries (0.5: as likely relevant
    /// as not): the cross-encoder's with a reranker, else calibrated from the cosine and
    /// the keyword match (see `kb::search::relevance`). Results are in its order.
    pub score: f32,
    pub doc_id: String,
}

/// Search results, best first.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResponse {
    pub results: Vec<SearchHit>,
    pub count: usize,
}

/// One component of `/health/ready`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Component {
    pub name: String,
    pub healthy: bool,
    /// False for an optional model that is not installed (the LLM, the reranker): not
    /// healthy, yet nothing is wrong; the server works without it.
    pub installed: bool,
    /// Why, when not healthy; what was checked, when healthy.
    pub detail: String,
    /// Where a model runs: `cpu (...)`, `cuda:0 (GPU name, memory, compute capability)`,
    /// or `remote <url>`. Absent for components that are not models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The model's arithmetic (`int8`, `bf16`, `candle-f16`, `ragd-cpu`, `remote`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arithmetic: Option<String>,
}

/// Counts for `/health/stats`.
#[derive(Debug, Clone)]
pub struct KbStats {
    pub document_count: u64,
    pub sources_count: u64,
    pub vector_store_path: String,
    pub embedding_model: String,
}
