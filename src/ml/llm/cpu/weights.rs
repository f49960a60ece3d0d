//! The model's tensors, read from the GGUF and repacked once for the kernels. Projections
//! that read the same input are fused: query, key and value (and gate and up) become one
//! matrix when they share a type, so one pass over the input feeds all of them; when
//! their types differ (llama.cpp's Q4_K_M mixes Q4_K and Q6_K) they stay separate but
//! still run in one parallel round.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::gguf_file::Content;

use super::super::model::Arch;
use super::config::Config;
use crate::ml::quant::{formats, gguf, PackedMatrix, WeightType};
use crate::ml::MlError;

/// Matrices whose outputs sit side by side: `parts[i]` writes columns
/// `offsets[i]..offsets[i] + parts[i].rows()` of the fused output.
pub struct Fused {
    /// The matrices.
    pub parts: Vec<PackedMatrix>,
    /// Where each part's outputs start.
    pub offsets: Vec<usize>,
    /// Output columns in all.
    pub rows: usize,
}

impl Fused {
    fn new(parts: Vec<PackedMatrix>) -> Self {
        let mut offsets = Vec::with_capacity(parts.len());
        let mut rows = 0;
        for p in &parts {
            offsets.push(rows);
            rows += p.rows();
        }
        Self {
            parts,
            offsets,
            rows,
        }
    }

    /// A single matrix.
    pub fn one(m: PackedMatrix) -> Self {
        Self::new(vec![m])
    }
}

/// One transformer block.
pub struct Layer {
    /// RMSNorm weights before attention.
    pub attn_norm: Vec<f32>,
    /// Query, key and value projections, in that order.
    pub qkv: Fused,
    /// Their biases (Qwen2), laid out like `qkv`'s output.
    pub qkv_bias: Option<Vec<f32>>,
    /// Attention output projection.
    pub wo: Fused,
    /// RMSNorm weights before the feed-forward layer.
    pub ffn_norm: Vec<f32>,
    /// Gate and up projections, in that order.
    pub gate_up: Fused,
    /// Down projection.
    pub down: Fused,
    /// Per-head RMSNorm weights of queries and keys (Qwen3, Gemma 3).
    pub qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    /// RMSNorm weights of the attention and feed-forward outputs (Gemma).
    pub post_norms: Option<(Vec<f32>, Vec<f32>)>,
}

/// Every tensor of the model.
pub struct Weights {
    /// Token embeddings (also the output layer when the model ties them).
    pub embed: PackedMatrix,
    /// The output layer when it is its own tensor.
    pub output: Option<Fused>,
    /// Final RMSNorm weights.
    pub output_norm: Vec<f32>,
    /// The blocks.
    pub layers: Vec<Layer>,
    /// Llama 3 rotary frequency factors (`rope_freqs.weight`), when the file has them.
    pub rope_freqs: Option<Vec<f32>>,
    /// Phi-3 LongRoPE factors past and within the original window
    /// (`rope_factors_long.weight`, `rope_factors_short.weight`), when the file has them.
    pub rope_long_short: Option<(Vec<f32>, Vec<f32>)>,
}

impl Weights {
    /// Bytes of weights in memory.
    pub fn bytes(&self) -> usize {
        let f = |f: &Fused| f.parts.iter().map(PackedMatrix::bytes).sum::<usize>();
        self.embed.bytes()
            + self.output.as_ref().map_or(0, f)
            + self
                .layers
                .iter()
                .map(|l| f(&l.qkv) + f(&l.wo) + f(&l.gate_up) + f(&l.down))
                .sum::<usize>()
    }

    /// Tensor types and how many tensors of each, for the load log.
    pub fn types(&self) -> Vec<(WeightType, usize)> {
        let mut counts: HashMap<WeightType, usize> = HashMap::new();
        let mut add = |f: &Fused| {
            for p in &f.parts {
                *counts.entry(p.ty()).or_default() += 1;
            }
        };
        for l in &self.layers {
            add(&l.qkv);
            add(&l.wo);
            add(&l.gate_up);
            add(&l.down);
        }
        if let Some(o) = &self.output {
            add(o);
        }
        *counts.entry(self.embed.ty()).or_default() += 1;
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by_key(|(t, _)| t.name());
        v
    }
}

/// Reads tensors of one open GGUF.
pub struct Reader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
}

/// A tensor's raw data.
struct Raw {
    ty: WeightType,
    rows: usize,
    cols: usize,
    bytes: Vec<u8>,
}

impl<'a, R: Read + Seek> Reader<'a, R> {
    /// A reader over `content`'s tensors in `reader`.
    pub fn new(content: &'a Content, reader: &'a mut R) -> Self {
        Self { content, reader }
    }

    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn raw(&mut self, name: &str) -> Result<Raw, MlError> {
        let info = self
            .content
            .tensor_infos
            .get(name)
            .ok_or_else(|| MlError::Load(format!("the GGUF has no tensor {name}")))?;
        let ty = gguf::tensor_type(self.content, name, info.ggml_dtype).ok_or_else(|| {
            MlError::Load(format!(
                "tensor {name} has type {}, which ragd cannot run (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS are supported)",
                gguf::type_name(self.content, name, info.ggml_dtype)
            ))
        })?;
        let dims = info.shape.dims();
        let (rows, cols) = match *dims {
            [n] => (1, n),
            [r, c] => (r, c),
            _ => {
                return Err(MlError::Load(format!(
                    "tensor {name} has shape {dims:?}; ragd reads vectors and matrices"
                )))
            }
        };
        if cols % ty.block_size() != 0 {
            return Err(MlError::Load(format!(
                "tensor {name} ({}) has rows of {cols} values, not a multiple of {}",
                ty.name(),
                ty.block_size()
            )));
        }
        let len = rows * formats::row_bytes(ty, cols);
        let mut bytes = vec![0u8; len];
        let at = self.content.tensor_data_offset + info.offset;
        self.reader
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.reader.read_exact(&mut bytes))
            .map_err(|e| MlError::Load(format!("cannot read the weights of tensor {name}: {e}")))?;
        Ok(Raw {
            ty,
            rows,
            cols,
            bytes,
        })
    }

    /// A vector of floats (norms, biases).
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, MlError> {
        let raw = self.raw(name)?;
        if raw.rows * raw.cols != len {
            return Err(MlError::Load(format!(
                "tensor {name} has {} values, expected {len}",
                raw.rows * raw.cols
            )));
        }
        match raw.ty {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
                Ok(formats::row_to_f32(raw.ty, &raw.bytes))
            }
            other => {
                let row = formats::decode_row(other, &raw.bytes, len);
                Ok(formats::dequantize(other, &row))
            }
        }
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<PackedMatrix, MlError> {
        let raw = self.raw(name)?;
        pack(name, raw, rows, cols)
    }

    /// Matrices that read the same input, fused into one where their types agree.
    fn fused(&mut self, names: &[&str], rows: &[usize], cols: usize) -> Result<Fused, MlError> {
        let mut raws = Vec::with_capacity(names.len());
        for (name, &r) in names.iter().zip(rows) {
            let raw = self.raw(name)?;
            check_shape(name, &raw, r, cols)?;
            raws.push(raw);
        }
        if raws.iter().all(|r| r.ty == raws[0].ty) && raws.len() > 1 {
            let ty = raws[0].ty;
            let total: usize = rows.iter().sum();
            let bytes: Vec<u8> = raws.into_iter().flat_map(|r| r.bytes).collect();
            let raw = Raw {
                ty,
                rows: total,
                cols,
                bytes,
            };
            return Ok(Fused::one(pack(&names.join("+"), raw, total, cols)?));
        }
        let parts = names
            .iter()
            .zip(raws)
            .zip(rows)
            .map(|((name, raw), &r)| pack(name, raw, r, cols))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fused::new(parts))
    }

    /// Reads every tensor of a `cfg`-shaped model.
    pub fn weights(&mut self, cfg: &Config, vocab: usize) -> Result<Weights, MlError> {
        let (h, kv, f) = (cfg.hidden, cfg.kv_heads * cfg.head_dim, cfg.ffn);
        let embed = self.matrix("token_embd.weight", vocab, h)?;
        let output = if self.has("output.weight") {
            Some(Fused::one(self.matrix("output.weight", vocab, h)?))
        } else {
            None
        };
        let output_norm = self.vector("output_norm.weight", h)?;
        let rope_freqs = if self.has("rope_freqs.weight") {
            Some(self.vector("rope_freqs.weight", cfg.rope_dim / 2)?)
        } else {
            None
        };
        let rope_long_short = match (
            self.has("rope_factors_long.weight"),
            self.has("rope_factors_short.weight"),
        ) {
            (false, false) => None,
            (true, true) => Some((
                self.vector("rope_factors_long.weight", cfg.rope_dim / 2)?,
                self.vector("rope_factors_short.weight", cfg.rope_dim / 2)?,
            )),
            _ => {
                return Err(MlError::Load(
                    "the GGUF has one of rope_factors_long.weight and rope_factors_short.weight but not the other".into(),
                ))
            }
        };
        let q = cfg.q_rows();
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = |s: &str| format!("blk.{l}.{s}");
            // Phi-3 files fuse the projections (`attn_qkv`); some Phi-4 files do not.
            let qkv = if cfg.arch == Arch::Phi3 && self.has(&p("attn_qkv.weight")) {
                Fused::one(self.matrix(&p("attn_qkv.weight"), cfg.qkv_rows(), h)?)
            } else {
                let names = [p("attn_q.weight"), p("attn_k.weight"), p("attn_v.weight")];
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                self.fused(&names, &[q, kv, kv], h)?
            };
            let qk_norm = if cfg.family.qk_norm {
                Some((
                    self.vector(&p("attn_q_norm.weight"), cfg.head_dim)?,
                    self.vector(&p("attn_k_norm.weight"), cfg.head_dim)?,
                ))
            } else {
                None
            };
            let post_norms = if cfg.family.post_norms {
                Some((
                    self.vector(&p("post_attention_norm.weight"), h)?,
                    self.vector(&p("post_ffw_norm.weight"), h)?,
                ))
            } else {
                None
            };
            let qkv_bias = if cfg.arch == Arch::Qwen2 {
                let mut b = self.vector(&p("attn_q.bias"), q)?;
                b.extend(self.vector(&p("attn_k.bias"), kv)?);
                b.extend(self.vector(&p("attn_v.bias"), kv)?);
                Some(b)
            } else {
                None
            };
            let gate_up = if cfg.arch == Arch::Phi3 {
                Fused::one(self.matrix(&p("ffn_up.weight"), 2 * f, h)?)
            } else {
                let names = [p("ffn_gate.weight"), p("ffn_up.weight")];
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                self.fused(&names, &[f, f], h)?
            };
            layers.push(Layer {
                attn_norm: self.vector(&p("attn_norm.weight"), h)?,
                qkv,
                qkv_bias,
                wo: Fused::one(self.matrix(&p("attn_output.weight"), h, q)?),
                ffn_norm: self.vector(&p("ffn_norm.weight"), h)?,
                gate_up,
                down: Fused::one(self.matrix(&p("ffn_down.weight"), h, f)?),
                qk_norm,
                post_norms,
            });
        }
        Ok(Weights {
            embed,
            output,
            output_norm,
            layers,
            rope_freqs,
            rope_long_short,
        })
    }
}

fn check_shape(name: &str, raw: &Raw, rows: usize, cols: usize) -> Result<(), MlError> {
    if raw.rows != rows || raw.cols != cols {
        return Err(MlError::Load(format!(
            "tensor {name} is {}x{}, expected {rows}x{cols}",
            raw.rows, raw.cols
        )));
    }
    Ok(())
}

fn pack(name: &str, raw: Raw, rows: usize, cols: usize) -> Result<PackedMatrix, MlError> {
    check_shape(name, &raw, rows, cols)?;
    PackedMatrix::from_gguf(raw.ty, rows, cols, &raw.bytes)
        .map_err(|e| MlError::Load(format!("tensor {name}: {e}")))
}
