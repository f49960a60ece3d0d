//! The local LLM: a quantized GGUF (Llama, Qwen2 or Phi-3 family) on its own thread, with
//! its tokenizer, its family's chat template, sampling, stop sequences and streaming of
//! complete UTF-8 text.
//!
//! Pieces, each in its own file: [`model`] reads the GGUF metadata and opens the file,
//! [`cpu`] is ragd's own CPU inference engine (candle's quantized models remain for GPU
//! builds and as the reference the tests compare with), [`prompt_cache`] keeps the
//! key/value state of recent sequences, [`tokenizer`] encodes and decodes (from
//! `tokenizer.json` or the GGUF's own vocabulary), [`template`] renders chats, [`sampler`]
//! and [`filter`] choose the next token, [`detok`] and [`stop`] turn tokens into the text a
//! client sees, [`engine`] runs one generation synchronously, [`worker`] puts the engine on
//! a thread behind a bounded queue, and [`tiny`] writes small random-weight GGUF files for
//! tests and benches.
//!
//! Context budget: a request's prompt must leave room for at least one new token in the
//! model's window, else the request fails with a clear error (callers fit retrieved
//! passages with [`LlmHandle::count_prompt_tokens`] and [`LlmHandle::context_length`]
//! first). `max_tokens` is then lowered to what the window still holds, and a generation
//! that reaches it ends with [`FinishReason::Length`].
//!
//! CPU threads: ragd's engine owns a pool of `llm_threads` threads (every core by
//! default), so the LLM never competes with the embedder's rayon pool. With candle (GPU
//! builds) the worker runs each forward pass in a rayon pool of its own.

pub mod batch;
pub mod candle;
pub mod completion;
pub mod cpu;
pub mod detok;
pub mod engine;
pub mod filter;
pub mod gbnf;
pub mod generator;
pub mod inspect;
pub mod kv;
pub mod model;
pub mod prompt_cache;
pub mod remote;
pub mod sampler;
pub mod slot;
pub mod stop;
pub mod template;
pub mod tiny;
pub mod tokenizer;
pub mod tool_grammar;
pub mod worker;

pub use cpu::{CpuModel, CpuOptions, KvCache, KvType};
pub use engine::{Backend, Completion, LlmEngine};
pub use filter::{DigitsOnly, RemoteConstraint, TokenFilter, Vocabulary};
pub use generator::{collect, Finished, Generated, Generation, Generator, SharedGenerator};
pub use model::{Arch, ModelInfo};
pub use slot::{LlmLoader, LlmSlot};
pub use template::{ChatTemplate, JinjaTemplate};
pub use tokenizer::LlmTokenizer;
pub use worker::{LlmHandle, LlmWorkerOptions, DEFAULT_KV_BUDGET, DEFAULT_PARALLEL};

use super::MlError;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Instructions for the assistant.
    System,
    /// The person asking.
    User,
    /// The model's earlier answers.
    Assistant,
    /// A tool's result fed back to the model.
    Tool,
}

impl Role {
    /// The role's name as chat templates write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// What it says.
    pub content: String,
    /// The tools an assistant message calls (given to chat templates in OpenAI's shape).
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool result: the tool's name.
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// An assistant message that calls tools (`content` may be empty).
    pub fn assistant_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// The result of the call `call` (its id and tool name) fed back to the model.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call.id.clone()),
            name: Some(call.name.clone()),
            ..Self::new(Role::Tool, content)
        }
    }
}

/// One tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id (some templates want exactly nine letters and digits, as
    /// [`ToolCall::id_for`] makes).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// A nine-character alphanumeric id for the `n`th call of a conversation (the shape
    /// Mistral's templates insist on).
    pub fn id_for(n: usize) -> String {
        format!("call{:05}", n % 100_000)
    }
}

/// What the model continues.
#[derive(Debug, Clone)]
pub enum Prompt {
    /// A chat, rendered with the model's chat template and ending with the assistant's turn.
    Chat(Vec<ChatMessage>),
    /// A chat with the tools the model may call, as OpenAI's function-tool objects
    /// (`{"type": "function", "function": {"name", "description", "parameters"}}`): shown
    /// through the chat template's `tools` where the template renders them
    /// ([`ModelInfo::template_tools`]), else described in the system message with the call
    /// format ragd's tool grammar reads ([`template::describe_tools`]).
    ToolChat {
        /// The chat.
        messages: Vec<ChatMessage>,
        /// The tool definitions (never empty: an empty list is a plain [`Prompt::Chat`]).
        tools: Vec<serde_json::Value>,
    },
    /// Raw text, tokenized as is (after the BOS token when the model wants one).
    Text(String),
    /// Token ids, used as they are (benches, callers that tokenized already).
    Tokens(Vec<u32>),
}

/// How tokens are chosen and when generation ends.
#[derive(Debug, Clone)]
pub struct GenerationParams {
    /// Most new tokens (lowered to what the context window still holds).
    pub max_tokens: usize,
    /// 0 (or less) means greedy decoding.
    pub temperature: f64,
    /// Nucleus sampling: the smallest set of tokens whose probability reaches `top_p`;
    /// 1.0 turns it off.
    pub top_p: f64,
    /// Seed of the sampler: the same seed, prompt and model give the same text.
    pub seed: u64,
    /// Divides positive (multiplies negative) logits of recently seen tokens; 1.0 is off.
    pub repeat_penalty: f32,
    /// How many of the latest tokens (prompt included) the penalty looks at.
    pub repeat_last_n: usize,
    /// Generation ends before the first of these texts; it is not part of the output.
    pub stop: Vec<String>,
    /// Keep going past end-of-sequence tokens (benches and tests).
    pub ignore_eos: bool,
}

impl Default for GenerationParams {
    fn default() -> Self {
        Self {
            max_tokens: 512,
            temperature: 0.7,
            top_p: 0.9,
            seed: 299_792_458,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
            stop: Vec::new(),
            ignore_eos: false,
        }
    }
}

/// One generation: the prompt, the sampling parameters and an optional constraint.
pub struct GenerateRequest {
    /// What the model continues.
    pub prompt: Prompt,
    /// Sampling and stopping.
    pub params: GenerationParams,
    /// Constrained decoding: consulted before every token (see [`TokenFilter`]).
    pub filter: Option<Box<dyn TokenFilter>>,
}

impl GenerateRequest {
    /// A request with default parameters and no constraint.
    pub fn new(prompt: Prompt) -> Self {
        Self {
            prompt,
            params: GenerationParams::default(),
            filter: None,
        }
    }
}

impl std::fmt::Debug for GenerateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenerateRequest")
            .field("prompt", &self.prompt)
            .field("params", &self.params)
            .field("filter", &self.filter.is_some())
            .finish()
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-sequence token, or a filter that allowed nothing more.
    Stop,
    /// The stop sequence at this position of `GenerationParams::stop` (ragd's engines;
    /// a remote server's stop reports [`FinishReason::Stop`]).
    StopSequence(usize),
    /// `max_tokens` or the end of the context window.
    Length,
    /// The caller went away.
    Cancelled,
}

impl FinishReason {
    /// `stop`, `length` or `cancelled` (the names OpenAI-style APIs use).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop | FinishReason::StopSequence(_) => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// What a generation stream yields: text pieces, then exactly one `Done` or `Error`.
#[derive(Debug)]
pub enum LlmEvent {
    /// New text: always complete UTF-8, never part of a stop sequence.
    Token {
        /// The text.
        text: String,
    },
    /// The generation ended normally.
    Done {
        /// Tokens of the prompt after the template.
        prompt_tokens: usize,
        /// Tokens generated (an end-of-sequence token is not counted).
        completion_tokens: usize,
        /// Why it ended.
        finish_reason: FinishReason,
    },
    /// The generation failed; nothing follows.
    Error(MlError),
}
