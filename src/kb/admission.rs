//! Bounded admission to work that competes for the CPU: at most `running` at once and at
//! most `queue` more waiting their turn; beyond that a request is refused at once with
//! [`Error::Overloaded`] (429 with `Retry-After`) instead of piling up. Two gates use it:
//! searches' index look-ups (usearch and tantivy, on blocking threads), and extractive
//! answers, whose sentence embeddings would otherwise fill the embedder's queue ahead of
//! the one-line queries of searches.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};

/// Sizes of a gate.
#[derive(Debug, Clone, Copy)]
pub struct GateOptions {
    /// Requests admitted at once (at least one).
    pub running: usize,
    /// Requests that may wait for a turn; more are refused.
    pub queue: usize,
}

/// See the module documentation.
pub struct Gate {
    /// What it admits, for errors and logs ("searches", "answers").
    what: &'static str,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    queue: usize,
}

/// Leaves the queue when dropped (also when the waiting request is cancelled).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gate {
    /// A gate admitting `opts.running` at once with a queue of `opts.queue`.
    pub fn new(what: &'static str, opts: GateOptions) -> Self {
        Self {
            what,
            permits: Arc::new(Semaphore::new(opts.running.max(1))),
            waiting: AtomicUsize::new(0),
            queue: opts.queue,
        }
    }

    /// Waits for a turn; the turn lasts as long as the permit.
    pub async fn enter(&self) -> Result<OwnedSemaphorePermit> {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Ok(p);
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        if ahead >= self.queue {
            tracing::warn!(
                waiting = ahead,
                what = self.what,
                "queue full; refusing a request"
            );
            return Err(Error::Overloaded(format!(
                "too many {} are waiting; retry shortly",
                self.what
            )));
        }
        self.permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Unavailable("shutting down".into()))
    }

    /// Runs `f` on a blocking thread during a turn, held until `f` returns even when the
    /// caller stops waiting for it.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let permit = self.enter().await?;
        Ok(tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
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
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_at_most_threads_and_refuses_beyond_the_queue() {
        let pool = Arc::new(Gate::new(
            "tests",
            GateOptions {
                running: 2,
                queue: 3,
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
        while pool.waiting() < 3 {
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
}
