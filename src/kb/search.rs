//! Hybrid retrieval: the query's `initial_k` nearest chunks from the vector index and
//! its `initial_k` best BM25 matches from the full-text index are fused by reciprocal
//! rank, read from SQLite (the source of truth), optionally reranked by the
//! cross-encoder, and the best `top_k` returned. Arabic is matched in its normalised
//! form on both sides.

use std::time::{Duration, Instant};

use super::{Document, KnowledgeBase, SearchHit, SearchResponse};
use crate::error::{Error, Result};
use crate::parse::clean::normalize_arabic;
use crate::retrieval::fusion;
use crate::store::chunks as repo;

/// Validated search parameters.
#[derive(Debug, Clone)]
pub struct SearchParams {
    pub query: String,
    pub top_k: usize,
    pub initial_k: usize,
    /// Which retrievers run; the API always uses both.
    pub mode: RetrievalMode,
}

/// Which retrievers a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetrievalMode {
    /// Dense and BM25, fused.
    #[default]
    Hybrid,
    /// The vector index alone.
    Dense,
    /// BM25 alone.
    Bm25,
}

/// Retrieved chunks and where the time went.
#[derive(Debug, Clone, Default)]
pub struct Retrieved {
    pub hits: Vec<SearchHit>,
    pub embedding: Duration,
    pub vector_search: Duration,
    pub reranking: Duration,
}

/// The text indexes and the embedder see: Arabic letter variants and diacritics folded.
pub fn searchable(text: &str) -> String {
    normalize_arabic(text)
}

impl KnowledgeBase {
    /// Runs a search; see [`retrieve`](Self::retrieve) for the scores.
    pub async fn search(&self, p: SearchParams) -> Result<SearchResponse> {
        let r = self.retrieve(p).await?;
        Ok(SearchResponse {
            count: r.hits.len(),
            results: r.hits,
        })
    }

    /// Hybrid retrieval. Scores, higher is better: the cross-encoder's relevance
    /// (a probability, 0-1) when a reranker is loaded, else the fused reciprocal-rank
    /// score scaled so that a chunk ranked first by both retrievers scores 1.0.
    #[tracing::instrument(skip_all, fields(top_k = p.top_k, initial_k = p.initial_k))]
    pub async fn retrieve(&self, p: SearchParams) -> Result<Retrieved> {
        let query = p.query.trim().to_owned();
        if query.is_empty() {
            return Err(Error::bad_request("query must not be empty"));
        }
        // Never a query vector of one embedder against stored vectors of another.
        self.ensure_searchable()?;
        let started = Instant::now();
        let normalised = searchable(&query);
        let qv = self
            .embedder
            .embed(vec![normalised.clone()])
            .await?
            .pop()
            .ok_or_else(|| Error::Internal(anyhow::anyhow!("embedder returned no vector")))?;
        let embedding = started.elapsed();

        let searched = Instant::now();
        // Never fewer candidates than results asked for.
        let k = p.initial_k.max(p.top_k);
        let (vectors, fulltext) = (self.vectors.clone(), self.fulltext.clone());
        let mode = p.mode;
        let (dense, sparse) = self
            .search_gate
            .run_blocking(move || -> anyhow::Result<_> {
                let dense: Vec<u64> = match mode {
                    RetrievalMode::Bm25 => Vec::new(),
                    _ => vectors.search(&qv, k)?.into_iter().map(|h| h.key).collect(),
                };
                let sparse: Vec<u64> = match mode {
                    RetrievalMode::Dense => Vec::new(),
                    _ => fulltext
                        .search(&normalised, k)?
                        .into_iter()
                        .map(|(key, _)| key)
                        .collect(),
                };
                Ok((dense, sparse))
            })
            .await??;
        let mut fused = fusion::reciprocal_rank(&[&dense, &sparse]);
        fused.truncate(k);
        let keys: Vec<u64> = fused.iter().map(|(key, _)| *key).collect();
        let rows = self
            .store
            .read(move |c| repo::chunks_by_keys(c, &keys))
            .await?;
        let mut by_key: std::collections::HashMap<u64, _> =
            rows.into_iter().map(|r| (r.key, r)).collect();
        let mut hits: Vec<SearchHit> = fused
            .iter()
            .filter_map(|(key, score)| {
                let doc = Document::from(by_key.remove(key)?);
                Some(SearchHit {
                    source: doc
                        .metadata
                        .get("source")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    text: doc.text,
                    metadata: doc.metadata,
                    score: *score,
                    doc_id: doc.id,
                })
            })
            .collect();
        let vector_search = searched.elapsed();

        let reranked = Instant::now();
        let reranking = match &self.reranker {
            Some(rr) if hits.len() > 1 => {
                let passages: Vec<String> = hits.iter().map(|h| h.text.clone()).collect();
                let scores = rr.score(query.clone(), passages).await?;
                for (h, s) in hits.iter_mut().zip(scores) {
                    h.score = s;
                }
                hits.sort_by(|a, b| b.score.total_cmp(&a.score));
                reranked.elapsed()
            }
            _ => Duration::ZERO,
        };
        hits.truncate(p.top_k);
        tracing::info!(
            dense = dense.len(),
            bm25 = sparse.len(),
            results = hits.len(),
            embed_ms = embedding.as_millis() as u64,
            search_ms = vector_search.as_millis() as u64,
            rerank_ms = reranking.as_millis() as u64,
            "retrieved"
        );
        Ok(Retrieved {
            hits,
            embedding,
            vector_search,
            reranking,
        })
    }
}
