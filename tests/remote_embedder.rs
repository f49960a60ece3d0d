//! The embedder and reranker on inference servers.
//!
//! - OpenAI's `/v1/embeddings` on a real engine: llama.cpp's `llama-server` serving a GGUF
//!   of the installed all-MiniLM-L6-v2 (converted by `scripts/llama_server.sh` with
//!   llama.cpp's own converter): its vectors match the local model's, and ragd ingests and
//!   searches through it.
//! - TEI's `/embed` and `/rerank` and the Jina-style `/v1/rerank`: no
//!   text-embeddings-inference can run here, so a small server of our own in this file
//!   speaks those shapes, embedding with ragd's local MiniLM. It also makes the faults:
//!   429 with `Retry-After`, malformed JSON, a stall, and being down while an upload waits.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use common::engines::LlamaServer;
use common::{assert_error_body, test_config, TestServer};
use ragd::config::{Config, EmbedApi, RerankApi};
use ragd::ml::embedder::remote::{RemoteEmbedder, RemoteEmbedderOptions};
use ragd::ml::{BertEmbedder, Embedder, Precision};
use serde_json::{json, Value};

fn minilm_dir() -> std::path::PathBuf {
    common::models_dir().join("all-MiniLM-L6-v2")
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

const TEXTS: &[&str] = &[
    "Every full-time employee gets 25 days of paid annual leave per calendar year.",
    "Passwords must be at least 12 characters long and are changed every 90 days.",
    "Employees may work from home up to two days per week.",
    "The pump seals are replaced every 18 months, during the planned shutdown.",
    "Café au lait, naïve façade — ÅNGSTRÖM unaffable (x=1)! don't",
    "short",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_embeddings_match_the_local_model_and_serve_search() {
    let _one = common::engines::one_at_a_time().await;
    let engine = LlamaServer::start(
        &common::engines::minilm_gguf(),
        &[
            "--embedding",
            "--pooling",
            "mean",
            "-t",
            "2",
            "-c",
            "2048",
            "-b",
            "2048",
            "-ub",
            "2048",
            "-np",
            "4",
        ],
    );
    let url = engine.url.clone();
    let (remote, local) = tokio::task::spawn_blocking(move || {
        let remote = RemoteEmbedder::connect(RemoteEmbedderOptions {
            url,
            api: EmbedApi::Openai,
            api_key: None,
            model: String::new(),
            tokenizer_dir: minilm_dir(),
            timeout: Duration::from_secs(30),
            parallel: 2,
        })
        .unwrap();
        let local =
            BertEmbedder::load_with(&minilm_dir(), candle_core::Device::Cpu, 32, Precision::F32)
                .unwrap();
        (remote.embed(TEXTS).unwrap(), local.embed(TEXTS).unwrap())
    })
    .await
    .unwrap();
    assert_eq!(remote[0].len(), 384);
    for (i, (r, l)) in remote.iter().zip(&local).enumerate() {
        let c = cosine(r, l);
        assert!(c >= 0.999, "text {i}: cosine {c} to the local f32 model");
        let norm: f32 = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "normalised: {norm}");
    }

    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(Config {
        embed_url: engine.url.clone(),
        embed_api: EmbedApi::Openai,
        ..test_config(&tmp.path().join("data"))
    })
    .await;
    for (name, text) in common::scenarios::HANDBOOK {
        let (status, body) = server.upload(name, text.as_bytes()).await;
        assert_eq!(status, 200, "{body}");
    }
    let hits = server.search("how long must a password be", 3).await;
    assert_eq!(hits["results"][0]["source"], "it-security.md", "{hits}");
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], true, "{ready}");
    server.stop().await;
}

/// What the small server does with the next requests.
#[derive(Default)]
struct Shim {
    /// Answer this many requests with 429 and `Retry-After: 1`.
    busy: AtomicUsize,
    /// 1: malformed JSON; 2: never answer; 3: refuse with 503 (down).
    mode: AtomicUsize,
    /// Requests seen.
    seen: AtomicUsize,
    embedder: std::sync::Mutex<Option<Arc<BertEmbedder>>>,
}

impl Shim {
    fn model(&self) -> Arc<BertEmbedder> {
        let mut m = self.embedder.lock().unwrap();
        m.get_or_insert_with(|| {
            Arc::new(
                BertEmbedder::load_with(
                    &minilm_dir(),
                    candle_core::Device::Cpu,
                    32,
                    Precision::F32,
                )
                .unwrap(),
            )
        })
        .clone()
    }

    async fn fault(&self) -> Option<Response> {
        self.seen.fetch_add(1, Ordering::SeqCst);
        if self
            .busy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Some(
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "1")],
                    "{\"error\": \"busy\"}",
                )
                    .into_response(),
            );
        }
        match self.mode.load(Ordering::SeqCst) {
            1 => Some((StatusCode::OK, "{\"embeddings\": [[0.1, ").into_response()),
            2 => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                None
            }
            3 => Some((StatusCode::SERVICE_UNAVAILABLE, "{\"error\": \"down\"}").into_response()),
            _ => None,
        }
    }

    async fn vectors(&self, texts: Vec<String>) -> Vec<Vec<f32>> {
        let model = self.model();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed(&refs).unwrap()
        })
        .await
        .unwrap()
    }
}

async fn tei_embed(State(shim): State<Arc<Shim>>, Json(body): Json<Value>) -> Response {
    if let Some(r) = shim.fault().await {
        return r;
    }
    let texts: Vec<String> = serde_json::from_value(body["inputs"].clone()).unwrap();
    Json(shim.vectors(texts).await).into_response()
}

/// Scores by cosine: TEI's shape gives probabilities, the Jina shape raw logits
/// (as llama.cpp's server does), to exercise both readings.
async fn scores(shim: &Shim, query: &str, docs: Vec<String>) -> Vec<f32> {
    let mut texts = vec![query.to_owned()];
    texts.extend(docs);
    let v = shim.vectors(texts).await;
    v[1..].iter().map(|d| cosine(&v[0], d)).collect()
}

async fn tei_rerank(State(shim): State<Arc<Shim>>, Json(body): Json<Value>) -> Response {
    if let Some(r) = shim.fault().await {
        return r;
    }
    let docs: Vec<String> = serde_json::from_value(body["texts"].clone()).unwrap();
    let s = scores(&shim, body["query"].as_str().unwrap(), docs).await;
    let mut out: Vec<Value> = s
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"index": i, "score": (c + 1.0) / 2.0}))
        .collect();
    out.sort_by(|a, b| {
        b["score"]
            .as_f64()
            .partial_cmp(&a["score"].as_f64())
            .unwrap()
    });
    Json(Value::Array(out)).into_response()
}

async fn jina_rerank(State(shim): State<Arc<Shim>>, Json(body): Json<Value>) -> Response {
    if let Some(r) = shim.fault().await {
        return r;
    }
    let docs: Vec<String> = serde_json::from_value(body["documents"].clone()).unwrap();
    let s = scores(&shim, body["query"].as_str().unwrap(), docs).await;
    let results: Vec<Value> = s
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"index": i, "relevance_score": c * 10.0 - 3.0}))
        .collect();
    Json(json!({"results": results})).into_response()
}

async fn start_shim() -> (String, Arc<Shim>) {
    let shim = Arc::new(Shim::default());
    let app = Router::new()
        .route("/embed", post(tei_embed))
        .route("/rerank", post(tei_rerank))
        .route("/v1/rerank", post(jina_rerank))
        .with_state(shim.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, shim)
}

fn shim_config(data: &std::path::Path, url: &str, rerank: RerankApi) -> Config {
    Config {
        embed_url: url.to_owned(),
        embed_api: EmbedApi::Tei,
        rerank_url: url.to_owned(),
        rerank_api: rerank,
        remote_timeout_secs: 1,
        // Every search reaches the small server: a repeated query would otherwise be
        // answered from the cache of recent vectors, never meeting the fault under test.
        embed_cache_mb: 0,
        ..test_config(data)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tei_and_jina_shapes_embed_and_rerank() {
    let (url, _shim) = start_shim().await;
    for api in [RerankApi::Tei, RerankApi::Jina] {
        let tmp = tempfile::tempdir().unwrap();
        let server = TestServer::start_with(shim_config(&tmp.path().join("data"), &url, api)).await;
        for (name, text) in common::scenarios::HANDBOOK {
            let (status, body) = server.upload(name, text.as_bytes()).await;
            assert_eq!(status, 200, "{body}");
        }
        let (status, hits) = server
            .post_json(
                "/api/v1/search",
                &json!({"query": "how long must a password be", "top_k": 3}),
            )
            .await;
        assert_eq!(status, 200, "{hits}");
        let results = hits["results"].as_array().unwrap();
        assert_eq!(results[0]["source"], "it-security.md", "{api:?}: {hits}");
        let (_, stats) = server.get_json("/api/v1/health/stats").await;
        assert_eq!(stats["reranker_enabled"], true, "{stats}");
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_retried_reported_and_lose_nothing() {
    let (url, shim) = start_shim().await;
    let tmp = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_with(shim_config(&tmp.path().join("data"), &url, RerankApi::Tei)).await;
    let (status, _) = server
        .upload(
            "it-security.md",
            common::scenarios::HANDBOOK[2].1.as_bytes(),
        )
        .await;
    assert_eq!(status, 200);
    let search = json!({"query": "password length", "top_k": 3});

    // 429 with Retry-After: waited for and retried; the client sees a normal answer.
    shim.busy.store(2, Ordering::SeqCst);
    let started = Instant::now();
    let (status, body) = server.post_json("/api/v1/search", &search).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After honoured"
    );

    // Malformed JSON: the contract's 503 naming the server and what was wrong.
    shim.mode.store(1, Ordering::SeqCst);
    let (status, body) = server.post_json("/api/v1/search", &search).await;
    assert_error_body(status, &body, 503);
    assert!(
        body["detail"].as_str().unwrap().contains("malformed"),
        "{body}"
    );
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert_eq!(ready["ready"], false, "{ready}");

    // A stall: each try ends at the timeout, then 503; no request hangs.
    shim.mode.store(2, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await; // the breaker's pause ends
    let started = Instant::now();
    let (status, body) = server.post_json("/api/v1/search", &search).await;
    assert_error_body(status, &body, 503);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    // Down during an async upload: the task waits and runs again; nothing is lost.
    shim.mode.store(3, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let part =
        reqwest::multipart::Part::bytes(common::scenarios::HANDBOOK[1].1.as_bytes().to_vec())
            .file_name("remote-work.md");
    let r = server
        .client
        .post(server.url("/api/v1/upload/async"))
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let task: Value = r.json().await.unwrap();
    let id = task["task_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, t) = server.get_json(&format!("/api/v1/tasks/{id}")).await;
    assert_ne!(t["status"], "failed", "{t}");
    assert_ne!(t["status"], "completed", "{t}");
    shim.mode.store(0, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, t) = server.get_json(&format!("/api/v1/tasks/{id}")).await;
        if t["status"] == "completed" {
            break;
        }
        assert_ne!(t["status"], "failed", "{t}");
        assert!(Instant::now() < deadline, "the upload never completed: {t}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let hits = server.search("work from home", 3).await;
    assert_eq!(hits["results"][0]["source"], "remote-work.md", "{hits}");
    assert!(shim.seen.load(Ordering::SeqCst) > 5);
    server.stop().await;
}
