//! The usearch HNSW index (cosine), persisted as `vectors.usearch` plus a small JSON
//! sidecar holding the store generation, the count and a checksum of the index file.
//! A missing, mismatched or corrupt file opens as empty so the caller rebuilds it.
//!
//! usearch serves a search only on a thread slot reserved ahead (and an insert only
//! within reserved capacity); it fails the call otherwise. So the index reserves a fixed
//! number of search slots whenever it is created, loaded or grown, and a search waits for
//! a free slot: any number of threads may search, insert, delete and save at once.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use anyhow::Context as _;
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::OnDisk;

const FILE: &str = "vectors.usearch";
const META: &str = "vectors.usearch.json";

#[derive(Serialize, Deserialize)]
struct Meta {
    generation: u64,
    count: u64,
    dim: usize,
    sha256: String,
}

/// Capacity reserved by a new index, so small knowledge bases never grow it.
const INITIAL_CAPACITY: usize = 1024;

/// A vector index keyed by chunk key.
pub struct VectorIndex {
    index: RwLock<Index>,
    /// One permit per usearch search slot.
    slots: SearchSlots,
    dir: PathBuf,
    dim: usize,
    /// Generation of the in-memory state; saved with the file.
    generation: AtomicU64,
    dirty: AtomicBool,
    /// Held while writing files, so a final save waits for one in progress.
    saving: Mutex<()>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// One nearest neighbour: chunk key and cosine similarity (higher is closer).
#[derive(Debug, Clone, Copy)]
pub struct Hit {
    pub key: u64,
    pub similarity: f32,
}

/// A counting semaphore over usearch's reserved search slots: a search holds a permit
/// while it runs, so usearch is never asked for more concurrent searches than it has
/// slots, however many threads call in.
struct SearchSlots {
    total: usize,
    free: Mutex<usize>,
    freed: Condvar,
}

struct SlotPermit<'a>(&'a SearchSlots);

impl SearchSlots {
    fn new(total: usize) -> Self {
        Self {
            total,
            free: Mutex::new(total),
            freed: Condvar::new(),
        }
    }

    fn acquire(&self) -> SlotPermit<'_> {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        *free -= 1;
        SlotPermit(self)
    }
}

impl Drop for SlotPermit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
    }
}

/// Reserves room for `members` vectors and `slots` concurrent searches. Never shrinks.
fn reserve(index: &Index, members: usize, slots: usize) -> anyhow::Result<()> {
    index
        .reserve_capacity_and_threads(members, slots)
        .map_err(|e| anyhow::anyhow!("usearch reserve: {e}"))
}

fn new_index(dim: usize) -> anyhow::Result<Index> {
    let opts = IndexOptions {
        dimensions: dim,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F32,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 64,
        multi: false,
    };
    Index::new(&opts).map_err(|e| anyhow::anyhow!("usearch: {e}"))
}

fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

impl VectorIndex {
    /// Opens the index in `dir`, or an empty one when the files are missing, do not
    /// match `dim`, or fail their checksum. At most `searchers` searches run at once
    /// (at least one); more wait for a free slot.
    pub fn open(dir: &Path, dim: usize, searchers: usize) -> anyhow::Result<(Self, OnDisk)> {
        let slots = searchers.max(1);
        let (index, on_disk) = match Self::load(dir, dim) {
            Ok(Some((index, meta))) => (
                index,
                OnDisk {
                    generation: Some(meta.generation),
                    count: meta.count,
                },
            ),
            Ok(None) => (
                new_index(dim)?,
                OnDisk {
                    generation: None,
                    count: 0,
                },
            ),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "vector index unreadable; it will be rebuilt");
                (
                    new_index(dim)?,
                    OnDisk {
                        generation: None,
                        count: 0,
                    },
                )
            }
        };
        // A loaded index has exactly its size as capacity and usearch's default slots.
        reserve(&index, index.size().max(INITIAL_CAPACITY), slots)?;
        let generation = on_disk.generation.unwrap_or(0);
        Ok((
            Self {
                index: RwLock::new(index),
                slots: SearchSlots::new(slots),
                dir: dir.to_owned(),
                dim,
                generation: AtomicU64::new(generation),
                dirty: AtomicBool::new(false),
                saving: Mutex::new(()),
            },
            on_disk,
        ))
    }

    fn load(dir: &Path, dim: usize) -> anyhow::Result<Option<(Index, Meta)>> {
        let (file, meta_path) = (dir.join(FILE), dir.join(META));
        if !file.exists() || !meta_path.exists() {
            return Ok(None);
        }
        let meta: Meta = serde_json::from_slice(&std::fs::read(&meta_path)?).context("sidecar")?;
        anyhow::ensure!(
            meta.dim == dim,
            "dimension {} on disk, model has {dim}",
            meta.dim
        );
        // Checked before usearch reads it: a damaged graph must never be loaded.
        anyhow::ensure!(sha256_file(&file)? == meta.sha256, "checksum mismatch");
        let index = new_index(dim)?;
        let path = file.to_str().context("non-UTF-8 data path")?;
        index
            .load(path)
            .map_err(|e| anyhow::anyhow!("usearch load: {e}"))?;
        anyhow::ensure!(index.size() as u64 == meta.count, "count mismatch");
        Ok(Some((index, meta)))
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.index.read().size()
    }

    /// Whether the index holds no vectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Path of the index file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Drops every vector (before a rebuild).
    pub fn clear(&self) -> anyhow::Result<()> {
        let index = new_index(self.dim)?;
        reserve(&index, INITIAL_CAPACITY, self.slots.total)?;
        *self.index.write() = index;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Removes `remove`, then inserts or replaces `upsert`, and records `generation`.
    pub fn apply(
        &self,
        remove: &[u64],
        upsert: &[(u64, &[f32])],
        generation: u64,
    ) -> anyhow::Result<()> {
        let index = self.index.write();
        for &k in remove.iter().chain(upsert.iter().map(|(k, _)| k)) {
            if index.contains(k) {
                index
                    .remove(k)
                    .map_err(|e| anyhow::anyhow!("usearch remove: {e}"))?;
            }
        }
        // Grown ahead of the inserts (doubling), with the same search slots.
        let needed = index.size() + upsert.len();
        if needed > index.capacity() {
            let members = needed.max(index.capacity() * 2).max(INITIAL_CAPACITY);
            reserve(&index, members, self.slots.total)?;
        }
        for (k, v) in upsert {
            anyhow::ensure!(
                v.len() == self.dim,
                "vector of {} dims, index has {}",
                v.len(),
                self.dim
            );
            index
                .add(*k, v)
                .map_err(|e| anyhow::anyhow!("usearch add: {e}"))?;
        }
        self.generation.store(generation, Ordering::Release);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// The `k` nearest vectors to `query`. Blocks while every search slot is taken.
    pub fn search(&self, query: &[f32], k: usize) -> anyhow::Result<Vec<Hit>> {
        anyhow::ensure!(
            query.len() == self.dim,
            "query of {} dims, index has {}",
            query.len(),
            self.dim
        );
        let _slot = self.slots.acquire();
        let index = self.index.read();
        if index.size() == 0 || k == 0 {
            return Ok(Vec::new());
        }
        let m = index
            .search(query, k)
            .map_err(|e| anyhow::anyhow!("usearch search: {e}"))?;
        Ok(m.keys
            .into_iter()
            .zip(m.distances)
            .map(|(key, d)| Hit {
                key,
                similarity: 1.0 - d,
            })
            .collect())
    }

    /// The cosine similarity of `query` with the stored vector of each of `keys` (stored
    /// as f32, as they were added).
    pub fn similarity(&self, query: &[f32], keys: &[u64]) -> anyhow::Result<Vec<Option<f32>>> {
        anyhow::ensure!(
            query.len() == self.dim,
            "query of {} dims, index has {}",
            query.len(),
            self.dim
        );
        let index = self.index.read();
        let mut v = vec![0.0f32; self.dim];
        keys.iter()
            .map(|&k| {
                if !index.contains(k) {
                    return Ok(None);
                }
                let n = index
                    .get(k, &mut v)
                    .map_err(|e| anyhow::anyhow!("usearch get: {e}"))?;
                Ok((n > 0).then(|| cosine(&v, query)))
            })
            .collect()
    }

    /// Writes the index and its sidecar atomically if anything changed since the last save.
    pub fn save_if_dirty(&self) -> anyhow::Result<bool> {
        let _saving = self.saving.lock();
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        if let Err(e) = self.save() {
            self.dirty.store(true, Ordering::Release);
            return Err(e);
        }
        Ok(true)
    }

    fn save(&self) -> anyhow::Result<()> {
        let tmp = self.dir.join(format!("{FILE}.tmp"));
        // The read lock is held only while usearch writes the file: the fsync and the
        // checksum run after it, so inserts (and the searches queued behind a waiting
        // insert) are not held up by the disk.
        let (generation, count) = {
            let index = self.index.read();
            index
                .save(tmp.to_str().context("non-UTF-8 data path")?)
                .map_err(|e| anyhow::anyhow!("usearch save: {e}"))?;
            (self.generation.load(Ordering::Acquire), index.size() as u64)
        };
        std::fs::File::open(&tmp)?.sync_all()?;
        let meta = Meta {
            generation,
            count,
            dim: self.dim,
            sha256: sha256_file(&tmp)?,
        };
        std::fs::rename(&tmp, self.dir.join(FILE))?;
        let meta_tmp = self.dir.join(format!("{META}.tmp"));
        let mut f = std::fs::File::create(&meta_tmp)?;
        f.write_all(&serde_json::to_vec(&meta)?)?;
        f.sync_all()?;
        std::fs::rename(&meta_tmp, self.dir.join(META))?;
        tracing::debug!(generation, count = meta.count, "vector index saved");
        Ok(())
    }
}

impl super::VectorStore for VectorIndex {
    fn dim(&self) -> usize {
        VectorIndex::dim(self)
    }

    fn apply(
        &self,
        remove: &[u64],
        upsert: &[(u64, &[f32])],
        generation: u64,
    ) -> anyhow::Result<()> {
        VectorIndex::apply(self, remove, upsert, generation)
    }

    fn search(&self, query: &[f32], k: usize) -> anyhow::Result<Vec<Hit>> {
        VectorIndex::search(self, query, k)
    }

    fn count(&self) -> u64 {
        self.len() as u64
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn flush(&self) -> anyhow::Result<bool> {
        self.save_if_dirty()
    }

    fn clear(&self) -> anyhow::Result<()> {
        VectorIndex::clear(self)
    }

    fn similarity(&self, query: &[f32], keys: &[u64]) -> anyhow::Result<Vec<Option<f32>>> {
        VectorIndex::similarity(self, query, keys)
    }

    fn location(&self) -> String {
        self.path().display().to_string()
    }
}

/// `n` deterministic pseudo-random unit vectors of `dim` dimensions (xorshift from
/// `seed`): real points for benchmarks and tests of the index, with no model needed.
pub fn pseudo_random_units(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            let v: Vec<f32> = (0..dim)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
                })
                .collect();
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            v.into_iter().map(|a| a / norm).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn saves_reloads_and_rejects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let (idx, disk) = VectorIndex::open(dir.path(), 3, 2).unwrap();
        assert_eq!(disk.generation, None);
        let a = unit(&[1.0, 0.0, 0.0]);
        let b = unit(&[0.0, 1.0, 0.0]);
        idx.apply(&[], &[(1, &a), (2, &b)], 7).unwrap();
        let hits = idx.search(&unit(&[0.9, 0.1, 0.0]), 2).unwrap();
        assert_eq!(hits[0].key, 1);
        assert!(hits[0].similarity > hits[1].similarity);
        assert!(idx.save_if_dirty().unwrap());
        assert!(!idx.save_if_dirty().unwrap());

        let (idx2, disk) = VectorIndex::open(dir.path(), 3, 2).unwrap();
        assert_eq!(
            disk,
            OnDisk {
                generation: Some(7),
                count: 2
            }
        );
        assert_eq!(idx2.search(&b, 1).unwrap()[0].key, 2);
        drop(idx2);

        // A flipped byte fails the checksum: the index opens empty, to be rebuilt.
        let file = dir.path().join(FILE);
        let mut bytes = std::fs::read(&file).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&file, bytes).unwrap();
        let (idx3, disk) = VectorIndex::open(dir.path(), 3, 2).unwrap();
        assert_eq!(disk.generation, None);
        assert!(idx3.is_empty());
        // A different dimension is also not loaded.
        let (_, disk) = VectorIndex::open(dir.path(), 4, 2).unwrap();
        assert_eq!(disk.generation, None);
    }

    #[test]
    fn many_threads_search_while_it_grows_shrinks_and_saves() {
        const DIM: usize = 16;
        let dir = tempfile::tempdir().unwrap();
        let base = pseudo_random_units(2000, DIM, 1);
        {
            let (idx, _) = VectorIndex::open(dir.path(), DIM, 2).unwrap();
            let items: Vec<(u64, &[f32])> = base
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u64, v.as_slice()))
                .collect();
            idx.apply(&[], &items, 1).unwrap();
            idx.save_if_dirty().unwrap();
        }
        // Reloaded, the index has no spare capacity: the first insert must grow it while
        // 64 threads search through 2 slots.
        let (idx, disk) = VectorIndex::open(dir.path(), DIM, 2).unwrap();
        assert_eq!(disk.count, 2000);
        let idx = std::sync::Arc::new(idx);
        let extra = pseudo_random_units(3000, DIM, 2);
        let queries = pseudo_random_units(64, DIM, 3);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let searchers: Vec<_> = queries
            .into_iter()
            .map(|q| {
                let (idx, stop) = (idx.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::Acquire) || n == 0 {
                        let hits = idx.search(&q, 10).expect("search under load");
                        assert_eq!(hits.len(), 10);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let saver = {
            let (idx, stop) = (idx.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    idx.save_if_dirty().expect("save under load");
                }
            })
        };
        for (round, batch) in extra.chunks(100).enumerate() {
            let first = 10_000 + round as u64 * 100;
            let items: Vec<(u64, &[f32])> = batch
                .iter()
                .enumerate()
                .map(|(i, v)| (first + i as u64, v.as_slice()))
                .collect();
            // Each round also deletes ten of the original vectors.
            let remove: Vec<u64> = (0..10).map(|i| round as u64 * 10 + i).collect();
            idx.apply(&remove, &items, 2 + round as u64).unwrap();
        }
        stop.store(true, Ordering::Release);
        let searches: usize = searchers.into_iter().map(|t| t.join().unwrap()).sum();
        saver.join().unwrap();
        assert!(searches >= 64);
        assert_eq!(idx.len(), 2000 + 3000 - 300);
        assert!(idx.save_if_dirty().is_ok());
        let (reloaded, disk) = VectorIndex::open(dir.path(), DIM, 2).unwrap();
        assert_eq!(disk.count, 4700);
        assert_eq!(reloaded.search(&extra[2999], 1).unwrap()[0].key, 12_999);
    }

    #[test]
    fn apply_replaces_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        let (idx, _) = VectorIndex::open(dir.path(), 2, 2).unwrap();
        idx.apply(&[], &[(5, &[1.0, 0.0]), (6, &[0.0, 1.0])], 1)
            .unwrap();
        idx.apply(&[6], &[(5, &[0.0, 1.0])], 2).unwrap();
        assert_eq!(idx.len(), 1);
        let hits = idx.search(&[0.0, 1.0], 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].key, 5);
        assert!(hits[0].similarity > 0.99);
    }
}
