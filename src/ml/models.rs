//! The models the services share, loaded once at start-up (in `state.rs`) and handed to
//! the knowledge base and the assistant alike: the embedder, the cross-encoder and the
//! LLM, each already on its own worker thread.

use super::llm::LlmSlot;
use super::reranker::RerankHandle;
use super::EmbedHandle;

/// Every model of the running server. Cloning clones the handles, not the models.
#[derive(Clone)]
pub struct Models {
    /// The sentence embedder (always present: ragd cannot index without it).
    pub embedder: EmbedHandle,
    /// The cross-encoder, when one is installed.
    pub reranker: Option<RerankHandle>,
    /// The LLM's slot: the current model, when one is installed or supplied (answers are
    /// extractive without it), switchable at run time.
    pub llm: LlmSlot,
}
