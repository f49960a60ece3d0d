//! `AppState`: the one place where services are built and wired.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::config::Config;
use crate::jobs::Jobs;
use crate::kb::admission::GateOptions;
use crate::kb::fetch::FetchPolicy;
use crate::kb::identity::{self, Identity};
use crate::kb::{indexes, KbParts, KnowledgeBase, LlmDefaults};
use crate::ml::llm::SharedGenerator;
use crate::ml::Models;
use crate::parse::archive::ZipLimits;
use crate::parse::ParseOptions;
use crate::retrieval::{FullTextIndex, VectorIndex, VectorStore};
use crate::store::Store;
use crate::time::Clock;

pub mod data_lock;
mod models;

pub use models::installed_models;

/// How often a changed vector index is written to disk.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// Shared state of the running server.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    /// The models, shared by the knowledge base and the assistant.
    pub models: Models,
    pub kb: Arc<KnowledgeBase>,
    pub jobs: Jobs,
    pub assistant: Arc<crate::assistant::Assistant>,
    /// Request counts and latencies, and the rendering of `/metrics`.
    pub telemetry: Arc<crate::telemetry::Telemetry>,
    flusher: Arc<tokio::task::JoinHandle<()>>,
}

/// Builds an [`AppState`] from a `Config` and what a program embedding ragd supplies
/// (tests: a clock they move, a scripted generator); `AppState::build(config)` is the
/// builder with nothing supplied.
pub struct AppStateBuilder {
    config: Config,
    clock: Clock,
    llm: Option<SharedGenerator>,
}

impl From<Config> for AppStateBuilder {
    fn from(config: Config) -> Self {
        AppState::builder(config)
    }
}

impl AppStateBuilder {
    /// The configuration the state will be built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The time every expiry and window is measured by (default: the system clock).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Uses `llm` as the language model; no GGUF file is loaded.
    pub fn llm(mut self, llm: SharedGenerator) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Opens the data directory, loads the models, reconciles the indexes and starts
    /// background upkeep. A missing model is a clean start-up error.
    pub async fn build(self) -> anyhow::Result<AppState> {
        AppState::build_from(self).await
    }
}

impl AppState {
    /// A builder over `config`.
    pub fn builder(config: Config) -> AppStateBuilder {
        AppStateBuilder {
            config,
            clock: Clock::default(),
            llm: None,
        }
    }

    /// Opens the data directory, loads the models, reconciles the indexes and starts
    /// background upkeep. A missing model is a clean start-up error.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        Self::builder(config).build().await
    }

    async fn build_from(b: AppStateBuilder) -> anyhow::Result<Self> {
        let AppStateBuilder { config, clock, llm } = b;
        let config = Arc::new(config);
        let cfg = config.clone();
        let (store, models) =
            tokio::task::spawn_blocking(move || -> anyhow::Result<(Store, Models)> {
                std::fs::create_dir_all(&cfg.data_dir).with_context(|| {
                    format!("creating data directory {}", cfg.data_dir.display())
                })?;
                let store = Store::open(&cfg.data_dir.join("ragd.sqlite"))
                    .context("opening the database")?;

                crate::ml::priority::init(cfg.model_nice);
                // One device for every local model; an explicit GPU that does not open
                // stops start-up here, with the driver's error.
                let place = crate::ml::device::open(cfg.device)
                    .with_context(|| format!("opening the device {}", cfg.device))?;
                let (embedder, _dim, embedder_runs) = models::load_embedder(&cfg, &place)?;
                let (reranker, reranker_runs) = match models::load_reranker(&cfg, &place)? {
                    Some((h, r)) => (Some(h), Some(r)),
                    None => (None, None),
                };
                let (llm, llm_runs) = match llm {
                    Some(g) => (
                        crate::ml::llm::LlmSlot::fixed(Some(g)),
                        crate::ml::models::Runs {
                            device: "supplied".into(),
                            arithmetic: "supplied".into(),
                        },
                    ),
                    None => models::load_llm(&models::with_chosen_llm(&cfg, &store), &place)?,
                };
                Ok((
                    store,
                    Models {
                        embedder,
                        reranker,
                        llm,
                        placed: crate::ml::models::Placed {
                            embedder: embedder_runs,
                            reranker: reranker_runs,
                            llm: llm_runs,
                        },
                    },
                ))
            })
            .await??;
        // The running embedder against the one that made the stored vectors (its probes
        // are embedded through the handle, whichever backend runs it).
        let identity = Identity::of(&models.embedder)
            .await
            .context("embedding the embedder's probe texts")?;
        let resolved = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || identity::resolve(&store, &identity)).await??
        };
        if let Some(stale) = &resolved.stale {
            tracing::warn!(reason = %stale.message(), "searches are refused");
        }
        let cfg = config.clone();
        let kb_models = models.clone();
        let kb = tokio::task::spawn_blocking(move || -> anyhow::Result<KnowledgeBase> {
            let dim = kb_models.embedder.dim();
            // One usearch search slot per look-up the search gate admits at once.
            let (vectors, vdisk) = VectorIndex::open(&cfg.data_dir, dim, cfg.search_threads)?;
            let vectors: Arc<dyn VectorStore> = Arc::new(vectors);
            let (fulltext, fdisk) = FullTextIndex::open(&cfg.data_dir)?;
            indexes::reconcile(
                &store,
                vectors.as_ref(),
                vdisk,
                &fulltext,
                fdisk,
                resolved.embedder_id,
            )
            .context("reconciling indexes")?;
            let kb = KnowledgeBase::new(KbParts {
                store,
                vectors,
                fulltext: Arc::new(fulltext),
                models: kb_models,
                parse_defaults: ParseOptions {
                    pdfium_library: cfg.pdfium_library_path(),
                    ocr_languages: cfg.ocr_languages.clone(),
                    ..ParseOptions::default()
                },
                max_concurrent_parses: cfg.max_concurrent_parses,
                zip_limits: ZipLimits {
                    max_entries: cfg.max_zip_entries,
                    max_entry_bytes: cfg.max_upload_bytes,
                    max_total_bytes: cfg.max_zip_total_bytes,
                    max_ratio: 200,
                    ratio_floor_bytes: 1 << 20,
                },
                fetch_policy: FetchPolicy {
                    allow_private: cfg.scrape_allow_private,
                    allowed_hosts: cfg.scrape_allowed_hosts.clone(),
                    max_bytes: cfg.max_scrape_bytes,
                },
                llm_defaults: LlmDefaults {
                    max_tokens: cfg.llm_max_tokens,
                    temperature: cfg.llm_temperature,
                    // An answer should be done within the wait a queued request is
                    // allowed, once more.
                    deadline: Duration::from_secs(2 * cfg.max_queue_wait_secs),
                    target: Duration::from_secs(cfg.answer_target_secs),
                },
                search_gate: GateOptions {
                    running: cfg.search_threads,
                    queue: cfg.search_queue,
                    max_wait: Duration::from_secs(cfg.max_queue_wait_secs),
                },
                answer_gate: GateOptions {
                    running: cfg.max_concurrent_answers,
                    queue: cfg.answer_queue,
                    max_wait: Duration::from_secs(cfg.max_queue_wait_secs),
                },
                identity: resolved,
            })?;
            Ok(kb)
        })
        .await??;
        let kb = Arc::new(kb);
        let flusher = tokio::spawn(flush_loop(kb.clone()));
        let jobs = Jobs::start(
            kb.store().clone(),
            kb.clone(),
            &config.data_dir,
            config.task_workers,
        )
        .await?;
        if config.reembed_on_change && kb.searchable().stale_reason().is_some() {
            match jobs.submit_reindex().await {
                Ok(ack) => {
                    tracing::info!(task_id = %ack.task_id, "reembed_on_change: re-embedding started")
                }
                // A reindex interrupted by the last stop resumes instead.
                Err(crate::error::Error::Conflict(m)) => tracing::info!("reembed_on_change: {m}"),
                Err(e) => return Err(anyhow::Error::new(e).context("starting the reindex task")),
            }
        }
        // Opening the assistant may rebuild the conversation index and hash the first-run
        // admin's password: blocking work, kept off the runtime's threads.
        let parts = crate::assistant::AssistantParts {
            config: config.clone(),
            kb: kb.clone(),
            jobs: jobs.clone(),
            models: models.clone(),
            clock,
        };
        let assistant = Arc::new(
            tokio::task::spawn_blocking(move || crate::assistant::Assistant::open(parts)).await??,
        );
        Ok(Self {
            config,
            models,
            kb,
            jobs,
            assistant,
            telemetry: Arc::new(crate::telemetry::Telemetry::new()),
            flusher: Arc::new(flusher),
        })
    }

    /// `/metrics` in the Prometheus text format: the requests counted so far and the
    /// services' figures now.
    pub async fn metrics_text(&self) -> crate::error::Result<String> {
        let mut snap = self.kb.metrics().await?;
        snap.tasks = self.jobs.count_by_state().await?;
        Ok(self.telemetry.render(&snap))
    }

    /// Stops background upkeep and writes the indexes to disk.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        self.jobs.shutdown();
        self.flusher.abort();
        self.kb.flush().await?;
        Ok(())
    }
}

async fn flush_loop(kb: Arc<KnowledgeBase>) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = kb.flush().await {
            tracing::error!(error = %e, "saving the vector index failed; will retry");
        }
    }
}
