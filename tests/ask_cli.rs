//! `ragd ask` and `ragd search` against the real server.

mod common;

use std::process::Command;

use common::TestServer;
use serde_json::Value;

fn ragd(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(args)
        .output()
        .expect("running ragd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_streams_with_numbered_sources_and_search_lists_passages() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(tmp.path()).await;
    s.upload(
        "seals.md",
        b"# Seals\n\nPump seals are replaced every 18 months by the crew.",
    )
    .await;
    s.upload("bread.md", b"# Bread\n\nKnead the dough for ten minutes.")
        .await;
    let base = s.base.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        ragd(&[
            "ask",
            "--server",
            &base,
            "How often are pump seals replaced?",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("18 months"), "{out}");
    assert!(out.contains("Sources:\n[1] Seals (seals.md"), "{out}");

    let base = s.base.clone();
    let (code, out, _) = tokio::task::spawn_blocking(move || {
        ragd(&[
            "ask",
            "--json",
            "--server",
            &base,
            "How often are pump seals replaced?",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sources"][0]["source"], "seals.md", "{v}");
    assert!(v["answer"].as_str().unwrap().contains("18 months"));

    let base = s.base.clone();
    let (code, out, _) = tokio::task::spawn_blocking(move || {
        ragd(&[
            "search",
            "--server",
            &base,
            "--top-k",
            "1",
            "kneading dough",
        ])
    })
    .await
    .unwrap();
    assert_eq!(code, 0);
    assert!(out.starts_with("[1] bread.md (score"), "{out}");

    // Bad input: the server's reason, not a panic.
    let base = s.base.clone();
    let (code, _, err) = tokio::task::spawn_blocking(move || ragd(&["ask", "--server", &base, ""]))
        .await
        .unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("400") && err.contains("empty"), "{err}");
    s.stop().await;
}
