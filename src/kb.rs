//! The knowledge-base service: ingestion, search, documents and health, over the
//! store, the derived indexes and the embedder. No HTTP types here.

pub mod admission;
pub mod answer;
pub mod backup;
pub mod bulk;
pub mod documents;
pub mod fetch;
pub mod filter;
pub mod grounding;
pub mod health;
pub mod identity;
pub mod indexes;
pub mod ingest;
pub mod metrics;
pub mod parsing;
pub mod query;
pub mod question;
pub mod reembed;
pub mod scrape;
pub mod search;
pub mod sources;
pub mod sync;
pub mod timings;
pub mod types;
mod writer;

use std::sync::Arc;

use crate::ml::llm::{LlmSlot, SharedGenerator};
use crate::ml::reranker::RerankHandle;
use crate::ml::{EmbedHandle, Models};
use crate::parse::archive::ZipLimits;
use crate::parse::ParseOptions;
use crate::retrieval::{FullTextIndex, VectorStore};
use crate::store::Store;

pub use types::*;

/// The knowledge base. Cheap to share behind an `Arc`.
pub struct KnowledgeBase {
    store: Store,
    vectors: Arc<dyn VectorStore>,
    fulltext: Arc<FullTextIndex>,
    embedder: EmbedHandle,
    /// Serialises writes so SQLite and both indexes change in the same order.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Stores ingested sources in groups.
    writer: writer::GroupWriter,
    /// Parser settings from the configuration (pdfium, OCR languages).
    parse_defaults: ParseOptions,
    /// Bounds how many files are parsed at once (parsing and OCR are CPU and memory heavy).
    parse_permits: Arc<tokio::sync::Semaphore>,
    /// What scraping may reach and read.
    fetch_policy: fetch::FetchPolicy,
    /// What one uploaded archive of documents may hold.
    zip_limits: ZipLimits,
    /// Time spent per ingestion stage.
    timings: Arc<timings::StageTimes>,
    /// The cross-encoder, when one is installed.
    reranker: Option<RerankHandle>,
    /// The LLM's slot; answers are extractive while it is empty.
    llm: LlmSlot,
    /// Where each model runs (for `/health/ready`).
    placed: crate::ml::models::Placed,
    /// Answer length and temperature when a request does not say.
    llm_defaults: LlmDefaults,
    /// Admits searches' index look-ups.
    search_gate: admission::Gate,
    /// Admits extractive answers (their sentence embeddings).
    answer_gate: admission::Gate,
    /// Whose vectors the store holds, and whether searches may run.
    searchable: identity::Searchable,
}

/// Generation settings of answers, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct LlmDefaults {
    /// Longest answer, in tokens.
    pub max_tokens: usize,
    /// Temperature when the request sets none.
    pub temperature: f64,
    /// Longest a generated answer may run: past it the generation stops and the answer
    /// is what was checked so far (or the passages' sentences).
    pub deadline: std::time::Duration,
    /// An answer that the LLM, at its recent pace, would not finish within this long is
    /// answered from the passages' own sentences instead (an idle LLM always generates).
    pub target: std::time::Duration,
}

/// Everything a [`KnowledgeBase`] is built from.
pub struct KbParts {
    pub store: Store,
    pub vectors: Arc<dyn VectorStore>,
    pub fulltext: Arc<FullTextIndex>,
    /// The shared models (the knowledge base keeps its own handles to them).
    pub models: Models,
    pub parse_defaults: ParseOptions,
    pub max_concurrent_parses: usize,
    pub zip_limits: ZipLimits,
    pub fetch_policy: fetch::FetchPolicy,
    pub llm_defaults: LlmDefaults,
    /// Search look-ups at once, and waiting.
    pub search_gate: admission::GateOptions,
    /// Extractive answers at once, and waiting.
    pub answer_gate: admission::GateOptions,
    /// The running embedder's identity and whether stored chunks hold another's vectors
    /// ([`identity::resolve`]).
    pub identity: identity::Resolved,
}

impl KnowledgeBase {
    /// Wires the parts together and starts the group writer's thread;
    /// [`indexes::reconcile`] must have run on the indexes with the identity's id.
    pub fn new(p: KbParts) -> std::io::Result<Self> {
        let write_lock = Arc::new(tokio::sync::Mutex::new(()));
        let timings = Arc::new(timings::StageTimes::default());
        let writer = writer::GroupWriter::start(writer::Targets {
            store: p.store.clone(),
            vectors: p.vectors.clone(),
            fulltext: p.fulltext.clone(),
            write_lock: write_lock.clone(),
            timings: timings.clone(),
            embedder_id: p.identity.embedder_id,
        })?;
        Ok(Self {
            store: p.store,
            vectors: p.vectors,
            fulltext: p.fulltext,
            embedder: p.models.embedder,
            write_lock,
            writer,
            parse_defaults: p.parse_defaults,
            parse_permits: Arc::new(tokio::sync::Semaphore::new(p.max_concurrent_parses.max(1))),
            fetch_policy: p.fetch_policy,
            zip_limits: p.zip_limits,
            timings,
            reranker: p.models.reranker,
            llm: p.models.llm,
            placed: p.models.placed,
            llm_defaults: p.llm_defaults,
            search_gate: admission::Gate::new("searches", p.search_gate),
            answer_gate: admission::Gate::new("answers", p.answer_gate),
            searchable: identity::Searchable::new(p.identity),
        })
    }

    /// The current LLM, when one is loaded (each request keeps the one it got, so a
    /// switch never changes the model under a running generation).
    pub fn llm(&self) -> Option<SharedGenerator> {
        self.llm.current()
    }

    /// The LLM's slot (switching, the reason a model is not loaded).
    pub fn llm_slot(&self) -> &LlmSlot {
        &self.llm
    }

    /// Answer length and temperature defaults.
    pub fn llm_defaults(&self) -> LlmDefaults {
        self.llm_defaults
    }

    /// The reranker, when one is loaded.
    pub fn reranker(&self) -> Option<&RerankHandle> {
        self.reranker.as_ref()
    }

    /// Time spent per ingestion stage since start-up; embedding is the embedder's time
    /// in bulk passes.
    pub fn stage_times(&self) -> timings::StageSnapshot {
        self.timings.snapshot(self.embedder.stats().bulk_busy_s)
    }

    /// The store (shared with the task system).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The embedder handle (for stats and health).
    pub fn embedder(&self) -> &EmbedHandle {
        &self.embedder
    }

    /// Saves the vector index if it changed and commits what ingestion staged in the
    /// full-text index; called periodically and at shutdown.
    pub async fn flush(&self) -> crate::error::Result<()> {
        let (v, f) = (self.vectors.clone(), self.fulltext.clone());
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            v.flush()?;
            f.commit_staged()?;
            Ok(())
        })
        .await??;
        Ok(())
    }
}
