//! The assistant's settings: one typed record stored as JSON in SQLite, changed one
//! validated key at a time (`update`, used by the `update_setting` tool) or as a
//! validated patch (`apply`, used by onboarding). Also the two read views of the API:
//! the admin view (settings plus server configuration, secrets masked) and the
//! client-safe configuration open to guests.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::ratelimit::WINDOW_SECS;
use super::AssistantError;
use crate::config::Config;
use crate::ml::llm::LlmSlot;
use crate::store::{settings as repo, Store};

type Result<T, E = AssistantError> = std::result::Result<T, E>;

/// Modules an installation can enable (tool categories of DECISIONS.md).
pub const MODULES: &[&str] = &["knowledge_base", "conversations", "system"];

/// Tones the assistant can take.
pub const TONES: &[&str] = &["professional", "friendly", "concise", "formal", "casual"];

/// The settings record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AssistantSettings {
    /// Shown by clients and used in the system prompt.
    pub company_name: String,
    /// Free text (onboarding offers a list).
    pub industry: String,
    /// Subset of [`MODULES`].
    pub enabled_modules: Vec<String>,
    /// ISO 639-1 code the assistant answers in by default.
    pub primary_language: String,
    /// One of [`TONES`].
    pub assistant_tone: String,
    /// Kept for clients that show it; always `true`: high-risk tools never run without
    /// confirmation (DECISIONS.md), so setting it to `false` is refused.
    pub require_confirmation_for_high_risk: bool,
    /// URLs given as knowledge sources (scraped when onboarding is executed).
    pub knowledge_sources: Vec<String>,
    /// Extra instructions added to the assistant's system prompt.
    pub system_prompt: String,
    /// Default of `auto_execute_tools` when a chat request does not say.
    pub auto_execute_tools: bool,
    /// Whether an onboarding configuration has been executed.
    pub onboarding_completed: bool,
    /// The LLM file chosen by an administrator, relative to `models_dir` (as `ragd models
    /// list` shows it); empty: the configuration's `llm_model` decides. Changing it
    /// switches the running model first and is saved only when the new one loaded.
    pub llm_model: String,
}

impl Default for AssistantSettings {
    fn default() -> Self {
        Self {
            company_name: String::new(),
            industry: String::new(),
            enabled_modules: MODULES.iter().map(|m| m.to_string()).collect(),
            primary_language: "en".into(),
            assistant_tone: "professional".into(),
            require_confirmation_for_high_risk: true,
            knowledge_sources: Vec::new(),
            system_prompt: String::new(),
            auto_execute_tools: true,
            onboarding_completed: false,
            llm_model: String::new(),
        }
    }
}

/// Keys `update` accepts (every field of [`AssistantSettings`]).
pub const KEYS: &[&str] = &[
    "company_name",
    "industry",
    "enabled_modules",
    "primary_language",
    "assistant_tone",
    "require_confirmation_for_high_risk",
    "knowledge_sources",
    "system_prompt",
    "auto_execute_tools",
    "onboarding_completed",
    "llm_model",
];

/// The settings service; cheap to clone.
#[derive(Clone)]
pub struct Settings {
    store: Store,
    config: Arc<Config>,
    clock: crate::time::Clock,
    /// The running LLM, when the server has one slot to report (else the configuration
    /// is reported).
    llm: Option<LlmSlot>,
}

impl Settings {
    /// The service over `store`.
    pub fn new(store: Store, config: Arc<Config>, clock: crate::time::Clock) -> Self {
        Self {
            store,
            config,
            clock,
            llm: None,
        }
    }

    /// Reports the running LLM from `slot` (the model in use after a switch, or why none
    /// could be loaded) instead of the configured file.
    pub fn with_llm(mut self, slot: LlmSlot) -> Self {
        self.llm = Some(slot);
        self
    }

    /// The file of the running LLM (else the configured one) and why none runs.
    fn llm_state(&self) -> (Option<String>, bool, Option<String>) {
        match &self.llm {
            Some(slot) => (
                slot.file()
                    .or_else(|| self.config.llm_model_path())
                    .map(|p| p.display().to_string()),
                slot.is_some(),
                slot.failure(),
            ),
            None => {
                let path = self.config.llm_model_path();
                let present = path.as_ref().is_some_and(|p| p.is_file());
                (path.map(|p| p.display().to_string()), present, None)
            }
        }
    }

    /// The current settings (defaults until first saved).
    pub async fn get(&self) -> Result<AssistantSettings> {
        let raw = self.store.read(repo::get).await?;
        Ok(match raw {
            Some(s) => serde_json::from_str(&s).map_err(|e| {
                AssistantError::Internal(anyhow::Error::new(e).context("stored settings"))
            })?,
            None => AssistantSettings::default(),
        })
    }

    /// Sets one key after validating its value; returns the new settings.
    pub async fn update(&self, key: &str, value: Value) -> Result<AssistantSettings> {
        let mut patch = Map::new();
        patch.insert(key.to_owned(), value);
        self.apply(patch).await
    }

    /// Validates every key of `patch`, then saves them together (all or nothing).
    pub async fn apply(&self, patch: Map<String, Value>) -> Result<AssistantSettings> {
        let mut clean = Map::new();
        for (k, v) in patch {
            let v = validate(&k, v)?;
            clean.insert(k, v);
        }
        let keys: Vec<String> = clean.keys().cloned().collect();
        let now = self.clock.now_iso();
        let saved = self
            .store
            .write(move |tx| {
                let mut current = match repo::get(tx)? {
                    Some(s) => serde_json::from_str::<Value>(&s).map_err(anyhow::Error::new)?,
                    None => serde_json::to_value(AssistantSettings::default())
                        .map_err(anyhow::Error::new)?,
                };
                if let Value::Object(obj) = &mut current {
                    obj.extend(clean);
                }
                let typed: AssistantSettings =
                    serde_json::from_value(current).map_err(anyhow::Error::new)?;
                let text = serde_json::to_string(&typed).map_err(anyhow::Error::new)?;
                repo::put(tx, &text, &now)?;
                Ok(typed)
            })
            .await?;
        tracing::info!(keys = ?keys, "settings updated");
        Ok(saved)
    }

    /// `get_settings`: the record plus the server's configuration, secrets masked.
    pub async fn admin_view(&self) -> Result<Value> {
        let s = self.get().await?;
        let c = &self.config;
        let (llm_file, llm_loaded, llm_failure) = self.llm_state();
        Ok(json!({
            "settings": s,
            "server": {
                "version": env!("CARGO_PKG_VERSION"),
                "collection_name": c.collection_name,
                "embedding_model": c.embedding_model,
                "reranker_model": c.reranker_model,
                "llm_model": llm_file,
                "llm_loaded": llm_loaded,
                "llm_failure": llm_failure,
                "llm_max_tokens": c.llm_max_tokens,
                "llm_temperature": c.llm_temperature,
                "jwt_secret": c.jwt_secret.as_deref().map(mask),
                "bearer_tokens_enabled": c.jwt_secret.is_some(),
                "api_keys": c.api_keys.iter().map(|k| mask(k)).collect::<Vec<_>>(),
                "rate_limits": rate_limits(c),
                "action_ttl_secs": c.action_ttl_secs,
                "conversation_retention_days": c.conversation_retention_days,
                "max_upload_bytes": c.max_upload_bytes,
                "scrape_allow_private": c.scrape_allow_private,
            },
        }))
    }

    /// `get_config`: only values a client may see, guests included.
    pub async fn client_config(&self) -> Result<Value> {
        let s = self.get().await?;
        let (_, llm, _) = self.llm_state();
        Ok(json!({
            "company_name": s.company_name,
            "primary_language": s.primary_language,
            "assistant_tone": s.assistant_tone,
            "enabled_modules": s.enabled_modules,
            "require_confirmation_for_high_risk": true,
            "onboarding_completed": s.onboarding_completed,
            "llm_available": llm,
            "answer_mode": if llm { "generative" } else { "extractive" },
            "rate_limits": rate_limits(&self.config),
            "version": env!("CARGO_PKG_VERSION"),
        }))
    }
}

fn rate_limits(c: &Config) -> Value {
    json!({"chat": c.rate_limit_chat, "tools": c.rate_limit_tools, "window_secs": WINDOW_SECS})
}

/// `abcd…` for a secret: enough to tell keys apart, never enough to use one.
fn mask(secret: &str) -> String {
    let head: String = secret.chars().take(4).collect();
    if secret.chars().count() <= 8 {
        "********".into()
    } else {
        format!("{head}********")
    }
}

fn bad(key: &str, why: impl std::fmt::Display) -> AssistantError {
    AssistantError::BadRequest(format!("setting '{key}': {why}"))
}

fn text(key: &str, v: Value, max: usize) -> Result<Value> {
    match v {
        Value::String(s) if s.chars().count() <= max => Ok(Value::String(s.trim().to_owned())),
        Value::String(_) => Err(bad(key, format!("at most {max} characters"))),
        _ => Err(bad(key, "must be a string")),
    }
}

fn strings(key: &str, v: Value) -> Result<Vec<String>> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.trim().to_owned()),
                _ => Err(bad(key, "must be a list of strings")),
            })
            .collect(),
        _ => Err(bad(key, "must be a list of strings")),
    }
}

/// Checks one key's value and returns it normalised.
pub fn validate(key: &str, v: Value) -> Result<Value> {
    match key {
        "company_name" | "industry" => text(key, v, 200),
        "system_prompt" => text(key, v, 4000),
        "primary_language" => {
            let code = match v {
                Value::String(s) => s.trim().to_lowercase(),
                _ => return Err(bad(key, "must be an ISO 639-1 code such as 'en'")),
            };
            if isolang::Language::from_639_1(&code).is_none() {
                return Err(bad(
                    key,
                    format!("'{code}' is not an ISO 639-1 language code"),
                ));
            }
            Ok(Value::String(code))
        }
        "assistant_tone" => match v {
            Value::String(s) if TONES.contains(&s.trim().to_lowercase().as_str()) => {
                Ok(Value::String(s.trim().to_lowercase()))
            }
            _ => Err(bad(key, format!("must be one of {}", TONES.join(", ")))),
        },
        "enabled_modules" => {
            let mut mods = strings(key, v)?;
            if let Some(m) = mods.iter().find(|m| !MODULES.contains(&m.as_str())) {
                return Err(bad(
                    key,
                    format!("unknown module '{m}' (known: {})", MODULES.join(", ")),
                ));
            }
            mods.dedup();
            Ok(json!(mods))
        }
        "knowledge_sources" => {
            let urls = strings(key, v)?;
            if urls.len() > 50 {
                return Err(bad(key, "at most 50 URLs"));
            }
            for u in &urls {
                crate::kb::scrape::canonical_url(u).map_err(|e| bad(key, e))?;
            }
            Ok(json!(urls))
        }
        "require_confirmation_for_high_risk" => match v {
            Value::Bool(true) => Ok(Value::Bool(true)),
            Value::Bool(false) => Err(bad(
                key,
                "high-risk actions always require confirmation; it cannot be turned off",
            )),
            _ => Err(bad(key, "must be a boolean")),
        },
        "llm_model" => llm_model(v),
        "auto_execute_tools" | "onboarding_completed" => match v {
            Value::Bool(b) => Ok(Value::Bool(b)),
            _ => Err(bad(key, "must be a boolean")),
        },
        other => Err(AssistantError::BadRequest(format!(
            "unknown setting '{other}' (known: {})",
            KEYS.join(", ")
        ))),
    }
}

/// An installed GGUF's path relative to `models_dir`: no absolute path, no `..`, a
/// `.gguf` name (or empty, for the configuration's choice).
fn llm_model(v: Value) -> Result<Value> {
    let key = "llm_model";
    let name = match v {
        Value::String(s) => s.trim().to_owned(),
        _ => return Err(bad(key, "must be a string")),
    };
    if name.is_empty() {
        return Ok(Value::String(name));
    }
    let p = std::path::Path::new(&name);
    let inside = p
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside || name.chars().count() > 300 {
        return Err(bad(
            key,
            "must be a file name under the models folder, as `ragd models list` shows it",
        ));
    }
    if !p
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        return Err(bad(key, "must name a .gguf file"));
    }
    Ok(Value::String(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_per_key() {
        assert_eq!(
            validate("primary_language", json!("EN")).unwrap(),
            json!("en")
        );
        assert!(validate("primary_language", json!("xx")).is_err());
        assert!(validate("assistant_tone", json!("angry")).is_err());
        assert!(validate("enabled_modules", json!(["nope"])).is_err());
        assert!(validate("knowledge_sources", json!(["ftp://x"])).is_err());
        assert!(validate("require_confirmation_for_high_risk", json!(false)).is_err());
        assert!(validate("nope", json!(1)).is_err());
        assert_eq!(
            validate("llm_model", json!(" llm/a.gguf ")).unwrap(),
            json!("llm/a.gguf")
        );
        assert_eq!(validate("llm_model", json!("")).unwrap(), json!(""));
        for bad in ["../a.gguf", "/etc/a.gguf", "a.bin", "llm/../../a.gguf"] {
            assert!(validate("llm_model", json!(bad)).is_err(), "{bad}");
        }
        assert_eq!(mask("abcdefghijkl"), "abcd********");
        assert_eq!(mask("short"), "********");
    }
}
