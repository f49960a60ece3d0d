//! The chat prompt, laid out for the LLM's prompt cache: what repeats from turn to turn
//! comes first (the instructions, then the conversation so far), what belongs to this
//! turn last (the few tools offered, with their schemas and the call format, and any
//! attached files, placed before the user's own message). A turn's prompt therefore
//! starts with the previous turn's, and the engine reuses its computed state.

use serde_json::Value;

use crate::assistant::tools::ToolInfo;
use crate::ml::llm::tool_grammar::{CLOSE, OPEN};

/// The assistant's default instructions.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are ragd, a helpful assistant that runs \
entirely on the user's own machine. Answer clearly and briefly. Do not invent facts, \
dates, times or numbers.";

/// The system message: the caller's instructions or ours, the same every turn.
pub fn system_message(instructions: Option<&str>) -> String {
    instructions
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(DEFAULT_SYSTEM_PROMPT)
        .trim()
        .to_owned()
}

/// This turn's user message: the tools offered (name, description and the properties of
/// its schema) with the call format, the attached files, then the message itself.
pub fn turn_message(message: &str, tools: &[ToolInfo], attachments: &str) -> String {
    let mut s = String::new();
    if !tools.is_empty() {
        s.push_str(&format!(
            "Tools you can call, by writing {OPEN}{{\"name\": \"<tool>\", \"arguments\": \
             {{...}}}}{CLOSE}:\n"
        ));
        for t in tools {
            let schema = t
                .schema
                .as_ref()
                .and_then(|s| s.get("properties"))
                .cloned()
                .unwrap_or(Value::Object(Default::default()));
            s.push_str(&format!(
                "- {}: {} Arguments: {}\n",
                t.tool_name, t.description, schema
            ));
        }
        s.push('\n');
    }
    if !attachments.is_empty() {
        s.push_str("Files attached to this message:\n\n");
        s.push_str(attachments);
        s.push_str("\n\n");
    }
    if s.is_empty() {
        return message.to_owned();
    }
    s.push_str("Message: ");
    s.push_str(message);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_message_is_the_same_whatever_the_turn_holds() {
        assert_eq!(system_message(None), DEFAULT_SYSTEM_PROMPT);
        assert_eq!(system_message(Some("  ")), DEFAULT_SYSTEM_PROMPT);
        assert_eq!(system_message(Some(" Be terse. ")), "Be terse.");
        assert_eq!(turn_message("hi", &[], ""), "hi");
        let t = turn_message("see file", &[], "--- a.md ---\nbody");
        assert!(
            t.starts_with("Files attached") && t.ends_with("Message: see file"),
            "{t}"
        );
    }
}
