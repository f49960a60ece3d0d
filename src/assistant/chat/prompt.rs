//! The chat prompt: instructions (the caller's or ours), the tools the user may call with
//! their schemas and the call format, the knowledge-base passages for this turn, and as
//! much of the conversation as the window holds beside them and the answer.

use serde_json::Value;

use crate::assistant::tools::ToolInfo;
use crate::kb::query::format_context;
use crate::kb::SearchHit;
use crate::ml::llm::tool_grammar::{CLOSE, OPEN};
use crate::ml::llm::{ChatMessage, Generator, Prompt, Role};

/// The assistant's default instructions.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are ragd, a helpful assistant that runs \
entirely on the user's own machine. Answer clearly and briefly. When knowledge-base \
sources are given, answer from them and cite them as [n]; if they do not hold the answer, \
say so.";

/// Tokens kept free beside the counted prompt.
const SAFETY_TOKENS: usize = 16;

/// The system message: instructions, tools and sources.
pub fn system_message(
    instructions: Option<&str>,
    tools: &[ToolInfo],
    hits: &[SearchHit],
    attachments: &str,
) -> String {
    let mut s = instructions
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(DEFAULT_SYSTEM_PROMPT)
        .trim()
        .to_owned();
    if !tools.is_empty() {
        s.push_str(&format!(
            "\n\nYou can call tools. To call one, write exactly {OPEN}{{\"name\": \"<tool>\", \
             \"arguments\": {{...}}}}{CLOSE} and nothing after it; its result comes back as a \
             tool message. Tools:\n"
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
    }
    if !hits.is_empty() {
        s.push_str("\n\nKnowledge-base sources for this question:\n\n");
        s.push_str(&format_context(hits));
    }
    if !attachments.is_empty() {
        s.push_str("\n\nFiles the user attached to this message:\n\n");
        s.push_str(attachments);
    }
    s
}

/// The whole prompt: system, the newest history that fits, and the turn's messages
/// (the user's message, then any tool rounds of this turn). Returns the prompt and the
/// answer's room in tokens.
pub fn build(
    llm: &dyn Generator,
    system: &str,
    history: &[ChatMessage],
    turn: &[ChatMessage],
    max_tokens: usize,
) -> Result<(Prompt, usize), String> {
    let window = llm.info().context_length;
    let mut fixed = vec![ChatMessage::new(Role::System, system)];
    fixed.extend(turn.iter().cloned());
    let base = llm
        .count_prompt_tokens(&Prompt::Chat(fixed.clone()))
        .map_err(|e| e.to_string())?
        + SAFETY_TOKENS;
    if base + 1 >= window {
        return Err(format!(
            "the message, instructions and tools are {base} tokens; the model's window is {window}"
        ));
    }
    let max_tokens = max_tokens.min((window - base) / 2).max(1);
    let mut budget = window - base - max_tokens;
    let mut kept: Vec<ChatMessage> = Vec::new();
    for m in history.iter().rev() {
        let cost = llm.count_tokens(&m.content) + 8;
        if cost > budget {
            break;
        }
        budget -= cost;
        kept.push(m.clone());
    }
    kept.reverse();
    let mut messages = vec![fixed.remove(0)];
    messages.extend(kept);
    messages.extend(fixed);
    Ok((Prompt::Chat(messages), max_tokens))
}
