//! One model, run synchronously: load a GGUF, then generate token by token, sending text
//! to a callback. [`LlmHandle`](super::LlmHandle) runs it on its own thread.

use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};

use super::detok::Utf8Stream;
use super::model::{GgufFile, ModelInfo, Weights};
use super::sampler::Sampler;
use super::stop::StopMatcher;
use super::{FinishReason, GenerateRequest, LlmTokenizer, MlError};

/// A loaded model with its tokenizer.
pub struct LlmEngine {
    weights: Weights,
    tokenizer: Arc<LlmTokenizer>,
    info: ModelInfo,
    device: Device,
}

/// How a generation went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Tokens of the prompt after the template.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish_reason: FinishReason,
}

impl LlmEngine {
    /// Loads the GGUF at `path` onto `device`. Any problem with the file (not a GGUF, an
    /// unsupported family, missing tensors or vocabulary) is an [`MlError::Load`].
    pub fn load(path: &Path, device: &Device) -> Result<Self, MlError> {
        let started = std::time::Instant::now();
        let loaded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<Self, MlError> {
                let file = GgufFile::open(path)?;
                let info = file.info(path);
                let tokenizer = LlmTokenizer::load(path, &file.content.metadata, file.arch)?;
                let weights = file.load_weights(device)?;
                Ok(Self {
                    weights,
                    tokenizer: Arc::new(tokenizer),
                    info,
                    device: device.clone(),
                })
            }))
            .unwrap_or_else(|_| {
                Err(MlError::Load(format!(
                    "{} made the loader panic",
                    path.display()
                )))
            })?;
        tracing::info!(
            model = %loaded.info.name,
            arch = loaded.info.arch.as_str(),
            context = loaded.info.context_length,
            vocab = loaded.tokenizer.vocab_size(),
            template = ?loaded.tokenizer.template(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "LLM loaded"
        );
        Ok(loaded)
    }

    /// Name, family and context window.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The tokenizer (shared, immutable).
    pub fn tokenizer(&self) -> &Arc<LlmTokenizer> {
        &self.tokenizer
    }

    /// Runs `tokens` from position `pos` (0 starts a new sequence) and returns the logits
    /// for the token after the last one. A prompt goes in one call at position 0, then one
    /// token per call.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, MlError> {
        let input = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        let logits = self.weights.forward(&input, pos)?;
        Ok(logits
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()?)
    }

    /// Generates for `request`, calling `on_text` with each new piece of text (complete
    /// UTF-8, stop sequences held back; empty between characters). `on_text` returns
    /// `false` when the caller has gone, which ends the generation as `Cancelled`.
    pub fn generate(
        &mut self,
        request: GenerateRequest,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Completion, MlError> {
        let GenerateRequest {
            prompt,
            params,
            mut filter,
        } = request;
        let tokenizer = Arc::clone(&self.tokenizer);
        let prompt_ids = tokenizer.encode_prompt(&prompt)?;
        let window = self.info.context_length;
        if prompt_ids.is_empty() {
            return Err(MlError::InvalidInput("the prompt is empty".into()));
        }
        if prompt_ids.len() >= window {
            return Err(MlError::InvalidInput(format!(
                "the prompt is {} tokens; the model's context window holds {window} (prompt and answer together)",
                prompt_ids.len()
            )));
        }
        let max_new = params.max_tokens.min(window - prompt_ids.len());
        let done = |completion_tokens, finish_reason| Completion {
            prompt_tokens: prompt_ids.len(),
            completion_tokens,
            finish_reason,
        };
        if max_new == 0 {
            return Ok(done(0, FinishReason::Length));
        }
        let mut sampler = Sampler::new(&params);
        let mut detok = Utf8Stream::new(&tokenizer);
        let mut stops = StopMatcher::new(&params.stop);
        let mut history = prompt_ids.clone();
        let mut generated = String::new();
        let mut mask = filter.as_ref().map(|_| Vec::<bool>::new());
        let mut logits = self.forward(&prompt_ids, 0)?;
        let mut count = 0usize;
        let reason = loop {
            if let (Some(f), Some(mask)) = (filter.as_mut(), mask.as_mut()) {
                let vocab = tokenizer.vocabulary();
                mask.clear();
                mask.extend((0..logits.len()).map(|i| i < vocab.len()));
                f.restrict(&generated, vocab, mask);
            }
            let Some(token) = sampler.sample(logits, &history, mask.as_deref())? else {
                break FinishReason::Stop;
            };
            if !params.ignore_eos && tokenizer.is_eos(token) {
                break FinishReason::Stop;
            }
            count += 1;
            history.push(token);
            let text = detok.push(&tokenizer, token);
            generated.push_str(&text);
            let step = stops.push(&text);
            if !on_text(&step.emit) {
                return Ok(done(count, FinishReason::Cancelled));
            }
            if step.stopped {
                return Ok(done(count, FinishReason::Stop));
            }
            if count >= max_new {
                break FinishReason::Length;
            }
            logits = self.forward(&[token], prompt_ids.len() + count - 1)?;
        };
        // Flush: an unfinished character, then text held back for a stop that never came.
        let tail = detok.finish();
        let mut rest = stops.push(&tail);
        if !rest.stopped {
            rest.emit.push_str(&stops.finish());
        }
        if !rest.emit.is_empty() && !on_text(&rest.emit) {
            return Ok(done(count, FinishReason::Cancelled));
        }
        Ok(done(count, reason))
    }
}
