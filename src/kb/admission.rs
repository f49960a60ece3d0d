//! Bounded admission to work that competes for the CPU: at most `running` at once, at
//! most `queue` more waiting their turn, and none waiting longer than `max_wait`. A request
//! that would go beyond (the queue is full, or the turns ahead of it, at the gate's recent
//! pace, would take longer than `max_wait`) is refused at once with [`Error::Overloaded`]
//! (429 with `Retry-After`); one that still waits `max_wait` is refused then. Two gates use
//! it: searches' index look-ups (usearch and tantivy, on blocking threads), and extractive
//! answers, whose sentence embeddings would otherwise fill the embedder's queue ahead of
//! the one-line queries of searches.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// Sizes of a gate.
#[derive(Debug, Clone, Copy)]
pub struct GateOptions {
    /// Requests admitted at once (at least one).
    pub running: usize,
    /// Requests that may wait for a turn; more are refused.
    pub queue: usize,
    /// Longest wait for a turn.
    pub max_wait: Duration,
}

/// See the module documentation.
pub struct Gate {
    /// What it admits, for errors and logs ("searches", "answers").
    what: &'static str,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    opts: GateOptions,
    pace: Arc<Pace>,
}

/// How long turns take lately: an exponentially weighted mean, in microseconds.
#[derive(Default)]
struct Pace {
    mean_us: AtomicU64,
}

impl Pace {
    fn record(&self, took: Duration) {
        let sample = took.as_micros().min(u64::MAX as u128) as u64;
        // Races between two updates lose one sample, which a mean can afford.
        let old = self.mean_us.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.mean_us.store(new, Ordering::Relaxed);
    }

    fn mean(&self) -> Duration {
        Duration::from_micros(self.mean_us.load(Ordering::Relaxed))
    }
}

/// A turn at the gate; it ends when dropped.
pub struct Turn {
    _permit: OwnedSemaphorePermit,
    started: Instant,
    pace: Arc<Pace>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.pace.record(self.started.elapsed());
    }
}

/// Leaves the queue when dropped (also when the waiting request is cancelled).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gate {
    /// A gate admitting `opts.running` at once, with `opts.queue` waiting at most
    /// `opts.max_wait`.
    pub fn new(what: &'static str, opts: GateOptions) -> Self {
        let opts = GateOptions {
            running: opts.running.max(1),
            ..opts
        };
        Self {
            what,
            permits: Arc::new(Semaphore::new(opts.running)),
            waiting: AtomicUsize::new(0),
            opts,
            pace: Arc::default(),
        }
    }

    fn turn(&self, permit: OwnedSemaphorePermit) -> Turn {
        Turn {
            _permit: permit,
            started: Instant::now(),
            pace: self.pace.clone(),
        }
    }

    fn refuse(&self, why: &str, waiting: usize) -> Error {
        tracing::warn!(waiting, what = self.what, why, "refusing a request");
        crate::telemetry::rejected(self.what);
        Error::Overloaded(format!(
            "too many {} are waiting ({why}); retry shortly",
            self.what
        ))
    }

    /// Waits for a turn, within the gate's bounds.
    pub async fn enter(&self) -> Result<Turn> {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Ok(self.turn(p));
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        if ahead >= self.opts.queue {
            return Err(self.refuse("the queue is full", ahead));
        }
        // Every turn ahead, and the ones running, at the recent pace.
        let rounds = (ahead / self.opts.running + 1) as u32;
        if self.pace.mean().saturating_mul(rounds) > self.opts.max_wait {
            return Err(self.refuse("the wait would be too long", ahead));
        }
        match tokio::time::timeout(self.opts.max_wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(self.turn(p)),
            Ok(Err(_)) => Err(Error::Unavailable("shutting down".into())),
            Err(_) => Err(self.refuse("waited too long", ahead)),
        }
    }

    /// Runs `f` on a blocking thread during a turn, held until `f` returns even when the
    /// caller stops waiting for it.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let turn = self.enter().await?;
        Ok(tokio::task::spawn_blocking(move || {
            let out = f();
            drop(turn);
            out
        })
        .await?)
    }

    /// Requests waiting for a turn now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_at_most_threads_and_refuses_beyond_the_queue() {
        let pool = Arc::new(Gate::new(
            "tests",
            GateOptions {
                running: 2,
                queue: 3,
                max_wait: Duration::from_secs(60),
            },
        ));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(parking_lot::Mutex::new(gate));
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let (pool, running, peak, gate) =
                    (pool.clone(), running.clone(), peak.clone(), gate.clone());
                tokio::spawn(async move {
                    pool.run_blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        let _ = gate.lock().recv();
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
                })
            })
            .collect();
        // Two run, three wait: the queue is full, so a sixth is refused at once.
        while pool.waiting() < 3 || running.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let refused = pool.run_blocking(|| ()).await;
        assert!(matches!(refused, Err(Error::Overloaded(_))), "{refused:?}");
        for _ in 0..5 {
            release.send(()).unwrap();
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(pool.waiting(), 0);
        pool.run_blocking(|| ()).await.unwrap();
    }

    fn gate(max_wait: Duration) -> Gate {
        Gate::new(
            "tests",
            GateOptions {
                running: 1,
                queue: 100,
                max_wait,
            },
        )
    }

    #[tokio::test]
    async fn a_wait_longer_than_max_wait_is_refused() {
        let g = gate(Duration::from_millis(50));
        let held = g.enter().await.unwrap();
        let started = Instant::now();
        let refused = g.enter().await;
        assert!(matches!(refused, Err(Error::Overloaded(_))));
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(held);
        g.enter().await.unwrap();
    }

    #[tokio::test]
    async fn a_wait_expected_too_long_is_refused_at_once() {
        let g = gate(Duration::from_millis(500));
        // Turns have taken a second lately: waiting behind one would exceed 500 ms.
        g.pace.record(Duration::from_secs(1));
        let held = g.enter().await.unwrap();
        let started = Instant::now();
        let refused = g.enter().await;
        assert!(matches!(refused, Err(Error::Overloaded(_))));
        assert!(started.elapsed() < Duration::from_millis(400));
        drop(held);
    }
}
