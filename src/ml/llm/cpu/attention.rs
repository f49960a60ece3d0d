//! Causal grouped-query attention over the f16 cache, one work item at a time: an item is
//! one key/value head, a tile of up to 16 new tokens and a range of key positions. All the
//! query heads that share the key/value head are computed together, so every key block is
//! converted to f32 once per item. Softmax is online (running max and sum per query row),
//! so no score matrix is kept. When there are too few items to keep every thread busy
//! (decode, short suffixes) key ranges are split and the partial results combined.

// Row loops index several register arrays at once (the row batch is unrolled by `R`).
#![allow(clippy::needless_range_loop)]

mod decode;

use self::decode::decode;
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
    /// Query heads `g0..g1` of the key/value head's group (all of them but in a decode
    /// step with fewer key/value heads than threads to share).
    pub g0: usize,
    /// End of the query heads.
    pub g1: usize,
}

impl Item {
    /// Query rows per token.
    fn heads(&self) -> usize {
        self.g1 - self.g0
    }
}

/// The items of one layer's attention for `threads` threads, and how many consecutive
/// items share query rows (key ranges split in that many chunks; more than one means the
/// results need [`combine`]).
///
/// A part of one token (a decode step) never has its keys split: with `peers - 1` other
/// sequences in the step its items are its key/value heads, and when all of them are
/// still too few to keep the threads busy each group's query heads are shared out
/// instead. A query row's arithmetic does not depend on which other rows share its item,
/// so a sequence's results are the same whatever the number of peers.
pub fn plan(s: &Shape, threads: usize, peers: usize) -> (Vec<Item>, usize) {
    let group = s.heads / s.kv_heads;
    if s.tokens == 1 {
        let whole = peers.max(1) * s.kv_heads;
        let parts = if threads <= 1 || whole >= 2 * threads {
            1
        } else {
            (2 * threads).div_ceil(whole).min(group)
        };
        let start = s.first_key(0) / KBLOCK * KBLOCK;
        let mut items = Vec::with_capacity(s.kv_heads * parts);
        for kv_head in 0..s.kv_heads {
            for c in 0..parts {
                items.push(Item {
                    kv_head,
                    t0: 0,
                    t1: 1,
                    k0: start,
                    k1: s.pos + 1,
                    g0: group * c / parts,
                    g1: group * (c + 1) / parts,
                });
            }
        }
        return (items, 1);
    }
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
                    g0: 0,
                    g1: group,
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
    /// The key/value head's group of query heads, and the item's share of it.
    group: usize,
    g0: usize,
    gsub: usize,
    t0: usize,
    kv_head: usize,
    scale: f32,
    kt: *const f32,
    vb: *const f32,
    state: *mut f32,
}

impl Ctx {
    /// Query row `r` of the item (token `t0 + r / gsub`, head `g0 + r % gsub` of the
    /// group).
    unsafe fn query(&self, r: usize) -> *const f32 {
        let (t, g) = (self.t0 + r / self.gsub, self.g0 + r % self.gsub);
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
        let st = c.state(r0 + i);
        corr[i] = softmax_step(sc[i], c.scale, lo, hi, &mut *st, &mut *st.add(1), &mut p[i]);
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

/// One query row's online softmax over a key block whose keys `lo..hi` it sees: scales
/// its raw scores `sc`, updates its running maximum `m` and sum `l`, leaves the block's
/// weights in `p` and returns the factor the row's value sums are to be multiplied by.
/// Shared by the prompt and decode kernels, so both compute a row alike.
#[inline(always)]
unsafe fn softmax_step<V: F16x>(
    sc: V,
    scale: f32,
    lo: usize,
    hi: usize,
    m: &mut f32,
    l: &mut f32,
    p: &mut [f32; KBLOCK],
) -> f32 {
    let mut scores = [0f32; KBLOCK];
    sc.mul(V::splat(scale)).store(scores.as_mut_ptr());
    if lo > 0 || hi < KBLOCK {
        for (j, s) in scores.iter_mut().enumerate() {
            if j < lo || j >= hi {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    let v = V::load(scores.as_ptr());
    let m_new = m.max(v.hmax());
    let pv = v.sub(V::splat(m_new)).exp();
    pv.store(p.as_mut_ptr());
    let corr = if *m == f32::NEG_INFINITY {
        0.0
    } else {
        crate::ml::simd::exp(*m - m_new)
    };
    *m = m_new;
    *l = l.mul_add(corr, pv.sum());
    corr
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
    let gsub = item.heads();
    let nrows = (item.t1 - item.t0) * gsub;
    scratch.state.reset(nrows);
    if item.t1 - item.t0 == 1 && decode::<V, F32>(s, q, k, v, item, scratch, group) {
        return;
    }
    let c = Ctx {
        q,
        ldq: s.ldq,
        hd,
        group,
        g0: item.g0,
        gsub,
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
                    row_run::<V>(&c, (t - item.t0) * gsub, gsub, lo, hi);
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
    let gsub = item.heads();
    for t in item.t0..item.t1 {
        for g in item.g0..item.g1 {
            let (_, l, acc) = state.row((t - item.t0) * gsub + g - item.g0);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of `cap` positions with pseudo-random keys and values, and queries for
    /// `tokens` rows of `ldq` floats.
    struct Case {
        s: Shape,
        k: Vec<u8>,
        v: Vec<u8>,
        q: Vec<f32>,
    }

    fn case(heads: usize, kv_heads: usize, head_dim: usize, keys: usize, window: usize) -> Case {
        let cap = keys.div_ceil(KBLOCK) * KBLOCK + KBLOCK;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        };
        let mut k = vec![0u8; kv_heads * cap * head_dim * 2];
        let mut v = vec![0u8; kv_heads * cap * head_dim * 2];
        for h in 0..kv_heads {
            for p in 0..keys {
                for d in 0..head_dim {
                    let (ki, vi) = (
                        k_index(cap, head_dim, h, p, d),
                        v_index(cap, head_dim, h, p, d),
                    );
                    k[2 * ki..2 * ki + 2]
                        .copy_from_slice(&half::f16::from_f32(rnd()).to_bits().to_le_bytes());
                    v[2 * vi..2 * vi + 2]
                        .copy_from_slice(&half::f16::from_f32(rnd()).to_bits().to_le_bytes());
                }
            }
        }
        let ldq = (heads + 2 * kv_heads) * head_dim;
        let q = (0..2 * ldq).map(|_| rnd()).collect();
        let s = Shape {
            heads,
            kv_heads,
            head_dim,
            cap,
            pos: 0,
            tokens: 0,
            ldq,
            kv: KvType::F16,
            window,
            scale: 1.0 / (head_dim as f32).sqrt(),
        };
        Case { s, k, v, q }
    }

    /// Runs `items` of shape `s` with queries `q` and writes every query head's output
    /// for `s.tokens` tokens.
    fn run(tier: Tier, c: &Case, s: &Shape, q: &[f32], items: &[Item]) -> Vec<f32> {
        let ldo = s.heads * s.head_dim;
        let mut out = vec![f32::NAN; s.tokens * ldo];
        let mut scratch = Scratch::new(s.head_dim);
        for &item in items {
            // SAFETY: `q` holds `s.tokens` rows, the cache `s.pos + s.tokens` positions, and
            // `tier` is one this CPU runs.
            unsafe {
                run_item(tier, s, q.as_ptr(), &c.k, &c.v, item, &mut scratch);
                write(s, item, &scratch.state, out.as_mut_ptr(), ldo);
            }
        }
        out
    }

    #[test]
    fn a_decode_token_gets_exactly_what_the_prompt_kernels_give_it() {
        // (heads, kv heads, head size, keys, window): the decode kernels' shapes, one
        // they do not cover (7 heads a group), a partial last block, a sliding window.
        let shapes = [
            (9, 3, 64, 150, usize::MAX),
            (14, 2, 64, 97, usize::MAX),
            (4, 2, 128, 64, usize::MAX),
            (4, 1, 256, 40, usize::MAX),
            (9, 3, 64, 150, 37),
        ];
        for tier in Tier::available() {
            for &(heads, kvh, hd, keys, window) in &shapes {
                let c = case(heads, kvh, hd, keys, window);
                let group = heads / kvh;
                // The prompt kernels: the last two positions as one tile of two tokens.
                let prompt = Shape {
                    pos: keys - 2,
                    tokens: 2,
                    ..c.s
                };
                let start = prompt.first_key(0) / KBLOCK * KBLOCK;
                let tile: Vec<Item> = (0..kvh)
                    .map(|kv_head| Item {
                        kv_head,
                        t0: 0,
                        t1: 2,
                        k0: start,
                        k1: keys,
                        g0: 0,
                        g1: group,
                    })
                    .collect();
                let whole = run(tier, &c, &prompt, &c.q, &tile);
                let ldo = heads * hd;
                let expected = &whole[ldo..];
                // The last position alone, as a decode step plans it with and without
                // peers (query heads shared out over items, or whole groups).
                let decode = Shape {
                    pos: keys - 1,
                    tokens: 1,
                    ..c.s
                };
                for (threads, peers) in [(2, 1), (2, 8), (4, 1), (1, 1)] {
                    let (items, chunks) = plan(&decode, threads, peers);
                    assert_eq!(chunks, 1, "a decode token's keys are never split");
                    let got = run(tier, &c, &decode, &c.q[c.s.ldq..], &items);
                    let differs = got
                        .iter()
                        .zip(expected)
                        .position(|(a, b)| a.to_bits() != b.to_bits());
                    if let Some(i) = differs {
                        panic!(
                            "{tier:?} heads {heads}/{kvh} x {hd}, {keys} keys, window {window}, \
                             {threads} threads, {peers} peers: output {i} is {:e}, the prompt \
                             kernels give {:e}",
                            got[i], expected[i]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn decode_plans_cover_every_query_head_once() {
        let c = case(9, 3, 64, 40, usize::MAX);
        let s = Shape {
            pos: 39,
            tokens: 1,
            ..c.s
        };
        for (threads, peers, items_expected) in [(2, 1, 6), (2, 2, 3), (2, 8, 3), (8, 1, 9)] {
            let (items, _) = plan(&s, threads, peers);
            assert_eq!(
                items.len(),
                items_expected,
                "{threads} threads, {peers} peers"
            );
            let mut seen = vec![0; 9];
            for it in &items {
                assert_eq!((it.k0, it.k1), (0, 40));
                for g in it.g0..it.g1 {
                    seen[it.kv_head * 3 + g] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        }
    }
}
