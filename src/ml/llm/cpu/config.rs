//! A model's shape, read from its GGUF metadata with each family's defaults.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;

use super::super::model::{md_u64, Arch};
use crate::ml::MlError;

/// How rotary position embeddings pair a head's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Neighbours `(2i, 2i + 1)` (ggml's normal mode: Llama GGUF files).
    Interleaved,
    /// Halves `(i, i + d/2)` (ggml's NeoX mode: Qwen2, Phi-3).
    Halves,
}

/// The shape and constants of one transformer.
#[derive(Debug, Clone)]
pub struct Config {
    /// The family.
    pub arch: Arch,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Dimensions per head.
    pub head_dim: usize,
    /// Width of the feed-forward layer.
    pub ffn: usize,
    /// Dimensions of each head that are rotated (the first `rope_dim`).
    pub rope_dim: usize,
    /// Rotary base frequency.
    pub rope_base: f32,
    /// Rotary pairing.
    pub rope_style: RopeStyle,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// Tokens the model attends to.
    pub context: usize,
}

fn md_f32(md: &HashMap<String, Value>, key: &str) -> Option<f32> {
    match md.get(key)? {
        Value::F32(v) => Some(*v),
        Value::F64(v) => Some(*v as f32),
        _ => None,
    }
}

impl Config {
    /// Reads the shape of an `arch` model; a missing required key is a load error.
    pub fn from_metadata(arch: Arch, md: &HashMap<String, Value>) -> Result<Self, MlError> {
        let a = arch.as_str();
        let need = |key: &str| {
            md_u64(md, &format!("{a}.{key}"))
                .map(|v| v as usize)
                .ok_or_else(|| MlError::Load(format!("the GGUF has no {a}.{key}")))
        };
        let hidden = need("embedding_length")?;
        let heads = need("attention.head_count")?;
        if heads == 0 || hidden % heads != 0 {
            return Err(MlError::Load(format!(
                "{heads} heads do not divide the width {hidden}"
            )));
        }
        let kv_heads = md_u64(md, &format!("{a}.attention.head_count_kv"))
            .map(|v| v as usize)
            .unwrap_or(heads);
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(MlError::Load(format!(
                "{kv_heads} key/value heads do not divide {heads} query heads"
            )));
        }
        let head_dim = hidden / heads;
        let rope_dim = md_u64(md, &format!("{a}.rope.dimension_count"))
            .map(|v| v as usize)
            .unwrap_or(head_dim);
        if rope_dim == 0 || rope_dim > head_dim || !rope_dim.is_multiple_of(2) {
            return Err(MlError::Load(format!(
                "rotary dimensions {rope_dim} do not fit heads of {head_dim}"
            )));
        }
        let eps = md_f32(md, &format!("{a}.attention.layer_norm_rms_epsilon")).unwrap_or(1e-5);
        let rope_base = md_f32(md, &format!("{a}.rope.freq_base")).unwrap_or(10_000.0);
        Ok(Self {
            arch,
            hidden,
            layers: need("block_count")?,
            heads,
            kv_heads,
            head_dim,
            ffn: need("feed_forward_length")?,
            rope_dim,
            rope_base,
            rope_style: match arch {
                Arch::Llama => RopeStyle::Interleaved,
                Arch::Qwen2 | Arch::Phi3 => RopeStyle::Halves,
            },
            eps,
            context: md_u64(md, &format!("{a}.context_length"))
                .map(|v| v as usize)
                .unwrap_or(2048),
        })
    }

    /// Rows of the query, key and value projections together.
    pub fn qkv_rows(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}
