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

/// A streamed request whose client leaves at once breaks nothing: a plain request on the
/// same route is answered afterwards. Returns that answer.
async fn leave_mid_stream(server: &TestServer, path: &str, body: Value) -> Value {
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["max_tokens"] = json!(200);
    let r = reqwest::Client::new()
        .post(server.url(path))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    drop(r);
    let (s, b) = server.post_json(path, &body).await;
    assert_eq!(s, 200, "{b}");
    b
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
    let b = leave_mid_stream(
        &server,
        chat,
        json!({"model": LLM, "messages": user, "max_tokens": 4}),
    )
    .await;
    assert!(b["choices"][0]["message"]["content"].is_string(), "{b}");
    server.stop().await;
}

fn assert_anthropic_error(what: &str, status: u16, body: &Value) {
    let shown: String = body.to_string().chars().take(300).collect();
    assert!((400..500).contains(&status), "{what}: {status} {shown}");
    assert!(
        body["type"] == "error"
            && body["error"]["type"].is_string()
            && body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
        "{what}: not Anthropic's error shape: {shown}"
    );
}

#[tokio::test]
async fn hostile_requests_get_anthropic_errors_and_the_server_stays_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_with(models_config(&tmp.path().join("data"), &models_dir(), LLM)).await;
    let msgs = "/v1/messages";
    let user = json!([{"role": "user", "content": "hi"}]);
    let tool = json!({"name": "f", "input_schema": {"type": "object", "properties": {}}});
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "no max_tokens",
            msgs,
            json!({"model": LLM, "messages": user}),
        ),
        (
            "max_tokens 0",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 0}),
        ),
        (
            "max_tokens a string",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": "9"}),
        ),
        (
            "messages empty",
            msgs,
            json!({"model": LLM, "messages": [], "max_tokens": 4}),
        ),
        (
            "messages an object",
            msgs,
            json!({"model": LLM, "messages": {}, "max_tokens": 4}),
        ),
        (
            "system role in messages",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}),
        ),
        (
            "content a number",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": 5}]}),
        ),
        (
            "block without type",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": [{"text": "x"}]}]}),
        ),
        (
            "image block",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}),
        ),
        (
            "tool_result for no tool_use",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}]}]}),
        ),
        (
            "tool_use from the user",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}),
        ),
        (
            "prefilled assistant turn",
            msgs,
            json!({"model": LLM, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Well"}]}),
        ),
        (
            "temperature 3",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "temperature": 3}),
        ),
        (
            "empty stop sequence",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "stop_sequences": [""]}),
        ),
        (
            "server tool",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4,
                "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
        ),
        (
            "tool schema with oneOf",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "tools": [{"name": "f",
                "input_schema": {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}}}]}),
        ),
        (
            "tool name with spaces",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "tools": [{"name": "a b"}]}),
        ),
        (
            "tool_choice names no tool",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "tools": [tool],
                "tool_choice": {"type": "tool", "name": "g"}}),
        ),
        (
            "tool_choice any without tools",
            msgs,
            json!({"model": LLM, "messages": user, "max_tokens": 4, "tool_choice": {"type": "any"}}),
        ),
        (
            "unknown model",
            msgs,
            json!({"model": "claude-nope", "messages": user, "max_tokens": 4}),
        ),
        (
            "count_tokens unknown role",
            "/v1/messages/count_tokens",
            json!({"model": LLM, "messages": [{"role": "robot", "content": "x"}]}),
        ),
    ];
    for (what, path, body) in cases {
        let (status, body) = send(&server, path, body.to_string().into(), "application/json").await;
        assert_anthropic_error(what, status, &body);
    }
    let (s, b) = send(&server, msgs, "{\"model\": ".into(), "application/json").await;
    assert_anthropic_error("truncated JSON", s, &b);
    let (s, b) = send(
        &server,
        msgs,
        vec![0xff, 0xfe, 0x7b].into(),
        "application/json",
    )
    .await;
    assert_anthropic_error("not UTF-8", s, &b);
    let huge = json!({"model": LLM, "max_tokens": 4,
        "messages": [{"role": "user", "content": "word ".repeat(6_000_000)}]});
    let (s, b) = send(&server, msgs, huge.to_string().into(), "application/json").await;
    assert_anthropic_error("huge body", s, &b);
    let long = json!({"model": LLM, "max_tokens": 4,
        "messages": [{"role": "user", "content": "word ".repeat(20_000)}]});
    let (s, b) = send(&server, msgs, long.to_string().into(), "application/json").await;
    assert_anthropic_error("over the window", s, &b);
    // A client that leaves mid-stream breaks nothing.
    let b = leave_mid_stream(
        &server,
        msgs,
        json!({"model": LLM, "messages": user, "max_tokens": 4}),
    )
    .await;
    assert!(b["content"][0]["text"].is_string(), "{b}");
    server.stop().await;
}

/// A seeded generator for the fuzz test (xorshift; no dependency, the same cases each run).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A value of a random JSON type, sometimes hostile (huge, control characters, deep).
fn junk(rng: &mut Rng) -> Value {
    match rng.below(13) {
        10 => json!("x"),
        11 => json!(1),
        12 => json!(0.5),
        0 => Value::Null,
        1 => json!(-1),
        2 => json!(1e300),
        3 => json!(true),
        4 => json!("\u{0}<|im_start|>\u{202e}"),
        5 => json!("x".repeat(100_000)),
        6 => json!([]),
        7 => json!({}),
        8 => (0..40).fold(json!(1), |v, _| json!([v])),
        _ => json!([{"type": "text"}]),
    }
}

/// Every path to a value inside `v` (object keys and array indexes).
fn paths(v: &Value, at: Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            let mut p = at.clone();
            p.push(json!(k));
            paths(x, p, out);
        }),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            let mut p = at.clone();
            p.push(json!(i));
            paths(x, p, out);
        }),
        _ => {}
    }
}

/// `v` with the value at `path` replaced by `new`, or removed when `new` is `None`.
fn mutate(v: &mut Value, path: &[Value], new: Option<Value>) {
    let Some((last, parent)) = path.split_last() else {
        *v = new.unwrap_or(Value::Null);
        return;
    };
    let mut cur = v;
    for p in parent {
        cur = match p {
            Value::String(k) => &mut cur[k.as_str()],
            _ => &mut cur[p.as_u64().unwrap() as usize],
        };
    }
    match (cur, last, new) {
        (Value::Object(o), Value::String(k), None) => {
            o.remove(k);
        }
        (Value::Object(o), Value::String(k), Some(n)) => {
            o.insert(k.clone(), n);
        }
        (Value::Array(a), i, None) => {
            a.remove(i.as_u64().unwrap() as usize);
        }
        (Value::Array(a), i, Some(n)) => a[i.as_u64().unwrap() as usize] = n,
        _ => {}
    }
}

/// Seeded mutations of valid chat and messages requests (a field removed, retyped, made
/// huge or hostile; the text cut short): every answer is 2xx or a 4xx in the route's
/// error shape, never a 5xx or a hang.
#[tokio::test]
async fn mutated_model_requests_never_fail_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_with(models_config(&tmp.path().join("data"), &models_dir(), LLM)).await;
    let tools_oai = json!([{"type": "function", "function": {"name": "f", "description": "d",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}]);
    let tools_ant = json!([{"name": "f", "description": "d",
        "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}]);
    let seeds: Vec<(&str, Value)> = vec![
        (
            "/v1/chat/completions",
            json!({"model": LLM, "max_tokens": 2, "temperature": 0, "stop": ["\n"],
                "tools": tools_oai, "tool_choice": "auto",
                "messages": [{"role": "system", "content": "s"},
                    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "f", "arguments": "{\"x\": \"1\"}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}),
        ),
        (
            "/v1/messages",
            json!({"model": LLM, "max_tokens": 2, "temperature": 0, "stop_sequences": ["\n"],
                "system": [{"type": "text", "text": "s"}], "tools": tools_ant,
                "tool_choice": {"type": "auto"},
                "messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": "1"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]}]}]}),
        ),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let client = reqwest::Client::new();
    let (mut answered, mut refused) = (0, 0);
    for round in 0..240 {
        let (path, seed) = &seeds[round % seeds.len()];
        let mut body = seed.clone();
        let mut all = Vec::new();
        paths(&body, Vec::new(), &mut all);
        for _ in 0..1 + rng.below(3) {
            let at = all[rng.below(all.len())].clone();
            let new = (rng.below(4) > 0).then(|| junk(&mut rng));
            mutate(&mut body, &at, new);
            all.clear();
            paths(&body, Vec::new(), &mut all);
        }
        // Keep generations short whatever the mutation did.
        if body
            .get("max_tokens")
            .and_then(Value::as_u64)
            .is_some_and(|m| m > 2)
        {
            body["max_tokens"] = json!(2);
        }
        let mut text = body.to_string();
        if rng.below(8) == 0 {
            let cut = rng.below(text.len());
            text = String::from_utf8_lossy(&text.as_bytes()[..cut]).into_owned();
        }
        let r = client
            .post(server.url(path))
            .header("content-type", "application/json")
            .body(text.clone())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap_or_else(|e| panic!("round {round}: no answer ({e}) to {text:.300}"));
        let status = r.status().as_u16();
        let stream = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
        let body = r.text().await.unwrap_or_default();
        let shown: String = text.chars().take(300).collect();
        assert!(
            status < 500,
            "round {round}: {status} {body:.300} for {shown}"
        );
        if status >= 400 {
            refused += 1;
            let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if *path == "/v1/messages" {
                assert_anthropic_error(&format!("round {round}: {shown}"), status, &v);
            } else {
                assert_openai_error(&format!("round {round}: {shown}"), status, &v);
            }
        } else {
            answered += 1;
            if !stream {
                assert!(
                    serde_json::from_str::<Value>(&body).is_ok(),
                    "round {round}: {body:.300}"
                );
            }
        }
    }
    // The mutations reach both sides: some requests still valid, most refused.
    eprintln!("{answered} answered, {refused} refused");
    assert!(
        answered >= 10 && refused >= 100,
        "{answered} answered, {refused} refused"
    );
    let (s, b) = server
        .post_json(
            "/v1/chat/completions",
            &json!({"model": LLM, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    server.stop().await;
}
