//! One model, run synchronously: load a GGUF, then generate token by token, sending text
//! to a callback. [`LlmHandle`](super::LlmHandle) runs it on its own thread.
//!
//! On the CPU the model runs on ragd's own engine ([`super::cpu`]); on a GPU
//! (`--features cuda`/`metal`) on ragd's candle engine ([`super::candle`]). Both keep a
//! prompt cache and are driven by the batched scheduler. candle-transformers' quantized
//! models remain as the reference tests compare with.

use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};

use super::candle::CandleModel;
use super::cpu::{CpuModel, CpuOptions, KvType};
use super::detok::Utf8Stream;
use super::kv::Kv;
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
    /// ragd's engine over candle's tensors on `device` (a GPU; the CPU device in tests).
    Candle {
        device: Device,
        /// How keys and values are kept.
        kv: KvType,
        /// Bytes of key/value state the prompt cache keeps.
        prompt_cache_bytes: usize,
    },
    /// candle-transformers' quantized models on the CPU: the reference of tests.
    Reference,
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
            Backend::Candle {
                device,
                kv: options.kv,
                prompt_cache_bytes,
            }
        }
    }

    /// candle-transformers' quantized models on the CPU: the reference implementation.
    pub fn reference() -> Self {
        Backend::Reference
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
        current: Kv,
    },
    Candle {
        model: Box<CandleModel>,
        cache: PromptCache,
        current: Kv,
    },
    Reference {
        weights: Weights,
        device: Device,
    },
}

/// Each of `kvs` as one engine's state (`pick`), or an error if one is another's.
fn states<'a, T>(
    kvs: Vec<&'a mut Kv>,
    pick: fn(&'a mut Kv) -> Option<&'a mut T>,
) -> Result<Vec<&'a mut T>, MlError> {
    kvs.into_iter()
        .map(|k| {
            pick(k).ok_or_else(|| MlError::Inference("a sequence of another engine was run".into()))
        })
        .collect()
}

impl Runner {
    /// An empty sequence of this engine (none for the reference).
    fn new_kv(&self) -> Option<Kv> {
        match self {
            Runner::Cpu { model, .. } => Some(Kv::Cpu(model.new_cache())),
            Runner::Candle { model, .. } => Some(Kv::Candle(model.new_cache())),
            Runner::Reference { .. } => None,
        }
    }

    /// Runs `tokens` after `kv`'s positions; the last token's logits, or all with `all`.
    fn run(&mut self, kv: &mut Kv, tokens: &[u32], all: bool) -> Result<Vec<f32>, MlError> {
        match (self, kv) {
            (Runner::Cpu { model, .. }, Kv::Cpu(c)) => model.forward(c, tokens, all),
            (Runner::Candle { model, .. }, Kv::Candle(c)) => model.forward(c, tokens, all),
            _ => Err(MlError::Inference(
                "a sequence of another engine was run".into(),
            )),
        }
    }

    /// One decode step over several sequences; their logits, one row each.
    fn run_decode(&mut self, kvs: Vec<&mut Kv>, tokens: &[u32]) -> Result<Vec<f32>, MlError> {
        match self {
            Runner::Cpu { model, .. } => {
                model.forward_decode(&mut states(kvs, Kv::cpu_mut)?, tokens)
            }
            Runner::Candle { model, .. } => {
                model.forward_decode(&mut states(kvs, Kv::candle_mut)?, tokens)
            }
            Runner::Reference { .. } => {
                Err(MlError::Inference("batching needs ragd's engines".into()))
            }
        }
    }

    /// Rows of the logits.
    fn vocab(&self) -> usize {
        match self {
            Runner::Cpu { model, .. } => model.vocab(),
            Runner::Candle { model, .. } => model.vocab(),
            Runner::Reference { .. } => 0,
        }
    }

    /// The prompt cache (none for the reference).
    fn prompt_cache(&mut self) -> Option<&mut PromptCache> {
        match self {
            Runner::Cpu { cache, .. } | Runner::Candle { cache, .. } => Some(cache),
            Runner::Reference { .. } => None,
        }
    }
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
                        let current = Kv::Cpu(model.new_cache());
                        Runner::Cpu {
                            model,
                            cache: PromptCache::new(prompt_cache_bytes),
                            current,
                        }
                    }
                    Backend::Candle {
                        device,
                        kv,
                        prompt_cache_bytes,
                    } => {
                        let model = Box::new(file.load_candle(&device, kv)?);
                        info.context_length = model.config().context;
                        let current = Kv::Candle(model.new_cache());
                        Runner::Candle {
                            model,
                            cache: PromptCache::new(prompt_cache_bytes),
                            current,
                        }
                    }
                    Backend::Reference => Runner::Reference {
                        weights: file.load_weights(&Device::Cpu)?,
                        device: Device::Cpu,
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

    /// `ragd-cpu` (ragd's CPU engine), `candle` (ragd's engine on candle's device) or
    /// `candle-reference` (candle-transformers' models).
    pub fn engine_name(&self) -> &'static str {
        match self.runner {
            Runner::Cpu { .. } => "ragd-cpu",
            Runner::Candle { .. } => "candle",
            Runner::Reference { .. } => "candle-reference",
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
            Runner::Cpu { cache, .. } | Runner::Candle { cache, .. } => cache.bytes(),
            Runner::Reference { .. } => 0,
        }
    }

    /// Runs `tokens` from position `pos` of the engine's own sequence (0 starts a new
    /// one; earlier positions are kept, later ones forgotten) and returns the logits for
    /// the token after the last one. Benches and tests use it; generation goes through
    /// [`LlmEngine::generate`].
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Vec<f32>, MlError> {
        match &mut self.runner {
            Runner::Cpu { .. } | Runner::Candle { .. } => self.forward_current(tokens, pos, false),
            Runner::Reference { weights, device } => {
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
        self.forward_current(tokens, pos, true)
    }

    /// [`LlmEngine::forward`] on ragd's engines (the engine's own sequence).
    fn forward_current(
        &mut self,
        tokens: &[u32],
        pos: usize,
        all: bool,
    ) -> Result<Vec<f32>, MlError> {
        let current = match &mut self.runner {
            Runner::Cpu { current, .. } | Runner::Candle { current, .. } => current,
            Runner::Reference { .. } => {
                return Err(MlError::InvalidInput(
                    "candle's models return the last token's logits only".into(),
                ))
            }
        };
        if pos > current.len() {
            return Err(MlError::InvalidInput(format!(
                "position {pos} is past the {} positions run so far",
                current.len()
            )));
        }
        current.truncate(pos);
        match &mut self.runner {
            Runner::Cpu {
                model,
                current: Kv::Cpu(c),
                ..
            } => model.forward(c, tokens, all),
            Runner::Candle {
                model,
                current: Kv::Candle(c),
                ..
            } => model.forward(c, tokens, all),
            _ => Err(MlError::Inference(
                "the engine's sequence belongs to another engine".into(),
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
        let (mut decoder, prompt_ids) = Decoder::new(self, request)?;
        let mut run = Run::start(&mut self.runner, &prompt_ids, decoder.max_new)?;
        let cached = run.reused;
        let done = |completion_tokens, finish_reason| Completion {
            prompt_tokens: prompt_ids.len(),
            cached_tokens: cached,
            completion_tokens,
            finish_reason,
        };
        if decoder.max_new == 0 {
            run.finish(&mut self.runner);
            return Ok(done(0, FinishReason::Length));
        }
        let mut logits = run.step(&mut self.runner, &prompt_ids[cached..], cached)?;
        loop {
            match decoder.next(&mut logits, on_text)? {
                Next::Run(token) => {
                    let pos = prompt_ids.len() + decoder.count - 1;
                    logits = run.step(&mut self.runner, &[token], pos)?;
                }
                Next::End(reason) => {
                    run.finish(&mut self.runner);
                    return Ok(done(decoder.count, reason));
                }
            }
        }
    }
}

/// A request taken apart for the batched scheduler: its decoder and prompt, before any
/// key/value state is given to it.
pub(crate) struct Opened {
    /// Sampling, text and stopping.
    pub(crate) decoder: Decoder,
    /// The prompt's tokens.
    pub(crate) prompt: Vec<u32>,
}

/// A generation of the batched scheduler: its sequence (from the prompt cache), how much
/// of the prompt has run, and the token to run next.
pub(crate) struct Batched {
    /// Sampling, text and stopping.
    pub(crate) decoder: Decoder,
    /// The prompt's tokens.
    pub(crate) prompt: Vec<u32>,
    seq: Option<Sequence>,
    /// Prompt tokens whose state came from the prompt cache.
    pub(crate) cached: usize,
    /// Prompt tokens whose state is in the sequence.
    pub(crate) fed: usize,
    /// The token to run in the next decode step.
    pub(crate) pending: Option<u32>,
}

impl Batched {
    /// The whole prompt has run.
    pub(crate) fn prefilled(&self) -> bool {
        self.fed == self.prompt.len()
    }

    /// Bytes of key/value state reserved for it.
    pub(crate) fn kv_bytes(&self) -> usize {
        self.seq.as_ref().map_or(0, |s| s.cache.bytes())
    }
}

impl LlmEngine {
    /// Whether [`LlmEngine::open`] and the batched steps can run this model (ragd's CPU
    /// engine; candle's models run one request at a time).
    pub(crate) fn batchable(&self) -> bool {
        !matches!(self.runner, Runner::Reference { .. })
    }

    /// Bytes of key/value state per position.
    pub(crate) fn kv_bytes_per_token(&self) -> usize {
        self.runner.new_kv().map_or(0, |k| k.bytes_per_token())
    }

    /// Tokenizes `request` and checks it against the window.
    pub(crate) fn open(&self, request: GenerateRequest) -> Result<Opened, MlError> {
        let (decoder, prompt) = Decoder::new(self, request)?;
        Ok(Opened { decoder, prompt })
    }

    /// Gives `opened` its sequence: the prompt cache's longest match, with room for the
    /// prompt and the longest answer.
    pub(crate) fn attach(&mut self, opened: Opened) -> Result<Batched, MlError> {
        let Opened { decoder, prompt } = opened;
        let mut run = Run::start(&mut self.runner, &prompt, decoder.max_new)?;
        let seq = run.seq.take();
        let cached = run.reused;
        Ok(Batched {
            decoder,
            prompt,
            seq,
            cached,
            fed: cached,
            pending: None,
        })
    }

    /// Runs the next [`super::cpu::UBATCH`] tokens (at most) of `b`'s prompt, as
    /// [`LlmEngine::generate`] runs them, or with `others_decoding` ragd's CPU engine's
    /// [interleaved chunk](super::cpu::CpuModel::interleaved_chunk) (the same results);
    /// the logits after the prompt once it has all run.
    pub(crate) fn prefill(
        &mut self,
        b: &mut Batched,
        others_decoding: bool,
    ) -> Result<Option<Vec<f32>>, MlError> {
        let chunk = match &self.runner {
            Runner::Cpu { model, .. } if others_decoding => model.interleaved_chunk(),
            _ => super::cpu::UBATCH,
        };
        let seq = b.seq.as_mut().ok_or_else(|| {
            MlError::Inference("the sequence was lost after a failed step".into())
        })?;
        let end = (b.fed + chunk).min(b.prompt.len());
        let chunk = &b.prompt[b.fed..end];
        match self.runner.run(&mut seq.cache, chunk, false) {
            Ok(logits) => {
                seq.tokens.extend_from_slice(chunk);
                b.fed = end;
                Ok(b.prefilled().then_some(logits))
            }
            Err(e) => {
                b.seq = None;
                Err(e)
            }
        }
    }

    /// One decode step: each of `batch`'s pending tokens runs after its sequence, every
    /// weight read once for all. Returns their logits, one row of the vocabulary's size
    /// each, in order.
    pub(crate) fn decode(&mut self, batch: &mut [&mut Batched]) -> Result<Vec<f32>, MlError> {
        let mut tokens = Vec::with_capacity(batch.len());
        let mut caches = Vec::with_capacity(batch.len());
        for b in batch.iter_mut() {
            let (Some(token), Some(seq)) = (b.pending, b.seq.as_mut()) else {
                return Err(MlError::Inference(
                    "a sequence in a decode step has nothing to run".into(),
                ));
            };
            tokens.push(token);
            caches.push(&mut seq.cache);
        }
        let rows = self.runner.vocab() * tokens.len();
        let step = self.runner.run_decode(caches, &tokens).and_then(|logits| {
            if logits.len() == rows {
                Ok(logits)
            } else {
                Err(MlError::Inference(format!(
                    "a decode step returned {} logits for {rows}",
                    logits.len()
                )))
            }
        });
        match step {
            Ok(logits) => {
                for b in batch.iter_mut() {
                    let token = b.pending.take().expect("checked above");
                    if let Some(seq) = b.seq.as_mut() {
                        seq.tokens.push(token);
                    }
                }
                Ok(logits)
            }
            Err(e) => {
                // A failed step leaves the states unknown: never reuse them.
                batch.iter_mut().for_each(|b| b.seq = None);
                Err(e)
            }
        }
    }

    /// Returns `b`'s sequence to the prompt cache.
    pub(crate) fn close(&mut self, mut b: Batched) {
        if let (Some(cache), Some(seq)) = (self.runner.prompt_cache(), b.seq.take()) {
            cache.put(seq);
        }
    }
}

/// What a generation does after a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Run this token and come back with the logits after it.
    Run(u32),
    /// The generation has ended (its text all sent).
    End(FinishReason),
}

/// One generation's token-by-token state: sampling, constraint, text and stopping. The
/// sequential path ([`LlmEngine::generate`]) and the batched scheduler
/// ([`super::batch`]) both drive it, so a sequence's tokens do not depend on which ran it.
pub(crate) struct Decoder {
    tokenizer: Arc<LlmTokenizer>,
    sampler: Sampler,
    detok: Utf8Stream,
    stops: StopMatcher,
    filter: Option<Box<dyn super::TokenFilter>>,
    mask: Option<Vec<bool>>,
    history: Vec<u32>,
    generated: String,
    ignore_eos: bool,
    /// Tokens generated so far.
    pub(crate) count: usize,
    /// Most tokens to generate (the request's, lowered to what the window holds).
    pub(crate) max_new: usize,
}

impl Decoder {
    /// The decoder of `request` on `engine`'s model, with the prompt's tokens.
    pub(crate) fn new(
        engine: &LlmEngine,
        request: GenerateRequest,
    ) -> Result<(Self, Vec<u32>), MlError> {
        let GenerateRequest {
            prompt,
            params,
            filter,
        } = request;
        let tokenizer = Arc::clone(&engine.tokenizer);
        let prompt_ids = tokenizer.encode_prompt(&prompt)?;
        let window = engine.info.context_length;
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
        let decoder = Self {
            sampler: Sampler::new(&params),
            detok: Utf8Stream::new(&tokenizer),
            stops: StopMatcher::new(&params.stop),
            mask: filter.as_ref().map(|_| Vec::<bool>::new()),
            filter,
            history: prompt_ids.clone(),
            generated: String::new(),
            ignore_eos: params.ignore_eos,
            count: 0,
            max_new,
            tokenizer,
        };
        Ok((decoder, prompt_ids))
    }

    /// Takes the logits after the last token run: picks the next token, sends its text,
    /// and says whether to run it or how the generation ended.
    pub(crate) fn next(
        &mut self,
        logits: &mut [f32],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Next, MlError> {
        if let (Some(f), Some(mask)) = (self.filter.as_mut(), self.mask.as_mut()) {
            let vocab = self.tokenizer.vocabulary();
            mask.clear();
            mask.extend((0..logits.len()).map(|i| i < vocab.len()));
            f.restrict(&self.generated, vocab, mask);
        }
        let Some(token) = self
            .sampler
            .sample(logits, &self.history, self.mask.as_deref())?
        else {
            return Ok(Next::End(self.flush(FinishReason::Stop, on_text)));
        };
        if !self.ignore_eos && self.tokenizer.is_eos(token) {
            return Ok(Next::End(self.flush(FinishReason::Stop, on_text)));
        }
        self.count += 1;
        self.history.push(token);
        let text = self.detok.push(&self.tokenizer, token);
        self.generated.push_str(&text);
        let step = self.stops.push(&text);
        if !on_text(&step.emit) {
            return Ok(Next::End(FinishReason::Cancelled));
        }
        if let (true, Some(which)) = (step.stopped, self.stops.hit()) {
            return Ok(Next::End(FinishReason::StopSequence(which)));
        }
        if self.count >= self.max_new {
            return Ok(Next::End(self.flush(FinishReason::Length, on_text)));
        }
        Ok(Next::Run(token))
    }

    /// Sends what is held back (an unfinished character, then text held for a stop that
    /// never came) and returns how the generation ended.
    fn flush(
        &mut self,
        reason: FinishReason,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> FinishReason {
        let tail = self.detok.finish();
        let mut rest = self.stops.push(&tail);
        let reason = match (rest.stopped, self.stops.hit()) {
            (true, Some(which)) => FinishReason::StopSequence(which),
            _ => {
                rest.emit.push_str(&self.stops.finish());
                reason
            }
        };
        if !rest.emit.is_empty() && !on_text(&rest.emit) {
            return FinishReason::Cancelled;
        }
        reason
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
        match runner.new_kv() {
            Some(empty) => {
                let cache = runner
                    .prompt_cache()
                    .expect("ragd's engines have a prompt cache");
                let mut hit = cache.take(prompt, || empty);
                if !hit.sequence.cache.reserve_exact(prompt.len() + answer) {
                    return Err(MlError::Inference(format!(
                        "the device has no room for {} more positions of key/value state",
                        prompt.len() + answer
                    )));
                }
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
            None => Ok(Self {
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
            (Runner::Reference { weights, device }, _) => {
                let input = Tensor::new(tokens, device)?.unsqueeze(0)?;
                let logits = weights.forward(&input, pos)?;
                Ok(logits
                    .squeeze(0)?
                    .to_dtype(candle_core::DType::F32)?
                    .to_vec1()?)
            }
            (runner, Some(seq)) => {
                debug_assert_eq!(seq.cache.len(), pos);
                let logits = runner.run(&mut seq.cache, tokens, false);
                if logits.is_err() {
                    // A failed step leaves the state unknown: never reuse it.
                    self.seq = None;
                } else {
                    seq.tokens.extend_from_slice(tokens);
                }
                logits
            }
            (_, None) => Err(MlError::Inference(
                "the sequence was lost after a failed step".into(),
            )),
        }
    }

    fn finish(mut self, runner: &mut Runner) {
        if let (Some(cache), Some(seq)) = (runner.prompt_cache(), self.seq.take()) {
            cache.put(seq);
        }
    }
}
