//! JSON-RPC 2.0 as MCP uses it: reading one message (request, notification or a client's
//! response), the error codes, and writing results and errors.

use serde_json::{json, Map, Value};

/// Invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid JSON-RPC message (or a batch, which MCP no longer allows).
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Params of the wrong shape, an unknown tool, a bad cursor.
pub const INVALID_PARAMS: i64 = -32602;
/// Failed inside the server (details logged).
pub const INTERNAL_ERROR: i64 = -32603;
/// An unknown or expired session (`Mcp-Session-Id`), or one of another caller.
pub const SESSION_NOT_FOUND: i64 = -32001;
/// A refused credential (the HTTP status says 401 too).
pub const UNAUTHORIZED: i64 = -32001;
/// A resource URI that names nothing.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// 2026-07-28: the routing headers disagree with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: a protocol version this server does not speak.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32602` with `message`.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// `-32603`, the detail logged and not sent.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "MCP request failed");
        Self::new(INTERNAL_ERROR, "internal error; see the server log")
    }

    fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

/// One incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: an answer is due.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification: no answer.
    Notification { method: String, params: Value },
    /// A response or error from the client (to a request this server never sends).
    Response,
}

impl Incoming {
    /// The method, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request { method, .. } | Self::Notification { method, .. } => Some(method),
            Self::Response => None,
        }
    }
}

/// A message refused before it could be answered: the id to answer (the message's when
/// it could be read, else `null`) and why.
pub type Rejected = Box<(Value, RpcError)>;

/// Reads one message from its text: `-32700` for bad JSON, `-32600` for anything else
/// that is not one JSON-RPC 2.0 message (a batch array included). On error, the id is
/// the message's when it could be read.
pub fn parse(body: &[u8]) -> Result<Incoming, Rejected> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(PARSE_ERROR, format!("parse error: {e}")),
        )
    })?;
    from_value(value)
}

/// [`parse`] of an already decoded value.
pub fn from_value(value: Value) -> Result<Incoming, Rejected> {
    let invalid = |id: Value, m: &str| Err(Box::new((id, RpcError::new(INVALID_REQUEST, m))));
    let obj: Map<String, Value> = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return invalid(
                Value::Null,
                "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per request",
            )
        }
        _ => return invalid(Value::Null, "a JSON-RPC message must be an object"),
    };
    let id = obj.get("id").cloned();
    let reply_id = match &id {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(reply_id, "\"jsonrpc\" must be \"2.0\"");
    }
    let Some(method) = obj.get("method") else {
        if id.is_some() && (obj.contains_key("result") || obj.contains_key("error")) {
            return Ok(Incoming::Response);
        }
        return invalid(reply_id, "a request needs a \"method\"");
    };
    let Some(method) = method.as_str() else {
        return invalid(reply_id, "\"method\" must be a string");
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err(Box::new((
                reply_id,
                RpcError::params("\"params\" must be an object"),
            )));
        }
    };
    match id {
        None => Ok(Incoming::Notification {
            method: method.to_owned(),
            params,
        }),
        Some(Value::String(_) | Value::Number(_)) => Ok(Incoming::Request {
            id: reply_id,
            method: method.to_owned(),
            params,
        }),
        Some(_) => invalid(Value::Null, "\"id\" must be a string or a number"),
    }
}

/// The response to request `id`.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => error(id, &e),
    }
}

/// An error response to `id` (`null` when the request's id is unknown).
pub fn error(id: &Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_kind_and_refuses_the_rest() {
        let r = parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert!(matches!(r, Incoming::Request { ref method, .. } if method == "ping"));
        let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(n, Incoming::Notification { .. }));
        let resp = parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(resp, Incoming::Response);
        assert_eq!(parse(b"{nope").unwrap_err().1.code, PARSE_ERROR);
        assert_eq!(parse(b"[]").unwrap_err().1.code, INVALID_REQUEST);
        let (id, e) = *parse(br#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!((id, e.code), (json!(7), INVALID_PARAMS));
        let (_, e) = *parse(br#"{"jsonrpc":"1.0","id":7,"method":"x"}"#).unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
        let (_, e) = *parse(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
    }
}
