//! The knowledge-base service: ingestion, search, documents and health, over the
//! store, the derived indexes and the embedder. No HTTP types here.

pub mod documents;
pub mod health;
pub mod indexes;
pub mod ingest;
pub mod language;
pub mod search;
pub mod types;

use std::sync::Arc;

use crate::ml::EmbedHandle;
use crate::retrieval::{FullTextIndex, VectorIndex};
use crate::store::Store;

pub use types::*;

/// The knowledge base. Cheap to share behind an `Arc`.
pub struct KnowledgeBase {
    store: Store,
    vectors: Arc<VectorIndex>,
    fulltext: Arc<FullTextIndex>,
    embedder: EmbedHandle,
    /// Serialises writes so SQLite and both indexes change in the same order.
    write_lock: tokio::sync::Mutex<()>,
}

impl KnowledgeBase {
    /// Wires the parts together; [`indexes::reconcile`] must have run on the indexes.
    pub fn new(
        store: Store,
        vectors: Arc<VectorIndex>,
        fulltext: Arc<FullTextIndex>,
        embedder: EmbedHandle,
    ) -> Self {
        Self {
            store,
            vectors,
            fulltext,
            embedder,
            write_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The embedder handle (for stats and health).
    pub fn embedder(&self) -> &EmbedHandle {
        &self.embedder
    }

    /// Saves the vector index if it changed; called periodically and at shutdown.
    pub async fn flush(&self) -> crate::error::Result<()> {
        let v = self.vectors.clone();
        tokio::task::spawn_blocking(move || v.save_if_dirty()).await??;
        Ok(())
    }
}
