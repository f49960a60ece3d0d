//! Continuous batching on ragd's CPU engine: up to `parallel` generations share each
//! decode step (one pass over the weights for all of them), each with its own key/value
//! state from the prompt cache. Between steps, waiting requests join in arrival order and
//! finished ones leave; a joining prompt runs one micro-batch per step (while others
//! decode, a short one: [`interleaved_chunk`](super::cpu::CpuModel::interleaved_chunk)),
//! so running streams keep their cadence. Every generation is driven by the same
//! [`Decoder`](super::engine::Decoder) as a lone one, and its prompt gives the same
//! results in whichever of those chunks it runs, so its tokens are the ones it would get
//! alone.
//!
//! Key/value memory is bounded: a request joins only while the states reserved (prompt
//! plus longest answer, each) stay within `kv_budget` bytes; otherwise it waits, in
//! order, for running ones to finish (alone, it always runs). Requests beyond the
//! worker's queue are refused at once, as before.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::engine::{Batched, LlmEngine, Next, Opened};
use super::worker::Job;
use super::{FinishReason, LlmEvent, MlError};

/// How the scheduler runs.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Most generations in one decode step.
    pub parallel: usize,
    /// Most bytes of key/value state the running generations reserve together.
    pub kv_budget: usize,
}

/// What the scheduler has done, for tests, logs and metrics.
#[derive(Debug, Default)]
pub struct BatchStats {
    /// Decode steps run.
    pub steps: AtomicUsize,
    /// Tokens those steps ran (the sum of their batch sizes).
    pub tokens: AtomicUsize,
    /// The largest batch of one step.
    pub peak: AtomicUsize,
    /// Prompt chunks run while other generations were decoding (each a short one).
    pub interleaved: AtomicUsize,
    /// How long a generation runs lately, as if it had the model to itself: the time from
    /// joining to its end, each moment divided among the generations that ran then (a
    /// decode step of 8 counts an eighth of its time to each). An exponentially weighted
    /// mean in milliseconds (0 until one has run). `n` requests that share the model take
    /// about `n` times it together, whatever the batch's speed-up, since that speed-up is
    /// in the samples.
    pub mean_ms: AtomicUsize,
}

impl BatchStats {
    /// Records one generation's run time.
    pub fn record(&self, took: std::time::Duration) {
        let sample = took.as_millis().min(usize::MAX as u128) as usize;
        // Two racing updates lose one sample, which a mean can afford.
        let old = self.mean_ms.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample.max(1)
        } else {
            (old - old / 8 + sample / 8).max(1)
        };
        self.mean_ms.store(new, Ordering::Relaxed);
    }
}

/// One running generation and the request it answers.
struct Slot {
    gen: Batched,
    events: mpsc::Sender<LlmEvent>,
    span: tracing::Span,
    started: Instant,
    /// Its share of the model's time so far (see [`BatchStats::mean_ms`]).
    share: std::time::Duration,
}

impl Slot {
    /// Feeds the logits after its last token to its decoder: `None` while it goes on
    /// (its next token pending), else how it ended.
    fn advance(&mut self, logits: &mut [f32]) -> Option<Result<FinishReason, MlError>> {
        let events = &self.events;
        match self
            .gen
            .decoder
            .next(logits, &mut |t: &str| send_text(events, t))
        {
            Ok(Next::Run(token)) => {
                self.gen.pending = Some(token);
                None
            }
            Ok(Next::End(reason)) => Some(Ok(reason)),
            Err(e) => Some(Err(e)),
        }
    }
}

/// Sends `text` to a generation's caller (an empty piece only checks that the caller is
/// still there); `false` once the caller has gone.
pub(super) fn send_text(events: &mpsc::Sender<LlmEvent>, text: &str) -> bool {
    if text.is_empty() {
        return !events.is_closed();
    }
    events
        .try_send(LlmEvent::Token {
            text: text.to_owned(),
        })
        .is_ok()
}

/// A request that has been tokenized and waits for room.
struct Waiting {
    opened: Opened,
    events: mpsc::Sender<LlmEvent>,
    span: tracing::Span,
}

/// Serves the worker's queue with continuous batching until every handle is gone.
pub(super) fn serve(
    engine: &mut LlmEngine,
    rx: &Receiver<Job>,
    in_flight: &Arc<AtomicUsize>,
    opts: BatchOptions,
    stats: &BatchStats,
) {
    let parallel = opts.parallel.max(1);
    let per_token = engine.kv_bytes_per_token();
    tracing::info!(
        parallel,
        kv_budget_mb = opts.kv_budget >> 20,
        "LLM continuous batching"
    );
    let mut slots: Vec<Slot> = Vec::new();
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let mut open = true;
    loop {
        // Take new requests while they could join now (the rest wait in the worker's
        // bounded queue); block only when there is nothing else to do.
        while open && slots.len() + waiting.len() < parallel {
            let job = if slots.is_empty() && waiting.is_empty() {
                match rx.recv() {
                    Ok(j) => j,
                    Err(_) => {
                        open = false;
                        break;
                    }
                }
            } else {
                match rx.try_recv() {
                    Ok(j) => j,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            };
            let Job {
                request,
                events,
                span,
            } = job;
            if events.is_closed() {
                in_flight.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let opened = {
                let _g = span.enter();
                catch(|| engine.open(request))
            };
            match opened {
                Ok(opened) => waiting.push_back(Waiting {
                    opened,
                    events,
                    span,
                }),
                Err(e) => fail(&events, &span, e, in_flight),
            }
        }
        if !open && slots.is_empty() && waiting.is_empty() {
            return;
        }
        // Admit waiting requests in order while there is room.
        while slots.len() < parallel {
            let Some(w) = waiting.front() else { break };
            if w.events.is_closed() {
                waiting.pop_front();
                in_flight.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let need = (w.opened.prompt.len() + w.opened.decoder.max_new) * per_token;
            let used: usize = slots.iter().map(|s| s.gen.kv_bytes()).sum();
            if !slots.is_empty() && used + need > opts.kv_budget {
                tracing::debug!(
                    used_mb = used >> 20,
                    need_mb = need >> 20,
                    "a request waits for key/value room"
                );
                break;
            }
            let Waiting {
                opened,
                events,
                span,
            } = waiting.pop_front().expect("looked at above");
            let attached = {
                let _g = span.enter();
                catch(|| engine.attach(opened))
            };
            match attached {
                Ok(gen) => {
                    tracing::debug!(parent: &span, prompt_tokens = gen.prompt.len(),
                        cached = gen.cached, running = slots.len() + 1, "joined the batch");
                    slots.push(Slot {
                        gen,
                        events,
                        span,
                        started: Instant::now(),
                        share: std::time::Duration::ZERO,
                    });
                }
                Err(e) => fail(&events, &span, e, in_flight),
            }
        }
        // One prompt micro-batch for the oldest generation still reading its prompt: a
        // short one while others decode, so they keep their pace.
        let round = Instant::now();
        let mut ended: Vec<(usize, Result<FinishReason, MlError>)> = Vec::new();
        let decoding = slots.iter().any(|s| s.gen.pending.is_some());
        if let Some(i) = slots.iter().position(|s| !s.gen.prefilled()) {
            let slot = &mut slots[i];
            if slot.events.is_closed() {
                ended.push((i, Ok(FinishReason::Cancelled)));
            } else if slot.gen.decoder.max_new == 0 {
                ended.push((i, Ok(FinishReason::Length)));
            } else {
                if decoding {
                    stats.interleaved.fetch_add(1, Ordering::Relaxed);
                }
                let step = {
                    let _g = slot.span.enter();
                    catch(|| engine.prefill(&mut slot.gen, decoding))
                };
                let end = match step {
                    Ok(None) => None,
                    Ok(Some(mut logits)) => slot.advance(&mut logits),
                    Err(e) => Some(Err(e)),
                };
                ended.extend(end.map(|r| (i, r)));
            }
        }
        // One decode step for every generation with a token to run (one that just ended
        // has none).
        let ready: Vec<usize> = (0..slots.len())
            .filter(|&i| slots[i].gen.pending.is_some())
            .collect();
        if !ready.is_empty() {
            let mut batch: Vec<&mut Batched> = slots
                .iter_mut()
                .map(|s| &mut s.gen)
                .filter(|g| g.pending.is_some())
                .collect();
            stats.steps.fetch_add(1, Ordering::Relaxed);
            stats.tokens.fetch_add(batch.len(), Ordering::Relaxed);
            stats.peak.fetch_max(batch.len(), Ordering::Relaxed);
            match catch(|| engine.decode(&mut batch)) {
                Ok(mut all) => {
                    let vocab = all.len() / ready.len();
                    for (&i, logits) in ready.iter().zip(all.chunks_mut(vocab)) {
                        ended.extend(slots[i].advance(logits).map(|r| (i, r)));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, batch = ready.len(), "a decode step failed");
                    for &i in &ready {
                        ended.push((i, Err(e.clone())));
                    }
                }
            }
        }
        // The round's time, shared by the generations it ran.
        if !slots.is_empty() {
            let each = round.elapsed() / slots.len() as u32;
            for s in &mut slots {
                s.share += each;
            }
        }
        // Finished generations leave (each once; highest index first, so the others keep
        // theirs).
        ended.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (i, result) in ended {
            let slot = slots.swap_remove(i);
            if result.is_ok() {
                stats.record(slot.share);
            }
            finish(engine, slot, result, in_flight);
        }
    }
}

/// Runs `f`, turning a panic into an error.
fn catch<T>(f: impl FnOnce() -> Result<T, MlError>) -> Result<T, MlError> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(MlError::Inference("the LLM panicked".into())))
}

fn fail(
    events: &mpsc::Sender<LlmEvent>,
    span: &tracing::Span,
    e: MlError,
    in_flight: &AtomicUsize,
) {
    tracing::warn!(parent: span, error = %e, "generation failed");
    in_flight.fetch_sub(1, Ordering::SeqCst);
    let _ = events.try_send(LlmEvent::Error(e));
}

/// Sends the end of `slot`'s generation and returns its state to the prompt cache.
fn finish(
    engine: &mut LlmEngine,
    slot: Slot,
    result: Result<FinishReason, MlError>,
    in_flight: &AtomicUsize,
) {
    let Slot {
        gen,
        events,
        span,
        started,
        ..
    } = slot;
    // No longer in flight once its caller can see the end.
    in_flight.fetch_sub(1, Ordering::SeqCst);
    match result {
        Ok(reason) => {
            tracing::info!(
                parent: &span,
                prompt_tokens = gen.prompt.len(),
                cached_tokens = gen.cached,
                completion_tokens = gen.decoder.count,
                finish = reason.as_str(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "generated"
            );
            let _ = events.try_send(LlmEvent::Done {
                prompt_tokens: gen.prompt.len(),
                completion_tokens: gen.decoder.count,
                finish_reason: reason,
            });
            engine.close(gen);
        }
        Err(e) => {
            tracing::warn!(parent: &span, error = %e, "generation failed");
            let _ = events.try_send(LlmEvent::Error(e));
        }
    }
}
