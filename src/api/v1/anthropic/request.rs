//! `POST /v1/messages`' request: Anthropic's JSON shape and its mapping onto the
//! completion core's [`CompletionRequest`]. Content blocks become the conversation's
//! messages (`tool_use` blocks an assistant's structured calls, `tool_result` blocks tool
//! messages answering them); tool definitions and `tool_choice` go through the same
//! checks and tool grammar as OpenAI's route.

use serde::Deserialize;
use serde_json::Value;

use super::error::AnthropicError;
use crate::api::v1::openai::chat_request::{
    offer_tools, tool_def, ToolDef, DEFAULT_SYSTEM, MAX_TOOLS,
};
use crate::ml::llm::completion::CompletionRequest;
use crate::ml::llm::tool_grammar::CallMode;
use crate::ml::llm::{ChatMessage, GenerationParams, Role, ToolCall};

/// Most stop sequences in one request.
const MAX_STOP: usize = 16;

/// The body of `/v1/messages` (and, without `max_tokens`, of `count_tokens`).
#[derive(Debug, Deserialize)]
pub struct MessagesRequest {
    /// The model's id (`GET /v1/models`).
    pub model: String,
    /// The conversation: `user` and `assistant` turns.
    pub messages: Vec<InMessage>,
    /// A string or text blocks.
    #[serde(default)]
    pub system: Value,
    /// Most tokens to generate (required by `/v1/messages`).
    pub max_tokens: Option<u32>,
    /// Stream Anthropic's events.
    #[serde(default)]
    pub stream: bool,
    /// Sampling temperature, 0-1.
    pub temperature: Option<f64>,
    /// Nucleus sampling, (0, 1].
    pub top_p: Option<f64>,
    /// Accepted; ragd's sampler has no top-k cut (see docs/openai.md).
    pub top_k: Option<u32>,
    /// Custom stop sequences.
    pub stop_sequences: Option<Vec<String>>,
    /// Client tools (`name`, `description`, `input_schema`).
    pub tools: Option<Vec<InTool>>,
    /// `{"type": "auto" | "any" | "tool" | "none", "name"}`.
    pub tool_choice: Option<InToolChoice>,
}

/// One turn.
#[derive(Debug, Deserialize)]
pub struct InMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// A string or content blocks.
    pub content: Value,
}

/// A tool definition.
#[derive(Debug, Deserialize)]
pub struct InTool {
    /// Absent or `custom` for a client tool; Anthropic's server tools are refused.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// The JSON schema of its input.
    pub input_schema: Option<Value>,
}

/// `tool_choice`.
#[derive(Debug, Deserialize)]
pub struct InToolChoice {
    /// `auto`, `any`, `tool` or `none`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The tool, for `tool`.
    pub name: Option<String>,
}

fn bad(message: impl Into<String>) -> AnthropicError {
    AnthropicError::invalid(message)
}

/// The sampling fields.
pub fn params(req: &MessagesRequest, max_tokens: u32) -> Result<GenerationParams, AnthropicError> {
    let mut p = GenerationParams::default();
    if max_tokens == 0 {
        return Err(bad("max_tokens: must be at least 1"));
    }
    p.max_tokens = max_tokens as usize;
    if let Some(t) = req.temperature {
        if !(0.0..=1.0).contains(&t) {
            return Err(bad(format!(
                "temperature: must be between 0 and 1, got {t}"
            )));
        }
        p.temperature = t;
    }
    if let Some(t) = req.top_p {
        if !(t > 0.0 && t <= 1.0) {
            return Err(bad(format!("top_p: must be in (0, 1], got {t}")));
        }
        p.top_p = t;
    }
    if let Some(k) = req.top_k {
        tracing::debug!(
            top_k = k,
            "top_k accepted, not applied (no top-k cut in the sampler)"
        );
    }
    let stops = req.stop_sequences.clone().unwrap_or_default();
    if stops.len() > MAX_STOP {
        return Err(bad(format!("stop_sequences: at most {MAX_STOP}")));
    }
    if stops.iter().any(|s| s.is_empty()) {
        return Err(bad("stop_sequences: a stop sequence must not be empty"));
    }
    p.stop = stops;
    Ok(p)
}

/// The text of `system`: a string or text blocks.
fn system_text(system: &Value) -> Result<String, AnthropicError> {
    match system {
        Value::Null => Ok(DEFAULT_SYSTEM.to_owned()),
        Value::String(s) if s.trim().is_empty() => Ok(DEFAULT_SYSTEM.to_owned()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push(t.as_str()),
                    _ => {
                        return Err(bad(format!(
                            "system.{i}: system blocks must be {{\"type\": \"text\", \"text\": string}}"
                        )))
                    }
                }
            }
            Ok(if out.is_empty() {
                DEFAULT_SYSTEM.to_owned()
            } else {
                out.join("\n\n")
            })
        }
        _ => Err(bad("system: must be a string or an array of text blocks")),
    }
}

/// The text of a `tool_result`'s content: a string or text blocks.
fn result_text(at: &str, content: Option<&Value>) -> Result<String, AnthropicError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(blocks)) => {
            let mut out = Vec::new();
            for b in blocks {
                match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push(t.as_str()),
                    (Some(kind), _) if kind != "text" => {
                        return Err(unsupported(&format!("{at}.content"), kind))
                    }
                    _ => return Err(bad(format!("{at}.content: a text block needs 'text'"))),
                }
            }
            Ok(out.join("\n"))
        }
        Some(_) => Err(bad(format!(
            "{at}.content: must be a string or an array of text blocks"
        ))),
    }
}

fn unsupported(at: &str, kind: &str) -> AnthropicError {
    bad(format!(
        "{at}: content blocks of type '{kind}' are not supported: ragd's models read text only"
    ))
}

/// One turn's blocks, appended to `out` as messages.
fn turn(
    i: usize,
    m: &InMessage,
    out: &mut Vec<ChatMessage>,
    calls: &mut Vec<ToolCall>,
) -> Result<(), AnthropicError> {
    let at = format!("messages.{i}");
    let blocks: Vec<Value> = match &m.content {
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        Value::Array(b) => b.clone(),
        _ => {
            return Err(bad(format!(
                "{at}.content: must be a string or an array of content blocks"
            )))
        }
    };
    let mut text = Vec::new();
    let mut turn_calls = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content.{j}");
        let kind = b
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(format!("{at}: each content block needs a 'type'")))?;
        match (m.role.as_str(), kind) {
            (_, "text") => match b.get("text") {
                Some(Value::String(t)) => text.push(t.clone()),
                _ => return Err(bad(format!("{at}.text: must be a string"))),
            },
            ("assistant", "tool_use") => {
                let id = b.get("id").and_then(Value::as_str);
                let name = b.get("name").and_then(Value::as_str);
                let input = b.get("input").filter(|v| v.is_object());
                let (Some(id), Some(name), Some(input)) = (id, name, input) else {
                    return Err(bad(format!(
                        "{at}: a tool_use block needs 'id', 'name' and an object 'input'"
                    )));
                };
                turn_calls.push(ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: input.clone(),
                });
            }
            ("assistant", "thinking" | "redacted_thinking") => {}
            ("user", "tool_result") => {
                let id = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(format!("{at}.tool_use_id: required")))?;
                let call = calls.iter().find(|c| c.id == id).ok_or_else(|| {
                    bad(format!(
                        "{at}.tool_use_id: no earlier tool_use block has the id '{id}'"
                    ))
                })?;
                let mut result = result_text(&at, b.get("content"))?;
                if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    result = format!("error: {result}");
                }
                out.push(ChatMessage::tool_result(call, result));
            }
            (_, kind @ ("image" | "document" | "search_result" | "container_upload")) => {
                return Err(unsupported(&at, kind))
            }
            (role, kind) => {
                return Err(bad(format!(
                    "{at}: a {role} turn cannot hold a block of type '{kind}'"
                )))
            }
        }
    }
    let text = text.join("\n");
    match m.role.as_str() {
        "user" => {
            if !text.is_empty() || blocks.is_empty() {
                out.push(ChatMessage::new(Role::User, text));
            }
        }
        _ => {
            calls.extend(turn_calls.iter().cloned());
            out.push(ChatMessage::assistant_calls(text, turn_calls));
        }
    }
    Ok(())
}

/// The system text and the conversation.
pub fn messages(req: &MessagesRequest) -> Result<(String, Vec<ChatMessage>), AnthropicError> {
    if req.messages.is_empty() {
        return Err(bad("messages: at least one message is required"));
    }
    let mut out = Vec::new();
    let mut calls = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        if !matches!(m.role.as_str(), "user" | "assistant") {
            return Err(bad(format!(
                "messages.{i}.role: unknown role '{}': expected user or assistant (the system text goes in 'system')",
                m.role
            )));
        }
        turn(i, m, &mut out, &mut calls)?;
    }
    if req.messages.last().is_some_and(|m| m.role == "assistant") {
        return Err(bad(
            "messages: the last message must be the user's; ragd does not continue a prefilled assistant turn",
        ));
    }
    Ok((system_text(&req.system)?, out))
}

/// The tools, checked.
fn tools(req: &MessagesRequest) -> Result<Vec<ToolDef>, AnthropicError> {
    let list = req.tools.as_deref().unwrap_or_default();
    if list.len() > MAX_TOOLS {
        return Err(bad(format!("tools: at most {MAX_TOOLS} tools")));
    }
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if let Some(kind) = t.kind.as_deref().filter(|k| *k != "custom") {
            return Err(bad(format!(
                "tools.{i}.type: '{kind}' is one of Anthropic's server tools; ragd runs client tools only"
            )));
        }
        let def = tool_def(
            &format!("tools.{i}"),
            &t.name,
            t.description.as_deref(),
            t.input_schema.as_ref(),
            &out,
        )
        .map_err(|mut e| {
            if let Some(p) = e.param.as_mut() {
                *p = p.replace(".parameters", ".input_schema");
            }
            AnthropicError::from(e)
        })?;
        out.push(def);
    }
    Ok(out)
}

/// Maps a request onto the completion core; `max_tokens` is the caller's (count_tokens
/// has none and passes 1).
pub fn map(req: &MessagesRequest, max_tokens: u32) -> Result<CompletionRequest, AnthropicError> {
    let params = params(req, max_tokens)?;
    let (system, messages) = messages(req)?;
    let tools = tools(req)?;
    let mut completion = CompletionRequest {
        system,
        history: Vec::new(),
        messages,
        tools: None,
        tool_specs: Vec::new(),
        call_mode: CallMode::Auto,
        params,
    };
    let choice = req.tool_choice.as_ref();
    let (mode, only) = match choice.map(|c| (c.kind.as_str(), c.name.as_deref())) {
        None | Some(("auto", _)) => (Some(CallMode::Auto), None),
        Some(("none", _)) => (None, None),
        Some(("any", _)) => (Some(CallMode::Required), None),
        Some(("tool", Some(name))) => {
            if !tools.iter().any(|t| t.name == name) {
                return Err(bad(format!(
                    "tool_choice.name: '{name}' is not one of the tools"
                )));
            }
            (Some(CallMode::Required), Some(name))
        }
        Some(("tool", None)) => return Err(bad("tool_choice.name: required for type 'tool'")),
        Some((other, _)) => {
            return Err(bad(format!(
                "tool_choice.type: must be auto, any, tool or none, got '{other}'"
            )))
        }
    };
    if tools.is_empty() && mode == Some(CallMode::Required) {
        return Err(bad("tool_choice: 'any' and 'tool' need tools"));
    }
    if let (Some(mode), false) = (mode, tools.is_empty()) {
        offer_tools(&mut completion, &tools, mode, only);
    }
    Ok(completion)
}
