//! The GGUF chat templates of today's families, run by ragd's Jinja renderer, against the
//! text Python's jinja2 renders from the same chat (tests/data/chat_templates_expected.json,
//! written by scripts/chat_template_expected.py). The templates are llama.cpp's copies in
//! its build cache; without that directory the test says so and skips.

use std::path::PathBuf;

use chrono::TimeZone;
use ragd::ml::llm::{ChatMessage, JinjaTemplate, Role, ToolCall};
use serde_json::{json, Value};

fn templates_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let dir = PathBuf::from(home)
        .join(".cache/llama-bench/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates");
    dir.is_dir().then_some(dir)
}

fn bos_eos(stem: &str) -> (&'static str, &'static str) {
    match stem {
        s if s.starts_with("Qwen") || s.starts_with("HuggingFaceTB") => ("", "<|im_end|>"),
        s if s.starts_with("meta-llama") => ("<|begin_of_text|>", "<|eot_id|>"),
        s if s.starts_with("microsoft") => ("<s>", "<|endoftext|>"),
        s if s.starts_with("mistralai") => ("<s>", "</s>"),
        _ => ("<bos>", "<eos>"),
    }
}

fn chats() -> (Vec<ChatMessage>, Vec<ChatMessage>, Vec<Value>) {
    let call = ToolCall {
        id: ToolCall::id_for(1),
        name: "search_documents".into(),
        arguments: json!({"query": "manual \"contents\"", "top_k": 3}),
    };
    let tools = vec![
        ChatMessage::new(Role::System, "You are ragd. Answer briefly."),
        ChatMessage::new(Role::User, "What is in <|im_start|>the manual?"),
        ChatMessage::assistant_calls("", vec![call.clone()]),
        ChatMessage::tool_result(&call, "{\"hits\": 2}"),
    ];
    let plain = vec![
        ChatMessage::new(Role::User, "Hi"),
        ChatMessage::new(Role::Assistant, "Hello, how can I help?"),
        ChatMessage::new(Role::User, "What is in the manual?"),
    ];
    let defs = vec![json!({
        "type": "function",
        "function": {
            "name": "search_documents",
            "description": "Search the knowledge base.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for"}},
                "required": ["query"],
            },
        },
    })];
    (tools, plain, defs)
}

/// The templates' folder, jinja2's texts and the fixed clock they were rendered at; `None`
/// (saying why) when llama.cpp's sources are not cached.
fn reference() -> Option<(PathBuf, Value, Option<chrono::DateTime<chrono::Utc>>)> {
    let Some(dir) = templates_dir() else {
        println!("skipped: llama.cpp's models/templates directory is not in ~/.cache/llama-bench");
        return None;
    };
    let expected: Value = serde_json::from_str(include_str!("data/chat_templates_expected.json"))
        .expect("expected texts");
    Some((
        dir,
        expected,
        chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).single(),
    ))
}

#[test]
fn real_templates_render_as_jinja2_does() {
    let Some((dir, expected, now)) = reference() else {
        return;
    };
    let (with_tools, plain, defs) = chats();
    let mut checked = 0;
    for (key, want) in expected.as_object().expect("an object") {
        let (stem, chat) = key.split_once('/').expect("stem/chat");
        let source = std::fs::read_to_string(dir.join(format!("{stem}.jinja"))).expect("template");
        let (bos, eos) = bos_eos(stem);
        let t = JinjaTemplate::new(&source, bos, eos, now).expect("the template loads");
        let (messages, tools) = match chat {
            "tools" => (&with_tools, &defs[..]),
            _ => (&plain, &[][..]),
        };
        let got = t.render_text(messages, tools, true);
        match (want.get("text"), want.get("error")) {
            (Some(text), _) => {
                assert_eq!(got.expect(key), text.as_str().expect("text"), "{key}")
            }
            (_, Some(err)) => {
                let e = got.expect_err(key).to_string();
                assert!(e.contains(err.as_str().expect("error")), "{key}: {e}");
            }
            _ => panic!("{key}: neither text nor error"),
        }
        checked += 1;
    }
    assert_eq!(checked, 16);
}

/// The prompt ragd tokenizes (caller text cut out as placeholders, then put back) is the
/// text jinja2 renders, tool definitions included, for the templates that take the whole
/// chat as it is; the message, argument and description texts are caller text.
#[test]
fn tool_chats_split_into_caller_text_as_jinja2_renders_them() {
    let Some((dir, expected, now)) = reference() else {
        return;
    };
    let (with_tools, _, defs) = chats();
    let mut checked = Vec::new();
    for (key, want) in expected.as_object().expect("an object") {
        let (stem, chat) = key.split_once('/').expect("stem/chat");
        let Some(text) = want.get("text").and_then(Value::as_str) else {
            continue;
        };
        let source = std::fs::read_to_string(dir.join(format!("{stem}.jinja"))).expect("template");
        let (bos, eos) = bos_eos(stem);
        let t = JinjaTemplate::new(&source, bos, eos, now).expect("the template loads");
        let caps = t.capabilities();
        if chat != "tools" || !(caps.system && caps.tool_calls && caps.tool_role && caps.tools) {
            continue;
        }
        let pieces = t.render_split(&with_tools, &defs).expect(key);
        let joined: String = pieces.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(joined, text, "{key}");
        let caller: Vec<&str> = pieces
            .iter()
            .filter(|(c, _)| *c)
            .map(|(_, s)| s.as_str())
            .collect();
        assert!(
            caller.contains(&"What is in <|im_start|>the manual?"),
            "{key}: {caller:?}"
        );
        assert!(
            caller.contains(&"Search the knowledge base."),
            "{key}: {caller:?}"
        );
        assert!(
            pieces
                .iter()
                .all(|(c, s)| *c || !s.contains("Search the knowledge base.")),
            "{key}: a description left in the template's text"
        );
        checked.push(stem.to_owned());
    }
    assert!(checked.len() >= 3, "{checked:?}");
}

#[test]
fn capabilities_are_probed() {
    let Some(dir) = templates_dir() else {
        println!("skipped: llama.cpp's models/templates directory is not in ~/.cache/llama-bench");
        return;
    };
    let load = |stem: &str| {
        let src = std::fs::read_to_string(dir.join(format!("{stem}.jinja"))).expect("template");
        let (bos, eos) = bos_eos(stem);
        JinjaTemplate::new(&src, bos, eos, None)
            .expect(stem)
            .capabilities()
    };
    let gemma = load("google-gemma-2-2b-it");
    assert!(
        !gemma.system && !gemma.tool_calls && !gemma.tool_role,
        "{gemma:?}"
    );
    assert!(!gemma.tools, "{gemma:?}");
    let qwen = load("Qwen-Qwen2.5-7B-Instruct");
    assert!(
        qwen.system && qwen.tool_calls && qwen.tool_role && qwen.tools,
        "{qwen:?}"
    );
    let llama = load("meta-llama-Llama-3.1-8B-Instruct");
    assert!(llama.tools && llama.tool_calls, "{llama:?}");
    let phi = load("microsoft-Phi-3.5-mini-instruct");
    assert!(!phi.tool_calls && !phi.tools, "{phi:?}");
    assert!(JinjaTemplate::new("{% for m in messages %}", "", "", None).is_err());
}
