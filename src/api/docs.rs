//! `/openapi.json`, `/docs` (Swagger UI) and `/redoc`, with their scripts served from
//! the binary so the pages render with no network.

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::{Json, Router};
use utoipa::OpenApi as _;

use super::openapi::ApiDoc;
use crate::state::AppState;

const SWAGGER_JS: &[u8] = include_bytes!("../../assets/docs/swagger-ui-bundle.js");
const SWAGGER_CSS: &[u8] = include_bytes!("../../assets/docs/swagger-ui.css");
const REDOC_JS: &[u8] = include_bytes!("../../assets/docs/redoc.standalone.js");

const DOCS_HTML: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ragd API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });</script>
</body></html>"##;

const REDOC_HTML: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ragd API</title></head>
<body><redoc spec-url="/openapi.json" hide-download-button></redoc>
<script src="/docs/assets/redoc.standalone.js"></script>
</body></html>"#;

/// Routes for the docs pages and the OpenAPI document.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .route("/docs", get(|| async { Html(DOCS_HTML) }))
        .route("/redoc", get(|| async { Html(REDOC_HTML) }))
        .route(
            "/docs/assets/swagger-ui-bundle.js",
            get(|| async { asset("text/javascript", SWAGGER_JS) }),
        )
        .route(
            "/docs/assets/swagger-ui.css",
            get(|| async { asset("text/css", SWAGGER_CSS) }),
        )
        .route(
            "/docs/assets/redoc.standalone.js",
            get(|| async { asset("text/javascript", REDOC_JS) }),
        )
}

fn asset(content_type: &'static str, body: &'static [u8]) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
}
