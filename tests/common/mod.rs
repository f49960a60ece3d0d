//! Test harness: the real server on 127.0.0.1:0 against a temp data directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ragd::config::Config;
use serde_json::Value;
use tokio::sync::oneshot;

pub mod browser;
pub mod child;
pub mod clients;
pub mod engines;
pub mod logits;
pub mod office;
pub mod pdf;
pub mod reembed;
pub mod scenarios;
pub mod sync;

/// Where the setup script installed the models.
pub fn models_dir() -> PathBuf {
    std::env::var_os("RAGD_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
}

/// The folder beside the repository holding the shared references and fixtures.
pub fn shared_dir() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    assert!(
        p.exists(),
        "{} is missing: these tests need the shared references beside the repository",
        p.display()
    );
    p
}

/// A running server.
pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// A default test configuration on `data_dir`.
pub fn test_config(data_dir: &Path) -> Config {
    Config {
        host: "127.0.0.1".into(),
        port: 0,
        data_dir: data_dir.to_owned(),
        models_dir: models_dir(),
        // Tests that want an LLM name a tiny one; none is picked up from models/.
        llm_model: "none".into(),
        ..Config::default()
    }
}

/// [`test_config`] with LLM files in their own `models` folder (for listing and switching
/// them), running `llm` from it on one thread, and the installed embedder.
pub fn models_config(data_dir: &Path, models: &Path, llm: &str) -> Config {
    Config {
        models_dir: models.to_owned(),
        embedding_model: models_dir().join("all-MiniLM-L6-v2").display().to_string(),
        llm_model: models.join(llm).display().to_string(),
        llm_threads: Some(1),
        ..test_config(data_dir)
    }
}

impl TestServer {
    /// Starts a server on `data_dir` with the default test configuration.
    pub async fn start(data_dir: &Path) -> Self {
        Self::start_with(test_config(data_dir)).await
    }

    /// Starts a server with `config` (its port is ignored: an ephemeral one is used).
    pub async fn start_with(config: impl Into<ragd::AppStateBuilder>) -> Self {
        let _ = tracing_subscriber_init();
        let builder = config.into();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let data_dir = builder.config().data_dir.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(ragd::run(builder, listener, async move {
            let _ = rx.await;
        }));
        let base = format!("http://{addr}");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        // Wait until it answers.
        for _ in 0..600 {
            if let Ok(r) = client.get(format!("{base}/api/v1/health")).send().await {
                if r.status().is_success() {
                    return Self {
                        base,
                        client,
                        data_dir,
                        stop: Some(tx),
                        task: Some(task),
                    };
                }
            }
            if task.is_finished() {
                let err = task.await.unwrap().err();
                panic!("server exited during start-up: {err:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server did not answer in time");
    }

    /// Stops the server gracefully and waits until its indexes are flushed.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server run");
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// POSTs JSON and returns status and body.
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// GETs and returns status and JSON body.
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(self.url(path)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POSTs a multipart form with one `file` and text fields; returns status and body.
    pub async fn post_file(
        &self,
        path: &str,
        name: &str,
        bytes: &[u8],
        fields: &[(&str, &str)],
    ) -> (u16, Value) {
        let r = self.send_file(path, name, bytes, fields).await;
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Like [`post_file`](Self::post_file), returning the raw response (for SSE).
    pub async fn send_file(
        &self,
        path: &str,
        name: &str,
        bytes: &[u8],
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.to_owned()),
        );
        for (k, v) in fields {
            form = form.text(k.to_string(), v.to_string());
        }
        self.client
            .post(self.url(path))
            .multipart(form)
            .send()
            .await
            .unwrap()
    }

    /// Uploads one file through `/api/v1/upload`.
    pub async fn upload(&self, name: &str, bytes: &[u8]) -> (u16, Value) {
        let part = reqwest::multipart::Part::bytes(bytes.to_vec()).file_name(name.to_owned());
        let form = reqwest::multipart::Form::new().part("file", part);
        let r = self
            .client
            .post(self.url("/api/v1/upload"))
            .multipart(form)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Searches and returns the body (asserting 200).
    pub async fn search(&self, query: &str, top_k: u64) -> Value {
        let (s, body) = self
            .post_json(
                "/api/v1/search",
                &serde_json::json!({"query": query, "top_k": top_k}),
            )
            .await;
        assert_eq!(s, 200, "search failed: {body}");
        body
    }
}

/// Sends one `/api/v1/search` per query, all at once; returns each status and body in
/// query order (a request without an answer panics).
pub async fn search_at_once(
    client: &reqwest::Client,
    base: &str,
    queries: &[String],
    top_k: u64,
) -> Vec<(u16, Value)> {
    let sent = queries.iter().map(|q| {
        let req = client
            .post(format!("{base}/api/v1/search"))
            .json(&serde_json::json!({"query": q, "top_k": top_k}));
        async move {
            let r = req.send().await.expect("search answered");
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        }
    });
    futures::future::join_all(sent).await
}

impl TestServer {
    /// [`search_at_once`] against this server.
    pub async fn search_at_once(&self, queries: &[String], top_k: u64) -> Vec<(u16, Value)> {
        search_at_once(&self.client, &self.base, queries, top_k).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

fn tracing_subscriber_init() -> Result<(), ()> {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("RAGD_TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter("info,ragd=debug")
                .with_test_writer()
                .try_init();
        }
    });
    Ok(())
}

/// Asserts the contract's error body with this status.
pub fn assert_error_body(status: u16, body: &Value, expected: u16) {
    assert_eq!(status, expected, "unexpected status; body: {body}");
    assert_eq!(body["status_code"], expected, "body: {body}");
    assert!(
        body["error"].as_str().is_some_and(|s| !s.is_empty()),
        "body: {body}"
    );
    assert!(
        body["detail"].as_str().is_some_and(|s| !s.is_empty()),
        "body: {body}"
    );
    assert!(
        body["timestamp"].as_str().is_some_and(|s| s.len() >= 19),
        "body: {body}"
    );
}

// ---- Assistant API (/api/method) helpers ----

/// How an assistant API request authenticates.
#[derive(Debug, Clone)]
pub enum Auth {
    /// A guest.
    None,
    /// `Authorization: token <key:secret>`.
    Token(String),
    /// `Authorization: Bearer <jwt>`.
    Bearer(String),
    /// The `sid` cookie of `login`.
    Session(String),
}

/// Status, JSON body and headers of one assistant API call.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// Asserts a success envelope and returns `message.data`.
    pub fn data(&self) -> &Value {
        assert_eq!(self.status, 200, "body: {}", self.body);
        assert_eq!(self.body["message"]["success"], true, "body: {}", self.body);
        &self.body["message"]["data"]
    }

    /// Asserts an error envelope with this status and returns its `exc_type`.
    pub fn error(&self, status: u16) -> String {
        assert_eq!(self.status, status, "body: {}", self.body);
        let m = &self.body["message"];
        assert_eq!(m["success"], false, "body: {}", self.body);
        assert!(m["data"].is_null(), "body: {}", self.body);
        assert_eq!(m["tokens_used"]["total"], 0, "body: {}", self.body);
        let kind = m["error"]["type"].as_str().expect("error.type").to_owned();
        assert!(m["error"]["detail"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(self.body["exc_type"], kind.as_str(), "body: {}", self.body);
        kind
    }

    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// Creates a user directly on `data_dir`'s database (the server may or may not be
/// running); returns `"<api_key>:<api_secret>"`.
pub async fn create_user(data_dir: &Path, email: &str, password: &str, admin: bool) -> String {
    use ragd::assistant::users::{NewUser, Users};
    std::fs::create_dir_all(data_dir).unwrap();
    let store = ragd::store::Store::open(&data_dir.join("ragd.sqlite")).unwrap();
    let users = Users::new(store, ragd::time::Clock::default(), None);
    let c = users
        .create(NewUser {
            email: email.into(),
            name: None,
            password: Some(password.into()),
            is_admin: admin,
        })
        .await
        .unwrap();
    format!("{}:{}", c.api_key, c.api_secret)
}

impl TestServer {
    /// Calls `/api/method/<op>` (`op` like `assistant.api.get_config` or `login`): GET
    /// sends `params` as the query string, other methods as a JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        op: &str,
        params: &Value,
        auth: &Auth,
    ) -> Reply {
        let url = self.url(&format!("/api/method/{op}"));
        let mut req = self.client.request(method.clone(), url);
        if method == reqwest::Method::GET {
            let pairs: Vec<(String, String)> = params
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| {
                            let s = match v {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            (k.clone(), s)
                        })
                        .collect()
                })
                .unwrap_or_default();
            req = req.query(&pairs);
        } else {
            req = req.json(params);
        }
        self.send_reply(with_auth(req, auth)).await
    }

    /// Sends a prepared request and collects the reply.
    pub async fn send_reply(&self, req: reqwest::RequestBuilder) -> Reply {
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.json().await.unwrap_or(Value::Null);
        Reply {
            status,
            body,
            headers,
        }
    }

    /// Logs in with `usr`/`pwd` and returns the `sid` cookie's value.
    pub async fn login(&self, email: &str, password: &str) -> String {
        let r = self
            .call(
                reqwest::Method::POST,
                "login",
                &serde_json::json!({"usr": email, "pwd": password}),
                &Auth::None,
            )
            .await;
        r.data();
        let cookie = r.header("set-cookie").expect("set-cookie");
        cookie
            .split(';')
            .next()
            .and_then(|kv| kv.strip_prefix("sid="))
            .expect("sid cookie")
            .to_owned()
    }
}

/// Adds `auth` to a request.
pub fn with_auth(req: reqwest::RequestBuilder, auth: &Auth) -> reqwest::RequestBuilder {
    match auth {
        Auth::None => req,
        Auth::Token(t) => req.header("Authorization", format!("token {t}")),
        Auth::Bearer(t) => req.header("Authorization", format!("Bearer {t}")),
        Auth::Session(sid) => req.header("Cookie", format!("sid={sid}")),
    }
}

/// Reads a whole SSE response into (event, data) pairs, checking the wire format.
pub async fn sse_events(r: reqwest::Response) -> Vec<(String, Value)> {
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let body = r.text().await.unwrap();
    let mut out = Vec::new();
    for msg in body.split("\n\n").filter(|m| !m.trim().is_empty()) {
        if let Some((k, d)) = sse_event(msg) {
            assert_eq!(d["event"], k.as_str(), "data carries its event kind");
            out.push((k, d));
        }
    }
    out
}

/// One SSE message's event kind and JSON data (`None` without both).
fn sse_event(msg: &str) -> Option<(String, Value)> {
    let mut kind = None;
    let mut data = None;
    for line in msg.lines() {
        if let Some(k) = line.strip_prefix("event: ") {
            kind = Some(k.to_owned());
        } else if let Some(d) = line.strip_prefix("data: ") {
            data = Some(serde_json::from_str::<Value>(d).expect("data is JSON"));
        }
    }
    Some((kind?, data?))
}

/// Checks that a knowledge-base answer's `answer_mode` says where its text comes from, as
/// its `grounding` counts it: `extractive` with no sentence of the model, `generative`
/// with no quoted one, `mixed` with both. Returns the mode.
pub fn truthful_mode(answer: &Value) -> String {
    let g = &answer["grounding"];
    let generated = g["generated_sentences"]
        .as_u64()
        .expect("generated_sentences");
    let quoted = g["extractive_sentences"]
        .as_u64()
        .expect("extractive_sentences");
    let expected = match (generated, quoted) {
        (0, _) => "extractive",
        (_, 0) => "generative",
        _ => "mixed",
    };
    assert_eq!(answer["answer_mode"], expected, "{answer}");
    expected.to_owned()
}

/// Whether the LLM wrote (part of) this answer's candidates: its sentences were checked.
pub fn model_wrote(answer: &Value) -> bool {
    answer["grounding"]["sentences"]
        .as_array()
        .is_some_and(|s| !s.is_empty())
}

/// Reads an SSE response as it arrives: (seconds since `since` at which the event was
/// read, event, data) for each event.
pub async fn sse_events_timed(
    mut r: reqwest::Response,
    since: std::time::Instant,
) -> Vec<(f64, String, Value)> {
    assert_eq!(r.status().as_u16(), 200);
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    while let Some(chunk) = r.chunk().await.expect("the stream reads") {
        let at = since.elapsed().as_secs_f64();
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let msg: Vec<u8> = buf.drain(..end + 2).collect();
            let msg = String::from_utf8(msg).expect("events are UTF-8");
            if let Some((k, d)) = sse_event(&msg) {
                out.push((at, k, d));
            }
        }
    }
    out
}

// ---- In-process access to the services (conversation tests seed messages directly) ----

impl TestServer {
    /// Like [`start_with`](Self::start_with), also returning the running server's
    /// `AppState`, for tests that call services with no HTTP operation of their own (e.g.
    /// appending messages the way the chat engine does).
    pub async fn start_with_state(
        config: impl Into<ragd::AppStateBuilder>,
    ) -> (Self, ragd::AppState) {
        let _ = tracing_subscriber_init();
        let builder = config.into();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let data_dir = builder.config().data_dir.clone();
        let state = builder.build().await.expect("build state");
        let app = ragd::api::app(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let served = state.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await?;
            served.shutdown().await?;
            Ok(())
        });
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let server = Self {
            base: format!("http://{addr}"),
            client,
            data_dir,
            stop: Some(tx),
            task: Some(task),
        };
        (server, state)
    }
}

/// The user id behind `"<api_key>:<api_secret>"`.
pub async fn user_id(state: &ragd::AppState, credentials: &str) -> String {
    let (key, secret) = credentials.split_once(':').expect("key:secret");
    state
        .assistant
        .users
        .by_api_key(key, secret)
        .await
        .expect("valid credentials")
        .id
}
