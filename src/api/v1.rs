//! The model APIs other clients speak, on the same port: OpenAI's (`/v1/models`,
//! `/v1/chat/completions`, `/v1/embeddings`, `/v1/rerank`) and Anthropic's Messages API
//! (`/v1/messages`). Handlers are thin: they map the client's request onto the same
//! services the assistant and the knowledge base use (the completion core, the embedder,
//! the reranker, retrieval) and map the result back into the client's shape.
//!
//! Who is calling is resolved once for both ([`caller`]); each surface writes its own
//! error shape (an unknown `/v1` path answers in OpenAI's).

pub mod anthropic;
pub mod caller;
pub mod openai;
pub mod openai_error;

use axum::Router;

use crate::state::AppState;

/// Every `/v1` route, to be nested under `/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(openai::routes())
        .merge(anthropic::routes())
        .fallback(openai_error::not_found)
        .method_not_allowed_fallback(openai_error::method_not_allowed)
}
