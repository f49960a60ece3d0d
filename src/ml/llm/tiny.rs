//! Writes tiny random-weight models in the real GGUF format, for tests and benches:
//! 2 layers, hidden size 64, 4 heads (2 KV heads), Q8_0 matrices, a ~330-token vocabulary
//! embedded in the file (SentencePiece-style for Llama and Phi-3, byte-level BPE for
//! Qwen2) and the metadata keys candle's loaders read. Weights come from a fixed-seed
//! generator, so a file is the same every time. The text such a model writes is noise.

use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use super::model::Arch;
use super::tokenizer::byte_level::alphabet;
use super::MlError;

const HIDDEN: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const FFN: usize = 128;
const LAYERS: usize = 2;
const CONTEXT: u32 = 4096;
/// Words whose every prefix becomes a vocabulary piece, so that merges reach them.
const WORDS: [&str; 10] = [
    "the", "hello", "world", "is", "it", "and", "data", "base", "of", "to",
];

/// Writes a tiny `arch` model with its vocabulary to `path`.
pub fn write_tiny_gguf(path: &Path, arch: Arch) -> Result<(), MlError> {
    let vocab = match arch {
        Arch::Qwen2 => byte_level_vocab(),
        Arch::Llama | Arch::Phi3 => sentencepiece_vocab(arch),
    };
    let mut rng = SplitMix(0x5EED ^ arch as u64);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let n_vocab = vocab.tokens.len();
    let kv = KV_HEADS * HIDDEN / HEADS;
    let add = |tensors: &mut Vec<(String, QTensor)>,
               name: &str,
               shape: (usize, usize),
               rng: &mut SplitMix|
     -> Result<(), MlError> {
        tensors.push((name.to_owned(), random(shape, rng)?));
        Ok(())
    };
    add(
        &mut tensors,
        "token_embd.weight",
        (n_vocab, HIDDEN),
        &mut rng,
    )?;
    if arch != Arch::Qwen2 {
        // Qwen2 ties its output layer to the embeddings; the others have their own.
        add(&mut tensors, "output.weight", (n_vocab, HIDDEN), &mut rng)?;
    }
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        match arch {
            Arch::Phi3 => {
                add(
                    &mut tensors,
                    &format!("{p}.attn_qkv.weight"),
                    (HIDDEN + 2 * kv, HIDDEN),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_up.weight"),
                    (2 * FFN, HIDDEN),
                    &mut rng,
                )?;
            }
            Arch::Llama | Arch::Qwen2 => {
                add(
                    &mut tensors,
                    &format!("{p}.attn_q.weight"),
                    (HIDDEN, HIDDEN),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.attn_k.weight"),
                    (kv, HIDDEN),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.attn_v.weight"),
                    (kv, HIDDEN),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_gate.weight"),
                    (FFN, HIDDEN),
                    &mut rng,
                )?;
                add(
                    &mut tensors,
                    &format!("{p}.ffn_up.weight"),
                    (FFN, HIDDEN),
                    &mut rng,
                )?;
            }
        }
        add(
            &mut tensors,
            &format!("{p}.attn_output.weight"),
            (HIDDEN, HIDDEN),
            &mut rng,
        )?;
        add(
            &mut tensors,
            &format!("{p}.ffn_down.weight"),
            (HIDDEN, FFN),
            &mut rng,
        )?;
        tensors.push((format!("{p}.attn_norm.weight"), ones(HIDDEN)?));
        tensors.push((format!("{p}.ffn_norm.weight"), ones(HIDDEN)?));
        if arch == Arch::Qwen2 {
            tensors.push((format!("{p}.attn_q.bias"), zeros(HIDDEN)?));
            tensors.push((format!("{p}.attn_k.bias"), zeros(kv)?));
            tensors.push((format!("{p}.attn_v.bias"), zeros(kv)?));
        }
    }
    tensors.push(("output_norm.weight".to_owned(), ones(HIDDEN)?));

    let a = arch.as_str();
    let u = |v: usize| Value::U32(v as u32);
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(a.into())),
        ("general.name".into(), Value::String(format!("tiny-{a}"))),
        (format!("{a}.context_length"), Value::U32(CONTEXT)),
        (format!("{a}.embedding_length"), u(HIDDEN)),
        (format!("{a}.block_count"), u(LAYERS)),
        (format!("{a}.feed_forward_length"), u(FFN)),
        (format!("{a}.attention.head_count"), u(HEADS)),
        (format!("{a}.attention.head_count_kv"), u(KV_HEADS)),
        (format!("{a}.rope.dimension_count"), u(HIDDEN / HEADS)),
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
                Value::String("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}".into()),
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

/// A Q8_0 matrix of uniform values in [-0.25, 0.25).
fn random(shape: (usize, usize), rng: &mut SplitMix) -> Result<QTensor, MlError> {
    let data: Vec<f32> = (0..shape.0 * shape.1)
        .map(|_| rng.next_f32() * 0.5 - 0.25)
        .collect();
    let t = Tensor::from_vec(data, shape, &Device::Cpu)?;
    Ok(QTensor::quantize(&t, GgmlDType::Q8_0)?)
}

fn ones(n: usize) -> Result<QTensor, MlError> {
    Ok(QTensor::quantize(
        &Tensor::ones(n, candle_core::DType::F32, &Device::Cpu)?,
        GgmlDType::F32,
    )?)
}

fn zeros(n: usize) -> Result<QTensor, MlError> {
    Ok(QTensor::quantize(
        &Tensor::zeros(n, candle_core::DType::F32, &Device::Cpu)?,
        GgmlDType::F32,
    )?)
}
