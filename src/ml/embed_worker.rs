//! Drives an [`Embedder`] on one OS thread. Requests arrive on a bounded channel with a
//! one-shot reply each; whatever is waiting is gathered into one batch. A full queue is
//! an immediate [`MlError::Overloaded`], never an unbounded pile-up.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::Instrument as _;

use super::{Embedder, MlError, TokenCounter};

/// Tuning of the embedding worker.
#[derive(Debug, Clone, Copy)]
pub struct EmbedWorkerOptions {
    /// Requests that may wait; more fail fast.
    pub queue_capacity: usize,
    /// Most texts gathered into one call of the model.
    pub max_texts_per_call: usize,
}

type Reply = Result<Vec<Vec<f32>>, MlError>;

struct Request {
    texts: Vec<String>,
    reply: oneshot::Sender<Reply>,
    span: tracing::Span,
}

struct Shared {
    tx: SyncSender<Request>,
    dim: usize,
    max_tokens: usize,
    counter: TokenCounter,
    name: String,
}

/// A cheap, cloneable handle to the embedding worker thread.
#[derive(Clone)]
pub struct EmbedHandle {
    shared: Arc<Shared>,
}

impl EmbedHandle {
    /// Moves `model` onto a new thread and returns the handle that feeds it.
    pub fn spawn<E: Embedder>(model: E, opts: EmbedWorkerOptions) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel(opts.queue_capacity.max(1));
        let shared = Shared {
            tx,
            dim: model.dim(),
            max_tokens: model.max_tokens(),
            counter: model.token_counter(),
            name: model.name().to_owned(),
        };
        std::thread::Builder::new()
            .name("ragd-embedder".into())
            .spawn(move || worker_loop(model, rx, opts.max_texts_per_call.max(1)))?;
        Ok(Self {
            shared: Arc::new(shared),
        })
    }

    /// Embeds `texts` (in order). Fails fast with `Overloaded` when the queue is full.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, MlError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let rx = self.submit(texts)?;
        rx.instrument(tracing::debug_span!("await_embedding"))
            .await
            .map_err(|_| MlError::WorkerGone)?
    }

    /// Like [`embed`](Self::embed), for callers on a blocking thread.
    pub fn embed_blocking(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, MlError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.submit(texts)?
            .blocking_recv()
            .map_err(|_| MlError::WorkerGone)?
    }

    fn submit(&self, texts: Vec<String>) -> Result<oneshot::Receiver<Reply>, MlError> {
        let (reply, rx) = oneshot::channel();
        let req = Request {
            texts,
            reply,
            span: tracing::Span::current(),
        };
        match self.shared.tx.try_send(req) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) => Err(MlError::Overloaded),
            Err(TrySendError::Disconnected(_)) => Err(MlError::WorkerGone),
        }
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.shared.dim
    }

    /// Token window of the model, special tokens included.
    pub fn max_tokens(&self) -> usize {
        self.shared.max_tokens
    }

    /// Counts tokens as the model does.
    pub fn token_counter(&self) -> &TokenCounter {
        &self.shared.counter
    }

    /// Model name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }
}

fn worker_loop<E: Embedder>(model: E, rx: Receiver<Request>, max_texts: usize) {
    tracing::info!(
        model = model.name(),
        dim = model.dim(),
        "embedder worker started"
    );
    // Blocks for the first request, then gathers whatever else is already waiting.
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let mut texts = batch[0].texts.len();
        while texts < max_texts {
            match rx.try_recv() {
                Ok(r) => {
                    texts += r.texts.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        run_batch(&model, batch, texts);
    }
    tracing::info!("embedder worker stopped");
}

fn run_batch<E: Embedder>(model: &E, batch: Vec<Request>, total: usize) {
    // A request whose caller has gone away (e.g. a cancelled HTTP request) is skipped.
    let live: Vec<Request> = batch.into_iter().filter(|r| !r.reply.is_closed()).collect();
    if live.is_empty() {
        return;
    }
    let span = tracing::debug_span!(parent: &live[0].span, "embed_batch", requests = live.len(), texts = total);
    let _g = span.enter();
    let started = std::time::Instant::now();
    let all: Vec<&str> = live
        .iter()
        .flat_map(|r| r.texts.iter().map(String::as_str))
        .collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.embed(&all)))
        .unwrap_or_else(|_| Err(MlError::Inference("the embedder panicked".into())));
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        texts = all.len(),
        "embedded"
    );
    match result {
        Ok(vectors) => {
            let mut it = vectors.into_iter();
            for r in live {
                let mine: Vec<Vec<f32>> = it.by_ref().take(r.texts.len()).collect();
                let _ = r.reply.send(Ok(mine));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "embedding failed");
            let msg = e.to_string();
            for r in live {
                let _ = r.reply.send(Err(MlError::Inference(msg.clone())));
            }
        }
    }
}
