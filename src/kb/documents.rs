//! Reading stored documents (chunks): one by id, or a page of them.

use super::filter::MetadataFilter;
use super::{Document, DocumentPage, KbStats, KnowledgeBase};
use crate::error::Result;
use crate::store::{chunks as repo, ChunkRow};

impl From<ChunkRow> for Document {
    fn from(r: ChunkRow) -> Self {
        Document {
            id: r.id,
            text: r.text,
            metadata: r.metadata,
        }
    }
}

impl KnowledgeBase {
    /// One document by id, or `NotFound`.
    pub async fn document(&self, id: String) -> Result<Document> {
        let row = self.store.read(move |c| repo::chunk_by_id(c, &id)).await?;
        Ok(row.into())
    }

    /// Page `page` (1-based) of `page_size` documents in ingestion order.
    pub async fn documents(&self, page: u64, page_size: u64) -> Result<DocumentPage> {
        let (total, rows) = self
            .store
            .read(move |c| {
                let total = repo::count_chunks(c)?;
                let rows = repo::list_chunks(c, (page - 1).saturating_mul(page_size), page_size)?;
                Ok((total, rows))
            })
            .await?;
        Ok(DocumentPage {
            documents: rows.into_iter().map(Document::from).collect(),
            total,
            page,
            page_size,
            pages: total.div_ceil(page_size),
        })
    }

    /// Counts for `/health/stats`.
    pub async fn stats(&self) -> Result<KbStats> {
        let (document_count, sources_count) = self
            .store
            .read(|c| Ok((repo::count_chunks(c)?, repo::count_sources(c)?)))
            .await?;
        Ok(KbStats {
            document_count,
            sources_count,
            vector_store_path: self.vectors.location(),
            embedding_model: self.embedder.name().to_owned(),
        })
    }
}

/// Outcome of deleting one document.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct DeleteOutcome {
    pub doc_id: String,
    /// `deleted`, `not_found` or `error`.
    pub status: String,
    /// Null on success in batch details.
    pub message: Option<String>,
}

/// Outcome of a batch delete.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct BatchDelete {
    pub deleted: u64,
    pub skipped: u64,
    pub errors: u64,
    pub details: Vec<DeleteOutcome>,
}

/// Sources and counts for `/documents/sources` and `/documents/stats`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct DocumentStats {
    pub total_documents: u64,
    pub by_source: std::collections::BTreeMap<String, u64>,
    pub by_language: std::collections::BTreeMap<String, u64>,
}

impl KnowledgeBase {
    /// Runs a deleting transaction under the write lock, then removes the deleted keys
    /// from both derived indexes. Returns the deleted keys.
    async fn delete_with(
        &self,
        f: impl FnOnce(&crate::store::Transaction<'_>) -> Result<Vec<u64>> + Send + 'static,
    ) -> Result<Vec<u64>> {
        let _guard = self.write_lock.lock().await;
        let store = self.store.clone();
        let (vectors, fulltext) = (self.vectors.clone(), self.fulltext.clone());
        tokio::task::spawn_blocking(move || -> Result<Vec<u64>> {
            let (keys, generation) = store.write_sync(|tx| {
                let keys = f(tx)?;
                let generation = if keys.is_empty() {
                    repo::generation(tx)?
                } else {
                    repo::bump_generation(tx)?
                };
                Ok((keys, generation))
            })?;
            if !keys.is_empty() {
                vectors.apply(&keys, &[], generation)?;
                fulltext.apply(&keys, &[], generation)?;
            }
            Ok(keys)
        })
        .await?
    }

    /// Deletes one document (chunk).
    #[tracing::instrument(skip(self))]
    pub async fn delete_document(&self, id: String) -> Result<DeleteOutcome> {
        let doc_id = id.clone();
        let keys = self
            .delete_with(move |tx| Ok(repo::delete_chunk(tx, &id)?.into_iter().collect()))
            .await?;
        Ok(if keys.is_empty() {
            DeleteOutcome {
                status: "not_found".into(),
                message: Some(format!("document '{doc_id}' not found")),
                doc_id,
            }
        } else {
            tracing::info!(doc_id = %doc_id, "document deleted");
            DeleteOutcome {
                status: "deleted".into(),
                message: Some(format!("document '{doc_id}' deleted")),
                doc_id,
            }
        })
    }

    /// Deletes several documents; unknown ids are skipped.
    pub async fn delete_documents(&self, ids: Vec<String>) -> Result<BatchDelete> {
        let mut out = BatchDelete {
            deleted: 0,
            skipped: 0,
            errors: 0,
            details: Vec::with_capacity(ids.len()),
        };
        for id in ids {
            match self.delete_document(id.clone()).await {
                Ok(o) if o.status == "deleted" => {
                    out.deleted += 1;
                    out.details.push(DeleteOutcome { message: None, ..o });
                }
                Ok(o) => {
                    out.skipped += 1;
                    out.details.push(o);
                }
                Err(e) => {
                    tracing::error!(doc_id = %id, error = %e, "delete failed");
                    out.errors += 1;
                    out.details.push(DeleteOutcome {
                        doc_id: id,
                        status: "error".into(),
                        message: Some("delete failed; see the server log".into()),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Deletes every document of a source; returns how many were deleted.
    pub async fn delete_source(&self, source: String) -> Result<u64> {
        let s = source.clone();
        let keys = self
            .delete_with(move |tx| repo::delete_source(tx, &s))
            .await?;
        tracing::info!(%source, deleted = keys.len(), "source deleted");
        Ok(keys.len() as u64)
    }

    /// Deletes every document whose metadata matches all conditions of the filter.
    pub async fn delete_by_filter(&self, filter: MetadataFilter) -> Result<u64> {
        let conds = filter.0;
        let keys = self
            .delete_with(move |tx| repo::delete_by_metadata(tx, &conds))
            .await?;
        tracing::info!(deleted = keys.len(), "documents deleted by filter");
        Ok(keys.len() as u64)
    }

    /// Every stored source.
    pub async fn sources(&self) -> Result<Vec<String>> {
        self.store.read(repo::source_names).await
    }

    /// Document counts by source and language.
    pub async fn document_stats(&self) -> Result<DocumentStats> {
        self.store
            .read(|c| {
                Ok(DocumentStats {
                    total_documents: repo::count_chunks(c)?,
                    by_source: repo::count_by(c, "source")?.into_iter().collect(),
                    by_language: repo::count_by(c, "language")?.into_iter().collect(),
                })
            })
            .await
    }
}
