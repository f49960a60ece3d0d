//! Hostile and malformed input on `/mcp` (plain HTTP, no SDK): every refusal is a
//! JSON-RPC error with the code the protocol names and a 4xx status, never a 500 or a
//! hang; the credential, Origin and session checks; and what a server key may do.

mod common;

use common::{create_user, test_config, TestServer};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

const V: &str = "2026-07-28";

struct Mcp<'a> {
    s: &'a TestServer,
    key: Option<String>,
}

impl Mcp<'_> {
    async fn raw(&self, body: Vec<u8>, headers: &[(&str, &str)]) -> (u16, HeaderMap, Value) {
        let mut req = self
            .s
            .client
            .post(self.s.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if !headers.iter().any(|(k, _)| *k == "content-type") {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let (status, h) = (r.status().as_u16(), r.headers().clone());
        let text = r.text().await.unwrap();
        assert!(status < 500, "{status}: {text}");
        (
            status,
            h,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    async fn send(&self, msg: &Value, headers: &[(&str, &str)]) -> (u16, HeaderMap, Value) {
        self.raw(msg.to_string().into_bytes(), headers).await
    }

    /// A 2026-07-28 request with its envelope and routing headers.
    async fn modern(&self, method: &str, mut params: Value) -> (u16, Value) {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let name = params
            .get("name")
            .or_else(|| params.get("uri"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut headers = vec![("mcp-protocol-version", V), ("mcp-method", method)];
        if let Some(n) = &name {
            headers.push(("mcp-name", n));
        }
        let msg = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let (st, _, body) = self.send(&msg, &headers).await;
        (st, body)
    }
}

fn code(body: &Value) -> i64 {
    body["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_get_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let key = create_user(dir.path(), "h@example.com", "password123", false).await;
    let s = TestServer::start(dir.path()).await;
    let m = Mcp {
        s: &s,
        key: Some(key),
    };

    let (st, _, b) = m
        .raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, ".to_vec(), &[])
        .await;
    assert_eq!((st, code(&b)), (400, -32700), "{b}");
    let deep = "[".repeat(100_000);
    let (st, _, b) = m.raw(deep.into_bytes(), &[]).await;
    assert_eq!((st, code(&b)), (400, -32700), "{b}");
    let batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]);
    let (st, _, b) = m.send(&batch, &[]).await;
    assert_eq!((st, code(&b)), (400, -32600), "{b}");
    assert!(
        b["error"]["message"].as_str().unwrap().contains("batch"),
        "{b}"
    );
    let (st, _, b) = m
        .send(&json!({"jsonrpc": "2.0", "id": 1, "method": 5}), &[])
        .await;
    assert_eq!((st, code(&b)), (400, -32600), "{b}");
    let (st, _, b) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
            &[],
        )
        .await;
    assert_eq!(
        (st, code(&b), b["id"].clone()),
        (400, -32602, json!(1)),
        "{b}"
    );
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}",
        "a".repeat(5 << 20)
    );
    let (st, _, b) = m.raw(huge.into_bytes(), &[]).await;
    assert_eq!((st, code(&b)), (413, -32600), "{b}");
    let (st, _, _) = m
        .raw(b"ping".to_vec(), &[("content-type", "text/plain")])
        .await;
    assert_eq!(st, 415);

    // Handshake era: initialize needs a version; later requests need the session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    let (st, _, b) = m.send(&init, &[]).await;
    assert_eq!((st, code(&b)), (400, -32602), "{b}");
    let (st, _, b) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!((st, code(&b)), (400, -32600), "{b}");
    let (st, _, b) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            &[("mcp-session-id", "made-up")],
        )
        .await;
    assert_eq!((st, code(&b)), (404, -32001), "{b}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (st, h, b) = m.send(&init, &[]).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(b["result"]["serverInfo"]["name"], "ragd");
    let sid = h["mcp-session-id"].to_str().unwrap().to_owned();
    let sh = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-03-26"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(m.send(&note, &sh).await.0, 202);
    let (_, _, b) = m
        .send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}), &sh)
        .await;
    assert_eq!(b["result"], json!({}), "{b}");
    let (st, _, b) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 3, "method": "no/such"}),
            &sh,
        )
        .await;
    assert_eq!((st, code(&b)), (200, -32601), "{b}");
    let call = |params: Value| json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params});
    let (_, _, b) = m.send(&call(json!({"name": "no_such_tool"})), &sh).await;
    assert_eq!(code(&b), -32602, "{b}");
    let (_, _, b) = m.send(&call(json!({"arguments": {}})), &sh).await;
    assert_eq!(code(&b), -32602, "{b}");
    let (_, _, b) = m
        .send(
            &call(json!({"name": "search_knowledge_base", "arguments": "q"})),
            &sh,
        )
        .await;
    assert_eq!(code(&b), -32602, "{b}");
    // Arguments against the tool's schema: a tool error the model can read.
    let (_, _, b) = m
        .send(
            &call(
                json!({"name": "search_knowledge_base", "arguments": {"query": 5, "top_k": 500}}),
            ),
            &sh,
        )
        .await;
    assert_eq!(b["result"]["isError"], true, "{b}");
    let read =
        json!({"jsonrpc": "2.0", "id": 5, "method": "resources/list", "params": {"cursor": "%%%"}});
    let (_, _, b) = m.send(&read, &sh).await;
    assert_eq!(code(&b), -32602, "{b}");
    let wrong_version = [
        ("mcp-session-id", sid.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let (st, _, b) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}),
            &wrong_version,
        )
        .await;
    assert_eq!((st, code(&b)), (400, -32600), "{b}");
    // The session is its owner's: the service identity (no credential, development
    // mode) does not find it.
    let anon = Mcp { s: &s, key: None };
    let (st, _, _) = anon
        .send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}), &sh)
        .await;
    assert_eq!(st, 404);
    // DELETE ends it.
    let del = s
        .client
        .delete(s.url("/mcp"))
        .bearer_auth(m.key.as_deref().unwrap())
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    let (st, _, _) = m
        .send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}), &sh)
        .await;
    assert_eq!(st, 404);
    let get = s
        .client
        .get(s.url("/mcp"))
        .bearer_auth(m.key.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);

    // 2026-07-28: the envelope and its routing headers.
    let (st, b) = m.modern("ping", json!({})).await;
    assert_eq!(
        (st, b["result"]["resultType"].clone()),
        (200, json!("complete")),
        "{b}"
    );
    let (st, b) = m.modern("server/discover", json!({})).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(b["result"]["supportedVersions"][0], V);
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (st, _, b) = m
        .send(
            &msg,
            &[("mcp-protocol-version", V), ("mcp-method", "tools/call")],
        )
        .await;
    assert_eq!((st, code(&b)), (400, -32020), "{b}");
    let old = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2031-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (st, _, b) = m
        .send(
            &old,
            &[
                ("mcp-protocol-version", "2031-01-01"),
                ("mcp-method", "tools/list"),
            ],
        )
        .await;
    assert_eq!((st, code(&b)), (400, -32022), "{b}");
    assert_eq!(b["error"]["data"]["supported"], json!([V]), "{b}");
    let (_, b) = m
        .modern("resources/read", json!({"uri": "file:///etc/passwd"}))
        .await;
    assert_eq!(code(&b), -32002, "{b}");

    // A browser page of another site is refused before anything is read.
    let (st, _, _) = m
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            &[("origin", "https://evil.example")],
        )
        .await;
    assert_eq!(st, 403);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_what_a_server_key_may_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = ragd::Config {
        api_keys: vec!["server-key".into()],
        rate_limit_tools: 3,
        ..test_config(dir.path())
    };
    let s = TestServer::start_with(config).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    for key in [None, Some("wrong"), Some("a:b")] {
        let (st, h, b) = Mcp {
            s: &s,
            key: key.map(str::to_owned),
        }
        .send(&ping, &[])
        .await;
        assert_eq!(st, 401, "{key:?}: {b}");
        assert!(h["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"));
        assert!(
            b["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{b}"
        );
    }
    let m = Mcp {
        s: &s,
        key: Some("server-key".into()),
    };
    let (st, b) = m.modern("tools/list", json!({})).await;
    assert_eq!(st, 200, "{b}");
    let names: Vec<&str> = b["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"search_knowledge_base"), "{names:?}");
    assert!(
        !names.contains(&"delete_document") && !names.contains(&"list_conversations"),
        "{names:?}"
    );
    let (_, b) = m
        .modern(
            "tools/call",
            json!({"name": "search_knowledge_base", "arguments": {"query": "pumps"}}),
        )
        .await;
    assert_eq!(b["result"]["isError"], false, "{b}");
    let (_, b) = m
        .modern(
            "tools/call",
            json!({"name": "delete_document", "arguments": {"document_id": "x"}}),
        )
        .await;
    assert_eq!(b["result"]["isError"], true, "{b}");
    let text = b["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("user's credential"), "{text}");
    let (_, b) = m
        .modern(
            "tools/call",
            json!({"name": "calculate", "arguments": {"expression": "6*7"}}),
        )
        .await;
    assert_eq!(b["result"]["isError"], false, "{b}");
    // The fourth call in the minute is over `rate_limit_tools`: a tool error, not a run.
    let (_, b) = m
        .modern(
            "tools/call",
            json!({"name": "search_knowledge_base", "arguments": {"query": "pumps"}}),
        )
        .await;
    assert_eq!(b["result"]["isError"], true, "{b}");
    let text = b["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("rate limit"), "{text}");
    let (_, b) = m.modern("resources/list", json!({})).await;
    assert_eq!(b["result"]["resources"], json!([]), "{b}");
    let spec: Value = s
        .client
        .get(s.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        spec["paths"]["/mcp"]["post"]["operationId"], "mcp_post",
        "{}",
        spec["paths"]["/mcp"]
    );
    s.stop().await;
}
