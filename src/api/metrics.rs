//! `GET /metrics` (Prometheus text format) and the middleware that counts every
//! request by method, matched route and status, with its latency.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::auth;
use super::error::ApiError;
use crate::state::AppState;

/// The route label of requests that matched no route (so scanners cannot add series).
const UNMATCHED: &str = "unmatched";

/// `/metrics`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// The matched route, carried from the inner middleware to the outer one on the response.
#[derive(Clone)]
struct Route(String);

/// Inner middleware (a route layer: it runs only for matched routes): puts the route
/// pattern on the response for [`count_requests`].
pub async fn tag_route(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let mut response = next.run(req).await;
    if let Some(route) = route {
        // A nested router's fallback matches as a catch-all: that is no route either.
        if !route.contains("__private__") && !route.contains("{*") {
            response.extensions_mut().insert(Route(route));
        }
    }
    response
}

/// Outer middleware: counts every request, matched or not.
pub async fn count_requests(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(req).await;
    let route = response
        .extensions()
        .get::<Route>()
        .map_or(UNMATCHED, |r| r.0.as_str());
    state.telemetry.observe_request(
        &method,
        route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// The server's metrics in the Prometheus text format. Open like `/api/v1/health`,
/// unless `metrics_require_key` is set (and API keys are configured).
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if state.config.metrics_require_key && state.config.auth_enabled() {
        let Some(given) = headers.get(auth::HEADER) else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing API key: send it in the X-API-Key header",
            ));
        };
        let ok = given
            .to_str()
            .is_ok_and(|v| auth::key_matches(&state.config.api_keys, v));
        if !ok {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "invalid API key"));
        }
    }
    let text = state.metrics_text().await?;
    Ok((
        [(header::CONTENT_TYPE, crate::telemetry::CONTENT_TYPE)],
        text,
    )
        .into_response())
}
