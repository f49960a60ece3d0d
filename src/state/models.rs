//! Which backend runs each model, chosen once from the configuration: the local engines
//! (ragd's CPU kernels, candle on a GPU) or an inference server (`llm_url`, `embed_url`,
//! `rerank_url`). Each choice is one place here; the services above see only the
//! handles.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::config::{Config, RemoteLlmApi};
use crate::ml::device::Placement;
use crate::ml::embedder::remote::{RemoteEmbedder, RemoteEmbedderOptions};
use crate::ml::llm::remote::{RemoteGenerator, RemoteLlmOptions, ServerKind};
use crate::ml::llm::{
    Backend, CpuOptions, LlmEngine, LlmHandle, LlmLoader, LlmSlot, LlmWorkerOptions,
    SharedGenerator,
};
use crate::ml::models::Runs;
use crate::ml::reranker::remote::{RemoteReranker, RemoteRerankerOptions};
use crate::ml::reranker::{CrossEncoder, RerankHandle};
use crate::ml::{BertEmbedder, EmbedHandle, EmbedWorkerOptions, MlError};
use crate::store::Store;

/// Requests a remote embedder has in flight at once.
const REMOTE_EMBED_PARALLEL: usize = 4;

/// The embedder on its worker thread, its vectors' dimension, and where it runs.
pub(super) fn load_embedder(
    cfg: &Config,
    place: &Placement,
) -> anyhow::Result<(EmbedHandle, usize, Runs)> {
    let model_dir = cfg.embedding_model_dir();
    let options = EmbedWorkerOptions {
        queue_capacity: cfg.embed_queue_capacity,
        cache_bytes: cfg.embed_cache_mb << 20,
        max_batch_tokens: cfg.embed_batch_tokens,
        max_batch_texts: cfg.embed_batch_size,
        ..EmbedWorkerOptions::default()
    };
    let started = std::time::Instant::now();
    if !cfg.embed_url.is_empty() {
        let model = RemoteEmbedder::connect(RemoteEmbedderOptions {
            url: cfg.embed_url.clone(),
            api: cfg.embed_api,
            api_key: cfg.embed_api_key.clone(),
            model: cfg.embed_remote_model.clone(),
            tokenizer_dir: model_dir.clone(),
            timeout: Duration::from_secs(cfg.remote_timeout_secs),
            parallel: REMOTE_EMBED_PARALLEL,
        })
        .with_context(|| {
            format!(
                "connecting to the embedding server {} (the tokenizer comes from {})",
                cfg.embed_url,
                model_dir.display()
            )
        })?;
        let dim = crate::ml::Embedder::dim(&model);
        tracing::info!(url = %cfg.embed_url, elapsed_ms = started.elapsed().as_millis() as u64, "embedder connected");
        let runs = remote_runs(&cfg.embed_url);
        return Ok((EmbedHandle::spawn(model, options)?, dim, runs));
    }
    let model = BertEmbedder::load_with(
        &model_dir,
        place.device.clone(),
        cfg.embed_batch_size,
        cfg.embed_precision,
    )
    .with_context(|| {
        format!(
            "loading the embedder from {} (run scripts/setup.sh to install it)",
            model_dir.display()
        )
    })?;
    if place.is_gpu() {
        // The driver compiles each kernel's PTX on its first use: pay for it here, not in
        // the first request.
        let texts = [
            "warm-up",
            &"the kernels of every shape a batch takes ".repeat(20),
        ];
        warm_up("embedder", || {
            crate::ml::Embedder::embed(&model, &texts).map(|_| ())
        })?;
    }
    let runs = local_runs(place, model.arithmetic());
    tracing::info!(model = %model_dir.display(), device = %runs.device, arithmetic = %runs.arithmetic, elapsed_ms = started.elapsed().as_millis() as u64, "embedder loaded");
    let dim = crate::ml::Embedder::dim(&model);
    Ok((EmbedHandle::spawn(model, options)?, dim, runs))
}

/// Runs `f` once (a model's first pass on a GPU) and logs how long it took.
fn warm_up(what: &str, f: impl FnOnce() -> Result<(), MlError>) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    f().with_context(|| format!("the {what}'s first pass on the GPU"))?;
    tracing::info!(
        model = what,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "GPU kernels warmed up"
    );
    Ok(())
}

/// A local model on `place`.
fn local_runs(place: &Placement, arithmetic: &str) -> Runs {
    Runs {
        device: format!("{} ({})", place.name, place.detail),
        arithmetic: arithmetic.to_owned(),
    }
}

/// A model behind an inference server at `url`.
fn remote_runs(url: &str) -> Runs {
    Runs {
        device: format!("remote {url}"),
        arithmetic: "remote".into(),
    }
}

/// The LLM's slot: a server at `llm_url` (fixed), else a GGUF file configured or found
/// under `models/`, switchable at run time. A file that is there but cannot be run leaves
/// the slot empty with the reason: the server starts and answers extractively.
pub(super) fn load_llm(cfg: &Config, place: &Placement) -> anyhow::Result<(LlmSlot, Runs)> {
    if cfg.llm_is_remote() {
        let generator = RemoteGenerator::connect(RemoteLlmOptions {
            url: cfg.llm_url.clone(),
            api_key: cfg.llm_api_key.clone(),
            model: cfg.llm_remote_model.clone(),
            context_length: cfg.llm_context_length,
            kind: match cfg.llm_remote_api {
                RemoteLlmApi::Auto => None,
                RemoteLlmApi::Llamacpp => Some(ServerKind::LlamaCpp),
                RemoteLlmApi::Openai => Some(ServerKind::OpenAi),
            },
            parallel: cfg.llm_remote_parallel,
            timeout: Duration::from_secs(cfg.remote_timeout_secs),
            // Only a file named on purpose: another model's vocabulary would miscount.
            local_tokenizer: (!cfg.llm_model.is_empty())
                .then(|| cfg.llm_model_path())
                .flatten()
                .filter(|p| p.is_file()),
        })
        .with_context(|| format!("setting up the LLM server {}", cfg.llm_url))?;
        let generator: SharedGenerator = Arc::new(generator);
        return Ok((LlmSlot::fixed(Some(generator)), remote_runs(&cfg.llm_url)));
    }
    let runs = local_runs(place, if place.is_gpu() { "candle" } else { "ragd-cpu" });
    let loader = local_loader(cfg, place);
    let Some(path) = cfg.llm_model_path() else {
        tracing::info!(models = %cfg.models_dir.display(), "no LLM file; answers are extractive");
        return Ok((LlmSlot::switchable(None, None, None, loader), runs));
    };
    match loader(&path) {
        Ok(generator) => Ok((
            LlmSlot::switchable(Some(generator), Some(path), None, loader),
            runs,
        )),
        Err(e) => {
            let why = crate::ml::llm::slot::load_reason(&e);
            tracing::error!(
                file = %path.display(),
                reason = %why,
                "the LLM file cannot be run; the server starts without an LLM and answers \
                 extractively (`ragd models list` shows what can run; set RAGD_LLM_MODEL \
                 or switch with the llm_model setting)"
            );
            Ok((LlmSlot::switchable(None, None, Some(why), loader), runs))
        }
    }
}

/// Loads a GGUF with ragd's local engine (CPU kernels, candle on a GPU) onto its own
/// worker thread; blocking.
fn local_loader(cfg: &Config, place: &Placement) -> LlmLoader {
    let device = place.device.clone();
    let threads = cfg.llm_threads;
    let kv = cfg.llm_kv_cache;
    let prompt_cache_bytes = cfg.llm_prompt_cache_mb << 20;
    let (parallel, kv_budget) = (cfg.llm_parallel, cfg.llm_kv_pool_mb << 20);
    let max_wait = Some(std::time::Duration::from_secs(cfg.max_queue_wait_secs));
    Arc::new(move |path: &Path| -> Result<SharedGenerator, MlError> {
        let started = std::time::Instant::now();
        let backend = Backend::for_device(
            device.clone(),
            CpuOptions {
                threads,
                tier: None,
                kv,
            },
            prompt_cache_bytes,
        );
        let mut engine = LlmEngine::load(path, backend)?;
        if !device.is_cpu() {
            let t = std::time::Instant::now();
            // Prompts of more than 8 tokens take candle's dequantize-and-multiply kernels,
            // single tokens its vector kernels: run both once.
            let ids = engine
                .tokenizer()
                .encode(&"warm-up of the GPU kernels, ".repeat(8))?;
            engine.forward(&ids, 0)?;
            engine.forward(&ids[..1], ids.len())?;
            tracing::info!(
                model = "llm",
                elapsed_ms = t.elapsed().as_millis() as u64,
                "GPU kernels warmed up"
            );
        }
        let info = engine.info().clone();
        let handle = LlmHandle::spawn(
            engine,
            LlmWorkerOptions {
                threads,
                parallel,
                kv_budget,
                max_wait,
                ..LlmWorkerOptions::default()
            },
        )
        .map_err(|e| MlError::Load(format!("cannot start the LLM thread: {e}")))?;
        tracing::info!(
            model = %info.name,
            family = %info.family,
            context = info.context_length,
            file = %path.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "LLM loaded"
        );
        Ok(Arc::new(handle))
    })
}

/// The reranker: a server at `rerank_url`, else the cross-encoder when its folder holds
/// a model; a model that is there but cannot be loaded is a start-up error, not a
/// silent fallback.
pub(super) fn load_reranker(
    cfg: &Config,
    place: &Placement,
) -> anyhow::Result<Option<(RerankHandle, Runs)>> {
    if !cfg.rerank_url.is_empty() {
        let model = RemoteReranker::new(RemoteRerankerOptions {
            url: cfg.rerank_url.clone(),
            api: cfg.rerank_api,
            api_key: cfg.rerank_api_key.clone(),
            model: cfg.rerank_remote_model.clone(),
            timeout: Duration::from_secs(cfg.remote_timeout_secs),
        })
        .with_context(|| format!("setting up the reranking server {}", cfg.rerank_url))?;
        let name = model.name();
        let runs = remote_runs(&cfg.rerank_url);
        return Ok(Some((RerankHandle::spawn(model, name, 64)?, runs)));
    }
    let dir = cfg.reranker_model_dir();
    if !dir.join("model.safetensors").exists() {
        tracing::info!(dir = %dir.display(), "no reranker model; results are not reranked");
        return Ok(None);
    }
    let model = CrossEncoder::load_with(&dir, place.device.clone(), cfg.embed_precision)
        .with_context(|| format!("loading the reranker from {}", dir.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if place.is_gpu() {
        let passages = [
            "a".to_owned(),
            "a longer passage for the padded pass".repeat(8),
        ];
        warm_up("reranker", || model.score("warm-up", &passages).map(|_| ()))?;
    }
    let runs = local_runs(place, model.arithmetic());
    tracing::info!(model = %name, device = %runs.device, arithmetic = %runs.arithmetic, "reranker loaded");
    Ok(Some((RerankHandle::spawn(model, name, 64)?, runs)))
}

/// `cfg` with the LLM an administrator chose at run time (the `llm_model` setting, kept
/// in SQLite) in place of the configured one, when that file is still installed; a
/// chosen file that is gone is logged and the configuration decides.
pub(super) fn with_chosen_llm(cfg: &Config, store: &Store) -> Config {
    let chosen = store
        .read_sync(crate::store::settings::get)
        .ok()
        .flatten()
        .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok())
        .and_then(|v| v.get("llm_model")?.as_str().map(str::to_owned))
        .filter(|s| !s.is_empty());
    let Some(chosen) = chosen else {
        return cfg.clone();
    };
    let path = cfg.models_dir.join(&chosen);
    if cfg.llm_is_remote() || !path.is_file() {
        tracing::warn!(llm_model = %chosen, "the LLM chosen in the settings is not installed (or the LLM is remote); using the configured one");
        return cfg.clone();
    }
    tracing::info!(llm_model = %chosen, "using the LLM chosen in the settings");
    let mut cfg = cfg.clone();
    cfg.llm_model = path.display().to_string();
    cfg
}

/// `ragd models list`: every GGUF under `models_dir`, the one the server would run marked
/// active (the `llm_model` chosen at run time when the data directory remembers one,
/// else the configuration's).
pub fn installed_models(
    cfg: &Config,
) -> anyhow::Result<Vec<crate::ml::llm::inspect::InstalledModel>> {
    let db = cfg.data_dir.join("ragd.sqlite");
    let cfg = if db.is_file() {
        let store = Store::open(&db).context("opening the database")?;
        with_chosen_llm(cfg, &store)
    } else {
        cfg.clone()
    };
    let active = if cfg.llm_is_remote() {
        None
    } else {
        cfg.llm_model_path()
    };
    Ok(crate::ml::llm::inspect::installed(
        &cfg.models_dir,
        active.as_deref(),
    ))
}
