//! Re-embedding: replaces the vectors another embedder made with the running embedder's,
//! a batch at a time, through the same write path as ingestion and deletion (the write
//! lock; SQLite first, then the vector index, and a new store generation for both
//! indexes). Each chunk records which embedder made its vector, so the work left is
//! exactly the chunks still holding another's: a batch committed is never redone, and
//! one interrupted by a crash is simply not done yet. The embedding input is rebuilt
//! from the stored chunk as ingestion built it (section path, then body; Arabic folded).

use super::identity::Searchable;
use super::ingest::sha256_hex;
use super::search::searchable;
use super::KnowledgeBase;
use crate::chunk::retrieval::embed_input;
use crate::error::{Error, Result};
use crate::store::{self, chunks as repo, embedders};

/// What one batch did.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReembedBatch {
    /// Key of the last chunk the batch looked at; `None` when none were left after the
    /// cursor it was given.
    pub last_key: Option<u64>,
    /// Chunks whose vector it replaced (an upload may have replaced others meanwhile).
    pub reembedded: u64,
}

/// How far re-embedding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReembedCounts {
    /// Chunks whose vector another embedder made.
    pub remaining: u64,
    /// Every stored chunk.
    pub total: u64,
}

impl KnowledgeBase {
    /// Whether searches may run: `Unavailable` (503) naming both embedders while stored
    /// chunks hold another embedder's vectors. Every search path calls it first.
    pub fn ensure_searchable(&self) -> Result<()> {
        self.searchable.check()
    }

    /// The state behind [`ensure_searchable`](Self::ensure_searchable).
    pub fn searchable(&self) -> &Searchable {
        &self.searchable
    }

    /// Chunks still to re-embed, of all chunks.
    pub async fn reembed_counts(&self) -> Result<ReembedCounts> {
        let id = self.searchable.embedder_id();
        self.store
            .read(move |c| {
                Ok(ReembedCounts {
                    remaining: embedders::count_not_by(c, id)?,
                    total: repo::count_chunks(c)?,
                })
            })
            .await
    }

    /// Re-embeds up to `limit` chunks with keys above `after` whose vector another
    /// embedder made. With `task`, the batch is committed only while that task is still
    /// running (a cancelled task writes nothing further).
    pub async fn reembed_batch(
        &self,
        after: u64,
        limit: usize,
        task: Option<&str>,
    ) -> Result<ReembedBatch> {
        let id = self.searchable.embedder_id();
        let rows = self
            .store
            .read(move |c| embedders::stale_after(c, id, after, limit))
            .await?;
        let Some(last_key) = rows.last().map(|r| r.key) else {
            return Ok(ReembedBatch::default());
        };
        // Tokenized here, off the model's thread, as ingestion does.
        let counter = self.embedder.token_counter().clone();
        let (rows, ids) = tokio::task::spawn_blocking(move || -> Result<_> {
            let mut inexact = 0usize;
            let mut ids = Vec::with_capacity(rows.len());
            for r in &rows {
                let input = searchable(&embed_input(&r.section_path, &r.text));
                inexact += usize::from(sha256_hex(input.as_bytes()) != r.text_hash);
                ids.push(counter.encode(&input)?);
            }
            if inexact > 0 {
                // Stored without the fields ingestion hashed (a store seeded by hand):
                // the text and section path are all there is to embed.
                tracing::warn!(
                    chunks = inexact,
                    "embedding inputs rebuilt from stored fields differ from ingestion's"
                );
            }
            Ok((rows, ids))
        })
        .await??;
        let vectors = self.embedder.embed_bulk(ids).await?;
        let dim = self.embedder.dim();
        if vectors.len() != rows.len() || vectors.iter().any(|v| v.len() != dim) {
            return Err(Error::Internal(anyhow::anyhow!(
                "the embedder returned {} vectors for {} chunks",
                vectors.len(),
                rows.len()
            )));
        }

        let _guard = self.write_lock.lock().await;
        let store = self.store.clone();
        let (index, fulltext) = (self.vectors.clone(), self.fulltext.clone());
        let task = task.map(str::to_owned);
        let reembedded = tokio::task::spawn_blocking(move || -> Result<u64> {
            let (written, generation) = store.write_sync(|tx| {
                if let Some(task) = &task {
                    if !store::tasks::is_running(tx, task)? {
                        return Err(Error::Cancelled);
                    }
                }
                let mut written = Vec::with_capacity(rows.len());
                for (r, v) in rows.iter().zip(&vectors) {
                    if embedders::set_vector(tx, r.key, &r.text_hash, id, v)? {
                        written.push((r.key, v.as_slice()));
                    }
                }
                let generation = if written.is_empty() {
                    repo::generation(tx)?
                } else {
                    repo::bump_generation(tx)?
                };
                Ok((written, generation))
            })?;
            if !written.is_empty() {
                index.apply(&[], &written, generation)?;
                // The text is unchanged: the full-text index only records the generation.
                fulltext.stage(&[], &[], generation)?;
            }
            Ok(written.len() as u64)
        })
        .await??;
        Ok(ReembedBatch {
            last_key: Some(last_key),
            reembedded,
        })
    }

    /// When no chunk holds another embedder's vector any more: records the running
    /// embedder as the knowledge base's and serves searches again. Returns whether it
    /// did (`false`: chunks remain to re-embed).
    pub async fn finish_reembed(&self) -> Result<bool> {
        let id = self.searchable.embedder_id();
        let done = self
            .store
            .write(move |tx| {
                if embedders::count_not_by(tx, id)? > 0 {
                    return Ok(false);
                }
                embedders::set_adopted(tx, id)?;
                Ok(true)
            })
            .await?;
        if done && self.searchable.stale_reason().is_some() {
            self.searchable.lift();
            tracing::info!(
                embedder = self.embedder.name(),
                "every vector is the running embedder's: searches are served again"
            );
        }
        Ok(done)
    }
}
