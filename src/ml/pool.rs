//! A small persistent thread pool for the CPU kernels: `n - 1` workers help the calling
//! thread through a round of work split into chunks. A forward pass of the LLM makes a few
//! hundred such rounds per token, each microseconds to milliseconds long, so workers spin
//! briefly between rounds (a futex wake-up costs more than most rounds) and park when no
//! round comes, so an idle model uses no CPU.
//!
//! Chunks are claimed dynamically, and a worker joins a round only while it is open: the
//! caller closes it when every chunk is claimed and then waits only for the workers that
//! joined. A worker the OS has not scheduled (a busy desktop, other processes) therefore
//! never holds a round up: the caller does its chunks.
//!
//! The round's closure borrows from the caller's stack: [`Pool::run`] returns only after
//! every worker that joined has finished with it, which makes the borrow sound (as in
//! scoped threads). A panic on any thread is caught and re-raised on the caller.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Spins the caller waits for workers still inside a closed round before it starts
/// yielding its core to them.
const CALLER_SPINS: u32 = 2048;

/// How long a worker spins for the next round before it parks.
const SPIN: Duration = Duration::from_micros(300);

/// The work of one round: called with `(thread index, chunk)`.
type Job<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Round state in one word: bits 0-31 the round number, bits 32-62 the workers inside
/// it, bit 63 set while it is open to joiners.
const OPEN: u64 = 1 << 63;
const ONE_ACTIVE: u64 = 1 << 32;
const ACTIVE_MASK: u64 = ((1 << 31) - 1) << 32;

struct Shared {
    state: AtomicU64,
    /// The current round's closure: points at a `Job` on the caller's stack.
    job: AtomicPtr<Job<'static>>,
    /// The next chunk to claim, and how many there are.
    next: AtomicUsize,
    chunks: AtomicUsize,
    /// Set when a worker's chunk panicked.
    panicked: AtomicBool,
    /// The pool is being dropped.
    stop: AtomicBool,
    /// Parked workers wait here for a new round.
    sleep: Mutex<()>,
    /// Workers parked or about to park (counted under `sleep`): a round wakes them only
    /// then, so a round while they spin costs no system call.
    sleepers: AtomicUsize,
    wake: Condvar,
    threads: usize,
}

impl Shared {
    /// Claims and runs chunks until none is left.
    fn work(&self, job: Job<'_>, thread: usize) {
        let n = self.chunks.load(Ordering::Acquire);
        loop {
            let c = self.next.fetch_add(1, Ordering::AcqRel);
            if c >= n {
                return;
            }
            job(thread, c);
        }
    }
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
            state: AtomicU64::new(0),
            job: AtomicPtr::new(std::ptr::null_mut()),
            next: AtomicUsize::new(0),
            chunks: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleep: Mutex::new(()),
            sleepers: AtomicUsize::new(0),
            wake: Condvar::new(),
            threads,
        });
        let mut workers = Vec::with_capacity(threads - 1);
        for index in 1..threads {
            let shared = Arc::clone(&shared);
            workers.push(
                std::thread::Builder::new()
                    .name(format!("{name}-{index}"))
                    .spawn(move || {
                        super::priority::lower_this_thread();
                        worker(shared, index)
                    })?,
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

    /// Runs `f(thread, chunk)` once for every chunk in `0..chunks`, on whichever threads
    /// claim them (`thread` is 0 for the caller, `1..threads` for workers, so per-thread
    /// buffers can be indexed by it), and returns when all are done. A panic in any of
    /// them is re-raised here.
    pub fn run(&self, chunks: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        if self.shared.threads == 1 || chunks <= 1 {
            for c in 0..chunks {
                f(0, c);
            }
            return;
        }
        let sh = &*self.shared;
        let _round = self.round.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: workers use `job` (and through it `f`) only while counted as active in
        // an open round, and this function waits for that count to reach zero after
        // closing the round, so both outlive every use. The lifetime is erased only to
        // store the pointer.
        let job: Job<'static> = unsafe { std::mem::transmute::<Job<'_>, Job<'static>>(f) };
        sh.job.store(
            &job as *const Job<'static> as *mut Job<'static>,
            Ordering::SeqCst,
        );
        sh.chunks.store(chunks, Ordering::SeqCst);
        sh.next.store(0, Ordering::SeqCst);
        let round = (sh.state.load(Ordering::SeqCst) as u32).wrapping_add(1);
        sh.state.store(OPEN | u64::from(round), Ordering::SeqCst);
        // A worker counts itself in `sleepers` before it last reads the round, both
        // sequentially consistent: either it sees this round or this sees it. Taking the
        // lock waits until it is inside `wait`, so the notification reaches it.
        if sh.sleepers.load(Ordering::SeqCst) > 0 {
            drop(sh.sleep.lock().unwrap_or_else(|e| e.into_inner()));
            sh.wake.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| sh.work(f, 0)));
        // Close the round to latecomers, then wait for those inside. A worker still
        // inside after a while was most likely preempted (other work shares the cores):
        // give it the core instead of spinning through this thread's time slice.
        sh.state.fetch_and(!OPEN, Ordering::SeqCst);
        let mut spins = 0u32;
        while sh.state.load(Ordering::Acquire) & ACTIVE_MASK != 0 {
            std::hint::spin_loop();
            spins = spins.saturating_add(1);
            if spins > CALLER_SPINS {
                std::thread::yield_now();
            }
        }
        sh.job.store(std::ptr::null_mut(), Ordering::SeqCst);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if sh.panicked.swap(false, Ordering::SeqCst) {
            panic!("a pool worker panicked");
        }
    }

    /// Splits `0..n` into `parts` contiguous ranges as even as possible and returns range
    /// `index`.
    pub fn part(n: usize, index: usize, parts: usize) -> std::ops::Range<usize> {
        let base = n / parts;
        let extra = n % parts;
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
            self.shared.state.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Joins the open round `round` if it still is; true when joined.
fn join(sh: &Shared, round: u32) -> bool {
    let mut s = sh.state.load(Ordering::Acquire);
    loop {
        if s & OPEN == 0 || s as u32 != round {
            return false;
        }
        match sh
            .state
            .compare_exchange_weak(s, s + ONE_ACTIVE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return true,
            Err(now) => s = now,
        }
    }
}

fn worker(shared: Arc<Shared>, index: usize) {
    let mut seen = shared.state.load(Ordering::SeqCst) as u32;
    loop {
        // Spin for the next round, then sleep until it comes.
        let started = Instant::now();
        let mut spins = 0u32;
        let round = |sh: &Shared| sh.state.load(Ordering::Acquire) as u32;
        while round(&shared) == seen {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && started.elapsed() > SPIN {
                let mut g = shared.sleep.lock().unwrap_or_else(|e| e.into_inner());
                shared.sleepers.fetch_add(1, Ordering::SeqCst);
                while shared.state.load(Ordering::SeqCst) as u32 == seen
                    && !shared.stop.load(Ordering::SeqCst)
                {
                    g = shared.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                shared.sleepers.fetch_sub(1, Ordering::SeqCst);
                break;
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        seen = round(&shared);
        if !join(&shared, seen) {
            continue;
        }
        let job = shared.job.load(Ordering::Acquire);
        // SAFETY: the caller keeps the job alive while this worker is active in the
        // open round it joined (see `Pool::run`).
        if let Some(job) = unsafe { job.as_ref() } {
            if catch_unwind(AssertUnwindSafe(|| shared.work(*job, index))).is_err() {
                shared.panicked.store(true, Ordering::SeqCst);
            }
        }
        shared.state.fetch_sub(ONE_ACTIVE, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64 as Counter;

    #[test]
    fn every_chunk_runs_once() {
        let pool = Pool::new(3, "test-pool").unwrap();
        let hits: Vec<Counter> = (0..50).map(|_| Counter::new(0)).collect();
        for _ in 0..1000 {
            pool.run(50, &|t, c| {
                assert!(t < 3);
                hits[c].fetch_add(1, Ordering::Relaxed);
            });
        }
        for h in &hits {
            assert_eq!(h.load(Ordering::Relaxed), 1000);
        }
    }

    #[test]
    fn rounds_after_parking_still_run() {
        let pool = Pool::new(2, "test-pool").unwrap();
        let sum = Counter::new(0);
        pool.run(4, &|_, c| {
            sum.fetch_add(c as u64 + 1, Ordering::Relaxed);
        });
        std::thread::sleep(Duration::from_millis(5));
        pool.run(4, &|_, c| {
            sum.fetch_add(c as u64 + 1, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 20);
    }

    #[test]
    fn parked_workers_wake_for_every_round() {
        // Rounds around the moment a worker parks: each round's first chunk waits (up
        // to 5 s) until the worker has taken the second, so a worker that slept through a
        // round's wake-up fails the test instead of letting the caller do its chunks.
        let pool = Pool::new(2, "test-pool").unwrap();
        for i in 0..200u64 {
            std::thread::sleep(Duration::from_micros(250 + (i * 37) % 200));
            let worker_took = AtomicBool::new(false);
            let missed = AtomicBool::new(false);
            pool.run(2, &|t, c| {
                if t == 1 {
                    worker_took.store(true, Ordering::SeqCst);
                } else if c == 0 {
                    let waited = Instant::now();
                    while !worker_took.load(Ordering::SeqCst) {
                        if waited.elapsed() > Duration::from_secs(5) {
                            missed.store(true, Ordering::SeqCst);
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
            });
            assert!(
                !missed.load(Ordering::SeqCst),
                "round {i}: the worker never came"
            );
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_survives() {
        let pool = Pool::new(2, "test-pool").unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(64, &|_, c| {
                if c == 63 {
                    panic!("boom");
                }
            })
        }));
        assert!(r.is_err());
        let count = Counter::new(0);
        pool.run(10, &|_, _| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn a_slow_worker_holds_up_only_its_own_chunk() {
        let pool = Pool::new(2, "test-pool").unwrap();
        // Whatever chunk the worker takes sleeps; the caller does the others meanwhile.
        let done = Counter::new(0);
        let started = Instant::now();
        pool.run(8, &|t, _| {
            if t == 1 {
                std::thread::sleep(Duration::from_millis(50));
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.load(Ordering::Relaxed), 8);
        assert!(
            started.elapsed() < Duration::from_millis(150),
            "{:?}",
            started.elapsed()
        );
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
