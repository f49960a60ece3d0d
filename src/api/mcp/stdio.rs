//! MCP over stdin/stdout (newline-delimited JSON-RPC), for clients that start a command
//! (Claude Desktop's `mcpServers` entries). [`serve_local`] answers with this process's
//! own services on a data directory, acting as one user; [`forward`] relays every message
//! to a running server's `/mcp` with a credential. Only protocol messages go to stdout;
//! logs go to stderr.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::http::{MAX_BODY, METHOD_HEADER, NAME_HEADER, SESSION_HEADER, VERSION_HEADER};
use super::jsonrpc::{self, Incoming, RpcError};
use super::protocol::{self, Ctx, McpServer};
use crate::api::v1::caller::Caller;
use crate::assistant::users::CurrentUser;
use crate::state::AppState;

/// Reads lines from stdin until it closes; writes each answer as one line.
async fn serve_lines<F, Fut>(mut answer: F) -> anyhow::Result<()>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Vec<Value>>,
{
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let replies = if line.len() > MAX_BODY {
            let e = RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("message over {} MiB", MAX_BODY >> 20),
            );
            vec![jsonrpc::error(&Value::Null, &e)]
        } else {
            answer(line).await
        };
        for r in replies {
            let mut text = serde_json::to_string(&r)?;
            text.push('\n');
            out.write_all(text.as_bytes()).await?;
        }
        out.flush().await?;
    }
    tracing::info!("stdin closed; MCP over stdio ends");
    Ok(())
}

/// Answers MCP on stdin/stdout with `state`'s services, as `user`.
pub async fn serve_local(state: AppState, user: CurrentUser) -> anyhow::Result<()> {
    tracing::info!(user = %user.email, "MCP over stdio on the data directory");
    let server = McpServer::new(state);
    let caller = Caller::User(user);
    let mut version: Option<String> = None;
    serve_lines(|line| {
        let (server, caller) = (server.clone(), caller.clone());
        let reply = local_answer(&mut version, line);
        async move {
            match reply {
                LocalStep::Done(v) => v.into_iter().collect(),
                LocalStep::Call {
                    id,
                    method,
                    params,
                    version,
                } => {
                    let ctx = Ctx { caller, version };
                    vec![jsonrpc::response(
                        &id,
                        server.call(&ctx, &method, params).await,
                    )]
                }
            }
        }
    })
    .await
}

enum LocalStep {
    /// Answered already (or nothing to answer).
    Done(Option<Value>),
    /// A method for the server.
    Call {
        id: Value,
        method: String,
        params: Value,
        version: String,
    },
}

/// What one line asks of the local server; `initialize` fixes `version`.
fn local_answer(version: &mut Option<String>, line: String) -> LocalStep {
    let (id, method, params) = match jsonrpc::parse(line.as_bytes()) {
        Err(rejected) => {
            let (id, e) = *rejected;
            return LocalStep::Done(Some(jsonrpc::error(&id, &e)));
        }
        Ok(Incoming::Response | Incoming::Notification { .. }) => return LocalStep::Done(None),
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
    };
    if method == "initialize" {
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            let e = RpcError::params("initialize needs params.protocolVersion, a string");
            return LocalStep::Done(Some(jsonrpc::error(&id, &e)));
        };
        let v = protocol::negotiate(Some(requested));
        *version = Some(v.to_owned());
        let result = McpServer::initialize_result(v);
        return LocalStep::Done(Some(jsonrpc::response(&id, Ok(result))));
    }
    let v = match protocol::envelope_version(&params) {
        Err(e) => return LocalStep::Done(Some(jsonrpc::error(&id, &e))),
        Ok(Some(v)) => v,
        Ok(None) => match (version.as_ref(), method == "server/discover") {
            (Some(v), _) => v.clone(),
            (None, true) => protocol::MODERN_VERSION.to_owned(),
            (None, false) => {
                let e = RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    "send initialize first (or the 2026-07-28 params._meta envelope)",
                );
                return LocalStep::Done(Some(jsonrpc::error(&id, &e)));
            }
        },
    };
    LocalStep::Call {
        id,
        method,
        params,
        version: v,
    }
}

/// Relays MCP between stdin/stdout and the `/mcp` endpoint at `url` (a server's base URL
/// or its `/mcp`), sending `key` as `Authorization: Bearer`.
pub async fn forward(url: &str, key: Option<String>) -> anyhow::Result<()> {
    let base = url.trim_end_matches('/');
    let endpoint = if base.ends_with("/mcp") {
        base.to_owned()
    } else {
        format!("{base}/mcp")
    };
    tracing::info!(%endpoint, "MCP over stdio, forwarded");
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()?;
    let relay = std::sync::Arc::new(tokio::sync::Mutex::new(Relay {
        client,
        endpoint,
        key,
        session: None,
        version: None,
    }));
    let r = relay.clone();
    serve_lines(move |line| {
        let r = r.clone();
        async move { r.lock().await.send(line).await }
    })
    .await?;
    relay.lock().await.end().await;
    Ok(())
}

struct Relay {
    client: reqwest::Client,
    endpoint: String,
    key: Option<String>,
    session: Option<String>,
    version: Option<String>,
}

impl Relay {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut b = self.client.request(method, &self.endpoint);
        if let Some(k) = &self.key {
            b = b.bearer_auth(k);
        }
        if let Some(s) = &self.session {
            b = b.header(SESSION_HEADER, s);
        }
        b
    }

    /// Sends one message; the messages to write back.
    async fn send(&mut self, line: String) -> Vec<Value> {
        let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let id = msg.get("id").cloned().unwrap_or(Value::Null);
        let is_request = msg.get("method").is_some() && !id.is_null();
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut b = self
            .request(reqwest::Method::POST)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let enveloped = params
            .pointer("/_meta")
            .and_then(|m| m.get(protocol::META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        if let Some(v) = enveloped {
            // The 2026-07-28 routing headers mirror the body.
            b = b.header(VERSION_HEADER, v).header(METHOD_HEADER, &method);
            let name = match method.as_str() {
                "tools/call" | "prompts/get" => params.get("name"),
                "resources/read" => params.get("uri"),
                _ => None,
            };
            if let Some(n) = name.and_then(Value::as_str) {
                b = b.header(NAME_HEADER, n);
            }
        } else if let Some(v) = &self.version {
            b = b.header(VERSION_HEADER, v);
        }
        let failed = |m: String| {
            tracing::warn!(error = %m, "forwarding an MCP message failed");
            match is_request {
                true => vec![jsonrpc::error(
                    &id,
                    &RpcError::new(jsonrpc::INTERNAL_ERROR, m),
                )],
                false => Vec::new(),
            }
        };
        let resp = match b.body(line).send().await {
            Ok(r) => r,
            Err(e) => return failed(format!("ragd at {} is unreachable: {e}", self.endpoint)),
        };
        let status = resp.status();
        if method == "initialize" && status.is_success() {
            self.session = resp
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
        }
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let text = match resp.text().await {
            Ok(t) => t,
            Err(e) => return failed(format!("reading ragd's answer failed: {e}")),
        };
        if status == reqwest::StatusCode::ACCEPTED || (!is_request && text.trim().is_empty()) {
            return Vec::new();
        }
        let mut out: Vec<Value> = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect()
        } else {
            serde_json::from_str::<Value>(&text).into_iter().collect()
        };
        if out.is_empty() {
            return failed(format!(
                "ragd answered HTTP {status} without a JSON-RPC message"
            ));
        }
        for m in &mut out {
            // An error sent before the server read the id (401, 413 ...) names none.
            if m.get("error").is_some() && m.get("id") == Some(&Value::Null) && is_request {
                m["id"] = id.clone();
            }
            if method == "initialize" {
                if let Some(v) = m.pointer("/result/protocolVersion").and_then(Value::as_str) {
                    self.version = Some(v.to_owned());
                }
            }
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            tracing::error!(
                "ragd refused the credential: set RAGD_API_KEY to a user's api_key:api_secret"
            );
        }
        out
    }

    /// Ends the session, if one was opened.
    async fn end(&self) {
        if self.session.is_some() {
            if let Err(e) = self.request(reqwest::Method::DELETE).send().await {
                tracing::warn!(error = %e, "ending the MCP session failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn initialize_fixes_the_version_and_is_required() {
        let mut v = None;
        let step = local_answer(
            &mut v,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.into(),
        );
        let LocalStep::Done(Some(e)) = step else {
            panic!("expected an error")
        };
        assert_eq!(e["error"]["code"], json!(jsonrpc::INVALID_REQUEST));
        let init = r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;
        let LocalStep::Done(Some(r)) = local_answer(&mut v, init.into()) else {
            panic!()
        };
        assert_eq!(r["result"]["protocolVersion"], json!("2025-06-18"));
        let step = local_answer(&mut v, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.into());
        assert!(matches!(step, LocalStep::Call { ref version, .. } if version == "2025-06-18"));
    }
}
