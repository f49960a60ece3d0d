//! JSON schemas of tool parameters: a small builder for the subset the tools use, and
//! a validator of exactly that subset (`type`, `properties`, `required`,
//! `additionalProperties: false`, `enum`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, `items`, `minProperties`). The schema a client reads from
//! `get_available_tools` is the one params are checked against.

use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

/// Parameters of one tool: deserialised (with serde defaults) after validation against
/// [`schema`](ToolParams::schema).
pub trait ToolParams: DeserializeOwned {
    /// The JSON schema (an `object`) of the parameters.
    fn schema() -> Value;
}

/// Builder of one property's schema.
#[derive(Debug, Clone)]
pub struct Prop(Map<String, Value>);

impl Prop {
    fn typed(t: &str, description: &str) -> Self {
        let mut m = Map::new();
        m.insert("type".into(), json!(t));
        m.insert("description".into(), json!(description));
        Self(m)
    }
    /// A string.
    pub fn string(description: &str) -> Self {
        Self::typed("string", description)
    }
    /// An integer.
    pub fn integer(description: &str) -> Self {
        Self::typed("integer", description)
    }
    /// A boolean.
    pub fn boolean(description: &str) -> Self {
        Self::typed("boolean", description)
    }
    /// An object with any keys.
    pub fn object(description: &str) -> Self {
        Self::typed("object", description)
    }
    /// An array of `items`.
    pub fn array(description: &str, items: Prop) -> Self {
        Self::typed("array", description).with("items", Value::Object(items.0))
    }
    /// Any JSON value.
    pub fn any(description: &str) -> Self {
        let mut m = Map::new();
        m.insert("description".into(), json!(description));
        Self(m)
    }
    fn with(mut self, k: &str, v: Value) -> Self {
        self.0.insert(k.into(), v);
        self
    }
    /// `minLength` (strings), `minimum` (numbers), `minItems` (arrays) or `minProperties` (objects).
    pub fn min(self, n: i64) -> Self {
        let k = self.bound_key(true);
        self.with(k, json!(n))
    }
    /// `maxLength`, `maximum` or `maxItems`.
    pub fn max(self, n: i64) -> Self {
        let k = self.bound_key(false);
        self.with(k, json!(n))
    }
    fn bound_key(&self, min: bool) -> &'static str {
        match (self.0.get("type").and_then(Value::as_str), min) {
            (Some("string"), true) => "minLength",
            (Some("string"), false) => "maxLength",
            (Some("array"), true) => "minItems",
            (Some("array"), false) => "maxItems",
            (Some("object"), true) => "minProperties",
            (Some("object"), false) => "maxProperties",
            (_, true) => "minimum",
            (_, false) => "maximum",
        }
    }
    /// Allowed values.
    pub fn one_of(self, values: &[&str]) -> Self {
        self.with("enum", json!(values))
    }
    /// The value used when the parameter is absent (documentation; serde applies it).
    pub fn default(self, v: Value) -> Self {
        self.with("default", v)
    }
}

/// An object schema of `props` (`(name, schema, required)`), no other keys allowed.
pub fn object(props: Vec<(&str, Prop, bool)>) -> Value {
    let required: Vec<&str> = props.iter().filter(|p| p.2).map(|p| p.0).collect();
    let properties: Map<String, Value> = props
        .into_iter()
        .map(|(n, p, _)| (n.to_owned(), Value::Object(p.0)))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn num(schema: &Value, k: &str) -> Option<f64> {
    schema.get(k).and_then(Value::as_f64)
}

/// Checks `value` against `schema`; the error names the offending field by its path
/// (e.g. `params.top_k`).
pub fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        if !type_ok(t, value) {
            let article = if t.starts_with(['a', 'e', 'i', 'o']) {
                "an"
            } else {
                "a"
            };
            return Err(format!(
                "{path} must be {article} {t}, got {}",
                describe(value)
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            let names: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            return Err(format!("{path} must be one of {}", names.join(", ")));
        }
    }
    match value {
        Value::String(s) => {
            let n = s.chars().count() as f64;
            if num(schema, "minLength").is_some_and(|m| n < m) {
                return Err(if n == 0.0 {
                    format!("{path} must not be empty")
                } else {
                    format!("{path} must be at least {} characters", schema["minLength"])
                });
            }
            if num(schema, "maxLength").is_some_and(|m| n > m) {
                return Err(format!(
                    "{path} must be at most {} characters",
                    schema["maxLength"]
                ));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if num(schema, "minimum").is_some_and(|m| x < m) {
                return Err(format!("{path} must be at least {}", schema["minimum"]));
            }
            if num(schema, "maximum").is_some_and(|m| x > m) {
                return Err(format!("{path} must be at most {}", schema["maximum"]));
            }
        }
        Value::Array(items) => {
            let n = items.len() as f64;
            if num(schema, "minItems").is_some_and(|m| n < m) {
                return Err(format!(
                    "{path} must have at least {} items",
                    schema["minItems"]
                ));
            }
            if num(schema, "maxItems").is_some_and(|m| n > m) {
                return Err(format!(
                    "{path} must have at most {} items",
                    schema["maxItems"]
                ));
            }
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    validate(item, v, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::Object(obj) => validate_object(schema, obj, path)?,
        _ => {}
    }
    Ok(())
}

fn validate_object(schema: &Value, obj: &Map<String, Value>, path: &str) -> Result<(), String> {
    let n = obj.len() as f64;
    if num(schema, "minProperties").is_some_and(|m| n < m) {
        return Err(format!(
            "{path} must have at least {} keys",
            schema["minProperties"]
        ));
    }
    if num(schema, "maxProperties").is_some_and(|m| n > m) {
        return Err(format!(
            "{path} must have at most {} keys",
            schema["maxProperties"]
        ));
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if obj.get(r).is_none_or(Value::is_null) {
            return Err(format!("{path}.{r} is required"));
        }
    }
    for (k, v) in obj {
        match props.and_then(|p| p.get(k)) {
            // An explicit null means "absent" for an optional parameter.
            Some(_) if v.is_null() => {}
            Some(s) => validate(s, v, &format!("{path}.{k}"))?,
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                let known: Vec<&String> = props.map(|p| p.keys().collect()).unwrap_or_default();
                return Err(if known.is_empty() {
                    format!("{path}.{k} is not a parameter of this tool (it takes none)")
                } else {
                    format!(
                        "{path}.{k} is not a parameter of this tool (known: {})",
                        known
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
            }
            None => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        object(vec![
            ("query", Prop::string("q").min(1).max(10), true),
            (
                "top_k",
                Prop::integer("k").min(1).max(50).default(json!(5)),
                false,
            ),
            ("mode", Prop::string("m").one_of(&["a", "b"]), false),
            ("where", Prop::object("w").min(1), false),
            (
                "urls",
                Prop::array("u", Prop::string("url").min(1)).max(2),
                false,
            ),
        ])
    }

    #[test]
    fn accepts_valid_params() {
        let ok = json!({"query": "hi", "top_k": 3, "mode": "a", "where": {"x": 1}, "urls": ["u"]});
        validate(&schema(), &ok, "params").unwrap();
        validate(&schema(), &json!({"query": "hi", "top_k": null}), "params").unwrap();
        validate(&schema(), &json!({"query": "hi", "top_k": 3.0}), "params").unwrap();
    }

    #[test]
    fn names_the_bad_field() {
        let s = schema();
        let err = |v: Value| validate(&s, &v, "params").unwrap_err();
        assert_eq!(err(json!({})), "params.query is required");
        assert_eq!(err(json!({"query": ""})), "params.query must not be empty");
        assert!(err(json!({"query": "x".repeat(11)})).contains("at most 10"));
        assert_eq!(
            err(json!({"query": 5})),
            "params.query must be a string, got a number"
        );
        assert_eq!(
            err(json!({"query": "a", "top_k": 0})),
            "params.top_k must be at least 1"
        );
        assert_eq!(
            err(json!({"query": "a", "top_k": 51})),
            "params.top_k must be at most 50"
        );
        assert!(err(json!({"query": "a", "top_k": 1.5})).contains("must be an integer"));
        assert!(err(json!({"query": "a", "mode": "c"})).contains("one of"));
        assert!(err(json!({"query": "a", "where": {}})).contains("at least 1 keys"));
        assert!(err(json!({"query": "a", "urls": ["", "x"]})).contains("params.urls[0]"));
        assert!(err(json!({"query": "a", "bogus": 1})).contains("not a parameter"));
        assert!(err(json!("text")).contains("must be an object"));
    }
}
