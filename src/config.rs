//! One `Config`, layered: defaults < `ragd.toml` < environment < command-line flags.
//! It is resolved and validated once at start-up; nothing else reads the environment.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

mod layer;
pub use layer::{KeyList, Layer};

/// The fully resolved configuration of one ragd process.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind (`RAGD_HOST`).
    pub host: String,
    /// Port to bind (`RAGD_PORT`); 0 picks a free one.
    pub port: u16,
    /// Everything ragd keeps lives here (`RAGD_DATA_DIR`).
    pub data_dir: PathBuf,
    /// Folder holding model folders and files (`RAGD_MODELS_DIR`).
    pub models_dir: PathBuf,
    /// Embedder: a folder name under `models_dir`, or a path (`RAGD_EMBEDDING_MODEL`).
    pub embedding_model: String,
    /// Keys accepted in `X-API-Key` on `/api/v1`; empty disables auth (`API_KEYS`).
    pub api_keys: Vec<String>,
    /// Name reported as `collection_name` in `/health/stats`.
    pub collection_name: String,
    /// Largest accepted upload, in bytes (`RAGD_MAX_UPLOAD_BYTES`); above it: 413.
    pub max_upload_bytes: u64,
    /// Most texts the embedder runs in one forward pass (`RAGD_EMBED_BATCH_SIZE`).
    pub embed_batch_size: usize,
    /// Most tokens in one forward pass of the embedder (`RAGD_EMBED_BATCH_TOKENS`): the
    /// chunks of many sources are packed into passes up to this budget.
    pub embed_batch_tokens: usize,
    /// Arithmetic of the embedder's and reranker's CPU forward pass
    /// (`RAGD_EMBED_PRECISION`): `auto` (the fastest this CPU offers within the accuracy
    /// bounds), `f32` (the exact reference path), `bf16`, `int8` or `int16`.
    pub embed_precision: crate::ml::Precision,
    /// Where the local models run (`RAGD_DEVICE`, `--device`): `auto` (a GPU when the
    /// build has one and it opens, else the CPU, saying why in the log), `cpu`, `cuda`,
    /// `cuda:N` or `metal`. An explicit GPU that cannot be opened stops start-up.
    pub device: crate::ml::device::DeviceChoice,
    /// Most embedding requests waiting at once; beyond it requests fail fast (429).
    pub embed_queue_capacity: usize,
    /// Megabytes of recent interactive texts' vectors (questions, the passages'
    /// sentences) kept so they are not embedded again (`RAGD_EMBED_CACHE_MB`); 0: none.
    pub embed_cache_mb: usize,
    /// Nice value of the models' threads (`RAGD_MODEL_NICE`, 0-19; Linux): above 0 the
    /// server's short requests run ahead of the models' passes when the cores are full.
    pub model_nice: i32,
    /// Searches' index look-ups running at once (`RAGD_SEARCH_THREADS`); default: every core.
    pub search_threads: usize,
    /// Searches waiting for a look-up thread (`RAGD_SEARCH_QUEUE`); beyond it: 429.
    pub search_queue: usize,
    /// Extractive answers (`/query`, chat without an LLM) embedding their passages'
    /// sentences at once (`RAGD_MAX_CONCURRENT_ANSWERS`); default: every core.
    pub max_concurrent_answers: usize,
    /// Answers waiting for their turn (`RAGD_ANSWER_QUEUE`); beyond it: 429.
    pub answer_queue: usize,
    /// Longest wait of a search or an answer for its turn (`RAGD_MAX_QUEUE_WAIT_SECS`):
    /// refused with 429 at once when the turns ahead would take longer, or at its end.
    pub max_queue_wait_secs: u64,
    /// A generated answer (`/query`, the chat's answers from the knowledge base) that, at
    /// the LLM's recent pace, would not be done within this long, its wait for a place
    /// included, is answered from the passages' own sentences instead
    /// (`RAGD_ANSWER_TARGET_SECS`); an idle LLM always generates.
    pub answer_target_secs: u64,
    /// `text` or `json` log lines (`RAGD_LOG_FORMAT`).
    pub log_format: LogFormat,
    /// pdfium's shared library (`RAGD_PDFIUM_LIBRARY`); default `<models_dir>/pdfium/libpdfium.so`.
    pub pdfium_library: Option<PathBuf>,
    /// Tesseract languages for OCR (`RAGD_OCR_LANGUAGES`).
    pub ocr_languages: String,
    /// Most files parsed at once; more wait their turn.
    pub max_concurrent_parses: usize,
    /// Cross-encoder reranker: a folder under `models_dir`, or a path
    /// (`RAGD_RERANKER_MODEL`); used when the folder holds a model, else reranking is off.
    pub reranker_model: String,
    /// Let scraping reach loopback, link-local and private addresses (`SCRAPE_ALLOW_PRIVATE`).
    pub scrape_allow_private: bool,
    /// Hosts scraping may reach even on private addresses (`SCRAPE_ALLOWED_HOSTS`, comma-separated).
    pub scrape_allowed_hosts: Vec<String>,
    /// Largest response body a scrape reads (`RAGD_MAX_SCRAPE_BYTES`).
    pub max_scrape_bytes: u64,
    /// Background task workers (`RAGD_TASK_WORKERS`).
    pub task_workers: usize,
    /// Most files in one `/upload/bulk` request.
    pub max_bulk_files: usize,
    /// Most entries in one uploaded ZIP.
    pub max_zip_entries: usize,
    /// Most bytes all entries of one ZIP may expand to.
    pub max_zip_total_bytes: u64,
    /// The LLM: a `.gguf` file (name under `models_dir`, or a path) (`RAGD_LLM_MODEL`).
    /// Empty means the first `*.gguf` in `models_dir` or `models_dir/llm/`; `none` turns the
    /// LLM off. No LLM means answers are extractive.
    pub llm_model: String,
    /// CPU threads of the LLM (`RAGD_LLM_THREADS`); default: every core.
    pub llm_threads: Option<usize>,
    /// Longest generated answer, in tokens (`RAGD_LLM_MAX_TOKENS`).
    pub llm_max_tokens: usize,
    /// Sampling temperature when a request does not set one (`RAGD_LLM_TEMPERATURE`).
    pub llm_temperature: f64,
    /// Megabytes of key/value state the LLM's prompt cache keeps
    /// (`RAGD_LLM_PROMPT_CACHE_MB`); 0 turns it off.
    pub llm_prompt_cache_mb: usize,
    /// How the LLM's key/value cache stores values: `f16` (default, half the memory) or
    /// `f32` (`RAGD_LLM_KV_CACHE`).
    pub llm_kv_cache: crate::ml::llm::KvType,
    /// Generations that share each decode step of ragd's CPU engine
    /// (`RAGD_LLM_PARALLEL`, continuous batching); 1 runs them one at a time.
    pub llm_parallel: usize,
    /// Megabytes of key/value state the running generations may reserve together
    /// (`RAGD_LLM_KV_POOL_MB`); a request that would not fit waits for room.
    pub llm_kv_pool_mb: usize,
    /// Secret of HS256 bearer tokens on the assistant API (`JWT_SECRET`); unset turns
    /// bearer tokens off.
    pub jwt_secret: Option<String>,
    /// Seconds a pending high-risk action waits for confirmation (`RAGD_ACTION_TTL_SECS`).
    pub action_ttl_secs: u64,
    /// Chat and conversation requests per user per minute (`RAGD_RATE_LIMIT_CHAT`).
    pub rate_limit_chat: u32,
    /// Tool executions per user per minute (`RAGD_RATE_LIMIT_TOOLS`).
    pub rate_limit_tools: u32,
    /// Days a soft-deleted conversation is kept before it is purged.
    pub conversation_retention_days: u64,
    /// Base URL of an OpenAI-compatible server that runs the LLM (`RAGD_LLM_URL`), e.g.
    /// `http://gpu-box:8080` (llama.cpp's server, vLLM, Ollama); empty: the local engine.
    pub llm_url: String,
    /// Bearer key sent to `llm_url` (`RAGD_LLM_API_KEY`).
    pub llm_api_key: Option<String>,
    /// Model name sent to `llm_url` (`RAGD_LLM_REMOTE_MODEL`); empty: the server's first.
    pub llm_remote_model: String,
    /// The remote LLM's context window in tokens when the server does not report it
    /// (`RAGD_LLM_CONTEXT_LENGTH`).
    pub llm_context_length: Option<usize>,
    /// How ragd talks to `llm_url` (`RAGD_LLM_REMOTE_API`): `auto` (llama.cpp's server is
    /// recognised by its `/props`; anything else is plain OpenAI), `llamacpp` (GBNF
    /// grammars, `/tokenize`) or `openai` (OpenAI `tools` for tool calls).
    pub llm_remote_api: RemoteLlmApi,
    /// Most generations sent to `llm_url` at once (`RAGD_LLM_REMOTE_PARALLEL`); the
    /// server batches them itself. Beyond it, and a queue as long, requests get 429.
    pub llm_remote_parallel: usize,
    /// Base URL of an embedding server (`RAGD_EMBED_URL`); empty: the local embedder.
    pub embed_url: String,
    /// The embedding server's API (`RAGD_EMBED_API`): `openai` (`/v1/embeddings`) or
    /// `tei` (text-embeddings-inference's `/embed`).
    pub embed_api: EmbedApi,
    /// Bearer key sent to `embed_url` (`RAGD_EMBED_API_KEY`).
    pub embed_api_key: Option<String>,
    /// Model name sent to `embed_url` (`RAGD_EMBED_REMOTE_MODEL`).
    pub embed_remote_model: String,
    /// Base URL of a reranking server (`RAGD_RERANK_URL`); empty: the local cross-encoder.
    pub rerank_url: String,
    /// The reranking server's API (`RAGD_RERANK_API`): `jina` (`/v1/rerank`, as llama.cpp's
    /// server, Jina and Cohere serve it) or `tei` (`/rerank`).
    pub rerank_api: RerankApi,
    /// Bearer key sent to `rerank_url` (`RAGD_RERANK_API_KEY`).
    pub rerank_api_key: Option<String>,
    /// Model name sent to `rerank_url` (`RAGD_RERANK_REMOTE_MODEL`).
    pub rerank_remote_model: String,
    /// Seconds one request to a remote server may take (`RAGD_REMOTE_TIMEOUT_SECS`); a
    /// streamed generation may take this long between two pieces.
    pub remote_timeout_secs: u64,
    /// Starting with a different embedder than the stored vectors' starts re-embedding
    /// them at once (`RAGD_REEMBED_ON_CHANGE`); otherwise searches are refused until
    /// `ragd reindex` (or `POST /api/v1/reindex`) has run.
    pub reembed_on_change: bool,
    /// `GET /metrics` asks for the API key like `/api/v1` (`RAGD_METRICS_REQUIRE_KEY`);
    /// otherwise it is open like `/api/v1/health`.
    pub metrics_require_key: bool,
    /// Folders the server keeps in sync with the knowledge base (`RAGD_WATCH_DIRS`,
    /// comma-separated): new and changed files are ingested, renames followed, and what
    /// changed while the server was down is caught up at start.
    pub watch_dirs: Vec<PathBuf>,
    /// Keep the sources of files deleted from `watch_dirs` (`RAGD_WATCH_KEEP_DELETED`);
    /// by default they are deleted too.
    pub watch_keep_deleted: bool,
}

/// How ragd talks to a remote LLM server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteLlmApi {
    /// Asks the server what it is.
    Auto,
    /// llama.cpp's server: GBNF grammars, `/tokenize`, `/apply-template`.
    Llamacpp,
    /// Plain OpenAI: `tools` with `tool_choice`.
    Openai,
}

impl std::str::FromStr for RemoteLlmApi {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "llamacpp" | "llama.cpp" => Ok(Self::Llamacpp),
            "openai" => Ok(Self::Openai),
            other => Err(format!("{other:?}: expected auto, llamacpp or openai")),
        }
    }
}

/// The API of a remote embedding server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedApi {
    /// `POST /v1/embeddings` (OpenAI, llama.cpp's server, vLLM, Ollama, TEI).
    Openai,
    /// `POST /embed` (text-embeddings-inference).
    Tei,
}

impl std::str::FromStr for EmbedApi {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(Self::Openai),
            "tei" => Ok(Self::Tei),
            other => Err(format!("{other:?}: expected openai or tei")),
        }
    }
}

/// The API of a remote reranking server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RerankApi {
    /// `POST /v1/rerank` with `documents` (llama.cpp's server, Jina, Cohere).
    Jina,
    /// `POST /rerank` with `texts` (text-embeddings-inference).
    Tei,
}

impl std::str::FromStr for RerankApi {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "jina" => Ok(Self::Jina),
            "tei" => Ok(Self::Tei),
            other => Err(format!("{other:?}: expected jina or tei")),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8000,
            data_dir: PathBuf::from("data"),
            models_dir: PathBuf::from("models"),
            embedding_model: "all-MiniLM-L6-v2".into(),
            api_keys: Vec::new(),
            collection_name: "ragd".into(),
            max_upload_bytes: 100 * 1024 * 1024,
            embed_batch_size: 32,
            embed_batch_tokens: 8192,
            embed_precision: crate::ml::Precision::Auto,
            device: crate::ml::device::DeviceChoice::Auto,
            embed_queue_capacity: 1024,
            embed_cache_mb: 16,
            model_nice: 10,
            search_threads: num_cpus::get().max(1),
            search_queue: 256,
            max_concurrent_answers: num_cpus::get().max(1),
            answer_queue: 256,
            max_queue_wait_secs: 10,
            answer_target_secs: 5,
            log_format: LogFormat::Text,
            pdfium_library: None,
            ocr_languages: "eng+ara".into(),
            max_concurrent_parses: 2,
            reranker_model: "ms-marco-MiniLM-L-6-v2".into(),
            scrape_allow_private: false,
            scrape_allowed_hosts: Vec::new(),
            max_scrape_bytes: 50 * 1024 * 1024,
            task_workers: 2,
            max_bulk_files: 100,
            max_zip_entries: 1000,
            max_zip_total_bytes: 1024 * 1024 * 1024,
            llm_model: String::new(),
            llm_threads: None,
            llm_max_tokens: 512,
            llm_temperature: 0.3,
            llm_prompt_cache_mb: 128,
            llm_kv_cache: crate::ml::llm::KvType::F16,
            llm_parallel: crate::ml::llm::DEFAULT_PARALLEL,
            llm_kv_pool_mb: crate::ml::llm::DEFAULT_KV_BUDGET >> 20,
            jwt_secret: None,
            action_ttl_secs: 15 * 60,
            rate_limit_chat: 100,
            rate_limit_tools: 50,
            conversation_retention_days: 30,
            llm_url: String::new(),
            llm_api_key: None,
            llm_remote_model: String::new(),
            llm_context_length: None,
            llm_remote_api: RemoteLlmApi::Auto,
            llm_remote_parallel: 8,
            embed_url: String::new(),
            embed_api: EmbedApi::Openai,
            embed_api_key: None,
            embed_remote_model: String::new(),
            rerank_url: String::new(),
            rerank_api: RerankApi::Jina,
            rerank_api_key: None,
            rerank_remote_model: String::new(),
            remote_timeout_secs: 120,
            reembed_on_change: false,
            metrics_require_key: false,
            watch_dirs: Vec::new(),
            watch_keep_deleted: false,
        }
    }
}

impl Config {
    /// Applies `layers` in order over the defaults and validates the result.
    pub fn resolve(layers: impl IntoIterator<Item = Layer>) -> anyhow::Result<Self> {
        let mut c = Config::default();
        for l in layers {
            c.apply(l);
        }
        c.validate()?;
        Ok(c)
    }

    fn apply(&mut self, l: Layer) {
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = l.$f { self.$f = v; } )* };
        }
        set!(
            host,
            port,
            data_dir,
            models_dir,
            embedding_model,
            collection_name,
            max_upload_bytes,
            embed_batch_size,
            embed_batch_tokens,
            embed_precision,
            device,
            embed_queue_capacity,
            embed_cache_mb,
            model_nice,
            search_threads,
            search_queue,
            max_concurrent_answers,
            answer_queue,
            max_queue_wait_secs,
            answer_target_secs,
            log_format,
            ocr_languages,
            max_concurrent_parses,
            reranker_model,
            scrape_allow_private,
            max_scrape_bytes,
            task_workers,
            max_bulk_files,
            max_zip_entries,
            max_zip_total_bytes,
            llm_model,
            llm_max_tokens,
            llm_temperature,
            llm_prompt_cache_mb,
            llm_kv_cache,
            llm_parallel,
            llm_kv_pool_mb,
            action_ttl_secs,
            rate_limit_chat,
            rate_limit_tools,
            conversation_retention_days,
            llm_url,
            llm_remote_model,
            llm_remote_api,
            llm_remote_parallel,
            embed_url,
            embed_api,
            embed_remote_model,
            rerank_url,
            rerank_api,
            rerank_remote_model,
            remote_timeout_secs,
            reembed_on_change,
            metrics_require_key,
            watch_keep_deleted
        );
        if let Some(dirs) = l.watch_dirs {
            self.watch_dirs = dirs.into_vec().into_iter().map(PathBuf::from).collect();
        }
        for (slot, v) in [
            (&mut self.llm_api_key, l.llm_api_key),
            (&mut self.embed_api_key, l.embed_api_key),
            (&mut self.rerank_api_key, l.rerank_api_key),
        ] {
            if let Some(v) = v {
                *slot = Some(v);
            }
        }
        if let Some(n) = l.llm_context_length {
            self.llm_context_length = Some(n);
        }
        if let Some(t) = l.llm_threads {
            self.llm_threads = Some(t);
        }
        if let Some(s) = l.jwt_secret {
            self.jwt_secret = Some(s);
        }
        if let Some(hosts) = l.scrape_allowed_hosts {
            self.scrape_allowed_hosts = hosts.into_vec();
        }
        if let Some(p) = l.pdfium_library {
            self.pdfium_library = Some(p);
        }
        if let Some(keys) = l.api_keys {
            self.api_keys = keys.into_vec();
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.embed_batch_size == 0 || self.embed_batch_size > 512 {
            bail!(
                "embed_batch_size must be 1-512, got {}",
                self.embed_batch_size
            );
        }
        if !(256..=65_536).contains(&self.embed_batch_tokens) {
            bail!(
                "embed_batch_tokens must be 256-65536, got {}",
                self.embed_batch_tokens
            );
        }
        if self.embed_queue_capacity == 0 {
            bail!("embed_queue_capacity must be at least 1");
        }
        if !(0..=19).contains(&self.model_nice) {
            bail!("model_nice must be 0-19, got {}", self.model_nice);
        }
        if self.embed_cache_mb > 65_536 {
            bail!(
                "embed_cache_mb must be 0-65536, got {}",
                self.embed_cache_mb
            );
        }
        if self.search_threads == 0 || self.search_threads > 1024 {
            bail!("search_threads must be 1-1024, got {}", self.search_threads);
        }
        if self.max_upload_bytes == 0 {
            bail!("max_upload_bytes must be at least 1");
        }
        if self.task_workers == 0 || self.max_bulk_files == 0 || self.max_zip_entries == 0 {
            bail!("task_workers, max_bulk_files and max_zip_entries must be at least 1");
        }
        if self.max_concurrent_parses == 0 || self.max_concurrent_answers == 0 {
            bail!("max_concurrent_parses and max_concurrent_answers must be at least 1");
        }
        if self.llm_threads == Some(0) || self.llm_max_tokens == 0 || self.llm_parallel == 0 {
            bail!("llm_threads, llm_max_tokens and llm_parallel must be at least 1");
        }
        if self.llm_parallel > 64 {
            bail!("llm_parallel must be at most 64, got {}", self.llm_parallel);
        }
        if !(0.0..=2.0).contains(&self.llm_temperature) {
            bail!(
                "llm_temperature must be 0.0-2.0, got {}",
                self.llm_temperature
            );
        }
        if self.max_queue_wait_secs == 0 || self.answer_target_secs == 0 {
            bail!("max_queue_wait_secs and answer_target_secs must be at least 1");
        }
        if self.rate_limit_chat == 0 || self.rate_limit_tools == 0 || self.action_ttl_secs == 0 {
            bail!("rate limits and action_ttl_secs must be at least 1");
        }
        if self.host.trim().is_empty() {
            bail!("host must not be empty");
        }
        for (name, url) in [
            ("llm_url", &self.llm_url),
            ("embed_url", &self.embed_url),
            ("rerank_url", &self.rerank_url),
        ] {
            if !url.is_empty() {
                let parsed = reqwest::Url::parse(url)
                    .with_context(|| format!("{name}={url:?} is not a URL"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    bail!("{name}={url:?}: expected an http:// or https:// URL with a host");
                }
            }
        }
        if self.llm_remote_parallel == 0 || self.llm_remote_parallel > 1024 {
            bail!(
                "llm_remote_parallel must be 1-1024, got {}",
                self.llm_remote_parallel
            );
        }
        if self.llm_context_length.is_some_and(|n| n < 64) {
            bail!("llm_context_length must be at least 64");
        }
        if self.remote_timeout_secs == 0 {
            bail!("remote_timeout_secs must be at least 1");
        }
        Ok(())
    }

    /// The embedder's folder: `embedding_model` as a path if it is one, else under `models_dir`.
    pub fn embedding_model_dir(&self) -> PathBuf {
        self.model_path(&self.embedding_model)
    }

    /// The reranker's folder, resolved like the embedder's.
    pub fn reranker_model_dir(&self) -> PathBuf {
        self.model_path(&self.reranker_model)
    }

    fn model_path(&self, name: &str) -> PathBuf {
        let p = Path::new(name);
        if p.is_absolute() || p.components().count() > 1 {
            p.to_path_buf()
        } else {
            self.models_dir.join(p)
        }
    }

    /// The LLM's GGUF file, if one is configured or found.
    pub fn llm_model_path(&self) -> Option<PathBuf> {
        if self.llm_model.eq_ignore_ascii_case("none") {
            return None;
        }
        if !self.llm_model.is_empty() {
            return Some(self.model_path(&self.llm_model));
        }
        [self.models_dir.clone(), self.models_dir.join("llm")]
            .iter()
            .find_map(|dir| first_gguf(dir))
    }

    /// pdfium's shared library.
    pub fn pdfium_library_path(&self) -> PathBuf {
        self.pdfium_library
            .clone()
            .unwrap_or_else(|| self.models_dir.join("pdfium/libpdfium.so"))
    }

    /// Whether the LLM runs on a remote server.
    pub fn llm_is_remote(&self) -> bool {
        !self.llm_url.is_empty()
    }

    /// Whether `/api/v1` requires `X-API-Key`.
    pub fn auth_enabled(&self) -> bool {
        !self.api_keys.is_empty()
    }
}

/// The first `*.gguf` file in `dir` by name, if any.
fn first_gguf(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn layers_apply_in_order() {
        let file: Layer =
            toml::from_str("port = 9000\nhost = \"0.0.0.0\"\napi_keys = [\"a\", \"b\"]").unwrap();
        let env = Layer::from_env(&HashMap::from([
            ("RAGD_PORT".to_string(), "9100".to_string()),
            ("API_KEYS".to_string(), "x, y,".to_string()),
        ]))
        .unwrap();
        let flags = Layer {
            port: Some(9200),
            ..Layer::default()
        };
        let c = Config::resolve([file, env, flags]).unwrap();
        assert_eq!(c.port, 9200);
        assert_eq!(c.host, "0.0.0.0");
        assert_eq!(c.api_keys, vec!["x", "y"]);
    }

    #[test]
    fn empty_api_keys_env_disables_auth() {
        let file: Layer = toml::from_str("api_keys = \"k1\"").unwrap();
        let env = Layer::from_env(&HashMap::from([("API_KEYS".into(), "".into())])).unwrap();
        let c = Config::resolve([file, env]).unwrap();
        assert!(!c.auth_enabled());
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        assert!(toml::from_str::<Layer>("prot = 1").is_err());
        let env = HashMap::from([("RAGD_PORT".into(), "http".into())]);
        assert!(Layer::from_env(&env).is_err());
        let bad = Layer {
            embed_batch_size: Some(0),
            ..Layer::default()
        };
        assert!(Config::resolve([bad]).is_err());
    }

    #[test]
    fn the_device_comes_from_the_file_the_environment_or_a_flag() {
        use crate::ml::device::DeviceChoice;
        assert_eq!(Config::default().device, DeviceChoice::Auto);
        let file: Layer = toml::from_str("device = \"cuda:1\"").unwrap();
        assert_eq!(
            Config::resolve([file]).unwrap().device,
            DeviceChoice::Cuda(1)
        );
        let env = |v: &str| Layer::from_env(&HashMap::from([("RAGD_DEVICE".into(), v.into())]));
        assert_eq!(
            Config::resolve([env("cpu").unwrap()]).unwrap().device,
            DeviceChoice::Cpu
        );
        let err = env("gpu0").unwrap_err().to_string();
        assert!(
            err.contains("RAGD_DEVICE") && err.contains("expected auto, cpu, cuda"),
            "{err}"
        );
        let err = toml::from_str::<Layer>("device = \"tpu\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a device"), "{err}");
    }

    #[test]
    fn watch_dirs_come_from_a_list_in_the_file_or_commas_in_the_environment() {
        let file: Layer =
            toml::from_str("watch_dirs = [\"/srv/a\", \"docs\"]\nwatch_keep_deleted = true")
                .unwrap();
        let c = Config::resolve([file]).unwrap();
        assert_eq!(
            c.watch_dirs,
            [PathBuf::from("/srv/a"), PathBuf::from("docs")]
        );
        assert!(c.watch_keep_deleted);
        let env = Layer::from_env(&HashMap::from([(
            "RAGD_WATCH_DIRS".into(),
            "/x, /y ,".into(),
        )]))
        .unwrap();
        let c = Config::resolve([env]).unwrap();
        assert_eq!(c.watch_dirs, [PathBuf::from("/x"), PathBuf::from("/y")]);
        assert!(!c.watch_keep_deleted);
        let bad = HashMap::from([("RAGD_WATCH_KEEP_DELETED".into(), "maybe".into())]);
        let err = Layer::from_env(&bad).unwrap_err().to_string();
        assert!(err.contains("RAGD_WATCH_KEEP_DELETED"), "{err}");
    }

    #[test]
    fn model_dir_is_under_models_unless_a_path() {
        let c = Config::default();
        assert_eq!(
            c.embedding_model_dir(),
            PathBuf::from("models/all-MiniLM-L6-v2")
        );
        let c = Config {
            embedding_model: "/opt/m".into(),
            ..Config::default()
        };
        assert_eq!(c.embedding_model_dir(), PathBuf::from("/opt/m"));
    }
}
