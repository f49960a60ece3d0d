//! The LLM on an OpenAI-compatible inference server (llama.cpp's `llama-server`, vLLM,
//! Ollama, TGI): a [`Generator`] that sends ragd's own prompts (the same messages, the
//! same layout) to `/v1/chat/completions` (raw text and token prompts to
//! `/v1/completions`) with `stream: true`, and turns the server's chunks into
//! [`LlmEvent`]s. ragd's routing, grounding and prompt fitting above it are unchanged.
//!
//! Constraints (tool calls, digits) go through the server's own means, chosen once from
//! what the server is: llama.cpp's server takes the constraint as a GBNF `grammar`; any
//! other server gets OpenAI `tools` with `tool_choice`, and its tool calls are written
//! back as ragd's `<tool_call>` text. Token counts for prompt fitting come from the
//! server's `/tokenize` (llama.cpp), else from an estimate of one token per three bytes
//! (a deliberate over-count for English, so a fitted prompt never overflows).
//!
//! A bounded number of generations run at once (the server batches them) and as many
//! wait; beyond that a request is refused at once (`Overloaded`, 429). A generation is
//! retried only before anything was streamed; a server that dies mid-stream ends the
//! generation with `Unavailable`. Dropping the receiver closes the connection, which
//! stops the server's generation too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Semaphore};

use super::generator::Generator;
use super::template::{inline_calls, with_described_tools};
use super::tool_grammar::{CallMode, CLOSE, OPEN};
use super::{
    ChatMessage, FinishReason, GenerateRequest, LlmEvent, LlmTokenizer, ModelInfo, Prompt, Role,
};
use crate::ml::remote::{Remote, RemoteOptions, SseReader};
use crate::ml::MlError;

/// Used when neither the server nor the configuration says the window.
const DEFAULT_CONTEXT: usize = 4096;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct RemoteLlmOptions {
    /// Base URL.
    pub url: String,
    /// Bearer key.
    pub api_key: Option<String>,
    /// Model name to ask for; empty: the server's first model.
    pub model: String,
    /// The window, when the server does not report it (or to use less of it).
    pub context_length: Option<usize>,
    /// What kind of server it is; `None`: ask it (`/props`).
    pub kind: Option<ServerKind>,
    /// Generations sent at once; as many more may wait.
    pub parallel: usize,
    /// Longest wait for the server (between two streamed pieces).
    pub timeout: Duration,
    /// A GGUF of the same model, whose tokenizer and chat template count tokens when the
    /// server has no `/tokenize`.
    pub local_tokenizer: Option<std::path::PathBuf>,
}

/// How prompt fitting counts tokens.
enum Counting {
    /// The server's `/tokenize` (and `/apply-template` for chats).
    Server,
    /// The same model's tokenizer, here.
    Local(Box<LlmTokenizer>),
    /// One token per three bytes.
    Estimate,
}

/// What kind of server it is, which decides how constraints and counts are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// llama.cpp's server: GBNF grammars, `/tokenize`, `/apply-template`, `/props`.
    LlamaCpp,
    /// Any other OpenAI-compatible server: `tools`, estimated counts.
    OpenAi,
}

impl ServerKind {
    /// How this server is sent constraints, for the start-up log.
    pub fn constraints(self) -> &'static str {
        match self {
            ServerKind::LlamaCpp => "GBNF grammar (llama.cpp's `grammar` field)",
            ServerKind::OpenAi => "OpenAI `tools` with `tool_choice`",
        }
    }
}

/// The LLM behind an inference server.
pub struct RemoteGenerator {
    remote: Remote,
    info: ModelInfo,
    model: String,
    kind: ServerKind,
    counting: Counting,
    running: Arc<Semaphore>,
    in_flight: Arc<AtomicUsize>,
    limit: usize,
}

impl RemoteGenerator {
    /// Asks the server what it is and serves; a server that cannot be reached now is not
    /// an error (it may come up later; requests then answer 503 until it does), but the
    /// window then comes from the configuration or the default.
    pub fn connect(opts: RemoteLlmOptions) -> Result<Self, MlError> {
        let remote = Remote::new(RemoteOptions {
            component: "llm",
            url: opts.url.clone(),
            api_key: opts.api_key.clone(),
            timeout: opts.timeout,
            retries: 2,
        })?;
        let props = remote.probe("/props");
        let kind = match (opts.kind, &props) {
            (Some(kind), _) => kind,
            (None, Ok(Some(p))) if p.get("default_generation_settings").is_some() => {
                ServerKind::LlamaCpp
            }
            (None, _) => ServerKind::OpenAi,
        };
        let models = remote.probe("/v1/models").ok().flatten();
        let first_model = models
            .as_ref()
            .and_then(|m| m.pointer("/data/0/id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let model = if opts.model.is_empty() {
            first_model.clone().unwrap_or_default()
        } else {
            opts.model.clone()
        };
        let reported = match &props {
            Ok(Some(p)) => p
                .pointer("/default_generation_settings/n_ctx")
                .or_else(|| p.get("n_ctx"))
                .and_then(Value::as_u64)
                .map(|n| n as usize),
            _ => None,
        }
        .or_else(|| {
            // vLLM reports the window with its models.
            models
                .as_ref()
                .and_then(|m| m.pointer("/data/0/max_model_len"))
                .and_then(Value::as_u64)
                .map(|n| n as usize)
        });
        let context_length = match (opts.context_length, reported) {
            (Some(c), Some(r)) => c.min(r),
            (Some(c), None) => c,
            (None, Some(r)) => r,
            (None, None) => DEFAULT_CONTEXT,
        };
        let counting = match (kind, &opts.local_tokenizer) {
            (ServerKind::LlamaCpp, _) => Counting::Server,
            (ServerKind::OpenAi, Some(path)) => match LlmTokenizer::from_gguf(path) {
                Ok(t) => Counting::Local(Box::new(t)),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "the local tokenizer for the remote LLM did not load; estimating token counts");
                    Counting::Estimate
                }
            },
            (ServerKind::OpenAi, None) => Counting::Estimate,
        };
        let counts = match &counting {
            Counting::Server => "the server's /tokenize".to_owned(),
            Counting::Local(_) => format!(
                "the tokenizer of {}",
                opts.local_tokenizer
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
            Counting::Estimate => "estimated (1 token per 3 bytes)".to_owned(),
        };
        match &props {
            Err(e) => {
                tracing::warn!(url = %remote.base(), error = %e, context = context_length, "the LLM server cannot be reached now; requests answer 503 until it can")
            }
            Ok(_) => tracing::info!(
                url = %remote.base(),
                model = %model,
                server = ?kind,
                constraints = kind.constraints(),
                token_counts = %counts,
                context = context_length,
                "remote LLM"
            ),
        }
        let name = if model.is_empty() {
            format!("remote model at {}", remote.base())
        } else {
            format!("{model} at {}", remote.base())
        };
        let parallel = opts.parallel.max(1);
        Ok(Self {
            info: ModelInfo {
                name,
                family: "remote".into(),
                context_length,
                // The server's template is not known: tools are described in text.
                template_tools: false,
            },
            remote,
            model,
            kind,
            counting,
            running: Arc::new(Semaphore::new(parallel)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            limit: parallel * 2,
        })
    }

    fn body(&self, request: &GenerateRequest) -> (String, Value, Reading) {
        let p = &request.params;
        let mut body = Map::new();
        if !self.model.is_empty() {
            body.insert("model".into(), json!(self.model));
        }
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        body.insert("max_tokens".into(), json!(p.max_tokens));
        body.insert("temperature".into(), json!(p.temperature.max(0.0)));
        if p.temperature > 0.0 {
            body.insert("top_p".into(), json!(p.top_p));
        }
        body.insert("seed".into(), json!(p.seed));
        if !p.stop.is_empty() {
            body.insert("stop".into(), json!(p.stop));
        }
        if self.kind == ServerKind::LlamaCpp {
            body.insert("repeat_penalty".into(), json!(p.repeat_penalty));
            body.insert("repeat_last_n".into(), json!(p.repeat_last_n));
            if p.ignore_eos {
                body.insert("ignore_eos".into(), json!(true));
            }
            // Token counts come back with every final chunk.
            body.insert("return_tokens".into(), json!(false));
        }
        let mut read = Reading::Text;
        if let Some(c) = request.filter.as_ref().and_then(|f| f.remote()) {
            match (self.kind, c.tools) {
                (ServerKind::LlamaCpp, _) | (ServerKind::OpenAi, None) => {
                    body.insert("grammar".into(), json!(c.gbnf));
                }
                (ServerKind::OpenAi, Some((list, CallMode::Required))) => {
                    // A call is required: the call's JSON under a schema, which servers
                    // enforce whatever the model's template knows of tools.
                    read = Reading::WrappedCall;
                    body.insert(
                        "response_format".into(),
                        json!({"type": "json_schema", "json_schema": {"name": "tool_call", "strict": true, "schema": call_schema(&list)}}),
                    );
                }
                (ServerKind::OpenAi, Some((list, mode))) => {
                    read = Reading::ToolCalls;
                    let list: Vec<Value> = list
                        .into_iter()
                        .map(|(name, schema)| {
                            json!({"type": "function", "function": {"name": name, "parameters": schema}})
                        })
                        .collect();
                    body.insert("tools".into(), Value::Array(list));
                    body.insert(
                        "tool_choice".into(),
                        json!(if mode == CallMode::Required {
                            "required"
                        } else {
                            "auto"
                        }),
                    );
                }
            }
        }
        let path = match &request.prompt {
            Prompt::Chat(_) | Prompt::ToolChat { .. } => {
                body.insert(
                    "messages".into(),
                    Value::Array(chat_messages(&request.prompt).iter().map(message).collect()),
                );
                "/v1/chat/completions"
            }
            Prompt::Text(text) => {
                body.insert("prompt".into(), json!(text));
                "/v1/completions"
            }
            Prompt::Tokens(ids) => {
                body.insert("prompt".into(), json!(ids));
                "/v1/completions"
            }
        };
        (path.to_owned(), Value::Object(body), read)
    }
}

/// How a response's pieces become ragd's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Content is the text.
    Text,
    /// Content and OpenAI `tool_calls`, which are written as `<tool_call>` text at the end.
    ToolCalls,
    /// Content is one call's JSON, wrapped in `<tool_call>` tags.
    WrappedCall,
}

/// The JSON schema of one call of any of `tools`: `{"name", "arguments"}`.
fn call_schema(tools: &[(String, Value)]) -> Value {
    let one: Vec<Value> = tools
        .iter()
        .map(|(name, schema)| {
            json!({"type": "object", "properties": {"name": {"const": name}, "arguments": schema},
                   "required": ["name", "arguments"], "additionalProperties": false})
        })
        .collect();
    if one.len() == 1 {
        one.into_iter().next().unwrap_or_default()
    } else {
        json!({"anyOf": one})
    }
}

/// A message as OpenAI's API takes it. Tool results go back as the user's turn: ragd's
/// tool loop has no call ids, and a `tool` message without one is refused by servers
/// that check.
/// The messages of a chat prompt, tools described in the system message (the server's
/// template is not known); empty for other prompts.
fn chat_messages(prompt: &Prompt) -> Vec<ChatMessage> {
    match prompt {
        Prompt::Chat(messages) => messages.clone(),
        Prompt::ToolChat { messages, tools } => with_described_tools(messages, tools),
        Prompt::Text(_) | Prompt::Tokens(_) => Vec::new(),
    }
}

fn message(m: &ChatMessage) -> Value {
    match m.role {
        Role::Tool => json!({"role": "user", "content": format!("Tool result:\n{}", m.content)}),
        // Calls are written as ragd's grammar reads them, whatever the server's template.
        role => json!({"role": role.as_str(), "content": inline_calls(m)}),
    }
}

/// One streamed generation, read on the runtime and forwarded.
struct Stream {
    remote: Remote,
    path: String,
    body: Value,
    read: Reading,
    tx: mpsc::Sender<LlmEvent>,
}

/// A tool call being streamed in pieces.
#[derive(Default)]
struct PendingCall {
    name: String,
    arguments: String,
}

impl Stream {
    async fn run(self) {
        let Stream {
            remote,
            path,
            body,
            read,
            tx,
        } = self;
        let tools = read == Reading::ToolCalls;
        let response = match remote.post_stream(&path, &body).await {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(LlmEvent::Error(e)).await;
                return;
            }
        };
        let mut sse = SseReader::new(response);
        let mut calls: Vec<PendingCall> = Vec::new();
        let mut finish = None;
        let mut usage = (0usize, 0usize);
        let mut pieces = 0usize;
        loop {
            let next = tokio::select! {
                next = sse.next_data() => next,
                _ = tx.closed() => {
                    // The reader left: dropping the response closes the connection.
                    tracing::debug!("remote generation cancelled by its reader");
                    return;
                }
            };
            let data = match next {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    let e = remote.fail(
                        &format!("the stream broke after {pieces} pieces: {e}"),
                        false,
                    );
                    let _ = tx.send(LlmEvent::Error(e)).await;
                    return;
                }
            };
            if data == "[DONE]" {
                break;
            }
            let chunk: Value = match serde_json::from_str(&data) {
                Ok(v) => v,
                Err(e) => {
                    let e = remote.fail(&format!("a streamed chunk is not JSON ({e})"), false);
                    let _ = tx.send(LlmEvent::Error(e)).await;
                    return;
                }
            };
            if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
                // The server is up but failed this generation (an error event in a stream
                // that already answered 200): the client's 503, not an internal error.
                let e = MlError::Unavailable(
                    remote.describe(&format!("the generation failed: {message}")),
                );
                let _ = tx.send(LlmEvent::Error(e)).await;
                return;
            }
            if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0) as usize;
                usage = (n("prompt_tokens"), n("completion_tokens"));
            }
            let Some(choice) = chunk.pointer("/choices/0") else {
                continue;
            };
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                finish = Some(reason.to_owned());
            }
            let text = choice
                .pointer("/delta/content")
                .or_else(|| choice.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if tools {
                collect_calls(choice, &mut calls);
            }
            if !text.is_empty() {
                let text = if read == Reading::WrappedCall && pieces == 0 {
                    format!("{OPEN}{text}")
                } else {
                    text.to_owned()
                };
                pieces += 1;
                if tx.send(LlmEvent::Token { text }).await.is_err() {
                    // The reader left: dropping the response closes the connection.
                    tracing::debug!("remote generation cancelled by its reader");
                    return;
                }
            }
        }
        if read == Reading::WrappedCall {
            let text = if pieces == 0 {
                format!("{OPEN}{CLOSE}")
            } else {
                CLOSE.to_owned()
            };
            if tx.send(LlmEvent::Token { text }).await.is_err() {
                return;
            }
        }
        for call in calls {
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                call.arguments
            };
            let text = format!(
                "{OPEN}{{\"name\": {}, \"arguments\": {arguments}}}{CLOSE}",
                Value::String(call.name)
            );
            if tx.send(LlmEvent::Token { text }).await.is_err() {
                return;
            }
        }
        let finish_reason = match finish.as_deref() {
            Some("length") => FinishReason::Length,
            Some(_) => FinishReason::Stop,
            None => {
                // The body ended without a finish reason: the server went away.
                let e = remote.fail(
                    &format!("the stream ended early after {pieces} pieces"),
                    false,
                );
                let _ = tx.send(LlmEvent::Error(e)).await;
                return;
            }
        };
        remote.record_ok();
        let _ = tx
            .send(LlmEvent::Done {
                prompt_tokens: usage.0,
                completion_tokens: usage.1,
                finish_reason,
            })
            .await;
    }
}

/// Adds a chunk's `delta.tool_calls` pieces to `calls` (by their index).
fn collect_calls(choice: &Value, calls: &mut Vec<PendingCall>) {
    let Some(list) = choice
        .pointer("/delta/tool_calls")
        .and_then(Value::as_array)
    else {
        return;
    };
    for (n, c) in list.iter().enumerate() {
        let i = c
            .get("index")
            .and_then(Value::as_u64)
            .map_or(n, |i| i as usize);
        if i >= 64 {
            continue;
        }
        while calls.len() <= i {
            calls.push(PendingCall::default());
        }
        if let Some(name) = c.pointer("/function/name").and_then(Value::as_str) {
            calls[i].name.push_str(name);
        }
        if let Some(args) = c.pointer("/function/arguments").and_then(Value::as_str) {
            calls[i].arguments.push_str(args);
        }
    }
}

/// Tokens of `text` by the estimate: one per three bytes, at least one per word.
fn estimate(text: &str) -> usize {
    text.len().div_ceil(3).max(text.split_whitespace().count())
}

impl RemoteGenerator {
    fn tokenize(&self, text: &str) -> Result<usize, MlError> {
        let v = self
            .remote
            .post_json("/tokenize", &json!({"content": text, "add_special": false}))?;
        v.get("tokens")
            .and_then(Value::as_array)
            .map(Vec::len)
            .ok_or_else(|| {
                MlError::Inference(self.remote.describe("/tokenize answered without tokens"))
            })
    }
}

impl Generator for RemoteGenerator {
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        self.remote.admit()?;
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| MlError::Inference("the remote LLM needs the async runtime".into()))?;
        if self.in_flight.fetch_add(1, Ordering::SeqCst) >= self.limit {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return Err(MlError::Overloaded);
        }
        let (path, body, read) = self.body(&request);
        let (tx, rx) = mpsc::channel(64);
        let stream = Stream {
            remote: self.remote.clone(),
            path,
            body,
            read,
            tx,
        };
        let running = self.running.clone();
        let in_flight = self.in_flight.clone();
        handle.spawn(async move {
            // Waits for a turn; a reader that leaves meanwhile gives its place up.
            let permit = tokio::select! {
                p = running.acquire_owned() => p.ok(),
                _ = stream.tx.closed() => None,
            };
            if permit.is_some() {
                stream.run().await;
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(rx)
    }

    fn count_tokens(&self, text: &str) -> usize {
        match &self.counting {
            Counting::Server => match self.tokenize(text) {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %e, "counting tokens on the server failed; estimating");
                    estimate(text)
                }
            },
            Counting::Local(t) => t.count_tokens(text),
            Counting::Estimate => estimate(text),
        }
    }

    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<usize, MlError> {
        if let Counting::Local(t) = &self.counting {
            return Ok(t.encode_prompt(prompt)?.len());
        }
        let server = matches!(self.counting, Counting::Server);
        match prompt {
            Prompt::Tokens(ids) => Ok(ids.len()),
            Prompt::Text(text) if server => self.tokenize(text),
            Prompt::Text(text) => Ok(estimate(text)),
            Prompt::Chat(_) | Prompt::ToolChat { .. } if server => {
                let messages: Vec<Value> = chat_messages(prompt).iter().map(message).collect();
                let applied = self
                    .remote
                    .post_json("/apply-template", &json!({"messages": messages}))?;
                let text = applied
                    .get("prompt")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        MlError::Inference(
                            self.remote
                                .describe("/apply-template answered without a prompt"),
                        )
                    })?;
                self.tokenize(text)
            }
            // Each message's text plus a few tokens of role markers.
            Prompt::Chat(_) | Prompt::ToolChat { .. } => Ok(chat_messages(prompt)
                .iter()
                .map(|m| estimate(&m.content) + 4)
                .sum::<usize>()
                + 3),
        }
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_pieces_are_joined_by_index() {
        let mut calls = Vec::new();
        for chunk in [
            json!({"delta": {"tool_calls": [{"index": 0, "function": {"name": "search", "arguments": "{\"q"}}]}}),
            json!({"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\": \"x\"}"}}]}}),
        ] {
            collect_calls(&chunk, &mut calls);
        }
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "search");
        assert_eq!(calls[0].arguments, "{\"q\": \"x\"}");
    }

    #[test]
    fn the_estimate_over_counts_english() {
        // ~4 characters a token in English: the estimate must not be below that.
        let text = "The quick brown fox jumps over the lazy dog near the river bank.";
        assert!(estimate(text) >= text.len() / 4);
        assert_eq!(estimate(""), 0);
    }
}
