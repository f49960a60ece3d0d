//! The assistant API under `/api/method/`: `assistant.api.<operation>`, plus `login` and
//! `logout`. Every answer is the envelope of DECISIONS.md.

pub mod actions;
pub mod auth;
pub mod chat;
pub mod conversations;
pub mod envelope;
pub mod limits;
pub mod onboarding;
pub mod params;
pub mod session;
pub mod settings;
pub mod tools;

use axum::{middleware, Router};

use crate::state::AppState;

/// Every route under `/api/method`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(session::routes())
        .merge(settings::routes())
        .merge(onboarding::routes())
        .merge(conversations::routes())
        .merge(tools::routes())
        .merge(actions::routes())
        .merge(chat::routes())
        .fallback(envelope::not_found)
        .method_not_allowed_fallback(envelope::method_not_allowed)
        // Adds X-RateLimit-* to responses of operations using `limits::RateLimited`.
        .layer(middleware::from_fn(limits::headers))
}
