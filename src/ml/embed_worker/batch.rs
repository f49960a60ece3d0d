//! The worker thread's loop: interactive requests first, then one bulk pass at a time,
//! formed from the front of the bulk queue by token budget. During a bulk pass the model
//! pauses between layers; waiting interactive requests run there. A bulk pass that would
//! not be full waits a moment ([`LINGER`]) after its first request arrived, longer
//! ([`LINGER_EXPECTED`]) while callers say that more is on its way and only a few texts
//! ([`START_TEXTS`]) wait: the sources of an upload reach the queue one by one as they
//! are parsed, and a pass of one text costs far more per text than a pass of a few.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::{Embedder, Input, Job, MlError, Reply, Shared};
use crate::ml::TokenCounter;

/// How long a bulk pass that would not be full waits for more, from the arrival of the
/// oldest request in it. A pass of one 200-token text costs ~2.5x the time per text of a
/// full pass on 2 cores, and the small files of a bulk upload are parsed at about one
/// per 0.2 ms per core, so a few milliseconds fill most of a pass.
const LINGER: Duration = Duration::from_millis(5);
/// How long it may wait while more bulk work is announced (sources still being parsed)
/// and fewer than [`START_TEXTS`] texts (or an eighth of the token budget) wait.
/// Measured on Zen 3 with int16 arithmetic: a bulk request's first pass ran with 1-5 of
/// its 50 files after the 5 ms linger (82 ms for one 210-token text, against ~28 ms a
/// text in a pass of 32), while the rest of its files were being parsed at about one
/// per millisecond.
const LINGER_EXPECTED: Duration = Duration::from_millis(50);
/// Texts that start a bulk pass while more is announced. Waiting for a full pass left
/// the embedder idle ~50 ms at the start of each 50-file request (~3% of a sequential
/// client's bulk upload): its files reach the queue about one a millisecond, and the
/// parsing of the rest costs the pass the same CPU whether it runs beside the pass or
/// before it. A pass of 4 texts runs at ~90% of the speed per text of a pass of 32, and
/// the next pass takes everything parsed meanwhile.
const START_TEXTS: usize = 4;

/// A bulk request being worked through, possibly over several passes.
struct Active {
    seqs: Vec<Vec<u32>>,
    queued: Instant,
    /// Vectors of the first `done.len()` sequences.
    done: Vec<Vec<f32>>,
    reply: oneshot::Sender<Reply>,
    span: tracing::Span,
    _room: Option<OwnedSemaphorePermit>,
}

impl Input {
    fn into_tokens(self, counter: &TokenCounter) -> Result<Vec<Vec<u32>>, MlError> {
        match self {
            Input::Tokens(t) => Ok(t),
            Input::Texts(texts) => {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                counter.encode_batch(&refs)
            }
        }
    }
}

/// Marks the worker stopped however it exits, and drops what still waits, so callers
/// see `WorkerGone` instead of waiting forever.
struct StopGuard<'a>(&'a Shared);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let mut q = self.0.queues.lock();
        q.closed = true;
        q.interactive.clear();
        q.bulk.clear();
        self.0.bulk_room.close();
    }
}

/// Runs until every handle is gone and the queues are empty.
pub(super) fn run<E: Embedder>(model: E, shared: Arc<Shared>) {
    let _stop = StopGuard(&shared);
    tracing::info!(
        model = model.name(),
        dim = model.dim(),
        max_batch_tokens = shared.opts.max_batch_tokens,
        "embedder worker started"
    );
    let mut bulk: VecDeque<Active> = VecDeque::new();
    loop {
        let urgent = {
            let mut q = shared.queues.lock();
            loop {
                for job in q.bulk.drain(..) {
                    if let Some(a) = activate(job, &shared.counter) {
                        bulk.push_back(a);
                    }
                }
                // Work for callers that have gone away (a cancelled request) is skipped.
                bulk.retain(|a| !a.reply.is_closed());
                if !q.interactive.is_empty() {
                    break;
                }
                if !bulk.is_empty() {
                    let expected = shared.expected.load(Ordering::Acquire) > 0;
                    match linger(&bulk, &shared.opts, expected, Instant::now()) {
                        Some(wait) if !q.closed => {
                            shared.wake.wait_for(&mut q, wait);
                            continue;
                        }
                        _ => break,
                    }
                }
                if q.closed {
                    tracing::info!("embedder worker stopped");
                    return;
                }
                shared.wake.wait(&mut q);
            }
            take_interactive(&mut q.interactive, shared.opts.max_batch_texts)
        };
        if urgent.is_empty() {
            run_bulk(&model, &shared, &mut bulk);
        } else {
            run_interactive(&model, &shared, urgent);
        }
    }
}

fn activate(job: Job, counter: &TokenCounter) -> Option<Active> {
    match job.input.into_tokens(counter) {
        Ok(seqs) => Some(Active {
            queued: job.queued,
            done: Vec::with_capacity(seqs.len()),
            seqs,
            reply: job.reply,
            span: job.span,
            _room: job.room,
        }),
        Err(e) => {
            let _ = job.reply.send(Err(e));
            None
        }
    }
}

/// How much longer the next bulk pass should wait for more work: `None` when it would be
/// full (by texts or tokens) or its oldest request has waited [`LINGER`] already
/// ([`LINGER_EXPECTED`] when more bulk work is `expected` and fewer than [`START_TEXTS`]
/// texts, or an eighth of the token budget, wait).
fn linger(
    bulk: &VecDeque<Active>,
    opts: &super::EmbedWorkerOptions,
    expected: bool,
    now: Instant,
) -> Option<Duration> {
    let (mut texts, mut tokens) = (0usize, 0usize);
    for a in bulk {
        let rest = &a.seqs[a.done.len()..];
        texts += rest.len();
        tokens += rest.iter().map(Vec::len).sum::<usize>();
    }
    if texts >= opts.max_batch_texts || tokens >= opts.max_batch_tokens {
        return None;
    }
    let started =
        texts >= START_TEXTS.min(opts.max_batch_texts) || tokens >= opts.max_batch_tokens / 8;
    let oldest = bulk.iter().map(|a| a.queued).min()?;
    let limit = if expected && !started {
        LINGER_EXPECTED
    } else {
        LINGER
    };
    limit
        .checked_sub(now.saturating_duration_since(oldest))
        .filter(|d| !d.is_zero())
}

/// Interactive requests from the front of the queue, at most `max_texts` texts (but at
/// least one request), skipping those whose callers have gone.
fn take_interactive(queue: &mut VecDeque<Job>, max_texts: usize) -> Vec<Job> {
    let mut out = Vec::new();
    let mut texts = 0;
    while let Some(job) = queue.front() {
        let n = match &job.input {
            Input::Texts(t) => t.len(),
            Input::Tokens(t) => t.len(),
        };
        if !out.is_empty() && texts + n > max_texts {
            break;
        }
        let job = queue.pop_front().expect("front exists");
        if !job.reply.is_closed() {
            texts += n;
            out.push(job);
        }
    }
    out
}

/// Runs the interactive requests waiting now, if any; returns the time it took.
fn serve_waiting<E: Embedder>(model: &E, shared: &Shared) -> Duration {
    let started = Instant::now();
    loop {
        let jobs = take_interactive(
            &mut shared.queues.lock().interactive,
            shared.opts.max_batch_texts,
        );
        if jobs.is_empty() {
            return started.elapsed();
        }
        run_interactive(model, shared, jobs);
    }
}

/// One pass over every sequence of `jobs`, answered each in order.
fn run_interactive<E: Embedder>(model: &E, shared: &Shared, jobs: Vec<Job>) {
    let span =
        tracing::debug_span!(parent: &jobs[0].span, "embed_interactive", requests = jobs.len());
    let _g = span.enter();
    let mut ready = Vec::with_capacity(jobs.len());
    for job in jobs {
        match job.input.into_tokens(&shared.counter) {
            Ok(seqs) => ready.push((seqs, job.reply)),
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
    }
    let seqs: Vec<&[u32]> = ready
        .iter()
        .flat_map(|(s, _)| s.iter().map(Vec::as_slice))
        .collect();
    let started = Instant::now();
    let result = forward(model, &seqs, &mut || {});
    record(shared, &seqs, started.elapsed(), false);
    match result {
        Ok(vectors) => {
            let mut it = vectors.into_iter();
            for (s, reply) in ready {
                let _ = reply.send(Ok(it.by_ref().take(s.len()).collect()));
            }
        }
        Err(e) => {
            for (_, reply) in ready {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// Which sequences of which queued requests the next bulk pass embeds: from the front,
/// until `max_tokens` or `max_texts` would be passed (always at least one sequence).
fn plan(
    bulk: &VecDeque<Active>,
    max_tokens: usize,
    max_texts: usize,
) -> Vec<(usize, Range<usize>)> {
    let mut out = Vec::new();
    let (mut tokens, mut texts) = (0usize, 0usize);
    for (j, a) in bulk.iter().enumerate() {
        let start = a.done.len();
        let mut end = start;
        while let Some(seq) = a.seqs.get(end) {
            let fits = texts == 0 || (tokens + seq.len() <= max_tokens && texts < max_texts);
            if !fits {
                break;
            }
            tokens += seq.len();
            texts += 1;
            end += 1;
        }
        if end > start {
            out.push((j, start..end));
        }
        if end < a.seqs.len() {
            break;
        }
    }
    out
}

/// One bulk pass; finished requests are answered.
fn run_bulk<E: Embedder>(model: &E, shared: &Shared, bulk: &mut VecDeque<Active>) {
    let plan = plan(
        bulk,
        shared.opts.max_batch_tokens,
        shared.opts.max_batch_texts,
    );
    let Some(&(first, _)) = plan.first() else {
        return;
    };
    let seqs: Vec<&[u32]> = plan
        .iter()
        .flat_map(|(j, r)| bulk[*j].seqs[r.clone()].iter().map(Vec::as_slice))
        .collect();
    let span = tracing::debug_span!(parent: &bulk[first].span, "embed_batch", requests = plan.len(), texts = seqs.len());
    let _g = span.enter();
    let started = Instant::now();
    let mut paused = Duration::ZERO;
    let result = forward(model, &seqs, &mut || paused += serve_waiting(model, shared));
    record(
        shared,
        &seqs,
        started.elapsed().saturating_sub(paused),
        true,
    );
    match result {
        Ok(vectors) => {
            let mut it = vectors.into_iter();
            for (j, r) in &plan {
                bulk[*j].done.extend(it.by_ref().take(r.len()));
            }
            // The plan starts at the front, so finished requests are a prefix.
            while bulk.front().is_some_and(|a| a.done.len() == a.seqs.len()) {
                let a = bulk.pop_front().expect("front exists");
                let _ = a.reply.send(Ok(a.done));
            }
        }
        Err(e) => {
            for a in bulk.drain(..plan.len()) {
                let _ = a.reply.send(Err(e.clone()));
            }
        }
    }
}

/// The model's pass, with a panic turned into an error.
fn forward<E: Embedder>(
    model: &E,
    seqs: &[&[u32]],
    pause: &mut dyn FnMut(),
) -> Result<Vec<Vec<f32>>, MlError> {
    let result = catch_unwind(AssertUnwindSafe(|| model.embed_tokens(seqs, pause)))
        .unwrap_or_else(|_| Err(MlError::Inference("the embedder panicked".into())));
    match &result {
        Ok(v) if v.len() != seqs.len() => {
            return Err(MlError::Inference(format!(
                "the embedder returned {} vectors for {} texts",
                v.len(),
                seqs.len()
            )))
        }
        Err(e) => tracing::error!(error = %e, texts = seqs.len(), "embedding failed"),
        Ok(_) => {}
    }
    result
}

fn record(shared: &Shared, seqs: &[&[u32]], busy: Duration, bulk: bool) {
    let c = &shared.counters;
    let tokens: usize = seqs.iter().map(|s| s.len()).sum();
    let ns = busy.as_nanos() as u64;
    c.passes.fetch_add(1, Ordering::Relaxed);
    c.sequences.fetch_add(seqs.len() as u64, Ordering::Relaxed);
    c.tokens.fetch_add(tokens as u64, Ordering::Relaxed);
    c.busy_ns.fetch_add(ns, Ordering::Relaxed);
    if bulk {
        c.bulk_busy_ns.fetch_add(ns, Ordering::Relaxed);
    }
    tracing::debug!(
        elapsed_ms = busy.as_millis() as u64,
        texts = seqs.len(),
        tokens,
        bulk,
        "embedded"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(lens: &[usize], done: usize) -> Active {
        let (reply, _rx) = oneshot::channel();
        Active {
            queued: Instant::now(),
            seqs: lens.iter().map(|&n| vec![0; n]).collect(),
            done: vec![Vec::new(); done],
            reply,
            span: tracing::Span::none(),
            _room: None,
        }
    }

    #[test]
    fn passes_fill_across_requests_up_to_the_token_budget() {
        let bulk: VecDeque<Active> = [
            active(&[100, 100], 0),
            active(&[50; 4], 0),
            active(&[10], 0),
        ]
        .into_iter()
        .collect();
        // 200 + 4·50 = 400 tokens fit; the last request waits for the next pass.
        assert_eq!(plan(&bulk, 400, 32), vec![(0, 0..2), (1, 0..4)]);
        // A budget that ends inside a request takes part of it.
        assert_eq!(plan(&bulk, 300, 32), vec![(0, 0..2), (1, 0..2)]);
        // At most `max_texts` sequences.
        assert_eq!(plan(&bulk, 10_000, 3), vec![(0, 0..2), (1, 0..1)]);
        // A sequence over the budget alone still runs, alone.
        assert_eq!(plan(&bulk, 10, 32), vec![(0, 0..1)]);
    }

    #[test]
    fn a_pass_that_would_not_be_full_lingers_after_its_first_request() {
        let opts = super::super::EmbedWorkerOptions {
            max_batch_tokens: 1000,
            max_batch_texts: 4,
            ..Default::default()
        };
        let t0 = Instant::now();
        let at = |lens: &[usize], done: usize, ms: u64| Active {
            queued: t0 + Duration::from_millis(ms),
            ..active(lens, done)
        };
        let bulk: VecDeque<Active> = [at(&[10], 0, 0), at(&[10], 0, 2)].into_iter().collect();
        // Two texts of four, the oldest 1 ms old: wait the 4 ms left of its linger.
        assert_eq!(
            linger(&bulk, &opts, false, t0 + Duration::from_millis(1)),
            Some(LINGER - Duration::from_millis(1))
        );
        // Once the oldest has waited LINGER, the pass runs as it is.
        assert_eq!(linger(&bulk, &opts, false, t0 + LINGER), None);
        // While more is announced, it waits up to LINGER_EXPECTED.
        assert_eq!(
            linger(&bulk, &opts, true, t0 + LINGER),
            Some(LINGER_EXPECTED - LINGER)
        );
        assert_eq!(linger(&bulk, &opts, true, t0 + LINGER_EXPECTED), None);
        // A full pass by texts, or by tokens, runs at once, announced work or not.
        let full: VecDeque<Active> = [at(&[10, 10, 10, 10], 0, 0)].into_iter().collect();
        assert_eq!(linger(&full, &opts, false, t0), None);
        assert_eq!(linger(&full, &opts, true, t0), None);
        let heavy: VecDeque<Active> = [at(&[1000], 0, 0)].into_iter().collect();
        assert_eq!(linger(&heavy, &opts, true, t0), None);
        // With a few texts waiting, announced work no longer holds the pass back.
        let wide = super::super::EmbedWorkerOptions {
            max_batch_texts: 32,
            ..opts
        };
        let few: VecDeque<Active> = [at(&[10; START_TEXTS], 0, 0)].into_iter().collect();
        assert_eq!(linger(&few, &wide, true, t0 + LINGER), None);
        let fewer: VecDeque<Active> = [at(&[10; START_TEXTS - 1], 0, 0)].into_iter().collect();
        assert_eq!(
            linger(&fewer, &wide, true, t0 + LINGER),
            Some(LINGER_EXPECTED - LINGER)
        );
        // So does an eighth of the token budget in fewer texts.
        let long: VecDeque<Active> = [at(&[125], 0, 0)].into_iter().collect();
        assert_eq!(linger(&long, &wide, true, t0 + LINGER), None);
        // What a request has left counts, not what it had.
        let rest: VecDeque<Active> = [at(&[10, 10, 10, 10], 3, 0)].into_iter().collect();
        assert!(linger(&rest, &opts, false, t0).is_some());
    }

    #[test]
    fn a_partly_done_request_continues_where_it_stopped() {
        let bulk: VecDeque<Active> = [active(&[10, 20, 30], 2), active(&[5], 0)]
            .into_iter()
            .collect();
        assert_eq!(plan(&bulk, 1000, 32), vec![(0, 2..3), (1, 0..1)]);
    }
}
