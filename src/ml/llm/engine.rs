//! One model, run synchronously: load a GGUF, then generate token by token, sending text
//! to a callback. [`LlmHandle`](super::LlmHandle) runs it on its own thread.
//!
//! On the CPU the model runs on ragd's own engine ([`super::cpu`]) with a prompt cache;
//! with a GPU (`--features cuda`/`metal`), or when asked for as the reference, it runs on
//! candle's quantized models.

use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};

use super::cpu::{CpuModel, CpuOptions, KvCache};
use super::detok::Utf8Stream;
use super::model::{GgufFile, ModelInfo, Weights};
use super::prompt_cache::{PromptCache, Sequence};
use super::sampler::Sampler;
use super::stop::StopMatcher;
use super::{FinishReason, GenerateRequest, LlmTokenizer, MlError};

/// Where and how the model runs.
#[derive(Debug, Clone)]
pub enum Backend {
    /// ragd's CPU engine.
    Cpu {
        /// Threads and kernel tier.
        options: CpuOptions,
        /// Bytes of key/value state the prompt cache keeps.
        prompt_cache_bytes: usize,
    },
    /// candle's quantized models on `Device` (GPUs; the reference implementation).
    Candle(Device),
}

impl Backend {
    /// ragd's engine on the CPU, candle's on a GPU.
    pub fn for_device(device: Device, options: CpuOptions, prompt_cache_bytes: usize) -> Self {
        if device.is_cpu() {
            Backend::Cpu {
                options,
                prompt_cache_bytes,
            }
        } else {
            Backend::Candle(device)
        }
    }

    /// candle's quantized models on the CPU: the reference implementation.
    pub fn reference() -> Self {
        Backend::Candle(Device::Cpu)
    }

    /// ragd's engine with default options and a 256 MB prompt cache.
    pub fn cpu() -> Self {
        Backend::Cpu {
            options: CpuOptions::default(),
            prompt_cache_bytes: 256 << 20,
        }
    }
}

enum Runner {
    Cpu {
        model: Box<CpuModel>,
        cache: PromptCache,
        /// The sequence [`LlmEngine::forward`] extends.
        current: KvCache,
    },
    Candle {
        weights: Weights,
        device: Device,
    },
}

/// A loaded model with its tokenizer.
pub struct LlmEngine {
    runner: Runner,
    tokenizer: Arc<LlmTokenizer>,
    info: ModelInfo,
}

/// How a generation went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Tokens of the prompt after the template.
    pub prompt_tokens: usize,
    /// Prompt tokens whose state came from the prompt cache.
    pub cached_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish_reason: FinishReason,
}

impl LlmEngine {
    /// Loads the GGUF at `path` for `backend`. Any problem with the file (not a GGUF, an
    /// unsupported family or tensor type, missing tensors or vocabulary) is an
    /// [`MlError::Load`].
    pub fn load(path: &Path, backend: Backend) -> Result<Self, MlError> {
        let started = std::time::Instant::now();
        let loaded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<Self, MlError> {
                let mut file = GgufFile::open(path)?;
                let mut info = file.info(path);
                let tokenizer = LlmTokenizer::load(path, &file.content.metadata, file.arch)?;
                info.template_tools = tokenizer.template_tools();
                let runner = match backend {
                    Backend::Cpu {
                        options,
                        prompt_cache_bytes,
                    } => {
                        let model = Box::new(file.load_cpu(options)?);
                        info.context_length = model.config().context;
                        let current = model.new_cache();
                        Runner::Cpu {
                            model,
                            cache: PromptCache::new(prompt_cache_bytes),
                            current,
                        }
                    }
                    Backend::Candle(device) => Runner::Candle {
                        weights: file.load_weights(&device)?,
                        device,
                    },
                };
                Ok(Self {
                    runner,
                    tokenizer: Arc::new(tokenizer),
                    info,
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
            family = %loaded.info.family,
            context = loaded.info.context_length,
            vocab = loaded.tokenizer.vocab_size(),
            template = ?loaded.tokenizer.template(),
            engine = loaded.engine_name(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "LLM loaded"
        );
        Ok(loaded)
    }

    /// `ragd-cpu` (ragd's engine) or `candle`.
    pub fn engine_name(&self) -> &'static str {
        match self.runner {
            Runner::Cpu { .. } => "ragd-cpu",
            Runner::Candle { .. } => "candle",
        }
    }

    /// Name, family and context window.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The tokenizer (shared, immutable).
    pub fn tokenizer(&self) -> &Arc<LlmTokenizer> {
        &self.tokenizer
    }

    /// Bytes of key/value state the prompt cache holds now.
    pub fn prompt_cache_bytes(&self) -> usize {
        match &self.runner {
            Runner::Cpu { cache, .. } => cache.bytes(),
            Runner::Candle { .. } => 0,
        }
    }

    /// Runs `tokens` from position `pos` of the engine's own sequence (0 starts a new
    /// one; earlier positions are kept, later ones forgotten) and returns the logits for
    /// the token after the last one. Benches and tests use it; generation goes through
    /// [`LlmEngine::generate`].
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, MlError> {
        match &mut self.runner {
            Runner::Cpu { model, current, .. } => {
                if pos > current.len() {
                    return Err(MlError::InvalidInput(format!(
                        "position {pos} is past the {} positions run so far",
                        current.len()
                    )));
                }
                current.truncate(pos);
                model.forward(current, tokens, false)
            }
            Runner::Candle { weights, device } => {
                let input = Tensor::new(tokens, device)?.unsqueeze(0)?;
                let logits = weights.forward(&input, pos)?;
                Ok(logits
                    .squeeze(0)?
                    .to_dtype(candle_core::DType::F32)?
                    .to_vec1()?)
            }
        }
    }

    /// Like [`LlmEngine::forward`] with ragd's engine, returning the logits after every
    /// token of `tokens` (`tokens.len()` rows of the vocabulary size): teacher-forced
    /// comparisons in one batched pass.
    pub fn forward_all(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, MlError> {
        match &mut self.runner {
            Runner::Cpu { model, current, .. } => {
                if pos > current.len() {
                    return Err(MlError::InvalidInput(format!(
                        "position {pos} is past the {} positions run so far",
                        current.len()
                    )));
                }
                current.truncate(pos);
                model.forward(current, tokens, true)
            }
            Runner::Candle { .. } => Err(MlError::InvalidInput(
                "candle's models return the last token's logits only".into(),
            )),
        }
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
        let mut run = Run::start(&mut self.runner, &prompt_ids, max_new)?;
        let cached = run.reused;
        let done = |completion_tokens, finish_reason| Completion {
            prompt_tokens: prompt_ids.len(),
            cached_tokens: cached,
            completion_tokens,
            finish_reason,
        };
        if max_new == 0 {
            run.finish(&mut self.runner);
            return Ok(done(0, FinishReason::Length));
        }
        let mut sampler = Sampler::new(&params);
        let mut detok = Utf8Stream::new(&tokenizer);
        let mut stops = StopMatcher::new(&params.stop);
        let mut history = prompt_ids.clone();
        let mut generated = String::new();
        let mut mask = filter.as_ref().map(|_| Vec::<bool>::new());
        let mut logits = run.step(&mut self.runner, &prompt_ids[cached..], cached)?;
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
                run.finish(&mut self.runner);
                return Ok(done(count, FinishReason::Cancelled));
            }
            if let (true, Some(which)) = (step.stopped, stops.hit()) {
                run.finish(&mut self.runner);
                return Ok(done(count, FinishReason::StopSequence(which)));
            }
            if count >= max_new {
                break FinishReason::Length;
            }
            logits = run.step(&mut self.runner, &[token], prompt_ids.len() + count - 1)?;
        };
        run.finish(&mut self.runner);
        // Flush: an unfinished character, then text held back for a stop that never came.
        let tail = detok.finish();
        let mut rest = stops.push(&tail);
        let reason = match (rest.stopped, stops.hit()) {
            (true, Some(which)) => FinishReason::StopSequence(which),
            _ => {
                rest.emit.push_str(&stops.finish());
                reason
            }
        };
        if !rest.emit.is_empty() && !on_text(&rest.emit) {
            return Ok(done(count, FinishReason::Cancelled));
        }
        Ok(done(count, reason))
    }
}

/// One generation's sequence: from the prompt cache (ragd's engine) or candle's own
/// cache, returned to the prompt cache when the generation ends.
struct Run {
    seq: Option<Sequence>,
    reused: usize,
}

impl Run {
    /// Starts a run of `prompt` with room for `answer` more tokens.
    fn start(runner: &mut Runner, prompt: &[u32], answer: usize) -> Result<Self, MlError> {
        match runner {
            Runner::Cpu { model, cache, .. } => {
                let mut hit = cache.take(prompt, || model.new_cache());
                hit.sequence.cache.reserve_exact(prompt.len() + answer);
                tracing::debug!(
                    prompt_tokens = prompt.len(),
                    reused = hit.reused,
                    copied = hit.copied,
                    cached_sequences = cache.len(),
                    cached_mb = cache.bytes() >> 20,
                    "prompt cache"
                );
                Ok(Self {
                    reused: hit.reused,
                    seq: Some(hit.sequence),
                })
            }
            Runner::Candle { .. } => Ok(Self {
                seq: None,
                reused: 0,
            }),
        }
    }

    /// Runs `tokens` (from position `pos`) and returns the next token's logits.
    fn step(
        &mut self,
        runner: &mut Runner,
        tokens: &[u32],
        pos: usize,
    ) -> Result<Vec<f32>, MlError> {
        match (runner, self.seq.as_mut()) {
            (Runner::Cpu { model, .. }, Some(seq)) => {
                debug_assert_eq!(seq.cache.len(), pos);
                let logits = model.forward(&mut seq.cache, tokens, false);
                if logits.is_err() {
                    // A failed step leaves the state unknown: never reuse it.
                    self.seq = None;
                } else {
                    seq.tokens.extend_from_slice(tokens);
                }
                logits
            }
            (Runner::Candle { weights, device }, _) => {
                let input = Tensor::new(tokens, device)?.unsqueeze(0)?;
                let logits = weights.forward(&input, pos)?;
                Ok(logits
                    .squeeze(0)?
                    .to_dtype(candle_core::DType::F32)?
                    .to_vec1()?)
            }
            (Runner::Cpu { .. }, None) => Err(MlError::Inference(
                "the sequence was lost after a failed step".into(),
            )),
        }
    }

    fn finish(mut self, runner: &mut Runner) {
        if let (Runner::Cpu { cache, .. }, Some(seq)) = (runner, self.seq.take()) {
            cache.put(seq);
        }
    }
}
