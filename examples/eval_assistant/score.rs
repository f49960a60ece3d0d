//! How the evaluation judges answers, independently of the server's own checks: expected
//! patterns, refusals, citations, and whether a sentence is supported by the seeded
//! documents (its numbers appear in one document and most of its content words too).

use serde_json::Value;

/// Words that carry no claim.
const STOP: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "was",
    "were",
    "with",
    "you",
    "your",
    "can",
    "may",
    "must",
    "has",
    "have",
    "had",
    "from",
    "per",
    "that",
    "this",
    "these",
    "those",
    "their",
    "they",
    "our",
    "not",
    "all",
    "any",
    "each",
    "every",
    "also",
    "into",
    "about",
    "been",
    "being",
    "will",
    "would",
    "should",
    "could",
    "does",
    "did",
    "get",
    "gets",
    "got",
    "yes",
    "there",
    "which",
    "what",
    "when",
    "where",
    "who",
    "how",
    "its",
    "than",
    "then",
    "only",
    "such",
    "according",
    "sources",
    "source",
    "document",
    "documents",
    "knowledge",
    "base",
];

/// Phrases of an answer that says the sources do not hold it.
const REFUSALS: &[&str] = &[
    "do not say",
    "does not say",
    "don't say",
    "no answer",
    "not in the",
    "do not contain",
    "does not contain",
    "not mentioned",
    "don't know",
    "do not know",
    "no information",
    "لا تذكر",
    "لم أجد",
];

/// Lower-case, with Arabic alef forms and taa marbuta folded, as the patterns are written.
fn fold(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .map(|c| match c {
            'أ' | 'إ' | 'آ' => 'ا',
            'ة' => 'ه',
            'ى' => 'ي',
            '’' => '\'',
            _ => c,
        })
        .filter(|c| !('\u{064B}'..='\u{0652}').contains(c))
        .collect()
}

/// Whether `text` holds every pattern (each `a|b` is satisfied by any alternative).
pub fn holds_all(text: &str, patterns: &[String]) -> bool {
    let t = fold(text);
    patterns
        .iter()
        .all(|p| p.split('|').any(|alt| t.contains(&fold(alt))))
}

/// Whether `text` says that the sources do not hold the answer.
pub fn is_refusal(text: &str) -> bool {
    let t = fold(text);
    REFUSALS.iter().any(|r| t.contains(&fold(r)))
}

fn strip_citations(s: &str) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut cited = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        let inside = &rest[open + 1..open + close];
        if let Ok(n) = inside.trim().parse::<usize>() {
            cited.push(n);
            // "days [1]." reads "days."
            out.push_str(rest[..open].trim_end());
        } else {
            out.push_str(&rest[..open + close + 1]);
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    (out, cited)
}

fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if matches!(c, '.' | '!' | '?' | '؟' | '\n') {
            // "12.5" is not a sentence end.
            out.push(std::mem::take(&mut cur));
        }
    }
    out.push(cur);
    let mut merged: Vec<String> = Vec::new();
    for s in out {
        let starts_with_digit = s.chars().next().is_some_and(|c| c.is_ascii_digit());
        match merged.last_mut() {
            Some(prev) if starts_with_digit && prev.ends_with('.') => prev.push_str(&s),
            _ => merged.push(s),
        }
    }
    merged
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The sentences of `text` presented as facts: not refusals, with at least three words.
pub fn claims(text: &str) -> Vec<String> {
    sentences(text)
        .into_iter()
        .map(|s| strip_citations(&s).0.trim().to_owned())
        .filter(|s| !is_refusal(s) && s.split_whitespace().count() >= 3)
        .collect()
}

fn words(text: &str) -> Vec<String> {
    fold(text)
        .split(|c: char| !(c.is_alphanumeric() || c == ':' || c == '-'))
        .map(|w| w.trim_matches(|c| c == ':' || c == '-').to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether one document holds every number of `sentence` and at least 60% of its content
/// words (a word matches with or without a final `s`).
pub fn supported_by(sentence: &str, corpus: &[String]) -> bool {
    let ws = words(sentence);
    let numbers: Vec<&String> = ws
        .iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .collect();
    let content: Vec<&String> = ws
        .iter()
        .filter(|w| w.chars().count() >= 3 && !STOP.contains(&w.as_str()))
        .collect();
    corpus.iter().any(|doc| {
        let dw: std::collections::HashSet<String> = words(doc).into_iter().collect();
        let has = |w: &str| {
            dw.contains(w)
                || w.strip_suffix('s').is_some_and(|s| dw.contains(s))
                || dw.contains(&format!("{w}s"))
                || w.strip_prefix("ال").is_some_and(|s| dw.contains(s))
        };
        let nums_ok = numbers.iter().all(|n| has(n));
        let found = content.iter().filter(|w| has(w)).count();
        nums_ok && (content.is_empty() || found as f64 >= 0.6 * content.len() as f64)
    })
}

/// Whether a sentence of `text` holding the first expected pattern cites `expected`
/// (by its number in `sources`).
pub fn cites_source(text: &str, patterns: &[String], sources: &Value, expected: &str) -> bool {
    let Some(first) = patterns.first() else {
        return false;
    };
    sentences(text).iter().any(|s| {
        let (_, cited) = strip_citations(s);
        holds_all(s, std::slice::from_ref(first))
            && cited.iter().any(|&n| {
                n >= 1 && sources.get(n - 1).and_then(|x| x["source"].as_str()) == Some(expected)
            })
    })
}

/// Whether parameter `name` belongs to `tool` (a case may accept several tools).
pub fn argument_applies(tool: &str, name: &str) -> bool {
    match name {
        "source" => tool == "delete_source",
        "document_id" => matches!(tool, "get_document" | "delete_document"),
        _ => true,
    }
}

/// Whether a parameter's value meets `want` (`{"equals": v}` or `{"contains": s}`).
pub fn argument_matches(value: &Value, want: &Value) -> bool {
    if let Some(e) = want.get("equals") {
        return match (value, e) {
            (Value::String(a), Value::String(b)) => a.trim() == b.trim(),
            (a, b) => a == b,
        };
    }
    if let Some(Value::String(c)) = want.get("contains") {
        return value.as_str().is_some_and(|v| fold(v).contains(&fold(c)));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_needs_numbers_and_words_of_one_document() {
        let corpus = vec!["Every employee gets 25 days of paid annual leave per year.".to_owned()];
        assert!(supported_by(
            "Employees get 25 days of paid leave.",
            &corpus
        ));
        assert!(!supported_by(
            "Employees get 30 days of paid leave.",
            &corpus
        ));
        assert!(!supported_by(
            "The travel budget is approved by finance.",
            &corpus
        ));
        assert_eq!(
            claims("You get 25 days [1]. The sources do not say more."),
            vec!["You get 25 days."]
        );
        assert!(holds_all(
            "Up to two days per week",
            &["two days|2 days".into()]
        ));
    }
}
