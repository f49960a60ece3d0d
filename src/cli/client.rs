//! The HTTP client the commands use to reach a running server.

use anyhow::Context as _;

/// A client for the server at `base` sending `api_key` (if any) as `X-API-Key`.
pub struct Server {
    pub base: String,
    pub http: reqwest::Client,
}

impl Server {
    /// Builds the client; `timeout` bounds each whole request (None: no bound, for
    /// downloads of any size).
    pub fn new(
        base: &str,
        api_key: Option<&str>,
        timeout: Option<std::time::Duration>,
    ) -> anyhow::Result<Self> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(key) = api_key.filter(|k| !k.is_empty()) {
            headers.insert(
                "X-API-Key",
                reqwest::header::HeaderValue::from_str(key)
                    .context("RAGD_API_KEY is not a valid header value")?,
            );
        }
        let mut b = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(std::time::Duration::from_secs(10));
        if let Some(t) = timeout {
            b = b.timeout(t);
        }
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http: b.build()?,
        })
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Turns an error answer into a message with the server's `detail`.
    pub async fn check(&self, r: reqwest::Response) -> anyhow::Result<reqwest::Response> {
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status();
        let body: serde_json::Value = r.json().await.unwrap_or_default();
        let detail = body["detail"]
            .as_str()
            .or_else(|| body["message"]["error"]["detail"].as_str())
            .unwrap_or("no detail");
        anyhow::bail!("the server answered {status}: {detail}")
    }

    /// A message for a server that could not be reached.
    pub fn unreachable(&self) -> String {
        format!(
            "reaching ragd at {} (is it running? see --server)",
            self.base
        )
    }
}
