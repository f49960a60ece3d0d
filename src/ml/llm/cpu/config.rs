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
    /// What the family adds to the Llama block.
    pub family: Family,
}

/// The feed-forward layer's gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// `silu(gate) · up` (Llama, Qwen, Phi).
    #[default]
    Silu,
    /// `gelu_tanh(gate) · up` (Gemma's GeGLU).
    GeluTanh,
}

/// The details that set a family apart from the Llama block (defaults: none of them).
#[derive(Debug, Clone, Default)]
pub struct Family {
    /// RMSNorm of each query and key head before the rotation (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// RMSNorm of the attention and feed-forward outputs before their residual adds
    /// (Gemma's `post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// Factor on the token embeddings (Gemma: `sqrt(hidden)`).
    pub embed_scale: Option<f32>,
    /// The gate activation.
    pub act: Activation,
    /// Attention score scale; `None` is `1/sqrt(head_dim)`.
    pub attn_scale: Option<f32>,
    /// Sliding window: a key `window` or more positions before the query is hidden (as
    /// llama.cpp's standard SWA mask) in the layers of `swa_layers`.
    pub window: Option<usize>,
    /// Which layers use the window (all of them for Llama-family files that set one;
    /// Gemma 3: all but every `sliding_window_pattern`-th, default 6).
    pub swa_layers: Vec<bool>,
    /// Rotary base of the windowed layers (Gemma 3: `rope.freq_base_swa`, else 10000).
    pub rope_base_swa: Option<f32>,
    /// Positions are multiplied by this in the rotations of global layers (linear rope
    /// scaling: `1 / rope.scaling.factor`).
    pub rope_pos_scale: f32,
    /// Factor on the rotations' cos and sin (Phi-3 LongRoPE's `rope.scaling.attn_factor`).
    pub rope_attn_factor: f32,
    /// The window the model was trained with before LongRoPE
    /// (`rope.scaling.original_context_length`): the long factors apply past it.
    pub rope_orig_context: usize,
}

impl Family {
    /// Whether layer `l` uses the sliding window.
    pub fn is_swa(&self, l: usize) -> bool {
        self.window.is_some() && self.swa_layers.get(l).copied().unwrap_or(false)
    }
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
        let explicit = md_u64(md, &format!("{a}.attention.key_length")).is_some();
        if heads == 0 || (!explicit && hidden % heads != 0) {
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
        // An explicit head dimension (Qwen3, Gemma, Mistral-Nemo) need not be hidden/heads.
        let head_dim = md_u64(md, &format!("{a}.attention.key_length"))
            .map(|v| v as usize)
            .unwrap_or(hidden / heads.max(1));
        let v_dim = md_u64(md, &format!("{a}.attention.value_length"))
            .map(|v| v as usize)
            .unwrap_or(head_dim);
        if head_dim == 0 || v_dim != head_dim {
            return Err(MlError::Load(format!(
                "{a}: key heads of {head_dim} and value heads of {v_dim} dimensions are not supported (equal, non-zero ones are)"
            )));
        }
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
        let layers = need("block_count")?;
        let context = md_u64(md, &format!("{a}.context_length"))
            .map(|v| v as usize)
            .unwrap_or(2048);
        let family = family(arch, md, layers, head_dim, hidden / heads, context)?;
        Ok(Self {
            arch,
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            ffn: need("feed_forward_length")?,
            rope_dim,
            rope_base,
            rope_style: match arch {
                Arch::Llama => RopeStyle::Interleaved,
                Arch::Qwen2 | Arch::Qwen3 | Arch::Phi3 | Arch::Gemma3 => RopeStyle::Halves,
            },
            eps,
            context,
            family,
        })
    }

    /// Width of the attention's output (all query heads).
    pub fn q_rows(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Rows of the query, key and value projections together.
    pub fn qkv_rows(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}

/// The family details of an `arch` model.
fn family(
    arch: Arch,
    md: &HashMap<String, Value>,
    layers: usize,
    head_dim: usize,
    legacy_head_dim: usize,
    context: usize,
) -> Result<Family, MlError> {
    let a = arch.as_str();
    let window = md_u64(md, &format!("{a}.attention.sliding_window"))
        .map(|v| v as usize)
        .filter(|&w| w > 0);
    let scaling = md_f32(md, &format!("{a}.rope.scaling.factor")).filter(|&f| f != 0.0);
    let mut f = Family {
        rope_pos_scale: 1.0,
        rope_attn_factor: md_f32(md, &format!("{a}.rope.scaling.attn_factor")).unwrap_or(1.0),
        rope_orig_context: md_u64(md, &format!("{a}.rope.scaling.original_context_length"))
            .map_or(context, |v| v as usize),
        ..Family::default()
    };
    match arch {
        // Mistral's window covers every layer (llama.cpp runs Llama files without one).
        Arch::Llama => {
            f.window = window;
            f.swa_layers = vec![true; layers];
        }
        // llama.cpp runs Phi-3 files without their window (it disables Phi's SWA).
        Arch::Qwen2 | Arch::Phi3 => {}
        Arch::Qwen3 => f.qk_norm = true,
        Arch::Gemma3 => {
            let hidden = md_u64(md, &format!("{a}.embedding_length")).unwrap_or(0) as f32;
            f.qk_norm = true;
            f.post_norms = true;
            f.embed_scale = Some(hidden.sqrt());
            f.act = Activation::GeluTanh;
            // As llama.cpp: 1/sqrt(head_dim), but 1/sqrt(hidden/heads) for the 27B
            // (62 layers), whose query_pre_attn_scalar is hidden/heads.
            let d = if layers == 62 {
                legacy_head_dim
            } else {
                head_dim
            };
            f.attn_scale = Some(1.0 / (d as f32).sqrt());
            // Linear rope scaling (Gemma 3 4B and up) on the global layers only.
            f.rope_pos_scale = scaling.map_or(1.0, |s| 1.0 / s);
            if window.is_some() {
                f.window = window;
                let pattern = swa_pattern(md, &format!("{a}.attention.sliding_window_pattern"))?;
                f.swa_layers = match pattern {
                    Pattern::Every(n) => (0..layers).map(|l| n == 0 || l % n < n - 1).collect(),
                    Pattern::Layers(v) if v.len() == layers => v,
                    Pattern::Layers(v) => {
                        return Err(MlError::Load(format!(
                        "{a}.attention.sliding_window_pattern has {} entries for {layers} layers",
                        v.len()
                    )))
                    }
                };
                f.rope_base_swa =
                    Some(md_f32(md, &format!("{a}.rope.freq_base_swa")).unwrap_or(10_000.0));
            }
        }
    }
    Ok(f)
}

/// `sliding_window_pattern`: a period (every n-th layer global) or one flag per layer.
enum Pattern {
    Every(usize),
    Layers(Vec<bool>),
}

fn swa_pattern(md: &HashMap<String, Value>, key: &str) -> Result<Pattern, MlError> {
    match md.get(key) {
        None => Ok(Pattern::Every(6)),
        Some(Value::Array(v)) => v
            .iter()
            .map(|x| match x {
                Value::Bool(b) => Ok(*b),
                _ => Err(MlError::Load(format!("{key} is not a list of booleans"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Pattern::Layers),
        Some(_) => md_u64(md, key)
            .map(|n| Pattern::Every(n as usize))
            .ok_or_else(|| MlError::Load(format!("{key} is not an integer"))),
    }
}
