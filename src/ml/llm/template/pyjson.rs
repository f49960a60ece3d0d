//! `tojson` as Hugging Face's chat-template environment defines it: Python's
//! `json.dumps(x, ensure_ascii=False)` with its `", "` and `": "` separators, keys in
//! insertion order, no HTML escaping, and `indent=n` laid out as Python lays it out.
//! (minijinja's own `tojson` is compact and HTML-safe, so it renders other text.)

use minijinja::value::{Kwargs, Value};
use minijinja::Error;

/// The filter: `value | tojson` or `value | tojson(indent=4)`.
pub(super) fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let json = serde_json::to_value(value).map_err(|e| {
        Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("tojson: {e}"),
        )
    })?;
    let mut out = String::new();
    write(&json, indent, 0, &mut out);
    Ok(Value::from_safe_string(out))
}

/// An item of an array (no key) or an object.
type Entry<'a> = (Option<&'a String>, &'a serde_json::Value);

/// `value` as Python's `json.dumps` writes it, at nesting `level`.
pub(super) fn write(
    value: &serde_json::Value,
    indent: Option<usize>,
    level: usize,
    out: &mut String,
) {
    use serde_json::Value as J;
    let (open_close, items): ((char, char), Vec<Entry>) = match value {
        J::Array(a) => (('[', ']'), a.iter().map(|v| (None, v)).collect()),
        J::Object(o) => (('{', '}'), o.iter().map(|(k, v)| (Some(k), v)).collect()),
        // Strings, numbers, booleans and null are spelled the same by serde_json.
        scalar => {
            out.push_str(&scalar.to_string());
            return;
        }
    };
    out.push(open_close.0);
    if items.is_empty() {
        out.push(open_close.1);
        return;
    }
    for (i, (key, v)) in items.into_iter().enumerate() {
        match indent {
            Some(n) => {
                if i > 0 {
                    out.push(',');
                }
                out.push('\n');
                out.push_str(&" ".repeat(n * (level + 1)));
            }
            None if i > 0 => out.push_str(", "),
            None => {}
        }
        if let Some(k) = key {
            out.push_str(&serde_json::Value::String(k.clone()).to_string());
            out.push_str(": ");
        }
        write(v, indent, level + 1, out);
    }
    if let Some(n) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(n * level));
    }
    out.push(open_close.1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dumps(v: serde_json::Value, indent: Option<usize>) -> String {
        let mut out = String::new();
        write(&v, indent, 0, &mut out);
        out
    }

    #[test]
    fn spelled_as_python_dumps_it() {
        let v = json!({"b": [1, 2.5, "x\n\"<|im_start|>"], "a": {}, "c": [], "d": null});
        assert_eq!(
            dumps(v.clone(), None),
            r#"{"b": [1, 2.5, "x\n\"<|im_start|>"], "a": {}, "c": [], "d": null}"#
        );
        assert_eq!(
            dumps(json!({"k": [1, {"z": true}]}), Some(2)),
            "{\n  \"k\": [\n    1,\n    {\n      \"z\": true\n    }\n  ]\n}"
        );
    }
}
