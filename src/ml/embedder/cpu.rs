//! A fast CPU forward pass for BERT encoders, used instead of candle's when the model
//! runs on the CPU. The batch's sequences are packed back to back (no padding), the
//! dense layers are products over all tokens in blocks of rows, attention runs per
//! sequence, and bias, GELU and LayerNorm are fused into one pass over each block.
//! Blocks run on rayon's global pool; buffers are kept between layers and calls.

mod attention;
#[cfg(target_arch = "x86_64")]
mod bf16;
#[cfg(target_arch = "x86_64")]
mod int16;
#[cfg(target_arch = "x86_64")]
mod int8;
mod kernels;
mod matmul;
mod weights;

use std::cell::RefCell;

use candle_nn::VarBuilder;
use candle_transformers::models::bert::{Config, HiddenAct};
use parking_lot::Mutex;
use rayon::prelude::*;

use self::attention::{Heads, Span};
use self::kernels::{Norm, Simd};
use self::weights::{LayerNorm, Weights};
use super::{Pooling, Precision};
use crate::ml::MlError;

/// The arithmetic of the dense layers' products (attention, GELU, LayerNorm and the
/// residual stream stay f32 in every case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arithmetic {
    /// f32 products (gemm): the reference.
    F32,
    /// bf16 inputs, f32 sums (AVX-512 BF16).
    Bf16,
    /// int8 products in blocks of 64 inputs (i8 weights, u8 activations with a zero
    /// point), AVX-512 VNNI.
    Int8,
    /// i16 products (one scale per row and per column, over a thousand levels each),
    /// AVX2: the fast path of CPUs without AVX-512 VNNI or BF16.
    Int16,
    /// Q8_0 weights and activations (blocks of 32, one scale each), integer dot products
    /// on the LLM's quantized kernels of this tier: int8 on CPUs without AVX-512 VNNI.
    Q8(crate::ml::quant::Tier),
}

impl Arithmetic {
    /// What `precision` means on this CPU.
    pub(crate) fn pick(precision: Precision) -> Self {
        use crate::ml::quant::Tier;
        // Measured on Zen 4 (MiniLM-L6, 176-token passages, `scripts/bench_embedder.sh`):
        // int8 in blocks of 64 is the fastest and within the accuracy bound (worst cosine
        // to the reference 0.9994), so `auto` prefers it; then bf16 (0.99997). On Zen 3
        // (AVX2, no AVX-512) i16 products are the fastest (docs/embedder.md), then f32.
        // Q8_0 on the LLM's kernels is slower than both there, so only an explicit
        // `int8` on a CPU without AVX-512 VNNI takes it.
        match precision {
            Precision::F32 => Arithmetic::F32,
            Precision::Auto | Precision::Int8 if int8_available() => Arithmetic::Int8,
            Precision::Int8 if Tier::detect() != Tier::Scalar => Arithmetic::Q8(Tier::detect()),
            Precision::Auto | Precision::Bf16 if bf16_available() => Arithmetic::Bf16,
            Precision::Auto | Precision::Int16 if int16_available() => Arithmetic::Int16,
            _ => Arithmetic::F32,
        }
    }

    /// Short name for logs and reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arithmetic::F32 => "f32",
            Arithmetic::Bf16 => "bf16",
            Arithmetic::Int8 => "int8",
            Arithmetic::Int16 => "int16",
            Arithmetic::Q8(_) => "q8_0",
        }
    }
}

fn int8_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return int8::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn int16_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return int16::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn bf16_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return bf16::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Most rows in one block of the dense layers. Each product repacks its weight matrix,
/// so larger blocks amortise that better; 384 rows keep a block's FFN activations
/// (384 × 1536 floats for MiniLM) within the caches.
const MAX_BLOCK_ROWS: usize = 384;

/// Passes of at most this many tokens are one block, on one thread: a search query's
/// pass (a few tokens) takes about as long on one thread as on two, and it runs while a
/// bulk pass is paused, so the other core is left to the rest of the server.
const ONE_BLOCK_ROWS: usize = 48;

/// Rows per block for `n` tokens on `threads` threads: at most [`MAX_BLOCK_ROWS`], a
/// multiple of the threads in number of blocks (no thread idles at the end of a pass),
/// and a multiple of 6 rows, the width of gemm's AVX2 kernel, where possible; one block
/// for the smallest passes ([`ONE_BLOCK_ROWS`]).
fn block_rows(n: usize, threads: usize) -> usize {
    if n <= ONE_BLOCK_ROWS {
        return n.max(1);
    }
    let threads = threads.max(1);
    let blocks = n.div_ceil(MAX_BLOCK_ROWS).max(1).next_multiple_of(threads);
    n.div_ceil(blocks)
        .next_multiple_of(6)
        .clamp(1, MAX_BLOCK_ROWS)
}

/// A BERT encoder with plain `f32` weights, run on the CPU.
pub(crate) struct CpuBert {
    weights: Weights,
    hidden: usize,
    heads: usize,
    intermediate: usize,
    max_positions: usize,
    eps: f32,
    simd: Simd,
    arithmetic: Arithmetic,
    /// Idle activation buffers: a pass takes one and gives it back, so a short pass run
    /// from inside a long one's pause gets its own.
    buffers: Mutex<Vec<Buffers>>,
}

/// The token sequences of one pass, with their segment ids when they are pairs.
#[derive(Clone, Copy)]
struct Packed<'a> {
    ids: &'a [&'a [u32]],
    types: Option<&'a [&'a [u32]]>,
}

/// One token of the packed batch.
#[derive(Clone, Copy)]
struct Token {
    id: usize,
    pos: usize,
    segment: usize,
}

/// Activations of the packed batch, reused across layers and calls. Each holds at
/// least the rows of the current pass (it keeps the size of the largest pass so far).
#[derive(Default)]
struct Buffers {
    /// `tokens × hidden`: the residual stream.
    hidden: Vec<f32>,
    /// `tokens × 3·hidden`: queries, keys and values.
    qkv: Vec<f32>,
    /// `tokens × hidden`: attention output before its projection.
    ctx: Vec<f32>,
}

/// The rows of a product of rows `x` (`inp` wide) into `y` (`out` wide); panics when the
/// two do not hold the same whole number of rows (a bug in the caller).
fn product_rows(x: &[f32], y: &[f32], inp: usize, out: usize) -> usize {
    let rows = x.len() / inp;
    assert_eq!(x.len(), rows * inp, "activation shape");
    assert_eq!(y.len(), rows * out, "output shape");
    rows
}

/// The first `len` floats of `buf`, grown (never shrunk) to hold them.
fn grown(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer of `len` floats (contents unspecified),
/// reused across calls so hot loops do not allocate.
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            f(&mut buf[..len])
        }
        // Only if `f` re-entered on this thread; never the case here, but not worth a panic.
        Err(_) => f(&mut vec![0.0; len]),
    })
}

fn norm(n: &LayerNorm, eps: f32) -> Norm<'_> {
    Norm {
        gamma: &n.gamma,
        beta: &n.beta,
        eps,
    }
}

impl CpuBert {
    /// Whether this forward pass implements the configuration (GELU in its erf form,
    /// absolute positions); otherwise candle's is used.
    pub(crate) fn supports(c: &Config) -> bool {
        c.hidden_act == HiddenAct::Gelu
            && c.num_attention_heads > 0
            && c.hidden_size.is_multiple_of(c.num_attention_heads)
    }

    /// Copies the weights out of `vb` (read on the CPU), converted to `arithmetic`.
    pub(crate) fn load(
        vb: &VarBuilder,
        c: &Config,
        arithmetic: Arithmetic,
    ) -> Result<Self, MlError> {
        let mut weights = Weights::load(vb, c).map_err(|e| MlError::Load(e.to_string()))?;
        weights.convert(arithmetic);
        let simd = Simd::detect();
        tracing::debug!(
            ?simd,
            arithmetic = arithmetic.name(),
            "CPU BERT forward pass"
        );
        Ok(Self {
            weights,
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
            intermediate: c.intermediate_size,
            max_positions: c.max_position_embeddings,
            eps: c.layer_norm_eps as f32,
            simd,
            arithmetic,
            buffers: Mutex::new(Vec::new()),
        })
    }

    /// The dense layers' arithmetic.
    pub(crate) fn arithmetic(&self) -> Arithmetic {
        self.arithmetic
    }

    /// One pooled, L2-normalised vector per token sequence; `pause` runs between layers.
    pub(super) fn embed(
        &self,
        seqs: &[&[u32]],
        pooling: Pooling,
        pause: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>, MlError> {
        let input = Packed {
            ids: seqs,
            types: None,
        };
        self.with_encoded(input, pause, |bufs, spans| self.pool(bufs, spans, pooling))
    }

    /// The last layer's first-token (`[CLS]`) state of each sequence, unnormalised: the
    /// input of a classification head. `types[i]` are sequence `i`'s segment ids.
    pub(crate) fn cls_states(
        &self,
        seqs: &[&[u32]],
        types: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, MlError> {
        if types.len() != seqs.len() || types.iter().zip(seqs).any(|(t, s)| t.len() != s.len()) {
            return Err(MlError::Inference(
                "segment ids do not match the tokens".into(),
            ));
        }
        let input = Packed {
            ids: seqs,
            types: Some(types),
        };
        let h = self.hidden;
        self.with_encoded(input, &mut || {}, |bufs, spans| {
            spans
                .iter()
                .map(|s| bufs.hidden[s.start * h..(s.start + 1) * h].to_vec())
                .collect()
        })
    }

    /// Runs the encoder on buffers of its own and reads the result with `read`.
    fn with_encoded<T>(
        &self,
        input: Packed<'_>,
        pause: &mut dyn FnMut(),
        read: impl FnOnce(&Buffers, &[Span]) -> T,
    ) -> Result<T, MlError> {
        let mut bufs = self.buffers.lock().pop().unwrap_or_default();
        let out = self
            .encode(&mut bufs, input, pause)
            .map(|spans| read(&bufs, &spans));
        self.buffers.lock().push(bufs);
        out
    }

    /// Pools each sequence's rows of the last layer and L2-normalises the result.
    fn pool(&self, bufs: &Buffers, spans: &[Span], pooling: Pooling) -> Vec<Vec<f32>> {
        let h = self.hidden;
        spans
            .iter()
            .map(|s| {
                let rows = &bufs.hidden[s.start * h..(s.start + s.len) * h];
                let mut v = match pooling {
                    Pooling::Cls => rows[..h].to_vec(),
                    Pooling::Mean => {
                        let mut sum = vec![0.0f32; h];
                        for row in rows.chunks_exact(h) {
                            for (acc, x) in sum.iter_mut().zip(row) {
                                *acc += x;
                            }
                        }
                        let inv = 1.0 / s.len as f32;
                        sum.iter_mut().for_each(|x| *x *= inv);
                        sum
                    }
                };
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|x| *x /= norm);
                v
            })
            .collect()
    }

    /// Runs the encoder over the packed sequences; the last layer's output is left in
    /// `bufs.hidden`, one row per token, sequences at the returned spans.
    fn encode(
        &self,
        bufs: &mut Buffers,
        input: Packed<'_>,
        pause: &mut dyn FnMut(),
    ) -> Result<Vec<Span>, MlError> {
        let (h, w) = (self.hidden, &self.weights);
        let vocab = w.word.len() / h;
        let segments = w.token_type.len() / h;
        let seqs = input.ids;
        let mut spans = Vec::with_capacity(seqs.len());
        let mut tokens = Vec::new();
        for (i, ids) in seqs.iter().enumerate() {
            if ids.is_empty() || ids.len() > self.max_positions {
                return Err(MlError::Inference(format!(
                    "a text of {} tokens (1 to {} allowed)",
                    ids.len(),
                    self.max_positions
                )));
            }
            if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                return Err(MlError::Inference(format!(
                    "token id {bad} past the vocabulary"
                )));
            }
            let types = input.types.map(|t| t[i]);
            if let Some(bad) = types.and_then(|t| t.iter().find(|&&t| t as usize >= segments)) {
                return Err(MlError::Inference(format!(
                    "segment id {bad} past the model's"
                )));
            }
            spans.push(Span {
                start: tokens.len(),
                len: ids.len(),
            });
            tokens.extend(ids.iter().enumerate().map(|(pos, &id)| Token {
                id: id as usize,
                pos,
                segment: types.map_or(0, |t| t[pos] as usize),
            }));
        }
        let n = tokens.len();
        let block = block_rows(n, rayon::current_num_threads());
        let simd = self.simd;
        // Every row of the three is written before it is read, so the buffers only grow
        // (zeroing tens of megabytes before each pass larger than the last one would
        // stall the pass on one thread).
        let Buffers { hidden, qkv, ctx } = &mut *bufs;
        let hidden = grown(hidden, n * h);
        let qkv = grown(qkv, n * 3 * h);
        let ctx = grown(ctx, n * h);
        // Embeddings and LayerNorm, then the first layer's Q, K, V, block by block.
        hidden
            .par_chunks_mut(block * h)
            .zip(qkv.par_chunks_mut(block * 3 * h))
            .zip(tokens.par_chunks(block))
            .for_each(|((x, q), toks)| {
                for (row, t) in x.chunks_exact_mut(h).zip(toks) {
                    let word = &w.word[t.id * h..(t.id + 1) * h];
                    let position = &w.position[t.pos * h..(t.pos + 1) * h];
                    let segment = &w.token_type[t.segment * h..(t.segment + 1) * h];
                    for (((o, a), b), c) in row.iter_mut().zip(word).zip(position).zip(segment) {
                        *o = a + b + c;
                    }
                }
                simd.bias_layer_norm(x, None, norm(&w.embed_norm, self.eps));
                if let Some(first) = w.layers.first() {
                    self.project_qkv(first, x, q);
                }
            });

        let heads = Heads {
            hidden: h,
            count: self.heads,
        };
        // The work pauses after each layer's attention and after each wave of blocks
        // (one block per thread), so an urgent pass waits for one wave at most however
        // large this batch is.
        let wave = block * rayon::current_num_threads().max(1);
        for (i, layer) in w.layers.iter().enumerate() {
            let int16 = self.arithmetic == Arithmetic::Int16;
            attention::attend(simd, int16, qkv, ctx, &spans, heads);
            pause();
            // The rest of the layer is row-local, and so is the next layer's projection:
            // one pass over the blocks does both while the rows are in cache.
            let next = w.layers.get(i + 1);
            let waves = hidden
                .chunks_mut(wave * h)
                .zip(ctx.chunks(wave * h))
                .zip(qkv.chunks_mut(wave * 3 * h));
            for (j, ((xs, cs), qs)) in waves.enumerate() {
                if j > 0 {
                    pause();
                }
                xs.par_chunks_mut(block * h)
                    .zip(cs.par_chunks(block * h))
                    .zip(qs.par_chunks_mut(block * 3 * h))
                    .for_each(|((x, c), q)| {
                        self.feed_forward(layer, x, c);
                        if let Some(next) = next {
                            self.project_qkv(next, x, q);
                        }
                    });
            }
            if next.is_some() {
                pause();
            }
        }
        Ok(spans)
    }

    /// Queries, keys and values of one block of rows `x` into `qkv` (`3·hidden` wide).
    fn project_qkv(&self, layer: &weights::Layer, x: &[f32], qkv: &mut [f32]) {
        layer.qkv.product(x, qkv, false);
        self.simd.add_bias(qkv, &layer.qkv.bias);
    }

    /// The rest of a layer for one block of rows, in place on the residual stream `x`:
    /// attention projection + residual + LayerNorm, then the FFN + residual + LayerNorm.
    fn feed_forward(&self, layer: &weights::Layer, x: &mut [f32], ctx: &[f32]) {
        let (simd, eps) = (self.simd, self.eps);
        layer.attn_out.product(ctx, x, true);
        simd.bias_layer_norm(x, Some(&layer.attn_out.bias), norm(&layer.attn_norm, eps));
        with_scratch(x.len() / self.hidden * self.intermediate, |inner| {
            layer.ffn_in.product(x, inner, false);
            simd.bias_gelu(inner, &layer.ffn_in.bias);
            layer.ffn_out.product(inner, x, true);
        });
        simd.bias_layer_norm(x, Some(&layer.ffn_out.bias), norm(&layer.ffn_norm, eps));
    }
}

/// Deterministic values in `[-1, 1)` for the kernels' tests (an LCG; no RNG dependency).
#[cfg(all(test, target_arch = "x86_64"))]
fn test_values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests;
