//! The bounded pool that runs searches' index look-ups (usearch and tantivy) on blocking
//! threads: at most `threads` at once, sized to the cores, with at most `queue` more
//! waiting their turn. A search beyond that is refused at once with
//! [`Error::Overloaded`] (429 with `Retry-After`) instead of piling up threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// Sizes of the pool.
#[derive(Debug, Clone, Copy)]
pub struct SearchPoolOptions {
    /// Look-ups running at once.
    pub threads: usize,
    /// Look-ups that may wait for a thread; more are refused.
    pub queue: usize,
}

/// See the module documentation.
pub struct SearchPool {
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

impl SearchPool {
    /// A pool of `opts.threads` (at least one) with a queue of `opts.queue`.
    pub fn new(opts: SearchPoolOptions) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(opts.threads.max(1))),
            waiting: AtomicUsize::new(0),
            queue: opts.queue,
        }
    }

    /// Runs `f` on a blocking thread once one of the pool's turns is free. The turn is
    /// held until `f` returns, even when the caller stops waiting for it.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
                let _waiting = Waiting(&self.waiting);
                if ahead >= self.queue {
                    tracing::warn!(waiting = ahead, "search queue full; refusing a search");
                    return Err(Error::Overloaded(
                        "too many searches are waiting; retry shortly".into(),
                    ));
                }
                self.permits
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| Error::Unavailable("shutting down".into()))?
            }
        };
        Ok(tokio::task::spawn_blocking(move || {
            let out = f();
            drop(permit);
            out
        })
        .await?)
    }

    /// Searches waiting for a turn now.
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
        let pool = Arc::new(SearchPool::new(SearchPoolOptions {
            threads: 2,
            queue: 3,
        }));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(parking_lot::Mutex::new(gate));
        let tasks: Vec<_> = (0..5)
            .map(|_| {
                let (pool, running, peak, gate) =
                    (pool.clone(), running.clone(), peak.clone(), gate.clone());
                tokio::spawn(async move {
                    pool.run(move || {
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
        let refused = pool.run(|| ()).await;
        assert!(matches!(refused, Err(Error::Overloaded(_))), "{refused:?}");
        for _ in 0..5 {
            release.send(()).unwrap();
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(pool.waiting(), 0);
        pool.run(|| ()).await.unwrap();
    }
}
