//! The HTTP side of the remote backends: one [`Remote`] per inference server (the LLM's,
//! the embedder's, the reranker's) with what the three share: the base URL and key,
//! timeouts, retries with backoff for requests that are safe to repeat (honouring
//! `Retry-After` on 429 and 503), a circuit breaker so that a dead server answers at once
//! instead of after a timeout per request, and the last error for `/health/ready`.
//!
//! Errors come back as [`MlError`]: a server that cannot be reached or keeps failing is
//! [`MlError::Unavailable`] (the APIs answer 503), a server that stays overloaded
//! [`MlError::Overloaded`] (429), a request the server refuses as invalid
//! [`MlError::InvalidInput`] (400). Each message names the server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::MlError;

/// Failures in a row that open the breaker.
const BREAKER_THRESHOLD: u32 = 3;
/// How long an open breaker answers at once before letting a request try again.
const BREAKER_COOLDOWN: Duration = Duration::from_secs(5);
/// The longest `Retry-After` a retry waits for; longer ones are passed on to the client.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The first backoff between two tries; it grows fourfold.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// How to reach one server.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// What it runs, for messages and health: `llm`, `embedder` or `reranker`.
    pub component: &'static str,
    /// Base URL (a trailing `/v1` is accepted and dropped: paths are absolute).
    pub url: String,
    /// Sent as `Authorization: Bearer`.
    pub api_key: Option<String>,
    /// Longest a request may take (for a stream: between two pieces).
    pub timeout: Duration,
    /// Extra tries of a request that is safe to repeat.
    pub retries: u32,
}

/// One remote server. Cloning shares the breaker and the health record.
#[derive(Clone)]
pub struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    component: &'static str,
    base: reqwest::Url,
    api_key: Option<String>,
    retries: u32,
    blocking: reqwest::blocking::Client,
    client: reqwest::Client,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    failures: u32,
    open_until: Option<Instant>,
    last_error: Option<String>,
    last_ok: Option<Instant>,
}

/// What `/health/ready` shows of a remote server.
#[derive(Debug, Clone)]
pub struct RemoteHealth {
    /// The base URL.
    pub url: String,
    /// False while the breaker is open or the last request failed.
    pub healthy: bool,
    /// The last failure, if the last request failed.
    pub last_error: Option<String>,
}

/// One failed try.
enum Failure {
    /// Worth another try (after `retry_after` when the server said so).
    Retry {
        message: String,
        retry_after: Option<Duration>,
        overloaded: bool,
    },
    /// The server refused the request itself: another try would fail the same way.
    Refused(u16, String),
}

impl Remote {
    /// A client for `opts.url`; nothing is sent yet.
    pub fn new(opts: RemoteOptions) -> Result<Self, MlError> {
        let trimmed = opts.url.trim().trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
        let base = reqwest::Url::parse(&format!("{trimmed}/"))
            .map_err(|e| MlError::Load(format!("{} URL {:?}: {e}", opts.component, opts.url)))?;
        let connect = Duration::from_secs(5).min(opts.timeout);
        let blocking = reqwest::blocking::Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(connect)
            .build()
            .map_err(|e| MlError::Load(format!("HTTP client: {e}")))?;
        let client = reqwest::Client::builder()
            .connect_timeout(connect)
            .read_timeout(opts.timeout)
            .build()
            .map_err(|e| MlError::Load(format!("HTTP client: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                component: opts.component,
                base,
                api_key: opts.api_key.filter(|k| !k.is_empty()),
                retries: opts.retries,
                blocking,
                client,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// The base URL as configured (without a trailing `/v1`).
    pub fn base(&self) -> &str {
        self.inner.base.as_str().trim_end_matches('/')
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{}", self.base(), path.trim_start_matches('/'))
    }

    /// `POST path` with a JSON body, blocking, retried (for requests that are safe to
    /// repeat: embeddings, scores, token counts).
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Value, MlError> {
        self.blocking_call(path, |c, url| c.post(url).json(body))
    }

    /// `GET path`, blocking, retried.
    pub fn get_json(&self, path: &str) -> Result<Value, MlError> {
        self.blocking_call(path, |c, url| c.get(url))
    }

    /// `GET path` once, for probing what a server offers: `Ok(None)` when the server
    /// answers but not with JSON success (404 and the like). Does not touch the breaker.
    pub fn probe(&self, path: &str) -> Result<Option<Value>, MlError> {
        let request = self.authorize_blocking(self.inner.blocking.get(self.endpoint(path)));
        match request.send() {
            Ok(r) if r.status().is_success() => Ok(r.json::<Value>().ok()),
            Ok(_) => Ok(None),
            Err(e) => Err(MlError::Unavailable(self.describe(&transport_message(&e)))),
        }
    }

    fn blocking_call(
        &self,
        path: &str,
        build: impl Fn(&reqwest::blocking::Client, &str) -> reqwest::blocking::RequestBuilder,
    ) -> Result<Value, MlError> {
        self.admit()?;
        let url = self.endpoint(path);
        let mut tries = Tries::default();
        loop {
            let started = Instant::now();
            let outcome = match self
                .authorize_blocking(build(&self.inner.blocking, &url))
                .send()
            {
                Err(e) => Err(Failure::Retry {
                    message: transport_message(&e),
                    retry_after: None,
                    overloaded: false,
                }),
                Ok(r) => {
                    let status = r.status().as_u16();
                    let retry_after = retry_after(r.headers());
                    match r.text() {
                        Err(e) => Err(Failure::Retry {
                            message: format!("reading the answer: {}", transport_message(&e)),
                            retry_after: None,
                            overloaded: false,
                        }),
                        Ok(text) => classify(status, retry_after, &text),
                    }
                }
            };
            match outcome {
                Ok(v) => {
                    self.record_ok();
                    tracing::debug!(component = self.inner.component, %url, elapsed_ms = started.elapsed().as_millis() as u64, "remote call");
                    return Ok(v);
                }
                Err(failure) => std::thread::sleep(tries.next(self, &url, failure)?),
            }
        }
    }

    /// `POST path` with a JSON body and `stream: true` semantics: returns the response once
    /// its status is a success, for the caller to read. Tries again (with backoff) only
    /// while nothing has been streamed: on a refused connection, 429 or 503.
    pub async fn post_stream(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<reqwest::Response, MlError> {
        self.admit()?;
        let url = self.endpoint(path);
        let mut tries = Tries::default();
        loop {
            let mut request = self.inner.client.post(&url).json(body);
            if let Some(key) = &self.inner.api_key {
                request = request.bearer_auth(key);
            }
            let failure = match request.send().await {
                Err(e) => Failure::Retry {
                    message: transport_message(&e),
                    retry_after: None,
                    overloaded: false,
                },
                Ok(r) if r.status().is_success() => return Ok(r),
                Ok(r) => {
                    let status = r.status().as_u16();
                    let after = retry_after(r.headers());
                    let text = r.text().await.unwrap_or_default();
                    match classify(status, after, &text) {
                        Ok(_) => unreachable!("a success status is returned above"),
                        Err(f) => f,
                    }
                }
            };
            tokio::time::sleep(tries.next(self, &url, failure)?).await;
        }
    }

    fn authorize_blocking(
        &self,
        request: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        match &self.inner.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// Refuses at once while the breaker is open.
    pub fn admit(&self) -> Result<(), MlError> {
        let state = self.inner.state.lock();
        match state.open_until {
            Some(until) if until > Instant::now() => {
                let secs = until
                    .saturating_duration_since(Instant::now())
                    .as_secs_f32()
                    .ceil();
                Err(MlError::Unavailable(self.describe(&format!(
                    "{} (failed {} times in a row; next try in {secs:.0} s)",
                    state.last_error.as_deref().unwrap_or("unreachable"),
                    state.failures
                ))))
            }
            _ => Ok(()),
        }
    }

    /// Records a request that reached the server and was answered.
    pub fn record_ok(&self) {
        let mut state = self.inner.state.lock();
        state.failures = 0;
        state.open_until = None;
        state.last_error = None;
        state.last_ok = Some(Instant::now());
    }

    /// Records a failure (after its retries) and returns the error for the caller.
    pub fn fail(&self, message: &str, overloaded: bool) -> MlError {
        let mut state = self.inner.state.lock();
        state.failures += 1;
        state.last_error = Some(message.to_owned());
        if state.failures >= BREAKER_THRESHOLD && !overloaded {
            if state.open_until.is_none() {
                tracing::error!(component = self.inner.component, url = %self.base(), error = %message, "remote server failing; answering at once for {} s", BREAKER_COOLDOWN.as_secs());
            }
            state.open_until = Some(Instant::now() + BREAKER_COOLDOWN);
        }
        drop(state);
        if overloaded {
            tracing::warn!(component = self.inner.component, url = %self.base(), "remote server overloaded");
            MlError::Overloaded
        } else {
            MlError::Unavailable(self.describe(message))
        }
    }

    /// `the llm server at http://...: <what>`.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "the {} server at {}: {what}",
            self.inner.component,
            self.base()
        )
    }

    /// The breaker's state and the last error.
    pub fn health(&self) -> RemoteHealth {
        let state = self.inner.state.lock();
        let open = state.open_until.is_some_and(|t| t > Instant::now());
        RemoteHealth {
            url: self.base().to_owned(),
            healthy: !open && state.last_error.is_none(),
            last_error: state.last_error.clone(),
        }
    }
}

/// The tries of one request so far: what the next failure leads to.
#[derive(Default)]
struct Tries {
    done: u32,
}

impl Tries {
    /// How long to wait before trying again after `failure`, or the error to give up
    /// with: the server refused the request itself, the tries are spent, or it asks for a
    /// longer wait than a retry makes.
    fn next(&mut self, remote: &Remote, url: &str, failure: Failure) -> Result<Duration, MlError> {
        match failure {
            Failure::Refused(status, message) => {
                // The server is up; the request is wrong (too long, unknown model...).
                remote.record_ok();
                Err(refused(
                    remote.inner.component,
                    remote.base(),
                    status,
                    &message,
                ))
            }
            Failure::Retry {
                message,
                retry_after,
                overloaded,
            } => {
                let wait = retry_after.unwrap_or(FIRST_BACKOFF * 4u32.pow(self.done));
                if self.done >= remote.inner.retries || wait > MAX_RETRY_AFTER {
                    return Err(remote.fail(&message, overloaded));
                }
                tracing::warn!(component = remote.inner.component, %url, error = %message, retry_in_ms = wait.as_millis() as u64, "remote call failed; retrying");
                self.done += 1;
                Ok(wait)
            }
        }
    }
}

fn classify(status: u16, retry_after: Option<Duration>, text: &str) -> Result<Value, Failure> {
    match status {
        200..=299 => serde_json::from_str(text).map_err(|e| Failure::Retry {
            message: format!("answered with malformed JSON ({e}): {}", excerpt(text)),
            retry_after: None,
            overloaded: false,
        }),
        429 => Err(Failure::Retry {
            message: format!("429 Too Many Requests: {}", server_message(text)),
            retry_after,
            overloaded: true,
        }),
        408 | 500 | 502..=504 => Err(Failure::Retry {
            message: format!("HTTP {status}: {}", server_message(text)),
            retry_after,
            overloaded: false,
        }),
        _ => Err(Failure::Refused(status, server_message(text))),
    }
}

/// A 4xx the server gave: auth problems are the operator's to fix (503 for the client),
/// the rest describe the request (400).
fn refused(component: &str, base: &str, status: u16, message: &str) -> MlError {
    let text =
        format!("the {component} server at {base} refused the request (HTTP {status}): {message}");
    match status {
        401 | 403 | 404 => MlError::Unavailable(text),
        _ => MlError::InvalidInput(text),
    }
}

/// The error message of an OpenAI-, llama.cpp- or TEI-style error body, else an excerpt.
fn server_message(text: &str) -> String {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        for pointer in ["/error/message", "/error", "/message", "/detail"] {
            if let Some(m) = v.pointer(pointer).and_then(Value::as_str) {
                return excerpt(m);
            }
        }
    }
    excerpt(text)
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_owned(),
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

fn transport_message(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut message = if e.is_timeout() {
        "no answer in time".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        e.to_string()
    };
    // The root cause (connection refused, reset...) says the most.
    let mut source = e.source();
    let mut root = None;
    while let Some(s) = source {
        root = Some(s.to_string());
        source = s.source();
    }
    if let Some(r) = root {
        message.push_str(": ");
        message.push_str(&r);
    }
    message
}

/// Reads a server-sent-events body: each `data:` payload, as it completes.
pub struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl SseReader {
    /// Reads `response`'s body as events.
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: Vec::new(),
        }
    }

    /// The next `data:` payload; `Ok(None)` at the end of the body.
    pub async fn next_data(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if let Some(data) = line.strip_prefix("data:") {
                    return Ok(Some(data.trim_start().to_owned()));
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.extend_from_slice(&bytes),
                Ok(None) => {
                    if self.buffer.is_empty() {
                        return Ok(None);
                    }
                    // A last line without its newline.
                    self.buffer.push(b'\n');
                }
                Err(e) => return Err(transport_message(&e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert!(classify(200, None, "{\"a\": 1}").is_ok());
        assert!(matches!(
            classify(200, None, "{\"a\""),
            Err(Failure::Retry {
                overloaded: false,
                ..
            })
        ));
        assert!(matches!(
            classify(429, Some(Duration::from_secs(1)), "{}"),
            Err(Failure::Retry {
                overloaded: true,
                retry_after: Some(_),
                ..
            })
        ));
        assert!(matches!(
            classify(503, None, ""),
            Err(Failure::Retry { .. })
        ));
        match classify(400, None, "{\"error\": {\"message\": \"too long\"}}") {
            Err(Failure::Refused(400, m)) => assert_eq!(m, "too long"),
            _ => panic!("a 400 is not retried"),
        }
    }

    #[test]
    fn a_dead_server_opens_the_breaker() {
        // Port 9 on loopback: nothing listens there in the test environment; whatever
        // the error, three failures in a row must open the breaker.
        let remote = Remote::new(RemoteOptions {
            component: "embedder",
            url: "http://127.0.0.1:9/v1".into(),
            api_key: None,
            timeout: Duration::from_secs(2),
            retries: 0,
        })
        .unwrap();
        assert_eq!(remote.base(), "http://127.0.0.1:9");
        for _ in 0..BREAKER_THRESHOLD {
            let e = remote
                .post_json("/v1/embeddings", &serde_json::json!({}))
                .unwrap_err();
            assert!(matches!(e, MlError::Unavailable(_)), "{e:?}");
        }
        let started = Instant::now();
        let e = remote
            .post_json("/v1/embeddings", &serde_json::json!({}))
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(50));
        assert!(e.to_string().contains("next try in"), "{e}");
        assert!(!remote.health().healthy);
    }
}
