//! `GET /v1/models` and `GET /v1/models/{id}`: the LLM by its file name, the embedder and
//! the reranker (when installed) by their folder names, and `knowledge-base`.

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;

use super::{model_not_found, OaiCaller, KNOWLEDGE_BASE};
use crate::api::v1::openai_error::OpenAiError;
use crate::state::AppState;

/// One model, as OpenAI lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ModelObject {
    /// The id clients send as `model`.
    pub id: String,
    /// Always `model`.
    pub object: &'static str,
    /// Unix seconds (ragd reports the time of the request).
    pub created: i64,
    /// Always `ragd`.
    pub owned_by: &'static str,
    /// What the model does (a ragd extension): `chat`, `embedding`, `rerank` or
    /// `knowledge-base`.
    pub kind: &'static str,
}

/// The list shape.
#[derive(Debug, Serialize)]
pub struct ModelList {
    /// Always `list`.
    pub object: &'static str,
    /// The models.
    pub data: Vec<ModelObject>,
}

/// The id of the loaded LLM (its GGUF file name, or the remote model's name), if any.
pub fn llm_id(state: &AppState) -> Option<String> {
    let llm = state.models.llm.current()?;
    Some(
        state
            .models
            .llm
            .file()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| llm.info().name.clone()),
    )
}

/// Every model this server answers for.
pub fn installed(state: &AppState) -> Vec<ModelObject> {
    let created = unix_now();
    let model = |id: String, kind| ModelObject {
        id,
        object: "model",
        created,
        owned_by: "ragd",
        kind,
    };
    let mut out = Vec::new();
    if let Some(id) = llm_id(state) {
        out.push(model(id, "chat"));
    }
    out.push(model(state.models.embedder.name().to_owned(), "embedding"));
    if let Some(r) = &state.models.reranker {
        out.push(model(r.name().to_owned(), "rerank"));
    }
    out.push(model(KNOWLEDGE_BASE.to_owned(), "knowledge-base"));
    out
}

/// `GET /v1/models`.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    operation_id = "v1_models",
    description = "OpenAI's model list: the LLM (by its file name), the embedder, the reranker when installed, and `knowledge-base`. See docs/openai.md.",
    responses(
        (status = 200, description = "The response in OpenAI's shape", body = serde_json::Value),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("bearer" = [])),
)]
pub async fn list(State(state): State<AppState>, _caller: OaiCaller) -> Json<ModelList> {
    tracing::debug!("listing models");
    Json(ModelList {
        object: "list",
        data: installed(&state),
    })
}

/// `GET /v1/models/{id}`.
#[utoipa::path(
    get,
    path = "/v1/models/{id}",
    tag = "openai",
    operation_id = "v1_model",
    description = "One model of the list; 404 `model_not_found` otherwise.",
    responses(
        (status = 200, description = "The response in OpenAI's shape", body = serde_json::Value),
        (status = 400, description = "Invalid request", body = serde_json::Value),
        (status = 401, description = "Missing or wrong key", body = serde_json::Value),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<AppState>,
    _caller: OaiCaller,
    Path(id): Path<String>,
) -> Result<Json<ModelObject>, OpenAiError> {
    installed(&state)
        .into_iter()
        .find(|m| m.id == id)
        .map(Json)
        .ok_or_else(|| model_not_found(&id))
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
