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
}
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
        },
    )
}

/// Writes a tiny `arch` model of hidden size 256 whose matrices (embeddings and output
/// layer included) are all of type `ty`, with random norm weights.
pub fn write_tiny_gguf_typed(path: &Path, arch: Arch, ty: WeightType) -> Result<(), MlError> {
    write(
        path,
        arch,
        Spec {
            hidden: 256,
            ffn: 512,
            ty: ggml_type(ty),
            random_norms: true,
            qk_scale: QK_SCALE,
        },
    )
}

/// Writes a tiny `arch` model whose matrices are Q2_K, a type ragd's engine does not run
/// (for load-error tests).
pub fn write_tiny_gguf_unsupported(path: &Path, arch: Arch) -> Result<(), MlError> {
    write(
        path,
        arch,
        Spec {
            hidden: 256,
            ffn: 512,
            ty: GgmlDType::Q2K,
            random_norms: false,
            qk_scale: 1.0,
        },
    )
}

/// candle's name for a weight type.
pub fn ggml_type(ty: WeightType) -> GgmlDType {
    match ty {
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
    }
}

fn write(path: &Path, arch: Arch, spec: Spec) -> Result<(), MlError> {
    let (hidden, ffn) = (spec.hidden, spec.ffn);
    let vocab = match arch {
        Arch::Qwen2 => byte_level_vocab(),
        Arch::Llama | Arch::Phi3 => sentencepiece_vocab(arch),
    };
    let mut rng = SplitMix(0x5EED ^ arch as u64);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let n_vocab = vocab.tokens.len();
    let kv = KV_HEADS * hidden / HEADS;
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
    if arch != Arch::Qwen2 {
        // Qwen2 ties its output layer to the embeddings; the others have their own.
        add(&mut tensors, "output.weight", (n_vocab, hidden), &mut rng)?;
    }
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        match arch {
            Arch::Phi3 => {
                add_scaled(
                    &mut tensors,
                    &format!("{p}.attn_qkv.weight"),
                    (hidden + 2 * kv, hidden),
                    hidden + kv,
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_up.weight"),
                    (2 * ffn, hidden),
                    &mut rng,
                )?;
            }
            Arch::Llama | Arch::Qwen2 => {
                add_scaled(
                    &mut tensors,
                    &format!("{p}.attn_q.weight"),
                    (hidden, hidden),
                    hidden,
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
            (hidden, hidden),
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

    let a = arch.as_str();
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
        (format!("{a}.rope.dimension_count"), u(hidden / HEADS)),
        (format!("{a}.rope.freq_base"), Value::F32(10_000.0)),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-5),
        ),
    ];
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
