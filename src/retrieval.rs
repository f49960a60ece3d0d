//! Derived search indexes: usearch for vectors, tantivy for full text. Both can be
//! rebuilt from SQLite at any time; each records the store generation it reflects.
//! Nothing outside this module names usearch or tantivy.

pub mod conversations;
pub mod fulltext;
pub mod fusion;
pub mod vectors;

pub use fulltext::FullTextIndex;
pub use vectors::VectorIndex;

/// What an index found on disk when it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnDisk {
    /// Store generation the files reflect; `None` when missing or unreadable.
    pub generation: Option<u64>,
    /// Entries in the index.
    pub count: u64,
}
