//! The streamable HTTP transport at `/mcp`: `POST` carries one JSON-RPC message and gets
//! its answer as `application/json` (this server sends no requests or notifications of
//! its own, so it never needs to open a stream); `GET` (the server-to-client stream) is
//! 405; `DELETE` ends a session. Before any message is read: the `Origin` check (a
//! browser page of another site is refused: DNS-rebinding protection) and the caller
//! ([`caller::resolve_headers`]: 401 with `WWW-Authenticate: Bearer`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::jsonrpc::{self, Incoming, RpcError};
use super::protocol::{self, Ctx, McpServer};
use super::sessions::Sessions;
use crate::api::v1::caller::{self, Caller};

/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated version, sent on every request after the first.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// 2026-07-28: the method, mirrored from the body.
pub const METHOD_HEADER: &str = "mcp-method";
/// 2026-07-28: the tool name or resource URI, mirrored from the body.
pub const NAME_HEADER: &str = "mcp-name";
/// Largest request body.
pub const MAX_BODY: usize = 4 << 20;
/// Most bytes of an oversized body read (and dropped) before the 413 is sent.
const DRAIN_LIMIT: usize = 64 << 20;

/// What the `/mcp` handlers share.
#[derive(Clone)]
pub struct McpHttp {
    pub server: McpServer,
    pub sessions: Arc<Sessions>,
}

fn rpc_response(status: StatusCode, id: &Value, e: &RpcError) -> Response {
    (status, axum::Json(jsonrpc::error(id, e))).into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether a browser `Origin` may call: none (not a browser), a loopback host, or the
/// host the request was sent to.
fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin.to_str().ok().and_then(|o| o.split_once("://")) else {
        return false;
    };
    let authority = origin.1.trim_end_matches('/');
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    if matches!(host, "localhost" | "127.0.0.1" | "::1") {
        return true;
    }
    header(headers, header::HOST.as_str()).is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

/// Origin and credential checks of every method; the caller, or the refusal.
async fn admit(h: &McpHttp, headers: &HeaderMap) -> Result<Caller, Response> {
    if !origin_allowed(headers) {
        tracing::warn!(origin = ?headers.get(header::ORIGIN), "MCP request from a foreign Origin refused");
        return Err(rpc_response(
            StatusCode::FORBIDDEN,
            &Value::Null,
            &RpcError::new(jsonrpc::INVALID_REQUEST, "Origin not allowed: /mcp answers pages of this server's own origin or localhost only"),
        ));
    }
    caller::resolve_headers(headers, &h.server.state)
        .await
        .map_err(|e| {
            let mut r = rpc_response(
                e.status,
                &Value::Null,
                &RpcError::new(jsonrpc::UNAUTHORIZED, e.message),
            );
            if e.status == StatusCode::UNAUTHORIZED {
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"ragd\""),
                );
            }
            r
        })
}

/// `POST /mcp`.
#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    operation_id = "mcp_post",
    description = "MCP streamable HTTP: one JSON-RPC message per POST (initialize, ping, tools/list, tools/call, resources/list, resources/read, server/discover). Auth: `Authorization: Bearer <api_key:api_secret>` (a user) or a server key. See docs/mcp.md.",
    request_body(content = serde_json::Value, content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC response (`Mcp-Session-Id` set by initialize)", body = serde_json::Value),
        (status = 202, description = "A notification or response was accepted"),
        (status = 400, description = "JSON-RPC error: parse error, invalid request, missing session, header mismatch, unsupported version"),
        (status = 401, description = "Missing or wrong credential (`WWW-Authenticate: Bearer`)"),
        (status = 403, description = "A foreign Origin"),
        (status = 404, description = "Unknown or expired session"),
        (status = 413, description = "Body over 4 MiB"),
    ),
    security(("bearer" = [])),
)]
#[tracing::instrument(skip_all, name = "mcp_post")]
pub async fn post(State(h): State<McpHttp>, headers: HeaderMap, body: Body) -> Response {
    let caller = match admit(&h, &headers).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if let Some(ct) = header(&headers, header::CONTENT_TYPE.as_str()) {
        if !ct.to_ascii_lowercase().starts_with("application/json") {
            return rpc_response(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &Value::Null,
                &RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    format!("Content-Type must be application/json, got '{ct}'"),
                ),
            );
        }
    }
    let Some(bytes) = read_body(body).await else {
        tracing::warn!("MCP body over the limit (or unreadable)");
        return rpc_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &Value::Null,
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!("request body over {} MiB", MAX_BODY >> 20),
            ),
        );
    };
    let (id, method, params) = match jsonrpc::parse(&bytes) {
        Err(rejected) => {
            let (id, e) = *rejected;
            tracing::info!(code = e.code, "MCP message refused");
            return rpc_response(StatusCode::BAD_REQUEST, &id, &e);
        }
        Ok(Incoming::Response | Incoming::Notification { .. }) => {
            return StatusCode::ACCEPTED.into_response();
        }
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
    };
    let owner = caller.label();
    if method == "initialize" {
        return initialize(&h, &owner, &id, &params);
    }
    let version = match header(&headers, SESSION_HEADER) {
        Some(sid) => match h.sessions.version(sid, &owner) {
            None => {
                return rpc_response(
                    StatusCode::NOT_FOUND,
                    &id,
                    &RpcError::new(
                        jsonrpc::SESSION_NOT_FOUND,
                        "session not found (ended or expired): send initialize again",
                    ),
                )
            }
            Some(v) => match header(&headers, VERSION_HEADER) {
                Some(hv) if hv != v => {
                    return rpc_response(
                        StatusCode::BAD_REQUEST,
                        &id,
                        &RpcError::new(
                            jsonrpc::INVALID_REQUEST,
                            format!("MCP-Protocol-Version '{hv}' is not this session's ({v})"),
                        ),
                    )
                }
                _ => v,
            },
        },
        None => match stateless_version(&headers, &method, &params) {
            Ok(v) => v,
            Err(e) => return rpc_response(StatusCode::BAD_REQUEST, &id, &e),
        },
    };
    let ctx = Ctx { caller, version };
    let answer = jsonrpc::response(&id, h.server.call(&ctx, &method, params).await);
    axum::Json(answer).into_response()
}

/// The body, or `None` when it is over [`MAX_BODY`] or unreadable. An oversized body is
/// still read (and dropped) up to [`DRAIN_LIMIT`] for a short while, so that the client,
/// still sending, gets the 413 rather than a connection closed under it.
async fn read_body(body: Body) -> Option<Vec<u8>> {
    use futures::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        if buf.len() + chunk.len() > MAX_BODY {
            let mut seen = buf.len() + chunk.len();
            let drain = async {
                while let Some(Ok(c)) = stream.next().await {
                    seen += c.len();
                    if seen > DRAIN_LIMIT {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), drain).await;
            return None;
        }
        buf.extend_from_slice(&chunk);
    }
    Some(buf)
}

/// `initialize`: negotiates the version and opens a session.
fn initialize(h: &McpHttp, owner: &str, id: &Value, params: &Value) -> Response {
    let requested = match params.get("protocolVersion") {
        Some(Value::String(v)) => v.as_str(),
        _ => {
            return rpc_response(
                StatusCode::BAD_REQUEST,
                id,
                &RpcError::params("initialize needs params.protocolVersion, a string"),
            )
        }
    };
    let version = protocol::negotiate(Some(requested));
    let Some(session) = h.sessions.open(owner, version) else {
        return rpc_response(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            &RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "too many open MCP sessions; retry later",
            ),
        );
    };
    tracing::info!(requested, version, "MCP initialize");
    let body = jsonrpc::response(id, Ok(McpServer::initialize_result(version)));
    let mut r = axum::Json(body).into_response();
    if let Ok(v) = HeaderValue::from_str(&session) {
        r.headers_mut().insert(SESSION_HEADER, v);
    }
    r
}

/// The version of a request without a session: the 2026-07-28 envelope, whose routing
/// headers must agree with the body. `server/discover` is answered without one.
fn stateless_version(
    headers: &HeaderMap,
    method: &str,
    params: &Value,
) -> Result<String, RpcError> {
    let Some(version) = protocol::envelope_version(params)? else {
        if method == "server/discover" {
            return Ok(protocol::MODERN_VERSION.to_owned());
        }
        return Err(RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "no Mcp-Session-Id: send initialize first (revisions up to 2025-11-25), or the 2026-07-28 per-request params._meta envelope",
        ));
    };
    let mismatch = |what: &str| {
        Err(RpcError::new(
            jsonrpc::HEADER_MISMATCH,
            format!("the {what} header does not match the request body"),
        ))
    };
    if header(headers, VERSION_HEADER) != Some(version.as_str()) {
        return mismatch("MCP-Protocol-Version");
    }
    if header(headers, METHOD_HEADER) != Some(method) {
        return mismatch("Mcp-Method");
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(body_name) = name_key.and_then(|k| params.get(k)).and_then(Value::as_str) {
        if header(headers, NAME_HEADER) != Some(body_name) {
            return mismatch("Mcp-Name");
        }
    }
    Ok(version)
}

/// `GET /mcp`: this server offers no server-to-client stream.
pub async fn get(State(h): State<McpHttp>, headers: HeaderMap) -> Response {
    if let Err(r) = admit(&h, &headers).await {
        return r;
    }
    let mut r = rpc_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &Value::Null,
        &RpcError::new(
            jsonrpc::INVALID_REQUEST,
            "this server sends no messages of its own: there is no GET stream",
        ),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    r
}

/// `DELETE /mcp`: ends the session named by `Mcp-Session-Id`.
#[utoipa::path(
    delete,
    path = "/mcp",
    tag = "mcp",
    operation_id = "mcp_delete",
    params(("Mcp-Session-Id" = String, Header, description = "The session initialize opened")),
    responses((status = 204, description = "Session ended"), (status = 404, description = "No such session")),
    security(("bearer" = [])),
)]
pub async fn delete(State(h): State<McpHttp>, headers: HeaderMap) -> Response {
    let caller = match admit(&h, &headers).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(sid) = header(&headers, SESSION_HEADER) else {
        return rpc_response(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            &RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "DELETE /mcp needs the Mcp-Session-Id header",
            ),
        );
    };
    if h.sessions.close(sid, &caller.label()) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        rpc_response(
            StatusCode::NOT_FOUND,
            &Value::Null,
            &RpcError::new(jsonrpc::SESSION_NOT_FOUND, "session not found"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(origin: &str, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ORIGIN, origin.parse().unwrap());
        h.insert(header::HOST, host.parse().unwrap());
        h
    }

    #[test]
    fn origins_of_loopback_or_the_server_itself_only() {
        assert!(origin_allowed(&HeaderMap::new()));
        assert!(origin_allowed(&with(
            "http://localhost:3000",
            "10.0.0.2:8000"
        )));
        assert!(origin_allowed(&with("http://[::1]:9", "10.0.0.2:8000")));
        assert!(origin_allowed(&with("https://kb.lan:8000", "kb.lan:8000")));
        assert!(!origin_allowed(&with(
            "https://evil.example",
            "127.0.0.1:8000"
        )));
        assert!(!origin_allowed(&with("null", "127.0.0.1:8000")));
        assert!(!origin_allowed(&with(
            "http://127.0.0.1.evil.example",
            "127.0.0.1:8000"
        )));
    }
}
