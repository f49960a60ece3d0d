//! The installed LLM files and switching the running one: the admin's view of
//! `models_dir` (`list_models`) and the `llm_model` setting's effect (load the new file
//! beside the running model, switch, then save the choice).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{Assistant, AssistantError};
use crate::ml::llm::inspect;
use crate::ml::llm::slot::load_reason;

type Result<T, E = AssistantError> = std::result::Result<T, E>;

impl Assistant {
    /// Every GGUF under `models_dir` (architecture, parameters, quantization, context,
    /// size, whether ragd runs it and why not) and which one is running.
    pub async fn list_models(&self) -> Result<Value> {
        let dir = self.config.models_dir.clone();
        let active = self.models.llm.file();
        let models =
            tokio::task::spawn_blocking(move || inspect::installed(&dir, active.as_deref()))
                .await
                .map_err(|e| {
                    AssistantError::Internal(anyhow::Error::new(e).context("listing models"))
                })?;
        Ok(json!({
            "models": models,
            "can_switch": self.models.llm.can_switch(),
            "llm_failure": self.models.llm.failure(),
        }))
    }

    /// Switches the running LLM to `llm_model` (relative to `models_dir`; empty: the
    /// configuration's file). The old model keeps serving until the new one is loaded;
    /// a file that cannot be loaded leaves it in place and is a 400 with the reason.
    pub(crate) async fn switch_llm(&self, llm_model: &str) -> Result<Value> {
        let path: PathBuf = if llm_model.is_empty() {
            self.config.llm_model_path().ok_or_else(|| {
                AssistantError::BadRequest(
                    "setting 'llm_model': the configuration names no LLM file to go back to".into(),
                )
            })?
        } else {
            self.config.models_dir.join(llm_model)
        };
        if !path.is_file() {
            return Err(AssistantError::BadRequest(format!(
                "setting 'llm_model': {llm_model:?} is not a file under the models folder"
            )));
        }
        let info = self.models.llm.switch(path).await.map_err(|e| {
            let why = load_reason(&e);
            AssistantError::BadRequest(format!(
                "setting 'llm_model': the model was not switched: {why}"
            ))
        })?;
        Ok(json!({
            "name": info.name,
            "family": info.family,
            "context_length": info.context_length,
        }))
    }
}
