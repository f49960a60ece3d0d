//! Arguments a message states outright (a URL, an id, a file name, an arithmetic
//! expression, the question itself), read from its text and pinned in the call's
//! grammar: the model still writes the call, but where the message already says what
//! an argument is, it can write only that. A small model copies ids and URLs badly and
//! paraphrases questions; a larger one loses nothing. Arguments the message does not
//! state are left to the model, under the schema grammar as before.

use serde_json::{json, Map, Value};

/// String arguments of `tool` read from `message`; `top_source` is the source of the
/// passage that best matches the message (what "the document about X" names).
pub fn read(tool: &str, message: &str, top_source: Option<&str>) -> Map<String, Value> {
    let mut out = Map::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.trim().is_empty()) {
            out.insert(k.to_owned(), Value::String(v));
        }
    };
    match tool {
        // A long message asks its question part (see `crate::kb::question`).
        "ask_knowledge_base" => put(
            "question",
            Some(
                crate::kb::question::question_part(message)
                    .trim()
                    .to_owned(),
            ),
        ),
        "search_knowledge_base" | "search_conversations" => put("query", Some(topic(message))),
        "scrape_url" => put("url", url(message)),
        "get_document" | "delete_document" => put("document_id", id(message)),
        "get_task" => put("task_id", id(message)),
        "calculate" => put("expression", expression(message)),
        "delete_source" => put(
            "source",
            file_name(message)
                .or_else(|| url(message))
                .or_else(|| top_source.map(str::to_owned)),
        ),
        "upload_text" => {
            let (title, text) = note(message);
            put("title", title);
            put("text", text);
        }
        "update_setting" => put("key", setting_key(message)),
        _ => {}
    }
    out
}

/// `schema` with each of `pinned` fixed to its value (and required).
pub fn pin(schema: &Value, pinned: &Map<String, Value>) -> Value {
    let mut s = schema.clone();
    for (k, v) in pinned {
        if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(k.clone(), json!({"type": "string", "enum": [v]}));
        }
        match s.get_mut("required").and_then(Value::as_array_mut) {
            Some(r) if !r.contains(&Value::String(k.clone())) => r.push(Value::String(k.clone())),
            Some(_) => {}
            None => {
                s["required"] = json!([k]);
            }
        }
    }
    s
}

fn tokens(message: &str) -> impl Iterator<Item = &str> {
    message
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| {
                matches!(
                    c,
                    '"' | '\'' | '(' | ')' | ',' | '?' | '!' | '<' | '>' | '`'
                )
            })
        })
        .map(|w| w.trim_end_matches(['.', ':', ';']))
}

fn url(message: &str) -> Option<String> {
    tokens(message)
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(str::to_owned)
}

fn id(message: &str) -> Option<String> {
    tokens(message)
        .filter(|w| super::router::looks_like_id(w))
        .max_by_key(|w| w.len())
        .map(str::to_owned)
}

/// The first word of `message` that names a file of a format ragd reads (by the
/// formats table of `parse`).
pub(super) fn file_name(message: &str) -> Option<String> {
    tokens(message)
        .find(|w| {
            w.rsplit_once('.').is_some_and(|(stem, _)| {
                !stem.is_empty() && crate::parse::formats::Format::for_filename(w).is_ok()
            }) && !w.contains("://")
        })
        .map(str::to_owned)
}

/// What a search is for: the words after "for", "about" or "mention", else the message.
fn topic(message: &str) -> String {
    let lower = message.to_lowercase();
    let cut = [
        " for ",
        " about ",
        " mentioning ",
        " mention ",
        " mentions ",
    ]
    .iter()
    .filter_map(|k| lower.rfind(k).map(|p| p + k.len()))
    .max();
    let t = cut.map_or(message, |p| &message[p..]);
    t.trim().trim_end_matches(['?', '.', '!']).trim().to_owned()
}

/// The arithmetic of the message, with number words turned into operators.
fn expression(message: &str) -> Option<String> {
    let mut s = format!(" {} ", message.to_lowercase());
    for (w, op) in [
        (" multiplied by ", " * "),
        (" times ", " * "),
        (" x ", " * "),
        (" divided by ", " / "),
        (" over ", " / "),
        (" plus ", " + "),
        (" minus ", " - "),
        (" to the power of ", " ^ "),
        (" squared", " ^ 2"),
        ("×", "*"),
        ("÷", "/"),
    ] {
        s = s.replace(w, op);
    }
    let allowed = |c: char| c.is_ascii_digit() || " .+-*/^%()".contains(c);
    let best = s
        .split(|c: char| !allowed(c))
        .map(str::trim)
        .filter(|p| {
            p.chars().any(|c| c.is_ascii_digit()) && p.chars().any(|c| "+-*/^%".contains(c))
        })
        .max_by_key(|p| p.len())?;
    Some(best.trim_end_matches(['.', ' ']).to_owned())
}

/// A note's title ("titled X") and text (after a colon, or "saying (that)").
fn note(message: &str) -> (Option<String>, Option<String>) {
    let lower = message.to_lowercase();
    let text = if let Some(p) = message.find(':') {
        Some(message[p + 1..].trim().to_owned())
    } else {
        [" saying that ", " saying "].iter().find_map(|k| {
            lower
                .find(k)
                .map(|p| message[p + k.len()..].trim().to_owned())
        })
    };
    let title = lower.find("titled ").map(|p| {
        let rest = &message[p + "titled ".len()..];
        let end = [" saying", ":", ","]
            .iter()
            .filter_map(|k| rest.to_lowercase().find(k))
            .min()
            .unwrap_or(rest.len());
        rest[..end].trim().to_owned()
    });
    (title, text)
}

fn setting_key(message: &str) -> Option<String> {
    let lower = message.to_lowercase();
    [
        ("tone", "assistant_tone"),
        ("language", "primary_language"),
        ("company name", "company_name"),
        ("industry", "industry"),
        ("system prompt", "system_prompt"),
        ("auto execute", "auto_execute_tools"),
        ("auto-execute", "auto_execute_tools"),
    ]
    .iter()
    .find(|(w, _)| lower.contains(w))
    .map(|(_, k)| (*k).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(tool: &str, message: &str, key: &str) -> Option<String> {
        read(tool, message, Some("leave-policy.md"))
            .get(key)
            .and_then(|v| v.as_str().map(str::to_owned))
    }

    #[test]
    fn a_long_message_asks_the_knowledge_base_its_question_part() {
        let long = format!(
            "{} how often are the bearings of pump P-104 lubricated?",
            "We moved two meetings and the printer was repaired. ".repeat(80)
        );
        assert_eq!(
            one("ask_knowledge_base", &long, "question").as_deref(),
            Some("how often are the bearings of pump P-104 lubricated?")
        );
        assert_eq!(
            one("ask_knowledge_base", " Can I work from home? ", "question").as_deref(),
            Some("Can I work from home?")
        );
    }

    #[test]
    fn stated_arguments_are_read() {
        assert_eq!(
            one("calculate", "What is 17 times 23?", "expression").as_deref(),
            Some("17 * 23")
        );
        assert_eq!(
            one("calculate", "calculate (1250 * 0.2) + 75", "expression").as_deref(),
            Some("(1250 * 0.2) + 75")
        );
        assert_eq!(
            one("calculate", "whats 2^10", "expression").as_deref(),
            Some("2^10")
        );
        assert_eq!(one("calculate", "how are you", "expression"), None);
        assert_eq!(
            one(
                "scrape_url",
                "please scrape https://example.org/a/b.",
                "url"
            )
            .as_deref(),
            Some("https://example.org/a/b")
        );
        assert_eq!(
            one(
                "get_task",
                "did task 56f1d75d-e023-41ce-a12a-3142c3b2fd4c finish",
                "task_id"
            )
            .as_deref(),
            Some("56f1d75d-e023-41ce-a12a-3142c3b2fd4c")
        );
        assert_eq!(
            one(
                "search_knowledge_base",
                "Search the knowledge base for pump seals",
                "query"
            )
            .as_deref(),
            Some("pump seals")
        );
        assert_eq!(
            one(
                "delete_source",
                "remove the file it-security.md please",
                "source"
            )
            .as_deref(),
            Some("it-security.md")
        );
        assert_eq!(
            one(
                "delete_source",
                "Delete the document about the leave policy",
                "source"
            )
            .as_deref(),
            Some("leave-policy.md")
        );
        let n = read(
            "upload_text",
            "Add a text titled Meeting notes saying that we ship on Friday",
            None,
        );
        assert_eq!(n["title"], "Meeting notes");
        assert_eq!(n["text"], "we ship on Friday");
        assert_eq!(
            one(
                "update_setting",
                "Change the assistant tone to friendly",
                "key"
            )
            .as_deref(),
            Some("assistant_tone")
        );
    }

    #[test]
    fn pinned_arguments_are_fixed_and_required() {
        let schema = json!({"type": "object", "properties": {"url": {"type": "string"}, "timeout": {"type": "integer"}}});
        let mut m = Map::new();
        m.insert("url".into(), json!("https://a.example"));
        let s = pin(&schema, &m);
        assert_eq!(s["properties"]["url"]["enum"], json!(["https://a.example"]));
        assert_eq!(s["required"], json!(["url"]));
        assert_eq!(s["properties"]["timeout"]["type"], "integer");
    }
}
