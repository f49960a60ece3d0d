//! Tool selection that does not wait for the model to volunteer a call. Each message is
//! ranked against example requests of every tool (`assets/tools/intents.json`, embedded
//! once with the knowledge base's embedder) and of "no tool", nudged by a few cues the
//! embedder reads poorly (a URL, arithmetic, a delete verb, Arabic key words), and,
//! when the knowledge base holds an answer to the message, by that. The outcome:
//!
//! - [`Decision::Call`]: a tool clearly fits; the model must call one of the few
//!   candidates (constrained from its first token, arguments under the schema grammar);
//! - [`Decision::Offer`]: tools might fit; the best few are offered and the model decides;
//! - [`Decision::NoTool`]: nothing fits; no tools are offered.
//!
//! High-risk tools stay held for confirmation whatever is decided here (`chat.rs`). The
//! choice and its scores are logged.

use std::collections::HashMap;

use serde_json::Value;
use tokio::sync::OnceCell;

use crate::assistant::tools::ToolInfo;
use crate::ml::EmbedHandle;

/// The intents file: tool name (or `none`) -> example requests.
const INTENTS: &str = include_str!("../../../assets/tools/intents.json");
/// The pseudo-tool of messages that need none.
pub const NO_TOOL: &str = "none";
/// Below this score no tool fits.
const MIN_SCORE: f32 = 0.25;
/// A tool this far above "no tool" and the runner-up is called without asking the model.
const CLEAR_MARGIN: f32 = 0.08;
/// ...and at least this close to one of its examples.
const CLEAR_SCORE: f32 = 0.4;
/// Most tools offered to the model (their schemas go into the prompt).
pub const MAX_CANDIDATES: usize = 3;
/// Candidates must be within this of the best tool.
const CANDIDATE_MARGIN: f32 = 0.12;
/// What a cue adds to (or takes from) a tool's score.
const CUE: f32 = 0.3;
/// What the knowledge base holding an answer adds to `ask_knowledge_base`.
const KB_HOLDS_ANSWER: f32 = 0.25;
/// What a question near the knowledge base's passages (though perhaps not answered by
/// them) adds: such a question is asked of the knowledge base, which then says whether
/// its sources hold the answer, rather than left to the model's own knowledge.
const KB_NEAR_QUESTION: f32 = 0.15;
/// Relevance (see `kb::grounding`) at which a question counts as near the passages.
const KB_NEAR: f32 = 0.3;

/// What the router decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The model must call one of these (best first).
    Call(Vec<String>),
    /// These are offered; the model may call one or answer.
    Offer(Vec<String>),
    /// No tool is offered.
    NoTool,
}

/// A routed message: the decision and every score, best first.
#[derive(Debug, Clone)]
pub struct Route {
    pub decision: Decision,
    pub scores: Vec<(String, f32)>,
    /// A question the knowledge base's passages hold, or are near: unless a tool is
    /// called, it is answered from them (or they say they do not hold it).
    pub kb_question: bool,
    /// The message asks something (a question mark, or a leading question word).
    pub question: bool,
}

/// Ranks tools against messages (see the module docs).
pub struct ToolRouter {
    examples: Vec<(String, String)>,
    vectors: OnceCell<Vec<Vec<f32>>>,
}

impl Default for ToolRouter {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRouter {
    /// The router over the built-in intents.
    pub fn new() -> Self {
        let intents: serde_json::Map<String, Value> =
            serde_json::from_str(INTENTS).expect("assets/tools/intents.json is valid JSON");
        let examples = intents
            .into_iter()
            .flat_map(|(tool, list)| {
                list.as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.as_str().map(|e| (tool.clone(), e.to_owned())))
                    .collect::<Vec<_>>()
            })
            .collect();
        Self {
            examples,
            vectors: OnceCell::new(),
        }
    }

    /// Ranks `tools` (those the user may call) against `message`; `kb` says what the
    /// knowledge base's passages offer for it.
    pub async fn route(
        &self,
        embedder: &EmbedHandle,
        message: &str,
        tools: &[ToolInfo],
        kb: KbSignal,
    ) -> Result<Route, crate::ml::MlError> {
        let vectors = self
            .vectors
            .get_or_try_init(|| async {
                let texts = self.examples.iter().map(|(_, e)| searchable(e)).collect();
                embedder.embed(texts).await
            })
            .await?;
        let query = embedder
            .embed(vec![searchable(message)])
            .await?
            .pop()
            .unwrap_or_default();
        let mut best: HashMap<&str, f32> = HashMap::new();
        for ((tool, _), v) in self.examples.iter().zip(vectors) {
            let s = cosine(&query, v);
            let e = best.entry(tool.as_str()).or_insert(-1.0);
            *e = e.max(s);
        }
        let cues = Cues::of(message);
        let mut scores: Vec<(String, f32)> = tools
            .iter()
            .map(|t| {
                let name = t.tool_name;
                let s = best.get(name).copied().unwrap_or(-1.0) + cues.adjust(name);
                let s = if name == "ask_knowledge_base" {
                    s + kb.boost(&cues)
                } else {
                    s
                };
                (name.to_owned(), s)
            })
            .collect();
        let none = best.get(NO_TOOL).copied().unwrap_or(-1.0) + cues.adjust(NO_TOOL);
        scores.push((NO_TOOL.to_owned(), none));
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        let decision = decide(&scores);
        tracing::info!(
            decision = ?decision,
            scores = %scores
                .iter()
                .take(4)
                .map(|(t, s)| format!("{t}={s:.2}"))
                .collect::<Vec<_>>()
                .join(" "),
            cues = ?cues,
            kb_answerable = kb.answerable,
            kb_relevance = kb.relevance,
            "tool routing"
        );
        // A question the router would leave to the model alongside ask_knowledge_base is
        // one for the knowledge base too: the small model would answer it from nothing.
        let asks_kb =
            matches!(&decision, Decision::Offer(c) if c.iter().any(|t| t == "ask_knowledge_base"));
        let kb_question = kb.answerable || (cues.question && (kb.relevance >= KB_NEAR || asks_kb));
        Ok(Route {
            decision,
            scores,
            kb_question,
            question: cues.question,
        })
    }
}

fn decide(scores: &[(String, f32)]) -> Decision {
    let Some((top, top_score)) = scores.iter().find(|(t, _)| t != NO_TOOL) else {
        return Decision::NoTool;
    };
    let none = scores
        .iter()
        .find(|(t, _)| t == NO_TOOL)
        .map_or(-1.0, |s| s.1);
    if *top_score < MIN_SCORE || *top_score <= none {
        return Decision::NoTool;
    }
    let candidates: Vec<String> = scores
        .iter()
        .filter(|(t, s)| t != NO_TOOL && *s >= top_score - CANDIDATE_MARGIN && *s >= MIN_SCORE)
        .take(MAX_CANDIDATES)
        .map(|(t, _)| t.clone())
        .collect();
    let runner_up = scores
        .iter()
        .filter(|(t, _)| t != top && t != NO_TOOL)
        .map(|s| s.1)
        .next()
        .unwrap_or(-1.0);
    if *top_score >= CLEAR_SCORE && top_score - none >= CLEAR_MARGIN {
        if top_score - runner_up >= CLEAR_MARGIN {
            return Decision::Call(vec![top.clone()]);
        }
        return Decision::Call(candidates);
    }
    Decision::Offer(candidates)
}

/// What the turn's knowledge-base passages offer for the message.
#[derive(Debug, Clone, Copy, Default)]
pub struct KbSignal {
    /// They hold an answer (`Evidence::answerable`).
    pub answerable: bool,
    /// Best cosine between the message and one of their sentences.
    pub relevance: f32,
}

impl KbSignal {
    fn boost(&self, cues: &Cues) -> f32 {
        if self.answerable {
            KB_HOLDS_ANSWER
        } else if cues.question && self.relevance >= KB_NEAR {
            KB_NEAR_QUESTION
        } else {
            0.0
        }
    }
}

/// Cues the embedder reads poorly.
#[derive(Debug, Default)]
struct Cues {
    url: bool,
    arithmetic: bool,
    delete: bool,
    filter: bool,
    id: bool,
    /// A file name (of a format ragd reads).
    file: bool,
    time: bool,
    thanks: bool,
    task: bool,
    conversations: bool,
    setting: bool,
    note: bool,
    question: bool,
}

const DELETE_WORDS: &[&str] = &[
    "delete", "remove", "erase", "purge", "drop", "wipe", "احذف", "حذف", "امسح", "ازل",
];
const FILTER_WORDS: &[&str] = &[
    "section", "language", "type", "where", "whose", "matching", "every", "all",
];
const MATH_WORDS: &[&str] = &[
    "times",
    "plus",
    "minus",
    "divided",
    "multiplied",
    "squared",
    "sqrt",
    "percent",
    "root",
];
const TIME_WORDS: &[&str] = &["الساعه", "الوقت", "التاريخ", "اليوم"];
const THANKS_WORDS: &[&str] = &["شكرا", "مرحبا", "اهلا"];
const CONVERSATION_WORDS: &[&str] = &["conversation", "conversations", "chat", "chats"];
const SETTING_WORDS: &[&str] = &["setting", "settings"];
const NOTE_WORDS: &[&str] = &["save", "store", "remember", "titled"];
const QUESTION_WORDS: &[&str] = &[
    "what", "who", "when", "where", "which", "how", "why", "is", "are", "can", "do", "does", "may",
    "must", "should", "هل", "ما", "ماذا", "متي", "كم", "كيف", "اين", "من",
];

impl Cues {
    fn of(message: &str) -> Self {
        let folded = crate::parse::clean::normalize_arabic(&message.to_lowercase());
        let words: Vec<&str> = folded
            .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.' || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.trim_matches('.')));
        let digits = message.chars().filter(char::is_ascii_digit).count();
        let operators = message
            .chars()
            .any(|c| matches!(c, '+' | '*' | '/' | '^' | '%' | '×' | '÷' | '='))
            || message.contains(" - ");
        let question = message.trim_end().ends_with(['?', '؟'])
            || words.first().is_some_and(|w| QUESTION_WORDS.contains(w));
        Self {
            url: message.contains("http://") || message.contains("https://"),
            arithmetic: digits > 0 && (operators || has(MATH_WORDS)),
            delete: has(DELETE_WORDS) || folded.contains("get rid of"),
            filter: has(FILTER_WORDS),
            id: words.iter().any(|w| looks_like_id(w)),
            file: super::slots::file_name(message).is_some(),
            time: has(TIME_WORDS),
            thanks: has(THANKS_WORDS),
            task: has(&["task", "job"]),
            conversations: has(CONVERSATION_WORDS),
            setting: has(SETTING_WORDS),
            // "note" is a verb to save something in "note that ...", a noun in a
            // question ("when do I need a doctor's note?").
            note: has(NOTE_WORDS) || (has(&["note"]) && !question),
            question,
        }
    }

    /// What the cues add to `tool`'s score.
    fn adjust(&self, tool: &str) -> f32 {
        let mut a = 0.0;
        let deleting = tool.starts_with("delete_");
        if self.delete {
            // A delete verb names a delete tool; which one depends on what it names.
            a += if deleting { CUE } else { -CUE };
            if tool == "delete_by_filter" && self.filter && !self.id {
                a += CUE;
            }
            if tool == "delete_document" && self.id {
                a += CUE;
            }
            // A file name names a source.
            if tool == "delete_source" && self.file && !self.id {
                a += CUE;
            }
        } else if deleting {
            // Never a delete tool without a delete verb.
            a -= CUE;
        }
        if self.url && !self.delete && tool == "scrape_url" {
            a += CUE;
        }
        if self.arithmetic && tool == "calculate" && !self.id {
            a += CUE;
        }
        if self.time && tool == "get_current_datetime" {
            a += CUE;
        }
        if self.thanks && tool == NO_TOOL {
            a += CUE;
        }
        // An id names one thing to read: a task's or a document's.
        if self.id && !self.delete {
            let wanted = if self.task {
                "get_task"
            } else {
                "get_document"
            };
            if tool == wanted {
                a += CUE;
            }
        }
        if self.conversations && tool.ends_with("_conversations") {
            a += CUE;
        }
        if self.setting && tool == "update_setting" {
            a += CUE;
        }
        if self.note && !self.delete && tool == "upload_text" {
            a += CUE;
        }
        a
    }
}

/// A document or task id: hex with dashes, or a chunk id, long enough not to be a word.
pub(super) fn looks_like_id(word: &str) -> bool {
    let digits = word.chars().filter(char::is_ascii_digit).count();
    word.len() >= 8
        && digits >= 2
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn searchable(text: &str) -> String {
    crate::kb::search::searchable(text)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(list: &[(&str, f32)]) -> Vec<(String, f32)> {
        list.iter().map(|(t, s)| (t.to_string(), *s)).collect()
    }

    #[test]
    fn clear_winners_are_called_close_ones_chosen_by_the_model() {
        let clear = scores(&[("calculate", 0.6), ("none", 0.3), ("get_task", 0.2)]);
        assert_eq!(decide(&clear), Decision::Call(vec!["calculate".into()]));
        let close = scores(&[
            ("search_knowledge_base", 0.5),
            ("ask_knowledge_base", 0.47),
            ("none", 0.2),
        ]);
        assert_eq!(
            decide(&close),
            Decision::Call(vec![
                "search_knowledge_base".into(),
                "ask_knowledge_base".into()
            ])
        );
        let weak = scores(&[("list_sources", 0.3), ("none", 0.28)]);
        assert_eq!(decide(&weak), Decision::Offer(vec!["list_sources".into()]));
        let chat = scores(&[("none", 0.7), ("get_current_datetime", 0.4)]);
        assert_eq!(decide(&chat), Decision::NoTool);
        let nothing = scores(&[("ask_knowledge_base", 0.2), ("none", 0.1)]);
        assert_eq!(decide(&nothing), Decision::NoTool);
    }

    #[test]
    fn cues_read_urls_arithmetic_ids_and_delete_verbs() {
        let c = Cues::of("please scrape https://example.org/a");
        assert!(c.url && !c.delete);
        assert!(c.adjust("scrape_url") > 0.0 && c.adjust("delete_source") < 0.0);
        assert!(Cues::of("whats 2^10").arithmetic);
        assert!(Cues::of("What is 17 times 23?").arithmetic);
        assert!(!Cues::of("How many days of leave do I get?").arithmetic);
        let d = Cues::of("Delete document 7c9e6679-7425-40de-944b-e07fc1f90ae7-0");
        assert!(d.delete && d.id);
        assert!(d.adjust("delete_document") > d.adjust("delete_source"));
        let f = Cues::of("delete all chunks whose language is ar");
        assert!(f.adjust("delete_by_filter") > f.adjust("delete_source"));
        assert!(Cues::of("احذف ملف pump-maintenance.md").delete);
        assert!(Cues::of("كم الساعة الآن؟").time);
        let g = Cues::of("Show me document 402fb17c-a88b-55b2-a7db-cca87ef0961a");
        assert!(g.adjust("get_document") > g.adjust("list_documents"));
        let t = Cues::of("is task 56f1d75d-e023-41ce-a12a-3142c3b2fd4c done");
        assert!(t.adjust("get_task") > t.adjust("get_document"));
        assert!(Cues::of("Note that the door code changes on Monday").note);
        let s = Cues::of("Delete old-notes.md");
        assert!(s.file && s.adjust("delete_source") > s.adjust("delete_by_filter"));
        assert!(!Cues::of("delete the notes about version 1.2").file);
        let n = Cues::of("When do I need a doctor's note if I am sick?");
        assert!(n.question && !n.note && n.adjust("upload_text") == 0.0);
    }
}
