//! Causal grouped-query attention over the f16 cache, one work item at a time: an item is
//! one key/value head, a tile of up to 16 new tokens and a range of key positions. All the
//! query heads that share the key/value head are computed together, so every key block is
//! converted to f32 once per item. Softmax is online (running max and sum per query row),
//! so no score matrix is kept. When there are too few items to keep every thread busy
//! (decode, short suffixes) key ranges are split and the partial results combined.

// Row loops index several register arrays at once (the row batch is unrolled by `R`).
#![allow(clippy::needless_range_loop)]

use super::kv::{k_index, v_index, KvType, KBLOCK};
use crate::ml::quant::Tier;
use crate::ml::simd::{prefetch, F16x, Scalar16};

/// New tokens per query tile.
pub const QTILE: usize = 16;

/// What the attention of one layer reads.
#[derive(Clone, Copy)]
pub struct Shape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Dimensions per head.
    pub head_dim: usize,
    /// Positions allocated in the cache.
    pub cap: usize,
    /// Position of the first new token (keys `0..pos + tokens` are stored).
    pub pos: usize,
    /// New tokens.
    pub tokens: usize,
    /// Row stride of the query buffer (queries of head `h` at `h * head_dim`).
    pub ldq: usize,
    /// How the cache stores keys and values.
    pub kv: KvType,
    /// Sliding window: a key `window` or more positions before the query is hidden
    /// (`usize::MAX`: none).
    pub window: usize,
    /// Score scale (`1/sqrt(head_dim)` for most families).
    pub scale: f32,
}

impl Shape {
    /// The first key that token `t` (of the new ones) sees.
    fn first_key(&self, t: usize) -> usize {
        (self.pos + t + 1).saturating_sub(self.window)
    }
}

/// One work item.
#[derive(Clone, Copy, Debug)]
pub struct Item {
    /// Key/value head.
    pub kv_head: usize,
    /// New tokens `t0..t1`.
    pub t0: usize,
    /// End of the token tile.
    pub t1: usize,
    /// Keys `k0..k1` (further cut by causality).
    pub k0: usize,
    /// End of the key range.
    pub k1: usize,
}

/// The items of one layer's attention for `threads` threads, and how many consecutive
/// items share query rows (key ranges split in that many chunks; more than one means the
/// results need [`combine`]).
pub fn plan(s: &Shape, threads: usize) -> (Vec<Item>, usize) {
    let keys = s.pos + s.tokens;
    let tiles = s.tokens.div_ceil(QTILE);
    let split = !never_split(s.kv_heads, s.tokens, threads) && keys >= 2 * KBLOCK * threads;
    let chunks = if split { threads } else { 1 };
    let mut items = Vec::with_capacity(s.kv_heads * tiles * chunks);
    for tile in 0..tiles {
        let (t0, t1) = (tile * QTILE, ((tile + 1) * QTILE).min(s.tokens));
        let end = s.pos + t1;
        // Blocks wholly before the tile's window are skipped.
        let start = s.first_key(t0) / KBLOCK;
        for kv_head in 0..s.kv_heads {
            for c in 0..chunks {
                // Chunk boundaries on key blocks.
                let blocks = end.div_ceil(KBLOCK) - start;
                let (b0, b1) = (
                    start + blocks * c / chunks,
                    start + blocks * (c + 1) / chunks,
                );
                items.push(Item {
                    kv_head,
                    t0,
                    t1,
                    k0: b0 * KBLOCK,
                    k1: (b1 * KBLOCK).min(end),
                });
            }
        }
    }
    (items, chunks)
}

/// Running softmax state of query rows: per row `m`, `l`, then `head_dim` accumulators.
pub struct State {
    head_dim: usize,
    data: Vec<f32>,
}

impl State {
    /// Room for `rows` query rows.
    pub fn new(head_dim: usize) -> Self {
        Self {
            head_dim,
            data: Vec::new(),
        }
    }

    fn reset(&mut self, rows: usize) {
        let w = self.head_dim + 2;
        self.data.clear();
        self.data.resize(rows * w, 0.0);
        for r in 0..rows {
            self.data[r * w] = f32::NEG_INFINITY;
        }
    }

    /// Row `r`: `(m, l, acc)`.
    pub fn row(&self, r: usize) -> (f32, f32, &[f32]) {
        let w = self.head_dim + 2;
        let d = &self.data[r * w..(r + 1) * w];
        (d[0], d[1], &d[2..])
    }
}

/// Per-thread buffers of the kernel.
pub struct Scratch {
    kt: Vec<f32>,
    vb: Vec<f32>,
    /// The state of the last item run.
    pub state: State,
}

impl Scratch {
    /// Buffers for heads of `head_dim`.
    pub fn new(head_dim: usize) -> Self {
        Self {
            kt: vec![0.0; head_dim * KBLOCK],
            vb: vec![0.0; head_dim * KBLOCK],
            state: State::new(head_dim),
        }
    }
}

/// Whether [`plan`] keeps `tokens` new tokens' items whole whatever their keys: with
/// enough items to keep `threads` threads busy, key ranges are never split, so each row's
/// keys are summed in one order (the same as in any larger run of tokens).
pub fn never_split(kv_heads: usize, tokens: usize, threads: usize) -> bool {
    threads <= 1 || kv_heads * tokens.div_ceil(QTILE) >= 2 * threads
}

/// Runs `item`, leaving the state of its query rows (group head `g`, token `t` is row
/// `(t - t0) * group + g`) in `scratch.state`.
///
/// # Safety
/// `q` points at `s.tokens` rows of `s.ldq` floats; `k` and `v` are one layer's cache
/// buffers (of `s.kv`) with `s.pos + s.tokens` positions stored; `tier` is one the CPU
/// runs.
pub unsafe fn run_item(
    tier: Tier,
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
) {
    match tier {
        #[cfg(target_arch = "x86_64")]
        Tier::Avx512 => item_avx512(s, q, k, v, item, scratch),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => item_avx2(s, q, k, v, item, scratch),
        _ => item_kv::<Scalar16>(s, q, k, v, item, scratch),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
unsafe fn item_avx512(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
) {
    item_kv::<crate::ml::simd::Avx512x16>(s, q, k, v, item, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn item_avx2(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
) {
    item_kv::<crate::ml::simd::Avx2x16>(s, q, k, v, item, scratch)
}

#[inline(always)]
unsafe fn item_kv<V: F16x>(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
) {
    match s.kv {
        KvType::F16 => item_generic::<V, false>(s, q, k, v, item, scratch),
        KvType::F32 => item_generic::<V, true>(s, q, k, v, item, scratch),
    }
}

/// Sixteen cached values from value index `i` of `base`.
#[inline(always)]
unsafe fn load_kv<V: F16x, const F32: bool>(base: *const u8, i: usize) -> V {
    if F32 {
        V::load(base.cast::<f32>().add(i))
    } else {
        V::load_f16(base.cast::<u16>().add(i))
    }
}

/// What the row kernels of one item need.
struct Ctx {
    q: *const f32,
    ldq: usize,
    hd: usize,
    group: usize,
    t0: usize,
    kv_head: usize,
    scale: f32,
    kt: *const f32,
    vb: *const f32,
    state: *mut f32,
}

impl Ctx {
    /// Query row `r` of the item (token `t0 + r / group`, head `r % group` of the group).
    unsafe fn query(&self, r: usize) -> *const f32 {
        let (t, g) = (self.t0 + r / self.group, r % self.group);
        self.q
            .add(t * self.ldq + (self.kv_head * self.group + g) * self.hd)
    }

    /// Row `r`'s running state: `m`, `l`, then the accumulators.
    unsafe fn state(&self, r: usize) -> *mut f32 {
        self.state.add(r * (self.hd + 2))
    }
}

/// One key block for `R` query rows that see keys `lo..hi` of it (all 16 for rows past
/// the block): scores, the online softmax update, and the values.
#[inline(always)]
unsafe fn rows<V: F16x, const R: usize>(c: &Ctx, r0: usize, lo: usize, hi: usize) {
    let mut sc = [V::splat(0.0); R];
    let qs: [*const f32; R] = std::array::from_fn(|i| c.query(r0 + i));
    for d in 0..c.hd {
        let kd = V::load(c.kt.add(d * KBLOCK));
        for i in 0..R {
            sc[i] = V::splat(*qs[i].add(d)).fma(kd, sc[i]);
        }
    }
    let mut p = [[0f32; KBLOCK]; R];
    let mut corr = [0f32; R];
    for i in 0..R {
        let mut scores = [0f32; KBLOCK];
        sc[i].mul(V::splat(c.scale)).store(scores.as_mut_ptr());
        if lo > 0 || hi < KBLOCK {
            for (j, s) in scores.iter_mut().enumerate() {
                if j < lo || j >= hi {
                    *s = f32::NEG_INFINITY;
                }
            }
        }
        let v = V::load(scores.as_ptr());
        let st = c.state(r0 + i);
        let m_old = *st;
        let m_new = m_old.max(v.hmax());
        let pv = v.sub(V::splat(m_new)).exp();
        pv.store(p[i].as_mut_ptr());
        corr[i] = if m_old == f32::NEG_INFINITY {
            0.0
        } else {
            crate::ml::simd::exp(m_old - m_new)
        };
        *st = m_new;
        *st.add(1) = (*st.add(1)).mul_add(corr[i], pv.sum());
    }
    for d in (0..c.hd).step_by(16) {
        let mut a: [V; R] =
            std::array::from_fn(|i| V::load(c.state(r0 + i).add(2 + d)).mul(V::splat(corr[i])));
        for j in lo..hi {
            let vj = V::load(c.vb.add(j * c.hd + d));
            for i in 0..R {
                a[i] = V::splat(p[i][j]).fma(vj, a[i]);
            }
        }
        for i in 0..R {
            a[i].store(c.state(r0 + i).add(2 + d));
        }
    }
}

/// Rows `r0..r0 + n`, all seeing keys `lo..hi` of the block: four at a time, then the
/// rest together, so their loads are shared and their sums are independent chains (a
/// decode step's group of three heads is one run of three). A row's arithmetic is the same
/// whichever run it is in.
#[inline(always)]
unsafe fn row_run<V: F16x>(c: &Ctx, r0: usize, n: usize, lo: usize, hi: usize) {
    let mut r = r0;
    while r + 4 <= r0 + n {
        rows::<V, 4>(c, r, lo, hi);
        r += 4;
    }
    match r0 + n - r {
        3 => rows::<V, 3>(c, r, lo, hi),
        2 => rows::<V, 2>(c, r, lo, hi),
        1 => rows::<V, 1>(c, r, lo, hi),
        _ => {}
    }
}

#[inline(always)]
unsafe fn item_generic<V: F16x, const F32: bool>(
    s: &Shape,
    q: *const f32,
    k: &[u8],
    v: &[u8],
    item: Item,
    scratch: &mut Scratch,
) {
    let hd = s.head_dim;
    let group = s.heads / s.kv_heads;
    let nrows = (item.t1 - item.t0) * group;
    scratch.state.reset(nrows);
    let c = Ctx {
        q,
        ldq: s.ldq,
        hd,
        group,
        t0: item.t0,
        kv_head: item.kv_head,
        scale: s.scale,
        kt: scratch.kt.as_ptr(),
        vb: scratch.vb.as_ptr(),
        state: scratch.state.data.as_mut_ptr(),
    };
    let (kt, vb) = (scratch.kt.as_mut_ptr(), scratch.vb.as_mut_ptr());
    let (kp, vp) = (k.as_ptr(), v.as_ptr());
    let mut b = item.k0 / KBLOCK;
    // Bytes of one key block and of one block's values (each contiguous).
    let elem = if F32 { 4 } else { 2 };
    let block_bytes = KBLOCK * hd * elem;
    while b * KBLOCK < item.k1 {
        let base = b * KBLOCK;
        // The next block's keys and values are fetched while this one is computed: the
        // cache is read once per step from beyond L2, and waiting on each line in turn
        // left the kernel stalled on its loads.
        let next = base + KBLOCK;
        if next < item.k1 {
            let kn = kp.add(k_index(s.cap, hd, item.kv_head, next, 0) * elem);
            let vn = vp.add(v_index(s.cap, hd, item.kv_head, next, 0) * elem);
            prefetch(kn, block_bytes);
            prefetch(vn, (item.k1 - next).min(KBLOCK) * hd * elem);
        }
        // This block's keys (transposed: one vector per dimension) and values, in f32.
        for d in 0..hd {
            load_kv::<V, F32>(kp, k_index(s.cap, hd, item.kv_head, base, d))
                .store(kt.add(d * KBLOCK));
        }
        let valid_keys = (item.k1 - base).min(KBLOCK);
        for j in 0..valid_keys {
            for d in (0..hd).step_by(16) {
                load_kv::<V, F32>(vp, v_index(s.cap, hd, item.kv_head, base + j, d))
                    .store(vb.add(j * hd + d));
            }
        }
        // Keys `lo(t)..seen(t)` of the block are seen by token `t`: from the item's first
        // key and the token's window, up to its own position (within the item).
        let lo = |t: usize| (item.k0.max(s.first_key(t)).max(base) - base).min(KBLOCK);
        let seen = |t: usize| ((s.pos + t + 1).min(item.k1).saturating_sub(base)).min(KBLOCK);
        if lo(item.t1 - 1) == 0 && seen(item.t0) == KBLOCK {
            // Every row sees the whole block.
            row_run::<V>(&c, 0, nrows, 0, KBLOCK);
        } else {
            // A token's rows (its group's heads) see the same keys.
            for t in item.t0..item.t1 {
                let (lo, hi) = (lo(t), seen(t));
                if hi > lo {
                    row_run::<V>(&c, (t - item.t0) * group, group, lo, hi);
                }
            }
        }
        b += 1;
    }
}

/// Writes an item's normalised outputs: `out` rows of `ldo` floats, head `h` at
/// `h * head_dim`.
///
/// # Safety
/// `out` points at `s.tokens` rows of `ldo` floats that no other thread writes in the
/// item's heads and tokens.
pub unsafe fn write(s: &Shape, item: Item, state: &State, out: *mut f32, ldo: usize) {
    let group = s.heads / s.kv_heads;
    for t in item.t0..item.t1 {
        for g in 0..group {
            let (_, l, acc) = state.row((t - item.t0) * group + g);
            let head = item.kv_head * group + g;
            let o = out.add(t * ldo + head * s.head_dim);
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            for (d, a) in acc.iter().enumerate() {
                *o.add(d) = a * inv;
            }
        }
    }
}

/// Combines the states of items that cover the same query rows over different key ranges
/// and writes the result as [`write`] does.
///
/// # Safety
/// As for [`write`].
pub unsafe fn combine(s: &Shape, item: Item, parts: &[&State], out: *mut f32, ldo: usize) {
    let group = s.heads / s.kv_heads;
    let hd = s.head_dim;
    let mut acc = vec![0f32; hd];
    for t in item.t0..item.t1 {
        for g in 0..group {
            let r = (t - item.t0) * group + g;
            let m = parts
                .iter()
                .map(|p| p.row(r).0)
                .fold(f32::NEG_INFINITY, f32::max);
            let mut l = 0.0;
            acc.fill(0.0);
            for p in parts {
                let (mi, li, ai) = p.row(r);
                if mi == f32::NEG_INFINITY {
                    continue;
                }
                let f = crate::ml::simd::exp(mi - m);
                l += li * f;
                for (a, x) in acc.iter_mut().zip(ai) {
                    *a += x * f;
                }
            }
            let o = out.add(t * ldo + (item.kv_head * group + g) * hd);
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            for (d, a) in acc.iter().enumerate() {
                *o.add(d) = a * inv;
            }
        }
    }
}
