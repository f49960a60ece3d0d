//! HTTP only: routing, extraction, auth and the mapping of results to the wire.
//! Handlers are thin: extract, call one service method, map the result.

pub mod assistant;
pub mod auth;
pub mod docs;
pub mod error;
pub mod extract;
pub mod kb;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod sse;
pub mod v1;
pub mod web;

use axum::extract::Request;
use axum::middleware;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use crate::state::AppState;

/// The whole HTTP application: `/api/v1`, `/api/method`, the docs pages and the web page
/// (`/`, `/web/*`).
pub fn app(state: AppState) -> Router {
    let kb_api = kb::routes(&state.config)
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));
    Router::new()
        .nest("/api/v1", kb_api)
        .nest("/api/method", assistant::routes())
        .nest("/v1", v1::routes())
        .merge(mcp::routes(state.clone()))
        .merge(docs::routes())
        .merge(web::routes())
        .merge(metrics::routes())
        .route_layer(middleware::from_fn(metrics::tag_route))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::count_requests,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            tracing::info_span!(
                "http",
                request_id = %uuid::Uuid::new_v4(),
                method = %req.method(),
                path = %req.uri().path(),
            )
        }))
        .with_state(state)
}
