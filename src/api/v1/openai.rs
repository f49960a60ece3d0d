//! OpenAI's API on `/v1`: `models`, `chat/completions`, `embeddings` and `rerank` (the
//! Jina/Cohere shape llama.cpp's server serves). Every route resolves its caller through
//! [`caller::resolve`](super::caller::resolve) and answers errors in OpenAI's shape
//! ([`OpenAiError`]); bodies come through [`OaiJson`], so malformed JSON, wrong types and
//! oversized bodies get that shape too.

pub mod chat;
pub mod chat_request;
pub mod chat_stream;
pub mod embeddings;
pub mod knowledge;
pub mod models;
pub mod rerank;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;

use super::caller::{self, Caller};
use super::openai_error::OpenAiError;
use crate::state::AppState;

/// The model id that answers from the knowledge base.
pub const KNOWLEDGE_BASE: &str = "knowledge-base";

/// The OpenAI routes, merged into `/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/models", get(models::list))
        .route("/models/{id}", get(models::get))
        .route("/chat/completions", post(chat::completions))
        .route("/embeddings", post(embeddings::embeddings))
        .route("/rerank", post(rerank::rerank))
}

/// The authenticated caller, or 401 in OpenAI's shape.
pub struct OaiCaller(pub Caller);

impl FromRequestParts<AppState> for OaiCaller {
    type Rejection = OpenAiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(caller::resolve(parts, state).await?))
    }
}

/// `Json<T>` with OpenAI's error shape: 400 for malformed or mistyped JSON, 413 if too
/// large.
pub struct OaiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OaiJson<T> {
    type Rejection = OpenAiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

fn json_rejection(rej: JsonRejection) -> OpenAiError {
    let e = OpenAiError::from(crate::api::extract::json_rejection(rej));
    if e.status == StatusCode::PAYLOAD_TOO_LARGE {
        return e.with_code("request_too_large");
    }
    e
}

/// 404 `model_not_found` for `model`.
pub fn model_not_found(model: &str) -> OpenAiError {
    OpenAiError::new(
        StatusCode::NOT_FOUND,
        format!("The model '{model}' does not exist; GET /v1/models lists the models"),
    )
    .with_code("model_not_found")
}
