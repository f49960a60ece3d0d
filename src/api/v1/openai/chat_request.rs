//! `POST /v1/chat/completions`'s request: its JSON shape and its mapping onto the
//! completion core's [`CompletionRequest`] (messages, sampling, tools and `tool_choice`
//! through the tool grammar, `response_format` through the same constrained decoding).

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::v1::openai_error::OpenAiError;
use crate::ml::llm::completion::CompletionRequest;
use crate::ml::llm::tool_grammar::{CallMode, ToolGrammar};
use crate::ml::llm::{ChatMessage, GenerationParams, Role, ToolCall};

/// The system message when the request has none.
pub const DEFAULT_SYSTEM: &str = "You are a helpful assistant.";
/// The hidden tool whose arguments are a `response_format` answer.
pub const JSON_TOOL: &str = "json_response";
/// Most stop sequences (OpenAI's limit).
const MAX_STOP: usize = 4;
/// Most tools in one request.
pub const MAX_TOOLS: usize = 64;
/// Deepest schema nesting the grammar follows.
const MAX_SCHEMA_DEPTH: usize = 6;
/// JSON-schema keywords the grammar cannot enforce: a schema using one is refused
/// rather than silently loosened.
const UNSUPPORTED_KEYWORDS: &[&str] = &[
    "$ref",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "pattern",
    "patternProperties",
    "const",
    "prefixItems",
    "dependentSchemas",
];

/// The request body.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The model's id (`GET /v1/models`) or `knowledge-base`.
    pub model: String,
    /// The conversation.
    pub messages: Vec<InMessage>,
    /// Stream `chat.completion.chunk`s as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// `{"include_usage": true}` adds a last chunk with the usage.
    pub stream_options: Option<StreamOptions>,
    /// Most tokens to generate (older name).
    pub max_tokens: Option<u32>,
    /// Most tokens to generate.
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature, 0-2.
    pub temperature: Option<f64>,
    /// Nucleus sampling, (0, 1].
    pub top_p: Option<f64>,
    /// Stop sequences: a string or up to four.
    pub stop: Option<Stop>,
    /// Seed for sampling.
    pub seed: Option<i64>,
    /// Choices to generate: only 1.
    pub n: Option<u32>,
    /// Function tools.
    pub tools: Option<Vec<InTool>>,
    /// `auto`, `none`, `required` or `{"type":"function","function":{"name"}}`.
    pub tool_choice: Option<Value>,
    /// `text`, `json_object` or `json_schema`.
    pub response_format: Option<ResponseFormat>,
}

/// `stream_options`.
#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    /// Add a usage chunk before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// `stop`: one string or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One sequence.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// One message as the client sends it.
#[derive(Debug, Deserialize)]
pub struct InMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, an array of content parts, or null (an assistant's tool calls).
    #[serde(default)]
    pub content: Value,
    /// An assistant's tool calls.
    pub tool_calls: Option<Vec<InToolCall>>,
    /// A tool result's call id.
    pub tool_call_id: Option<String>,
}

/// A tool call in an assistant message.
#[derive(Debug, Deserialize)]
pub struct InToolCall {
    /// The call's id.
    pub id: String,
    /// The function called.
    pub function: InFunctionCall,
}

/// The function of a tool call.
#[derive(Debug, Deserialize)]
pub struct InFunctionCall {
    /// Its name.
    pub name: String,
    /// Its arguments, a JSON object as a string.
    pub arguments: String,
}

/// A tool definition.
#[derive(Debug, Deserialize)]
pub struct InTool {
    /// Only `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: InFunction,
}

/// A function definition.
#[derive(Debug, Deserialize)]
pub struct InFunction {
    /// Its name (letters, digits, `_` and `-`, at most 64).
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Option<Value>,
}

/// `response_format`.
#[derive(Debug, Deserialize)]
pub struct ResponseFormat {
    /// `text`, `json_object` or `json_schema`.
    #[serde(rename = "type")]
    pub kind: String,
    /// For `json_schema`: `{"name", "schema", "strict"}`.
    pub json_schema: Option<Value>,
}

/// What the reply must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// Text, possibly with tool calls.
    Text,
    /// One JSON value (the arguments of the hidden [`JSON_TOOL`] call).
    Json,
}

/// A request mapped onto the completion core.
#[derive(Debug)]
pub struct Mapped {
    /// The completion.
    pub completion: CompletionRequest,
    /// Text or JSON.
    pub reply: ReplyKind,
}

fn bad(param: &str, message: impl Into<String>) -> OpenAiError {
    OpenAiError::invalid(param, message)
}

/// Checks the sampling fields and `n`.
pub fn params(req: &ChatRequest) -> Result<GenerationParams, OpenAiError> {
    let mut p = GenerationParams::default();
    if let Some(n) = req.n {
        if n != 1 {
            return Err(bad(
                "n",
                format!("n must be 1 (ragd generates one choice), got {n}"),
            ));
        }
    }
    if let Some(m) = req.max_completion_tokens.or(req.max_tokens) {
        if m == 0 {
            return Err(bad("max_tokens", "max_tokens must be at least 1"));
        }
        p.max_tokens = m as usize;
    }
    if let Some(t) = req.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(bad(
                "temperature",
                format!("temperature must be between 0 and 2, got {t}"),
            ));
        }
        p.temperature = t;
    }
    if let Some(t) = req.top_p {
        if !(t > 0.0 && t <= 1.0) {
            return Err(bad("top_p", format!("top_p must be in (0, 1], got {t}")));
        }
        p.top_p = t;
    }
    if let Some(s) = req.seed {
        p.seed = s as u64;
    }
    p.stop = match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    p.stop.retain(|s| !s.is_empty());
    if p.stop.len() > MAX_STOP {
        return Err(bad("stop", format!("at most {MAX_STOP} stop sequences")));
    }
    Ok(p)
}

/// The text of a message's `content`: a string, or content parts of type `text`.
fn content_text(i: usize, content: &Value) -> Result<String, OpenAiError> {
    let param = format!("messages[{i}].content");
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => match part.get("text").and_then(Value::as_str) {
                        Some(t) => out.push(t.to_owned()),
                        None => return Err(bad(&param, "a text part needs a string 'text'")),
                    },
                    Some(kind @ ("image_url" | "input_image" | "input_audio" | "file")) => {
                        return Err(bad(
                            &param,
                            format!("content parts of type '{kind}' are not supported: ragd's models read text only"),
                        )
                        .with_code("unsupported_content"))
                    }
                    Some(other) => {
                        return Err(bad(&param, format!("unknown content part type '{other}'")))
                    }
                    None => return Err(bad(&param, "each content part needs a 'type'")),
                }
            }
            Ok(out.join("\n"))
        }
        _ => Err(bad(
            &param,
            "content must be a string or an array of content parts",
        )),
    }
}

/// The system text and the conversation.
pub fn messages(input: &[InMessage]) -> Result<(String, Vec<ChatMessage>), OpenAiError> {
    if input.is_empty() {
        return Err(bad("messages", "messages must not be empty"));
    }
    let mut system = Vec::new();
    let mut out: Vec<ChatMessage> = Vec::new();
    for (i, m) in input.iter().enumerate() {
        let text = content_text(i, &m.content)?;
        match m.role.as_str() {
            "system" | "developer" => system.push(text),
            "user" => out.push(ChatMessage::new(Role::User, text)),
            "assistant" => {
                let mut calls = Vec::new();
                for (j, c) in m.tool_calls.iter().flatten().enumerate() {
                    let arguments: Value = serde_json::from_str(&c.function.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .ok_or_else(|| {
                            bad(
                                &format!("messages[{i}].tool_calls[{j}].function.arguments"),
                                "arguments must be a JSON object written as a string",
                            )
                        })?;
                    calls.push(ToolCall {
                        id: c.id.clone(),
                        name: c.function.name.clone(),
                        arguments,
                    });
                }
                out.push(ChatMessage::assistant_calls(text, calls));
            }
            "tool" => {
                let id = m.tool_call_id.clone().ok_or_else(|| {
                    bad(
                        &format!("messages[{i}].tool_call_id"),
                        "a tool message needs tool_call_id",
                    )
                })?;
                let call = out
                    .iter()
                    .flat_map(|p| p.tool_calls.iter())
                    .find(|c| c.id == id)
                    .cloned()
                    .ok_or_else(|| {
                        bad(
                            &format!("messages[{i}].tool_call_id"),
                            format!("no earlier assistant tool call has the id '{id}'"),
                        )
                    })?;
                out.push(ChatMessage::tool_result(&call, text));
            }
            other => {
                return Err(bad(
                    &format!("messages[{i}].role"),
                    format!(
                    "unknown role '{other}': expected system, developer, user, assistant or tool"
                ),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(bad("messages", "messages need at least one user message"));
    }
    let system = if system.is_empty() {
        DEFAULT_SYSTEM.to_owned()
    } else {
        system.join("\n\n")
    };
    Ok((system, out))
}

/// Refuses a schema the grammar cannot enforce.
pub fn check_schema(param: &str, schema: &Value, depth: usize) -> Result<(), OpenAiError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(bad(
            param,
            format!("schemas nested deeper than {MAX_SCHEMA_DEPTH} levels are not supported"),
        ));
    }
    let Some(obj) = schema.as_object() else {
        return Err(bad(param, "a schema must be a JSON object"));
    };
    if let Some(k) = UNSUPPORTED_KEYWORDS.iter().find(|k| obj.contains_key(**k)) {
        return Err(bad(
            param,
            format!("the schema keyword '{k}' cannot be enforced by ragd's constrained decoding"),
        )
        .with_code("unsupported_schema"));
    }
    if let Some(t) = obj.get("type") {
        let known = [
            "object", "string", "integer", "number", "boolean", "array", "null",
        ];
        let ok = match t {
            Value::String(s) => known.contains(&s.as_str()),
            Value::Array(ts) => ts
                .iter()
                .all(|t| t.as_str().is_some_and(|s| known.contains(&s))),
            _ => false,
        };
        if !ok {
            return Err(
                bad(param, format!("unknown schema type {t}")).with_code("unsupported_schema")
            );
        }
    }
    if let Some(props) = obj.get("properties") {
        let Some(props) = props.as_object() else {
            return Err(bad(param, "'properties' must be an object"));
        };
        for v in props.values() {
            check_schema(param, v, depth + 1)?;
        }
    }
    if let Some(items) = obj.get("items") {
        check_schema(param, items, depth + 1)?;
    }
    Ok(())
}

fn object_schema(param: &str, schema: &Value) -> Result<(), OpenAiError> {
    check_schema(param, schema, 0)?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(
            bad(param, "the schema must be of type 'object'").with_code("unsupported_schema")
        );
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A checked tool: its name, its argument schema (for the grammar) and its definition
/// (OpenAI's function-tool object, for the template).
#[derive(Debug, Clone)]
pub struct ToolDef {
    /// The function's name.
    pub name: String,
    /// The JSON schema of its arguments.
    pub schema: Value,
    /// `{"type": "function", "function": {name, description, parameters}}`.
    pub spec: Value,
}

/// Checks one tool definition; `param` names it in errors (`tools[0]`). Shared by the
/// OpenAI and Anthropic routes.
pub fn tool_def(
    param: &str,
    name: &str,
    description: Option<&str>,
    parameters: Option<&Value>,
    seen: &[ToolDef],
) -> Result<ToolDef, OpenAiError> {
    if !valid_name(name) {
        return Err(bad(
            &format!("{param}.name"),
            "a tool name is 1-64 letters, digits, '_' or '-'",
        ));
    }
    if seen.iter().any(|t| t.name == name) {
        return Err(bad(
            &format!("{param}.name"),
            format!("two tools are named '{name}'"),
        ));
    }
    let schema = parameters
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    object_schema(&format!("{param}.parameters"), &schema)?;
    let spec = json!({"type": "function", "function": {
        "name": name,
        "description": description.unwrap_or_default(),
        "parameters": schema,
    }});
    Ok(ToolDef {
        name: name.to_owned(),
        schema,
        spec,
    })
}

/// Offers `tools` to `completion`: all of them, or only the one named `only`, as
/// `mode` says.
pub fn offer_tools(
    completion: &mut CompletionRequest,
    tools: &[ToolDef],
    mode: CallMode,
    only: Option<&str>,
) {
    let chosen: Vec<&ToolDef> = tools
        .iter()
        .filter(|t| only.is_none_or(|o| o == t.name))
        .collect();
    completion.tools = Some(ToolGrammar::new(
        chosen.iter().map(|t| (t.name.as_str(), &t.schema)),
    ));
    completion.tool_specs = chosen.iter().map(|t| t.spec.clone()).collect();
    completion.call_mode = mode;
}

/// The tools offered, checked.
fn tools(req: &ChatRequest) -> Result<Vec<ToolDef>, OpenAiError> {
    let list = req.tools.as_deref().unwrap_or_default();
    if list.len() > MAX_TOOLS {
        return Err(bad("tools", format!("at most {MAX_TOOLS} tools")));
    }
    let mut out: Vec<ToolDef> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if t.kind != "function" {
            return Err(bad(
                &format!("tools[{i}].type"),
                "only tools of type 'function' are supported",
            ));
        }
        let f = &t.function;
        let def = tool_def(
            &format!("tools[{i}].function"),
            &f.name,
            f.description.as_deref(),
            f.parameters.as_ref(),
            &out,
        )?;
        out.push(def);
    }
    Ok(out)
}

/// How `tool_choice` restricts the tools: (mode, only this tool), or `None` for none.
fn tool_choice(
    req: &ChatRequest,
    names: &[String],
) -> Result<Option<(CallMode, Option<String>)>, OpenAiError> {
    let choice = match &req.tool_choice {
        None => return Ok(Some((CallMode::Auto, None))),
        Some(c) => c,
    };
    match choice {
        Value::String(s) if s == "auto" => Ok(Some((CallMode::Auto, None))),
        Value::String(s) if s == "none" => Ok(None),
        Value::String(s) if s == "required" => {
            if names.is_empty() {
                return Err(bad("tool_choice", "tool_choice 'required' needs tools"));
            }
            Ok(Some((CallMode::Required, None)))
        }
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| bad("tool_choice", "a named tool_choice needs function.name"))?;
            if !names.iter().any(|n| n == name) {
                return Err(bad("tool_choice", format!("tool_choice names '{name}', which is not in tools")));
            }
            Ok(Some((CallMode::Required, Some(name.to_owned()))))
        }
        other => Err(bad(
            "tool_choice",
            format!("tool_choice must be 'auto', 'none', 'required' or {{\"type\": \"function\", \"function\": {{\"name\"}}}}, got {other}"),
        )),
    }
}

/// The JSON schema `response_format` asks for, if it asks for JSON.
fn response_schema(req: &ChatRequest) -> Result<Option<Value>, OpenAiError> {
    let Some(f) = &req.response_format else {
        return Ok(None);
    };
    match f.kind.as_str() {
        "text" => Ok(None),
        "json_object" => Ok(Some(json!({"type": "object"}))),
        "json_schema" => {
            let schema = f
                .json_schema
                .as_ref()
                .and_then(|j| j.get("schema"))
                .cloned()
                .ok_or_else(|| {
                    bad(
                        "response_format.json_schema.schema",
                        "json_schema needs a 'schema'",
                    )
                })?;
            object_schema("response_format.json_schema.schema", &schema)?;
            Ok(Some(schema))
        }
        other => Err(bad(
            "response_format.type",
            format!("response_format type must be text, json_object or json_schema, got '{other}'"),
        )),
    }
}

/// Maps a checked request onto the completion core.
pub fn map(req: &ChatRequest) -> Result<Mapped, OpenAiError> {
    let params = params(req)?;
    let (system, messages) = messages(&req.messages)?;
    let tools = tools(req)?;
    let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let choice = tool_choice(req, &names)?;
    let schema = response_schema(req)?;
    let base = CompletionRequest {
        system,
        history: Vec::new(),
        messages,
        tools: None,
        tool_specs: Vec::new(),
        call_mode: CallMode::Auto,
        params,
    };
    if let Some(schema) = schema {
        if !tools.is_empty() && choice.is_some() {
            return Err(OpenAiError::new(
                StatusCode::BAD_REQUEST,
                "response_format json_object/json_schema cannot be combined with tools (send tool_choice 'none' or leave tools out)",
            )
            .with_code("unsupported_combination"));
        }
        let mut completion = base;
        completion
            .system
            .push_str("\n\nAnswer with one JSON value only.");
        completion.tools = Some(ToolGrammar::new([(JSON_TOOL, &schema)]));
        completion.call_mode = CallMode::Required;
        return Ok(Mapped {
            completion,
            reply: ReplyKind::Json,
        });
    }
    let mut completion = base;
    if let (Some((mode, only)), false) = (choice, tools.is_empty()) {
        offer_tools(&mut completion, &tools, mode, only.as_deref());
    }
    Ok(Mapped {
        completion,
        reply: ReplyKind::Text,
    })
}
