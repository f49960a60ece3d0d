//! Drives an [`Embedder`] on one OS thread, as text-embeddings-inference does. Requests
//! wait in two queues, interactive (a search query, a health probe) ahead of bulk
//! (ingestion). Each forward pass takes sequences from the front of the bulk queue until
//! a token budget is full, so the chunks of many sources share passes and a large request
//! spans several. An interactive request that arrives during a bulk pass runs between
//! two of its layers. Callers announce bulk work that is on its way
//! ([`EmbedHandle::expect_bulk`]: a source being parsed), so a pass that would not be
//! full waits for it a little longer rather than running nearly empty. A full
//! interactive queue is an immediate [`MlError::Overloaded`]; bulk callers wait for room
//! instead (backpressure on ingestion, never an error).

mod batch;
mod cache;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tracing::Instrument as _;

use super::{Embedder, MlError, TokenCounter};

/// Tuning of the embedding worker.
#[derive(Debug, Clone, Copy)]
pub struct EmbedWorkerOptions {
    /// Interactive requests that may wait; more fail fast.
    pub queue_capacity: usize,
    /// Bulk sequences that may wait; further bulk callers wait for room.
    pub bulk_capacity: usize,
    /// Most tokens in one forward pass (sequences are packed: the sum of their lengths).
    pub max_batch_tokens: usize,
    /// Most sequences in one forward pass.
    pub max_batch_texts: usize,
    /// Bytes of recently embedded interactive texts' vectors kept for reuse (0: none).
    pub cache_bytes: usize,
}

impl Default for EmbedWorkerOptions {
    fn default() -> Self {
        Self {
            queue_capacity: 1024,
            bulk_capacity: 4096,
            max_batch_tokens: 8192,
            max_batch_texts: 32,
            cache_bytes: 16 << 20,
        }
    }
}

type Reply = Result<Vec<Vec<f32>>, MlError>;

/// What a request carries: texts (tokenized by the worker; interactive requests are
/// short) or token ids (tokenized by the caller on its own thread).
enum Input {
    Texts(Vec<String>),
    Tokens(Vec<Vec<u32>>),
}

/// One request, as queued.
struct Job {
    input: Input,
    reply: oneshot::Sender<Reply>,
    span: tracing::Span,
    /// A bulk request's share of the bulk queue, given back when it is answered.
    room: Option<OwnedSemaphorePermit>,
    queued: std::time::Instant,
}

#[derive(Default)]
struct Queues {
    interactive: VecDeque<Job>,
    bulk: VecDeque<Job>,
    closed: bool,
}

/// Counters of the worker's work since start-up.
#[derive(Debug, Default)]
struct Counters {
    passes: AtomicU64,
    sequences: AtomicU64,
    tokens: AtomicU64,
    busy_ns: AtomicU64,
    bulk_busy_ns: AtomicU64,
}

/// A copy of the worker's counters.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct EmbedStats {
    /// Forward passes run.
    pub passes: u64,
    /// Sequences embedded.
    pub sequences: u64,
    /// Tokens embedded.
    pub tokens: u64,
    /// Seconds spent in forward passes.
    pub busy_s: f64,
    /// Of which in bulk passes (ingestion).
    pub bulk_busy_s: f64,
    /// Interactive texts answered from the cache of recent vectors.
    pub cache_hits: u64,
    /// Interactive texts not found there (embedded).
    pub cache_misses: u64,
}

struct Shared {
    queues: Mutex<Queues>,
    /// Bulk work announced and not yet queued in full ([`BulkExpected`] guards alive).
    expected: AtomicUsize,
    wake: Condvar,
    bulk_room: Arc<Semaphore>,
    opts: EmbedWorkerOptions,
    counters: Counters,
    cache: cache::VectorCache,
    dim: usize,
    max_tokens: usize,
    counter: TokenCounter,
    name: String,
    served_by: Option<String>,
}

impl Shared {
    /// Stops the worker once the queues are empty; later requests fail.
    fn close(&self) {
        self.queues.lock().closed = true;
        self.bulk_room.close();
        self.wake.notify_all();
    }
}

/// Owned by the handles only: when the last handle goes, the worker stops.
struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// A cheap, cloneable handle to the embedding worker thread.
#[derive(Clone)]
pub struct EmbedHandle {
    owner: Arc<Owner>,
}

/// Bulk work announced by [`EmbedHandle::expect_bulk`]; dropping it says that all of it
/// has been queued (or will not come).
pub struct BulkExpected {
    owner: Arc<Owner>,
}

impl Drop for BulkExpected {
    fn drop(&mut self) {
        let shared = &self.owner.shared;
        // Under the queues' lock, so a worker deciding how long to wait sees it.
        let _q = shared.queues.lock();
        shared.expected.fetch_sub(1, Ordering::AcqRel);
        shared.wake.notify_one();
    }
}

/// Whose work a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    Interactive,
    Bulk,
}

impl EmbedHandle {
    /// Moves `model` onto a new thread and returns the handle that feeds it.
    pub fn spawn<E: Embedder>(model: E, opts: EmbedWorkerOptions) -> std::io::Result<Self> {
        let opts = EmbedWorkerOptions {
            queue_capacity: opts.queue_capacity.max(1),
            bulk_capacity: opts.bulk_capacity.max(1),
            max_batch_tokens: opts.max_batch_tokens.max(1),
            max_batch_texts: opts.max_batch_texts.max(1),
            cache_bytes: opts.cache_bytes,
        };
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues::default()),
            expected: AtomicUsize::new(0),
            wake: Condvar::new(),
            bulk_room: Arc::new(Semaphore::new(opts.bulk_capacity)),
            opts,
            counters: Counters::default(),
            cache: cache::VectorCache::new(opts.cache_bytes),
            dim: model.dim(),
            max_tokens: model.max_tokens(),
            counter: model.token_counter(),
            name: model.name().to_owned(),
            served_by: model.served_by(),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("ragd-embedder".into())
            .spawn(move || {
                super::priority::lower_this_thread();
                batch::run(model, worker)
            })?;
        Ok(Self {
            owner: Arc::new(Owner { shared }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    /// Embeds `texts` (in order) ahead of any bulk work: for queries and the passages'
    /// sentences. A text embedded lately is answered from the cache of recent vectors;
    /// the others (each distinct one once) go to the worker. Fails fast with
    /// `Overloaded` when the interactive queue is full.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, MlError> {
        let cache = &self.shared().cache;
        if !cache.enabled() {
            return self.embed_fresh(texts).await;
        }
        // Each text: its cached vector, or its place among the texts to embed.
        let mut wanted: Vec<String> = Vec::new();
        let mut place: HashMap<&str, usize> = HashMap::new();
        let found: Vec<Result<Vec<f32>, usize>> = texts
            .iter()
            .map(|t| match cache.get(t) {
                Some(v) => Ok(v.to_vec()),
                None => Err(*place.entry(t.as_str()).or_insert_with(|| {
                    wanted.push(t.clone());
                    wanted.len() - 1
                })),
            })
            .collect();
        let fresh = self.embed_fresh(wanted).await?;
        if fresh.len() != place.len() {
            return Err(MlError::Inference(format!(
                "the embedder returned {} vectors for {} texts",
                fresh.len(),
                place.len()
            )));
        }
        for (text, &i) in &place {
            cache.put(text, &fresh[i]);
        }
        Ok(found
            .into_iter()
            .map(|f| f.unwrap_or_else(|i| fresh[i].clone()))
            .collect())
    }

    /// Embeds `texts` as [`embed`](Self::embed) does, never from the cache: for a probe
    /// that must reach the model.
    pub async fn embed_fresh(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, MlError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let rx = self.submit(Input::Texts(texts), Priority::Interactive, None)?;
        rx.instrument(tracing::debug_span!("await_embedding"))
            .await
            .map_err(|_| MlError::WorkerGone)?
    }

    /// Announces bulk work on its way (a source being parsed, whose chunks will come to
    /// [`embed_bulk`](Self::embed_bulk)) until the guard is dropped: meanwhile a bulk pass
    /// that would not be full waits longer for more (see `batch::linger`).
    pub fn expect_bulk(&self) -> BulkExpected {
        self.shared().expected.fetch_add(1, Ordering::AcqRel);
        BulkExpected {
            owner: self.owner.clone(),
        }
    }

    /// Embeds token sequences from [`TokenCounter::encode`] (in order) as bulk work,
    /// batched with other callers' sequences. Waits while the bulk queue is full.
    pub async fn embed_bulk(&self, seqs: Vec<Vec<u32>>) -> Result<Vec<Vec<f32>>, MlError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        let want = seqs.len().min(self.shared().opts.bulk_capacity) as u32;
        let room = self
            .shared()
            .bulk_room
            .clone()
            .acquire_many_owned(want)
            .await
            .map_err(|_| MlError::WorkerGone)?;
        let rx = self.submit(Input::Tokens(seqs), Priority::Bulk, Some(room))?;
        rx.instrument(tracing::debug_span!("await_embedding"))
            .await
            .map_err(|_| MlError::WorkerGone)?
    }

    fn submit(
        &self,
        input: Input,
        priority: Priority,
        room: Option<OwnedSemaphorePermit>,
    ) -> Result<oneshot::Receiver<Reply>, MlError> {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            input,
            reply,
            span: tracing::Span::current(),
            room,
            queued: std::time::Instant::now(),
        };
        let shared = self.shared();
        let mut q = shared.queues.lock();
        if q.closed {
            return Err(MlError::WorkerGone);
        }
        match priority {
            Priority::Interactive if q.interactive.len() >= shared.opts.queue_capacity => {
                crate::telemetry::rejected("embedder");
                return Err(MlError::Overloaded);
            }
            Priority::Interactive => q.interactive.push_back(job),
            Priority::Bulk => q.bulk.push_back(job),
        }
        drop(q);
        shared.wake.notify_one();
        Ok(rx)
    }

    /// Jobs waiting now: (interactive, bulk).
    pub fn queue_depths(&self) -> (usize, usize) {
        let q = self.shared().queues.lock();
        (q.interactive.len(), q.bulk.len())
    }

    /// What the worker has done since start-up.
    pub fn stats(&self) -> EmbedStats {
        let c = &self.shared().counters;
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        let (cache_hits, cache_misses) = self.shared().cache.counts();
        EmbedStats {
            passes: c.passes.load(Ordering::Relaxed),
            sequences: c.sequences.load(Ordering::Relaxed),
            tokens: c.tokens.load(Ordering::Relaxed),
            busy_s: secs(&c.busy_ns),
            bulk_busy_s: secs(&c.bulk_busy_ns),
            cache_hits,
            cache_misses,
        }
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.shared().dim
    }

    /// Token window of the model, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.shared().max_tokens
    }

    /// Counts and encodes tokens as the model does.
    pub fn token_counter(&self) -> &TokenCounter {
        &self.shared().counter
    }

    /// Model name.
    pub fn name(&self) -> &str {
        &self.shared().name
    }

    /// The inference server that runs the model, when it is remote.
    pub fn served_by(&self) -> Option<&str> {
        self.shared().served_by.as_deref()
    }
}
