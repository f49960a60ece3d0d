//! The records the conversation operations take and return (no HTTP types; they
//! serialize as the assistant API's `data`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::conversations::{ConversationRow, MessageRow};

/// Title of a conversation created without one, until its first user message names it.
pub const DEFAULT_TITLE: &str = "New conversation";
/// Longest title, in characters (longer ones are cut).
pub const MAX_TITLE_CHARS: usize = 200;
/// Length of a title derived from a message, in characters.
const DERIVED_TITLE_CHARS: usize = 60;

/// A conversation as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationView {
    pub conversation_id: String,
    pub title: String,
    /// `Active` or `Deleted`.
    pub status: String,
    pub message_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub deleted_at: Option<String>,
}

impl From<ConversationRow> for ConversationView {
    fn from(r: ConversationRow) -> Self {
        Self {
            conversation_id: r.id,
            title: r.title,
            status: r.status,
            message_count: r.message_count,
            created_at: r.created_at,
            updated_at: r.updated_at,
            deleted_at: r.deleted_at,
        }
    }
}

/// A page of conversations, most recently updated first.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationPage {
    pub conversations: Vec<ConversationView>,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
    pub pages: u64,
    pub status: String,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
    Tool,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        }
    }
}

/// A message to append (the chat engine's input).
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub role: Role,
    pub content: String,
    /// The tool calls of an assistant turn, as the chat response lists them.
    pub tool_calls: Option<Value>,
    /// Attachments of a user turn (names, types, sizes).
    pub attachments: Option<Value>,
    /// What an assistant answer rests on: `{answer_mode, sources, grounding}`, as the
    /// chat response gave them.
    pub answer: Option<Value>,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl NewMessage {
    /// A message with just a role and text.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: None,
            attachments: None,
            answer: None,
            tokens_in: 0,
            tokens_out: 0,
        }
    }
}

/// A stored message as the history shows it.
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    pub message_id: String,
    pub conversation_id: String,
    pub role: String,
    pub content: String,
    pub tool_calls: Option<Value>,
    pub attachments: Option<Value>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub created_at: String,
    /// An assistant reply's sources, numbered as its `[n]` citations (absent for user
    /// messages and replies that used none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Value>,
    /// An assistant reply's `answer_mode` (`generative`, `mixed` or `extractive`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_mode: Option<String>,
    /// What was checked of a knowledge-base answer against its sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grounding: Option<Value>,
}

impl MessageView {
    /// Splits a stored `{answer_mode, sources, grounding}` into the view's fields.
    pub(crate) fn with_answer(mut self, answer: Option<Value>) -> Self {
        let Some(Value::Object(mut a)) = answer else {
            return self;
        };
        let present = |v: Option<Value>| v.filter(|v| !v.is_null());
        self.sources =
            present(a.remove("sources")).filter(|s| s.as_array().is_some_and(|s| !s.is_empty()));
        self.answer_mode =
            present(a.remove("answer_mode")).and_then(|m| m.as_str().map(str::to_owned));
        self.grounding = present(a.remove("grounding"));
        self
    }
}

impl From<MessageRow> for MessageView {
    fn from(r: MessageRow) -> Self {
        Self {
            message_id: r.id,
            conversation_id: r.conversation_id,
            role: r.role,
            content: r.content,
            tool_calls: r.tool_calls,
            attachments: r.attachments,
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            created_at: r.created_at,
            sources: None,
            answer_mode: None,
            grounding: None,
        }
        .with_answer(r.answer)
    }
}

/// A slice of a conversation's messages, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub conversation_id: String,
    pub title: String,
    pub status: String,
    pub messages: Vec<MessageView>,
    /// Messages in the whole conversation.
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
}

/// One search result.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationHit {
    pub conversation_id: String,
    pub title: String,
    /// `null` when the title matched.
    pub message_id: Option<String>,
    /// Plain-text excerpt around the match.
    pub snippet: String,
    /// The excerpt, HTML-escaped, with matches in `<b>..</b>`.
    pub snippet_html: String,
    /// BM25 score: higher is better.
    pub score: f32,
}

/// A page of search results, best first.
#[derive(Debug, Clone, Serialize)]
pub struct SearchPage {
    pub query: String,
    pub results: Vec<ConversationHit>,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
}

/// Answer to a soft delete.
#[derive(Debug, Clone, Serialize)]
pub struct Deleted {
    pub conversation_id: String,
    pub status: String,
    pub deleted_at: String,
    /// When the conversation will be removed for good.
    pub purge_after: String,
}

/// Paging and filter of `list`, as given (validated by the service).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub page: Option<i64>,
    pub page_size: Option<i64>,
    pub status: Option<String>,
}

/// A title from the first user message: its first line, whitespace collapsed, cut to
/// 60 characters at a word boundary when possible.
pub fn title_from_message(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        let extra = usize::from(!out.is_empty()) + w.chars().count();
        if out.chars().count() + extra > DERIVED_TITLE_CHARS {
            if out.is_empty() {
                out = w.chars().take(DERIVED_TITLE_CHARS).collect();
            }
            out.push('…');
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.is_empty() {
        DEFAULT_TITLE.to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from_message("  \nHello   there\nmore"), "Hello there");
        assert_eq!(title_from_message("   "), DEFAULT_TITLE);
        let long = "word ".repeat(40);
        let t = title_from_message(&long);
        assert!(t.ends_with('…') && t.chars().count() <= 61, "{t}");
    }
}
