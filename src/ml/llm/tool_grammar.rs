//! Constrained decoding of tool calls: a [`TokenFilter`] that lets the model write only
//! `<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>` where the name is one
//! of the offered tools and the arguments match that tool's JSON schema (types, enums,
//! required properties), so a small model cannot emit a broken call.
//!
//! The grammar is canonical JSON (one space after `:` and `,`, properties in schema order,
//! optional ones may be left out, no escapes in strings). Each candidate token is checked
//! by re-parsing the call so far plus the token's text; tokens whose first character can
//! never follow are rejected before that.

use std::sync::Arc;

use serde_json::Value;

use super::filter::{RemoteConstraint, TokenFilter, Vocabulary};

/// Opens a tool call in the model's output.
pub const OPEN: &str = "<tool_call>";
/// Closes a tool call.
pub const CLOSE: &str = "</tool_call>";

const MAX_STRING: usize = 512;
const MAX_ITEMS: usize = 16;
const MAX_DEPTH: usize = 6;

/// The shape a JSON value must have.
#[derive(Debug, Clone)]
pub enum Shape {
    /// A string, optionally one of fixed values, of at most this many bytes.
    Str(Option<Vec<String>>, usize),
    /// An integer.
    Integer,
    /// A number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// An array of one shape.
    Array(Box<Shape>),
    /// An object with known properties (in order) and which of them are required.
    Object(Vec<(String, Shape, bool)>),
    /// Any JSON value (objects with free keys, nested to a small depth).
    Any,
}

impl Shape {
    /// The shape of a JSON schema (the subset tools use: type, enum, properties,
    /// required, items). Unknown or missing types are `Any`.
    pub fn from_schema(schema: &Value) -> Shape {
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let strings: Vec<String> = values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            if strings.len() == values.len() && !strings.is_empty() {
                return Shape::Str(Some(strings), MAX_STRING);
            }
        }
        let ty = match schema.get("type") {
            Some(Value::String(t)) => t.as_str(),
            // ["string", "null"] and the like: the first non-null type.
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or(""),
            _ => "",
        };
        match ty {
            "string" => Shape::Str(
                None,
                schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .map_or(MAX_STRING, |m| (m as usize).min(MAX_STRING)),
            ),
            "integer" => Shape::Integer,
            "number" => Shape::Number,
            "boolean" => Shape::Boolean,
            "array" => Shape::Array(Box::new(
                schema
                    .get("items")
                    .map(Shape::from_schema)
                    .unwrap_or(Shape::Any),
            )),
            "object" => match schema.get("properties").and_then(Value::as_object) {
                Some(props) if !props.is_empty() => {
                    let required: Vec<&str> = schema
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    Shape::Object(
                        props
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.clone(),
                                    Shape::from_schema(v),
                                    required.contains(&k.as_str()),
                                )
                            })
                            .collect(),
                    )
                }
                Some(_) if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    Shape::Object(Vec::new())
                }
                _ => Shape::Any,
            },
            _ => Shape::Any,
        }
    }
}

/// The tools a call may name, with the shape of each one's arguments.
#[derive(Debug, Clone)]
pub struct ToolGrammar {
    tools: Arc<Vec<(String, Shape)>>,
    /// The schemas as given, for servers that take tools as JSON schemas.
    schemas: Arc<Vec<(String, Value)>>,
}

/// Result of parsing a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum P {
    /// A complete value ends here.
    Done(usize),
    /// The text ended inside a valid value.
    Need,
    /// Not a prefix of any valid value.
    Bad,
}

macro_rules! step {
    ($e:expr) => {
        match $e {
            P::Done(i) => i,
            other => return other,
        }
    };
}

fn lit(s: &[u8], i: usize, text: &str) -> P {
    let t = text.as_bytes();
    let n = t.len().min(s.len().saturating_sub(i));
    if s[i..i + n] != t[..n] {
        return P::Bad;
    }
    if n < t.len() {
        P::Need
    } else {
        P::Done(i + t.len())
    }
}

fn string(s: &[u8], i: usize, choices: Option<&[String]>, max: usize) -> P {
    let i = step!(lit(s, i, "\""));
    let mut j = i;
    while j < s.len() {
        let c = s[j];
        if c == b'"' {
            let body = &s[i..j];
            return match choices {
                Some(cs) if !cs.iter().any(|c| c.as_bytes() == body) => P::Bad,
                _ if body.is_empty() && choices.is_none() => P::Bad,
                _ => P::Done(j + 1),
            };
        }
        if c == b'\\' || c < 0x20 || j - i >= max {
            return P::Bad;
        }
        j += 1;
    }
    match choices {
        Some(cs) if !cs.iter().any(|c| c.as_bytes().starts_with(&s[i..])) => P::Bad,
        _ => P::Need,
    }
}

fn number(s: &[u8], i: usize, integer: bool) -> P {
    let mut j = i;
    if j < s.len() && s[j] == b'-' {
        j += 1;
    }
    let digits = j;
    while j < s.len() && s[j].is_ascii_digit() && j - digits < 15 {
        j += 1;
    }
    if j == s.len() {
        return P::Need;
    }
    if j == digits {
        return P::Bad;
    }
    if !integer && s[j] == b'.' {
        j += 1;
        let frac = j;
        while j < s.len() && s[j].is_ascii_digit() && j - frac < 8 {
            j += 1;
        }
        if j == s.len() {
            return P::Need;
        }
        if j == frac {
            return P::Bad;
        }
    }
    P::Done(j)
}

fn either(s: &[u8], i: usize, options: &[&str]) -> P {
    let mut need = false;
    for o in options {
        match lit(s, i, o) {
            P::Done(j) => return P::Done(j),
            P::Need => need = true,
            P::Bad => {}
        }
    }
    if need {
        P::Need
    } else {
        P::Bad
    }
}

fn value(shape: &Shape, s: &[u8], i: usize, depth: usize) -> P {
    if i >= s.len() {
        return P::Need;
    }
    match shape {
        Shape::Str(choices, max) => string(s, i, choices.as_deref(), *max),
        Shape::Integer => number(s, i, true),
        Shape::Number => number(s, i, false),
        Shape::Boolean => either(s, i, &["true", "false"]),
        Shape::Array(item) => array(item, s, i, depth),
        Shape::Object(props) => object(props, s, i, depth),
        Shape::Any => any(s, i, depth),
    }
}

fn array(item: &Shape, s: &[u8], i: usize, depth: usize) -> P {
    if depth >= MAX_DEPTH {
        return P::Bad;
    }
    let mut i = step!(lit(s, i, "["));
    if i >= s.len() {
        return P::Need;
    }
    if s[i] == b']' {
        return P::Done(i + 1);
    }
    for n in 0..MAX_ITEMS {
        if n > 0 {
            i = step!(lit(s, i, ", "));
        }
        i = step!(value(item, s, i, depth + 1));
        if i >= s.len() {
            return P::Need;
        }
        if s[i] == b']' {
            return P::Done(i + 1);
        }
    }
    P::Bad
}

fn object(props: &[(String, Shape, bool)], s: &[u8], i: usize, depth: usize) -> P {
    if depth >= MAX_DEPTH {
        return P::Bad;
    }
    let mut i = step!(lit(s, i, "{"));
    let mut next = 0usize;
    let mut first = true;
    loop {
        if i >= s.len() {
            return P::Need;
        }
        // The next property may be any up to and including the first required one left.
        let last = props[next..]
            .iter()
            .position(|p| p.2)
            .map(|k| next + k)
            .unwrap_or(props.len().saturating_sub(1));
        let may_close = !props[next..].iter().any(|p| p.2);
        if may_close && s[i] == b'}' {
            return P::Done(i + 1);
        }
        if next >= props.len() {
            return P::Bad;
        }
        let mut j = i;
        if !first {
            j = step!(lit(s, j, ", "));
        }
        let mut need = false;
        let mut matched = None;
        for (k, prop) in props.iter().enumerate().take(last + 1).skip(next) {
            match lit(s, j, &format!("\"{}\": ", prop.0)) {
                P::Done(e) => {
                    matched = Some((k, e));
                    break;
                }
                P::Need => need = true,
                P::Bad => {}
            }
        }
        let Some((k, e)) = matched else {
            return if need { P::Need } else { P::Bad };
        };
        i = step!(value(&props[k].1, s, e, depth + 1));
        next = k + 1;
        first = false;
    }
}

fn any(s: &[u8], i: usize, depth: usize) -> P {
    if depth >= MAX_DEPTH {
        return P::Bad;
    }
    if i >= s.len() {
        return P::Need;
    }
    match s[i] {
        b'"' => string(s, i, None, MAX_STRING),
        b'-' | b'0'..=b'9' => number(s, i, false),
        b't' | b'f' | b'n' => either(s, i, &["true", "false", "null"]),
        b'[' => array(&Shape::Any, s, i, depth),
        b'{' => {
            let mut i = i + 1;
            if i >= s.len() {
                return P::Need;
            }
            if s[i] == b'}' {
                return P::Done(i + 1);
            }
            for n in 0..MAX_ITEMS {
                if n > 0 {
                    i = step!(lit(s, i, ", "));
                }
                i = step!(string(s, i, None, MAX_STRING));
                i = step!(lit(s, i, ": "));
                i = step!(any(s, i, depth + 1));
                if i >= s.len() {
                    return P::Need;
                }
                if s[i] == b'}' {
                    return P::Done(i + 1);
                }
            }
            P::Bad
        }
        _ => P::Bad,
    }
}

impl ToolGrammar {
    /// A grammar over `tools`: (name, JSON schema of its params).
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Self {
        let schemas: Vec<(String, Value)> = tools
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s.clone()))
            .collect();
        Self {
            tools: Arc::new(
                schemas
                    .iter()
                    .map(|(n, s)| (n.clone(), Shape::from_schema(s)))
                    .collect(),
            ),
            schemas: Arc::new(schemas),
        }
    }

    /// The grammar for an inference server (see [`RemoteConstraint`]).
    pub fn remote(&self, mode: CallMode) -> RemoteConstraint {
        RemoteConstraint {
            gbnf: super::gbnf::tool_calls(&self.tools, mode),
            tools: Some((self.schemas.as_ref().clone(), mode)),
        }
    }

    /// Whether `text` (starting with [`OPEN`]) is a prefix of a valid call (`Some(false)`),
    /// a whole valid call (`Some(true)`), or neither (`None`).
    pub fn check(&self, text: &str) -> Option<bool> {
        match self.parse(text.as_bytes()) {
            P::Done(end) if end == text.len() => Some(true),
            P::Need => Some(false),
            _ => None,
        }
    }

    fn parse(&self, s: &[u8]) -> P {
        let i = step!(lit(s, 0, OPEN));
        let i = step!(lit(s, i, "{\"name\": "));
        let names: Vec<String> = self.tools.iter().map(|t| t.0.clone()).collect();
        let end = step!(string(s, i, Some(&names), MAX_STRING));
        let name = std::str::from_utf8(&s[i + 1..end - 1]).unwrap_or_default();
        let Some((_, shape)) = self.tools.iter().find(|t| t.0 == name) else {
            return P::Bad;
        };
        let i = step!(lit(s, end, ", \"arguments\": "));
        let i = step!(value(shape, s, i, 0));
        let i = step!(lit(s, i, "}"));
        lit(s, i, CLOSE)
    }
}

/// When the constraint applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMode {
    /// Free text until the model opens a tool call; the call itself is constrained.
    Auto,
    /// The output must be exactly one tool call, from the first token.
    Required,
}

/// The [`TokenFilter`] for tool calls.
pub struct ToolCallFilter {
    grammar: ToolGrammar,
    mode: CallMode,
}

impl ToolCallFilter {
    /// A filter over `grammar` in `mode`.
    pub fn new(grammar: ToolGrammar, mode: CallMode) -> Self {
        Self { grammar, mode }
    }
}

impl TokenFilter for ToolCallFilter {
    fn remote(&self) -> Option<RemoteConstraint> {
        Some(self.grammar.remote(self.mode))
    }

    fn restrict(&mut self, generated: &str, vocab: &Vocabulary, allowed: &mut [bool]) {
        let start = match self.mode {
            CallMode::Required => 0,
            CallMode::Auto => match generated.find(OPEN) {
                Some(p) => p,
                // Free text; the opener's own tokens are free too.
                None => return,
            },
        };
        let call = &generated[start..];
        let complete = self.grammar.check(call) == Some(true);
        let mut candidate = String::with_capacity(call.len() + 32);
        for (id, ok) in allowed.iter_mut().enumerate() {
            if !*ok {
                continue;
            }
            let id = id as u32;
            if vocab.is_eos(id) {
                *ok = complete;
                continue;
            }
            let t = vocab.text(id);
            if complete || vocab.is_special(id) || t.is_empty() || t.contains('\u{FFFD}') {
                *ok = false;
                continue;
            }
            candidate.clear();
            candidate.push_str(call);
            candidate.push_str(t);
            *ok = self.grammar.check(&candidate).is_some();
        }
    }
}

/// A tool call found in a model's output.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments (an object).
    pub arguments: Value,
}

/// Splits a model's output into its text and its tool calls. Calls are
/// `<tool_call>{"name", "arguments"}</tool_call>` (Qwen2/Hermes, the form the constraint
/// writes), or a bare JSON object `{"name", "parameters"|"arguments"}` after Llama 3's
/// `<|python_tag|>` or as the whole output. Malformed calls are returned as errors.
pub fn parse_calls(output: &str) -> (String, Vec<Result<ParsedCall, String>>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut rest = output;
    while let Some(p) = rest.find(OPEN) {
        text.push_str(&rest[..p]);
        let after = &rest[p + OPEN.len()..];
        let (body, next) = match after.find(CLOSE) {
            Some(e) => (&after[..e], &after[e + CLOSE.len()..]),
            None => (after, ""),
        };
        calls.push(call_from_json(body.trim()));
        rest = next;
    }
    text.push_str(rest);
    if calls.is_empty() {
        let t = text.trim();
        let json = t.strip_prefix("<|python_tag|>").unwrap_or(t).trim();
        if json.starts_with('{') && json.ends_with('}') && json.contains("\"name\"") {
            if let Ok(call) = call_from_json(json) {
                return (String::new(), vec![Ok(call)]);
            }
        }
    }
    (text.trim().to_owned(), calls)
}

fn call_from_json(body: &str) -> Result<ParsedCall, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("tool call is not JSON: {e}"))?;
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .ok_or("tool call has no name")?
        .to_owned();
    let arguments = v
        .get("arguments")
        .or_else(|| v.get("parameters"))
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let arguments = match arguments {
        // Some models write the arguments as a JSON string.
        Value::String(s) => serde_json::from_str(&s).map_err(|e| format!("arguments: {e}"))?,
        other => other,
    };
    if !arguments.is_object() {
        return Err("tool call arguments must be an object".into());
    }
    Ok(ParsedCall { name, arguments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grammar() -> ToolGrammar {
        let calc = json!({"type": "object", "properties": {"expression": {"type": "string"}},
                          "required": ["expression"]});
        let search = json!({"type": "object", "properties": {
            "query": {"type": "string"}, "top_k": {"type": "integer"},
            "mode": {"enum": ["hybrid", "dense"]}, "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["query"]});
        let none = json!({"type": "object", "properties": {}});
        let filter = json!({"type": "object", "properties": {"where": {"type": "object"}}, "required": ["where"]});
        ToolGrammar::new([
            ("calculate", &calc),
            ("search_knowledge_base", &search),
            ("get_current_datetime", &none),
            ("delete_by_filter", &filter),
        ])
        .clone()
    }

    #[test]
    fn accepts_valid_calls_and_their_prefixes() {
        let g = grammar();
        for call in [
            r#"<tool_call>{"name": "calculate", "arguments": {"expression": "2+3"}}</tool_call>"#,
            r#"<tool_call>{"name": "search_knowledge_base", "arguments": {"query": "pump", "mode": "dense"}}</tool_call>"#,
            r#"<tool_call>{"name": "search_knowledge_base", "arguments": {"query": "x", "top_k": 12, "tags": ["a", "b"]}}</tool_call>"#,
            r#"<tool_call>{"name": "get_current_datetime", "arguments": {}}</tool_call>"#,
            r#"<tool_call>{"name": "delete_by_filter", "arguments": {"where": {"source": {"$in": ["a", 1]}}}}</tool_call>"#,
        ] {
            assert_eq!(g.check(call), Some(true), "{call}");
            for cut in 0..call.len() {
                assert_eq!(g.check(&call[..cut]), Some(false), "{}", &call[..cut]);
            }
            let (_, calls) = parse_calls(call);
            assert!(calls[0].is_ok(), "{call}");
        }
    }

    #[test]
    fn rejects_what_breaks_the_schema() {
        let g = grammar();
        for bad in [
            r#"<tool_call>{"name": "rm_rf""#,
            r#"<tool_call>{"name": "calculate", "arguments": {}}"#,
            r#"<tool_call>{"name": "calculate", "arguments": {"expression": 5"#,
            r#"<tool_call>{"name": "search_knowledge_base", "arguments": {"top_k": 1"#,
            r#"<tool_call>{"name": "search_knowledge_base", "arguments": {"query": "x", "top_k": 1.5"#,
            r#"<tool_call>{"name": "search_knowledge_base", "arguments": {"query": "x", "mode": "fuzzy"#,
            r#"<tool_call>{"name": "calculate", "arguments": {"expression": "1"}} trailing"#,
            r#"<tool_call>{"name": "calculate", "arguments": {"expression": "a\n"#,
        ] {
            assert_eq!(g.check(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_the_formats_of_the_families() {
        let (text, calls) = parse_calls(
            "Let me look.<tool_call>\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>",
        );
        assert_eq!(text, "Let me look.");
        assert_eq!(calls[0].as_ref().unwrap().arguments["expression"], "1+1");
        let (_, calls) = parse_calls(
            "<|python_tag|>{\"name\": \"calculate\", \"parameters\": {\"expression\": \"2\"}}",
        );
        assert_eq!(calls[0].as_ref().unwrap().name, "calculate");
        let (_, calls) = parse_calls("<tool_call>{\"name\": }</tool_call>");
        assert!(calls[0].is_err());
        let (text, calls) = parse_calls("Just an answer.");
        assert!(calls.is_empty());
        assert_eq!(text, "Just an answer.");
    }
}
