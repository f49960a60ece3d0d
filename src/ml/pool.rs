//! A small persistent thread pool for the CPU kernels: `n - 1` workers plus the calling
//! thread run one closure together and meet at its end. A forward pass of the LLM makes a
//! few hundred such rounds per token, each a few microseconds to a few milliseconds long,
//! so workers spin briefly between rounds (a futex wake-up costs more than most rounds)
//! and park when no round comes, so an idle model uses no CPU.
//!
//! The closure borrows from the caller's stack: [`Pool::run`] returns only after every
//! worker has finished with it, which is what makes the borrow sound (as in scoped
//! threads). A panic on any thread is caught and re-raised on the caller.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker spins for the next round before it parks.
const SPIN: Duration = Duration::from_micros(300);

/// The work of one round: called once on every thread with `(thread index, threads)`.
type Job<'a> = &'a (dyn Fn(usize, usize) + Sync);

struct Shared {
    /// Bumped by the caller to start a round; workers wait for it to change.
    epoch: AtomicUsize,
    /// Workers still running the current round.
    pending: AtomicUsize,
    /// The current round's closure: points at a `Job` on the caller's stack (see `run`).
    job: AtomicPtr<Job<'static>>,
    /// Set when a worker's part of the round panicked.
    panicked: AtomicBool,
    /// The pool is being dropped.
    stop: AtomicBool,
    /// Parked workers wait here for a new epoch.
    sleep: Mutex<()>,
    wake: Condvar,
    threads: usize,
}

/// A fixed set of threads that run data-parallel rounds.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Rounds are started by one caller at a time.
    round: Mutex<()>,
}

impl Pool {
    /// A pool of `threads` threads in all (the caller counts as one; at least 1).
    pub fn new(threads: usize, name: &str) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            epoch: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            threads,
        });
        let mut workers = Vec::with_capacity(threads - 1);
        for index in 1..threads {
            let shared = Arc::clone(&shared);
            workers.push(
                std::thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn(move || worker(shared, index))?,
            );
        }
        Ok(Self {
            shared,
            workers,
            round: Mutex::new(()),
        })
    }

    /// Threads in the pool, the caller included.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Runs `f(index, threads)` on every thread of the pool (the caller is index 0) and
    /// returns when all are done. A panic in any of them is re-raised here.
    pub fn run(&self, f: &(dyn Fn(usize, usize) + Sync)) {
        let threads = self.shared.threads;
        if threads == 1 {
            f(0, 1);
            return;
        }
        let _round = self.round.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: workers use `job` (and through it `f`) only between the epoch bump below
        // and `pending` reaching zero, and this function does not return before that, so
        // both outlive every use. The lifetime is erased only to store the pointer.
        let job: Job<'static> = unsafe { std::mem::transmute::<Job<'_>, Job<'static>>(f) };
        self.shared.job.store(
            &job as *const Job<'static> as *mut Job<'static>,
            Ordering::SeqCst,
        );
        self.shared.pending.store(threads - 1, Ordering::SeqCst);
        {
            let _g = self.shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.wake.notify_all();
        let mine = catch_unwind(AssertUnwindSafe(|| f(0, threads)));
        while self.shared.pending.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        self.shared
            .job
            .store(std::ptr::null_mut(), Ordering::SeqCst);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if self.shared.panicked.swap(false, Ordering::SeqCst) {
            panic!("a pool worker panicked");
        }
    }

    /// Splits `0..n` into `threads` contiguous parts as even as possible and returns
    /// part `index`.
    pub fn part(n: usize, index: usize, threads: usize) -> std::ops::Range<usize> {
        let base = n / threads;
        let extra = n % threads;
        let start = index * base + index.min(extra);
        let len = base + usize::from(index < extra);
        start..start + len
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn worker(shared: Arc<Shared>, index: usize) {
    // Rounds are counted from 0, the epoch when the pool was made: a worker that starts
    // late still sees a round begun before it ran.
    let mut seen = 0;
    loop {
        // Spin for the next round, then sleep until it comes.
        let started = Instant::now();
        let mut spins = 0u32;
        while shared.epoch.load(Ordering::Acquire) == seen {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && started.elapsed() > SPIN {
                let mut g = shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
                while shared.epoch.load(Ordering::Acquire) == seen {
                    g = shared.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
        }
        seen = shared.epoch.load(Ordering::Acquire);
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let job = shared.job.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is valid until this worker decrements `pending`
        // (see `Pool::run`).
        if let Some(job) = unsafe { job.as_ref() } {
            if catch_unwind(AssertUnwindSafe(|| job(index, shared.threads))).is_err() {
                shared.panicked.store(true, Ordering::SeqCst);
            }
        }
        shared.pending.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_thread_runs_each_round_once() {
        let pool = Pool::new(3, "test-pool").unwrap();
        let hits: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        for _ in 0..1000 {
            pool.run(&|i, n| {
                assert_eq!(n, 3);
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
        }
        for h in &hits {
            assert_eq!(h.load(Ordering::Relaxed), 1000);
        }
    }

    #[test]
    fn rounds_after_parking_still_run() {
        let pool = Pool::new(2, "test-pool").unwrap();
        let sum = AtomicU64::new(0);
        pool.run(&|i, _| {
            sum.fetch_add(i as u64 + 1, Ordering::Relaxed);
        });
        std::thread::sleep(Duration::from_millis(5));
        pool.run(&|i, _| {
            sum.fetch_add(i as u64 + 1, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_survives() {
        let pool = Pool::new(2, "test-pool").unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(&|i, _| {
                if i == 1 {
                    panic!("boom");
                }
            })
        }));
        assert!(r.is_err());
        let count = AtomicU64::new(0);
        pool.run(&|_, _| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn parts_cover_the_range() {
        for n in [0, 1, 5, 16, 17] {
            for t in 1..5 {
                let mut next = 0;
                for i in 0..t {
                    let r = Pool::part(n, i, t);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
