//! A fast CPU forward pass for BERT encoders, used instead of candle's when the model
//! runs on the CPU. The batch's sequences are packed back to back (no padding), the
//! dense layers are products over all tokens in blocks of rows, attention runs per
//! sequence, and bias, GELU and LayerNorm are fused into one pass over each block.
//! Blocks run on rayon's global pool; buffers are kept between layers and calls.

mod attention;
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
use super::Pooling;
use crate::ml::MlError;

/// Most rows in one block of the dense layers. Each product repacks its weight matrix,
/// so larger blocks amortise that better; 384 rows keep a block's FFN activations
/// (384 × 1536 floats for MiniLM) within the caches.
const MAX_BLOCK_ROWS: usize = 384;

/// Rows per block for `n` tokens on `threads` threads: at most [`MAX_BLOCK_ROWS`], a
/// multiple of the threads in number of blocks (no thread idles at the end of a pass),
/// and a multiple of 6 rows, the width of gemm's AVX2 kernel, where possible.
fn block_rows(n: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let blocks = n.div_ceil(MAX_BLOCK_ROWS).max(1).next_multiple_of(threads);
    n.div_ceil(blocks)
        .next_multiple_of(6)
        .clamp(1, MAX_BLOCK_ROWS)
}

/// A BERT encoder with plain `f32` weights, run on the CPU.
pub(super) struct CpuBert {
    weights: Weights,
    hidden: usize,
    heads: usize,
    intermediate: usize,
    max_positions: usize,
    eps: f32,
    simd: Simd,
    buffers: Mutex<Buffers>,
}

/// Activations of the packed batch, reused across layers and calls.
#[derive(Default)]
struct Buffers {
    /// `tokens × hidden`: the residual stream.
    hidden: Vec<f32>,
    /// `tokens × 3·hidden`: queries, keys and values.
    qkv: Vec<f32>,
    /// `tokens × hidden`: attention output before its projection.
    ctx: Vec<f32>,
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
    pub(super) fn supports(c: &Config) -> bool {
        c.hidden_act == HiddenAct::Gelu
            && c.num_attention_heads > 0
            && c.hidden_size.is_multiple_of(c.num_attention_heads)
    }

    /// Copies the weights out of `vb` (read on the CPU).
    pub(super) fn load(vb: &VarBuilder, c: &Config) -> Result<Self, MlError> {
        let weights = Weights::load(vb, c).map_err(|e| MlError::Load(e.to_string()))?;
        let simd = Simd::detect();
        tracing::debug!(?simd, "CPU BERT forward pass");
        Ok(Self {
            weights,
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
            intermediate: c.intermediate_size,
            max_positions: c.max_position_embeddings,
            eps: c.layer_norm_eps as f32,
            simd,
            buffers: Mutex::new(Buffers::default()),
        })
    }

    /// One pooled, L2-normalised vector per token sequence.
    pub(super) fn embed(
        &self,
        seqs: &[&[u32]],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, MlError> {
        let mut bufs = self.buffers.lock();
        let spans = self.encode(&mut bufs, seqs)?;
        let h = self.hidden;
        Ok(spans
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
            .collect())
    }

    /// Runs the encoder over the packed sequences; the last layer's output is left in
    /// `bufs.hidden`, one row per token, sequences at the returned spans.
    fn encode(&self, bufs: &mut Buffers, seqs: &[&[u32]]) -> Result<Vec<Span>, MlError> {
        let (h, w) = (self.hidden, &self.weights);
        let vocab = w.word.len() / h;
        let mut spans = Vec::with_capacity(seqs.len());
        let mut tokens = Vec::new();
        for ids in seqs {
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
            spans.push(Span {
                start: tokens.len(),
                len: ids.len(),
            });
            tokens.extend(ids.iter().enumerate().map(|(pos, &id)| (id as usize, pos)));
        }
        let n = tokens.len();
        let block = block_rows(n, rayon::current_num_threads());
        bufs.hidden.resize(n * h, 0.0);
        bufs.qkv.resize(n * 3 * h, 0.0);
        bufs.ctx.resize(n * h, 0.0);
        let simd = self.simd;

        let Buffers { hidden, qkv, ctx } = &mut *bufs;
        // Embeddings and LayerNorm, then the first layer's Q, K, V, block by block.
        hidden
            .par_chunks_mut(block * h)
            .zip(qkv.par_chunks_mut(block * 3 * h))
            .zip(tokens.par_chunks(block))
            .for_each(|((x, q), toks)| {
                for (row, &(id, pos)) in x.chunks_exact_mut(h).zip(toks) {
                    let word = &w.word[id * h..(id + 1) * h];
                    let position = &w.position[pos * h..(pos + 1) * h];
                    for (((o, a), b), c) in
                        row.iter_mut().zip(word).zip(position).zip(&w.token_type)
                    {
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
        for (i, layer) in w.layers.iter().enumerate() {
            attention::attend(simd, qkv, ctx, &spans, heads);
            // The rest of the layer is row-local, and so is the next layer's projection:
            // one pass over the blocks does both while the rows are in cache.
            let next = w.layers.get(i + 1);
            hidden
                .par_chunks_mut(block * h)
                .zip(ctx.par_chunks(block * h))
                .zip(qkv.par_chunks_mut(block * 3 * h))
                .for_each(|((x, c), q)| {
                    self.feed_forward(layer, x, c);
                    if let Some(next) = next {
                        self.project_qkv(next, x, q);
                    }
                });
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

#[cfg(test)]
mod tests;
