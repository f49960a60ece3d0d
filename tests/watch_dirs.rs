//! The server's `watch_dirs`: a watched folder is caught up at start, then a create, a
//! change, a rename and a delete each reach the knowledge base within 2 s; what changed
//! while the server was down is caught up at the next start; the data directory inside
//! a watched folder is never ingested; a watched folder that does not exist stops
//! start-up with its name.

mod common;

use std::path::Path;
use std::time::Duration;

use common::sync::{any_chunk_says, create_change_rename, sources, within};
use common::{test_config, TestServer};

async fn start(watched: &Path, data: &Path, keep_deleted: bool) -> TestServer {
    TestServer::start_with(ragd::Config {
        watch_dirs: vec![watched.to_owned()],
        watch_keep_deleted: keep_deleted,
        ..test_config(data)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_folder_follows_every_change_and_catches_up_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("watched");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("first.md"),
        "# First\n\nThe first file is here.\n",
    )
    .unwrap();
    std::fs::write(docs.join("sub/nested.txt"), "A nested note about herons.").unwrap();
    // The data directory inside the watched folder: its files are never ingested.
    let data = docs.join(".ragd-data");
    let s = start(&docs, &data, false).await;
    within("the catch-up at start", async || {
        sources(&s).await == ["first.md", "nested.txt"]
    })
    .await;

    create_change_rename(&s, &docs).await;
    assert!(any_chunk_says(&s, "ospreys").await);

    std::fs::remove_file(docs.join("first.md")).unwrap();
    let took = within("a delete", async || {
        sources(&s).await == ["nested.txt", "renamed.md"]
    })
    .await;
    assert!(took < Duration::from_secs(2), "delete seen after {took:?}");
    // Nothing from the data directory (its SQLite file, indexes, state) went in, though
    // the server wrote there all along.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(sources(&s).await, ["nested.txt", "renamed.md"]);
    s.stop().await;

    // While the server is down: a new file, a changed one and a deleted one.
    std::fs::write(
        docs.join("offline.md"),
        "# Offline\n\nWritten while nothing watched: plovers.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("sub/nested.txt"),
        "A nested note about egrets now.",
    )
    .unwrap();
    std::fs::remove_file(docs.join("renamed.md")).unwrap();
    let s = start(&docs, &data, false).await;
    within("the catch-up after a restart", async || {
        sources(&s).await == ["nested.txt", "offline.md"] && any_chunk_says(&s, "egrets").await
    })
    .await;
    assert!(any_chunk_says(&s, "plovers").await);
    assert!(!any_chunk_says(&s, "herons").await);
    s.stop().await;

    // With watch_keep_deleted, a deleted file's source stays.
    let s = start(&docs, &data, true).await;
    std::fs::remove_file(docs.join("offline.md")).unwrap();
    std::fs::write(docs.join("later.md"), "# Later\n\nAfter the delete.\n").unwrap();
    within("a create after a delete", async || {
        sources(&s).await.contains(&"later.md".into())
    })
    .await;
    assert!(sources(&s).await.contains(&"offline.md".into()));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_folder_that_does_not_exist_stops_start_up_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-folder");
    let config = ragd::Config {
        watch_dirs: vec![missing.clone()],
        ..test_config(&tmp.path().join("data"))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = ragd::run(config, listener, std::future::pending())
        .await
        .expect_err("started without its watched folder");
    let text = format!("{err:#}");
    assert!(
        text.contains("watch_dirs") && text.contains("no-such-folder"),
        "{text}"
    );
}
