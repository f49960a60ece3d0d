//! ragd's own CPU inference engine for GGUF models of the Llama, Qwen2 and Phi-3
//! families: weights repacked once at load ([`crate::ml::quant`]), activations quantized
//! once per matrix input, integer dot products on the best instruction set the CPU has,
//! grouped-query attention over an f16 key/value cache, and a persistent thread pool.
//!
//! A forward pass takes any number of new tokens for one [`KvCache`]: a prompt is one
//! call (each weight is streamed once per tile of tokens, not once per token), decoding is
//! one token per call. Only the last token's logits are computed unless all are asked for.
//!
//! Parallel rounds split each product's row groups (and attention's heads and tiles)
//! over the threads; the small row operations between them run on the calling thread
//! when there is one token, and over the threads for prompts.

pub mod attention;
pub mod config;
pub mod kv;
pub mod ops;
pub mod weights;

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::Content;

use self::attention::{Scratch, Shape};
use self::config::Config;
pub use self::kv::{KvCache, KvType};
use self::ops::Rope;
use self::weights::{Reader, Weights};
use super::model::Arch;
use crate::ml::pool::Pool;
use crate::ml::quant::acts::ActsWriter;
use crate::ml::quant::{self, ActKind, Acts, Tier};
use crate::ml::MlError;

/// How the engine runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuOptions {
    /// Threads (the caller included); `None` means every core.
    pub threads: Option<usize>,
    /// Kernel tier; `None` means the best this CPU runs.
    pub tier: Option<Tier>,
    /// How the key/value cache stores values.
    pub kv: KvType,
}

/// A raw pointer that threads of one round write through, each to its own elements.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: every round gives each thread disjoint elements to write (see each use).
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

impl Out {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Working buffers of the forward pass, sized for the largest batch seen.
struct Buffers {
    x: Vec<f32>,
    xn: Vec<f32>,
    qkv: Vec<f32>,
    att: Vec<f32>,
    tmp: Vec<f32>,
    gu: Vec<f32>,
    h: Vec<f32>,
    cs: Vec<Vec<f32>>,
    acts: [Acts; 2],
    attn: Vec<Scratch>,
    states: Vec<attention::State>,
}

/// Most tokens one pass over the layers runs: longer prompts go in batches of this many.
pub const UBATCH: usize = 512;

/// A loaded model.
pub struct CpuModel {
    cfg: Config,
    w: Weights,
    rope: Rope,
    pool: Pool,
    tier: Tier,
    kv: KvType,
    vocab: usize,
    buf: Buffers,
}

impl CpuModel {
    /// Reads and repacks the weights of an `arch` model from an open GGUF.
    pub fn load<R: Read + Seek>(
        arch: Arch,
        content: &Content,
        reader: &mut R,
        opts: CpuOptions,
    ) -> Result<Self, MlError> {
        let cfg = Config::from_metadata(arch, &content.metadata)?;
        if cfg.head_dim % 16 != 0 {
            return Err(MlError::Load(format!(
                "heads of {} dimensions are not supported (a multiple of 16 is)",
                cfg.head_dim
            )));
        }
        let vocab = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| MlError::Load("the GGUF has no token_embd.weight".into()))?;
        let w = Reader::new(content, reader).weights(&cfg, vocab)?;
        let tier = match opts.tier {
            Some(t) if Tier::available().contains(&t) => t,
            Some(t) => {
                return Err(MlError::Load(format!(
                    "this CPU cannot run the {} kernels",
                    t.name()
                )))
            }
            None => Tier::detect(),
        };
        let threads = opts.threads.unwrap_or_else(num_cpus::get).max(1);
        let pool = Pool::new(threads, "ragd-llm")
            .map_err(|e| MlError::Load(format!("cannot start LLM threads: {e}")))?;
        let rope = Rope::new(&cfg, w.rope_freqs.as_deref());
        let buf = Buffers {
            x: Vec::new(),
            xn: Vec::new(),
            qkv: Vec::new(),
            att: Vec::new(),
            tmp: Vec::new(),
            gu: Vec::new(),
            h: Vec::new(),
            cs: Vec::new(),
            acts: [Acts::new(), Acts::new()],
            attn: (0..threads).map(|_| Scratch::new(cfg.head_dim)).collect(),
            states: Vec::new(),
        };
        tracing::info!(
            arch = arch.as_str(),
            layers = cfg.layers,
            hidden = cfg.hidden,
            heads = cfg.heads,
            kv_heads = cfg.kv_heads,
            vocab,
            tier = tier.name(),
            kv_cache = ?opts.kv,
            threads,
            weights_mb = w.bytes() / (1 << 20),
            types = ?w.types().iter().map(|(t, n)| format!("{}x{n}", t.name())).collect::<Vec<_>>(),
            "CPU LLM engine ready"
        );
        Ok(Self {
            cfg,
            w,
            rope,
            pool,
            tier,
            kv: opts.kv,
            vocab,
            buf,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Rows of the logits (the embedding table's).
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The kernel tier in use.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Threads of the pool.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// A new, empty cache for this model.
    pub fn new_cache(&self) -> KvCache {
        KvCache::new(&self.cfg, self.kv)
    }

    /// Runs `tokens` after the positions already in `cache` (which then holds them too)
    /// and returns the logits of the last token, or of every token with `all_logits`
    /// (`tokens.len()` rows of [`CpuModel::vocab`]).
    pub fn forward(
        &mut self,
        cache: &mut KvCache,
        tokens: &[u32],
        all_logits: bool,
    ) -> Result<Vec<f32>, MlError> {
        let n = tokens.len();
        let pos = cache.len();
        if n == 0 {
            return Err(MlError::InvalidInput("no tokens to run".into()));
        }
        if pos + n > self.cfg.context {
            return Err(MlError::InvalidInput(format!(
                "{} tokens exceed the model's window of {}",
                pos + n,
                self.cfg.context
            )));
        }
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(MlError::InvalidInput(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.vocab
            )));
        }
        cache.reserve(pos + n);
        if n <= UBATCH {
            return self.forward_batch(cache, tokens, Some(all_logits));
        }
        // Long prompts run in batches of `UBATCH` tokens, so the scratch buffers stay
        // bounded (as llama.cpp's micro-batches); only the last batch's logits are needed
        // unless every token's are.
        let mut logits = Vec::new();
        let batches = tokens.chunks(UBATCH);
        let last = batches.len() - 1;
        for (i, batch) in batches.enumerate() {
            let want = (all_logits || i == last).then_some(all_logits);
            logits.extend_from_slice(&self.forward_batch(cache, batch, want)?);
        }
        Ok(logits)
    }

    /// [`CpuModel::forward`] for at most [`UBATCH`] checked tokens; `logits`: none, the
    /// last token's (`Some(false)`) or every token's (`Some(true)`).
    fn forward_batch(
        &mut self,
        cache: &mut KvCache,
        tokens: &[u32],
        logits: Option<bool>,
    ) -> Result<Vec<f32>, MlError> {
        let (n, pos) = (tokens.len(), cache.len());
        self.size_buffers(n);
        let h = self.cfg.hidden;
        for (t, &tok) in tokens.iter().enumerate() {
            self.w
                .embed
                .dequantize_row(tok as usize, &mut self.buf.x[t * h..(t + 1) * h]);
        }
        for t in 0..n {
            let mut cs = std::mem::take(&mut self.buf.cs[t]);
            self.rope.angles(pos + t, &mut cs);
            self.buf.cs[t] = cs;
        }
        for l in 0..self.cfg.layers {
            self.layer(l, cache, pos, n);
        }
        cache.advance(n);
        match logits {
            Some(all) => self.logits(n, all),
            None => Ok(Vec::new()),
        }
    }

    fn size_buffers(&mut self, n: usize) {
        let c = &self.cfg;
        let b = &mut self.buf;
        b.x.resize(n * c.hidden, 0.0);
        b.xn.resize(n * c.hidden, 0.0);
        b.qkv.resize(n * c.qkv_rows(), 0.0);
        b.att.resize(n * c.heads * c.head_dim, 0.0);
        b.tmp.resize(n * c.hidden, 0.0);
        b.gu.resize(n * 2 * c.ffn, 0.0);
        b.h.resize(n * c.ffn, 0.0);
        if b.cs.len() < n {
            b.cs.resize(n, Vec::new());
        }
    }

    fn layer(&mut self, l: usize, cache: &mut KvCache, pos: usize, n: usize) {
        let (h, f) = (self.cfg.hidden, self.cfg.ffn);
        let eps = self.cfg.eps;
        let tier = self.tier;
        let layer = &self.w.layers[l];
        let b = &mut self.buf;
        let (x, xn, tmp) = (
            Out(b.x.as_mut_ptr()),
            Out(b.xn.as_mut_ptr()),
            Out(b.tmp.as_mut_ptr()),
        );
        // Attention block: norm, then the input of the query/key/value products.
        let writers = prepare_acts(&mut b.acts, &layer.qkv.parts, n, h);
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, xnt) = unsafe { (row(x, t, h), row(xn, t, h)) };
            ops::rms_norm(tier, xt, &layer.attn_norm, eps, xnt);
            quantize_row(&writers, tier, t, xnt);
        });
        let qkv_rows = self.cfg.qkv_rows();
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.qkv.parts,
            &layer.qkv.offsets,
            Out(b.qkv.as_mut_ptr()),
            qkv_rows,
            n,
        );
        rope_and_store(
            &self.pool, &self.cfg, &self.rope, layer, b, cache, l, pos, n,
        );
        attend(&self.pool, tier, &self.cfg, b, cache, l, pos, n);
        let att_w = self.cfg.heads * self.cfg.head_dim;
        let att = Out(b.att.as_mut_ptr());
        let writers = prepare_acts(&mut b.acts, &layer.wo.parts, n, att_w);
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s row is this call's alone.
            quantize_row(&writers, tier, t, unsafe { row(att, t, att_w) });
        });
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.wo.parts,
            &layer.wo.offsets,
            tmp,
            h,
            n,
        );
        // Residual, then the feed-forward block's norm and input.
        let writers = prepare_acts(&mut b.acts, &layer.gate_up.parts, n, h);
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, xnt, tt) = unsafe { (row(x, t, h), row(xn, t, h), row(tmp, t, h)) };
            for (a, v) in xt.iter_mut().zip(tt.iter()) {
                *a += v;
            }
            ops::rms_norm(tier, xt, &layer.ffn_norm, eps, xnt);
            quantize_row(&writers, tier, t, xnt);
        });
        let gu = Out(b.gu.as_mut_ptr());
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.gate_up.parts,
            &layer.gate_up.offsets,
            gu,
            2 * f,
            n,
        );
        let hb = Out(b.h.as_mut_ptr());
        let writers = prepare_acts(&mut b.acts, &layer.down.parts, n, f);
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (g, ht) = unsafe { (row(gu, t, 2 * f), row(hb, t, f)) };
            ops::silu_mul(tier, &g[..f], &g[f..], ht);
            quantize_row(&writers, tier, t, ht);
        });
        products(
            &self.pool,
            tier,
            &b.acts,
            &layer.down.parts,
            &layer.down.offsets,
            tmp,
            h,
            n,
        );
        rows(&self.pool, n, &|t| {
            // SAFETY: token `t`'s rows are this call's alone.
            let (xt, tt) = unsafe { (row(x, t, h), row(tmp, t, h)) };
            for (a, v) in xt.iter_mut().zip(tt.iter()) {
                *a += v;
            }
        });
    }

    /// The final norm and the output layer, for the last token or every token.
    fn logits(&mut self, n: usize, all: bool) -> Result<Vec<f32>, MlError> {
        let h = self.cfg.hidden;
        let first = if all { 0 } else { n - 1 };
        let m = n - first;
        let tier = self.tier;
        let b = &mut self.buf;
        let (parts, offsets): (&[quant::PackedMatrix], &[usize]) = match &self.w.output {
            Some(o) => (&o.parts, &o.offsets),
            None => (std::slice::from_ref(&self.w.embed), &[0]),
        };
        let writers = prepare_acts(&mut b.acts, parts, m, h);
        let (x, xn) = (Out(b.x.as_mut_ptr()), Out(b.xn.as_mut_ptr()));
        let norm = &self.w.output_norm;
        let eps = self.cfg.eps;
        rows(&self.pool, m, &|i| {
            // SAFETY: row `i` of `xn` and row `first + i` of `x` are this call's alone.
            let (xt, xnt) = unsafe { (row(x, first + i, h), row(xn, i, h)) };
            ops::rms_norm(tier, xt, norm, eps, xnt);
            quantize_row(&writers, tier, i, xnt);
        });
        let mut logits = vec![0f32; m * self.vocab];
        products(
            &self.pool,
            tier,
            &b.acts,
            parts,
            offsets,
            Out(logits.as_mut_ptr()),
            self.vocab,
            m,
        );
        Ok(logits)
    }
}

/// Token `t`'s row of `w` floats in the buffer at `p`.
///
/// # Safety
/// `p` points at a buffer of at least `t + 1` rows of `w` floats, and no one else
/// accesses that row while the slice lives.
unsafe fn row<'a>(p: Out, t: usize, w: usize) -> &'a mut [f32] {
    std::slice::from_raw_parts_mut(p.get().add(t * w), w)
}

/// Runs `f(t)` for every token `t < n`: on this thread for one token, over the pool for
/// more.
fn rows(pool: &Pool, n: usize, f: &(dyn Fn(usize) + Sync)) {
    if n == 1 {
        f(0);
        return;
    }
    let chunks = n.min(4 * pool.threads());
    pool.run(chunks, &|_, c| {
        for t in Pool::part(n, c, chunks) {
            f(t);
        }
    });
}

/// The activation kinds some products read (at most two differ: e.g. Q4_K and Q5_0).
fn kinds(parts: &[quant::PackedMatrix]) -> [Option<ActKind>; 2] {
    let mut k: [Option<ActKind>; 2] = [None, None];
    for p in parts {
        let kind = p.ty().act_kind();
        if k[0].is_none() || k[0] == Some(kind) {
            k[0] = Some(kind);
        } else {
            k[1] = Some(kind);
        }
    }
    k
}

/// Prepares one set of activations per kind that `parts` read.
fn prepare_acts(
    acts: &mut [Acts; 2],
    parts: &[quant::PackedMatrix],
    n: usize,
    cols: usize,
) -> [Option<ActsWriter>; 2] {
    let mut out = [None, None];
    for (i, kind) in kinds(parts).iter().enumerate() {
        if let Some(kind) = kind {
            acts[i].prepare(*kind, n, cols);
            out[i] = Some(acts[i].writer());
        }
    }
    out
}

/// Quantizes token `t`'s input row with every prepared writer.
fn quantize_row(writers: &[Option<ActsWriter>; 2], tier: Tier, t: usize, x: &[f32]) {
    for w in writers.iter().flatten() {
        // SAFETY: the writers were prepared for every token of this round, and each token
        // is quantized by one call only.
        unsafe { w.token(tier, t, x) };
    }
}

/// `out[t][offsets[i] + r] = parts[i][r] · input[t]` for every part, the row groups of all
/// parts split evenly over the threads.
#[allow(clippy::too_many_arguments)]
fn products(
    pool: &Pool,
    tier: Tier,
    acts: &[Acts; 2],
    parts: &[quant::PackedMatrix],
    offsets: &[usize],
    out: Out,
    ldo: usize,
    n: usize,
) {
    let k = kinds(parts);
    let total: usize = parts.iter().map(|p| p.groups()).sum();
    let chunks = total.min(4 * pool.threads());
    pool.run(chunks, &|_, c| {
        let mine = Pool::part(total, c, chunks);
        let mut start = 0;
        for (p, &off) in parts.iter().zip(offsets) {
            let (lo, hi) = (mine.start.max(start), mine.end.min(start + p.groups()));
            if lo < hi {
                let a = if Some(p.ty().act_kind()) == k[0] {
                    &acts[0]
                } else {
                    &acts[1]
                };
                debug_assert_eq!(a.tokens(), n);
                // SAFETY: `out` holds `n` rows of `ldo` floats; this thread alone writes the
                // rows of groups `lo..hi` of this part (its own slice of all groups).
                unsafe {
                    quant::matmul_raw(tier, p, a, out.get().add(off), ldo, lo - start..hi - start)
                };
            }
            start += p.groups();
        }
    });
}

/// Adds the query/key/value biases, rotates queries and keys, and stores the new keys and
/// values in the cache.
#[allow(clippy::too_many_arguments)]
fn rope_and_store(
    pool: &Pool,
    cfg: &Config,
    rope: &Rope,
    layer: &weights::Layer,
    b: &mut Buffers,
    cache: &mut KvCache,
    l: usize,
    pos: usize,
    n: usize,
) {
    let (hd, heads, kvh) = (cfg.head_dim, cfg.heads, cfg.kv_heads);
    let ld = cfg.qkv_rows();
    let cap = cache.cap();
    let cache_ty = cache.ty();
    let (k, v) = cache.layer_mut(l);
    let (kp, vp) = (KvOut(k.as_mut_ptr()), KvOut(v.as_mut_ptr()));
    let f32kv = cache_ty == KvType::F32;
    let qkv = Out(b.qkv.as_mut_ptr());
    let cs = &b.cs;
    rows(pool, n, &|t| {
        // SAFETY: token `t`'s row is this call's alone.
        let r = unsafe { row(qkv, t, ld) };
        if let Some(bias) = &layer.qkv_bias {
            for (a, bv) in r.iter_mut().zip(bias) {
                *a += bv;
            }
        }
        for head in 0..heads + kvh {
            rope.apply(&mut r[head * hd..(head + 1) * hd], &cs[t]);
        }
        let p = pos + t;
        for head in 0..kvh {
            let kr = &r[(heads + head) * hd..(heads + head + 1) * hd];
            let vr = &r[(heads + kvh + head) * hd..(heads + kvh + head + 1) * hd];
            for d in 0..hd {
                let (ki, vi) = (
                    kv::k_index(cap, hd, head, p, d),
                    kv::v_index(cap, hd, head, p, d),
                );
                // SAFETY: position `p` of every head is this token's alone, and the
                // cache holds `cap >= pos + n` positions of the cache's type.
                unsafe {
                    if f32kv {
                        *kp.get().cast::<f32>().add(ki) = kr[d];
                        *vp.get().cast::<f32>().add(vi) = vr[d];
                    } else {
                        *kp.get().cast::<u16>().add(ki) = half::f16::from_f32(kr[d]).to_bits();
                        *vp.get().cast::<u16>().add(vi) = half::f16::from_f32(vr[d]).to_bits();
                    }
                }
            }
        }
    });
}

/// A raw pointer into the cache that threads write through, each its own positions.
#[derive(Clone, Copy)]
struct KvOut(*mut u8);
// SAFETY: each thread writes only the positions of its own tokens.
unsafe impl Send for KvOut {}
// SAFETY: as above.
unsafe impl Sync for KvOut {}

impl KvOut {
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// The attention of layer `l` for the new tokens, into `b.att`.
#[allow(clippy::too_many_arguments)]
fn attend(
    pool: &Pool,
    tier: Tier,
    cfg: &Config,
    b: &mut Buffers,
    cache: &KvCache,
    l: usize,
    pos: usize,
    n: usize,
) {
    let shape = Shape {
        heads: cfg.heads,
        kv_heads: cfg.kv_heads,
        head_dim: cfg.head_dim,
        cap: cache.cap(),
        pos,
        tokens: n,
        ldq: cfg.qkv_rows(),
        kv: cache.ty(),
    };
    let ldo = cfg.heads * cfg.head_dim;
    let (items, chunks) = attention::plan(&shape, pool.threads());
    let (k, v) = cache.layer(l);
    let q = b.qkv.as_ptr() as usize;
    let out = Out(b.att.as_mut_ptr());
    if b.states.len() < items.len() {
        b.states
            .resize_with(items.len(), || attention::State::new(cfg.head_dim));
    }
    let scratch = ScratchPtr(b.attn.as_mut_ptr());
    let states = StatePtr(b.states.as_mut_ptr());
    pool.run(items.len(), &|thread, idx| {
        // SAFETY: thread `thread` alone uses scratch `thread`.
        let scratch = unsafe { &mut *scratch.get().add(thread) };
        let item = items[idx];
        // SAFETY: `q` is the query buffer of `n` rows of `ldq`; `k`/`v` hold the
        // positions `0..pos + n`; `tier` was checked at load.
        unsafe { attention::run_item(tier, &shape, q as *const f32, k, v, item, scratch) };
        if chunks > 1 {
            // SAFETY: item `idx` is run by this thread only.
            unsafe { core::ptr::swap(&mut scratch.state, states.get().add(idx)) };
        } else {
            // SAFETY: each item writes its own heads and tokens.
            unsafe { attention::write(&shape, item, &scratch.state, out.get(), ldo) };
        }
    });
    if chunks > 1 {
        for (group, its) in items.chunks(chunks).enumerate() {
            let parts: Vec<&attention::State> = (0..its.len())
                .map(|c| &b.states[group * chunks + c])
                .collect();
            // SAFETY: one thread; the item's rows are in `b.att`.
            unsafe { attention::combine(&shape, its[0], &parts, out.get(), ldo) };
        }
    }
}

#[derive(Clone, Copy)]
struct ScratchPtr(*mut Scratch);
// SAFETY: thread `i` of a round uses only element `i`.
unsafe impl Send for ScratchPtr {}
// SAFETY: as above.
unsafe impl Sync for ScratchPtr {}

impl ScratchPtr {
    fn get(self) -> *mut Scratch {
        self.0
    }
}

#[derive(Clone, Copy)]
struct StatePtr(*mut attention::State);
// SAFETY: each item's state is used by the one thread that runs the item.
unsafe impl Send for StatePtr {}
// SAFETY: as above.
unsafe impl Sync for StatePtr {}

impl StatePtr {
    fn get(self) -> *mut attention::State {
        self.0
    }
}
