//! The MCP server driven by the real `mcp` SDK (tests/clients/mcp_sdk.py): streamable
//! HTTP with a user's key (the SDK's default negotiation, which reaches 2026-07-28, and
//! the initialize handshake), a search that returns an uploaded document's text, a
//! delete held for confirmation (the document still stored), resources listed and read,
//! a wrong token refused, and `ragd mcp` over stdio, forwarding to the server and on a
//! data directory of its own.

mod common;

use std::time::Duration;

use common::clients::run_client;
use common::{create_user, Auth, TestServer};
use serde_json::{json, Value};

const WORD: &str = "quillfeather";
const SOURCE: &str = "mcp-notes.md";
const SDK_TIMEOUT: Duration = Duration::from_secs(90);

fn one(run: &common::clients::ClientRun, prefix: &str) -> String {
    let lines = run.lines_with(&format!("{prefix} "));
    assert_eq!(lines.len(), 1, "{prefix}: {}\n{}", run.stdout, run.stderr);
    lines[0].clone()
}

/// A server with one user and one uploaded document; returns it, the user's key and the
/// document's id.
async fn server_with_document(dir: &std::path::Path) -> (TestServer, String, String) {
    let key = create_user(dir, "mcp@example.com", "password123", false).await;
    let s = TestServer::start(dir).await;
    let text = format!(
        "# Field notes\n\nThe {WORD} valve must be greased every spring before the pumps start.\n"
    );
    let (st, r) = s.upload(SOURCE, text.as_bytes()).await;
    assert_eq!(st, 200, "{r}");
    let (st, docs) = s.get_json("/api/v1/documents").await;
    assert_eq!(st, 200, "{docs}");
    let id = docs["documents"][0]["id"]
        .as_str()
        .expect("a document")
        .to_owned();
    (s, key, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_sdk_over_http_and_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let (s, key, doc_id) = server_with_document(dir.path()).await;
    let url = s.url("/mcp");

    let run = run_client(
        "mcp_sdk.py",
        &["http", &url, &key, WORD, &doc_id, SOURCE],
        &[],
        SDK_TIMEOUT,
    )
    .await;
    run.assert_ok();
    assert_eq!(one(&run, "VERSION_AUTO"), "2026-07-28");
    assert_eq!(one(&run, "VERSION_LEGACY"), "2025-11-25");
    assert_eq!(one(&run, "SERVER"), "ragd");
    let tools: usize = one(&run, "TOOLS").parse().unwrap();
    assert!(tools >= 10, "{tools} tools");
    assert_eq!(one(&run, "DELETE_DESTRUCTIVE"), "True");
    assert_eq!(one(&run, "SEARCH_AUTO"), "found");
    assert_eq!(one(&run, "SEARCH_LEGACY"), "found");
    assert!(
        one(&run, "INVALID_ARGS_IS_ERROR").starts_with("True"),
        "{}",
        run.stdout
    );
    assert_eq!(one(&run, "UNKNOWN_TOOL"), "-32602");
    assert_eq!(one(&run, "RESOURCES"), "1");
    assert!(
        one(&run, "READ").starts_with("text/plain "),
        "{}",
        run.stdout
    );
    assert_eq!(one(&run, "MISSING_RESOURCE"), "-32002");

    // The delete was held, not run: the document is still stored, and the pending action
    // is the user's, for a person to confirm.
    let action_id = one(&run, "HELD");
    let (st, doc) = s.get_json(&format!("/api/v1/documents/{doc_id}")).await;
    assert_eq!(st, 200, "the held delete ran: {doc}");
    let pending = s
        .call(
            reqwest::Method::GET,
            "assistant.api.list_pending_actions",
            &json!({}),
            &Auth::Token(key.clone()),
        )
        .await;
    let actions = pending.data()["actions"].as_array().unwrap().clone();
    let held: Vec<&Value> = actions
        .iter()
        .filter(|a| a["action_id"] == action_id.as_str())
        .collect();
    assert_eq!(held.len(), 1, "{actions:?}");
    assert_eq!(held[0]["tool_name"], "delete_document");
    assert_eq!(held[0]["params"]["document_id"], doc_id.as_str());

    // A client that declared elicitation: the person's answer decides the held delete.
    let (st, r) = s
        .upload("second.md", b"# Second\n\nA second note about the pumps.\n")
        .await;
    assert_eq!(st, 200, "{r}");
    let (_, docs) = s.get_json("/api/v1/documents").await;
    let second = docs["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .find(|id| *id != doc_id)
        .expect("the second document");
    let run = run_client(
        "mcp_sdk.py",
        &["elicit", &url, &key, &second, &doc_id],
        &[],
        SDK_TIMEOUT,
    )
    .await;
    run.assert_ok();
    assert_eq!(one(&run, "ELICIT_ASKED"), "2");
    assert_eq!(one(&run, "ELICIT_DECLINED"), "ok");
    let (st, _) = s.get_json(&format!("/api/v1/documents/{second}")).await;
    assert_eq!(st, 404, "the confirmed delete did not run");
    let (st, _) = s.get_json(&format!("/api/v1/documents/{doc_id}")).await;
    assert_eq!(st, 200, "the declined delete ran");

    // A wrong token: the SDK raises, and the HTTP answer is 401 with a Bearer challenge.
    let run = run_client(
        "mcp_sdk.py",
        &["refused", &url, "nope:wrong"],
        &[],
        SDK_TIMEOUT,
    )
    .await;
    run.assert_ok();
    assert!(!one(&run, "REFUSED").is_empty());
    let r = s
        .client
        .post(&url)
        .bearer_auth("nope:wrong")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );

    // stdio, forwarded: the SDK starts `ragd mcp --server URL` with the key in the env.
    let args = json!(["mcp", "--server", s.base]).to_string();
    let env = json!({"RAGD_API_KEY": key}).to_string();
    let run = run_client(
        "mcp_sdk.py",
        &["stdio", env!("CARGO_BIN_EXE_ragd"), &args, &env, WORD],
        &[],
        SDK_TIMEOUT,
    )
    .await;
    run.assert_ok();
    assert_eq!(one(&run, "SEARCH_STDIO"), "found");
    assert!(one(&run, "STDIO_TOOLS").parse::<usize>().unwrap() >= 10);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ragd_mcp_on_its_own_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().display().to_string();
    let models = common::models_dir().display().to_string();
    let args = json!(["mcp", "--data-dir", data, "--models-dir", models]).to_string();
    // No LLM: the tools that read the knowledge base need only the embedder.
    let env = json!({"RAGD_LLM_MODEL": "none", "RUST_LOG": "warn"}).to_string();
    let run = run_client(
        "mcp_sdk.py",
        &["stdio", env!("CARGO_BIN_EXE_ragd"), &args, &env, ""],
        &[],
        SDK_TIMEOUT,
    )
    .await;
    run.assert_ok();
    assert!(one(&run, "STDIO_TOOLS").parse::<usize>().unwrap() >= 10);
    assert_eq!(one(&run, "STDIO_SEARCH_EMPTY"), "0", "{}", run.stdout);
    // It acted as the first administrator, created on the fresh data directory.
    assert!(dir.path().join("initial-admin.txt").exists());

    // A data directory another process holds (as `ragd serve` holds its own) is refused
    // at once, naming the way to the running server.
    let _held = ragd::state::data_lock::DataDirLock::acquire(dir.path()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(["mcp", "--data-dir", &data, "--models-dir", &models])
        .env("RAGD_LLM_MODEL", "none")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("in use") && stderr.contains("--server"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout is the protocol's: {:?}",
        out.stdout
    );
}
