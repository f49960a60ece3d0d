//! The OpenAPI description, generated from the handlers' annotations.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::kb;

/// The `/api/v1` OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(title = "ragd knowledge base API", description = "Offline knowledge base: upload, search, documents, health."),
    paths(
        kb::health::health,
        kb::health::ready,
        kb::health::stats,
        kb::search::search,
        kb::documents::list,
        kb::documents::get_one,
        kb::upload::upload,
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
    }
}
