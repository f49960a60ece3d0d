//! The models' threads run at a lower CPU priority than the server's own (`model_nice`).
//!
//! Under load the models (the embedder's passes, the LLM's decode steps, the reranker)
//! keep every core busy. Everything else the server does is short (a listing, a delete,
//! a conversation search, an index look-up), and at equal priority each of those waits
//! for a core behind threads that never yield. A nicer model thread gives way to them at
//! once and still takes every cycle they leave, so the models lose little throughput
//! while the short requests stop waiting on them. It also keeps a desktop that runs
//! ragd responsive while a long ingestion runs.
//!
//! Linux only: there a thread has its own nice value (`setpriority` with a thread id),
//! and threads inherit it from the thread that starts them. Elsewhere it does nothing.

use std::sync::atomic::{AtomicI32, Ordering};

/// Nice value of model threads (0: the server's own priority).
static MODEL_NICE: AtomicI32 = AtomicI32::new(0);

/// The nice value the models' threads take from now on, and the global compute pool
/// (rayon's, which runs the embedder's and the reranker's blocks) built at it if it is
/// not built yet. Call once at start-up, before the models load.
pub fn init(nice: i32) {
    MODEL_NICE.store(nice.clamp(0, 19), Ordering::Relaxed);
    // Already built (another server in this process): it keeps the priority it has.
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("ragd-compute-{i}"))
        .start_handler(|_| lower_this_thread())
        .build_global();
}

/// Lowers the calling thread to the models' priority (never raises it). Called first
/// thing on every model thread.
pub fn lower_this_thread() {
    let nice = MODEL_NICE.load(Ordering::Relaxed);
    if nice > 0 {
        set_this_thread(nice);
    }
}

#[cfg(target_os = "linux")]
fn set_this_thread(nice: i32) {
    // SAFETY: plain system calls on the calling thread's own id.
    let (tid, now) = unsafe {
        let tid = libc::gettid() as libc::id_t;
        (tid, libc::getpriority(libc::PRIO_PROCESS, tid))
    };
    if now >= nice {
        return;
    }
    // SAFETY: as above.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        tracing::debug!(
            nice,
            error = %std::io::Error::last_os_error(),
            "could not lower a model thread's priority"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn set_this_thread(_nice: i32) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn this_thread_nice() -> i32 {
        // SAFETY: a plain system call on the calling thread's own id.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[test]
    fn a_lowered_thread_and_the_threads_it_starts_run_nicer() {
        let before = this_thread_nice();
        let got = std::thread::spawn(move || {
            set_this_thread(before + 3);
            let own = this_thread_nice();
            let child = std::thread::spawn(this_thread_nice).join().unwrap();
            // Never raised back.
            set_this_thread(before + 1);
            (own, child, this_thread_nice())
        })
        .join()
        .unwrap();
        assert_eq!(got, (before + 3, before + 3, before + 3));
        // The test's own thread is untouched.
        assert_eq!(this_thread_nice(), before);
    }
}
