//! Test harness: the real server on 127.0.0.1:0 against a temp data directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use ragd::config::Config;
use serde_json::Value;
use tokio::sync::oneshot;

pub mod office;
pub mod pdf;

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
        ..Config::default()
    }
}

impl TestServer {
    /// Starts a server on `data_dir` with the default test configuration.
    pub async fn start(data_dir: &Path) -> Self {
        Self::start_with(test_config(data_dir)).await
    }

    /// Starts a server with `config` (its port is ignored: an ephemeral one is used).
    pub async fn start_with(config: Config) -> Self {
        let _ = tracing_subscriber_init();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let data_dir = config.data_dir.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(ragd::run(config, listener, async move {
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
