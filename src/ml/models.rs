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
    /// Where each of them runs.
    pub placed: Placed,
}

/// Where one model runs and in what arithmetic, as the start-up log and `/health/ready`
/// name them.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// `cpu (2 threads, avx512-vnni kernels)`, `cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB,
    /// compute 9.0)`, or the inference server's address.
    pub device: String,
    /// The forward pass's arithmetic: `int8`, `bf16`, `f32`, `f16`, `ragd-cpu`, `remote`.
    pub arithmetic: String,
}

/// Where every model runs.
#[derive(Clone, Debug, Default)]
pub struct Placed {
    pub embedder: Runs,
    /// `None` without a reranker.
    pub reranker: Option<Runs>,
    /// The local engine's device (the model itself can be switched at run time), or the
    /// LLM server's address.
    pub llm: Runs,
}
