//! Structured document -> chunks. `retrieval` sizes chunks to the embedder's token
//! window, with heading context, so no stored text lies outside its vector.

pub mod retrieval;
pub mod sections;

pub use retrieval::{for_retrieval, sentences, Chunker, RetrievalChunk};
