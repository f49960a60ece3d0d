//! Operation parameters read from the query string, a JSON body or a urlencoded form
//! body alike (as Frappe does); body values win over query values. Form and query values
//! arrive as strings, so the typed getters coerce (`"true"`, `"1"`, `"20"`, a JSON-encoded
//! object ...). Every failure is a 400 in the envelope naming the parameter.
//! Multipart bodies are not read here (the multimodal chat handles them itself).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use serde_json::{Map, Value};

use crate::assistant::AssistantError;

type Result<T, E = AssistantError> = std::result::Result<T, E>;

/// The merged parameters of one request.
#[derive(Debug, Default, Clone)]
pub struct Params(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = AssistantError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let mut map = Map::new();
        if let Some(q) = req.uri().query() {
            merge_pairs(&mut map, q.as_bytes(), "query string")?;
        }
        let ctype = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ctype.starts_with("multipart/") {
            return Ok(Self(map));
        }
        let body = Bytes::from_request(req, state).await.map_err(|e| {
            AssistantError::BadRequest(format!("could not read the request body: {e}"))
        })?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(map));
        }
        if ctype.starts_with("application/x-www-form-urlencoded") {
            merge_pairs(&mut map, &body, "form body")?;
        } else if ctype.is_empty()
            || ctype.starts_with("application/json")
            || ctype.contains("+json")
        {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(obj)) => map.extend(obj),
                Ok(_) => {
                    return Err(AssistantError::BadRequest(
                        "the JSON body must be an object".into(),
                    ))
                }
                Err(e) => return Err(AssistantError::BadRequest(format!("malformed JSON: {e}"))),
            }
        } else {
            return Err(AssistantError::BadRequest(format!(
                "unsupported content type '{ctype}': send JSON, a urlencoded form or query parameters"
            )));
        }
        Ok(Self(map))
    }
}

/// Adds `k=v` pairs; a repeated key (or `key[]`) becomes an array of strings.
fn merge_pairs(map: &mut Map<String, Value>, raw: &[u8], what: &str) -> Result<()> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(raw)
        .map_err(|e| AssistantError::BadRequest(format!("malformed {what}: {e}")))?;
    let mut local = Map::new();
    for (k, v) in pairs {
        let (key, listy) = match k.strip_suffix("[]") {
            Some(base) => (base.to_owned(), true),
            None => (k, false),
        };
        match local.get_mut(&key) {
            Some(Value::Array(items)) => items.push(Value::String(v)),
            Some(prev) => {
                let first = prev.take();
                *prev = Value::Array(vec![first, Value::String(v)]);
            }
            None if listy => {
                local.insert(key, Value::Array(vec![Value::String(v)]));
            }
            None => {
                local.insert(key, Value::String(v));
            }
        }
    }
    map.extend(local);
    Ok(())
}

fn bad(key: &str, what: &str) -> AssistantError {
    AssistantError::BadRequest(format!("parameter '{key}' {what}"))
}

impl Params {
    /// The raw value, as sent (form and query values are strings).
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// The value with JSON-encoded strings decoded: a string holding a JSON object or array
    /// (as forms and query strings carry them) becomes that object or array; any other
    /// value is returned as sent. For `answer: any` and the like.
    pub fn json(&self, key: &str) -> Option<Value> {
        let v = self.value(key)?;
        if let Value::String(s) = v {
            let t = s.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                if let Ok(parsed) = serde_json::from_str::<Value>(s) {
                    return Some(parsed);
                }
            }
        }
        Some(v.clone())
    }

    /// A string; numbers and booleans are rendered; absent, null or empty is `None`.
    pub fn str(&self, key: &str) -> Result<Option<String>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(bad(key, "must be a string")),
        }
    }

    /// A string that must be present and non-empty.
    pub fn required_str(&self, key: &str) -> Result<String> {
        self.str(key)?.ok_or_else(|| bad(key, "is required"))
    }

    /// A boolean: `true`/`false`, `"true"`/`"false"`, `"1"`/`"0"`, `"yes"`/`"no"`, `"on"`/`"off"`, 1/0.
    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        let v = match self.value(key) {
            None => return Ok(None),
            Some(v) => v,
        };
        match v {
            Value::Bool(b) => Ok(Some(*b)),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(Some(true)),
            Value::Number(n) if n.as_i64() == Some(0) => Ok(Some(false)),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "" => Ok(None),
                "true" | "1" | "yes" | "on" => Ok(Some(true)),
                "false" | "0" | "no" | "off" => Ok(Some(false)),
                _ => Err(bad(key, "must be a boolean (true or false)")),
            },
            _ => Err(bad(key, "must be a boolean (true or false)")),
        }
    }

    /// A boolean with a default.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        Ok(self.bool(key)?.unwrap_or(default))
    }

    /// A non-negative integer (a JSON number or a decimal string).
    pub fn u64(&self, key: &str) -> Result<Option<u64>> {
        let v = match self.value(key) {
            None => return Ok(None),
            Some(v) => v,
        };
        let parsed = match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) if s.trim().is_empty() => return Ok(None),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        parsed
            .map(Some)
            .ok_or_else(|| bad(key, "must be a non-negative integer"))
    }

    /// An integer in `lo..=hi`, `default` when absent.
    pub fn u64_in(&self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64> {
        let v = self.u64(key)?.unwrap_or(default);
        if v < lo || v > hi {
            return Err(bad(key, &format!("must be between {lo} and {hi}, got {v}")));
        }
        Ok(v)
    }

    /// A JSON object; a string is parsed as JSON first (forms and query strings).
    pub fn object(&self, key: &str) -> Result<Option<Map<String, Value>>> {
        match self.json(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(_) => Err(bad(key, "must be a JSON object")),
        }
    }

    /// A list of strings: a JSON array, a JSON-encoded array, repeated form keys, or a
    /// comma-separated string.
    pub fn str_list(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.json(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(bad(key, "must be a list of strings")),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(Value::String(s)) => Ok(Some(
                s.split(',')
                    .map(|p| p.trim().to_owned())
                    .filter(|p| !p.is_empty())
                    .collect(),
            )),
            Some(_) => Err(bad(key, "must be a list of strings")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Params {
        Params(v.as_object().unwrap().clone())
    }

    #[test]
    fn coerces_strings() {
        let p = params(json!({"a": "true", "b": "0", "n": "20", "o": "{\"x\":1}", "l": "a, b"}));
        assert_eq!(p.bool("a").unwrap(), Some(true));
        assert_eq!(p.bool("b").unwrap(), Some(false));
        assert_eq!(p.u64("n").unwrap(), Some(20));
        assert!(p.u64_in("n", 1, 1, 10).is_err());
        assert_eq!(p.object("o").unwrap().unwrap()["x"], 1);
        assert_eq!(p.str_list("l").unwrap().unwrap(), vec!["a", "b"]);
        assert!(p.required_str("missing").is_err());
        assert_eq!(p.str("n").unwrap().as_deref(), Some("20"));
    }

    #[test]
    fn repeated_keys_become_arrays() {
        let mut m = Map::new();
        merge_pairs(&mut m, b"m=a&m=b&x[]=1&y=2", "q").unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"m": ["a", "b"], "x": ["1"], "y": "2"})
        );
    }
}
