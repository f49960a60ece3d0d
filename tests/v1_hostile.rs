//! Hostile input on the OpenAI-compatible routes: every answer is a 4xx in OpenAI's error
//! shape (`{"error": {"message", "type", "param", "code"}}`), never a 5xx or a hang, and
//! the server still answers afterwards. Real server, real SmolLM2 and MiniLM.

mod common;

use std::time::Duration;

use common::{models_config, models_dir, TestServer};
use serde_json::{json, Value};

const LLM: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

async fn send(server: &TestServer, path: &str, body: reqwest::Body, kind: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(server.url(path))
        .header("content-type", kind)
        .body(body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .expect("an answer, not a hang");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn assert_openai_error(what: &str, status: u16, body: &Value) {
    let shown: String = body.to_string().chars().take(300).collect();
    assert!((400..500).contains(&status), "{what}: {status} {shown}");
    let e = &body["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["type"].is_string(),
        "{what}: not OpenAI's error shape: {shown}"
    );
}

#[tokio::test]
async fn hostile_requests_get_openai_errors_and_the_server_stays_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_with(models_config(&tmp.path().join("data"), &models_dir(), LLM)).await;
    let chat = "/v1/chat/completions";
    let user = json!([{"role": "user", "content": "hi"}]);
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "messages not an array",
            chat,
            json!({"model": LLM, "messages": "hi"}),
        ),
        ("no messages", chat, json!({"model": LLM})),
        (
            "unknown role",
            chat,
            json!({"model": LLM, "messages": [{"role": "wizard", "content": "hi"}]}),
        ),
        (
            "content a number",
            chat,
            json!({"model": LLM, "messages": [{"role": "user", "content": 7}]}),
        ),
        (
            "n = 2",
            chat,
            json!({"model": LLM, "messages": user, "n": 2}),
        ),
        (
            "temperature out of range",
            chat,
            json!({"model": LLM, "messages": user, "temperature": 9}),
        ),
        (
            "max_tokens negative",
            chat,
            json!({"model": LLM, "messages": user, "max_tokens": -1}),
        ),
        (
            "unknown model",
            chat,
            json!({"model": "nope", "messages": user}),
        ),
        (
            "tool schema with $ref",
            chat,
            json!({"model": LLM, "messages": user, "tools": [
            {"type": "function", "function": {"name": "f", "parameters":
                {"type": "object", "properties": {"x": {"$ref": "#/defs/x"}}}}}]}),
        ),
        (
            "tool_choice names no tool",
            chat,
            json!({"model": LLM, "messages": user,
            "tool_choice": {"type": "function", "function": {"name": "missing"}}}),
        ),
        (
            "tool result for no call",
            chat,
            json!({"model": LLM, "messages": [
            {"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "1"}]}),
        ),
        (
            "embeddings input a number",
            "/v1/embeddings",
            json!({"model": "all-MiniLM-L6-v2", "input": 5}),
        ),
        (
            "embeddings empty",
            "/v1/embeddings",
            json!({"model": "all-MiniLM-L6-v2", "input": []}),
        ),
        (
            "embeddings dimensions",
            "/v1/embeddings",
            json!({"model": "all-MiniLM-L6-v2", "input": "a", "dimensions": 12}),
        ),
        (
            "embeddings token out of range",
            "/v1/embeddings",
            json!({"model": "all-MiniLM-L6-v2", "input": [[4_000_000_000u64]]}),
        ),
        (
            "rerank without a reranker",
            "/v1/rerank",
            json!({"query": "q", "documents": ["a"]}),
        ),
    ];
    for (what, path, body) in cases {
        let (status, body) = send(&server, path, body.to_string().into(), "application/json").await;
        assert_openai_error(what, status, &body);
    }
    // Not JSON, not UTF-8, wrong content type, and a body far over the limit.
    let (s, b) = send(&server, chat, "{\"model\": ".into(), "application/json").await;
    assert_openai_error("truncated JSON", s, &b);
    let (s, b) = send(
        &server,
        chat,
        vec![0xff, 0xfe, 0x7b].into(),
        "application/json",
    )
    .await;
    assert_openai_error("not UTF-8", s, &b);
    let (s, b) = send(&server, chat, user.to_string().into(), "text/plain").await;
    assert_openai_error("text/plain", s, &b);
    let huge =
        json!({"model": LLM, "messages": [{"role": "user", "content": "word ".repeat(6_000_000)}]});
    let (s, b) = send(&server, chat, huge.to_string().into(), "application/json").await;
    assert_openai_error("huge body", s, &b);
    // A message longer than the model's window: refused, not truncated into nonsense.
    let long =
        json!({"model": LLM, "messages": [{"role": "user", "content": "word ".repeat(20_000)}]});
    let (s, b) = send(&server, chat, long.to_string().into(), "application/json").await;
    assert_openai_error("over the window", s, &b);
    // A client that leaves mid-stream breaks nothing.
    let r = reqwest::Client::new()
        .post(server.url(chat))
        .json(&json!({"model": LLM, "messages": user, "stream": true, "max_tokens": 200}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(r);
    let (s, b) = server
        .post_json(
            chat,
            &json!({"model": LLM, "messages": user, "max_tokens": 4}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert!(b["choices"][0]["message"]["content"].is_string(), "{b}");
    server.stop().await;
}
