//! `resources/list` and `resources/read`: the knowledge base's sources (one uploaded file
//! or scraped URL each) as resources `ragd://sources/<id>`, listed a page at a time with
//! an opaque cursor, read as the text of their chunks.

use base64::Engine as _;
use serde_json::{json, Value};

use super::jsonrpc::{RpcError, RESOURCE_NOT_FOUND};
use crate::error::Error;
use crate::kb::sources::SourceInfo;
use crate::state::AppState;

/// The URI prefix of a source.
pub const SOURCE_URI: &str = "ragd://sources/";
/// Sources per `resources/list` page.
const PAGE: u64 = 50;
const CURSOR_PREFIX: &str = "after:";

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
}

fn encode_cursor(after: &str) -> String {
    b64().encode(format!("{CURSOR_PREFIX}{after}"))
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let raw = b64().decode(cursor.trim()).ok()?;
    String::from_utf8(raw)
        .ok()?
        .strip_prefix(CURSOR_PREFIX)
        .map(str::to_owned)
}

/// What a source reads as: the text ragd extracted (PDF, Office, HTML ... all become
/// plain text).
const MIME: &str = "text/plain";

fn entry(info: &SourceInfo) -> Value {
    let title = if info.title.trim().is_empty() {
        info.source.clone()
    } else {
        info.title.clone()
    };
    json!({
        "uri": format!("{SOURCE_URI}{}", info.id),
        "name": info.source,
        "title": title,
        "description": format!(
            "{} ({}), {} chunk(s), stored {}",
            info.source, if info.file_type.is_empty() { &info.source_type } else { &info.file_type },
            info.chunk_count, info.updated_at
        ),
        "mimeType": MIME,
    })
}

fn kb_error(e: Error) -> RpcError {
    match e {
        Error::NotFound(m) => RpcError::new(RESOURCE_NOT_FOUND, m),
        Error::BadRequest(m) => RpcError::params(m),
        other => RpcError::internal(other),
    }
}

/// `resources/list`.
pub async fn list(state: &AppState, params: &Value) -> Result<Value, RpcError> {
    let after =
        match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(decode_cursor(c).ok_or_else(|| {
                RpcError::params("invalid cursor; pass nextCursor back as it came")
            })?),
            Some(_) => return Err(RpcError::params("params.cursor must be a string")),
        };
    let page = state.kb.source_page(after, PAGE).await.map_err(kb_error)?;
    let mut out = json!({"resources": page.sources.iter().map(entry).collect::<Vec<_>>()});
    if let Some(next) = page.next_after {
        out["nextCursor"] = json!(encode_cursor(&next));
    }
    Ok(out)
}

/// `resources/read`.
pub async fn read(state: &AppState, params: &Value) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params("resources/read needs params.uri, a string"))?;
    let Some(id) = uri.strip_prefix(SOURCE_URI).filter(|id| !id.is_empty()) else {
        return Err(RpcError {
            code: RESOURCE_NOT_FOUND,
            message: format!("resource not found: '{uri}' (sources are {SOURCE_URI}<id>; resources/list lists them)"),
            data: Some(json!({"uri": uri})),
        });
    };
    let source = state
        .kb
        .source_text(id.to_owned())
        .await
        .map_err(kb_error)?;
    Ok(json!({"contents": [{
        "uri": uri,
        "mimeType": MIME,
        "text": source.text,
    }]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(
            decode_cursor(&encode_cursor("abc-1")).as_deref(),
            Some("abc-1")
        );
        assert_eq!(decode_cursor("!!"), None);
        assert_eq!(decode_cursor(&b64().encode("other")), None);
    }
}
