//! The BERT weights as plain `f32` buffers, read through candle's `VarBuilder` under
//! the checkpoint's own names (`embeddings.word_embeddings.weight`,
//! `encoder.layer.{i}.attention.self.query.weight`, ..., optionally under `bert.`).
//! Linear weights are stored transposed, `[in, out]`: gemm then reads them in the
//! column order its kernel packs. Query, key and value sit side by side in one
//! `[hidden, 3·hidden]` matrix, so one product projects all three.

use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use super::bf16::PackedBf16;
#[cfg(target_arch = "x86_64")]
use super::int16::PackedI16;
#[cfg(target_arch = "x86_64")]
use super::int8::PackedI8;
use super::matmul::{matmul, Mat, MatMut};
use super::Arithmetic;
use crate::ml::quant::{self, ActKind, Acts, PackedMatrix, Tier, WeightType};

thread_local! {
    /// Activations quantized for an int8 product, and its output when it is added to
    /// the rows rather than written; reused across calls.
    static Q8_SCRATCH: RefCell<(Acts, Vec<f32>)> = RefCell::new((Acts::new(), Vec::new()));
}

/// A weight matrix in the arithmetic its products use.
pub(super) enum Matrix {
    /// `[inp, out]` row-major, for gemm.
    F32(Vec<f32>),
    /// Rounded to bf16 and packed.
    #[cfg(target_arch = "x86_64")]
    Bf16(PackedBf16),
    /// Quantized to i8 in blocks of 64 inputs and packed.
    #[cfg(target_arch = "x86_64")]
    I8(PackedI8),
    /// Quantized to i16, one scale per column, and packed.
    #[cfg(target_arch = "x86_64")]
    I16(PackedI16),
    /// Quantized to Q8_0 (blocks of 32 with one scale) for the int8 kernels of `tier`;
    /// activations are quantized the same way per token.
    Q8(PackedMatrix, Tier),
}

/// A linear layer.
pub(super) struct Linear {
    pub weight: Matrix,
    pub bias: Vec<f32>,
    pub inp: usize,
    pub out: usize,
}

impl Linear {
    /// `y = x · W` (`y += x · W` when `accumulate`) for rows `x` (`inp` wide) into `y`
    /// (`out` wide); the bias is left to the fused kernel that follows.
    pub(super) fn product(&self, x: &[f32], y: &mut [f32], accumulate: bool) {
        match &self.weight {
            Matrix::F32(w) => {
                let rows = x.len() / self.inp;
                let w = Mat::rows(w, self.inp, self.out, self.out);
                let y = MatMut::rows(y, rows, self.out, self.out);
                matmul(
                    y,
                    Mat::rows(x, rows, self.inp, self.inp),
                    w,
                    1.0,
                    accumulate,
                );
            }
            #[cfg(target_arch = "x86_64")]
            Matrix::Bf16(w) => w.product(x, y, accumulate),
            #[cfg(target_arch = "x86_64")]
            Matrix::I8(w) => w.product(x, y, accumulate),
            #[cfg(target_arch = "x86_64")]
            Matrix::I16(w) => w.product(x, y, accumulate),
            Matrix::Q8(w, tier) => {
                let rows = x.len() / self.inp;
                Q8_SCRATCH.with(|cell| {
                    let (acts, sum) = &mut *cell.borrow_mut();
                    acts.quantize(*tier, ActKind::Q8, x, rows, self.inp);
                    if accumulate {
                        sum.resize(y.len(), 0.0);
                        quant::matmul(*tier, w, acts, sum, self.out, 0..w.groups());
                        y.iter_mut().zip(sum.iter()).for_each(|(a, b)| *a += b);
                    } else {
                        quant::matmul(*tier, w, acts, y, self.out, 0..w.groups());
                    }
                });
            }
        }
    }

    /// Converts the weights to `arithmetic` (which the caller checked this CPU runs).
    fn convert(&mut self, arithmetic: Arithmetic) {
        match (arithmetic, &self.weight) {
            (Arithmetic::Q8(tier), Matrix::F32(w)) if self.inp.is_multiple_of(32) => {
                // Row-major `[out, inp]`, as the packed matrix takes it.
                let mut t = vec![0.0f32; w.len()];
                for k in 0..self.inp {
                    for n in 0..self.out {
                        t[n * self.inp + k] = w[k * self.out + n];
                    }
                }
                match PackedMatrix::quantize(WeightType::Q8_0, self.out, self.inp, &t) {
                    Ok(p) => self.weight = Matrix::Q8(p, tier),
                    Err(e) => tracing::warn!(error = %e, "int8 weights refused; keeping f32"),
                }
            }
            #[cfg(target_arch = "x86_64")]
            (Arithmetic::Int8, Matrix::F32(w)) => {
                // A width that is not a whole number of blocks: bf16 where the CPU has it.
                if let Some(p) = PackedI8::pack(w, self.inp, self.out) {
                    self.weight = Matrix::I8(p);
                } else if let Some(p) = PackedBf16::pack(w, self.inp, self.out) {
                    self.weight = Matrix::Bf16(p);
                }
            }
            #[cfg(target_arch = "x86_64")]
            (Arithmetic::Int16, Matrix::F32(w)) => {
                if let Some(p) = PackedI16::pack(w, self.inp, self.out) {
                    self.weight = Matrix::I16(p);
                }
            }
            #[cfg(target_arch = "x86_64")]
            (Arithmetic::Bf16, Matrix::F32(w)) => {
                if let Some(p) = PackedBf16::pack(w, self.inp, self.out) {
                    self.weight = Matrix::Bf16(p);
                }
            }
            _ => {}
        }
    }
}

/// A LayerNorm's scale and shift.
pub(super) struct LayerNorm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// One encoder layer.
pub(super) struct Layer {
    pub qkv: Linear,
    pub attn_out: Linear,
    pub attn_norm: LayerNorm,
    pub ffn_in: Linear,
    pub ffn_out: Linear,
    pub ffn_norm: LayerNorm,
}

/// The whole encoder.
pub(super) struct Weights {
    /// `[vocab, hidden]`.
    pub word: Vec<f32>,
    /// `[max_positions, hidden]`.
    pub position: Vec<f32>,
    /// `[type_vocab, hidden]`: segment embeddings (0 for a single text; a pair's second
    /// text is segment 1).
    pub token_type: Vec<f32>,
    pub embed_norm: LayerNorm,
    pub layers: Vec<Layer>,
}

fn flat(t: Tensor) -> Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

fn linear(vb: &VarBuilder, out: usize, inp: usize) -> Result<Linear> {
    Ok(Linear {
        weight: Matrix::F32(flat(vb.get((out, inp), "weight")?.t()?)?),
        bias: flat(vb.get(out, "bias")?)?,
        inp,
        out,
    })
}

fn layer_norm(vb: &VarBuilder, size: usize) -> Result<LayerNorm> {
    Ok(LayerNorm {
        gamma: flat(vb.get(size, "weight")?)?,
        beta: flat(vb.get(size, "bias")?)?,
    })
}

/// Side by side: row `r` of the result is row `r` of each of `parts` in turn.
fn interleave(parts: &[Matrix], width: usize) -> Vec<f32> {
    let parts: Vec<&[f32]> = parts
        .iter()
        .map(|m| match m {
            Matrix::F32(w) => w.as_slice(),
            _ => unreachable!("weights are read as f32"),
        })
        .collect();
    let rows = parts.first().map_or(0, |p| p.len() / width);
    (0..rows)
        .flat_map(|r| {
            parts
                .iter()
                .flat_map(move |p| &p[r * width..(r + 1) * width])
        })
        .copied()
        .collect()
}

fn layer(vb: &VarBuilder, c: &Config) -> Result<Layer> {
    let h = c.hidden_size;
    let attn = vb.pp("attention");
    let q = linear(&attn.pp("self.query"), h, h)?;
    let k = linear(&attn.pp("self.key"), h, h)?;
    let v = linear(&attn.pp("self.value"), h, h)?;
    let qkv = Linear {
        weight: Matrix::F32(interleave(&[q.weight, k.weight, v.weight], h)),
        bias: [q.bias, k.bias, v.bias].concat(),
        inp: h,
        out: 3 * h,
    };
    Ok(Layer {
        qkv,
        attn_out: linear(&attn.pp("output.dense"), h, h)?,
        attn_norm: layer_norm(&attn.pp("output.LayerNorm"), h)?,
        ffn_in: linear(&vb.pp("intermediate.dense"), c.intermediate_size, h)?,
        ffn_out: linear(&vb.pp("output.dense"), h, c.intermediate_size)?,
        ffn_norm: layer_norm(&vb.pp("output.LayerNorm"), h)?,
    })
}

impl Weights {
    /// Converts every dense layer's weights to `arithmetic`.
    pub(super) fn convert(&mut self, arithmetic: Arithmetic) {
        for l in &mut self.layers {
            for lin in [&mut l.qkv, &mut l.attn_out, &mut l.ffn_in, &mut l.ffn_out] {
                lin.convert(arithmetic);
            }
        }
    }

    /// Reads every tensor of the encoder, with or without the `model_type.` prefix
    /// (as candle's `BertModel::load` accepts both).
    pub(super) fn load(vb: &VarBuilder, c: &Config) -> Result<Self> {
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb.clone()
        } else {
            vb.pp(c.model_type.as_deref().unwrap_or("bert"))
        };
        let h = c.hidden_size;
        let emb = vb.pp("embeddings");
        let token_type = flat(emb.get((c.type_vocab_size, h), "token_type_embeddings.weight")?)?;
        let layers = (0..c.num_hidden_layers)
            .map(|i| layer(&vb.pp(format!("encoder.layer.{i}")), c))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            word: flat(emb.get((c.vocab_size, h), "word_embeddings.weight")?)?,
            position: flat(emb.get((c.max_position_embeddings, h), "position_embeddings.weight")?)?,
            token_type: if token_type.len() >= h {
                token_type
            } else {
                return Err(candle_core::Error::Msg("no token type embeddings".into()));
            },
            embed_norm: layer_norm(&emb.pp("LayerNorm"), h)?,
            layers,
        })
    }
}
