//! Reading stored documents (chunks): one by id, or a page of them.

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
            vector_store_path: self.vectors.path().display().to_string(),
            embedding_model: self.embedder.name().to_owned(),
        })
    }
}
