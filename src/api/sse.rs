//! Server-sent events in the shape of DECISIONS.md: every message is `event: <kind>`
//! plus `data: <json>`, the JSON also carrying `"event": "<kind>"`. Streams keep alive
//! and stop producing when the client goes away (the receiver is dropped).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Map, Value};

/// One event: its kind and JSON payload (an object; other values are wrapped).
pub fn event(kind: &str, payload: Value) -> Event {
    let mut obj = match payload {
        Value::Object(m) => m,
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    obj.insert("event".into(), Value::String(kind.to_owned()));
    Event::default()
        .event(kind)
        .data(Value::Object(obj).to_string())
}

/// Wraps a stream of events as an SSE response with keep-alive comments.
pub fn respond<S>(stream: S) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
