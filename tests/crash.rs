//! Crash safety: the real binary is killed with SIGKILL at random moments while a bulk
//! upload, async tasks and concurrent searches run, then restarted on the same data
//! directory, many times. After each restart: every source is whole or absent, no chunk
//! lacks its source, both indexes agree with SQLite, every acknowledged task ends completed
//! or failed with a reason, and no search is ever answered with a 5xx. A second test kills
//! a bulk upload between its group commits: everything acknowledged (answered requests,
//! sources reported stored) survives.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::child::ChildServer;

use serde_json::Value;

/// The real binary on `data`, with the default LLM and two task workers.
fn start(data: &Path) -> ChildServer {
    ChildServer::start(
        data,
        &[],
        &[("RAGD_TASK_WORKERS", "2"), ("RAGD_LLM_MODEL", "")],
    )
}

/// A small deterministic generator (no dependency needed for randomness).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn doc(round: usize, i: usize) -> Vec<u8> {
    let body: String = (0..40)
        .map(|p| {
            format!(
                "Round {round} file {i} paragraph {p} describes marker{round}x{i} in detail.\n\n"
            )
        })
        .collect();
    format!("# Report {round}-{i}\n\n{body}").into_bytes()
}

fn check_store(data: &Path) {
    let c = rusqlite::Connection::open_with_flags(
        data.join("ragd.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let orphans: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM chunks WHERE source_id NOT IN (SELECT id FROM sources)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "chunks without a source");
    let partial: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM sources s WHERE s.chunk_count != (SELECT COUNT(*) FROM chunks c WHERE c.source_id = s.id)
                OR s.chunk_count = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(partial, 0, "a source is only partly stored");
}

/// Searches in `clients` loops until the server goes away; returns every status answered.
fn search_until_gone(
    client: &reqwest::Client,
    base: &str,
    clients: usize,
) -> Vec<tokio::task::JoinHandle<Vec<u16>>> {
    (0..clients)
        .map(|i| {
            let (client, url) = (client.clone(), format!("{base}/api/v1/search"));
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for n in 0.. {
                    let q = format!("Report {} paragraph {i} describes marker", n % 20);
                    match client
                        .post(&url)
                        .json(&serde_json::json!({"query": q, "top_k": 5}))
                        .send()
                        .await
                    {
                        Ok(r) => statuses.push(r.status().as_u16()),
                        Err(_) => break,
                    }
                }
                statuses
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survives_sigkill_at_random_moments() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut rng = Lcg(0x5eed);
    let mut acknowledged: Vec<String> = Vec::new();
    let rounds = 20;
    for round in 0..rounds {
        let mut s = start(&data);
        // Work in flight: a bulk upload and two async uploads.
        let bulk = {
            let (client, base) = (client.clone(), s.base.clone());
            tokio::spawn(async move {
                let mut form = reqwest::multipart::Form::new();
                for i in 0..8 {
                    form = form.part(
                        "files",
                        reqwest::multipart::Part::bytes(doc(round, i))
                            .file_name(format!("bulk-{round}-{i}.md")),
                    );
                }
                let _ = client
                    .post(format!("{base}/api/v1/upload/bulk"))
                    .multipart(form)
                    .send()
                    .await;
            })
        };
        for i in 0..2 {
            let form = reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(doc(round, 100 + i))
                    .file_name(format!("async-{round}-{i}.md")),
            );
            let r = client
                .post(format!("{}/api/v1/upload/async", s.base))
                .multipart(form)
                .send()
                .await
                .unwrap();
            let ack: Value = r.json().await.unwrap();
            acknowledged.push(ack["task_id"].as_str().unwrap().to_owned());
        }
        let searches = search_until_gone(&client, &s.base, 8);
        tokio::time::sleep(Duration::from_millis(rng.next(2500))).await;
        s.kill(); // SIGKILL
        bulk.abort();
        for t in searches {
            let statuses = t.await.unwrap();
            assert!(
                statuses.iter().all(|&st| st == 200),
                "round {round}: searches answered {statuses:?}"
            );
        }
        check_store(&data);
    }

    // A last start: tasks resume and finish while 64 searches run at once; indexes agree
    // with the store.
    let mut s = start(&data);
    let queries: Vec<String> = (0..64)
        .map(|i| format!("Report {} paragraph describes", i % rounds))
        .collect();
    for (status, body) in common::search_at_once(&client, &s.base, &queries, 5).await {
        assert_eq!(status, 200, "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    for id in &acknowledged {
        loop {
            let t: Value = client
                .get(format!("{}/api/v1/tasks/{id}", s.base))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            match t["status"].as_str() {
                Some("completed") => break,
                Some("failed") => {
                    assert!(
                        t["error"].as_str().is_some_and(|e| !e.is_empty()),
                        "failed without a reason: {t}"
                    );
                    break;
                }
                Some("pending" | "running") => {
                    assert!(Instant::now() < deadline, "task {id} never finished");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => panic!("acknowledged task {id} ended {other:?}: {t}"),
            }
        }
    }
    let ready: Value = client
        .get(format!("{}/api/v1/health/ready", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        ready["components"][1]["healthy"], true,
        "indexes disagree with the store: {ready}"
    );
    check_store(&data);
    // Every async upload was acknowledged, so each is now stored and searchable.
    let sources: Value = client
        .get(format!("{}/api/v1/documents/sources", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for round in 0..rounds {
        for i in 0..2 {
            let name = format!("async-{round}-{i}.md");
            assert!(
                sources["sources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == name.as_str()),
                "{name} missing"
            );
        }
    }
    let hit: Value = client
        .post(format!("{}/api/v1/search", s.base))
        .json(&serde_json::json!({"query": "Report 7-100 paragraph describes", "top_k": 5}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(hit["count"].as_u64().unwrap() > 0);
    s.kill();
}

/// Names of the stored sources, read from SQLite.
fn stored_sources(data: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open_with_flags(
        data.join("ragd.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut st = c.prepare("SELECT source FROM sources").unwrap();
    let names = st
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
}

/// The answer to a bulk upload, or `None` if the server went away first.
async fn bulk_upload(
    client: &reqwest::Client,
    base: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Option<Value> {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in files {
        form = form.part(
            "files",
            reqwest::multipart::Part::bytes(bytes).file_name(name),
        );
    }
    let r = client
        .post(format!("{base}/api/v1/upload/bulk"))
        .multipart(form)
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_upload_killed_mid_group_loses_only_unacknowledged_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let mut rng = Lcg(0xb01c);
    // Sources the server acknowledged: in answered requests, or logged as stored.
    let mut acknowledged: Vec<String> = Vec::new();
    let mut partial_rounds = 0;
    for round in 0..2 {
        let s = start(&data);
        // Only what is logged from here on counts.
        s.drain_logs();
        // One whole request, answered: acknowledged.
        let files: Vec<(String, Vec<u8>)> = (0..4)
            .map(|i| (format!("done-{round}-{i}.md"), doc(round + 50, i)))
            .collect();
        let r = bulk_upload(&client, &s.base, files)
            .await
            .expect("answered");
        assert_eq!(r["successful"], 4, "{r}");
        acknowledged.extend((0..4).map(|i| format!("done-{round}-{i}.md")));

        // A larger one, killed after its first group commit, while more are written.
        let files: Vec<(String, Vec<u8>)> = (0..30)
            .map(|i| (format!("killed-{round}-{i}.md"), doc(round + 60, i)))
            .collect();
        let in_flight = {
            let (client, base) = (client.clone(), s.base.clone());
            tokio::spawn(async move { bulk_upload(&client, &base, files).await })
        };
        let mut s = s;
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut stored_now: Vec<String> = Vec::new();
        loop {
            assert!(Instant::now() < deadline, "no group was committed");
            let Ok(v) = s.logs.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            let message = v["fields"]["message"].as_str().unwrap_or_default();
            if message == "source ingested" {
                let name = v["span"]["source"].as_str().unwrap_or_default().to_owned();
                if name.starts_with("killed-") {
                    stored_now.push(name);
                }
            }
            if message == "group committed" && !stored_now.is_empty() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.next(40)));
        // SIGKILL, between or inside group commits. Sources whose storing was logged
        // before the kill were acknowledged too.
        s.kill();
        while let Ok(v) = s.logs.try_recv() {
            if v["fields"]["message"] == "source ingested" {
                if let Some(name) = v["span"]["source"].as_str() {
                    stored_now.push(name.to_owned());
                }
            }
        }
        // Should the answer have come before the kill, the whole request is acknowledged.
        if let Ok(Some(r)) = in_flight.await {
            if r["successful"] == 30 {
                stored_now.extend((0..30).map(|i| format!("killed-{round}-{i}.md")));
            }
        }
        acknowledged.extend(stored_now);
        check_store(&data);
        let stored = stored_sources(&data);
        for name in &acknowledged {
            assert!(stored.contains(name), "acknowledged {name} was lost");
        }
        let lost = (0..30)
            .filter(|i| !stored.contains(&format!("killed-{round}-{i}.md")))
            .count();
        partial_rounds += usize::from(lost > 0);
        eprintln!(
            "round {round}: {} acknowledged, {lost} unacknowledged lost",
            acknowledged.len()
        );
    }
    assert!(
        partial_rounds > 0,
        "no kill landed while the bulk request was still being written"
    );
    // After a restart the indexes are rebuilt to agree with the store, and what was
    // lost can simply be sent again.
    let mut s = start(&data);
    let ready: Value = client
        .get(format!("{}/api/v1/health/ready", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["components"][1]["healthy"], true, "{ready}");
    s.kill();
}
