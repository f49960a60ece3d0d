//! What a turn says of its tool calls: their results fed back to the model (cut when
//! long), and the reply when the model wrote none.

use serde_json::Value;

use super::ToolCallRecord;

/// Longest tool result fed back to the model, in characters of its JSON (~400 tokens):
/// a long listing would otherwise make the next round's prompt several times the first.
/// The whole result stays in the reply's `tool_calls`.
const MAX_FED_BACK_CHARS: usize = 1600;

/// What the turn did, when the model wrote no text of its own.
pub(super) fn summary_of(records: &[ToolCallRecord]) -> String {
    records
        .iter()
        .map(|r| match r.status.as_str() {
            // The action's id is on the call itself; the text is for people.
            "pending_confirmation" => format!(
                "{}{} waits for your confirmation.",
                r.tool_name,
                arguments(&r.params)
            ),
            "proposed" => format!("Proposed: {} with {}.", r.tool_name, r.params),
            "executed" => match r.tool_name.as_str() {
                "get_current_datetime" => format!(
                    "It is {} on {}, {} (UTC offset {} minutes).",
                    r.result["time"].as_str().unwrap_or_default(),
                    r.result["weekday"].as_str().unwrap_or_default(),
                    r.result["date"].as_str().unwrap_or_default(),
                    r.result["utc_offset_minutes"],
                ),
                "calculate" => format!(
                    "{} = {}",
                    r.params["expression"].as_str().unwrap_or_default(),
                    r.result["result"]
                ),
                _ => format!("{} ran: {}", r.tool_name, r.result),
            },
            _ => format!(
                "{} failed: {}",
                r.tool_name,
                r.error.as_deref().unwrap_or("unknown error")
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A call's arguments as words: ` (source “a.md”)`, or nothing when it has none.
fn arguments(params: &Value) -> String {
    let Some(map) = params.as_object().filter(|m| !m.is_empty()) else {
        return String::new();
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{} “{s}”", k.replace('_', " ")),
            other => format!("{} {other}", k.replace('_', " ")),
        })
        .collect();
    format!(" ({})", parts.join(", "))
}

/// A tool's result as fed back to the model: itself, or when its JSON is longer than
/// [`MAX_FED_BACK_CHARS`], the start of that JSON and a note of what was left out.
pub(super) fn fed_back_result(result: &Value) -> Value {
    let text = result.to_string();
    if text.len() <= MAX_FED_BACK_CHARS {
        return result.clone();
    }
    let mut cut = MAX_FED_BACK_CHARS;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Value::String(format!(
        "{} ... ({} more characters, left out)",
        &text[..cut],
        text.len() - cut
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_held_call_is_described_without_its_action_id() {
        let held = ToolCallRecord {
            tool_name: "delete_source".into(),
            params: json!({"source": "old-notes.md"}),
            status: "pending_confirmation".into(),
            result: Value::Null,
            execution_time_ms: 0.0,
            action_id: Some("3e43b0c2-5a1d-4c1e-9f3a-0d2b6f7e8a91".into()),
            error: None,
        };
        let text = summary_of(&[held]);
        assert_eq!(
            text,
            "delete_source (source “old-notes.md”) waits for your confirmation."
        );
    }

    #[test]
    fn long_tool_results_are_cut_before_they_are_fed_back() {
        let small = json!({"count": 2, "items": ["a", "b"]});
        assert_eq!(fed_back_result(&small), small);
        let items: Vec<String> = (0..500).map(|i| format!("دليل الموظف {i}")).collect();
        let big = json!({ "items": items });
        let cut = fed_back_result(&big);
        let text = cut.as_str().unwrap();
        assert!(text.starts_with("{\"items\":[\"دليل"), "{text}");
        assert!(text.ends_with("more characters, left out)"), "{text}");
        assert!(text.len() < MAX_FED_BACK_CHARS + 60);
    }
}
