//! Local models run with candle behind small synchronous traits, each on its own
//! thread behind a bounded channel. Nothing outside this module names candle.

pub mod device;
pub mod embed_worker;
pub mod embedder;
pub mod llm;
pub mod models;
pub mod pool;
pub mod priority;
pub mod pull;
pub mod quant;
pub mod remote;
pub mod reranker;
pub mod simd;

pub use embed_worker::{BulkExpected, EmbedHandle, EmbedWorkerOptions};
pub use embedder::{BertEmbedder, Precision, TokenCounter};
pub use llm::{LlmEngine, LlmHandle, LlmWorkerOptions};
pub use models::Models;

use thiserror::Error;

/// Errors from loading or running a model.
#[derive(Debug, Clone, Error)]
pub enum MlError {
    /// Model files are missing or malformed.
    #[error("model could not be loaded: {0}")]
    Load(String),
    /// The forward pass failed.
    #[error("inference failed: {0}")]
    Inference(String),
    /// The request cannot run on this model (e.g. a prompt longer than its window); the
    /// message is safe to show.
    #[error("{0}")]
    InvalidInput(String),
    /// The model's request queue is full.
    #[error("the model's request queue is full; retry shortly")]
    Overloaded,
    /// The model's worker thread has stopped.
    #[error("the model worker has stopped")]
    WorkerGone,
    /// A remote inference server cannot be reached or keeps failing; the message names
    /// the server and the last error, and is safe to show.
    #[error("{0}")]
    Unavailable(String),
}

impl From<candle_core::Error> for MlError {
    fn from(e: candle_core::Error) -> Self {
        MlError::Inference(e.to_string())
    }
}

/// A text embedding model: synchronous, driven by [`EmbedHandle`] on one thread.
pub trait Embedder: Send + 'static {
    /// Embeds token sequences (as [`TokenCounter::encode`] gives them), one
    /// L2-normalised vector each, in order. `pause` is called between steps of the work
    /// (between layers); the caller may run short, urgent passes through this same
    /// model from inside it.
    fn embed_tokens(
        &self,
        seqs: &[&[u32]],
        pause: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>, MlError>;
    /// Embeds `texts`, one L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MlError> {
        let seqs = self.token_counter().encode_batch(texts)?;
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        self.embed_tokens(&refs, &mut || {})
    }
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Tokens per text the model sees (longer texts are truncated), special tokens included.
    fn max_tokens(&self) -> usize;
    /// Counts and encodes tokens the way the model does, for chunk sizing and batching.
    fn token_counter(&self) -> TokenCounter;
    /// Short model name for stats and logs.
    fn name(&self) -> &str;
    /// The inference server that runs the model, when it is not this process.
    fn served_by(&self) -> Option<String> {
        None
    }
}
