//! One layer of settings (`ragd.toml`, the environment, the flags) and how the file and
//! the environment are read into one.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::Deserialize;

use super::*;

/// One layer of settings: every field optional. The file, the environment and the
/// flags each produce one, and they are applied in that order over the defaults.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub data_dir: Option<PathBuf>,
    pub models_dir: Option<PathBuf>,
    pub embedding_model: Option<String>,
    pub api_keys: Option<KeyList>,
    pub collection_name: Option<String>,
    pub max_upload_bytes: Option<u64>,
    pub embed_batch_size: Option<usize>,
    pub embed_batch_tokens: Option<usize>,
    pub embed_precision: Option<crate::ml::Precision>,
    pub device: Option<crate::ml::device::DeviceChoice>,
    pub embed_queue_capacity: Option<usize>,
    pub embed_cache_mb: Option<usize>,
    pub model_nice: Option<i32>,
    pub search_threads: Option<usize>,
    pub search_queue: Option<usize>,
    pub max_concurrent_answers: Option<usize>,
    pub answer_queue: Option<usize>,
    pub max_queue_wait_secs: Option<u64>,
    pub answer_target_secs: Option<u64>,
    pub log_format: Option<LogFormat>,
    pub pdfium_library: Option<PathBuf>,
    pub ocr_languages: Option<String>,
    pub max_concurrent_parses: Option<usize>,
    pub reranker_model: Option<String>,
    pub scrape_allow_private: Option<bool>,
    pub scrape_allowed_hosts: Option<KeyList>,
    pub max_scrape_bytes: Option<u64>,
    pub task_workers: Option<usize>,
    pub max_bulk_files: Option<usize>,
    pub max_zip_entries: Option<usize>,
    pub max_zip_total_bytes: Option<u64>,
    pub llm_model: Option<String>,
    pub llm_threads: Option<usize>,
    pub llm_max_tokens: Option<usize>,
    pub llm_temperature: Option<f64>,
    pub llm_prompt_cache_mb: Option<usize>,
    pub llm_kv_cache: Option<crate::ml::llm::KvType>,
    pub llm_parallel: Option<usize>,
    pub llm_kv_pool_mb: Option<usize>,
    pub jwt_secret: Option<String>,
    pub action_ttl_secs: Option<u64>,
    pub rate_limit_chat: Option<u32>,
    pub rate_limit_tools: Option<u32>,
    pub conversation_retention_days: Option<u64>,
    pub llm_url: Option<String>,
    pub llm_api_key: Option<String>,
    pub llm_remote_model: Option<String>,
    pub llm_context_length: Option<usize>,
    pub llm_remote_api: Option<RemoteLlmApi>,
    pub llm_remote_parallel: Option<usize>,
    pub embed_url: Option<String>,
    pub embed_api: Option<EmbedApi>,
    pub embed_api_key: Option<String>,
    pub embed_remote_model: Option<String>,
    pub rerank_url: Option<String>,
    pub rerank_api: Option<RerankApi>,
    pub rerank_api_key: Option<String>,
    pub rerank_remote_model: Option<String>,
    pub remote_timeout_secs: Option<u64>,
    pub reembed_on_change: Option<bool>,
    pub metrics_require_key: Option<bool>,
    pub watch_dirs: Option<KeyList>,
    pub watch_keep_deleted: Option<bool>,
}

/// API keys as a TOML array or a comma-separated string.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum KeyList {
    List(Vec<String>),
    Csv(String),
}

impl KeyList {
    pub(super) fn into_vec(self) -> Vec<String> {
        match self {
            KeyList::List(v) => v,
            KeyList::Csv(s) => s.split(',').map(str::to_owned).collect(),
        }
        .into_iter()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect()
    }
}

impl Layer {
    /// Reads a `ragd.toml` layer.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
    }

    /// Reads the environment layer from a snapshot of variables.
    pub fn from_env(vars: &HashMap<String, String>) -> anyhow::Result<Self> {
        let get = |k: &str| vars.get(k).filter(|v| !v.is_empty()).cloned();
        let parse = |k: &str| -> anyhow::Result<Option<u64>> {
            get(k)
                .map(|v| {
                    v.parse::<u64>()
                        .with_context(|| format!("{k}={v:?} is not a number"))
                })
                .transpose()
        };
        let log_format = match get("RAGD_LOG_FORMAT").as_deref() {
            None => None,
            Some("text") => Some(LogFormat::Text),
            Some("json") => Some(LogFormat::Json),
            Some(other) => bail!("RAGD_LOG_FORMAT={other:?}: expected text or json"),
        };
        Ok(Self {
            host: get("RAGD_HOST"),
            port: parse("RAGD_PORT")?
                .map(|p| u16::try_from(p).context("RAGD_PORT out of range"))
                .transpose()?,
            data_dir: get("RAGD_DATA_DIR").map(PathBuf::from),
            models_dir: get("RAGD_MODELS_DIR").map(PathBuf::from),
            embedding_model: get("RAGD_EMBEDDING_MODEL"),
            // `API_KEYS` is the contract's setting name; `RAGD_API_KEYS` wins if both are set.
            // Present-but-empty still counts: it turns auth off explicitly.
            api_keys: vars
                .get("RAGD_API_KEYS")
                .or_else(|| vars.get("API_KEYS"))
                .map(|v| KeyList::Csv(v.clone())),
            collection_name: get("RAGD_COLLECTION_NAME"),
            max_upload_bytes: parse("RAGD_MAX_UPLOAD_BYTES")?,
            embed_batch_size: parse("RAGD_EMBED_BATCH_SIZE")?.map(|v| v as usize),
            embed_batch_tokens: parse("RAGD_EMBED_BATCH_TOKENS")?.map(|v| v as usize),
            embed_precision: get("RAGD_EMBED_PRECISION")
                .map(|v| {
                    v.parse()
                        .map_err(|e| anyhow::anyhow!("RAGD_EMBED_PRECISION={e}"))
                })
                .transpose()?,
            device: get("RAGD_DEVICE")
                .map(|v| v.parse().map_err(|e| anyhow::anyhow!("RAGD_DEVICE: {e}")))
                .transpose()?,
            embed_queue_capacity: parse("RAGD_EMBED_QUEUE_CAPACITY")?.map(|v| v as usize),
            embed_cache_mb: parse("RAGD_EMBED_CACHE_MB")?.map(|v| v as usize),
            model_nice: parse("RAGD_MODEL_NICE")?.map(|v| i32::try_from(v).unwrap_or(i32::MAX)),
            search_threads: parse("RAGD_SEARCH_THREADS")?.map(|v| v as usize),
            search_queue: parse("RAGD_SEARCH_QUEUE")?.map(|v| v as usize),
            max_concurrent_answers: parse("RAGD_MAX_CONCURRENT_ANSWERS")?.map(|v| v as usize),
            answer_queue: parse("RAGD_ANSWER_QUEUE")?.map(|v| v as usize),
            max_queue_wait_secs: parse("RAGD_MAX_QUEUE_WAIT_SECS")?,
            answer_target_secs: parse("RAGD_ANSWER_TARGET_SECS")?,
            log_format,
            pdfium_library: get("RAGD_PDFIUM_LIBRARY").map(PathBuf::from),
            ocr_languages: get("RAGD_OCR_LANGUAGES"),
            max_concurrent_parses: parse("RAGD_MAX_CONCURRENT_PARSES")?.map(|v| v as usize),
            reranker_model: get("RAGD_RERANKER_MODEL"),
            scrape_allow_private: match get("SCRAPE_ALLOW_PRIVATE")
                .or_else(|| get("RAGD_SCRAPE_ALLOW_PRIVATE"))
                .as_deref()
            {
                None => None,
                Some("1" | "true" | "yes" | "on") => Some(true),
                Some("0" | "false" | "no" | "off") => Some(false),
                Some(other) => bail!("SCRAPE_ALLOW_PRIVATE={other:?}: expected true or false"),
            },
            scrape_allowed_hosts: get("SCRAPE_ALLOWED_HOSTS")
                .or_else(|| get("RAGD_SCRAPE_ALLOWED_HOSTS"))
                .map(KeyList::Csv),
            max_scrape_bytes: parse("RAGD_MAX_SCRAPE_BYTES")?,
            task_workers: parse("RAGD_TASK_WORKERS")?.map(|v| v as usize),
            max_bulk_files: parse("RAGD_MAX_BULK_FILES")?.map(|v| v as usize),
            max_zip_entries: parse("RAGD_MAX_ZIP_ENTRIES")?.map(|v| v as usize),
            max_zip_total_bytes: parse("RAGD_MAX_ZIP_TOTAL_BYTES")?,
            llm_model: get("RAGD_LLM_MODEL"),
            llm_threads: parse("RAGD_LLM_THREADS")?.map(|v| v as usize),
            llm_max_tokens: parse("RAGD_LLM_MAX_TOKENS")?.map(|v| v as usize),
            llm_temperature: get("RAGD_LLM_TEMPERATURE")
                .map(|v| {
                    v.parse::<f64>()
                        .with_context(|| format!("RAGD_LLM_TEMPERATURE={v:?} is not a number"))
                })
                .transpose()?,
            llm_prompt_cache_mb: parse("RAGD_LLM_PROMPT_CACHE_MB")?.map(|v| v as usize),
            llm_parallel: parse("RAGD_LLM_PARALLEL")?.map(|v| v as usize),
            llm_kv_pool_mb: parse("RAGD_LLM_KV_POOL_MB")?.map(|v| v as usize),
            llm_kv_cache: get("RAGD_LLM_KV_CACHE")
                .map(|v| {
                    crate::ml::llm::KvType::parse(&v)
                        .with_context(|| format!("RAGD_LLM_KV_CACHE={v:?} is not f16 or f32"))
                })
                .transpose()?,
            jwt_secret: get("JWT_SECRET").or_else(|| get("RAGD_JWT_SECRET")),
            action_ttl_secs: parse("RAGD_ACTION_TTL_SECS")?,
            rate_limit_chat: parse("RAGD_RATE_LIMIT_CHAT")?.map(|v| v as u32),
            rate_limit_tools: parse("RAGD_RATE_LIMIT_TOOLS")?.map(|v| v as u32),
            conversation_retention_days: parse("RAGD_CONVERSATION_RETENTION_DAYS")?,
            llm_url: get("RAGD_LLM_URL"),
            llm_api_key: get("RAGD_LLM_API_KEY"),
            llm_remote_model: get("RAGD_LLM_REMOTE_MODEL"),
            llm_context_length: parse("RAGD_LLM_CONTEXT_LENGTH")?.map(|v| v as usize),
            llm_remote_api: get("RAGD_LLM_REMOTE_API")
                .map(|v| {
                    v.parse()
                        .map_err(|e| anyhow::anyhow!("RAGD_LLM_REMOTE_API={e}"))
                })
                .transpose()?,
            llm_remote_parallel: parse("RAGD_LLM_REMOTE_PARALLEL")?.map(|v| v as usize),
            embed_url: get("RAGD_EMBED_URL"),
            embed_api: get("RAGD_EMBED_API")
                .map(|v| v.parse().map_err(|e| anyhow::anyhow!("RAGD_EMBED_API={e}")))
                .transpose()?,
            embed_api_key: get("RAGD_EMBED_API_KEY"),
            embed_remote_model: get("RAGD_EMBED_REMOTE_MODEL"),
            rerank_url: get("RAGD_RERANK_URL"),
            rerank_api: get("RAGD_RERANK_API")
                .map(|v| {
                    v.parse()
                        .map_err(|e| anyhow::anyhow!("RAGD_RERANK_API={e}"))
                })
                .transpose()?,
            rerank_api_key: get("RAGD_RERANK_API_KEY"),
            rerank_remote_model: get("RAGD_RERANK_REMOTE_MODEL"),
            remote_timeout_secs: parse("RAGD_REMOTE_TIMEOUT_SECS")?,
            reembed_on_change: match get("RAGD_REEMBED_ON_CHANGE").as_deref() {
                None => None,
                Some("1" | "true" | "yes" | "on") => Some(true),
                Some("0" | "false" | "no" | "off") => Some(false),
                Some(other) => bail!("RAGD_REEMBED_ON_CHANGE={other:?}: expected true or false"),
            },
            metrics_require_key: match get("RAGD_METRICS_REQUIRE_KEY").as_deref() {
                None => None,
                Some("1" | "true" | "yes" | "on") => Some(true),
                Some("0" | "false" | "no" | "off") => Some(false),
                Some(other) => bail!("RAGD_METRICS_REQUIRE_KEY={other:?}: expected true or false"),
            },
            watch_dirs: get("RAGD_WATCH_DIRS").map(KeyList::Csv),
            watch_keep_deleted: match get("RAGD_WATCH_KEEP_DELETED").as_deref() {
                None => None,
                Some("1" | "true" | "yes" | "on") => Some(true),
                Some("0" | "false" | "no" | "off") => Some(false),
                Some(other) => bail!("RAGD_WATCH_KEEP_DELETED={other:?}: expected true or false"),
            },
        })
    }
}
