//! Helpers of the folder-sync tests (`ragd ingest --watch`, `watch_dirs`): waiting for a
//! change to reach the knowledge base, and what it holds.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::TestServer;

/// Polls `check` until it holds; returns how long that took (panics past 10 s).
pub async fn within(what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !check().await {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: never seen");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    t.elapsed()
}

/// The stored source names, sorted.
pub async fn sources(s: &TestServer) -> Vec<String> {
    let (_, v) = s.get_json("/api/v1/documents/sources").await;
    let mut names: Vec<String> = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Whether any stored chunk contains `words`.
pub async fn any_chunk_says(s: &TestServer, words: &str) -> bool {
    let (_, v) = s.get_json("/api/v1/documents?page_size=100").await;
    v["documents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["text"].as_str().unwrap().contains(words))
}

/// The refusals of an ingest summary as `"path": "reason"` lines.
pub fn refusals(summary: &Value) -> Vec<String> {
    summary["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}: {}", r["path"], r["reason"]))
        .collect()
}

/// In the watched folder `docs`: creates `second.md`, changes it, renames it to
/// `renamed.md`; each must reach the knowledge base within 2 s.
pub async fn create_change_rename(s: &TestServer, docs: &std::path::Path) {
    std::fs::write(
        docs.join("second.md"),
        "# Second\n\nA created file about kestrels.\n",
    )
    .unwrap();
    let took = within("a create", async || {
        sources(s).await.contains(&"second.md".into())
    })
    .await;
    assert!(took < Duration::from_secs(2), "create seen after {took:?}");

    std::fs::write(
        docs.join("second.md"),
        "# Second\n\nA changed file about ospreys.\n",
    )
    .unwrap();
    let took = within("a change", async || any_chunk_says(s, "ospreys").await).await;
    assert!(took < Duration::from_secs(2), "change seen after {took:?}");
    assert!(!any_chunk_says(s, "kestrels").await);

    std::fs::rename(docs.join("second.md"), docs.join("renamed.md")).unwrap();
    let took = within("a rename", async || {
        let now = sources(s).await;
        now.contains(&"renamed.md".into()) && !now.contains(&"second.md".into())
    })
    .await;
    assert!(took < Duration::from_secs(2), "rename seen after {took:?}");
}
