//! Derived search indexes: vectors behind the [`VectorStore`] trait (usearch is its
//! implementation), tantivy for full text. Both can be rebuilt from SQLite at any time;
//! each records the store generation it reflects. Nothing outside this module names
//! usearch or tantivy.

pub mod conversations;
pub mod fulltext;
pub mod fusion;
mod tantivy_index;
pub mod vectors;

pub use fulltext::FullTextIndex;
pub use vectors::{Hit, VectorIndex};

/// A vector index the knowledge base writes to and searches: the seam where another
/// engine (a Qdrant collection, say) would plug in. Keys are the store's chunk keys;
/// `generation` is the store generation the index reflects, so a stale index is found
/// and rebuilt from SQLite. Every method may block (I/O, locks): call from blocking
/// threads.
pub trait VectorStore: Send + Sync {
    /// Dimension of every vector.
    fn dim(&self) -> usize;
    /// Removes `remove`, then inserts or replaces `upsert`, and records `generation`.
    fn apply(
        &self,
        remove: &[u64],
        upsert: &[(u64, &[f32])],
        generation: u64,
    ) -> anyhow::Result<()>;
    /// The `k` nearest vectors to `query` by cosine similarity, nearest first.
    fn search(&self, query: &[f32], k: usize) -> anyhow::Result<Vec<Hit>>;
    /// The cosine similarity of `query` with each stored vector of `keys` (`None` for a
    /// key that has none).
    fn similarity(&self, query: &[f32], keys: &[u64]) -> anyhow::Result<Vec<Option<f32>>>;
    /// Number of vectors.
    fn count(&self) -> u64;
    /// Store generation of the last `apply`.
    fn generation(&self) -> u64;
    /// Makes every applied change durable; returns whether anything was written.
    fn flush(&self) -> anyhow::Result<bool>;
    /// Drops every vector (before a rebuild).
    fn clear(&self) -> anyhow::Result<()>;
    /// Where the vectors live (a file path, a URL), for statistics.
    fn location(&self) -> String;
}

/// What an index found on disk when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnDisk {
    /// Store generation the files reflect; `None` when missing or unreadable.
    pub generation: Option<u64>,
    /// Entries in the index.
    pub count: u64,
}
