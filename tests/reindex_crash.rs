//! The re-embedding task survives a kill. The real binary starts over a MiniLM knowledge
//! base with an embedder of another dimension and `RAGD_REEMBED_ON_CHANGE=true`: it
//! starts the reindex task itself; once a batch is committed it is killed (SIGKILL).
//! The store then holds vectors of both dimensions, each chunk recording its embedder.
//! Restarted, the same task resumes from its checkpoint (not from the start; no second
//! task), `ragd reindex` follows it to the end, and then searches are served, every
//! vector is the new embedder's (of the new dimension), and the indexes agree.

mod common;

use std::time::{Duration, Instant};

use common::child::ChildServer;
use common::reembed::{document, stored_chunks, write_random_embedder};
use common::TestServer;
use ragd::ml::reranker::CrossEncoderShape;
use serde_json::{json, Value};

/// 768 dimensions (BERT-base's width), two layers: slower per chunk than MiniLM, so a
/// batch takes long enough to kill the server between two.
const WIDE: CrossEncoderShape = CrossEncoderShape {
    hidden: 768,
    layers: 2,
    heads: 12,
    intermediate: 3072,
};

async fn get(client: &reqwest::Client, url: String) -> (u16, Value) {
    let r = client.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn search_status(client: &reqwest::Client, s: &ChildServer) -> u16 {
    client
        .post(s.url("/api/v1/search"))
        .json(&json!({"query": "refund policy", "top_k": 3}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The reindex tasks the server lists.
async fn reindex_tasks(client: &reqwest::Client, s: &ChildServer) -> Vec<Value> {
    let (st, list) = get(client, s.url("/api/v1/tasks?limit=200")).await;
    assert_eq!(st, 200, "{list}");
    list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "reindex")
        .cloned()
        .collect()
}

fn embedder_counts(data: &std::path::Path) -> Vec<(String, usize, u64)> {
    let mut counts: std::collections::BTreeMap<(String, usize), u64> = Default::default();
    for c in stored_chunks(data) {
        *counts
            .entry((c.embedder.unwrap_or_default(), c.embedding.len()))
            .or_default() += 1;
    }
    counts.into_iter().map(|((n, d), c)| (n, d, c)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_reindex_resumes_from_its_checkpoint_and_completes() {
    let data = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let wide = write_random_embedder(models.path(), "random-wide", WIDE);
    let wide_arg = wide.to_string_lossy().into_owned();

    // A MiniLM knowledge base of 300 chunks.
    let s = TestServer::start(data.path()).await;
    let mut form = reqwest::multipart::Form::new();
    for d in 0..15 {
        form = form.part(
            "files",
            reqwest::multipart::Part::bytes(document(d, 20, 40)).file_name(format!("h{d}.md")),
        );
    }
    let r = s
        .client
        .post(s.url("/api/v1/upload/bulk"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["successful"], 15, "{body}");
    let total = body["total_chunks_added"].as_u64().unwrap();
    assert!(total >= 300, "{body}");
    s.stop().await;

    // Another dimension, re-embedding on change: the server starts the task itself.
    let client = reqwest::Client::new();
    let args = ["--embedding-model", wide_arg.as_str()];
    let envs = [("RAGD_REEMBED_ON_CHANGE", "true")];
    let mut server = ChildServer::start(data.path(), &args, &envs);
    let deadline = Instant::now() + Duration::from_secs(300);
    let first = loop {
        assert!(Instant::now() < deadline, "no reindex batch was committed");
        let tasks = reindex_tasks(&client, &server).await;
        assert!(tasks.len() <= 1, "{tasks:?}");
        if let Some(t) = tasks.first() {
            assert_ne!(
                t["status"], "completed",
                "finished before it could be killed: {t}"
            );
            if t["result"]["chunks_done"].as_u64().unwrap_or(0) > 0 {
                break t.clone();
            }
        }
        assert_eq!(search_status(&client, &server).await, 503);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The refusal says that re-embedding is under way.
    let r = client
        .post(server.url("/api/v1/search"))
        .json(&json!({"query": "refund policy"}))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("re-embedding is under way"), "{body}");
    server.kill();
    let id = first["task_id"].as_str().unwrap().to_owned();

    // Killed mid-way: both embedders' vectors are stored, each chunk saying whose it is.
    let counts = embedder_counts(data.path());
    assert_eq!(
        counts
            .iter()
            .map(|(n, d, _)| (n.as_str(), *d))
            .collect::<Vec<_>>(),
        [("all-MiniLM-L6-v2", 384), ("random-wide", 768)],
        "{counts:?}"
    );
    let done_at_kill = counts[1].2;
    assert!(done_at_kill > 0 && done_at_kill < total, "{counts:?}");

    // Restarted: still refused; the same task resumes from its checkpoint.
    let server = ChildServer::start(data.path(), &args, &envs);
    assert_eq!(search_status(&client, &server).await, 503);
    let tasks = reindex_tasks(&client, &server).await;
    assert_eq!(
        tasks.len(),
        1,
        "a second reindex task was started: {tasks:?}"
    );
    assert_eq!(tasks[0]["task_id"], id.as_str());

    // `ragd reindex` follows the running task to its end.
    let (base, bin) = (server.base.clone(), env!("CARGO_BIN_EXE_ragd"));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin)
            .args(["reindex", "--server", &base])
            .env_remove("RAGD_API_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .trim_end()
            .ends_with(&format!("completed: {total}/{total} chunks re-embedded")),
        "{stdout}"
    );

    let (_, task) = get(&client, server.url(&format!("/api/v1/tasks/{id}"))).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["chunks_done"], total, "{task}");
    // It went on from its checkpoint: only what was left was re-embedded this time.
    assert_eq!(
        task["result"]["chunks_reembedded"],
        total - done_at_kill,
        "{task}"
    );
    let resumed = server
        .drain_logs()
        .into_iter()
        .find(|l| l["fields"]["message"] == "re-embedding chunks")
        .expect("the resumed task's log line");
    assert!(
        resumed["fields"]["cursor"].as_u64().unwrap() > 0,
        "{resumed}"
    );
    assert_eq!(reindex_tasks(&client, &server).await.len(), 1);

    assert_eq!(search_status(&client, &server).await, 200);
    let (_, ready) = get(&client, server.url("/api/v1/health/ready")).await;
    let vs = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vector_store")
        .cloned()
        .unwrap();
    assert_eq!(vs["healthy"], true, "{vs}");
    drop(server);
    assert_eq!(
        embedder_counts(data.path()),
        [("random-wide".to_owned(), 768, total)]
    );
}
