//! A BERT sentence embedder (all-MiniLM-L6-v2 by default) computed exactly as
//! sentence-transformers does: WordPiece to at most `max_seq_length` tokens, the
//! transformer, mean pooling over the attention mask, L2 normalisation. On the CPU the
//! transformer is our own packed forward pass (`cpu`); on a GPU it is candle's.

pub(crate) mod candle;
pub(crate) mod cpu;
pub mod remote;

use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::{Embedder, MlError};

/// Arithmetic of the CPU forward pass's dense layers (`embed_precision`). Attention,
/// GELU, LayerNorm and pooling are f32 in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// The fastest this CPU offers within the accuracy bounds (cosine >= 0.999 to the
    /// reference): int8 where the CPU has AVX-512 VNNI, else bf16 products where it has
    /// AVX-512 BF16, else i16 products where it has AVX2, else f32.
    #[default]
    Auto,
    /// f32 everywhere: the exact reference path.
    F32,
    /// bf16 products (f32 on CPUs without them).
    Bf16,
    /// int8 products: blocks of 64 inputs on AVX-512 VNNI; on other CPUs Q8_0 weights and
    /// activations (blocks of 32) on the LLM's quantized kernels (AVX2); bf16 or f32
    /// where the CPU has neither.
    Int8,
    /// i16 products, one scale per row and per column (AVX2; f32 on CPUs without it).
    Int16,
    /// f16 products: GPUs only (the CPU engine refuses it at start-up).
    F16,
}

impl Precision {
    /// The dtype of candle's products on a GPU (`auto` is f16, as text-embeddings-inference
    /// runs BERT), or why this precision cannot run there.
    pub(crate) fn gpu_dtype(self) -> Result<DType, MlError> {
        match self {
            Self::Auto | Self::F16 => Ok(DType::F16),
            Self::Bf16 => Ok(DType::BF16),
            Self::F32 => Ok(DType::F32),
            Self::Int8 | Self::Int16 => Err(MlError::Load(format!(
                "embed_precision {} runs on ragd's CPU engine only; on a GPU use auto (f16), \
                 f16, bf16 or f32",
                self.name()
            ))),
        }
    }

    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::F16 => "f16",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "f32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "int8" => Ok(Self::Int8),
            "int16" => Ok(Self::Int16),
            "f16" => Ok(Self::F16),
            other => Err(format!(
                "{other:?}: expected auto, f32, bf16, f16 (GPU), int8 or int16"
            )),
        }
    }
}

/// How token vectors become one sentence vector (`1_Pooling/config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// Counts tokens as the embedder's tokenizer does, special tokens included, and encodes
/// texts into the token ids the model sees. Cheap to clone; usable from any thread, so
/// callers tokenize on their own (blocking) threads, not the model's.
#[derive(Clone)]
pub struct TokenCounter {
    /// Without truncation: counts are exact.
    tokenizer: Arc<Tokenizer>,
    /// Truncating to the model's window, as sentence-transformers does.
    truncating: Arc<Tokenizer>,
    /// `[CLS]` and `[SEP]` where the ids of texts joined by whitespace are the ids of
    /// each text in turn (BERT's WordPiece: normalised character by character, words
    /// split at whitespace), so chunks are tokenized piece by piece and never again.
    joins: Option<(u32, u32)>,
}

impl TokenCounter {
    /// The tokenizer of a sentence-transformers folder (`tokenizer.json`, truncation at
    /// `sentence_bert_config.json`'s `max_seq_length`, else 256, within the model's
    /// positions), and that window in tokens.
    pub fn load(dir: &Path) -> Result<(Self, usize), MlError> {
        let max_positions = std::fs::read_to_string(dir.join("config.json"))
            .map(|t| max_position_embeddings(&t))
            .unwrap_or(512);
        let max_tokens = std::fs::read_to_string(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<SentenceBertConfig>(&t).ok())
            .and_then(|c| c.max_seq_length)
            .unwrap_or(256)
            .min(max_positions);
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| MlError::Load(format!("{}: {e}", dir.join("tokenizer.json").display())))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| MlError::Load(format!("tokenizer: {e}")))?;
        let mut truncating = tokenizer.clone();
        truncating
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| MlError::Load(format!("tokenizer: {e}")))?;
        let counter = TokenCounter {
            joins: TokenCounter::concatenation_ids(&tokenizer),
            tokenizer: Arc::new(tokenizer),
            truncating: Arc::new(truncating),
        };
        Ok((counter, max_tokens))
    }

    /// The text of `ids` without special tokens, as a server that takes text would be
    /// sent it (it tokenizes back to the same ids for WordPiece models).
    /// Ids outside the vocabulary are an `InvalidInput` error (the tokenizer would skip
    /// them silently).
    pub fn decode(&self, ids: &[u32]) -> Result<String, MlError> {
        let size = self.tokenizer.get_vocab_size(true);
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= size) {
            return Err(MlError::InvalidInput(format!(
                "token id {bad} is outside the vocabulary of {size}"
            )));
        }
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| MlError::Inference(format!("tokenizer: {e}")))
    }

    /// Tokens in `text` including `[CLS]` and `[SEP]`.
    pub fn count(&self, text: &str) -> usize {
        // A tokenizer failure is treated as "too long" so the caller splits further.
        self.encode_untruncated(text)
            .map_or(usize::MAX, |ids| ids.len())
    }

    /// The token ids the model embeds for `text`: special tokens included, truncated to
    /// the model's window.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, MlError> {
        self.truncating
            .encode_fast(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| MlError::Inference(format!("tokenizer: {e}")))
    }

    /// The ids of `text` with special tokens and without truncation; `None` if the
    /// tokenizer fails.
    pub fn encode_untruncated(&self, text: &str) -> Option<Vec<u32>> {
        ids_of(&self.tokenizer, text, true)
    }

    /// The ids of `text` without special tokens; `None` if the tokenizer fails.
    pub fn inner_ids(&self, text: &str) -> Option<Vec<u32>> {
        ids_of(&self.tokenizer, text, false)
    }

    /// Whether texts joined by whitespace have the ids of each text in turn (so the
    /// inner ids of the parts make the whole: see [`wrap`](Self::wrap)).
    pub fn joins_by_concatenation(&self) -> bool {
        self.joins.is_some()
    }

    /// The ids the model embeds for the whitespace-joined texts whose
    /// [`inner_ids`](Self::inner_ids) are `parts`, when texts join by concatenation and
    /// the result fits the window; else `None` (the caller encodes the text itself).
    pub fn wrap(&self, parts: &[&[u32]], window: usize) -> Option<Vec<u32>> {
        let (cls, sep) = self.joins?;
        let len = parts.iter().map(|p| p.len()).sum::<usize>() + 2;
        if len > window {
            return None;
        }
        let mut ids = Vec::with_capacity(len);
        ids.push(cls);
        for p in parts {
            ids.extend_from_slice(p);
        }
        ids.push(sep);
        Some(ids)
    }

    /// `[CLS]` and `[SEP]` if the tokenizer is BERT's WordPiece and a probe confirms
    /// that joined texts tokenize as their parts in turn.
    fn concatenation_ids(tokenizer: &Tokenizer) -> Option<(u32, u32)> {
        use tokenizers::{ModelWrapper, NormalizerWrapper, PreTokenizerWrapper};
        let bert = matches!(tokenizer.get_model(), ModelWrapper::WordPiece(_))
            && matches!(
                tokenizer.get_pre_tokenizer(),
                Some(PreTokenizerWrapper::BertPreTokenizer(_))
            )
            && matches!(
                tokenizer.get_normalizer(),
                None | Some(NormalizerWrapper::BertNormalizer(_))
            );
        if !bert {
            return None;
        }
        let ids = |t: &str, special| ids_of(tokenizer, t, special);
        let [cls, sep] = ids("", true)?[..] else {
            return None;
        };
        let parts = [
            "Café au lait, naïve",
            "(x=1)! 東京 don't",
            "ÅNGSTRÖM\tunaffable",
        ];
        let mut joined = vec![cls];
        for p in parts {
            joined.extend(ids(p, false)?);
        }
        joined.push(sep);
        (ids(&parts.join("\n\n"), true)? == joined).then_some((cls, sep))
    }

    /// [`encode`](Self::encode) for many texts at once (in parallel when it pays).
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, MlError> {
        let encodings = self
            .truncating
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| MlError::Inference(format!("tokenizer: {e}")))?;
        Ok(encodings.iter().map(|e| e.get_ids().to_vec()).collect())
    }
}

/// The ids of `text` (with or without special tokens); `None` if the tokenizer fails.
fn ids_of(tokenizer: &Tokenizer, text: &str, special: bool) -> Option<Vec<u32>> {
    let e = tokenizer.encode_fast(text, special).ok()?;
    Some(e.get_ids().to_vec())
}

/// Which forward pass runs the transformer.
enum Backend {
    /// Our packed CPU forward pass.
    Cpu(cpu::CpuBert),
    /// The encoder on candle's device: a GPU (or the CPU for a configuration `Cpu` lacks).
    Candle(candle::CandleBert),
}

/// A sentence-transformers BERT model loaded from a folder.
pub struct BertEmbedder {
    backend: Backend,
    counter: TokenCounter,
    pooling: Pooling,
    max_tokens: usize,
    dim: usize,
    batch_size: usize,
    name: String,
}

impl BertEmbedder {
    /// Loads `config.json`, `tokenizer.json`, `model.safetensors` and the
    /// sentence-transformers pooling and length settings from `dir`, with the fastest
    /// arithmetic this CPU offers.
    pub fn load(dir: &Path, device: Device, batch_size: usize) -> Result<Self, MlError> {
        Self::load_with(dir, device, batch_size, Precision::Auto)
    }

    /// As [`Self::load`], with the dense layers' arithmetic chosen by `precision`.
    pub fn load_with(
        dir: &Path,
        device: Device,
        batch_size: usize,
        precision: Precision,
    ) -> Result<Self, MlError> {
        Self::load_backend(dir, device, batch_size, precision, false)
    }

    /// The arithmetic of the forward pass: ragd's CPU pass `f32`, `bf16`, `int8`,
    /// `q8_0`, `int16`; candle's `candle-f16`, `candle-bf16`, `candle-f32`.
    pub fn arithmetic(&self) -> &'static str {
        match &self.backend {
            Backend::Cpu(m) => m.arithmetic().name(),
            Backend::Candle(m) => match m.dtype_name() {
                "f16" => "candle-f16",
                "bf16" => "candle-bf16",
                _ => "candle-f32",
            },
        }
    }

    /// As [`Self::load_with`]; `force_candle` runs candle's forward pass even on the CPU.
    fn load_backend(
        dir: &Path,
        device: Device,
        batch_size: usize,
        precision: Precision,
        force_candle: bool,
    ) -> Result<Self, MlError> {
        let read = |name: &str| -> Result<String, MlError> {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| MlError::Load(format!("{}: {e}", dir.join(name).display())))
        };
        let config: BertConfig = serde_json::from_str(&read("config.json")?)
            .map_err(|e| MlError::Load(format!("config.json: {e}")))?;
        let pooling = match std::fs::read_to_string(dir.join("1_Pooling/config.json")) {
            Ok(text) => {
                let p: PoolingConfig = serde_json::from_str(&text)
                    .map_err(|e| MlError::Load(format!("1_Pooling/config.json: {e}")))?;
                match (p.pooling_mode_mean_tokens, p.pooling_mode_cls_token) {
                    (true, _) => Pooling::Mean,
                    (false, true) => Pooling::Cls,
                    _ => return Err(MlError::Load("unsupported pooling mode".into())),
                }
            }
            Err(_) => Pooling::Mean,
        };
        let (counter, max_tokens) = TokenCounter::load(dir)?;

        let weights = dir.join("model.safetensors");
        let on_cpu = device.is_cpu() && !force_candle && cpu::CpuBert::supports(&config);
        // ragd's CPU pass converts from f32; candle's products run in the precision's
        // dtype on a GPU, in f32 on the CPU (the reference), unless asked for otherwise.
        let dtype = if on_cpu {
            if precision == Precision::F16 {
                return Err(MlError::Load(
                    "embed_precision f16 runs on a GPU only; on the CPU use auto, f32, bf16, \
                     int8 or int16"
                        .into(),
                ));
            }
            DType::F32
        } else if device.is_cpu() && precision == Precision::Auto {
            DType::F32
        } else {
            candle_dtype(&device, precision)?
        };
        // SAFETY: the weights file is memory-mapped read-only and not modified while the
        // model lives; this is how candle loads safetensors.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, &device) }
            .map_err(|e| MlError::Load(format!("{}: {e}", weights.display())))?;
        let backend = if on_cpu {
            Backend::Cpu(cpu::CpuBert::load(
                &vb,
                &config,
                cpu::Arithmetic::pick(precision),
            )?)
        } else {
            if device.is_cpu() && !force_candle {
                tracing::info!(act = ?config.hidden_act, "no fast CPU path for this model; using candle's");
            }
            Backend::Candle(candle::CandleBert::load(vb, &config)?)
        };
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bert".into());
        Ok(Self {
            backend,
            counter,
            pooling,
            max_tokens,
            dim: config.hidden_size,
            batch_size: batch_size.max(1),
            name,
        })
    }

    /// One forward pass over sequences of similar length; `pause` runs between layers.
    fn embed_batch(
        &self,
        seqs: &[&[u32]],
        pause: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>, MlError> {
        match &self.backend {
            Backend::Cpu(m) => m.embed(seqs, self.pooling, pause),
            Backend::Candle(m) => m.embed(seqs, self.pooling),
        }
    }
}

/// The dtype of candle's products for `precision` on `device`: what
/// [`Precision::gpu_dtype`] says, except bf16 on the CPU device, which candle cannot
/// multiply (refused rather than failing at the first request).
pub(crate) fn candle_dtype(device: &Device, precision: Precision) -> Result<DType, MlError> {
    let dtype = precision.gpu_dtype()?;
    if device.is_cpu() && dtype == DType::BF16 {
        return Err(MlError::Load(
            "embed_precision bf16 is not available for this model on the CPU (candle's CPU \
             pass has no bf16 products); use auto, f32 or f16"
                .into(),
        ));
    }
    Ok(dtype)
}

/// Padded tokens (rows x longest row) one padded pass may hold.
const PADDED_TOKENS: usize = 16_384;

/// `order` (sorted by length) cut into passes of at most `max_rows` rows whose padded
/// size (rows x the longest) stays within `budget` tokens; a row longer than the budget
/// goes alone.
pub(crate) fn padded_groups(
    order: &[usize],
    len: impl Fn(usize) -> usize,
    max_rows: usize,
    budget: usize,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut longest = 0;
    for &i in order {
        let l = len(i).max(1);
        let wider = longest.max(l);
        if !cur.is_empty() && (cur.len() >= max_rows.max(1) || (cur.len() + 1) * wider > budget) {
            groups.push(std::mem::take(&mut cur));
            longest = 0;
        }
        longest = longest.max(l);
        cur.push(i);
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    groups
}

fn max_position_embeddings(config_json: &str) -> usize {
    serde_json::from_str::<serde_json::Value>(config_json)
        .ok()
        .and_then(|v| v.get("max_position_embeddings")?.as_u64())
        .map(|v| v as usize)
        .unwrap_or(512)
}

impl Embedder for BertEmbedder {
    fn embed_tokens(
        &self,
        seqs: &[&[u32]],
        pause: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>, MlError> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        // Passes of at most `batch_size` sequences. The CPU pass packs sequences without
        // padding, so order does not matter; padded passes are sorted by length and cut
        // by a budget of padded tokens, so each pads as little as possible and a batch of
        // long texts does not take the memory of `batch_size` windows.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        let groups = if let Backend::Candle(_) = self.backend {
            order.sort_by_key(|&i| seqs[i].len());
            padded_groups(&order, |i| seqs[i].len(), self.batch_size, PADDED_TOKENS)
        } else {
            order
                .chunks(self.batch_size)
                .map(<[usize]>::to_vec)
                .collect()
        };
        let mut out = vec![Vec::new(); seqs.len()];
        for group in &groups {
            let batch: Vec<&[u32]> = group.iter().map(|&i| seqs[i]).collect();
            for (&i, v) in group.iter().zip(self.embed_batch(&batch, pause)?) {
                out[i] = v;
            }
            pause();
        }
        Ok(out)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    fn token_counter(&self) -> TokenCounter {
        self.counter.clone()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests;
