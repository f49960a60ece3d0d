//! The BERT encoder on candle's devices (CUDA, Metal; the CPU for tests and for
//! configurations ragd's CPU pass does not implement), for the embedder and the
//! cross-encoder alike.
//!
//! ragd's own forward pass over candle's tensors rather than candle-transformers'
//! `BertModel`, because that one cannot run in half precision: its attention mask is
//! `(1 - mask) * f32::MIN` in the model's dtype, which is `0 * -inf = NaN` in f16 and
//! bf16. Here the matrix products run in the chosen dtype (f16 or bf16 on a GPU, as
//! text-embeddings-inference does), while LayerNorm, the softmax with its mask, pooling
//! and normalisation run in f32. Batches are padded; callers sort by length so each pads
//! as little as possible.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct};

use super::Pooling;
use crate::ml::MlError;

/// One transformer layer's weights.
struct Layer {
    /// Query, key and value as one `[3 * hidden, hidden]` product.
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    up: Linear,
    down: Linear,
    out_norm: LayerNorm,
}

/// A BERT encoder on `device` with its products in `dtype`.
pub(crate) struct CandleBert {
    words: Embedding,
    positions: Embedding,
    types: Embedding,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    act: HiddenAct,
    device: Device,
    dtype: DType,
}

/// LayerNorm in f32 whatever the input's dtype; the result in `dtype`.
fn norm(ln: &LayerNorm, x: &Tensor, dtype: DType) -> candle_core::Result<Tensor> {
    ln.forward(&x.to_dtype(DType::F32)?)?.to_dtype(dtype)
}

impl CandleBert {
    /// Loads the encoder from `vb` (the model's root or its `bert.` prefix: both are
    /// tried). `vb`'s dtype is the products' dtype; the norms are kept in f32.
    pub(crate) fn load(vb: VarBuilder, c: &Config) -> Result<Self, MlError> {
        let load = |e: candle_core::Error| MlError::Load(format!("BERT weights: {e}"));
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let dtype = vb.dtype();
        let f32vb = vb.to_dtype(DType::F32);
        let h = c.hidden_size;
        if c.num_attention_heads == 0 || !h.is_multiple_of(c.num_attention_heads) {
            return Err(MlError::Load(format!(
                "hidden size {h} is not a multiple of {} heads",
                c.num_attention_heads
            )));
        }
        let e = vb.pp("embeddings");
        let ef = f32vb.pp("embeddings");
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let lf = f32vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention.self");
            let w = Tensor::cat(
                &[
                    a.get((h, h), "query.weight").map_err(load)?,
                    a.get((h, h), "key.weight").map_err(load)?,
                    a.get((h, h), "value.weight").map_err(load)?,
                ],
                0,
            )
            .map_err(load)?;
            let b = Tensor::cat(
                &[
                    a.get(h, "query.bias").map_err(load)?,
                    a.get(h, "key.bias").map_err(load)?,
                    a.get(h, "value.bias").map_err(load)?,
                ],
                0,
            )
            .map_err(load)?;
            layers.push(Layer {
                qkv: Linear::new(w, Some(b)),
                attn_out: linear(h, h, l.pp("attention.output.dense")).map_err(load)?,
                attn_norm: layer_norm(h, c.layer_norm_eps, lf.pp("attention.output.LayerNorm"))
                    .map_err(load)?,
                up: linear(h, c.intermediate_size, l.pp("intermediate.dense")).map_err(load)?,
                down: linear(c.intermediate_size, h, l.pp("output.dense")).map_err(load)?,
                out_norm: layer_norm(h, c.layer_norm_eps, lf.pp("output.LayerNorm"))
                    .map_err(load)?,
            });
        }
        Ok(Self {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings")).map_err(load)?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))
                .map_err(load)?,
            types: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings")).map_err(load)?,
            embed_norm: layer_norm(h, c.layer_norm_eps, ef.pp("LayerNorm")).map_err(load)?,
            layers,
            heads: c.num_attention_heads,
            act: c.hidden_act,
            device: vb.device().clone(),
            dtype,
        })
    }

    /// The products' dtype: `f32`, `f16` or `bf16`.
    pub(crate) fn dtype_name(&self) -> &'static str {
        match self.dtype {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            _ => "f32",
        }
    }

    /// The last hidden states `[n, seq, hidden]` (in the products' dtype) of the padded
    /// batch, and its mask `[n, seq]` in f32 (1 for a token, 0 for padding).
    fn hidden(
        &self,
        seqs: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
    ) -> candle_core::Result<(Tensor, Tensor)> {
        let seq = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let n = seqs.len();
        let (mut ids, mut types, mut mask) = (
            vec![0u32; n * seq],
            vec![0u32; n * seq],
            vec![0f32; n * seq],
        );
        for (row, s) in seqs.iter().enumerate() {
            let base = row * seq;
            ids[base..base + s.len()].copy_from_slice(s);
            mask[base..base + s.len()].fill(1.0);
            if let Some(t) = type_ids.and_then(|t| t.get(row)) {
                let k = t.len().min(s.len());
                types[base..base + k].copy_from_slice(&t[..k]);
            }
        }
        let dev = &self.device;
        let ids = Tensor::from_vec(ids, (n, seq), dev)?;
        let types = Tensor::from_vec(types, (n, seq), dev)?;
        let mask = Tensor::from_vec(mask, (n, seq), dev)?;
        let pos = Tensor::arange(0u32, seq as u32, dev)?;
        let x = self
            .words
            .forward(&ids)?
            .broadcast_add(&self.positions.forward(&pos)?)?
            .add(&self.types.forward(&types)?)?;
        let mut x = norm(&self.embed_norm, &x, self.dtype)?;
        // Additive mask, f32: 0 for tokens, -1e4 for padding (exp underflows to 0 either
        // way, with no infinities to make NaN).
        let bias = ((&mask - 1.0)? * 1e4)?.reshape((n, 1, 1, seq))?;
        let h = x.dim(2)?;
        let d = h / self.heads;
        let scale = 1.0 / (d as f64).sqrt();
        for l in &self.layers {
            let qkv = l.qkv.forward(&x)?; // [n, seq, 3h]
            let split = |i: usize| -> candle_core::Result<Tensor> {
                qkv.narrow(2, i * h, h)?
                    .reshape((n, seq, self.heads, d))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let (q, k, v) = (split(0)?, split(1)?, split(2)?);
            let scores = (q.matmul(&k.t()?)? * scale)?
                .to_dtype(DType::F32)?
                .broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(self.dtype)?;
            let ctx = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((n, seq, h))?;
            let a = l.attn_out.forward(&ctx)?.add(&x)?;
            let a = norm(&l.attn_norm, &a, self.dtype)?;
            let up = l.up.forward(&a)?;
            let up = match self.act {
                HiddenAct::Gelu => up.gelu_erf()?,
                HiddenAct::GeluApproximate => up.gelu()?,
                HiddenAct::Relu => up.relu()?,
            };
            let o = l.down.forward(&up)?.add(&a)?;
            x = norm(&l.out_norm, &o, self.dtype)?;
        }
        Ok((x, mask))
    }

    /// One padded forward pass; one pooled, L2-normalised vector per sequence.
    pub(super) fn embed(
        &self,
        seqs: &[&[u32]],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, MlError> {
        let (hidden, mask) = self.hidden(seqs, None)?;
        let hidden = hidden.to_dtype(DType::F32)?;
        let pooled = match pooling {
            Pooling::Cls => first_rows(&hidden)?,
            Pooling::Mean => {
                let m = mask.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
        };
        let norm = pooled
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12, f64::MAX)?;
        Ok(pooled.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }

    /// The `[CLS]` state of each (query, passage) pair, `[n, hidden]` in f32 and
    /// contiguous (the cross-encoder's pooler multiplies it).
    pub(crate) fn cls_states(
        &self,
        seqs: &[&[u32]],
        type_ids: &[&[u32]],
    ) -> Result<Tensor, MlError> {
        let (hidden, _) = self.hidden(seqs, Some(type_ids))?;
        Ok(first_rows(&hidden.to_dtype(DType::F32)?)?)
    }
}

/// The first position of each sequence of `[n, seq, hidden]` as a contiguous `[n,
/// hidden]`. A narrowed, squeezed view is strided, and candle's CUDA matmul refuses a
/// strided left operand of more than one row (`MatMulNonContiguous`).
pub(crate) fn first_rows(hidden: &Tensor) -> candle_core::Result<Tensor> {
    hidden.narrow(1, 0, 1)?.squeeze(1)?.contiguous()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_rows_are_contiguous_for_a_gpu_matmul() {
        let t = Tensor::arange(0f32, 2.0 * 3.0 * 4.0, &Device::Cpu)
            .unwrap()
            .reshape((2, 3, 4))
            .unwrap();
        // The view the reranker used to feed its pooler: strided.
        let view = t.narrow(1, 0, 1).unwrap().squeeze(1).unwrap();
        assert!(!view.is_contiguous());
        let rows = first_rows(&t).unwrap();
        assert!(rows.is_contiguous());
        assert_eq!(
            rows.to_vec2::<f32>().unwrap(),
            vec![vec![0., 1., 2., 3.], vec![12., 13., 14., 15.]]
        );
    }
}
