//! ragd's transformer on candle's devices (CUDA, Metal; the CPU device for tests): the
//! families, shapes, rotations and masks of the CPU engine ([`super::cpu::config`],
//! [`super::cpu::ops::Rope`]) over candle's tensors. The weights stay quantized on the
//! device and run on candle's quantized kernels (`CANDLE_DEQUANTIZE_ALL_F16=1`
//! dequantizes them to f16 at load, for cuBLAS); activations, norms and attention are
//! f32; each sequence has its own [`CandleKv`], so the prompt cache and the batched
//! scheduler drive this engine exactly as they drive the CPU one: a prompt is one pass,
//! and a decode step runs every sequence's token through each weight once.
//!
//! Unlike candle-transformers' quantized models (kept as the test reference) it reads
//! Llama 3's `rope_freqs` and Phi-3's LongRoPE factors, Gemma 3's windows and GeGLU, an
//! explicit head dimension, and the model's whole window.

mod kv;

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Tensor, D};

pub use self::kv::CandleKv;
use super::cpu::config::{Activation, Config, RopeStyle};
use super::cpu::ops::Rope;
use super::cpu::KvType;
use super::model::Arch;
use crate::ml::MlError;

/// One transformer block's tensors.
struct Layer {
    attn_norm: Tensor,
    /// Query, key and value projections whose outputs, joined, are `[q | k | v]`.
    qkv: Vec<QMatMul>,
    qkv_bias: Option<Tensor>,
    wo: QMatMul,
    ffn_norm: Tensor,
    /// Gate and up projections whose outputs, joined, are `[gate | up]`.
    gate_up: Vec<QMatMul>,
    down: QMatMul,
    qk_norm: Option<(Tensor, Tensor)>,
    post_norms: Option<(Tensor, Tensor)>,
}

/// A model loaded onto a candle device.
pub struct CandleModel {
    cfg: Config,
    device: Device,
    kv: KvType,
    /// Token embeddings, f32 `[vocab, hidden]`.
    embed: Tensor,
    /// The output layer (the embeddings' when the model ties them).
    output: QMatMul,
    output_norm: Tensor,
    layers: Vec<Layer>,
    /// The rotations of global layers, then of windowed ones when they differ.
    ropes: Vec<Rope>,
    vocab: usize,
}

/// Reads tensors of one GGUF onto the device.
struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
    device: &'a Device,
}

impl<R: Read + Seek> Loader<'_, R> {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn qtensor(
        &mut self,
        name: &str,
        dims: &[usize],
    ) -> Result<candle_core::quantized::QTensor, MlError> {
        let t = self
            .content
            .tensor(self.reader, name, self.device)
            .map_err(|e| MlError::Load(format!("{name}: {e}")))?;
        // GGUF dims are innermost first; candle reverses them to rows × columns.
        if t.shape().dims() != dims {
            return Err(MlError::Load(format!(
                "{name} is {:?}, expected {dims:?}",
                t.shape().dims()
            )));
        }
        Ok(t)
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<QMatMul, MlError> {
        let t = self.qtensor(name, &[rows, cols])?;
        QMatMul::from_qtensor(t).map_err(|e| MlError::Load(format!("{name}: {e}")))
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor, MlError> {
        let t = self.qtensor(name, &[len])?;
        Ok(t.dequantize(self.device)?.to_dtype(DType::F32)?)
    }

    fn host_vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, MlError> {
        Ok(self
            .qtensor(name, &[len])?
            .dequantize(&Device::Cpu)?
            .to_dtype(DType::F32)?
            .to_vec1()?)
    }
}

impl CandleModel {
    /// Reads an `arch` model from an open GGUF onto `device`, with keys and values kept
    /// as `kv`.
    pub fn load<R: Read + Seek>(
        arch: Arch,
        content: &Content,
        reader: &mut R,
        device: &Device,
        kv: KvType,
    ) -> Result<Self, MlError> {
        let cfg = Config::from_metadata(arch, &content.metadata)?;
        let vocab = content
            .tensor_infos
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| MlError::Load("the GGUF has no token_embd.weight".into()))?;
        let mut r = Loader {
            content,
            reader,
            device,
        };
        let (h, q, kvr, f) = (
            cfg.hidden,
            cfg.q_rows(),
            cfg.kv_heads * cfg.head_dim,
            cfg.ffn,
        );
        let embed_q = r.qtensor("token_embd.weight", &[vocab, h])?;
        let embed = embed_q.dequantize(device)?.to_dtype(DType::F32)?;
        let output = if r.has("output.weight") {
            r.matrix("output.weight", vocab, h)?
        } else {
            QMatMul::from_qtensor(embed_q)?
        };
        let output_norm = r.vector("output_norm.weight", h)?;
        let half = cfg.rope_dim / 2;
        let rope_freqs = if r.has("rope_freqs.weight") {
            Some(r.host_vector("rope_freqs.weight", half)?)
        } else {
            None
        };
        let long_short = if r.has("rope_factors_long.weight") {
            Some((
                r.host_vector("rope_factors_long.weight", half)?,
                r.host_vector("rope_factors_short.weight", half)?,
            ))
        } else {
            None
        };
        let ropes = super::cpu::ropes(
            &cfg,
            rope_freqs.as_deref(),
            long_short
                .as_ref()
                .map(|(l, s)| (l.as_slice(), s.as_slice())),
        );
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = |s: &str| format!("blk.{l}.{s}");
            let qkv = if arch == Arch::Phi3 && r.has(&p("attn_qkv.weight")) {
                vec![r.matrix(&p("attn_qkv.weight"), cfg.qkv_rows(), h)?]
            } else {
                vec![
                    r.matrix(&p("attn_q.weight"), q, h)?,
                    r.matrix(&p("attn_k.weight"), kvr, h)?,
                    r.matrix(&p("attn_v.weight"), kvr, h)?,
                ]
            };
            let qkv_bias = if arch == Arch::Qwen2 {
                Some(Tensor::cat(
                    &[
                        r.vector(&p("attn_q.bias"), q)?,
                        r.vector(&p("attn_k.bias"), kvr)?,
                        r.vector(&p("attn_v.bias"), kvr)?,
                    ],
                    0,
                )?)
            } else {
                None
            };
            let gate_up = if arch == Arch::Phi3 {
                vec![r.matrix(&p("ffn_up.weight"), 2 * f, h)?]
            } else {
                vec![
                    r.matrix(&p("ffn_gate.weight"), f, h)?,
                    r.matrix(&p("ffn_up.weight"), f, h)?,
                ]
            };
            let qk_norm = if cfg.family.qk_norm {
                Some((
                    r.vector(&p("attn_q_norm.weight"), cfg.head_dim)?,
                    r.vector(&p("attn_k_norm.weight"), cfg.head_dim)?,
                ))
            } else {
                None
            };
            let post_norms = if cfg.family.post_norms {
                Some((
                    r.vector(&p("post_attention_norm.weight"), h)?,
                    r.vector(&p("post_ffw_norm.weight"), h)?,
                ))
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: r.vector(&p("attn_norm.weight"), h)?,
                qkv,
                qkv_bias,
                wo: r.matrix(&p("attn_output.weight"), h, q)?,
                ffn_norm: r.vector(&p("ffn_norm.weight"), h)?,
                gate_up,
                down: r.matrix(&p("ffn_down.weight"), h, f)?,
                qk_norm,
                post_norms,
            });
        }
        tracing::info!(
            arch = arch.as_str(),
            layers = cfg.layers,
            hidden = cfg.hidden,
            heads = cfg.heads,
            kv_heads = cfg.kv_heads,
            context = cfg.context,
            vocab,
            device = ?device.location(),
            "candle LLM engine ready"
        );
        Ok(Self {
            cfg,
            device: device.clone(),
            kv,
            embed,
            output,
            output_norm,
            layers,
            ropes,
            vocab,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Rows of the logits.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// A new, empty state for one sequence.
    pub fn new_cache(&self) -> CandleKv {
        CandleKv::new(&self.cfg, self.kv, &self.device)
    }

    /// Runs `tokens` after the positions in `kv` (which then holds them too) and returns
    /// the last token's logits, or every token's with `all`.
    pub fn forward(
        &self,
        kv: &mut CandleKv,
        tokens: &[u32],
        all: bool,
    ) -> Result<Vec<f32>, MlError> {
        let n = tokens.len();
        if n == 0 {
            return Err(MlError::InvalidInput("no tokens to run".into()));
        }
        let pos = kv.len();
        if pos + n > self.cfg.context {
            return Err(MlError::InvalidInput(format!(
                "{} positions exceed the model's window of {}",
                pos + n,
                self.cfg.context
            )));
        }
        kv.reserve(pos + n)?;
        let positions: Vec<usize> = (pos..pos + n).collect();
        let angles = self.angles(&positions)?;
        let global = self.mask(pos, n, false)?;
        let windowed = match self.cfg.family.window {
            Some(_) => self.mask(pos, n, true)?,
            None => None,
        };
        let masks = [global, windowed];
        let mut x = self.embed_tokens(tokens)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let swa = self.cfg.family.is_swa(l);
            let ri = usize::from(swa && self.ropes.len() > 1);
            let (q, k, v) = self.project(layer, &x, &angles[ri], 1, n)?;
            // [1, heads, n, d] and [1, kv_heads, n, d]: one sequence.
            let (k_all, v_all) = kv.store(l, &k.squeeze(0)?, &v.squeeze(0)?)?;
            let att = self.attend(&q, &k_all, &v_all, masks[usize::from(swa)].as_ref())?;
            // [1, heads, n, d] -> [n, heads * d]
            let att = att
                .squeeze(0)?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((n, self.cfg.q_rows()))?;
            x = self.finish_layer(layer, &x, &att)?;
        }
        kv.advance(n);
        let x = if all { x } else { x.narrow(0, n - 1, 1)? };
        self.logits(&x)
    }

    /// One decode step: token `tokens[i]` after the positions of `kvs[i]`, every weight
    /// read once for all of them. Returns each one's logits, `tokens.len()` rows.
    pub fn forward_decode(
        &self,
        kvs: &mut [&mut CandleKv],
        tokens: &[u32],
    ) -> Result<Vec<f32>, MlError> {
        let b = tokens.len();
        if b == 0 || b != kvs.len() {
            return Err(MlError::InvalidInput(
                "a decode step needs one token per sequence".into(),
            ));
        }
        let positions: Vec<usize> = kvs.iter().map(|c| c.len()).collect();
        if let Some(&p) = positions.iter().find(|&&p| p + 1 > self.cfg.context) {
            return Err(MlError::InvalidInput(format!(
                "position {p} is past the model's window of {}",
                self.cfg.context
            )));
        }
        for c in kvs.iter_mut() {
            let len = c.len();
            c.reserve(len + 1)?;
        }
        let angles = self.angles(&positions)?;
        let mut x = self.embed_tokens(tokens)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let swa = self.cfg.family.is_swa(l);
            let ri = usize::from(swa && self.ropes.len() > 1);
            // [b, heads, 1, d]: each row its own sequence, rotated at its own position.
            let (q, k, v) = self.project(layer, &x, &angles[ri], b, 1)?;
            let mut outs = Vec::with_capacity(b);
            for (i, c) in kvs.iter_mut().enumerate() {
                let (k_all, v_all) = c.store(l, &k.get(i)?, &v.get(i)?)?;
                let mask = self.mask(positions[i], 1, swa)?;
                outs.push(self.attend(&q.narrow(0, i, 1)?, &k_all, &v_all, mask.as_ref())?);
            }
            let att = Tensor::cat(&outs, 0)?.reshape((b, self.cfg.q_rows()))?;
            x = self.finish_layer(layer, &x, &att)?;
        }
        for c in kvs.iter_mut() {
            c.advance(1);
        }
        self.logits(&x)
    }

    /// Token embeddings `[n, hidden]` (scaled for Gemma).
    fn embed_tokens(&self, tokens: &[u32]) -> Result<Tensor, MlError> {
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(MlError::InvalidInput(format!(
                "token {bad} is outside the vocabulary of {}",
                self.vocab
            )));
        }
        let ids = Tensor::new(tokens, &self.device)?;
        let x = self.embed.index_select(&ids, 0)?;
        Ok(match self.cfg.family.embed_scale {
            Some(s) => (x * f64::from(s))?,
            None => x,
        })
    }

    /// Per rotation set: `(cos, sin)`, `[rows, rope_dim / 2]`, one row per position.
    fn angles(&self, positions: &[usize]) -> Result<Vec<(Tensor, Tensor)>, MlError> {
        let half = self.cfg.rope_dim / 2;
        let mut out = Vec::with_capacity(self.ropes.len());
        let mut cs = Vec::with_capacity(2 * half);
        for rope in &self.ropes {
            let mut cos: Vec<f32> = Vec::with_capacity(positions.len() * half);
            let mut sin: Vec<f32> = Vec::with_capacity(positions.len() * half);
            for &p in positions {
                rope.angles(p, &mut cs);
                cos.extend(cs.iter().step_by(2));
                sin.extend(cs.iter().skip(1).step_by(2));
            }
            out.push((
                Tensor::from_vec(cos, (positions.len(), half), &self.device)?,
                Tensor::from_vec(sin, (positions.len(), half), &self.device)?,
            ));
        }
        Ok(out)
    }

    /// The additive mask `[n, pos + n]` of `n` queries after `pos` positions (causal,
    /// and the window in windowed layers); `None` where nothing is hidden.
    fn mask(&self, pos: usize, n: usize, swa: bool) -> Result<Option<Tensor>, MlError> {
        let window = if swa { self.cfg.family.window } else { None };
        let total = pos + n;
        // One new token sees every earlier one unless a window hides the oldest; of
        // several, each but the last is hidden from the later ones.
        if n == 1 && window.is_none_or(|w| total <= w) {
            return Ok(None);
        }
        let hidden = |qp: usize, kp: usize| kp > qp || window.is_some_and(|w| qp - kp >= w);
        let mut m = Vec::with_capacity(n * total);
        for i in 0..n {
            m.extend((0..total).map(|j| {
                if hidden(pos + i, j) {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            }));
        }
        Ok(Some(Tensor::from_vec(m, (n, total), &self.device)?))
    }

    /// The attention block's norm, projections, per-head norms and rotations for `b`
    /// sequences of `n` tokens in `x` (`[b * n, hidden]`): queries `[b, heads, n, d]`,
    /// keys and values `[b, kv_heads, n, d]`.
    fn project(
        &self,
        layer: &Layer,
        x: &Tensor,
        (cos, sin): &(Tensor, Tensor),
        b: usize,
        n: usize,
    ) -> Result<(Tensor, Tensor, Tensor), MlError> {
        let c = &self.cfg;
        let (d, eps) = (c.head_dim, c.eps);
        let xn = candle_nn::ops::rms_norm(x, &layer.attn_norm, eps)?;
        let mut qkv = join(&layer.qkv, &xn)?;
        if let Some(bias) = &layer.qkv_bias {
            qkv = qkv.broadcast_add(bias)?;
        }
        let (qr, kr) = (c.q_rows(), c.kv_heads * d);
        let heads = |t: Tensor, count: usize| -> candle_core::Result<Tensor> {
            t.reshape((b, n, count, d))?.transpose(1, 2)?.contiguous()
        };
        let mut q = heads(qkv.narrow(1, 0, qr)?, c.heads)?;
        let mut k = heads(qkv.narrow(1, qr, kr)?, c.kv_heads)?;
        let v = heads(qkv.narrow(1, qr + kr, kr)?, c.kv_heads)?;
        if let Some((qn, kn)) = &layer.qk_norm {
            q = candle_nn::ops::rms_norm(&q, qn, eps)?;
            k = candle_nn::ops::rms_norm(&k, kn, eps)?;
        }
        // A decode step's rows are sequences: each gets its own row of angles.
        let (cos, sin) = if b > 1 {
            (cos.unsqueeze(1)?, sin.unsqueeze(1)?)
        } else {
            (cos.clone(), sin.clone())
        };
        let q = self.rotate(&q, &cos, &sin)?;
        let k = self.rotate(&k, &cos, &sin)?;
        Ok((q, k, v))
    }

    /// Rotates the first `rope_dim` dimensions of each head of `x` `[b, heads, n, d]`.
    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor, MlError> {
        let (rd, d) = (self.cfg.rope_dim, self.cfg.head_dim);
        let apply = |t: &Tensor| -> candle_core::Result<Tensor> {
            match self.cfg.rope_style {
                RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(t, cos, sin),
                RopeStyle::Halves => candle_nn::rotary_emb::rope(t, cos, sin),
            }
        };
        if rd == d {
            return Ok(apply(x)?);
        }
        let rotated = apply(&x.narrow(D::Minus1, 0, rd)?.contiguous()?)?;
        Ok(Tensor::cat(
            &[rotated, x.narrow(D::Minus1, rd, d - rd)?],
            D::Minus1,
        )?)
    }

    /// Grouped-query attention of one sequence: queries `[1, heads, n, d]` over keys and
    /// values `[kv_heads, t, d]`; `[1, heads, n, d]`.
    fn attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<Tensor, MlError> {
        let c = &self.cfg;
        let group = c.heads / c.kv_heads;
        let (k, v) = (k.unsqueeze(0)?, v.unsqueeze(0)?);
        let k = candle_transformers::utils::repeat_kv(k, group)?.contiguous()?;
        let v = candle_transformers::utils::repeat_kv(v, group)?.contiguous()?;
        let scale = c
            .family
            .attn_scale
            .unwrap_or(1.0 / (c.head_dim as f32).sqrt());
        let mut scores = (q.matmul(&k.t()?)? * f64::from(scale))?;
        if let Some(m) = mask {
            scores = scores.broadcast_add(m)?;
        }
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        Ok(probs.matmul(&v)?)
    }

    /// The rest of a block after attention: output projection, residual, feed-forward.
    fn finish_layer(&self, layer: &Layer, x: &Tensor, att: &Tensor) -> Result<Tensor, MlError> {
        let (f, eps) = (self.cfg.ffn, self.cfg.eps);
        let mut out = layer.wo.forward(att)?;
        if let Some((post_attn, _)) = &layer.post_norms {
            out = candle_nn::ops::rms_norm(&out, post_attn, eps)?;
        }
        let x = (x + out)?;
        let xn = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, eps)?;
        let gu = join(&layer.gate_up, &xn)?;
        let (gate, up) = (gu.narrow(1, 0, f)?, gu.narrow(1, f, f)?);
        let gate = match self.cfg.family.act {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        let mut out = layer.down.forward(&(gate * up)?)?;
        if let Some((_, post_ffw)) = &layer.post_norms {
            out = candle_nn::ops::rms_norm(&out, post_ffw, eps)?;
        }
        Ok((x + out)?)
    }

    /// The final norm and output layer over the rows of `x`, flattened.
    fn logits(&self, x: &Tensor) -> Result<Vec<f32>, MlError> {
        let xn = candle_nn::ops::rms_norm(x, &self.output_norm, self.cfg.eps)?;
        Ok(self
            .output
            .forward(&xn)?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1()?)
    }
}

/// `x` through each of `parts`, the outputs side by side.
fn join(parts: &[QMatMul], x: &Tensor) -> Result<Tensor, MlError> {
    if let [one] = parts {
        return Ok(one.forward(x)?);
    }
    let outs = parts
        .iter()
        .map(|p| p.forward(x))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Ok(Tensor::cat(&outs, 1)?)
}
