//! A start with a different embedder of the same dimension: every search path answers
//! 503 (in each API's error shape) and health says why, uploads still work, and
//! `POST /api/v1/reindex` re-embeds the knowledge base; searches are refused until it
//! has finished, and afterwards every stored vector is the new embedder's vector of its
//! chunk. The identity persists across restarts, and going back refuses again.

mod common;

use std::time::Duration;

use common::reembed::{cosine, document, embedding_input, stored_chunks, write_random_embedder};
use common::{assert_error_body, create_user, test_config, Auth, TestServer};
use ragd::ml::reranker::CrossEncoderShape;
use ragd::ml::{device, BertEmbedder, Embedder, Precision};
use reqwest::Method;
use serde_json::{json, Value};

const DOCS: usize = 10;

async fn upload_all(s: &TestServer, docs: &[(String, Vec<u8>)]) {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in docs {
        form = form.part(
            "files",
            reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone()),
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
    assert_eq!(body["successful"], docs.len(), "{body}");
}

/// Asserts a 503 in the contract's error body whose detail names both embedders and the fix.
fn assert_refused(status: u16, body: &Value) {
    assert_error_body(status, body, 503);
    assert_eq!(body["error"], "service_unavailable");
    assert_reason(body["detail"].as_str().unwrap());
}

fn assert_reason(detail: &str) {
    for needle in [
        "all-MiniLM-L6-v2",
        "random-minilm",
        "ragd reindex",
        "/api/v1/reindex",
    ] {
        assert!(detail.contains(needle), "{needle} missing in: {detail}");
    }
}

fn load(dir: &std::path::Path) -> BertEmbedder {
    BertEmbedder::load_with(dir, device::best_device(), 32, Precision::Auto).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_embedder_is_refused_until_reindexed_and_leaves_no_old_vector() {
    let data = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let random =
        write_random_embedder(models.path(), "random-minilm", CrossEncoderShape::MINILM_L6);
    let docs: Vec<(String, Vec<u8>)> = (0..DOCS)
        .map(|d| (format!("handbook-{d}.md"), document(d, 12, 40)))
        .collect();

    // Ingested with MiniLM.
    let s = TestServer::start(data.path()).await;
    upload_all(&s, &docs).await;
    s.search("invoice refund policy", 3).await;
    s.stop().await;

    // The same dimension (384), another model: refused everywhere searches happen.
    let token = create_user(data.path(), "u@example.com", "password-u", false).await;
    let user = Auth::Token(token);
    let mut config = test_config(data.path());
    config.embedding_model = random.to_string_lossy().into_owned();
    let s = TestServer::start_with(config.clone()).await;
    let (st, body) = s
        .post_json("/api/v1/search", &json!({"query": "refund"}))
        .await;
    assert_refused(st, &body);
    let (st, body) = s
        .post_json("/api/v1/query", &json!({"question": "refund?"}))
        .await;
    assert_refused(st, &body);
    let (st, body) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "refund?", "stream": true}),
        )
        .await;
    assert_refused(st, &body);
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], false, "{ready}");
    let vs = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vector_store")
        .unwrap();
    assert_eq!(vs["healthy"], false, "{vs}");
    assert_reason(vs["detail"].as_str().unwrap());
    let tool = s
        .call(
            Method::POST,
            "assistant.api.execute_tool",
            &json!({"tool_name": "search_knowledge_base", "params": {"query": "refund"}}),
            &user,
        )
        .await;
    assert_eq!(tool.error(503), "ServiceUnavailableError");
    assert_reason(tool.body["message"]["error"]["detail"].as_str().unwrap());
    let chat = s
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": "what is the refund policy?"}),
            &user,
        )
        .await;
    assert_eq!(chat.error(503), "ServiceUnavailableError");

    // Uploads go on meanwhile: a new source, and a new version of an old one (its
    // unchanged sections take the new embedder's vectors too).
    let (st, body) = s.upload("extra.md", &document(99, 3, 30)).await;
    assert_eq!(st, 200, "{body}");
    let mut changed = document(0, 12, 40);
    changed.extend_from_slice(b"## Appendix\n\nA new closing section about pallets.\n");
    let (st, body) = s.upload("handbook-0.md", &changed).await;
    assert_eq!(st, 200, "{body}");
    assert!(body["chunks_skipped"].as_u64().unwrap() > 0, "{body}");

    // Re-embedding: one task at a time; searches stay refused until it has finished.
    let (st, ack) = s.post_json("/api/v1/reindex", &json!({})).await;
    assert_eq!(st, 202, "{ack}");
    assert_eq!(ack["status"], "pending");
    let id = ack["task_id"].as_str().unwrap().to_owned();
    let (st, body) = s.post_json("/api/v1/reindex", &json!({})).await;
    assert_error_body(st, &body, 409);
    assert!(body["detail"].as_str().unwrap().contains(&id), "{body}");
    let task = loop {
        let (_, t) = s.get_json(&format!("/api/v1/tasks/{id}")).await;
        if !matches!(t["status"].as_str(), Some("pending" | "running")) {
            break t;
        }
        let (st, body) = s
            .post_json("/api/v1/search", &json!({"query": "refund"}))
            .await;
        // The task may have finished since it was read: then the search may run.
        if st != 200 {
            assert_refused(st, &body);
        } else {
            let (_, t) = s.get_json(&format!("/api/v1/tasks/{id}")).await;
            assert_eq!(
                t["status"], "completed",
                "a search ran during the reindex: {t}"
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["kind"], "reindex");
    assert_eq!(task["progress"], 1.0);
    let result = &task["result"];
    assert_eq!(result["embedder"], "random-minilm", "{task}");
    assert_eq!(result["chunks_done"], result["chunks_total"], "{task}");

    s.search("invoice refund policy", 3).await;
    let (_, ready) = s.get_json("/api/v1/health/ready").await;
    let vs = ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "vector_store")
        .unwrap();
    assert_eq!(vs["healthy"], true, "{vs}");
    let total = result["chunks_total"].as_u64().unwrap();
    assert!(
        vs["detail"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{total} chunks;")),
        "{vs}"
    );
    s.stop().await;

    // Every stored vector is the new embedder's vector of its chunk; none is MiniLM's.
    let chunks = stored_chunks(data.path());
    assert_eq!(chunks.len() as u64, total);
    assert!(chunks.len() > DOCS * 12, "{} chunks", chunks.len());
    let inputs: Vec<String> = chunks.iter().map(embedding_input).collect();
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let new = load(&random).embed(&refs).unwrap();
    let old = load(&common::models_dir().join("all-MiniLM-L6-v2"))
        .embed(&refs)
        .unwrap();
    for ((c, n), o) in chunks.iter().zip(&new).zip(&old) {
        assert_eq!(c.embedder.as_deref(), Some("random-minilm"), "{}", c.text);
        assert!(
            cosine(&c.embedding, n) >= 0.995,
            "{}: {}",
            c.text,
            cosine(&c.embedding, n)
        );
        assert!(
            cosine(&c.embedding, o) < 0.9,
            "{}: still MiniLM's vector",
            c.text
        );
    }

    // The new identity is stored: the next start serves at once. Going back to MiniLM
    // is a change again.
    let s = TestServer::start_with(config).await;
    s.search("invoice refund policy", 3).await;
    s.stop().await;
    let s = TestServer::start(data.path()).await;
    let (st, body) = s
        .post_json("/api/v1/search", &json!({"query": "refund"}))
        .await;
    assert_refused(st, &body);
    s.stop().await;
}
