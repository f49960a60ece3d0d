//! The OpenAPI description, generated from the handlers' annotations.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{kb, mcp, metrics, v1};

/// The `/api/v1` OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(title = "ragd knowledge base API", description = "Offline knowledge base: upload, scrape, parse, search, documents, tasks, re-embedding, health; the MCP server; the OpenAI- and Anthropic-compatible model routes under /v1."),
    paths(
        kb::health::health,
        kb::health::ready,
        kb::health::stats,
        kb::search::search,
        kb::query::query,
        kb::documents::list,
        kb::documents::get_one,
        kb::documents::delete_one,
        kb::documents::delete_batch,
        kb::documents::delete_by_source,
        kb::documents::delete_by_filter,
        kb::documents::sources,
        kb::documents::stats,
        kb::upload::upload,
        kb::upload::upload_async,
        kb::upload::upload_bulk,
        kb::upload::upload_zip,
        kb::scrape::scrape,
        kb::scrape::scrape_async,
        kb::tasks::list,
        kb::tasks::get_one,
        kb::tasks::cancel,
        kb::reindex::reindex,
        kb::backup::backup,
        kb::parse::parse,
        kb::parse::formats,
        kb::parse::sections,
        kb::parse::sections_stream,
        kb::parse::sections_incremental,
        metrics::metrics,
        mcp::http::post,
        mcp::http::delete,
        v1::openai::models::list,
        v1::openai::models::get,
        v1::openai::chat::completions,
        v1::openai::embeddings::embeddings,
        v1::openai::rerank::rerank,
        v1::anthropic::messages::create,
        v1::anthropic::messages::count_tokens,
    ),
    modifiers(&ApiKeyAuth),
    security(("api_key" = [])),
)]
pub struct ApiDoc;

struct ApiKeyAuth;

impl Modify for ApiKeyAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
        // `/mcp` and `/v1`: a user's api_key:api_secret (or token), or a server key.
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(utoipa::openapi::security::Http::new(
                utoipa::openapi::security::HttpAuthScheme::Bearer,
            )),
        );
        // `/v1/messages`: the same keys as `x-api-key`, as Anthropic's SDKs send them.
        components.add_security_scheme(
            "x_api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
    }
}
