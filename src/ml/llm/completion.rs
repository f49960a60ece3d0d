//! The stateless completion core: messages, tools and sampling parameters in; a stream of
//! text and tool calls out. It knows nothing of users, conversations or what a tool
//! does, so any endpoint can use it: the assistant's chat turn runs each of its rounds
//! through it (`assistant::chat`), and an OpenAI-style completion endpoint would map its
//! request onto a [`CompletionRequest`] and [`CompletionEvent`]s onto its stream.
//!
//! The prompt is laid out for the engine's prompt cache: the system message, then the
//! newest history that fits the model's window, then the request's own messages, which
//! always stay. Text streams until a tool call opens (what might be the start of the
//! opener is held back until it is known not to be); the calls follow once the
//! generation ends, parsed (a call the model could not finish is an `Err`).

use std::collections::VecDeque;

use super::generator::{Finished, Generation, SharedGenerator};
use super::tool_grammar::{parse_calls, CallMode, ParsedCall, ToolCallFilter, ToolGrammar, OPEN};
use super::{ChatMessage, GenerateRequest, GenerationParams, Generator, Prompt, Role};
use crate::ml::MlError;

/// Tokens kept free beside the counted prompt.
const SAFETY_TOKENS: usize = 16;

/// One completion.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// The system message.
    pub system: String,
    /// Earlier messages: the newest that fit the window are kept, oldest dropped first.
    pub history: Vec<ChatMessage>,
    /// This request's messages, always in the prompt (too long for the window is an
    /// `InvalidInput` error).
    pub messages: Vec<ChatMessage>,
    /// The tools a call may name, with their argument schemas; `None` for text only.
    pub tools: Option<ToolGrammar>,
    /// The tool definitions shown to the model (OpenAI's function-tool objects), through
    /// its chat template's `tools` or described in the system message
    /// ([`Prompt::ToolChat`]). Empty when the caller describes its tools itself.
    pub tool_specs: Vec<serde_json::Value>,
    /// Whether the output may be text (`Auto`) or must be one call (`Required`).
    pub call_mode: CallMode,
    /// Sampling and stopping; `max_tokens` is lowered to what the window holds.
    pub params: GenerationParams,
}

/// What a completion streams.
#[derive(Debug, Clone, PartialEq)]
pub enum CompletionEvent {
    /// Text for the reader (never part of a tool call).
    Text(String),
    /// A tool call, after the text; `Err` when the model's call does not parse.
    Call(Result<ParsedCall, String>),
}

/// A running completion, read event by event. Dropping it stops the model.
pub struct Completion {
    generation: Generation,
    tools: bool,
    gate: ContentGate,
    output: String,
    text: String,
    calls: VecDeque<Result<ParsedCall, String>>,
    ended: bool,
    prompt_tokens: usize,
    /// Pieces the model has sent so far (one per generated token that completed text).
    pieces: usize,
}

impl Completion {
    /// Lays out the prompt (off the async runtime's threads: it tokenizes) and starts the
    /// generation.
    pub async fn start(llm: SharedGenerator, request: CompletionRequest) -> Result<Self, MlError> {
        Self::admitted(llm, request, None).await
    }

    /// [`start`](Self::start) for a caller that can do without it: `Overloaded` also when
    /// a busy model would not be done within `within` ([`Generator::generate_within`]).
    pub async fn start_within(
        llm: SharedGenerator,
        request: CompletionRequest,
        within: std::time::Duration,
    ) -> Result<Self, MlError> {
        Self::admitted(llm, request, Some(within)).await
    }

    async fn admitted(
        llm: SharedGenerator,
        request: CompletionRequest,
        within: Option<std::time::Duration>,
    ) -> Result<Self, MlError> {
        let CompletionRequest {
            system,
            history,
            messages,
            tools,
            tool_specs,
            call_mode,
            mut params,
        } = request;
        let fitted = {
            let llm = llm.clone();
            let max_tokens = params.max_tokens;
            tokio::task::spawn_blocking(move || {
                fit_prompt(
                    llm.as_ref(),
                    &system,
                    &history,
                    &messages,
                    &tool_specs,
                    max_tokens,
                )
            })
            .await
            .map_err(|e| MlError::Inference(format!("prompt layout stopped: {e}")))??
        };
        params.max_tokens = fitted.room;
        let mut generate = GenerateRequest::new(fitted.prompt);
        generate.params = params;
        generate.filter = tools
            .clone()
            .map(|g| Box::new(ToolCallFilter::new(g, call_mode)) as Box<_>);
        let generation = match within {
            Some(within) => Generation::start_within(llm.as_ref(), generate, within)?,
            None => Generation::start(llm.as_ref(), generate)?,
        };
        Ok(Self {
            generation,
            tools: tools.is_some(),
            gate: ContentGate::default(),
            output: String::new(),
            text: String::new(),
            calls: VecDeque::new(),
            ended: false,
            prompt_tokens: fitted.prompt_tokens,
            pieces: 0,
        })
    }

    /// The prompt's tokens as laid out, known before the first token (the engine's own
    /// count comes with [`finished`](Self::finished)).
    pub fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// The prompt tokens of `request`'s system message, history and messages, without
    /// generating (and whether or not they fit the window).
    pub async fn count(llm: SharedGenerator, request: CompletionRequest) -> Result<usize, MlError> {
        tokio::task::spawn_blocking(move || {
            let mut all = vec![ChatMessage::new(Role::System, request.system)];
            all.extend(request.history);
            all.extend(request.messages);
            llm.count_prompt_tokens(&chat_prompt(all, &request.tool_specs))
        })
        .await
        .map_err(|e| MlError::Inference(format!("token count stopped: {e}")))?
    }

    /// The next event; `None` once the text and every call have been read.
    pub async fn next(&mut self) -> Result<Option<CompletionEvent>, MlError> {
        loop {
            if self.ended {
                return Ok(self.calls.pop_front().map(CompletionEvent::Call));
            }
            match self.generation.next_text().await? {
                Some(piece) => {
                    self.pieces += 1;
                    self.output.push_str(&piece);
                    let shown = if self.tools {
                        self.gate.push(&piece)
                    } else {
                        piece
                    };
                    if !shown.is_empty() {
                        return Ok(Some(CompletionEvent::Text(shown)));
                    }
                }
                None => {
                    self.ended = true;
                    let rest = self.gate.finish();
                    let (text, calls) = if self.tools {
                        parse_calls(&self.output)
                    } else {
                        (self.output.trim().to_owned(), Vec::new())
                    };
                    self.text = text;
                    self.calls = calls.into();
                    if self.tools && !rest.is_empty() {
                        return Ok(Some(CompletionEvent::Text(rest)));
                    }
                }
            }
        }
    }

    /// Tokens generated so far, counted as pieces read (the engine's own count comes with
    /// [`finished`](Self::finished), which a [`cut`](Self::cut) completion never reaches).
    pub fn pieces(&self) -> usize {
        self.pieces
    }

    /// Stops reading before the generation's end (dropping the completion stops the
    /// model): the text is what was written so far, cut before a call it had begun, and
    /// no call is read. Returns that text.
    pub fn cut(&mut self) -> &str {
        let written = match self.output.find(OPEN) {
            Some(i) if self.tools => &self.output[..i],
            _ => &self.output,
        };
        self.text = written.trim().to_owned();
        self.ended = true;
        self.calls.clear();
        &self.text
    }

    /// The text without its tool calls, trimmed (whole once [`Completion::next`] has
    /// returned `None`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Everything the model wrote, calls included.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Token counts and why the generation ended (once it has).
    pub fn finished(&self) -> Finished {
        self.generation.finished()
    }
}

/// A chat prompt, with `tools` when there are any.
fn chat_prompt(messages: Vec<ChatMessage>, tools: &[serde_json::Value]) -> Prompt {
    if tools.is_empty() {
        Prompt::Chat(messages)
    } else {
        Prompt::ToolChat {
            messages,
            tools: tools.to_vec(),
        }
    }
}

/// A laid-out prompt.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The prompt.
    pub prompt: Prompt,
    /// The answer's room in tokens.
    pub room: usize,
    /// The prompt's tokens: exact when no history was kept, else counted per message.
    pub prompt_tokens: usize,
}

/// The prompt: the system message, the newest `history` that fits, then `messages`,
/// with the tool definitions `tools` when there are any; with the answer's room in tokens
/// (`max_tokens`, lowered so that the answer has at most half of what the window has
/// left) and the prompt's token count.
pub fn fit_prompt(
    llm: &dyn Generator,
    system: &str,
    history: &[ChatMessage],
    messages: &[ChatMessage],
    tools: &[serde_json::Value],
    max_tokens: usize,
) -> Result<Fitted, MlError> {
    let window = llm.info().context_length;
    let chat = |messages: Vec<ChatMessage>| chat_prompt(messages, tools);
    let mut fixed = vec![ChatMessage::new(Role::System, system)];
    fixed.extend(messages.iter().cloned());
    let base = llm.count_prompt_tokens(&chat(fixed.clone()))? + SAFETY_TOKENS;
    if base + 1 >= window {
        return Err(MlError::InvalidInput(format!(
            "the message, instructions and tools are {base} tokens; the model's window is {window}"
        )));
    }
    let max_tokens = max_tokens.min((window - base) / 2).max(1);
    let mut budget = window - base - max_tokens;
    let mut prompt_tokens = base - SAFETY_TOKENS;
    let mut kept: Vec<ChatMessage> = Vec::new();
    for m in history.iter().rev() {
        let cost = llm.count_tokens(&m.content) + 8;
        if cost > budget {
            break;
        }
        budget -= cost;
        prompt_tokens += cost;
        kept.push(m.clone());
    }
    kept.reverse();
    let mut prompt = vec![fixed.remove(0)];
    prompt.extend(kept);
    prompt.extend(fixed);
    Ok(Fitted {
        prompt: chat(prompt),
        room: max_tokens,
        prompt_tokens,
    })
}

/// Passes text until a tool call opens, holding back what might be the opener's start.
#[derive(Default)]
struct ContentGate {
    pending: String,
    closed: bool,
}

impl ContentGate {
    fn push(&mut self, piece: &str) -> String {
        if self.closed {
            return String::new();
        }
        self.pending.push_str(piece);
        if let Some(p) = self.pending.find(OPEN) {
            self.closed = true;
            let out = self.pending[..p].to_owned();
            self.pending.clear();
            return out;
        }
        let keep = (1..OPEN.len())
            .rev()
            .find(|&n| self.pending.ends_with(&OPEN[..n]))
            .unwrap_or(0);
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_owned();
        self.pending.drain(..cut);
        out
    }

    fn finish(&mut self) -> String {
        if self.closed {
            String::new()
        } else {
            std::mem::take(&mut self.pending)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_streams_text_and_hides_the_call() {
        let mut g = ContentGate::default();
        let mut shown = String::new();
        for piece in ["Let me ", "check <to", "ol_call>{\"name\"", ": \"x\"}"] {
            shown.push_str(&g.push(piece));
        }
        shown.push_str(&g.finish());
        assert_eq!(shown, "Let me check ");
        let mut g = ContentGate::default();
        assert_eq!(g.push("a <b"), "a <b");
        assert_eq!(g.push(" <"), " ");
        assert_eq!(g.finish(), "<");
    }
}
