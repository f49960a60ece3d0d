//! Writes tiny random-weight models in the real GGUF format, for tests and benches:
//! 2 layers, 4 heads (2 KV heads), a ~330-token vocabulary embedded in the file
//! (SentencePiece-style for Llama and Phi-3, byte-level BPE for Qwen2) and the metadata
//! keys the loaders read. [`write_tiny_gguf`] writes hidden size 64 with Q8_0 matrices;
//! [`write_tiny_gguf_typed`] writes hidden size 256 (a K-quant super-block) with every
//! matrix of one chosen type and random norm weights. Weights come from a fixed-seed
//! generator, so a file is the same every time. The text such a model writes is noise.

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::model::Arch;
use super::tokenizer::byte_level::alphabet;
use super::MlError;
use crate::ml::quant::WeightType;

const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const LAYERS: usize = 2;

/// The shape and storage of a tiny model.
#[derive(Debug, Clone, Copy)]
struct Spec {
    hidden: usize,
    ffn: usize,
    ty: GgmlDType,
    random_norms: bool,
    /// Scale of the query and key weights.
    qk_scale: f32,
    /// Family details beyond the defaults.
    variant: TinyVariant,
}

/// Shape details of a tiny model beyond its family's defaults: an explicit head dimension
/// (as Mistral-Nemo's), a sliding window (as Mistral's), Phi-3.5's LongRoPE factors.
/// Qwen3 and Gemma 3 files always have heads of 128 (not hidden/heads); Gemma 3 files a
/// window of [`GEMMA_WINDOW`] with every second layer global.
#[derive(Debug, Clone, Copy, Default)]
pub struct TinyVariant {
    /// `{arch}.attention.key_length` (heads of this many dimensions).
    pub head_dim: Option<usize>,
    /// `{arch}.attention.sliding_window`.
    pub window: Option<u32>,
    /// Phi-3 LongRoPE: `rope_factors_long/short.weight`, an attention factor and an
    /// original window of [`LONGROPE_ORIGINAL`] (below the file's window: the long
    /// factors apply).
    pub longrope: bool,
}

/// The sliding window of tiny Gemma 3 files (shorter than the tests' prompts).
pub const GEMMA_WINDOW: u32 = 8;
/// The original window of tiny LongRoPE files.
pub const LONGROPE_ORIGINAL: u32 = 1024;
/// The head dimension of tiny Qwen3 and Gemma 3 files (as theirs, not hidden/heads).
const EXPLICIT_HEAD_DIM: usize = 128;
const CONTEXT: u32 = 4096;
/// Words whose every prefix becomes a vocabulary piece, so that merges reach them.
const WORDS: [&str; 10] = [
    "the", "hello", "world", "is", "it", "and", "data", "base", "of", "to",
];

/// Writes a tiny `arch` model (hidden size 64, Q8_0) with its vocabulary to `path`.
pub fn write_tiny_gguf(path: &Path, arch: Arch) -> Result<(), MlError> {
    write(
        path,
        arch,
        Spec {
            hidden: 64,
            ffn: 128,
            ty: GgmlDType::Q8_0,
            random_norms: false,
            qk_scale: 1.0,
            variant: TinyVariant::default(),
        },
    )
}

/// Writes a tiny `arch` model of hidden size 256 whose matrices (embeddings and output
/// layer included) are all of type `ty`, with random norm weights. Fails for the types
/// candle cannot write (IQ4_NL, IQ4_XS).
pub fn write_tiny_gguf_typed(path: &Path, arch: Arch, ty: WeightType) -> Result<(), MlError> {
    write_tiny_gguf_variant(path, arch, ty, TinyVariant::default())
}

/// [`write_tiny_gguf_typed`] with the details of `variant`.
pub fn write_tiny_gguf_variant(
    path: &Path,
    arch: Arch,
    ty: WeightType,
    variant: TinyVariant,
) -> Result<(), MlError> {
    let ggml = ggml_type(ty)
        .ok_or_else(|| MlError::Load(format!("candle cannot write {} tensors", ty.name())))?;
    write(
        path,
        arch,
        Spec {
            hidden: 256,
            ffn: 512,
            ty: ggml,
            random_norms: true,
            qk_scale: QK_SCALE,
            variant,
        },
    )
}

/// Writes a tiny `arch` model whose matrices are Q8_K, a type ragd's engine does not run
/// (for load-error tests).
pub fn write_tiny_gguf_unsupported(path: &Path, arch: Arch) -> Result<(), MlError> {
    write(
        path,
        arch,
        Spec {
            hidden: 256,
            ffn: 512,
            ty: GgmlDType::Q8K,
            random_norms: false,
            qk_scale: 1.0,
            variant: TinyVariant::default(),
        },
    )
}

/// candle's name for a weight type; `None` for the types candle 0.9.2 lacks (IQ4_NL,
/// IQ4_XS).
pub fn ggml_type(ty: WeightType) -> Option<GgmlDType> {
    Some(match ty {
        WeightType::F32 => GgmlDType::F32,
        WeightType::F16 => GgmlDType::F16,
        WeightType::BF16 => GgmlDType::BF16,
        WeightType::Q8_0 => GgmlDType::Q8_0,
        WeightType::Q4_0 => GgmlDType::Q4_0,
        WeightType::Q4_1 => GgmlDType::Q4_1,
        WeightType::Q5_0 => GgmlDType::Q5_0,
        WeightType::Q5_1 => GgmlDType::Q5_1,
        WeightType::Q4K => GgmlDType::Q4K,
        WeightType::Q5K => GgmlDType::Q5K,
        WeightType::Q6K => GgmlDType::Q6K,
        WeightType::Q2K => GgmlDType::Q2K,
        WeightType::Q3K => GgmlDType::Q3K,
        WeightType::IQ4_NL | WeightType::IQ4_XS => return None,
    })
}

fn write(path: &Path, arch: Arch, mut spec: Spec) -> Result<(), MlError> {
    if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
        spec.variant.head_dim = spec.variant.head_dim.or(Some(EXPLICIT_HEAD_DIM));
    }
    if arch == Arch::Gemma3 {
        spec.variant.window = spec.variant.window.or(Some(GEMMA_WINDOW));
    }
    let (hidden, ffn) = (spec.hidden, spec.ffn);
    let hd = spec.variant.head_dim.unwrap_or(hidden / HEADS);
    let q = HEADS * hd;
    let vocab = match arch {
        Arch::Qwen2 | Arch::Qwen3 => byte_level_vocab(),
        Arch::Llama | Arch::Phi3 | Arch::Gemma3 => sentencepiece_vocab(arch),
    };
    let mut rng = SplitMix(0x5EED ^ arch as u64);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let n_vocab = vocab.tokens.len();
    let kv = KV_HEADS * hd;
    // `lead` first rows (queries and keys) are scaled by `spec.qk_scale`.
    let add_scaled = |tensors: &mut Vec<(String, QTensor)>,
                      name: &str,
                      shape: (usize, usize),
                      lead: usize,
                      rng: &mut SplitMix|
     -> Result<(), MlError> {
        tensors.push((
            name.to_owned(),
            random(shape, spec.ty, (lead, spec.qk_scale), rng)?,
        ));
        Ok(())
    };
    let add = |tensors: &mut Vec<(String, QTensor)>,
               name: &str,
               shape: (usize, usize),
               rng: &mut SplitMix|
     -> Result<(), MlError> { add_scaled(tensors, name, shape, 0, rng) };
    add(
        &mut tensors,
        "token_embd.weight",
        (n_vocab, hidden),
        &mut rng,
    )?;
    if matches!(arch, Arch::Llama | Arch::Phi3) {
        // Qwen and Gemma tie their output layer to the embeddings; the others have their own.
        add(&mut tensors, "output.weight", (n_vocab, hidden), &mut rng)?;
    }
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        match arch {
            Arch::Phi3 => {
                add_scaled(
                    &mut tensors,
                    &format!("{p}.attn_qkv.weight"),
                    (q + 2 * kv, hidden),
                    q + kv,
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_up.weight"),
                    (2 * ffn, hidden),
                    &mut rng,
                )?;
            }
            Arch::Llama | Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => {
                add_scaled(
                    &mut tensors,
                    &format!("{p}.attn_q.weight"),
                    (q, hidden),
                    q,
                    &mut rng,
                )?;
                add_scaled(
                    &mut tensors,
                    &format!("{p}.attn_k.weight"),
                    (kv, hidden),
                    kv,
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.attn_v.weight"),
                    (kv, hidden),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_gate.weight"),
                    (ffn, hidden),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_up.weight"),
                    (ffn, hidden),
                    &mut rng,
                )?;
            }
        }
        add(
            &mut tensors,
            &format!("{p}.attn_output.weight"),
            (hidden, q),
            &mut rng,
        )?;
        add(
            &mut tensors,
            &format!("{p}.ffn_down.weight"),
            (hidden, ffn),
            &mut rng,
        )?;
        tensors.push((
            format!("{p}.attn_norm.weight"),
            norm(hidden, spec, BLOCK_NORM, &mut rng)?,
        ));
        tensors.push((
            format!("{p}.ffn_norm.weight"),
            norm(hidden, spec, BLOCK_NORM, &mut rng)?,
        ));
        if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
            // Small weights: normalised heads with large ones would make attention sharp.
            for n in ["attn_q_norm", "attn_k_norm"] {
                tensors.push((
                    format!("{p}.{n}.weight"),
                    norm(hd, spec, (0.1, 0.2), &mut rng)?,
                ));
            }
        }
        if arch == Arch::Gemma3 {
            for n in ["post_attention_norm", "post_ffw_norm"] {
                tensors.push((
                    format!("{p}.{n}.weight"),
                    norm(hidden, spec, BLOCK_NORM, &mut rng)?,
                ));
            }
        }
        if arch == Arch::Qwen2 {
            let bias = |n: usize, rng: &mut SplitMix| {
                if spec.random_norms {
                    vector((0..n).map(|_| rng.next_f32() * 0.2 - 0.1).collect())
                } else {
                    vector(vec![0.0; n])
                }
            };
            tensors.push((format!("{p}.attn_q.bias"), bias(hidden, &mut rng)?));
            tensors.push((format!("{p}.attn_k.bias"), bias(kv, &mut rng)?));
            tensors.push((format!("{p}.attn_v.bias"), bias(kv, &mut rng)?));
        }
    }
    tensors.push((
        "output_norm.weight".to_owned(),
        norm(hidden, spec, (0.5, 1.0), &mut rng)?,
    ));
    if spec.variant.longrope {
        // Divisors of the rotary frequencies: ~1 within the original window, up to ~8
        // past it (as Phi-3.5's).
        let pairs = hd / 2;
        let long = (0..pairs)
            .map(|i| 1.0 + 7.0 * i as f32 / pairs as f32)
            .collect();
        let short = (0..pairs).map(|_| 1.0 + 0.2 * rng.next_f32()).collect();
        tensors.push(("rope_factors_long.weight".to_owned(), vector(long)?));
        tensors.push(("rope_factors_short.weight".to_owned(), vector(short)?));
    }

    let a = arch.as_str();
    // Gemma 3's global layers rotate with a larger base than its windowed ones.
    let rope_base = if arch == Arch::Gemma3 { 1e6 } else { 10_000.0 };
    let u = |v: usize| Value::U32(v as u32);
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        ("general.name".into(), Value::String(format!("tiny-{a}"))),
        (format!("{a}.context_length"), Value::U32(CONTEXT)),
        (format!("{a}.embedding_length"), u(hidden)),
        (format!("{a}.block_count"), u(LAYERS)),
        (format!("{a}.feed_forward_length"), u(ffn)),
        (format!("{a}.attention.head_count"), u(HEADS)),
        (format!("{a}.attention.head_count_kv"), u(KV_HEADS)),
        (format!("{a}.rope.dimension_count"), u(hd)),
        (format!("{a}.rope.freq_base"), Value::F32(rope_base)),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-5),
        ),
    ];
    md.extend(variant_metadata(arch, spec.variant));
    md.extend(vocab.metadata);
    md.push((
        "tokenizer.ggml.tokens".into(),
        Value::Array(vocab.tokens.into_iter().map(Value::String).collect()),
    ));
    md.push((
        "tokenizer.ggml.token_type".into(),
        Value::Array(vocab.types.into_iter().map(Value::I32).collect()),
    ));

    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path)
        .map_err(|e| MlError::Load(format!("cannot create {}: {e}", path.display())))?;
    gguf_file::write(&mut file, &md_refs, &t_refs)?;
    Ok(())
}

/// The metadata keys of `variant` and the family's own.
fn variant_metadata(arch: Arch, v: TinyVariant) -> Vec<(String, Value)> {
    let a = arch.as_str();
    let mut md = Vec::new();
    if let Some(hd) = v.head_dim {
        md.push((format!("{a}.attention.key_length"), Value::U32(hd as u32)));
        md.push((format!("{a}.attention.value_length"), Value::U32(hd as u32)));
    }
    if let Some(w) = v.window {
        md.push((format!("{a}.attention.sliding_window"), Value::U32(w)));
    }
    if v.longrope {
        md.push((
            format!("{a}.rope.scaling.original_context_length"),
            Value::U32(LONGROPE_ORIGINAL),
        ));
        md.push((format!("{a}.rope.scaling.attn_factor"), Value::F32(1.19)));
    }
    match arch {
        // candle's Qwen3 runs in f32 only with this key (else f16).
        Arch::Qwen3 => md.push(("general.dtype".into(), Value::U32(0))),
        Arch::Gemma3 => {
            // Layer 0 windowed, layer 1 global (as llama.cpp reads the pattern); the global
            // layer's rotations with another base and linear scaling (as Gemma 3 4B's).
            md.push((
                format!("{a}.attention.sliding_window_pattern"),
                Value::U32(2),
            ));
            md.push((format!("{a}.rope.scaling.factor"), Value::F32(8.0)));
            md.push((format!("{a}.rope.freq_base_swa"), Value::F32(10_000.0)));
        }
        Arch::Llama | Arch::Qwen2 | Arch::Phi3 => {}
    }
    md
}

struct TinyVocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    metadata: Vec<(String, Value)>,
}

fn sentencepiece_vocab(arch: Arch) -> TinyVocab {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    if arch == Arch::Phi3 {
        for s in [
            "<|endoftext|>",
            "<|assistant|>",
            "<|end|>",
            "<|system|>",
            "<|user|>",
        ] {
            tokens.push(s.into());
            types.push(3);
        }
    }
    let mut pieces: Vec<String> = vec!["▁".into()];
    pieces.extend(
        ('a'..='z')
            .chain('0'..='9')
            .chain(".,!?".chars())
            .map(String::from),
    );
    for w in WORDS {
        let word = format!("▁{w}");
        for (end, _) in word.char_indices().skip(2).chain([(word.len(), ' ')]) {
            pieces.push(word[..end].to_owned());
        }
    }
    pieces.extend(["12", "123"].map(String::from));
    let mut scores = vec![0f32; tokens.len()];
    for p in pieces {
        if !tokens.contains(&p) {
            scores.push(p.chars().count() as f32 - tokens.len() as f32 * 1e-4);
            tokens.push(p);
            types.push(1);
        }
    }
    let eos = if arch == Arch::Phi3 { 3 + 256 } else { 2 };
    TinyVocab {
        tokens,
        types,
        metadata: vec![
            ("tokenizer.ggml.model".into(), Value::String("llama".into())),
            (
                "tokenizer.ggml.scores".into(),
                Value::Array(scores.into_iter().map(Value::F32).collect()),
            ),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
            ("tokenizer.ggml.eos_token_id".into(), Value::U32(eos)),
            ("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)),
            ("tokenizer.ggml.add_bos_token".into(), Value::Bool(true)),
        ],
    }
}

fn byte_level_vocab() -> TinyVocab {
    let alphabet = alphabet();
    let mut tokens: Vec<String> = alphabet.iter().map(char::to_string).collect();
    let mut types = vec![1; 256];
    let mut merges = Vec::new();
    let space = alphabet[b' ' as usize];
    for w in WORDS {
        let word: Vec<char> = std::iter::once(space).chain(w.chars()).collect();
        for end in 2..=word.len() {
            let left: String = word[..end - 1].iter().collect();
            let joined: String = word[..end].iter().collect();
            if !tokens.contains(&joined) {
                merges.push(format!("{left} {}", word[end - 1]));
                tokens.push(joined);
                types.push(1);
            }
        }
    }
    let first_special = tokens.len() as u32;
    for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(s.into());
        types.push(3);
    }
    TinyVocab {
        tokens,
        types,
        metadata: vec![
            ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".into(), Value::String("qwen2".into())),
            (
                "tokenizer.ggml.merges".into(),
                Value::Array(merges.into_iter().map(Value::String).collect()),
            ),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(first_special)),
            ("tokenizer.ggml.eos_token_id".into(), Value::U32(first_special + 2)),
            ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
            (
                "tokenizer.chat_template".into(),
                Value::String("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}".into()),
            ),
        ],
    }
}

/// A small deterministic generator (SplitMix64), so tiny models are reproducible.
struct SplitMix(u64);

impl SplitMix {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A matrix of uniform values in [-0.25, 0.25) (scaled by 1/√2 per doubling of the width
/// past 64, so activations stay in range; the first `lead.0` rows further by `lead.1`),
/// stored as `ty`.
fn random(
    shape: (usize, usize),
    ty: GgmlDType,
    lead: (usize, f32),
    rng: &mut SplitMix,
) -> Result<QTensor, MlError> {
    let scale = (64.0 / shape.1 as f32).sqrt().min(1.0);
    let data: Vec<f32> = (0..shape.0 * shape.1)
        .map(|i| {
            let row_scale = if i / shape.1 < lead.0 { lead.1 } else { 1.0 };
            (rng.next_f32() * 0.5 - 0.25) * scale * row_scale
        })
        .collect();
    let t = Tensor::from_vec(data, shape, &Device::Cpu)?;
    Ok(QTensor::quantize(&t, ty)?)
}

/// Block norm weights of typed models: `low + span·u`.
const BLOCK_NORM: (f32, f32) = (0.5, 1.0);

/// Query and key weights of typed models are scaled down so attention scores stay small
/// (a smooth softmax, as in trained models). With full-size ones a random model is
/// chaotic: its attention follows the largest score sharply, so a rounding-level
/// difference between two correct engines that flips one int8 activation grows to a
/// percent of the logits.
const QK_SCALE: f32 = 0.2;

/// Norm weights: ones, or random values in `low..low + span`.
fn norm(
    n: usize,
    spec: Spec,
    (low, span): (f32, f32),
    rng: &mut SplitMix,
) -> Result<QTensor, MlError> {
    if spec.random_norms {
        vector((0..n).map(|_| low + span * rng.next_f32()).collect())
    } else {
        vector(vec![1.0; n])
    }
}

fn vector(v: Vec<f32>) -> Result<QTensor, MlError> {
    let n = v.len();
    Ok(QTensor::quantize(
        &Tensor::from_vec(v, n, &Device::Cpu)?,
        GgmlDType::F32,
    )?)
}
