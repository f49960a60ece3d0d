//! The key/value cache of one sequence, in f16 (the default, as llama.cpp) or f32, laid
//! out for the attention kernels: keys in blocks of 16 positions with each dimension's 16
//! values contiguous (so one vector load gives one dimension of 16 keys), values row by
//! row (one position's head is one contiguous run). It grows by doubling up to the
//! model's window.

use super::config::Config;

/// How keys and values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvType {
    /// Half precision: half the memory and bandwidth.
    #[default]
    F16,
    /// Single precision: exactly what the forward pass computed.
    F32,
}

impl KvType {
    /// Bytes per stored value.
    pub fn size(self) -> usize {
        match self {
            KvType::F16 => 2,
            KvType::F32 => 4,
        }
    }

    /// Parses `f16` or `f32`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "f16" => Some(KvType::F16),
            "f32" => Some(KvType::F32),
            _ => None,
        }
    }
}

/// Positions per key block.
pub const KBLOCK: usize = 16;

/// The cache of one sequence.
#[derive(Clone)]
pub struct KvCache {
    ty: KvType,
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    max: usize,
    /// Positions with keys and values stored.
    len: usize,
    /// Positions allocated (a multiple of [`KBLOCK`]).
    cap: usize,
    /// Per layer, as bytes of `ty`: keys `[kv_head][cap / 16][head_dim][16]`, values
    /// `[kv_head][cap][head_dim]`.
    k: Vec<Vec<u8>>,
    v: Vec<Vec<u8>>,
}

impl KvCache {
    /// An empty cache for a `cfg`-shaped model.
    pub fn new(cfg: &Config, ty: KvType) -> Self {
        Self {
            ty,
            layers: cfg.layers,
            kv_heads: cfg.kv_heads,
            head_dim: cfg.head_dim,
            max: cfg.context.div_ceil(KBLOCK) * KBLOCK,
            len: 0,
            cap: 0,
            k: vec![Vec::new(); cfg.layers],
            v: vec![Vec::new(); cfg.layers],
        }
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No positions stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position after the first `len` (their memory is kept).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// How values are stored.
    pub fn ty(&self) -> KvType {
        self.ty
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        self.cap * self.bytes_per_token()
    }

    /// Bytes per stored position.
    pub fn bytes_per_token(&self) -> usize {
        self.layers * 2 * self.kv_heads * self.head_dim * self.ty.size()
    }

    /// Makes room for `len` positions in all (at most the model's window), doubling.
    pub fn reserve(&mut self, len: usize) {
        if len > self.cap {
            self.grow(len.max(self.cap * 2).max(64).min(self.max.max(len)));
        }
    }

    /// Makes room for exactly `len` positions in all (at most the model's window): for a
    /// generation that knows its prompt and longest answer, so it never grows (a growth
    /// holds the old and the new state at once).
    pub fn reserve_exact(&mut self, len: usize) {
        let len = len.min(self.max);
        if len > self.cap {
            self.grow(len);
        }
    }

    /// Gives back the room beyond the stored positions (for a state kept in the prompt
    /// cache), one layer at a time.
    pub fn shrink_to_fit(&mut self) {
        let cap = self.len.div_ceil(KBLOCK) * KBLOCK;
        if cap < self.cap {
            self.grow(cap);
        }
    }

    /// Reallocates every layer for `want` positions (rounded up to whole key blocks),
    /// keeping as many stored positions as fit.
    fn grow(&mut self, want: usize) {
        let cap = want.div_ceil(KBLOCK) * KBLOCK;
        let (hd, kept) = (self.head_dim * self.ty.size(), self.cap.min(cap));
        let old = self.cap;
        for l in 0..self.layers {
            let mut k = vec![0u8; self.kv_heads * cap * hd];
            let mut v = vec![0u8; self.kv_heads * cap * hd];
            for h in 0..self.kv_heads {
                k[h * cap * hd..h * cap * hd + kept * hd]
                    .copy_from_slice(&self.k[l][h * old * hd..h * old * hd + kept * hd]);
                v[h * cap * hd..h * cap * hd + kept * hd]
                    .copy_from_slice(&self.v[l][h * old * hd..h * old * hd + kept * hd]);
            }
            self.k[l] = k;
            self.v[l] = v;
        }
        self.cap = cap;
        self.len = self.len.min(cap);
    }

    /// A new cache holding the first `len` positions of this one.
    pub fn prefix(&self, len: usize) -> Self {
        let len = len.min(self.len);
        let mut c = Self {
            len: 0,
            cap: 0,
            k: vec![Vec::new(); self.layers],
            v: vec![Vec::new(); self.layers],
            ..*self
        };
        if len == 0 {
            return c;
        }
        c.reserve(len);
        let hd = self.head_dim * self.ty.size();
        // Whole key blocks (the tail of the last one is ignored by `len`).
        let kspan = len.div_ceil(KBLOCK) * KBLOCK * hd;
        for l in 0..self.layers {
            for h in 0..self.kv_heads {
                let (src, dst) = (h * self.cap * hd, h * c.cap * hd);
                c.k[l][dst..dst + kspan].copy_from_slice(&self.k[l][src..src + kspan]);
                c.v[l][dst..dst + len * hd].copy_from_slice(&self.v[l][src..src + len * hd]);
            }
        }
        c.len = len;
        c
    }

    /// Marks `n` more positions as stored (after [`KvCache::store`] wrote them).
    pub(crate) fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.cap);
        self.len += n;
    }

    /// Allocated positions.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// Layer `l`'s keys and values (bytes of [`KvCache::ty`]).
    pub(super) fn layer(&self, l: usize) -> (&[u8], &[u8]) {
        (&self.k[l], &self.v[l])
    }

    /// Layer `l`'s keys and values, to write positions into.
    pub(super) fn layer_mut(&mut self, l: usize) -> (&mut [u8], &mut [u8]) {
        (&mut self.k[l], &mut self.v[l])
    }
}

/// Index (in values) of key dimension `d` at position `p` of head `h` in a layer's key
/// buffer.
#[inline]
pub fn k_index(cap: usize, head_dim: usize, h: usize, p: usize, d: usize) -> usize {
    h * cap * head_dim + (p / KBLOCK) * KBLOCK * head_dim + d * KBLOCK + p % KBLOCK
}

/// Index (in values) of value dimension `d` at position `p` of head `h` in a layer's
/// value buffer.
#[inline]
pub fn v_index(cap: usize, head_dim: usize, h: usize, p: usize, d: usize) -> usize {
    (h * cap + p) * head_dim + d
}
