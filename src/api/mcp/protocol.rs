//! The MCP methods, whatever carries them (streamable HTTP or stdio): version
//! negotiation, `initialize` and `server/discover`, `ping`, and the dispatch of the tool
//! and resource methods to [`tools`](super::tools) and [`resources`](super::resources).
//!
//! Two eras of the protocol are spoken. 2026-07-28 (the newest, what the `mcp` SDK 2.x
//! probes first) is stateless: each request carries its protocol version and the
//! client's capabilities in `params._meta`, and `server/discover` advertises the
//! server. The handshake revisions (2025-11-25 back to 2024-11-05) open with
//! `initialize`, which fixes the version for the session.

use serde_json::{json, Map, Value};

use super::jsonrpc::{RpcError, METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION};
use super::{resources, tools};
use crate::api::v1::caller::Caller;
use crate::state::AppState;

/// The stateless revision (per-request `_meta` envelope).
pub const MODERN_VERSION: &str = "2026-07-28";
/// The revisions reached through `initialize`, newest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// `_meta` key of a 2026-07-28 request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a 2026-07-28 request's client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the server's identity on a 2026-07-28 `server/discover` result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Every revision spoken, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION)
        .chain(HANDSHAKE_VERSIONS)
        .collect()
}

/// Whether `v` is the stateless revision.
pub fn is_modern(v: &str) -> bool {
    v == MODERN_VERSION
}

/// The handshake revision answered to `initialize` asking for `requested`: the same when
/// spoken, else the newest (the client then decides whether it can go on).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    HANDSHAKE_VERSIONS
        .into_iter()
        .find(|v| Some(*v) == requested)
        .unwrap_or(HANDSHAKE_VERSIONS[0])
}

/// The 2026-07-28 envelope of a request's params: `Ok(None)` when it has none (a
/// handshake-era request), the protocol version when it is complete and spoken,
/// `-32602` when incomplete, `-32022` (with the versions spoken) when not spoken.
pub fn envelope_version(params: &Value) -> Result<Option<String>, RpcError> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Ok(None);
    };
    let Some(version) = meta.get(META_PROTOCOL_VERSION) else {
        return Ok(None);
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::params(format!(
            "params._meta[\"{META_PROTOCOL_VERSION}\"] must be a string"
        )));
    };
    if !meta.contains_key(META_CLIENT_CAPABILITIES) {
        return Err(RpcError::params(format!(
            "params._meta is missing the required envelope key {META_CLIENT_CAPABILITIES}"
        )));
    }
    if !is_modern(version) {
        return Err(unsupported(version));
    }
    Ok(Some(version.to_owned()))
}

/// `-32022` for `requested`, naming the stateless versions spoken.
pub fn unsupported(requested: &str) -> RpcError {
    RpcError {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: format!("unsupported protocol version '{requested}'"),
        data: Some(json!({"supported": [MODERN_VERSION], "requested": requested})),
    }
}

/// Who calls and at which revision.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub caller: Caller,
    pub version: String,
}

impl Ctx {
    /// Whether the request is of the stateless revision.
    pub fn modern(&self) -> bool {
        is_modern(&self.version)
    }
}

/// The MCP server over the application's services. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    pub(super) state: AppState,
}

impl McpServer {
    /// A server over `state`.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    fn server_info() -> Value {
        json!({"name": "ragd", "title": "ragd knowledge base", "version": env!("CARGO_PKG_VERSION")})
    }

    fn capabilities() -> Value {
        json!({
            "tools": {"listChanged": false},
            "resources": {"listChanged": false, "subscribe": false},
        })
    }

    const INSTRUCTIONS: &'static str = "ragd is an offline knowledge base. search_knowledge_base finds passages; ask_knowledge_base answers with citations; the resources are the stored sources' texts. High-risk tools (deletions, settings) are never run by a call: they are held until a person confirms them in ragd.";

    /// The `initialize` result at `version`.
    pub fn initialize_result(version: &str) -> Value {
        json!({
            "protocolVersion": version,
            "capabilities": Self::capabilities(),
            "serverInfo": Self::server_info(),
            "instructions": Self::INSTRUCTIONS,
        })
    }

    /// The `server/discover` result.
    pub fn discover_result() -> Value {
        json!({
            "supportedVersions": supported_versions(),
            "capabilities": Self::capabilities(),
            "instructions": Self::INSTRUCTIONS,
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: Self::server_info()},
        })
    }

    /// Answers one request (not `initialize`, which the transport handles since it opens
    /// a session).
    #[tracing::instrument(skip_all, fields(method = %method, caller = %ctx.caller.label(), version = %ctx.version))]
    pub async fn call(&self, ctx: &Ctx, method: &str, params: Value) -> Result<Value, RpcError> {
        let started = std::time::Instant::now();
        let (result, cacheable) = match method {
            "ping" => (Ok(json!({})), false),
            "server/discover" => return Ok(Self::discover_result()),
            "initialize" => {
                return Err(RpcError::new(
                    super::jsonrpc::INVALID_REQUEST,
                    "initialize is sent once, to open a session",
                ))
            }
            "tools/list" => (tools::list(&self.state, ctx, &params), true),
            "tools/call" => (tools::call(&self.state, ctx, &params).await, false),
            "resources/list" => (resources::list(&self.state, &params).await, true),
            "resources/templates/list" => (Ok(json!({"resourceTemplates": []})), true),
            "resources/read" => (resources::read(&self.state, &params).await, false),
            other => {
                tracing::info!(method = other, "unknown MCP method");
                return Err(RpcError::new(
                    METHOD_NOT_FOUND,
                    format!("method '{other}' not found; this server offers ping, tools/list, tools/call, resources/list, resources/read"),
                ));
            }
        };
        tracing::info!(
            ok = result.is_ok(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "MCP request"
        );
        let mut result = result?;
        if ctx.modern() {
            if let Value::Object(o) = &mut result {
                stamp_modern(o, cacheable);
            }
        }
        Ok(result)
    }
}

/// The fields every 2026-07-28 result carries (older peers ignore them, but an empty
/// `ping` result stays `{}` for them).
fn stamp_modern(o: &mut Map<String, Value>, cacheable: bool) {
    o.entry("resultType").or_insert_with(|| json!("complete"));
    if cacheable {
        o.insert("ttlMs".into(), json!(0));
        o.insert("cacheScope".into(), json!("private"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_negotiate_down_and_the_envelope_is_checked() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2099-01-01")), HANDSHAKE_VERSIONS[0]);
        assert_eq!(negotiate(None), HANDSHAKE_VERSIONS[0]);
        assert_eq!(envelope_version(&json!({})).unwrap(), None);
        let ok =
            json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}});
        assert_eq!(
            envelope_version(&ok).unwrap().as_deref(),
            Some(MODERN_VERSION)
        );
        let missing = json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}});
        assert_eq!(envelope_version(&missing).unwrap_err().code, -32602);
        let old =
            json!({"_meta": {META_PROTOCOL_VERSION: "2030-01-01", META_CLIENT_CAPABILITIES: {}}});
        let e = envelope_version(&old).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.unwrap()["supported"], json!([MODERN_VERSION]));
    }
}
