//! `/health`, `/health/ready`, `/health/stats` (no key needed).

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::error::ApiError;
use crate::kb::Component;
use crate::state::AppState;

/// Basic health.
#[derive(Serialize, ToSchema)]
pub struct Health {
    pub status: String,
    pub version: String,
    pub timestamp: String,
}

/// Component readiness.
#[derive(Serialize, ToSchema)]
pub struct Ready {
    /// True when the components the API cannot work without (embedder, vector store) are healthy.
    pub ready: bool,
    pub components: Vec<Component>,
    pub timestamp: String,
}

/// System statistics.
#[derive(Serialize, ToSchema)]
pub struct Stats {
    pub document_count: u64,
    pub sources_count: u64,
    pub vector_store_path: String,
    pub collection_name: String,
    pub embedding_model: String,
    pub llm_model: String,
    pub reranker_enabled: bool,
    pub api_auth_enabled: bool,
    pub timestamp: String,
    /// Seconds spent parsing, embedding and storing, and sources and chunks ingested,
    /// since start-up.
    #[schema(value_type = Object)]
    pub ingestion: crate::kb::timings::StageSnapshot,
}

/// Basic health: the process is up.
#[utoipa::path(get, path = "/api/v1/health", tag = "health", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health {
        status: "healthy".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        timestamp: crate::time::now_iso(),
    })
}

/// Readiness of each component, checked for real on every call.
#[utoipa::path(get, path = "/api/v1/health/ready", tag = "health", responses((status = 200, body = Ready)))]
pub async fn ready(State(state): State<AppState>) -> Json<Ready> {
    let mut components = state.kb.health_components().await;
    let llm = state.kb.check_llm().await;
    // The LLM is optional (answers are extractive without one), but one that is loaded
    // and fails its probe makes the server not ready.
    let ready = components.iter().all(|c| c.healthy) && (llm.healthy || state.kb.llm().is_none());
    components.push(llm);
    components.push(state.kb.check_reranker().await);
    Json(Ready {
        ready,
        components,
        timestamp: crate::time::now_iso(),
    })
}

/// Counts and configuration.
#[utoipa::path(get, path = "/api/v1/health/stats", tag = "health", responses((status = 200, body = Stats)))]
pub async fn stats(State(state): State<AppState>) -> Result<Json<Stats>, ApiError> {
    let s = state.kb.stats().await?;
    Ok(Json(Stats {
        document_count: s.document_count,
        sources_count: s.sources_count,
        vector_store_path: s.vector_store_path,
        collection_name: state.config.collection_name.clone(),
        embedding_model: s.embedding_model,
        llm_model: state
            .kb
            .llm()
            .map(|g| g.info().name.clone())
            .unwrap_or_else(|| "none".into()),
        reranker_enabled: state.kb.reranker().is_some(),
        api_auth_enabled: state.config.auth_enabled(),
        ingestion: state.kb.stage_times(),
        timestamp: crate::time::now_iso(),
    }))
}
