//! Dense retrieval: embed the query, take the `initial_k` nearest chunks from the
//! vector index, read them from SQLite (the source of truth) and return the best `top_k`.

use super::{Document, KnowledgeBase, SearchHit, SearchResponse};
use crate::error::{Error, Result};
use crate::store::chunks as repo;

/// Validated search parameters.
#[derive(Debug, Clone)]
pub struct SearchParams {
    pub query: String,
    pub top_k: usize,
    pub initial_k: usize,
}

impl KnowledgeBase {
    /// Runs a search. Scores are cosine similarities, best first.
    #[tracing::instrument(skip_all, fields(top_k = p.top_k, initial_k = p.initial_k))]
    pub async fn search(&self, p: SearchParams) -> Result<SearchResponse> {
        let query = p.query.trim().to_owned();
        if query.is_empty() {
            return Err(Error::bad_request("query must not be empty"));
        }
        let started = std::time::Instant::now();
        let qv = self
            .embedder
            .embed(vec![query])
            .await?
            .pop()
            .ok_or_else(|| Error::Internal(anyhow::anyhow!("embedder returned no vector")))?;
        let embedded = started.elapsed();
        // Never fewer candidates than results asked for.
        let k = p.initial_k.max(p.top_k);
        let vectors = self.vectors.clone();
        let hits = tokio::task::spawn_blocking(move || vectors.search(&qv, k)).await??;
        let keys: Vec<u64> = hits.iter().map(|h| h.key).collect();
        let rows = self
            .store
            .read(move |c| repo::chunks_by_keys(c, &keys))
            .await?;
        let mut by_key: std::collections::HashMap<u64, _> =
            rows.into_iter().map(|r| (r.key, r)).collect();
        let mut results: Vec<SearchHit> = hits
            .iter()
            .filter_map(|h| {
                let row = by_key.remove(&h.key)?;
                let doc = Document::from(row);
                Some(SearchHit {
                    source: doc
                        .metadata
                        .get("source")
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    text: doc.text,
                    metadata: doc.metadata,
                    score: h.similarity,
                    doc_id: doc.id,
                })
            })
            .collect();
        results.sort_by(|a, b| b.score.total_cmp(&a.score));
        results.truncate(p.top_k);
        tracing::info!(
            candidates = hits.len(),
            results = results.len(),
            embed_ms = embedded.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "search"
        );
        Ok(SearchResponse {
            count: results.len(),
            results,
        })
    }
}
