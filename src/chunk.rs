//! Structured document -> chunks. `retrieval` sizes chunks to the embedder's token
//! window, with heading context, so no stored text lies outside its vector.

pub mod retrieval;

pub use retrieval::{for_retrieval, RetrievalChunk};
