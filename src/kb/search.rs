//! Hybrid retrieval: the query's `initial_k` nearest chunks from the vector index and
//! its `initial_k` best BM25 matches from the full-text index are fused by reciprocal
//! rank (the best `initial_k` of both kept), scored by calibrated relevance (see
//! [`relevance`]) and ordered by it, read from SQLite (the source of truth), optionally
//! reranked by the cross-encoder, and the best `top_k` returned. Arabic is matched in
//! its normalised form on both sides.

pub mod relevance;

use std::collections::HashMap;
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

    /// Hybrid retrieval. Scores, higher is better, results in their order: the
    /// cross-encoder's relevance (a probability, 0-1) when a reranker is loaded, else the
    /// calibrated relevance of the cosine and the keyword evidence (see [`relevance`]).
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
        let (candidates, dense_count, sparse_count) = self
            .search_gate
            .run_blocking(move || -> anyhow::Result<_> {
                let dense = match mode {
                    RetrievalMode::Bm25 => Vec::new(),
                    _ => vectors.search(&qv, k)?,
                };
                let sparse: Vec<u64> = match mode {
                    RetrievalMode::Dense => Vec::new(),
                    _ => fulltext
                        .search(&normalised, k)?
                        .into_iter()
                        .map(|(key, _)| key)
                        .collect(),
                };
                let dense_keys: Vec<u64> = dense.iter().map(|h| h.key).collect();
                let mut fused = fusion::reciprocal_rank(&[&dense_keys, &sparse]);
                fused.truncate(k);
                // Each candidate's cosine: the vector search's, else its stored vector's.
                let mut cosine: HashMap<u64, f32> =
                    dense.iter().map(|h| (h.key, h.similarity)).collect();
                let missing: Vec<u64> = fused
                    .iter()
                    .map(|(key, _)| *key)
                    .filter(|key| !cosine.contains_key(key))
                    .collect();
                for (key, c) in missing.iter().zip(vectors.similarity(&qv, &missing)?) {
                    cosine.insert(*key, c.unwrap_or(0.0));
                }
                // Scored by calibrated relevance and ordered by it (a stable sort: ties
                // keep the fused order).
                let mut scored: Vec<(u64, f32)> = fused
                    .iter()
                    .map(|(key, _)| {
                        let kw = relevance::keyword(sparse.iter().position(|s| s == key));
                        (*key, relevance::relevance(cosine[key], kw))
                    })
                    .collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1));
                Ok((scored, dense.len(), sparse.len()))
            })
            .await??;
        let keys: Vec<u64> = candidates.iter().map(|(key, _)| *key).collect();
        let rows = self
            .store
            .read(move |c| repo::chunks_by_keys(c, &keys))
            .await?;
        let mut by_key: std::collections::HashMap<u64, _> =
            rows.into_iter().map(|r| (r.key, r)).collect();
        let mut hits: Vec<SearchHit> = candidates
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
            dense = dense_count,
            bm25 = sparse_count,
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
