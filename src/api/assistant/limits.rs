//! Rate limits on the wire. Add the extractor to a handler and it is limited:
//!
//! ```ignore
//! async fn execute_tool(limited: RateLimited<Tools>, State(s): State<AppState>, p: Params) -> Result<Response, AssistantError> {
//!     let user = limited.user; // an authenticated CurrentUser
//!     ...
//! }
//! ```
//!
//! The extractor authenticates (401), counts the request in the scope (`Chat` or `Tools`;
//! 429 envelope with `Retry-After` when over), and the [`headers`] middleware, layered
//! over every `/api/method` route in `api::assistant::routes`, then adds
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` to whatever
//! response the handler gives, success or error. Nothing else to wire.

use std::marker::PhantomData;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;

use super::auth::CurrentUser;
pub use crate::assistant::ratelimit::{RateInfo, Scope};
use crate::state::AppState;

/// Marker of a rate-limit scope for [`RateLimited`].
pub trait LimitScope: Send + Sync + 'static {
    /// The scope counted.
    const SCOPE: Scope;
}

/// Chat, conversation and onboarding operations.
pub struct Chat;
/// Tool executions (`execute_tool`, `confirm_action`).
pub struct Tools;

impl LimitScope for Chat {
    const SCOPE: Scope = Scope::Chat;
}
impl LimitScope for Tools {
    const SCOPE: Scope = Scope::Tools;
}

/// An authenticated user whose request was counted against scope `S`.
pub struct RateLimited<S> {
    /// The caller.
    pub user: CurrentUser,
    /// The window after this request.
    pub info: RateInfo,
    _scope: PhantomData<S>,
}

/// Where the extractor leaves the window for the [`headers`] middleware.
#[derive(Clone, Default)]
struct Slot(Arc<Mutex<Option<RateInfo>>>);

impl<S: LimitScope> FromRequestParts<AppState> for RateLimited<S> {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let user = CurrentUser::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let slot = parts.extensions.get::<Slot>().cloned();
        match state.assistant.limits.check(&user.id, S::SCOPE) {
            Ok(info) => {
                if let Some(s) = slot {
                    *s.0.lock() = Some(info);
                }
                Ok(Self {
                    user,
                    info,
                    _scope: PhantomData,
                })
            }
            Err((info, err)) => {
                let mut resp = err.into_response();
                set_headers(resp.headers_mut(), &info);
                Err(resp)
            }
        }
    }
}

/// Middleware: adds the `X-RateLimit-*` headers to responses of rate-limited operations.
pub async fn headers(mut req: Request, next: Next) -> Response {
    let slot = Slot::default();
    req.extensions_mut().insert(slot.clone());
    let mut resp = next.run(req).await;
    let info = *slot.0.lock();
    if let Some(info) = info {
        set_headers(resp.headers_mut(), &info);
    }
    resp
}

fn set_headers(h: &mut HeaderMap, info: &RateInfo) {
    h.insert("x-ratelimit-limit", HeaderValue::from(info.limit));
    h.insert("x-ratelimit-remaining", HeaderValue::from(info.remaining));
    h.insert("x-ratelimit-reset", HeaderValue::from(info.reset));
}
