//! [`Generator`]: what `/query` and the chat engine need from a language model. The real
//! one is [`LlmHandle`] (a GGUF model on its own thread); tests may script one to drive
//! the chat engine's tool loop exactly.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{FinishReason, GenerateRequest, LlmEvent, LlmHandle, ModelInfo, Prompt};
use crate::ml::MlError;

/// A text generator behind an async stream of [`LlmEvent`]s.
pub trait Generator: Send + Sync + 'static {
    /// Starts `request`; its events are `Token`s then one `Done` or `Error`. Dropping the
    /// receiver stops the generation.
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError>;
    /// Tokens in `text`.
    fn count_tokens(&self, text: &str) -> usize;
    /// Tokens of `prompt` as the model sees it (template included).
    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<usize, MlError>;
    /// Name, family and context window.
    fn info(&self) -> &ModelInfo;
    /// Requests queued or running.
    fn in_flight(&self) -> usize;
    /// [`generate`](Self::generate) for a caller with an answer of its own to fall back
    /// on: `Overloaded` also when a busy model would not be done within `within` at its
    /// recent pace (or has none yet). A generator that keeps no pace just generates.
    fn generate_within(
        &self,
        request: GenerateRequest,
        within: std::time::Duration,
    ) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        let _ = within;
        self.generate(request)
    }
}

impl Generator for LlmHandle {
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        LlmHandle::generate(self, request)
    }
    fn count_tokens(&self, text: &str) -> usize {
        LlmHandle::count_tokens(self, text)
    }
    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<usize, MlError> {
        LlmHandle::count_prompt_tokens(self, prompt)
    }
    fn info(&self) -> &ModelInfo {
        LlmHandle::info(self)
    }
    fn in_flight(&self) -> usize {
        LlmHandle::in_flight(self)
    }
    fn generate_within(
        &self,
        request: GenerateRequest,
        within: std::time::Duration,
    ) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        LlmHandle::generate_within(self, request, within)
    }
}

/// A shared generator.
pub type SharedGenerator = Arc<dyn Generator>;

/// A finished generation, collected from its events.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The whole text.
    pub text: String,
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish_reason: FinishReason,
}

impl Generated {
    /// No generation: nothing written, nothing read.
    pub fn nothing() -> Self {
        Self {
            text: String::new(),
            prompt_tokens: 0,
            completion_tokens: 0,
            finish_reason: FinishReason::Stop,
        }
    }
}

/// How a generation ended, known once its text is all read.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish_reason: FinishReason,
}

/// A running generation, read piece by piece. Dropping it stops the model.
pub struct Generation {
    rx: mpsc::Receiver<LlmEvent>,
    finished: Finished,
    started: std::time::Instant,
}

impl Generation {
    /// Starts `request` on `generator`.
    pub fn start(generator: &dyn Generator, request: GenerateRequest) -> Result<Self, MlError> {
        Ok(Self::reading(generator.generate(request)?))
    }

    /// Starts `request` on `generator` unless a busy model would not be done within
    /// `within` ([`Generator::generate_within`]).
    pub fn start_within(
        generator: &dyn Generator,
        request: GenerateRequest,
        within: std::time::Duration,
    ) -> Result<Self, MlError> {
        Ok(Self::reading(generator.generate_within(request, within)?))
    }

    fn reading(rx: mpsc::Receiver<LlmEvent>) -> Self {
        Self {
            rx,
            finished: Finished {
                prompt_tokens: 0,
                completion_tokens: 0,
                finish_reason: FinishReason::Length,
            },
            started: std::time::Instant::now(),
        }
    }

    /// The next piece of text, or `None` once the generation has ended normally (then
    /// [`finished`](Self::finished) tells how).
    pub async fn next_text(&mut self) -> Result<Option<String>, MlError> {
        match self.rx.recv().await {
            Some(LlmEvent::Token { text }) => Ok(Some(text)),
            Some(LlmEvent::Done {
                prompt_tokens,
                completion_tokens,
                finish_reason,
            }) => {
                self.finished = Finished {
                    prompt_tokens,
                    completion_tokens,
                    finish_reason,
                };
                crate::telemetry::llm_generation(
                    prompt_tokens,
                    completion_tokens,
                    self.started.elapsed().as_secs_f64(),
                );
                Ok(None)
            }
            Some(LlmEvent::Error(e)) => Err(e),
            None => Err(MlError::WorkerGone),
        }
    }

    /// Token counts and reason, after [`next_text`](Self::next_text) returned `None`.
    pub fn finished(&self) -> Finished {
        self.finished
    }
}

/// Runs `request` to the end and returns its text, calling `on_text` with each piece.
pub async fn collect(
    generator: &dyn Generator,
    request: GenerateRequest,
    mut on_text: impl FnMut(&str),
) -> Result<Generated, MlError> {
    let mut generation = Generation::start(generator, request)?;
    let mut text = String::new();
    while let Some(piece) = generation.next_text().await? {
        on_text(&piece);
        text.push_str(&piece);
    }
    let f = generation.finished();
    Ok(Generated {
        text,
        prompt_tokens: f.prompt_tokens,
        completion_tokens: f.completion_tokens,
        finish_reason: f.finish_reason,
    })
}
