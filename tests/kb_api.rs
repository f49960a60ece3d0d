//! The knowledge-base API end to end: the real server on an ephemeral port against a
//! real SQLite file, usearch index and tantivy directory in a temp dir.

mod common;

use common::{assert_error_body, test_config, TestServer};
use serde_json::{json, Value};

const GUIDE: &str = "# Field Guide\n\n\
## Password resets\n\n\
To reset a forgotten password, open the account page, choose 'Forgot password' and follow \
the link that arrives by email within five minutes.\n\n\
## Torque wrenches\n\n\
The SKU-4471-B torque wrench has a half inch drive and clicks at the set torque. Calibrate \
it every twelve months.\n";

const RECIPES: &str =
    "Baking bread at home needs flour, water, salt and yeast. Knead the dough for ten \
minutes, let it rise for an hour and bake it in a hot oven until the crust is brown.";

fn doc_ids(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["doc_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn assert_finds_password_chunk(s: &TestServer) -> Value {
    let body = s.search("how can I change my lost password?", 5).await;
    let results = body["results"].as_array().unwrap();
    assert_eq!(body["count"].as_u64().unwrap() as usize, results.len());
    assert!(!results.is_empty(), "no results: {body}");
    let top = &results[0];
    assert_eq!(top["metadata"]["source"], "guide.md", "{body}");
    assert_eq!(top["source"], "guide.md");
    assert_eq!(top["metadata"]["heading"], "Password resets");
    assert!(top["text"].as_str().unwrap().contains("Forgot password"));
    let scores: Vec<f64> = results
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "scores not descending: {scores:?}"
    );
    assert!(
        scores[0] <= 1.0001 && scores[0] > 0.3,
        "top score {}",
        scores[0]
    );
    // The doc_id is a real document.
    let id = top["doc_id"].as_str().unwrap();
    let (st, doc) = s.get_json(&format!("/api/v1/documents/{id}")).await;
    assert_eq!(st, 200);
    assert_eq!(doc["id"], id);
    body
}

/// 64 searches at once right after a (re)start: all answer 200 with the same results as
/// `first` (the indexes were just loaded or rebuilt).
async fn assert_concurrent_searches_agree(s: &TestServer, first: &Value) {
    let queries = vec!["how can I change my lost password?".to_owned(); 64];
    for (status, body) in s.search_at_once(&queries, 5).await {
        assert_eq!(status, 200, "{body}");
        assert_eq!(doc_ids(&body), doc_ids(first));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_search_survives_restart_and_index_loss() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (st, res) = s.upload("guide.md", GUIDE.as_bytes()).await;
    assert_eq!(st, 200, "{res}");
    assert_eq!(res["success"], true);
    assert_eq!(res["filename"], "guide.md");
    assert_eq!(res["title"], "Field Guide");
    assert_eq!(res["is_duplicate"], false);
    assert!(res["error"].is_null());
    let added = res["chunks_added"].as_u64().unwrap();
    assert!(added >= 2, "{res}");
    let (st, res) = s.upload("bread.txt", RECIPES.as_bytes()).await;
    assert_eq!(st, 200, "{res}");

    let first = assert_finds_password_chunk(&s).await;
    let bread = s.search("how long should dough rise", 1).await;
    assert_eq!(bread["results"][0]["metadata"]["source"], "bread.txt");
    assert_eq!(bread["results"][0]["metadata"]["language"], "en");
    assert_eq!(bread["results"][0]["metadata"]["section"], "uploaded");
    s.stop().await;

    // Restart on the same data directory.
    let s = TestServer::start(dir.path()).await;
    assert_concurrent_searches_agree(&s, &first).await;
    let again = assert_finds_password_chunk(&s).await;
    assert_eq!(doc_ids(&first), doc_ids(&again));
    s.stop().await;

    // Delete both derived indexes: they are rebuilt from SQLite.
    std::fs::remove_file(dir.path().join("vectors.usearch")).unwrap();
    std::fs::remove_file(dir.path().join("vectors.usearch.json")).unwrap();
    std::fs::remove_dir_all(dir.path().join("fulltext")).unwrap();
    let s = TestServer::start(dir.path()).await;
    assert_concurrent_searches_agree(&s, &first).await;
    let rebuilt = assert_finds_password_chunk(&s).await;
    assert_eq!(doc_ids(&first), doc_ids(&rebuilt));
    let (st, ready) = s.get_json("/api/v1/health/ready").await;
    assert_eq!(st, 200);
    assert_eq!(ready["ready"], true, "{ready}");
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["sources_count"], 2);
    assert_eq!(stats["document_count"].as_u64().unwrap(), added + 1);
    s.stop().await;

    // A corrupted vector file is detected and rebuilt too.
    let file = dir.path().join("vectors.usearch");
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x5a;
    std::fs::write(&file, bytes).unwrap();
    let s = TestServer::start(dir.path()).await;
    assert_concurrent_searches_agree(&s, &first).await;
    let repaired = assert_finds_password_chunk(&s).await;
    assert_eq!(doc_ids(&first), doc_ids(&repaired));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_and_update_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (_, first) = s.upload("guide.md", GUIDE.as_bytes()).await;
    let n = first["chunks_added"].as_u64().unwrap();

    // Same bytes under another name: a content duplicate, nothing written.
    let (st, dup) = s.upload("copy.md", GUIDE.as_bytes()).await;
    assert_eq!(st, 200);
    assert_eq!(dup["is_duplicate"], true);
    assert_eq!(dup["duplicate_type"], "content_hash");
    assert_eq!(dup["chunks_added"], 0);
    assert_eq!(dup["existing_doc_title"], "Field Guide");
    let existing = dup["existing_doc_id"].as_str().unwrap().to_owned();
    let (st, _) = s.get_json(&format!("/api/v1/documents/{existing}")).await;
    assert_eq!(st, 200);
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["sources_count"], 1);

    // Same name, one section changed: updated in place.
    let changed = GUIDE.replace("twelve months", "six months");
    let (st, upd) = s.upload("guide.md", changed.as_bytes()).await;
    assert_eq!(st, 200, "{upd}");
    assert_eq!(upd["is_duplicate"], true);
    assert_eq!(upd["duplicate_type"], "filepath");
    assert_eq!(upd["chunks_added"], 0);
    assert_eq!(upd["chunks_updated"], 1);
    assert_eq!(upd["chunks_skipped"].as_u64().unwrap(), n - 1);
    assert!(upd["duplicate_message"]
        .as_str()
        .unwrap()
        .contains("updated"));
    let hit = s.search("how often to calibrate the wrench", 1).await;
    assert!(
        hit["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("six months"),
        "{hit}"
    );
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["document_count"].as_u64().unwrap(), n);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_paginated() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    s.upload("guide.md", GUIDE.as_bytes()).await;
    s.upload("bread.txt", RECIPES.as_bytes()).await;
    let (st, all) = s.get_json("/api/v1/documents").await;
    assert_eq!(st, 200);
    let total = all["total"].as_u64().unwrap();
    assert!(total >= 3);
    assert_eq!(all["page"], 1);
    assert_eq!(all["page_size"], 20);
    assert_eq!(all["pages"], 1);
    let (_, p) = s.get_json("/api/v1/documents?page=2&page_size=1").await;
    assert_eq!(p["documents"].as_array().unwrap().len(), 1);
    assert_eq!(p["pages"].as_u64().unwrap(), total);
    assert_eq!(p["documents"][0]["id"], all["documents"][1]["id"]);
    let meta = &p["documents"][0]["metadata"];
    for key in [
        "title",
        "source",
        "section",
        "language",
        "source_type",
        "file_type",
        "chunk_index",
        "total_chunks",
        "heading",
        "page_start",
        "page_end",
        "content_hash",
        "ingested_at",
    ] {
        assert!(meta.get(key).is_some(), "metadata lacks {key}: {meta}");
    }
    let (_, beyond) = s.get_json("/api/v1/documents?page=99").await;
    assert_eq!(beyond["documents"].as_array().unwrap().len(), 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_open_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.api_keys = vec!["secret-one".into(), "secret-two".into()];
    let s = TestServer::start_with(cfg).await;
    let c = &s.client;

    let r = c.get(s.url("/api/v1/documents")).send().await.unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 401);
    let r = c
        .get(s.url("/api/v1/documents"))
        .header("X-API-Key", "wrong")
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 403);
    let r = c
        .post(s.url("/api/v1/search"))
        .json(&json!({"query": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(s.url("/api/v1/documents"))
        .header("X-API-Key", "secret-two")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let part = reqwest::multipart::Part::bytes(GUIDE.as_bytes().to_vec()).file_name("g.md");
    let r = c
        .post(s.url("/api/v1/upload"))
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    for open in [
        "/",
        "/docs",
        "/redoc",
        "/openapi.json",
        "/api/v1/health",
        "/api/v1/health/ready",
        "/api/v1/health/stats",
    ] {
        let r = c.get(s.url(open)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{open} should be open");
    }
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["api_auth_enabled"], true);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_error_body() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.max_upload_bytes = 64 * 1024;
    let s = TestServer::start_with(cfg).await;
    let c = &s.client;
    s.upload("guide.md", GUIDE.as_bytes()).await;

    // Malformed JSON, wrong content type, wrong types, missing fields.
    let r = c
        .post(s.url("/api/v1/search"))
        .header("content-type", "application/json")
        .body("{\"query\": ")
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    let r = c
        .post(s.url("/api/v1/search"))
        .body("query=x")
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    for body in [
        json!({"query": 5}),
        json!({"query": "x", "top_k": "five"}),
        json!({"query": "x", "top_k": 2.5}),
        json!({"top_k": 5}),
        json!({"query": "x", "initial_k": -1}),
        json!([1, 2]),
    ] {
        let (st, b) = s.post_json("/api/v1/search", &body).await;
        assert_error_body(st, &b, 400);
    }
    // Bounds: top_k 1-50, initial_k 1-100.
    for (top_k, initial_k, ok) in [
        (0, 20, false),
        (51, 20, false),
        (1, 0, false),
        (5, 101, false),
        (1, 1, true),
        (50, 100, true),
        (50, 1, true),
    ] {
        let (st, b) = s
            .post_json(
                "/api/v1/search",
                &json!({"query": "wrench", "top_k": top_k, "initial_k": initial_k}),
            )
            .await;
        if ok {
            assert_eq!(st, 200, "top_k={top_k} initial_k={initial_k}: {b}");
        } else {
            assert_error_body(st, &b, 400);
            assert!(b["detail"]
                .as_str()
                .unwrap()
                .contains(if top_k == 0 || top_k == 51 {
                    "top_k"
                } else {
                    "initial_k"
                }));
        }
    }
    let (st, b) = s
        .post_json("/api/v1/search", &json!({"query": "   "}))
        .await;
    assert_error_body(st, &b, 400);
    // Paging bounds.
    for q in [
        "page=0",
        "page_size=0",
        "page_size=101",
        "page=abc",
        "page=-1",
    ] {
        let (st, b) = s.get_json(&format!("/api/v1/documents?{q}")).await;
        assert_error_body(st, &b, 400);
    }
    // Unknown ids, unknown routes, wrong methods.
    let (st, b) = s.get_json("/api/v1/documents/does-not-exist").await;
    assert_error_body(st, &b, 404);
    let (st, b) = s.get_json("/api/v1/nothing-here").await;
    assert_error_body(st, &b, 404);
    // A path id that is not UTF-8 once percent-decoded: the error body, not plain text.
    for path in ["/api/v1/tasks/%c0%af", "/api/v1/documents/%ff%fe"] {
        let (st, b) = s.get_json(path).await;
        assert_error_body(st, &b, 400);
    }
    let r = c
        .delete(s.url("/api/v1/tasks/%c0%af"))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    let (st, b) = s.get_json("/nothing-here").await;
    assert_error_body(st, &b, 404);
    let (st, b) = s.get_json("/api/v1/search").await;
    assert_error_body(st, &b, 405);
    let r = c.delete(s.url("/api/v1/health")).send().await.unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 405);

    // Uploads: unsupported type, empty file, binary "text", no file, not multipart, too large.
    for (name, bytes) in [
        ("scan.pdf", b"%PDF-1.4".to_vec()),
        ("noext", b"text".to_vec()),
        ("empty.md", Vec::new()),
        ("bin.txt", vec![0u8, 1, 2, 3, 0, 255]),
        ("blank.md", b"   \n\n  ".to_vec()),
    ] {
        let (st, b) = s.upload(name, &bytes).await;
        assert_error_body(st, &b, 400);
    }
    let r = c
        .post(s.url("/api/v1/upload"))
        .multipart(reqwest::multipart::Form::new().text("section", "x"))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    let r = c
        .post(s.url("/api/v1/upload"))
        .json(&json!({"file": "x"}))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 400);
    let big = "word ".repeat(20_000);
    let (st, b) = s.upload("big.txt", big.as_bytes()).await;
    assert_error_body(st, &b, 413);
    let huge = vec![b'a'; 2 * 1024 * 1024];
    let (st, b) = s.upload("huge.txt", &huge).await;
    assert_error_body(st, &b, 413);

    // Nothing above was stored.
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["sources_count"], 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_openapi() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let (st, h) = s.get_json("/api/v1/health").await;
    assert_eq!(st, 200);
    assert_eq!(h["status"], "healthy");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    let names: Vec<&str> = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["embedder", "vector_store", "llm", "reranker"]);
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["components"][0]["healthy"], true);
    assert_eq!(ready["components"][2]["healthy"], false);
    // Each model names where it runs and in what arithmetic; the vector store is no model.
    for i in [0, 2] {
        let c = &ready["components"][i];
        assert!(c["device"].as_str().unwrap().starts_with("cpu ("), "{c}");
        assert!(!c["arithmetic"].as_str().unwrap().is_empty(), "{c}");
    }
    assert_eq!(ready["components"][2]["arithmetic"], "ragd-cpu");
    assert!(ready["components"][1].get("device").is_none());
    let (_, stats) = s.get_json("/api/v1/health/stats").await;
    assert_eq!(stats["embedding_model"], "all-MiniLM-L6-v2");
    assert_eq!(stats["reranker_enabled"], false);
    assert_eq!(stats["api_auth_enabled"], false);
    assert!(stats["vector_store_path"]
        .as_str()
        .unwrap()
        .ends_with("vectors.usearch"));

    let (st, spec) = s.get_json("/openapi.json").await;
    assert_eq!(st, 200);
    for path in [
        "/api/v1/search",
        "/api/v1/upload",
        "/api/v1/documents",
        "/api/v1/documents/{doc_id}",
        "/api/v1/health/ready",
        "/mcp",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/embeddings",
        "/v1/rerank",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/metrics",
        "/api/v1/admin/backup",
    ] {
        assert!(spec["paths"].get(path).is_some(), "openapi lacks {path}");
    }
    assert_eq!(
        spec["components"]["securitySchemes"]["api_key"]["name"],
        "X-API-Key"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_asked_for_that_cannot_open_stops_start_up_with_the_cause() {
    use ragd::ml::device::{gpu_backends, DeviceChoice};
    let dir = tempfile::tempdir().unwrap();
    for choice in [
        DeviceChoice::Cuda(0),
        DeviceChoice::Cuda(7),
        DeviceChoice::Metal,
    ] {
        let mut config = common::test_config(dir.path());
        config.device = choice;
        match ragd::AppState::build(config).await {
            // Only a GPU build on a machine with that GPU starts.
            Ok(_) => assert!(!gpu_backends().is_empty(), "{choice} opened on a CPU build"),
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(
                    msg.contains(&format!("opening the device {choice}")),
                    "{msg}"
                );
                assert!(
                    msg.contains("built without") || msg.contains("cannot open"),
                    "{msg}"
                );
            }
        }
    }
    // `auto` always starts, on the CPU here.
    let mut config = common::test_config(dir.path());
    config.device = DeviceChoice::Auto;
    assert!(ragd::AppState::build(config).await.is_ok());
}
