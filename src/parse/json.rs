//! JSON: objects become `key: value` lines under headings for nested objects; arrays
//! of flat objects become tables.

use serde_json::{Map, Value};

use super::{text, Block, BlockKind, ParseError, ParsedDocument, Table};

/// Nesting deeper than this is flattened into `a.b.c: value` lines.
const MAX_HEADING_DEPTH: u8 = 4;

/// Parses a JSON document.
pub fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let text = text::decode(bytes)?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| ParseError::Invalid(format!("JSON: {e}")))?;
    let mut blocks = Vec::new();
    emit(&value, "", 1, &mut blocks);
    let title = match &value {
        Value::Object(m) => ["title", "name"]
            .iter()
            .find_map(|k| m.get(*k)?.as_str().map(str::to_owned)),
        _ => None,
    };
    Ok(ParsedDocument {
        title,
        author: None,
        pages: 1,
        blocks,
    })
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn emit(v: &Value, path: &str, depth: u8, out: &mut Vec<Block>) {
    match v {
        Value::Object(m) => object(m, path, depth, out),
        Value::Array(items) => {
            if let Some(t) = as_table(items) {
                out.push(Block {
                    text: t.to_text(),
                    kind: BlockKind::Table(t),
                    page: 1,
                });
                return;
            }
            for (i, item) in items.iter().enumerate() {
                match scalar(item) {
                    Some(s) => out.push(Block {
                        kind: BlockKind::ListItem,
                        text: s,
                        page: 1,
                    }),
                    None => emit(item, &format!("{path}[{i}]"), depth, out),
                }
            }
        }
        other => {
            if let Some(s) = scalar(other) {
                out.push(Block {
                    kind: BlockKind::Paragraph,
                    text: s,
                    page: 1,
                });
            }
        }
    }
}

fn object(m: &Map<String, Value>, path: &str, depth: u8, out: &mut Vec<Block>) {
    let mut lines = Vec::new();
    for (k, v) in m {
        if let Some(s) = scalar(v) {
            lines.push(format!("{k}: {s}"));
        }
    }
    if !lines.is_empty() {
        out.push(Block {
            kind: BlockKind::Paragraph,
            text: lines.join("\n"),
            page: 1,
        });
    }
    for (k, v) in m.iter().filter(|(_, v)| scalar(v).is_none()) {
        let sub = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        if depth <= MAX_HEADING_DEPTH {
            out.push(Block {
                kind: BlockKind::Heading(depth.min(6)),
                text: sub.clone(),
                page: 1,
            });
        }
        emit(v, &sub, depth + 1, out);
    }
}

/// An array of objects whose values are all scalars, as a table of their keys.
fn as_table(items: &[Value]) -> Option<Table> {
    if items.len() < 2 {
        return None;
    }
    let mut keys: Vec<String> = Vec::new();
    for it in items {
        let m = it.as_object()?;
        for (k, v) in m {
            scalar(v)?;
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let mut rows = vec![keys.clone()];
    for it in items {
        let m = it.as_object()?;
        rows.push(
            keys.iter()
                .map(|k| m.get(k).and_then(scalar).unwrap_or_default())
                .collect(),
        );
    }
    Some(Table { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_arrays_and_tables() {
        let d = parse(br#"{"title": "Inventory", "items": [{"sku": "A1", "qty": 3}, {"sku": "B2", "qty": 5}], "tags": ["x", "y"], "meta": {"owner": "ops"}}"#).unwrap();
        assert_eq!(d.title.as_deref(), Some("Inventory"));
        assert!(d.blocks[0].text.contains("title: Inventory"));
        let table = d.blocks.iter().find_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t.clone()),
            _ => None,
        });
        assert_eq!(
            table.unwrap().rows,
            vec![vec!["sku", "qty"], vec!["A1", "3"], vec!["B2", "5"]]
        );
        assert!(d.blocks.iter().any(|b| b.text == "owner: ops"));
        assert!(d
            .blocks
            .iter()
            .any(|b| b.kind == BlockKind::ListItem && b.text == "y"));
        assert!(matches!(parse(b"{\"a\": "), Err(ParseError::Invalid(_))));
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse(deep.as_bytes()).is_err());
    }
}
