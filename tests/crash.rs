//! Crash safety: the real binary is killed with SIGKILL at random moments while a bulk
//! upload, async tasks and concurrent searches run, then restarted on the same data
//! directory, many times. After each restart: every source is whole or absent, no chunk
//! lacks its source, both indexes agree with SQLite, every acknowledged task ends completed
//! or failed with a reason, and no search is ever answered with a 5xx.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Server {
    child: Child,
    base: String,
}

fn start(data: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ragd"))
        .args(["serve", "--port", "0", "--log-format", "json"])
        .arg("--data-dir")
        .arg(data)
        .arg("--models-dir")
        .arg(common::models_dir())
        .env("RUST_LOG", "info")
        .env("RAGD_TASK_WORKERS", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ragd");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["fields"]["message"] == "ragd listening" {
            let addr = v["fields"]["addr"].as_str().expect("addr").to_owned();
            // Keep draining the log so the server never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines.by_ref() {});
            return Server {
                child,
                base: format!("http://{addr}"),
            };
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("ragd did not start");
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
        s.child.kill().unwrap(); // SIGKILL
        s.child.wait().unwrap();
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
    s.child.kill().unwrap();
    s.child.wait().unwrap();
}
