//! Runs an [`LlmEngine`] on its own OS thread. Requests wait in a bounded queue (a full
//! queue is an immediate [`MlError::Overloaded`]); each gets its own channel of
//! [`LlmEvent`]s, and a generation stops as soon as that channel's receiver is dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::batch::{self, BatchOptions, BatchStats};
use super::{GenerateRequest, LlmEngine, LlmEvent, LlmTokenizer, MlError, ModelInfo, Prompt};

/// Tuning of the LLM worker.
#[derive(Debug, Clone, Copy)]
pub struct LlmWorkerOptions {
    /// Requests that may wait while one runs; more fail fast.
    pub queue_capacity: usize,
    /// CPU threads for candle's forward pass (a rayon pool of its own); `None` uses
    /// rayon's global pool. ragd's CPU engine sizes its own pool at load.
    pub threads: Option<usize>,
    /// Generations that share each decode step on ragd's CPU engine ([`batch`]).
    pub parallel: usize,
    /// Bytes of key/value state the running generations may reserve together.
    pub kv_budget: usize,
    /// A request whose answer, at the recent pace, would not be done within this long
    /// (its wait for a place plus a generation's run) is refused at once
    /// ([`MlError::Overloaded`]), unless the model is idle; `None` bounds only the
    /// queue's length.
    pub max_wait: Option<std::time::Duration>,
}

impl Default for LlmWorkerOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 8,
            threads: None,
            parallel: DEFAULT_PARALLEL,
            kv_budget: DEFAULT_KV_BUDGET,
            max_wait: None,
        }
    }
}

/// Generations per decode step unless configured: a step reads every weight once
/// whatever its size, so on a CPU the rate grows with the batch until compute saturates.
pub const DEFAULT_PARALLEL: usize = 8;
/// Key/value bytes the running generations may reserve unless configured.
pub const DEFAULT_KV_BUDGET: usize = 1 << 30;

/// A queued request.
pub(crate) struct Job {
    pub(crate) request: GenerateRequest,
    pub(crate) events: mpsc::Sender<LlmEvent>,
    pub(crate) span: tracing::Span,
}

struct Shared {
    tx: SyncSender<Job>,
    info: ModelInfo,
    tokenizer: Arc<LlmTokenizer>,
    in_flight: Arc<AtomicUsize>,
    batch: Arc<BatchStats>,
    max_wait: Option<std::time::Duration>,
}

/// A cheap, cloneable handle to the LLM thread.
#[derive(Clone)]
pub struct LlmHandle {
    shared: Arc<Shared>,
}

impl LlmHandle {
    /// Moves `engine` onto a new thread and returns the handle that feeds it.
    pub fn spawn(engine: LlmEngine, opts: LlmWorkerOptions) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel(opts.queue_capacity.max(1));
        // ragd's CPU engine has its own threads; candle (its CPU ops, when it runs on the
        // CPU device) uses a rayon pool.
        let threads = opts
            .threads
            .filter(|_| engine.engine_name().starts_with("candle"));
        let pool = match threads {
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n.max(1))
                    .thread_name(|i| format!("ragd-llm-{i}"))
                    .start_handler(|_| crate::ml::priority::lower_this_thread())
                    .build()
                    .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        let in_flight = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(BatchStats::default());
        let shared = Shared {
            tx,
            info: engine.info().clone(),
            tokenizer: Arc::clone(engine.tokenizer()),
            in_flight: Arc::clone(&in_flight),
            batch: Arc::clone(&stats),
            max_wait: opts.max_wait,
        };
        let batching = BatchOptions {
            parallel: opts.parallel,
            kv_budget: opts.kv_budget,
        };
        std::thread::Builder::new()
            .name("ragd-llm".into())
            .spawn(move || {
                crate::ml::priority::lower_this_thread();
                worker_loop(engine, rx, pool, in_flight, batching, stats)
            })?;
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Queues `request` and returns its stream of events: `Token`s, then one `Done` or
    /// `Error`. Fails at once with `Overloaded` when the queue is full, or when at the
    /// recent pace it would not be done within `max_wait` (an idle model, or one with no
    /// pace yet, takes it). Dropping the receiver stops the generation.
    pub fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        self.admit(request, self.shared.max_wait, false)
    }

    /// [`generate`](Self::generate) for a caller with an answer of its own to fall back
    /// on: also refused when a busy model would not be done within `within`, or has no
    /// pace yet.
    pub fn generate_within(
        &self,
        request: GenerateRequest,
        within: std::time::Duration,
    ) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        let limit = self.shared.max_wait.map_or(within, |w| w.min(within));
        self.admit(request, Some(limit), true)
    }

    /// Takes a place (so that requests arriving together each see the ones before them),
    /// then gives it back and refuses when the request would not be done within `limit`;
    /// `no_pace_is_late`: also when the model is busy and no generation has ended yet.
    fn admit(
        &self,
        request: GenerateRequest,
        limit: Option<std::time::Duration>,
        no_pace_is_late: bool,
    ) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        // Room for every token, the flushed tail and the final event, so the model thread
        // never waits on a slow reader (the engine caps tokens at the window).
        let capacity = request.params.max_tokens.min(self.context_length()) + 2;
        let (events, rx) = mpsc::channel(capacity);
        let job = Job {
            request,
            events,
            span: tracing::Span::current(),
        };
        let ahead = self.shared.in_flight.fetch_add(1, Ordering::SeqCst);
        let late = match (limit, self.expected_behind(ahead)) {
            (Some(_), Some(std::time::Duration::MAX)) => no_pace_is_late,
            (Some(limit), Some(t)) => t > limit,
            _ => false,
        };
        if late {
            self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            tracing::info!(
                ahead,
                mean_ms = self.shared.batch.mean_ms.load(Ordering::Relaxed),
                limit_ms = limit.map_or(0, |l| l.as_millis() as u64),
                "refusing a generation: at the recent pace it would not be done in time"
            );
            return Err(MlError::Overloaded);
        }
        match self.shared.tx.try_send(job) {
            Ok(()) => Ok(rx),
            Err(e) => {
                self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
                Err(match e {
                    TrySendError::Full(_) => MlError::Overloaded,
                    TrySendError::Disconnected(_) => MlError::WorkerGone,
                })
            }
        }
    }

    /// How long a request sent now would take to end at the recent pace: with `n`
    /// requests queued or running, `n + 1` mean generations (each as if it had the model
    /// to itself, [`BatchStats::mean_ms`](super::batch::BatchStats::mean_ms)), since the
    /// model's time is shared among those running and a place frees as one ends. `None`
    /// while the model is idle (it would start at once); [`Duration::MAX`](std::time::Duration::MAX)
    /// while it is busy before any generation has ended (no pace known: a server just
    /// started that takes every request of a burst makes each of them slow).
    pub fn expected(&self) -> Option<std::time::Duration> {
        self.expected_behind(self.in_flight())
    }

    /// [`expected`](Self::expected) for a request with `ahead` requests queued or running
    /// before it.
    fn expected_behind(&self, ahead: usize) -> Option<std::time::Duration> {
        if ahead == 0 {
            return None;
        }
        let mean = self.shared.batch.mean_ms.load(Ordering::Relaxed) as u64;
        if mean == 0 {
            return Some(std::time::Duration::MAX);
        }
        Some(std::time::Duration::from_millis(mean * (ahead as u64 + 1)))
    }

    /// Tokens in `text`, counted on the caller's thread.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.shared.tokenizer.count_tokens(text)
    }

    /// Tokens of `prompt` as the model will see it (template and BOS included).
    pub fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<usize, MlError> {
        self.shared
            .tokenizer
            .encode_prompt(prompt)
            .map(|ids| ids.len())
    }

    /// The tokenizer (shared with the model thread).
    pub fn tokenizer(&self) -> &Arc<LlmTokenizer> {
        &self.shared.tokenizer
    }

    /// Model name.
    pub fn name(&self) -> &str {
        &self.shared.info.name
    }

    /// Tokens the model attends to, prompt and answer together.
    pub fn context_length(&self) -> usize {
        self.shared.info.context_length
    }

    /// Name, family and window.
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    /// Requests queued or running.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// What continuous batching has done (decode steps, their tokens, the largest batch).
    pub fn batch_stats(&self) -> &BatchStats {
        &self.shared.batch
    }
}

fn worker_loop(
    mut engine: LlmEngine,
    rx: Receiver<Job>,
    pool: Option<rayon::ThreadPool>,
    in_flight: Arc<AtomicUsize>,
    batching: BatchOptions,
    stats: Arc<BatchStats>,
) {
    tracing::info!(model = %engine.info().name, "LLM worker started");
    if engine.batchable() {
        batch::serve(&mut engine, &rx, &in_flight, batching, &stats);
    }
    // candle's models: one request at a time.
    while let Ok(job) = rx.recv() {
        let started = std::time::Instant::now();
        match &pool {
            Some(pool) => pool.install(|| run_job(&mut engine, job)),
            None => run_job(&mut engine, job),
        }
        stats.record(started.elapsed());
        in_flight.fetch_sub(1, Ordering::SeqCst);
    }
    // Every handle is gone (the model was switched or the server stops): free the
    // weights and the prompt cache now, and give the pages back.
    let name = engine.info().name.clone();
    drop(engine);
    drop(pool);
    release_free_memory();
    tracing::info!(model = %name, "LLM worker stopped; the model is freed");
}

fn run_job(engine: &mut LlmEngine, job: Job) {
    let Job {
        request,
        events,
        span,
    } = job;
    let span = tracing::debug_span!(parent: &span, "llm_generate");
    let _g = span.enter();
    if events.is_closed() {
        return;
    }
    let started = std::time::Instant::now();
    let mut on_text = |text: &str| batch::send_text(&events, text);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        engine.generate(request, &mut on_text)
    }))
    .unwrap_or_else(|_| Err(MlError::Inference("the LLM panicked".into())));
    let event = match result {
        Ok(c) => {
            tracing::info!(
                prompt_tokens = c.prompt_tokens,
                cached_tokens = c.cached_tokens,
                completion_tokens = c.completion_tokens,
                finish = c.finish_reason.as_str(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "generated"
            );
            LlmEvent::Done {
                prompt_tokens: c.prompt_tokens,
                completion_tokens: c.completion_tokens,
                finish_reason: c.finish_reason,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "generation failed");
            LlmEvent::Error(e)
        }
    };
    // The caller may have gone; nothing to do then.
    let _ = events.try_send(event);
    release_free_memory();
}

/// Hands memory freed by the generation (key/value states that grew or were copied,
/// batch buffers) back to the system: glibc keeps freed blocks of this size in its heaps,
/// where they would count towards the server's resident memory for good.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}
