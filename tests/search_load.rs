//! Searches at high concurrency against a 10,000-chunk knowledge base, alone and while an
//! ingestion grows the index, and overload answered with 429 + `Retry-After`.
//!
//! The 10,000 chunks (100 sources of 100) are written through the store layer, with the
//! repo functions ingestion itself uses, and deterministic pseudo-random unit vectors in
//! place of model embeddings: embedding 10,000 texts takes minutes on 2 cores, and the
//! vectors only need to be 10,000 real points in the usearch graph. The server then builds
//! both derived indexes from SQLite at start-up (the rebuild path), and is restarted so that
//! the vector index is loaded from its file with no spare capacity: the first insert must
//! grow it while searches run. Each chunk's text carries a unique token, so the search for
//! that token must return that chunk.

mod common;

use std::path::Path;

use common::{assert_error_body, test_config, TestServer};
use ragd::retrieval::vectors::pseudo_random_units;
use ragd::store::chunks::{self as repo, NewChunk, SourceRow};
use ragd::store::Store;
use serde_json::{json, Map, Value};

const SOURCES: usize = 100;
const PER_SOURCE: usize = 100;
const DIM: usize = 384;

fn token(s: usize, i: usize) -> String {
    format!("tok{s}x{i}q")
}

fn chunk_id(s: usize, i: usize) -> String {
    format!("seed-{s:03}-{i:03}")
}

/// Writes `SOURCES` x `PER_SOURCE` chunks into the database under `data`.
fn seed_store(data: &Path) {
    std::fs::create_dir_all(data).unwrap();
    let store = Store::open(&data.join("ragd.sqlite")).unwrap();
    let now = "2025-01-01T00:00:00.000000".to_owned();
    let mut vectors = pseudo_random_units(SOURCES * PER_SOURCE, DIM, 7).into_iter();
    for s in 0..SOURCES {
        let name = format!("seed-{s:03}.md");
        let source = SourceRow {
            id: format!("source-{s:03}"),
            source: name.clone(),
            source_type: "file".into(),
            title: format!("Seed {s}"),
            file_type: "md".into(),
            section: "uploaded".into(),
            content_hash: format!("hash-{s:03}"),
            chunk_count: PER_SOURCE as i64,
            created_at: now.clone(),
            updated_at: now.clone(),
        };
        let rows: Vec<NewChunk> = (0..PER_SOURCE)
            .map(|i| {
                let mut metadata = Map::new();
                metadata.insert("source".into(), json!(name));
                metadata.insert("title".into(), json!(source.title));
                metadata.insert("section".into(), json!("uploaded"));
                metadata.insert("language".into(), json!("en"));
                metadata.insert("chunk_index".into(), json!(i));
                NewChunk {
                    id: chunk_id(s, i),
                    position: i as i64,
                    text: format!(
                        "Seed note {s} part {i} records reference {} for the archive.",
                        token(s, i)
                    ),
                    text_hash: format!("text-{s}-{i}"),
                    language: "en".into(),
                    metadata,
                    embedding: vectors.next().unwrap(),
                }
            })
            .collect();
        store
            .write_sync(|tx| {
                repo::upsert_source(tx, &source)?;
                repo::replace_chunks(tx, &source.id, &rows, None)?;
                repo::bump_generation(tx)
            })
            .unwrap();
    }
}

/// A 10,000-chunk data directory whose vector index file was written by a server.
async fn ten_thousand_chunks(data: &Path) {
    seed_store(data);
    // The first start builds both indexes from SQLite; stopping saves the vector file.
    let s = TestServer::start(data).await;
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["document_count"], (SOURCES * PER_SOURCE) as u64);
    s.stop().await;
}

/// 64 searches at once, each for one chunk's token: all 200, each finding its chunk.
async fn sixty_four_searches(s: &TestServer, round: usize) {
    let picks: Vec<(usize, usize)> = (0..64)
        .map(|n| {
            (
                (n * 37 + round * 11) % SOURCES,
                (n * 53 + round * 7) % PER_SOURCE,
            )
        })
        .collect();
    let queries: Vec<String> = picks.iter().map(|&(s, i)| token(s, i)).collect();
    let answers = s.search_at_once(&queries, 5).await;
    for ((status, body), &(src, i)) in answers.iter().zip(&picks) {
        assert_eq!(*status, 200, "round {round}: {body}");
        let ids: Vec<&str> = body["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["doc_id"].as_str())
            .collect();
        assert!(
            ids.contains(&chunk_id(src, i).as_str()),
            "round {round}: {} not found: {body}",
            token(src, i)
        );
    }
}

fn note(n: usize) -> String {
    let body: String = (0..12)
        .map(|p| format!("Growth note {n} paragraph {p} mentions growthmark{n}z and more.\n\n"))
        .collect();
    format!("# Growth {n}\n\n{body}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_searches_on_ten_thousand_chunks_also_while_ingesting() {
    let dir = tempfile::tempdir().unwrap();
    ten_thousand_chunks(dir.path()).await;
    let s = TestServer::start(dir.path()).await;
    for round in 0..2 {
        sixty_four_searches(&s, round).await;
    }

    // The same while a bulk ingestion and single uploads run.
    let bulk = {
        let (client, url) = (s.client.clone(), s.url("/api/v1/upload/bulk"));
        tokio::spawn(async move {
            let mut form = reqwest::multipart::Form::new();
            for n in 0..6 {
                form = form.part(
                    "files",
                    reqwest::multipart::Part::bytes(note(n).into_bytes())
                        .file_name(format!("growth-{n}.md")),
                );
            }
            let r = client.post(url).multipart(form).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    let singles = {
        let (client, url) = (s.client.clone(), s.url("/api/v1/upload"));
        tokio::spawn(async move {
            for n in 6..9 {
                let part = reqwest::multipart::Part::bytes(note(n).into_bytes())
                    .file_name(format!("growth-{n}.md"));
                let form = reqwest::multipart::Form::new().part("file", part);
                let r = client.post(&url).multipart(form).send().await.unwrap();
                assert_eq!(r.status().as_u16(), 200);
            }
        })
    };
    let mut rounds_during = 0;
    let mut round = 2;
    while !(bulk.is_finished() && singles.is_finished()) {
        sixty_four_searches(&s, round).await;
        round += 1;
        rounds_during += 1;
    }
    let (status, body) = bulk.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["errors"].as_array().map_or(0, Vec::len), 0, "{body}");
    singles.await.unwrap();
    assert!(rounds_during >= 1);
    // What was ingested meanwhile is searchable, and the indexes agree with the store.
    for n in 0..9 {
        let hit = s.search(&format!("growthmark{n}z"), 5).await;
        assert_eq!(
            hit["results"][0]["source"],
            format!("growth-{n}.md"),
            "{hit}"
        );
    }
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], true, "{ready}");
    s.stop().await;
}

/// Sends up to 5 rounds of 64 POSTs to `path` at once until some are refused; every
/// answer must be 200, or 429 with `Retry-After` and the error body. Returns the refusals.
async fn flood(s: &TestServer, path: &str, body: impl Fn(usize) -> Value) -> usize {
    let mut refused = 0;
    for _ in 0..5 {
        let sent = (0..64).map(|n| s.client.post(s.url(path)).json(&body(n)).send());
        for r in futures::future::join_all(sent).await {
            let r = r.unwrap();
            let status = r.status().as_u16();
            if status == 429 {
                assert_eq!(r.headers()["retry-after"], "1");
                let body: Value = r.json().await.unwrap();
                assert_error_body(status, &body, 429);
                assert_eq!(body["error"], "rate_limited");
                refused += 1;
            } else {
                assert_eq!(status, 200, "{path}");
            }
        }
        if refused > 0 {
            break;
        }
    }
    let (st, h) = s.get_json("/api/v1/health").await;
    assert_eq!((st, &h["status"]), (200, &json!("healthy")));
    refused
}

async fn start_with_guide(cfg: ragd::Config) -> TestServer {
    let s = TestServer::start_with(cfg).await;
    let guide = b"# Guide\n\nPasswords are reset from the account page. Sign in first.";
    let (st, _) = s.upload("guide.md", guide).await;
    assert_eq!(st, 200);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_search_queue_answers_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_guide(ragd::Config {
        search_threads: 1,
        search_queue: 0,
        ..test_config(dir.path())
    })
    .await;
    let refused = flood(
        &s,
        "/api/v1/search",
        |_| json!({"query": "reset a password", "top_k": 3}),
    )
    .await;
    assert!(refused > 0, "one look-up thread and no queue: none refused");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_answer_queue_answers_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_with_guide(ragd::Config {
        max_concurrent_answers: 1,
        answer_queue: 0,
        ..test_config(dir.path())
    })
    .await;
    let refused = flood(
        &s,
        "/api/v1/query",
        |n| json!({"question": format!("how is a password reset, case {n}?"), "top_k": 1}),
    )
    .await;
    assert!(
        refused > 0,
        "one answer at a time and no queue: none refused"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_embedding_queue_answers_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ragd::Config {
        embed_queue_capacity: 1,
        // Only the server's overload may refuse a chat here, not the user's rate limit.
        rate_limit_chat: 10_000,
        ..test_config(dir.path())
    };
    let credentials =
        common::create_user(dir.path(), "busy@example.com", "password123", false).await;
    let s = TestServer::start_with(cfg).await;
    let refused = flood(
        &s,
        "/api/v1/search",
        |n| json!({"query": format!("question number {n}"), "top_k": 3}),
    )
    .await;
    assert!(refused > 0, "a one-request embedding queue never filled");

    // The assistant API sheds the same overload with 429 and `Retry-After` in its envelope.
    let auth = common::Auth::Token(credentials);
    let mut busy = 0;
    for _ in 0..5 {
        let params: Vec<Value> = (0..32)
            .map(|n| json!({"user_message": format!("what is question {n} about?")}))
            .collect();
        let sent = params.iter().map(|p| {
            s.call(
                reqwest::Method::POST,
                "assistant.api.chat_with_tools",
                p,
                &auth,
            )
        });
        for reply in futures::future::join_all(sent).await {
            if reply.status == 429 {
                assert_eq!(reply.error(429), "ServerBusyError");
                assert_eq!(reply.header("retry-after").as_deref(), Some("1"));
                busy += 1;
            } else {
                reply.data();
            }
        }
        if busy > 0 {
            break;
        }
    }
    assert!(
        busy > 0,
        "no chat was refused by a one-request embedding queue"
    );
    let (st, h) = s.get_json("/api/v1/health").await;
    assert_eq!((st, &h["status"]), (200, &json!("healthy")));
    s.stop().await;
}
