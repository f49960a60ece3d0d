//! Anthropic's Messages API on `/v1`: `POST /v1/messages` (plain and streamed, with
//! `tool_use` and `tool_result` blocks) and `POST /v1/messages/count_tokens`. Every route
//! resolves its caller through [`caller::resolve`](super::caller::resolve) (Anthropic's
//! SDKs send `x-api-key`) and answers errors in Anthropic's shape ([`AnthropicError`]);
//! bodies come through [`AnthJson`], so malformed JSON, wrong types and oversized bodies
//! get that shape too.

pub mod error;
pub mod messages;
pub mod request;
pub mod stream;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::routing::post;
use axum::Router;
use serde::de::DeserializeOwned;

use super::caller::{self, Caller};
use crate::state::AppState;
pub use error::AnthropicError;

/// The Anthropic routes, merged into `/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/messages", post(messages::create))
        .route("/messages/count_tokens", post(messages::count_tokens))
}

/// The authenticated caller, or 401 in Anthropic's shape.
pub struct AnthCaller(pub Caller);

impl FromRequestParts<AppState> for AnthCaller {
    type Rejection = AnthropicError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(caller::resolve(parts, state).await?))
    }
}

/// `Json<T>` with Anthropic's error shape: 400 for malformed or mistyped JSON, 413 if too
/// large.
pub struct AnthJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AnthJson<T> {
    type Rejection = AnthropicError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rej) => Err(crate::api::extract::json_rejection(rej).into()),
        }
    }
}
