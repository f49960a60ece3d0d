//! ragd's own CPU inference engine for GGUF models of the Llama (Mistral, Nemo), Qwen2,
//! Qwen3, Phi-3 (LongRoPE, Phi-4) and Gemma 3 families: weights repacked once at load ([`crate::ml::quant`]), activations quantized
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
pub mod layer;
pub mod ops;
pub mod prof;
pub mod weights;

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::Content;

use self::attention::Scratch;
use self::config::Config;
pub use self::kv::{KvCache, KvType};
use self::ops::{Rope, RopeScaling};
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
    /// Per rotation set (global, then windowed layers' when they differ), per token:
    /// the angles' cos and sin.
    cs: Vec<Vec<Vec<f32>>>,
    acts: [Acts; 2],
    attn: Vec<Scratch>,
    states: Vec<attention::State>,
}

/// Most tokens one pass over the layers runs: longer prompts go in batches of this many.
pub const UBATCH: usize = 512;
/// The smallest prompt chunk a generation runs per step while others decode.
const INTERLEAVED_CHUNK: usize = 64;

/// A loaded model.
pub struct CpuModel {
    cfg: Config,
    w: Weights,
    /// The rotations of global layers, then of windowed ones when they differ (Gemma 3).
    ropes: Vec<Rope>,
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
        if cfg.head_dim % 16 != 0 || cfg.head_dim > layer::MAX_HEAD_DIM {
            return Err(MlError::Load(format!(
                "{}: heads of {} dimensions are not supported (a multiple of 16 up to {} is)",
                arch.as_str(),
                cfg.head_dim,
                layer::MAX_HEAD_DIM
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
        let ropes = ropes(
            &cfg,
            w.rope_freqs.as_deref(),
            w.rope_long_short
                .as_ref()
                .map(|(l, s)| (l.as_slice(), s.as_slice())),
        );
        let buf = Buffers {
            x: Vec::new(),
            xn: Vec::new(),
            qkv: Vec::new(),
            att: Vec::new(),
            tmp: Vec::new(),
            gu: Vec::new(),
            h: Vec::new(),
            cs: vec![Vec::new(); ropes.len()],
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
            ropes,
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

    /// Prompt tokens a generation runs per step while others decode: few enough that
    /// their steps keep their pace (a 512-token micro-batch held each of their tokens for
    /// the whole of it), and never so few that a chunk's attention is split over key
    /// ranges, so a prompt run in these chunks gives exactly what it gives in
    /// [`UBATCH`]-token ones (a power of two: its chunks end where those do).
    pub fn interleaved_chunk(&self) -> usize {
        let mut chunk = INTERLEAVED_CHUNK;
        while chunk < UBATCH
            && !attention::never_split(self.cfg.kv_heads, chunk, self.pool.threads())
        {
            chunk *= 2;
        }
        chunk
    }

    /// Opens `path` (a GGUF) and loads its weights for this engine.
    pub fn open(path: &std::path::Path, options: CpuOptions) -> Result<Self, MlError> {
        super::model::GgufFile::open(path)?.load_cpu(options)
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
        let mut one = [cache];
        if n <= UBATCH {
            return self.forward_batch(&mut one, tokens, Some(all_logits));
        }
        // Long prompts run in batches of `UBATCH` tokens, so the scratch buffers stay
        // bounded (as llama.cpp's micro-batches); only the last batch's logits are needed
        // unless every token's are.
        let mut logits = Vec::new();
        let batches = tokens.chunks(UBATCH);
        let last = batches.len() - 1;
        for (i, batch) in batches.enumerate() {
            let want = (all_logits || i == last).then_some(all_logits);
            logits.extend_from_slice(&self.forward_batch(&mut one, batch, want)?);
        }
        Ok(logits)
    }

    /// One decode step of a batch: token `i` runs after the positions in `caches[i]`
    /// (which then holds it too). Returns every sequence's logits (`caches.len()` rows of
    /// [`CpuModel::vocab`]). Each weight is streamed once for the whole batch; each
    /// token's products, norms and attention are computed exactly as when it runs alone.
    pub fn forward_decode(
        &mut self,
        caches: &mut [&mut KvCache],
        tokens: &[u32],
    ) -> Result<Vec<f32>, MlError> {
        let n = tokens.len();
        if n == 0 || n != caches.len() || n > UBATCH {
            return Err(MlError::InvalidInput(format!(
                "a decode step takes one token per sequence, at most {UBATCH}; got {n} tokens for {} sequences",
                caches.len()
            )));
        }
        for (cache, &tok) in caches.iter_mut().zip(tokens) {
            if cache.len() + 1 > self.cfg.context {
                return Err(MlError::InvalidInput(format!(
                    "{} tokens exceed the model's window of {}",
                    cache.len() + 1,
                    self.cfg.context
                )));
            }
            if tok as usize >= self.vocab {
                return Err(MlError::InvalidInput(format!(
                    "token id {tok} is outside the vocabulary of {}",
                    self.vocab
                )));
            }
            cache.reserve(cache.len() + 1);
        }
        if n == 1 {
            return self.forward_batch(caches, tokens, Some(false));
        }
        self.forward_batch(caches, tokens, Some(true))
    }

    /// [`CpuModel::forward`] for at most [`UBATCH`] checked tokens: all of them after
    /// `caches[0]` when there is one cache, else token `t` after `caches[t]` (a decode
    /// step). `logits`: none, the last token's (`Some(false)`) or every token's
    /// (`Some(true)`).
    fn forward_batch(
        &mut self,
        caches: &mut [&mut KvCache],
        tokens: &[u32],
        logits: Option<bool>,
    ) -> Result<Vec<f32>, MlError> {
        let n = tokens.len();
        let bases: Vec<usize> = caches.iter().map(|c| c.len()).collect();
        let place = Place {
            one: caches.len() == 1,
            bases: &bases,
        };
        self.size_buffers(n);
        let h = self.cfg.hidden;
        for (t, &tok) in tokens.iter().enumerate() {
            let x = &mut self.buf.x[t * h..(t + 1) * h];
            self.w.embed.dequantize_row(tok as usize, x);
            if let Some(s) = self.cfg.family.embed_scale {
                x.iter_mut().for_each(|v| *v *= s);
            }
        }
        for (rope, cs) in self.ropes.iter().zip(self.buf.cs.iter_mut()) {
            for (t, c) in cs.iter_mut().take(n).enumerate() {
                rope.table(place.of(t).1, c);
            }
        }
        for l in 0..self.cfg.layers {
            self.layer(l, caches, &place, n);
        }
        if place.one {
            caches[0].advance(n);
        } else {
            caches.iter_mut().for_each(|c| c.advance(1));
        }
        let mut clock = prof::Lap::start();
        let r = match logits {
            Some(all) => self.logits(n, all),
            None => Ok(Vec::new()),
        };
        clock.lap(11);
        r
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
        for cs in &mut b.cs {
            if cs.len() < n {
                cs.resize(n, Vec::new());
            }
        }
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

/// Where each token of a pass goes: every token into one sequence from its length, or
/// token `t` into sequence `t` (a decode step).
pub(super) struct Place<'a> {
    /// One sequence for all tokens.
    pub one: bool,
    /// Each sequence's length before the pass.
    pub bases: &'a [usize],
}

impl Place<'_> {
    /// Token `t`'s sequence and position.
    pub fn of(&self, t: usize) -> (usize, usize) {
        if self.one {
            (0, self.bases[0] + t)
        } else {
            (t, self.bases[t])
        }
    }
}

/// The rotations of `cfg`: one set, or the global layers' and the windowed layers' when
/// their bases differ (Gemma 3). Phi-3 LongRoPE: the long factors when ragd's window (the
/// file's `context_length`, which ragd always allocates) is past the original window,
/// else the short ones, as llama.cpp chooses by its context size.
pub(crate) fn ropes(
    cfg: &Config,
    rope_freqs: Option<&[f32]>,
    long_short: Option<(&[f32], &[f32])>,
) -> Vec<Rope> {
    let fam = &cfg.family;
    let factors = match (rope_freqs, long_short) {
        (Some(f), _) => Some(f),
        (None, Some((long, short))) => Some(if cfg.context > fam.rope_orig_context {
            long
        } else {
            short
        }),
        (None, None) => None,
    };
    let global = RopeScaling {
        base: cfg.rope_base,
        factors,
        pos_scale: fam.rope_pos_scale,
        mscale: fam.rope_attn_factor,
    };
    let mut ropes = vec![Rope::new(cfg, global)];
    if let Some(base) = fam.rope_base_swa {
        ropes.push(Rope::new(
            cfg,
            RopeScaling {
                base,
                pos_scale: 1.0,
                ..global
            },
        ));
    }
    ropes
}

/// Token `t`'s row of `w` floats in the buffer at `p`.
///
/// # Safety
/// `p` points at a buffer of at least `t + 1` rows of `w` floats, and no one else
/// accesses that row while the slice lives.
unsafe fn row<'a>(p: Out, t: usize, w: usize) -> &'a mut [f32] {
    std::slice::from_raw_parts_mut(p.get().add(t * w), w)
}

/// Values (tokens x row width) up to which [`rows_light`] stays on the calling thread.
const LIGHT_VALUES: usize = 8192;

/// [`rows`] for light per-token work (a norm, quantizing a row, a residual sum) over rows
/// of `width` values: a decode step's few tokens run on this thread, where a round over
/// the pool would cost more than the work (and move the rows between cores).
pub(super) fn rows_light(pool: &Pool, n: usize, width: usize, f: &(dyn Fn(usize) + Sync)) {
    if n * width <= LIGHT_VALUES {
        (0..n).for_each(f);
    } else {
        rows(pool, n, f);
    }
}

/// Runs `f(t)` for every token `t < n`: on this thread for one token, over the pool for
/// more.
pub(super) fn rows(pool: &Pool, n: usize, f: &(dyn Fn(usize) + Sync)) {
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
