//! The assistant scenario a new user meets on a small model, shared by the local engine's
//! test and the remote engine's: the tool is chosen without the model volunteering a call
//! (the time, a delete held for confirmation with the data still there, a knowledge-base
//! question answered from the handbook with citations), and `/query` answers only what
//! the sources say, with the per-sentence check exposed in `grounding`.

use reqwest::Method;
use serde_json::{json, Value};

use super::{Auth, TestServer};

pub const HANDBOOK: &[(&str, &str)] = &[
    (
        "leave-policy.md",
        "# Leave policy\n\n## Annual leave\n\nEvery full-time employee gets 25 days of paid \
annual leave per calendar year. Up to 5 unused days can be carried over into the next \
year.\n\n## Requesting leave\n\nLeave is requested in the HR portal at least two weeks in \
advance.\n",
    ),
    (
        "remote-work.md",
        "# Remote work\n\nEmployees may work from home up to two days per week, after \
agreement with their line manager. The core hours from 10:00 to 15:00 apply at home as in \
the office.\n",
    ),
    (
        "it-security.md",
        "# IT security\n\nPasswords must be at least 12 characters long and are changed \
every 90 days. A lost laptop must be reported within 24 hours.\n",
    ),
];

pub async fn chat(server: &TestServer, auth: &Auth, message: &str) -> Value {
    let r = server
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": message, "auto_execute_tools": true}),
            auth,
        )
        .await;
    r.data().clone()
}

/// Runs the scenario on `server` (an LLM whose name contains `model` must be loaded).
pub async fn small_model_assistant(server: &TestServer, auth: &Auth, model: &str) {
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    let llm = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "llm")
        .unwrap()
        .clone();
    assert!(
        llm["detail"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains(model),
        "{llm}"
    );
    for (name, text) in HANDBOOK {
        let (status, body) = server.upload(name, text.as_bytes()).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, before) = server.get_json("/api/v1/documents?page_size=100").await;
    let stored = before["total"].as_u64().unwrap();
    assert!(stored >= 3, "{before}");

    // The time comes from the tool, not from the model's imagination.
    let d = chat(server, auth, "What time is it now?").await;
    let call = &d["tool_calls"][0];
    assert_eq!(call["tool_name"], "get_current_datetime", "{d}");
    assert_eq!(call["status"], "executed", "{d}");
    let today = call["result"]["date"].as_str().unwrap();
    assert!(today.len() == 10, "{call}");

    // A delete is held for confirmation; nothing is deleted.
    let d = chat(server, auth, "Delete the document about the leave policy").await;
    let call = &d["tool_calls"][0];
    assert!(
        call["tool_name"].as_str().unwrap().starts_with("delete_"),
        "{d}"
    );
    assert_eq!(call["status"], "pending_confirmation", "{d}");
    assert!(call["action_id"].is_string(), "{call}");
    assert_eq!(d["requires_confirmation"], true);
    let (_, after) = server.get_json("/api/v1/documents?page_size=100").await;
    assert_eq!(after["total"].as_u64().unwrap(), stored, "{after}");

    // A knowledge-base question is answered from the handbook, with a citation.
    let d = chat(server, auth, "How many days of leave do I get?").await;
    let call = &d["tool_calls"][0];
    assert_eq!(call["tool_name"], "ask_knowledge_base", "{d}");
    assert_eq!(call["status"], "executed", "{d}");
    let response = d["response"].as_str().unwrap();
    assert!(response.contains("25"), "{response}");
    assert!(response.contains('['), "cited: {response}");
    let cited = d["sources"].as_array().unwrap();
    assert!(
        cited.iter().any(|s| s["source"] == "leave-policy.md"),
        "{d}"
    );
    assert!(d["grounding"]["sentences"].is_array(), "{d}");

    // /query answers what the sources say and nothing else...
    let (status, q) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "Can I work from home?"}),
        )
        .await;
    assert_eq!(status, 200, "{q}");
    let answer = q["answer"].as_str().unwrap();
    assert!(answer.contains("two days"), "{answer}: {}", q["grounding"]);
    assert!(!answer.to_lowercase().contains("travel"), "{answer}");
    let g = &q["grounding"];
    assert_eq!(g["answerable"], true, "{g}");
    for s in g["sentences"].as_array().unwrap() {
        // Every sentence presented is one the check supported.
        if s["supported"] == true && s["on_topic"] == true {
            let bare = s["text"].as_str().unwrap().split(" [").next().unwrap();
            assert!(answer.contains(bare), "{bare} in {answer}");
        }
    }
    // ...and says so when they do not hold the answer.
    let (_, q) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "What is the dress code at the office?"}),
        )
        .await;
    assert_eq!(q["grounding"]["outcome"], "not_in_sources", "{q}");
    assert!(
        q["answer"].as_str().unwrap().contains("sources do not say"),
        "{q}"
    );
}
