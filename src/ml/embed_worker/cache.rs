//! Vectors of recently embedded interactive texts, so that a text asked for again is not
//! embedded again. What repeats is mostly the passages' sentences: every generated or
//! extractive answer embeds the sentences of the passages it was given
//! (`KnowledgeBase::evidence`), and the passages of a knowledge base come back question
//! after question; so does a question's own text (retrieval, then the evidence).
//!
//! Two generations approximate least-recently-used at O(1): texts are added to the
//! current map; one found in the previous map moves to the current; when the current map
//! is full it becomes the previous one and the old previous one is dropped. So at most
//! two maps' worth is held, and a text used since the last turn over survives it.
//!
//! The cache is keyed by the exact text, held per embedder (a handle's cache never
//! answers for another model), and bounded in bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Bytes an entry costs besides its text and its floats (the maps' slots, the `Arc`s).
const ENTRY_OVERHEAD: usize = 96;

pub(super) struct VectorCache {
    /// Most bytes one generation holds (so at most twice this in all).
    generation_bytes: usize,
    maps: Mutex<Generations>,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Generations {
    current: HashMap<Arc<str>, Arc<[f32]>>,
    current_bytes: usize,
    previous: HashMap<Arc<str>, Arc<[f32]>>,
}

fn cost(text: &str, v: &[f32]) -> usize {
    text.len() + std::mem::size_of_val(v) + ENTRY_OVERHEAD
}

impl VectorCache {
    /// A cache of at most `bytes` (0: nothing is kept).
    pub(super) fn new(bytes: usize) -> Self {
        Self {
            generation_bytes: bytes / 2,
            maps: Mutex::new(Generations::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Whether anything is ever kept.
    pub(super) fn enabled(&self) -> bool {
        self.generation_bytes > 0
    }

    /// The vector of `text`, when it is held (it then counts as recently used).
    pub(super) fn get(&self, text: &str) -> Option<Arc<[f32]>> {
        let mut g = self.maps.lock();
        let found = if let Some(v) = g.current.get(text) {
            Some(v.clone())
        } else if let Some((k, v)) = g.previous.remove_entry(text) {
            let found = v.clone();
            g.insert(k, v, self.generation_bytes);
            Some(found)
        } else {
            None
        };
        drop(g);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Keeps `v` as the vector of `text`.
    pub(super) fn put(&self, text: &str, v: &[f32]) {
        if cost(text, v) > self.generation_bytes {
            return;
        }
        self.maps
            .lock()
            .insert(Arc::from(text), Arc::from(v), self.generation_bytes);
    }

    /// (hits, misses) since start-up.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

impl Generations {
    fn insert(&mut self, k: Arc<str>, v: Arc<[f32]>, limit: usize) {
        let c = cost(&k, &v);
        if self.current_bytes + c > limit {
            self.previous = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        if let Some(old) = self.current.insert(k.clone(), v) {
            self.current_bytes -= cost(&k, &old);
        }
        self.current_bytes += c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32) -> Vec<f32> {
        vec![x; 4]
    }

    #[test]
    fn a_kept_vector_is_returned_and_counted() {
        let c = VectorCache::new(1 << 20);
        assert!(c.get("a").is_none());
        c.put("a", &v(1.0));
        assert_eq!(c.get("a").as_deref(), Some(&v(1.0)[..]));
        assert_eq!(c.counts(), (1, 1));
    }

    #[test]
    fn the_bytes_stay_bounded_and_recent_texts_survive() {
        let entry = cost("t000", &v(0.0));
        // Room for 10 entries per generation.
        let c = VectorCache::new(2 * 10 * entry);
        c.put("t000", &v(0.0));
        for i in 1..1000 {
            c.put(&format!("t{i:03}"), &v(i as f32));
            // "t000" is used all along, so it is never dropped.
            assert!(c.get("t000").is_some(), "t000 dropped at {i}");
            let g = c.maps.lock();
            assert!(g.current_bytes <= 10 * entry);
            assert!(g.current.len() + g.previous.len() <= 20);
        }
        assert_eq!(c.get("t000").as_deref(), Some(&v(0.0)[..]));
        assert_eq!(c.get("t999").as_deref(), Some(&v(999.0)[..]));
        // Long unused: dropped.
        assert!(c.get("t500").is_none());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let c = VectorCache::new(0);
        assert!(!c.enabled());
        c.put("a", &v(1.0));
        assert!(c.get("a").is_none());
    }
}
