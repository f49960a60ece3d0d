//! Metadata filters (`where` of `/documents/delete/by-filter` and of the assistant's
//! delete tool): one parser, one set of rules. A filter maps metadata keys to a value,
//! `{"$in": [..]}` or `{"$ne": v}`; keys are AND-ed; an empty filter is refused, since
//! it never means "everything".

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::store::chunks::MetaCond;

/// A checked metadata filter, ready for the store.
#[derive(Debug, Clone)]
pub struct MetadataFilter(pub(crate) Vec<MetaCond>);

impl MetadataFilter {
    /// Checks `filter`; `label` names it in error messages (`where`, `params.where`).
    pub fn parse(filter: &Map<String, Value>, label: &str) -> Result<Self> {
        if filter.is_empty() {
            return Err(Error::bad_request(format!(
                "'{label}' must name at least one metadata key; it never means 'delete all'"
            )));
        }
        let bad = |m: String| Error::bad_request(m);
        let scalar = |k: &str, v: &Value| match v {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(v.clone()),
            _ => Err(bad(format!(
                "{label}.{k}: expected a string, number or boolean"
            ))),
        };
        filter
            .iter()
            .map(|(k, v)| {
                if k.is_empty()
                    || k.len() > 64
                    || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(bad(format!("{label}: '{k}' is not a metadata key")));
                }
                match v {
                    Value::Object(op) if op.len() == 1 && op.contains_key("$in") => {
                        match &op["$in"] {
                            Value::Array(items) => Ok(MetaCond::In(
                                k.clone(),
                                items.iter().map(|i| scalar(k, i)).collect::<Result<_>>()?,
                            )),
                            _ => Err(bad(format!("{label}.{k}.$in must be an array"))),
                        }
                    }
                    Value::Object(op) if op.len() == 1 && op.contains_key("$ne") => {
                        Ok(MetaCond::Ne(k.clone(), scalar(k, &op["$ne"])?))
                    }
                    Value::Object(_) => Err(bad(format!("{label}.{k}: operators are $in and $ne"))),
                    other => Ok(MetaCond::Eq(k.clone(), scalar(k, other)?)),
                }
            })
            .collect::<Result<Vec<_>>>()
            .map(Self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn filters_follow_one_set_of_rules() {
        let f = |v: Value| MetadataFilter::parse(v.as_object().unwrap(), "where");
        let ok = f(json!({"source": "a", "x": {"$in": [1]}, "y": {"$ne": true}})).unwrap();
        assert_eq!(ok.0.len(), 3);
        for bad in [
            json!({}),
            json!({"a.b": 1}),
            json!({"a": {"$gt": 1}}),
            json!({"a": [1]}),
            json!({"a": {"$in": 1}}),
            json!({"a": {"$ne": [1]}}),
        ] {
            let e = f(bad.clone()).expect_err(&bad.to_string());
            assert!(
                matches!(e, Error::BadRequest(ref m) if m.contains("where")),
                "{e}"
            );
        }
    }
}
