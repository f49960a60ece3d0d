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

/// Moves each retriever's first candidate (`best`: BM25's, the vector index's) that
/// `scored` (in score order) would leave out of its first `top_k` into the last places of
/// them, best score first: an exact match of a rare code or id whose text the embedder
/// does not place near the query still shows, as it did under rank fusion. The first
/// `top_k` stay in descending score order, as a reserved candidate scores no higher than
/// any it displaces.
fn keep_each_retrievers_best(scored: &mut Vec<(u64, f32)>, top_k: usize, best: &[Option<&u64>]) {
    if top_k == 0 || scored.len() <= top_k {
        return;
    }
    let mut missing: Vec<(u64, f32)> = Vec::new();
    for key in best.iter().flatten() {
        if let Some(pos) = scored.iter().position(|(k, _)| k == *key) {
            if pos >= top_k && !missing.iter().any(|(k, _)| k == *key) {
                missing.push(scored[pos]);
            }
        }
    }
    if missing.is_empty() {
        return;
    }
    missing.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.retain(|(k, _)| !missing.iter().any(|(m, _)| m == k));
    let at = top_k.saturating_sub(missing.len());
    for (i, m) in missing.into_iter().enumerate() {
        scored.insert(at + i, m);
    }
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
        let top_k = p.top_k;
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
                keep_each_retrievers_best(
                    &mut scored,
                    top_k,
                    &[sparse.first(), dense_keys.first()],
                );
                Ok((scored, dense.len(), sparse.len()))
            })
            .await??;
        let keys: Vec<u64> = candidates.iter().map(|(key, _)| *key).collect();
        let rows = self
            .store
            .read(move |c| repo::chunks_by_keys(c, &keys))
            .await?;
        let mut by_key: HashMap<u64, _> = rows.into_iter().map(|r| (r.key, r)).collect();
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

#[cfg(test)]
mod tests {
    use super::keep_each_retrievers_best;

    #[test]
    fn each_retrievers_best_candidate_stays_among_the_results() {
        let scored = vec![(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5), (6, 0.4)];
        // BM25's first match (6) scored last: it takes the last place of the three.
        let mut s = scored.clone();
        keep_each_retrievers_best(&mut s, 3, &[Some(&6), Some(&1)]);
        assert_eq!(s[..3], [(1, 0.9), (2, 0.8), (6, 0.4)]);
        assert!(s[..3].windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(s.len(), 6, "nothing is lost past the results");
        // Both retrievers' firsts left out: the two last places, best first.
        let mut s = scored.clone();
        keep_each_retrievers_best(&mut s, 3, &[Some(&6), Some(&5)]);
        assert_eq!(s[..3], [(1, 0.9), (5, 0.5), (6, 0.4)]);
        // Already in, or no room needed: unchanged.
        let mut s = scored.clone();
        keep_each_retrievers_best(&mut s, 3, &[Some(&2), None]);
        assert_eq!(s, scored);
        let mut s = scored.clone();
        keep_each_retrievers_best(&mut s, 6, &[Some(&6)]);
        assert_eq!(s, scored);
    }
}
