//! The GGUF's own chat template (`tokenizer.chat_template`), run by minijinja in the
//! environment Hugging Face's `apply_chat_template` gives it: `trim_blocks`,
//! `lstrip_blocks`, loop controls, Python's string methods (minijinja-contrib's pycompat),
//! Python's `tojson` ([`pyjson`](super::pyjson)), `raise_exception` and `strftime_now`;
//! the context holds `messages` (tool calls in OpenAI's shape, tool results with role
//! `tool`, `tool_call_id` and `name`), `tools` when there are any, `add_generation_prompt`,
//! `bos_token` and `eos_token`.
//!
//! Message text never becomes control tokens: the template is rendered with a placeholder
//! for each caller text (message content, string values of tool-call arguments), and the
//! output is cut into the template's own text, where the tokenizer recognises control
//! tokens, and the caller's text, which it does not. A placeholder holds `\x01`, which JSON
//! spells `\u0001`, so a text the template passed through `tojson` is put back
//! JSON-escaped. Caller text is trimmed of surrounding whitespace first, as most templates
//! do themselves; a template that transforms the text (slices it, tests what it contains)
//! sees the placeholder instead.
//!
//! What the template cannot take is adapted, found by rendering probe chats at load: no
//! system role (Gemma raises) puts the system prompt before the first user message; tool
//! calls the template drops are written into the assistant's text as
//! `<tool_call>{json}</tool_call>`; a `tool` role it drops or refuses becomes a user
//! message.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind};
use regex::Regex;
use serde_json::{json, Map, Value as Json};

use super::super::{ChatMessage, MlError, Role, ToolCall};
use super::{pyjson, Part};

/// What the template does with the parts of a chat, found at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// It renders a `system` message.
    pub system: bool,
    /// It renders an assistant's `tool_calls`.
    pub tool_calls: bool,
    /// It renders a `tool` message.
    pub tool_role: bool,
    /// It renders the tool definitions (`tools`).
    pub tools: bool,
}

/// A compiled chat template with its special tokens and capabilities.
pub struct JinjaTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    caps: Capabilities,
}

impl std::fmt::Debug for JinjaTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinjaTemplate")
            .field("caps", &self.caps)
            .finish()
    }
}

const NAME: &str = "chat_template";
const PROBE_SYSTEM: &str = "ragd probe system";
const PROBE_USER: &str = "ragd probe user";
const PROBE_TOOL: &str = "ragd_probe_tool";
const PROBE_RESULT: &str = "ragd probe result";

/// A caller text's placeholder, as written and as `tojson` writes it.
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x01ragd(\d+)\x01|\\u0001ragd(\d+)\\u0001").unwrap_or_else(|e| {
        // A constant pattern: only a bug in it can get here.
        unreachable!("placeholder pattern: {e}")
    })
});

impl JinjaTemplate {
    /// Compiles `source` and probes what it renders. `now` fixes `strftime_now` (tests);
    /// `None` is the clock. An error when the template does not compile or cannot render
    /// a single user message.
    pub fn new(
        source: &str,
        bos: &str,
        eos: &str,
        now: Option<DateTime<Utc>>,
    ) -> Result<Self, MlError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", pyjson::tojson);
        env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_function("strftime_now", move |format: String| {
            now.unwrap_or_else(Utc::now).format(&format).to_string()
        });
        env.add_template_owned(NAME, source.to_owned())
            .map_err(|e| MlError::Load(format!("chat template does not compile: {e}")))?;
        let mut t = Self {
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
            caps: Capabilities {
                system: true,
                tool_calls: true,
                tool_role: true,
                tools: true,
            },
        };
        t.caps = t.probe()?;
        Ok(t)
    }

    /// What the template renders.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// The template's text for `messages` as given (no placeholders, no adaptation): what
    /// Python's jinja2 renders from the same chat.
    pub fn render_text(
        &self,
        messages: &[ChatMessage],
        tools: &[Json],
        add_generation_prompt: bool,
    ) -> Result<String, MlError> {
        let msgs: Vec<Json> = messages
            .iter()
            .map(|m| message_json(m, &mut |s| s.to_owned()))
            .collect();
        self.run(msgs, tools, add_generation_prompt)
    }

    /// What [`JinjaTemplate::render`] makes of a chat, as `(caller_text, text)` pieces in
    /// order: `true` for the caller's text (never control tokens), `false` for the
    /// template's own.
    pub fn render_split(
        &self,
        messages: &[ChatMessage],
        tools: &[Json],
    ) -> Result<Vec<(bool, String)>, MlError> {
        Ok(self
            .render(messages, tools)?
            .into_iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some((true, t)),
                Part::Template(t) => Some((false, t)),
                _ => None,
            })
            .collect())
    }

    /// The prompt for `messages`, ending where the assistant's answer begins: the
    /// template's own text as [`Part::Template`], the caller's as [`Part::Text`].
    pub(in crate::ml::llm) fn render(
        &self,
        messages: &[ChatMessage],
        tools: &[Json],
    ) -> Result<Vec<Part>, MlError> {
        let adapted = self.adapt(messages);
        let mut texts: Vec<String> = Vec::new();
        let msgs: Vec<Json> = adapted
            .iter()
            .map(|m| message_json(m, &mut |s| placeholder(&mut texts, s)))
            .collect();
        // Tool definitions are caller text too: their descriptions are placeholders; their
        // other strings (names, types, enum values), which templates may compare, are
        // checked by the tokenizer for control tokens instead.
        let tools: Vec<Json> = tools
            .iter()
            .map(|t| map_descriptions(t, &mut |s| placeholder(&mut texts, s)))
            .collect();
        let out = self.run(msgs, &tools, true)?;
        split(&out, &texts)
    }

    fn run(&self, messages: Vec<Json>, tools: &[Json], add_gen: bool) -> Result<String, MlError> {
        let template = self
            .env
            .get_template(NAME)
            .map_err(|e| MlError::Inference(format!("chat template: {e}")))?;
        let mut ctx = Map::new();
        ctx.insert("messages".into(), Json::Array(messages));
        if !tools.is_empty() {
            ctx.insert("tools".into(), Json::Array(tools.to_vec()));
        }
        ctx.insert("add_generation_prompt".into(), Json::Bool(add_gen));
        ctx.insert("bos_token".into(), Json::String(self.bos.clone()));
        ctx.insert("eos_token".into(), Json::String(self.eos.clone()));
        template
            .render(Value::from_serialize(Json::Object(ctx)))
            .map_err(|e| MlError::Inference(format!("chat template: {e:#}")))
    }

    /// Renders probe chats to learn what the template takes.
    fn probe(&self) -> Result<Capabilities, MlError> {
        let user = ChatMessage::new(Role::User, PROBE_USER);
        let shows = |msgs: &[ChatMessage], marker: &str| {
            self.render_text(msgs, &[], true)
                .map(|t| t.contains(marker))
                .unwrap_or(false)
        };
        let base = self.render_text(std::slice::from_ref(&user), &[], true)?;
        if !base.contains(PROBE_USER) {
            return Err(MlError::Load(
                "chat template does not render the user's message".into(),
            ));
        }
        let system = shows(
            &[ChatMessage::new(Role::System, PROBE_SYSTEM), user.clone()],
            PROBE_SYSTEM,
        );
        let spec = json!({"type": "function", "function": {
            "name": PROBE_TOOL,
            "description": PROBE_RESULT,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }});
        let tools = self
            .render_text(std::slice::from_ref(&user), &[spec], true)
            .map(|t| t.contains(PROBE_TOOL))
            .unwrap_or(false);
        let call = ToolCall {
            id: ToolCall::id_for(1),
            name: PROBE_TOOL.into(),
            arguments: json!({"q": "x"}),
        };
        let calling = ChatMessage::assistant_calls("", vec![call.clone()]);
        let tool_calls = shows(&[user.clone(), calling.clone()], PROBE_TOOL);
        let answered = if tool_calls {
            calling
        } else {
            ChatMessage::new(Role::Assistant, "ok")
        };
        let tool_role = shows(
            &[
                user,
                answered,
                ChatMessage::tool_result(&call, PROBE_RESULT),
            ],
            PROBE_RESULT,
        );
        Ok(Capabilities {
            system,
            tool_calls,
            tool_role,
            tools,
        })
    }

    /// `messages` changed into what the template takes (see the module docs).
    fn adapt(&self, messages: &[ChatMessage]) -> Vec<ChatMessage> {
        let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
        let mut system: Vec<String> = Vec::new();
        for m in messages {
            let mut m = m.clone();
            if m.role == Role::System && !self.caps.system {
                system.push(m.content.trim().to_owned());
                continue;
            }
            if !m.tool_calls.is_empty() && !self.caps.tool_calls {
                m.content = super::inline_calls(&m);
                m.tool_calls.clear();
            }
            if m.role == Role::Tool && !self.caps.tool_role {
                m = ChatMessage::new(Role::User, format!("Tool result:\n{}", m.content.trim()));
            }
            match out.last_mut() {
                // Two user turns in a row (a tool result after a question): one turn, as
                // templates that insist on alternation want.
                Some(last) if last.role == Role::User && m.role == Role::User => {
                    last.content = format!("{}\n\n{}", last.content.trim(), m.content.trim());
                }
                _ => out.push(m),
            }
        }
        if !system.is_empty() {
            let system = system.join("\n\n");
            match out.iter_mut().find(|m| m.role == Role::User) {
                Some(first) => first.content = format!("{system}\n\n{}", first.content.trim()),
                None => out.insert(0, ChatMessage::new(Role::User, system)),
            }
        }
        out
    }
}

/// One message as templates expect it; `text` maps each caller text (content, string
/// values of tool-call arguments) to what the template sees.
fn message_json(m: &ChatMessage, text: &mut dyn FnMut(&str) -> String) -> Json {
    let mut o = Map::new();
    o.insert("role".into(), Json::String(m.role.as_str().into()));
    o.insert("content".into(), Json::String(text(&m.content)));
    if !m.tool_calls.is_empty() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": map_strings(&c.arguments, text)},
                })
            })
            .collect();
        o.insert("tool_calls".into(), Json::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), Json::String(id.clone()));
    }
    if let Some(name) = &m.name {
        o.insert("name".into(), Json::String(name.clone()));
    }
    Json::Object(o)
}

fn map_strings(v: &Json, text: &mut dyn FnMut(&str) -> String) -> Json {
    match v {
        Json::String(s) => Json::String(text(s)),
        Json::Array(a) => Json::Array(a.iter().map(|x| map_strings(x, text)).collect()),
        Json::Object(o) => Json::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), map_strings(x, text)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The placeholder of caller text `s` (trimmed; empty stays empty), which `texts` keeps.
fn placeholder(texts: &mut Vec<String>, s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    texts.push(s.to_owned());
    format!("\x01ragd{}\x01", texts.len() - 1)
}

/// `v` with the string values of its `description` keys (at any depth) mapped by `text`.
fn map_descriptions(v: &Json, text: &mut dyn FnMut(&str) -> String) -> Json {
    match v {
        Json::Array(a) => Json::Array(a.iter().map(|x| map_descriptions(x, text)).collect()),
        Json::Object(o) => Json::Object(
            o.iter()
                .map(|(k, x)| {
                    let x = match x {
                        Json::String(s) if k == "description" => Json::String(text(s)),
                        other => map_descriptions(other, text),
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Cuts the rendered `out` at its placeholders.
fn split(out: &str, texts: &[String]) -> Result<Vec<Part>, MlError> {
    let mut parts = Vec::new();
    let mut at = 0;
    for c in PLACEHOLDER.captures_iter(out) {
        let whole = c.get(0).map_or(0..0, |m| m.range());
        let (n, json_escaped) = match (c.get(1), c.get(2)) {
            (Some(n), _) => (n.as_str(), false),
            (_, Some(n)) => (n.as_str(), true),
            _ => continue,
        };
        let text = n
            .parse::<usize>()
            .ok()
            .and_then(|n| texts.get(n))
            .ok_or_else(|| MlError::Inference("chat template: a stray placeholder".into()))?;
        if whole.start > at {
            parts.push(Part::Template(out[at..whole.start].to_owned()));
        }
        let text = if json_escaped {
            let quoted = Json::String(text.clone()).to_string();
            quoted[1..quoted.len() - 1].to_owned()
        } else {
            text.clone()
        };
        parts.push(Part::Text(text));
        at = whole.end;
    }
    if at < out.len() {
        parts.push(Part::Template(out[at..].to_owned()));
    }
    let cut = parts
        .iter()
        .any(|p| matches!(p, Part::Template(t) if t.contains('\x01') || t.contains("\\u0001ragd")));
    if cut {
        return Err(MlError::Inference(
            "chat template: the template changes message text (a placeholder was cut)".into(),
        ));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools section of Qwen 2.5's template, cut down.
    const TOOLS_TEMPLATE: &str = "{%- if tools %}<|im_start|>system\n{{ messages[0].content }}\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools><|im_end|>\n{% endif %}{% for m in messages %}{% if m.role != 'system' or not tools %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

    #[test]
    fn tool_definitions_go_through_the_template_with_descriptions_as_caller_text() {
        let t = JinjaTemplate::new(TOOLS_TEMPLATE, "", "<|im_end|>", None).unwrap();
        assert!(t.capabilities().tools);
        let messages = [
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "find it"),
        ];
        let tools = [json!({"type": "function", "function": {
            "name": "search",
            "description": "Finds \"things\" <|im_start|>",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }})];
        let parts = t.render(&messages, &tools).unwrap();
        let joined: String = parts
            .iter()
            .map(|p| match p {
                Part::Template(s) | Part::Text(s) => s.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(joined, t.render_text(&messages, &tools, true).unwrap());
        // The description (JSON-escaped, as tojson wrote it) is caller text.
        assert!(parts
            .iter()
            .any(|p| matches!(p, Part::Text(s) if s == "Finds \\\"things\\\" <|im_start|>")));
        assert!(joined.contains("\"name\": \"search\""), "{joined}");
    }

    #[test]
    fn a_template_without_tools_says_so() {
        let plain = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
        let t = JinjaTemplate::new(plain, "", "", None).unwrap();
        assert!(!t.capabilities().tools);
    }
}
