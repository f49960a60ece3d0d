//! Where the time of a forward pass goes, phase by phase, for measuring tools
//! (`examples/llm_step.rs`): off unless [`enable`]d, and then one clock read per phase
//! per layer. Times add up in one of [`SLOTS`] slots, chosen by the caller
//! ([`set_slot`]) so that runs of different kinds (one sequence, a batch) are kept apart.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// The phases, in the order a layer runs them, then the output layer.
pub const PHASES: [&str; 12] = [
    "norm",
    "qkv",
    "rope",
    "attention",
    "o-input",
    "o",
    "ffn-norm",
    "gate-up",
    "act",
    "down",
    "residual",
    "logits",
];
/// Slots of accumulated times.
pub const SLOTS: usize = 8;

static ON: AtomicBool = AtomicBool::new(false);
static SLOT: AtomicUsize = AtomicUsize::new(0);
static NANOS: [[AtomicU64; PHASES.len()]; SLOTS] =
    [const { [const { AtomicU64::new(0) }; PHASES.len()] }; SLOTS];

/// Starts (or stops) measuring.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Where the following passes' times add up (`slot < SLOTS`).
pub fn set_slot(slot: usize) {
    SLOT.store(slot.min(SLOTS - 1), Ordering::Relaxed);
}

/// Nanoseconds spent so far in each phase, in `slot`.
pub fn totals(slot: usize) -> [u64; PHASES.len()] {
    std::array::from_fn(|i| NANOS[slot.min(SLOTS - 1)][i].load(Ordering::Relaxed))
}

/// Zeroes every slot.
pub fn reset() {
    for slot in &NANOS {
        for n in slot {
            n.store(0, Ordering::Relaxed);
        }
    }
}

/// A running clock: [`Lap::lap`] adds the time since the last lap to a phase.
pub struct Lap(Option<Instant>);

impl Lap {
    /// A clock that runs only while measuring is on.
    #[inline]
    pub fn start() -> Self {
        Self(ON.load(Ordering::Relaxed).then(Instant::now))
    }

    /// Adds the time since the last lap (or the start) to phase `phase`.
    #[inline]
    pub fn lap(&mut self, phase: usize) {
        if let Some(t) = &mut self.0 {
            let now = Instant::now();
            NANOS[SLOT.load(Ordering::Relaxed)][phase]
                .fetch_add((now - *t).as_nanos() as u64, Ordering::Relaxed);
            *t = now;
        }
    }
}
