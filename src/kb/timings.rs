//! Cumulative time spent in each ingestion stage, for throughput reports and logs.
//! Sources go through the stages side by side, so each stage is timed where its work
//! is done: parsing per source, embedding by the embedder (its bulk passes), storing by
//! the group writer; the three can add up to more than the wall time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Nanoseconds spent per stage since start-up.
#[derive(Debug, Default)]
pub struct StageTimes {
    parse: AtomicU64,
    store: AtomicU64,
    sources: AtomicU64,
    chunks: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StageSnapshot {
    pub parse_s: f64,
    pub embed_s: f64,
    pub store_s: f64,
    pub sources: u64,
    pub chunks: u64,
}

/// An ingestion stage timed here (embedding is timed by the embedder).
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    Parse,
    Store,
}

impl StageTimes {
    /// Adds `d` to `stage`.
    pub fn add(&self, stage: Stage, d: Duration) {
        let n = d.as_nanos() as u64;
        match stage {
            Stage::Parse => &self.parse,
            Stage::Store => &self.store,
        }
        .fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one ingested source of `chunks` chunks.
    pub fn count(&self, chunks: u64) {
        self.sources.fetch_add(1, Ordering::Relaxed);
        self.chunks.fetch_add(chunks, Ordering::Relaxed);
    }

    /// The counters now, with the embedder's `embed_s`.
    pub fn snapshot(&self, embed_s: f64) -> StageSnapshot {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        StageSnapshot {
            parse_s: s(&self.parse),
            embed_s,
            store_s: s(&self.store),
            sources: self.sources.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
        }
    }
}
