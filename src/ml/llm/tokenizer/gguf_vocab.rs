//! Builds a `tokenizers` tokenizer from the vocabulary a GGUF file carries
//! (`tokenizer.ggml.*`), for models shipped without a `tokenizer.json`.
//!
//! `llama` vocabularies are SentencePiece BPE: spaces are `▁`, a space is prepended, and
//! characters outside the vocabulary fall back to `<0xNN>` byte tokens. SentencePiece
//! merges the adjacent pair whose joined piece scores highest; the same result comes from
//! BPE with one merge per way of splitting a piece into two known pieces, ranked by the
//! joined piece's score. `gpt2` vocabularies are byte-level BPE with explicit merges and a
//! pre-tokenizer regex named by `tokenizer.ggml.pre`.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecSeq;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormSeq};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSeq;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use super::PieceStyle;
use crate::ml::llm::model::{md_bool, md_str};
use crate::ml::MlError;

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const TYPE_NORMAL: i64 = 1;
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

/// Pre-tokenizer of Qwen2 vocabularies.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Pre-tokenizer of Llama 3 vocabularies.
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Pre-tokenizer of Mistral's Tekken vocabularies (Mistral-Nemo): its tokenizer.json's.
const TEKKEN_REGEX: &str = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// GPT-2's pre-tokenizer, the default for other byte-level vocabularies.
const GPT2_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// The tokenizer the GGUF's vocabulary describes, and how its pieces map to bytes.
pub(super) fn build(md: &HashMap<String, Value>) -> Result<(Tokenizer, PieceStyle), MlError> {
    let kind = md_str(md, "tokenizer.ggml.model").ok_or_else(|| {
        MlError::Load(
            "the GGUF has no tokenizer.ggml.model and no tokenizer.json is beside it".into(),
        )
    })?;
    let tokens = string_array(md, "tokenizer.ggml.tokens")?;
    let types = int_array(md, "tokenizer.ggml.token_type").unwrap_or_default();
    let type_of = |id: usize| types.get(id).copied().unwrap_or(TYPE_NORMAL);
    let mut vocab: HashMap<String, u32> = HashMap::with_capacity(tokens.len());
    for (id, t) in tokens.iter().enumerate() {
        // The first of duplicated pieces wins, as in llama.cpp.
        vocab.entry(t.clone()).or_insert(id as u32);
    }
    let (mut tokenizer, style) = match kind {
        "llama" => (sentencepiece(md, &tokens, &type_of, vocab)?, PieceStyle::SentencePiece),
        "gpt2" => (byte_level(md, vocab)?, PieceStyle::ByteLevel),
        other => {
            return Err(MlError::Load(format!(
                "GGUF tokenizer {other:?} is not supported (llama and gpt2 are); put a tokenizer.json beside the model"
            )))
        }
    };
    let mut special = Vec::new();
    let mut user = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        match type_of(id) {
            TYPE_CONTROL => special.push(AddedToken::from(t.clone(), true)),
            TYPE_USER_DEFINED => user.push(AddedToken::from(t.clone(), false).normalized(false)),
            _ => {}
        }
    }
    tokenizer.add_special_tokens(&special);
    tokenizer.add_tokens(&user);
    Ok((tokenizer, style))
}

fn sentencepiece(
    md: &HashMap<String, Value>,
    tokens: &[String],
    type_of: &dyn Fn(usize) -> i64,
    vocab: HashMap<String, u32>,
) -> Result<Tokenizer, MlError> {
    let scores = float_array(md, "tokenizer.ggml.scores").unwrap_or_default();
    let score_of = |id: usize| scores.get(id).copied().unwrap_or(-(id as f32));
    let mut ranked: Vec<(f32, u32, String, String)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        if type_of(id) != TYPE_NORMAL && type_of(id) != TYPE_USER_DEFINED {
            continue;
        }
        for (split, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(split);
            if vocab.contains_key(left) && vocab.contains_key(right) {
                ranked.push((score_of(id), id as u32, left.to_owned(), right.to_owned()));
            }
        }
    }
    // Highest score first; ties by id, then by the left piece's length as SentencePiece does.
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(b.2.len().cmp(&a.2.len()))
    });
    let merges: Vec<(String, String)> = ranked.into_iter().map(|(_, _, l, r)| (l, r)).collect();
    let byte_fallback = vocab.contains_key("<0x00>");
    let unk = tokens
        .iter()
        .enumerate()
        .find(|(id, _)| type_of(*id) == TYPE_UNKNOWN)
        .map(|(_, t)| t.clone());
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab.into_iter().collect::<Vocab>(), merges)
        .byte_fallback(byte_fallback)
        .fuse_unk(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(unk);
    }
    let bpe = builder
        .build()
        .map_err(|e| MlError::Load(format!("GGUF vocabulary: {e}")))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let replace = Replace::new(" ", "▁").map_err(|e| MlError::Load(e.to_string()))?;
    let mut steps = Vec::new();
    if md_bool(md, "tokenizer.ggml.add_space_prefix").unwrap_or(true) {
        steps.push(Prepend::new("▁".into()).into());
    }
    steps.push(replace.into());
    tokenizer.with_normalizer(Some(NormSeq::new(steps)));
    // Decoding is done from the pieces' bytes; the decoder makes a saved tokenizer.json
    // of this vocabulary decode the same way.
    let space = Replace::new("▁", " ").map_err(|e| MlError::Load(e.to_string()))?;
    tokenizer.with_decoder(Some(DecSeq::new(vec![
        space.into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
        Strip::new(' ', 1, 0).into(),
    ])));
    Ok(tokenizer)
}

fn byte_level(
    md: &HashMap<String, Value>,
    vocab: HashMap<String, u32>,
) -> Result<Tokenizer, MlError> {
    let merges = string_array(md, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| match m.split_once(' ') {
            Some((l, r)) => Ok((l.to_owned(), r.to_owned())),
            None => Err(MlError::Load(format!("GGUF merge {m:?} has no space"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let regex = match md_str(md, "tokenizer.ggml.pre").unwrap_or("default") {
        "qwen2" | "deepseek-r1-qwen" => QWEN2_REGEX,
        "llama3" | "llama-bpe" | "llama-v3" | "smaug-bpe" => LLAMA3_REGEX,
        "tekken" => TEKKEN_REGEX,
        "default" | "gpt-2" | "gpt2" | "smollm" | "phi-2" | "jina-es" | "jina-de" => GPT2_REGEX,
        other => {
            return Err(MlError::Load(format!(
                "GGUF pre-tokenizer {other:?} (tokenizer.ggml.pre) is not supported (qwen2, llama-bpe, tekken, smollm, gpt-2 and default are); put a tokenizer.json beside the model"
            )))
        }
    };
    // Llama 3 and tekken take a pre-token that is a whole piece as that piece, merges or not
    // (llama.cpp's `ignore_merges`).
    let bpe = BPE::builder()
        .vocab_and_merges(vocab.into_iter().collect::<Vocab>(), merges)
        .ignore_merges(regex == LLAMA3_REGEX || regex == TEKKEN_REGEX)
        .build()
        .map_err(|e| MlError::Load(format!("GGUF vocabulary: {e}")))?;
    let split = Split::new(
        SplitPattern::Regex(regex.to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| MlError::Load(format!("pre-tokenizer: {e}")))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer.with_pre_tokenizer(Some(PreSeq::new(vec![
        split.into(),
        ByteLevel::new(false, false, false).into(),
    ])));
    tokenizer.with_decoder(Some(ByteLevel::default()));
    Ok(tokenizer)
}

fn array<'a>(md: &'a HashMap<String, Value>, key: &str) -> Result<&'a Vec<Value>, MlError> {
    match md.get(key) {
        Some(Value::Array(v)) => Ok(v),
        _ => Err(MlError::Load(format!("the GGUF has no {key} array"))),
    }
}

fn string_array(md: &HashMap<String, Value>, key: &str) -> Result<Vec<String>, MlError> {
    array(md, key)?
        .iter()
        .map(|v| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(MlError::Load(format!("{key} holds a non-string"))),
        })
        .collect()
}

fn int_array(md: &HashMap<String, Value>, key: &str) -> Option<Vec<i64>> {
    array(md, key)
        .ok()?
        .iter()
        .map(|v| match v {
            Value::I32(x) => Some(i64::from(*x)),
            Value::U32(x) => Some(i64::from(*x)),
            Value::I8(x) => Some(i64::from(*x)),
            Value::U8(x) => Some(i64::from(*x)),
            Value::I64(x) => Some(*x),
            _ => None,
        })
        .collect()
}

fn float_array(md: &HashMap<String, Value>, key: &str) -> Option<Vec<f32>> {
    array(md, key)
        .ok()?
        .iter()
        .map(|v| match v {
            Value::F32(x) => Some(*x),
            Value::F64(x) => Some(*x as f32),
            _ => None,
        })
        .collect()
}
