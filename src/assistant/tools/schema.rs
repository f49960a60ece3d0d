//! JSON schemas of tool parameters, generated from the params types: [`JsonType`] (the
//! schema of a Rust type), the [`tool_params!`] macro (a params struct and its
//! [`ToolParams`] schema from one declaration), and a validator of exactly the subset
//! they emit (`type`, `properties`, `required`, `additionalProperties: false`, `enum`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, `items`,
//! `minProperties`). The schema a client reads from `get_available_tools` is the one
//! params are checked against.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Parameters of one tool: deserialised (with serde defaults) after validation against
/// [`schema`](ToolParams::schema). Implemented by [`tool_params!`].
pub trait ToolParams: DeserializeOwned {
    /// The JSON schema (an `object`) of the parameters.
    fn schema() -> Value;
}

/// A Rust type a tool parameter can have, with its JSON schema.
pub trait JsonType: Sized {
    /// The schema of a value (`type`, and `items` for arrays); no `type` means any value.
    fn json_schema() -> Map<String, Value>;
    /// Whether the parameter may be left out without a default (`Option`).
    const OPTIONAL: bool = false;
    /// The value of a parameter left out that has no default: `Some(None)` for `Option`,
    /// `None` (a missing field) for the rest.
    fn absent() -> Option<Self> {
        None
    }
}

fn typed(t: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!(t));
    m
}

macro_rules! json_types {
    ($t:literal: $($ty:ty),+) => {$(
        impl JsonType for $ty {
            fn json_schema() -> Map<String, Value> {
                typed($t)
            }
        }
    )+};
}

json_types!("string": String);
json_types!("boolean": bool);
json_types!("integer": i8, i16, i32, i64, u8, u16, u32, u64, usize);
json_types!("number": f32, f64);
json_types!("object": Map<String, Value>);

impl JsonType for Value {
    fn json_schema() -> Map<String, Value> {
        Map::new()
    }
}

impl<T: JsonType> JsonType for Vec<T> {
    fn json_schema() -> Map<String, Value> {
        let mut m = typed("array");
        m.insert("items".into(), Value::Object(T::json_schema()));
        m
    }
}

impl<T: JsonType> JsonType for Option<T> {
    fn json_schema() -> Map<String, Value> {
        T::json_schema()
    }
    const OPTIONAL: bool = true;
    fn absent() -> Option<Self> {
        Some(None)
    }
}

/// Builder of one property's schema.
#[derive(Debug, Clone)]
pub struct Prop(Map<String, Value>);

impl Prop {
    /// The schema of `T`, described by `doc` (the lines of a doc comment, joined).
    pub fn of<T: JsonType>(doc: &[&str]) -> Self {
        let mut m = T::json_schema();
        let lines: Vec<&str> = doc
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect();
        m.insert("description".into(), json!(lines.join(" ")));
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
    /// `maxLength`, `maximum`, `maxItems` or `maxProperties`.
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
    pub fn default<T: Serialize>(self, v: T) -> Self {
        // Invariant: the defaults are plain numbers, strings and booleans.
        let v = serde_json::to_value(v).expect("a parameter default serialises");
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

/// Whether a parameter of type `T` is `required`: not an `Option`, and no default.
#[doc(hidden)]
pub fn is_required<T: JsonType>(has_default: bool) -> bool {
    !T::OPTIONAL && !has_default
}

/// The value of a parameter left out that has no default (see [`JsonType::absent`]).
#[doc(hidden)]
pub fn absent<T: JsonType, E: serde::de::Error>(name: &'static str) -> Result<T, E> {
    T::absent().ok_or_else(|| E::missing_field(name))
}

/// Declares tool params structs and generates their [`ToolParams`] schemas, so a
/// struct and its schema cannot drift:
///
/// ```ignore
/// tool_params! {
///     /// `search_knowledge_base`.
///     pub struct SearchKb {
///         /// What to search for
///         pub query: String => [min 1, max 1000],
///         /// Results to return
///         pub top_k: usize = 5 => [min 1, max 50],
///     }
/// }
/// ```
///
/// Each field needs a doc comment (its `description`), and may have, in this order:
/// `#[serde(rename = "name")]` (the parameter's name), `= expr` (its default, applied by
/// serde and shown as `default`) and `=> [..]`, options among `min n` / `max n` (`i64`;
/// `minLength`, `minimum`, `minItems` or `minProperties` by type, likewise for max),
/// `enum &[..]` (allowed strings) and `default v` (documents the default of an `Option`
/// the tool fills in itself). The type ([`JsonType`]) gives `type`; a field is
/// `required` unless it is an `Option` or has a default. Deserialising rejects unknown
/// keys (as the schema's `additionalProperties: false` does) and reads `null` as absent
/// (as the validator does).
macro_rules! tool_params {
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $rename:literal) => { $rename };
    (@has_default) => { false };
    (@has_default $default:expr) => { true };
    (@take $E:ty, $ty:ty, $v:expr, $name:expr) => {
        match $v {
            Some(v) => v,
            None => $crate::assistant::tools::schema::absent::<$ty, $E>($name)?,
        }
    };
    (@take $E:ty, $ty:ty, $v:expr, $name:expr, $default:expr) => {
        match $v {
            Some(v) => v,
            None => $default,
        }
    };
    (@opt $p:ident, min $v:expr) => { $p.min($v) };
    (@opt $p:ident, max $v:expr) => { $p.max($v) };
    (@opt $p:ident, enum $v:expr) => { $p.one_of($v) };
    (@opt $p:ident, default $v:expr) => { $p.default($v) };
    (@opt $p:ident, $key:ident $v:expr) => {
        compile_error!(concat!(
            "tool_params!: unknown option `", stringify!($key), "` (min, max, enum, default)"
        ))
    };
    ($(
        $(#[doc = $sdoc:literal])*
        $svis:vis struct $name:ident {
            $(
                $(#[doc = $fdoc:literal])+
                $(#[serde(rename = $rename:literal)])?
                $fvis:vis $field:ident : $ty:ty
                $(= $default:expr)?
                $(=> [$($key:ident $val:expr),* $(,)?])?
            ),* $(,)?
        }
    )*) => {$(
        $(#[doc = $sdoc])*
        #[derive(Debug)]
        $svis struct $name {
            $(
                $(#[doc = $fdoc])+
                $fvis $field: $ty,
            )*
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::std::result::Result<Self, D::Error> {
                // Every field optional here; what an absent one becomes is decided below.
                #[derive(::serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Raw {
                    $(
                        $(#[serde(rename = $rename)])?
                        #[serde(default)]
                        $field: ::std::option::Option<$ty>,
                    )*
                }
                #[allow(unused_variables)]
                let raw = <Raw as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok($name {
                    $(
                        $field: $crate::assistant::tools::schema::tool_params!(
                            @take D::Error, $ty, raw.$field,
                            $crate::assistant::tools::schema::tool_params!(@name $field $($rename)?)
                            $(, $default)?
                        ),
                    )*
                })
            }
        }

        impl $crate::assistant::tools::schema::ToolParams for $name {
            fn schema() -> ::serde_json::Value {
                #[allow(unused_imports)] // by a struct without fields
                use $crate::assistant::tools::schema::{is_required, object, tool_params, Prop};
                object(vec![$({
                    #[allow(unused_mut)]
                    let mut p = Prop::of::<$ty>(&[$($fdoc),+]);
                    $($( p = tool_params!(@opt p, $key $val); )*)?
                    $( p = p.default::<$ty>($default); )?
                    (
                        tool_params!(@name $field $($rename)?),
                        p,
                        is_required::<$ty>(tool_params!(@has_default $($default)?)),
                    )
                }),*])
            }
        }
    )*};
}
pub(crate) use tool_params;

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
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 10},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "where": {"type": "object", "minProperties": 1},
                "urls": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2},
            },
            "required": ["query"],
            "additionalProperties": false,
        })
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

    tool_params! {
        /// Only for the test.
        struct Sample {
            /// A name,
            /// on two lines
            name: String => [min 1],
            /// Tags
            tags: Vec<String> => [max 3],
            /// A note
            note: Option<String> => [enum &["a", "b"]],
            /// How many
            count: u32 = 3 => [max 9],
            /// A ratio
            ratio: Option<f64>,
            /// Anything
            anything: Value,
            /// Extra keys
            #[serde(rename = "where")]
            extra: Map<String, Value> = Map::new(),
        }
    }

    #[test]
    fn schemas_are_generated_from_the_field_types() {
        assert_eq!(
            Sample::schema(),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "A name, on two lines", "minLength": 1},
                    "tags": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Tags",
                        "maxItems": 3,
                    },
                    "note": {"type": "string", "description": "A note", "enum": ["a", "b"]},
                    "count": {"type": "integer", "description": "How many", "maximum": 9, "default": 3},
                    "ratio": {"type": "number", "description": "A ratio"},
                    "anything": {"description": "Anything"},
                    "where": {"type": "object", "description": "Extra keys", "default": {}},
                },
                "required": ["name", "tags", "anything"],
                "additionalProperties": false,
            })
        );
        validate(
            &Sample::schema(),
            &json!({"name": "n", "tags": [], "anything": 1}),
            "p",
        )
        .unwrap();
    }

    #[test]
    fn generated_params_deserialise_as_the_schema_says() {
        let p: Sample = serde_json::from_value(json!({
            "name": "n", "tags": ["x"], "anything": [1], "ratio": null, "where": {"k": 1},
        }))
        .unwrap();
        assert_eq!(
            (p.name.as_str(), p.tags, p.count),
            ("n", vec!["x".to_owned()], 3)
        );
        assert_eq!((p.note, p.ratio, p.anything), (None, None, json!([1])));
        assert_eq!(p.extra["k"], 1);
        let p: Sample =
            serde_json::from_value(json!({"name": "n", "tags": [], "anything": 0, "count": null}))
                .unwrap();
        assert_eq!((p.count, p.extra.len()), (3, 0));
        let err = |v: Value| serde_json::from_value::<Sample>(v).unwrap_err().to_string();
        assert!(err(json!({"name": "n", "anything": 0})).contains("missing field `tags`"));
        assert!(
            err(json!({"name": "n", "tags": [], "anything": 0, "x": 1})).contains("unknown field")
        );
        assert!(err(json!({"name": 1, "tags": [], "anything": 0})).contains("invalid type"));
    }
}
