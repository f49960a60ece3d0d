//! Constraints in GBNF, llama.cpp's grammar format, for inference servers that cannot run
//! ragd's token filters: the tool-call grammar of [`tool_grammar`](super::tool_grammar)
//! written as rules, so a remote llama.cpp server lets the model write only the calls
//! ragd's own engine would let it write.
//!
//! The JSON follows the local grammar's canonical form (one space after `:` and `,`,
//! properties in schema order, optional ones may be left out, strings without escapes
//! and not empty unless an enum allows it). One difference: in `Auto` mode the free
//! text before a call may not contain `<` (GBNF has no "any text but this word").

use super::tool_grammar::{CallMode, Shape, CLOSE, OPEN};

const MAX_STRING: usize = 512;
const MAX_ITEMS: usize = 16;

/// Writes rules; `root` is the first.
struct Writer {
    rules: Vec<String>,
    any: bool,
}

/// A GBNF string literal for `text`.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Writer {
    fn rule(&mut self, body: String) -> String {
        let name = format!("r{}", self.rules.len());
        self.rules.push(format!("{name} ::= {body}"));
        name
    }

    fn string(max: usize, allow_empty: bool) -> String {
        let min = usize::from(!allow_empty);
        format!("\"\\\"\" [^\"\\\\\\x00-\\x1F]{{{min},{max}}} \"\\\"\"")
    }

    fn shape(&mut self, shape: &Shape) -> String {
        match shape {
            Shape::Str(Some(values), _) => {
                let alts: Vec<String> = values
                    .iter()
                    .map(|v| literal(&format!("\"{v}\"")))
                    .collect();
                format!("( {} )", alts.join(" | "))
            }
            Shape::Str(None, max) => Self::string((*max).min(MAX_STRING), false),
            Shape::Integer => "\"-\"? [0-9]{1,15}".into(),
            Shape::Number => "\"-\"? [0-9]{1,15} ( \".\" [0-9]{1,8} )?".into(),
            Shape::Boolean => "( \"true\" | \"false\" )".into(),
            Shape::Array(item) => {
                let item = self.shape(item);
                let item = self.rule(item);
                self.rule(format!(
                    "\"[\" ( {item} ( \", \" {item} ){{0,{}}} )? \"]\"",
                    MAX_ITEMS - 1
                ))
            }
            Shape::Object(props) => self.object(props),
            Shape::Any => {
                self.any = true;
                "value".into()
            }
        }
    }

    /// Properties in order: required ones always, optional ones maybe, with ", " only
    /// between two that are written. `tail(k, first)` is the rest from property `k`.
    fn object(&mut self, props: &[(String, Shape, bool)]) -> String {
        if props.is_empty() {
            self.any = true;
            return "object".into();
        }
        let values: Vec<String> = props
            .iter()
            .map(|(name, shape, _)| {
                let v = self.shape(shape);
                format!("{} {v}", literal(&format!("\"{name}\": ")))
            })
            .collect();
        // Built from the end: tails[k] = (first-written form, after-a-property form).
        let mut next: (String, String) = ("\"\"".into(), "\"\"".into());
        for (k, (_, _, required)) in props.iter().enumerate().rev() {
            let v = &values[k];
            let (next_first, next_after) = next.clone();
            let first = if *required {
                format!("{v} {next_after}")
            } else {
                format!("( {v} {next_after} | {next_first} )")
            };
            let after = if *required {
                format!("\", \" {v} {next_after}")
            } else {
                format!("( \", \" {v} {next_after} | {next_after} )")
            };
            next = (self.rule(first), self.rule(after));
        }
        self.rule(format!("\"{{\" {} \"}}\"", next.0))
    }

    fn finish(mut self, root: String) -> String {
        let mut out = format!("root ::= {root}\n");
        if self.any {
            let string = Self::string(MAX_STRING, true);
            self.rules.push(format!(
                "value ::= object | array | {string} | \"-\"? [0-9]{{1,15}} ( \".\" [0-9]{{1,8}} )? | \"true\" | \"false\" | \"null\""
            ));
            self.rules.push(format!(
                "object ::= \"{{\" ( {string} \": \" value ( \", \" {string} \": \" value ){{0,{}}} )? \"}}\"",
                MAX_ITEMS - 1
            ));
            self.rules.push(format!(
                "array ::= \"[\" ( value ( \", \" value ){{0,{}}} )? \"]\"",
                MAX_ITEMS - 1
            ));
        }
        for r in &self.rules {
            out.push_str(r);
            out.push('\n');
        }
        out
    }
}

/// The grammar of one tool call among `tools` (name, shape of its arguments), wrapped in
/// `<tool_call>` tags; in `Auto` mode free text may come first, and the call is optional.
pub fn tool_calls(tools: &[(String, Shape)], mode: CallMode) -> String {
    let mut w = Writer {
        rules: Vec::new(),
        any: false,
    };
    let alts: Vec<String> = tools
        .iter()
        .map(|(name, shape)| {
            let args = w.shape(shape);
            format!(
                "{} {args}",
                literal(&format!("\"{name}\", \"arguments\": "))
            )
        })
        .collect();
    let call = w.rule(format!(
        "{} ( {} ) \"}}\"",
        literal("{\"name\": "),
        alts.join(" | ")
    ));
    let wrapped = format!("{} {call} {}", literal(OPEN), literal(CLOSE));
    let root = match mode {
        CallMode::Required => wrapped,
        CallMode::Auto => format!("[^<]* ( {wrapped} )?"),
    };
    w.finish(root)
}

/// At most `max` ASCII digits, at least one.
pub fn digits(max: usize) -> String {
    format!("root ::= [0-9]{{1,{}}}\n", max.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals_escape_quotes_and_controls() {
        assert_eq!(literal("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    }

    #[test]
    fn a_tool_grammar_names_every_tool_and_property() {
        let schema = json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "top_k": {"type": "integer"},
            "mode": {"enum": ["a", "b"]}
        }, "required": ["query"]});
        let shape = Shape::from_schema(&schema);
        let g = tool_calls(&[("search".into(), shape)], CallMode::Required);
        assert!(g.starts_with("root ::= \"<tool_call>\" r"), "{g}");
        for needle in [
            "\\\"search\\\", \\\"arguments\\\": ",
            "\\\"query\\\": ",
            "\\\"top_k\\\": ",
            "( \"\\\"a\\\"\" | \"\\\"b\\\"\" )",
            "\"</tool_call>\"",
        ] {
            assert!(g.contains(needle), "{needle} missing from\n{g}");
        }
        // Every rule used is defined.
        let defined: Vec<&str> = g.lines().filter_map(|l| l.split(" ::= ").next()).collect();
        for word in g.split(|c: char| !c.is_ascii_alphanumeric()) {
            if word.len() > 1
                && word.starts_with('r')
                && word[1..].bytes().all(|b| b.is_ascii_digit())
            {
                assert!(defined.contains(&word), "{word} used but not defined");
            }
        }
        let auto = tool_calls(&[("search".into(), Shape::Any)], CallMode::Auto);
        assert!(auto.starts_with("root ::= [^<]* ("));
        assert!(auto.contains("value ::= object | array"));
    }
}
