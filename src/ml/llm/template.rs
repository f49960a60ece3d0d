//! Chat templates. A GGUF's own `tokenizer.chat_template` is run by a Jinja engine
//! ([`jinja`]); this file holds the fallback for files without one (or whose template
//! does not compile): four layouts written out in Rust, chosen by markers in the template
//! text, else by the architecture and the vocabulary.

pub mod jinja;
mod pyjson;

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;

use super::model::md_str;
use super::{ChatMessage, Role};

pub use jinja::{Capabilities, JinjaTemplate};

/// The chat formats ragd writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>` (Llama 3).
    Llama3,
    /// `[INST] <<SYS>>..<</SYS>> user [/INST] answer </s><s>[INST] ..` (Llama 2, Mistral).
    Llama2,
    /// `<|im_start|>role\ncontent<|im_end|>\n` (Qwen2, ChatML models).
    ChatMl,
    /// `<|user|>\ncontent<|end|>\n` (Phi-3).
    Phi3,
    /// `<start_of_turn>user\ncontent<end_of_turn>\n`, the answer's turn named `model`, no
    /// system role (Gemma 2 and 3: the system prompt opens the first user turn).
    Gemma,
}

/// One piece of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    /// A control token, by its text.
    Special(&'static str),
    /// The model's beginning-of-sequence token.
    Bos,
    /// The model's end-of-sequence token.
    Eos,
    /// Plain text (control tokens in it are not recognised).
    Text(String),
    /// A template's own text, in which control tokens are recognised.
    Template(String),
}

/// The tool definitions `tools` (OpenAI's function-tool objects) as text for the system
/// message, with the call format ragd's tool grammar reads: for models whose template does
/// not render `tools`. The same layout the assistant writes into its turns.
pub fn describe_tools(tools: &[serde_json::Value]) -> String {
    let mut s = String::from(
        "Tools you can call, by writing <tool_call>{\"name\": \"<tool>\", \"arguments\": {...}}</tool_call>:\n",
    );
    for t in tools {
        let f = t.get("function").unwrap_or(t);
        let name = f.get("name").and_then(|v| v.as_str()).unwrap_or_default();
        let description = f
            .get("description")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .trim();
        let arguments = f
            .get("parameters")
            .and_then(|p| p.get("properties"))
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        let sep = if description.is_empty() { "" } else { " " };
        s.push_str(&format!(
            "- {name}:{sep}{description} Arguments: {arguments}\n"
        ));
    }
    s
}

/// `messages` with `tools` described at the end of the system message (one is added
/// first when there is none).
pub(in crate::ml::llm) fn with_described_tools(
    messages: &[ChatMessage],
    tools: &[serde_json::Value],
) -> Vec<ChatMessage> {
    let text = describe_tools(tools);
    let mut out = messages.to_vec();
    match out.iter_mut().find(|m| m.role == Role::System) {
        Some(system) => system.content = format!("{}\n\n{text}", system.content.trim()),
        None => out.insert(0, ChatMessage::new(Role::System, text)),
    }
    out
}

/// An assistant message's text with its tool calls written after it as
/// `<tool_call>{"name": .., "arguments": ..}</tool_call>` (ragd's tool-call grammar), for
/// templates that do not render `tool_calls`.
pub(in crate::ml::llm) fn inline_calls(m: &ChatMessage) -> String {
    let mut out = m.content.trim().to_owned();
    for c in &m.tool_calls {
        let call = serde_json::json!({"name": c.name, "arguments": c.arguments});
        out.push_str(&format!("<tool_call>{call}</tool_call>"));
    }
    out
}

impl ChatTemplate {
    /// The template for a model: markers in its Jinja template first, then its family.
    /// `arch` is `general.architecture`.
    pub fn detect(
        md: &HashMap<String, Value>,
        arch: &str,
        has_token: impl Fn(&str) -> bool,
    ) -> Self {
        if let Some(jinja) = md_str(md, "tokenizer.chat_template") {
            if jinja.contains("<|start_header_id|>") {
                return ChatTemplate::Llama3;
            }
            if jinja.contains("<|im_start|>") {
                return ChatTemplate::ChatMl;
            }
            if jinja.contains("<|user|>") && jinja.contains("<|end|>") {
                return ChatTemplate::Phi3;
            }
            if jinja.contains("[INST]") {
                return ChatTemplate::Llama2;
            }
        }
        match arch {
            "qwen2" | "qwen3" => ChatTemplate::ChatMl,
            "gemma2" | "gemma3" => ChatTemplate::Gemma,
            "phi3" => ChatTemplate::Phi3,
            _ if has_token("<|start_header_id|>") => ChatTemplate::Llama3,
            _ if has_token("<|im_start|>") => ChatTemplate::ChatMl,
            _ => ChatTemplate::Llama2,
        }
    }

    /// Control tokens that end the assistant's turn (besides the model's EOS).
    pub fn end_tokens(self) -> &'static [&'static str] {
        match self {
            ChatTemplate::Llama3 => &["<|eot_id|>", "<|end_of_text|>"],
            ChatTemplate::Llama2 => &[],
            ChatTemplate::ChatMl => &["<|im_end|>", "<|endoftext|>"],
            ChatTemplate::Phi3 => &["<|end|>", "<|endoftext|>"],
            ChatTemplate::Gemma => &["<end_of_turn>"],
        }
    }

    /// The prompt for `messages`, ending where the assistant's answer begins. The BOS token
    /// at the very start is not included (the tokenizer adds it when the model wants it).
    pub(super) fn render(self, messages: &[ChatMessage]) -> Vec<Part> {
        let inlined: Vec<ChatMessage>;
        let messages = if messages.iter().any(|m| !m.tool_calls.is_empty()) {
            inlined = messages
                .iter()
                .map(|m| ChatMessage::new(m.role, inline_calls(m)))
                .collect();
            &inlined
        } else {
            messages
        };
        let mut out = Vec::new();
        match self {
            ChatTemplate::ChatMl => {
                for m in messages {
                    out.push(Part::Special("<|im_start|>"));
                    out.push(Part::Text(format!("{}\n{}", m.role.as_str(), m.content)));
                    out.push(Part::Special("<|im_end|>"));
                    out.push(Part::Text("\n".into()));
                }
                out.push(Part::Special("<|im_start|>"));
                out.push(Part::Text("assistant\n".into()));
            }
            ChatTemplate::Llama3 => {
                let header = |out: &mut Vec<Part>, role: &str| {
                    out.push(Part::Special("<|start_header_id|>"));
                    out.push(Part::Text(role.to_owned()));
                    out.push(Part::Special("<|end_header_id|>"));
                };
                for m in messages {
                    let role = if m.role == Role::Tool {
                        "ipython"
                    } else {
                        m.role.as_str()
                    };
                    header(&mut out, role);
                    out.push(Part::Text(format!("\n\n{}", m.content.trim())));
                    out.push(Part::Special("<|eot_id|>"));
                }
                header(&mut out, "assistant");
                out.push(Part::Text("\n\n".into()));
            }
            ChatTemplate::Phi3 => {
                for m in messages {
                    out.push(Part::Special(match m.role {
                        Role::System => "<|system|>",
                        Role::User | Role::Tool => "<|user|>",
                        Role::Assistant => "<|assistant|>",
                    }));
                    out.push(Part::Text(format!("\n{}", m.content)));
                    out.push(Part::Special("<|end|>"));
                    out.push(Part::Text("\n".into()));
                }
                out.push(Part::Special("<|assistant|>"));
                out.push(Part::Text("\n".into()));
            }
            ChatTemplate::Llama2 => render_llama2(messages, &mut out),
            ChatTemplate::Gemma => render_gemma(messages, &mut out),
        }
        out
    }
}

/// Gemma has no system role: system prompts open the first user turn (as Gemma's own
/// template does), and tool results are user turns.
fn render_gemma(messages: &[ChatMessage], out: &mut Vec<Part>) {
    let mut system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.trim())
        .collect();
    for m in messages.iter().filter(|m| m.role != Role::System) {
        let role = if m.role == Role::Assistant {
            "model"
        } else {
            "user"
        };
        let mut text = String::new();
        if m.role != Role::Assistant && !system.is_empty() {
            text = format!("{}\n\n", system.join("\n"));
            system.clear();
        }
        text.push_str(m.content.trim());
        out.push(Part::Special("<start_of_turn>"));
        out.push(Part::Text(format!("{role}\n{text}")));
        out.push(Part::Special("<end_of_turn>"));
        out.push(Part::Text("\n".into()));
    }
    if !system.is_empty() {
        out.push(Part::Special("<start_of_turn>"));
        out.push(Part::Text(format!("user\n{}", system.join("\n"))));
        out.push(Part::Special("<end_of_turn>"));
        out.push(Part::Text("\n".into()));
    }
    out.push(Part::Special("<start_of_turn>"));
    out.push(Part::Text("model\n".into()));
}

/// Llama 2 folds the system prompt into the first user turn; each answered turn is closed
/// with EOS and the next opened with BOS.
fn render_llama2(messages: &[ChatMessage], out: &mut Vec<Part>) {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let mut system = (!system.is_empty()).then(|| system.join("\n"));
    let mut first = true;
    for m in messages.iter().filter(|m| m.role != Role::System) {
        match m.role {
            Role::Assistant => {
                out.push(Part::Text(format!(" {} ", m.content.trim())));
                out.push(Part::Eos);
            }
            _ => {
                if !first {
                    out.push(Part::Bos);
                }
                let sys = system
                    .take()
                    .map(|s| format!("<<SYS>>\n{s}\n<</SYS>>\n\n"))
                    .unwrap_or_default();
                out.push(Part::Text(format!(
                    "[INST] {sys}{} [/INST]",
                    m.content.trim()
                )));
            }
        }
        first = false;
    }
    if first {
        // Only a system prompt: it still opens an instruction.
        let sys = system
            .map(|s| format!("<<SYS>>\n{s}\n<</SYS>>\n\n"))
            .unwrap_or_default();
        out.push(Part::Text(format!("[INST] {sys} [/INST]")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(parts: &[Part]) -> String {
        parts
            .iter()
            .map(|p| match p {
                Part::Special(s) => (*s).to_owned(),
                Part::Bos => "<s>".into(),
                Part::Eos => "</s>".into(),
                Part::Text(t) | Part::Template(t) => t.clone(),
            })
            .collect()
    }

    fn chat() -> Vec<ChatMessage> {
        vec![
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "Hi"),
            ChatMessage::new(Role::Assistant, "Hello"),
            ChatMessage::new(Role::User, "Why?"),
        ]
    }

    #[test]
    fn chatml_matches_qwen() {
        assert_eq!(
            text(&ChatTemplate::ChatMl.render(&chat())),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
             <|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n\
             <|im_start|>assistant\n"
        );
    }

    #[test]
    fn llama3_headers() {
        let t = text(&ChatTemplate::Llama3.render(&chat()[..2]));
        assert_eq!(
            t,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>\
             <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        );
    }

    #[test]
    fn llama2_folds_system_into_first_turn() {
        assert_eq!(
            text(&ChatTemplate::Llama2.render(&chat())),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Why? [/INST]"
        );
    }

    /// What Gemma 3's own template writes for the same chat (the system prompt opens the
    /// first user turn; Gemma 2's template refuses a system message instead).
    #[test]
    fn gemma_turns_fold_the_system_prompt() {
        assert_eq!(
            text(&ChatTemplate::Gemma.render(&chat())),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n\
             <start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn phi3_turns() {
        assert_eq!(
            text(&ChatTemplate::Phi3.render(&chat()[1..2])),
            "<|user|>\nHi<|end|>\n<|assistant|>\n"
        );
    }

    #[test]
    fn detection_prefers_the_jinja_markers() {
        let mut md = HashMap::new();
        md.insert(
            "tokenizer.chat_template".to_owned(),
            Value::String("{% for m in messages %}<|im_start|>{{ m.role }}".into()),
        );
        assert_eq!(
            ChatTemplate::detect(&md, "llama", |_| false),
            ChatTemplate::ChatMl
        );
        let md = HashMap::new();
        assert_eq!(
            ChatTemplate::detect(&md, "phi3", |_| false),
            ChatTemplate::Phi3
        );
        assert_eq!(
            ChatTemplate::detect(&md, "llama", |t| t == "<|start_header_id|>"),
            ChatTemplate::Llama3
        );
        assert_eq!(
            ChatTemplate::detect(&md, "llama", |_| false),
            ChatTemplate::Llama2
        );
    }
}
