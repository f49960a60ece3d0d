//! A BERT sentence embedder (all-MiniLM-L6-v2 by default) computed exactly as
//! sentence-transformers does: WordPiece to at most `max_seq_length` tokens, the
//! transformer, mean pooling over the attention mask, L2 normalisation. On the CPU the
//! transformer is our own packed forward pass (`cpu`); on a GPU it is candle's.

mod candle_bert;
mod cpu;

use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config as BertConfig;
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use super::{Embedder, MlError};

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

/// Counts tokens as the embedder's tokenizer does, special tokens included,
/// without truncation. Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct TokenCounter {
    tokenizer: Arc<Tokenizer>,
}

impl TokenCounter {
    /// Tokens in `text` including `[CLS]` and `[SEP]`.
    pub fn count(&self, text: &str) -> usize {
        self.tokenizer
            .encode(text, true)
            .map(|e| e.len())
            // A tokenizer failure is treated as "too long" so the caller splits further.
            .unwrap_or(usize::MAX)
    }
}

/// Which forward pass runs the transformer.
enum Backend {
    /// Our packed CPU forward pass.
    Cpu(cpu::CpuBert),
    /// candle's `BertModel`, on a GPU (or for a configuration `Cpu` lacks).
    Candle(candle_bert::CandleBert),
}

/// A sentence-transformers BERT model loaded from a folder.
pub struct BertEmbedder {
    backend: Backend,
    tokenizer: Tokenizer,
    counter: TokenCounter,
    pooling: Pooling,
    max_tokens: usize,
    dim: usize,
    batch_size: usize,
    name: String,
}

impl BertEmbedder {
    /// Loads `config.json`, `tokenizer.json`, `model.safetensors` and the
    /// sentence-transformers pooling and length settings from `dir`.
    pub fn load(dir: &Path, device: Device, batch_size: usize) -> Result<Self, MlError> {
        Self::load_with(dir, device, batch_size, false)
    }

    /// As [`Self::load`]; `force_candle` runs candle's forward pass even on the CPU.
    fn load_with(
        dir: &Path,
        device: Device,
        batch_size: usize,
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
        let max_positions = max_position_embeddings(&read("config.json")?);
        let max_tokens = std::fs::read_to_string(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<SentenceBertConfig>(&t).ok())
            .and_then(|c| c.max_seq_length)
            .unwrap_or(256)
            .min(max_positions);

        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| MlError::Load(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| MlError::Load(format!("tokenizer: {e}")))?;
        let counter = TokenCounter {
            tokenizer: Arc::new(tokenizer.clone()),
        };
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| MlError::Load(format!("tokenizer: {e}")))?;

        let weights = dir.join("model.safetensors");
        // SAFETY: the weights file is memory-mapped read-only and not modified while the
        // model lives; this is how candle loads safetensors.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(|e| MlError::Load(format!("{}: {e}", weights.display())))?;
        let backend = if device.is_cpu() && !force_candle && cpu::CpuBert::supports(&config) {
            Backend::Cpu(cpu::CpuBert::load(&vb, &config)?)
        } else {
            if device.is_cpu() && !force_candle {
                tracing::info!(act = ?config.hidden_act, "no fast CPU path for this model; using candle's");
            }
            Backend::Candle(candle_bert::CandleBert::load(vb, &config)?)
        };
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bert".into());
        Ok(Self {
            backend,
            tokenizer,
            counter,
            pooling,
            max_tokens,
            dim: config.hidden_size,
            batch_size: batch_size.max(1),
            name,
        })
    }

    /// One forward pass over texts of similar length.
    fn embed_batch(&self, encodings: &[&tokenizers::Encoding]) -> Result<Vec<Vec<f32>>, MlError> {
        let seqs: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        match &self.backend {
            Backend::Cpu(m) => m.embed(&seqs, self.pooling),
            Backend::Candle(m) => m.embed(&seqs, self.pooling),
        }
    }
}

fn max_position_embeddings(config_json: &str) -> usize {
    serde_json::from_str::<serde_json::Value>(config_json)
        .ok()
        .and_then(|v| v.get("max_position_embeddings")?.as_u64())
        .map(|v| v as usize)
        .unwrap_or(512)
}

impl Embedder for BertEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MlError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.to_vec();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| MlError::Inference(format!("tokenizer: {e}")))?;
        // Sort by length so each forward pass pads as little as possible.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for group in order.chunks(self.batch_size) {
            let batch: Vec<&tokenizers::Encoding> = group.iter().map(|&i| &encodings[i]).collect();
            for (&i, v) in group.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
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
