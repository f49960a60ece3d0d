//! The text side of grounding: content terms (lower-cased, Arabic folded, stop words out,
//! a light plural fold), numbers, citation markers, sentence splitting of answers, and
//! whether a sentence says that the sources do not answer.

use std::collections::HashSet;

use crate::parse::clean::normalize_arabic;

/// Words that carry no claim of their own (English and Arabic function words).
const STOP_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "if",
    "then",
    "than",
    "so",
    "as",
    "at",
    "by",
    "for",
    "from",
    "in",
    "into",
    "of",
    "on",
    "onto",
    "to",
    "with",
    "without",
    "within",
    "about",
    "per",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "do",
    "does",
    "did",
    "done",
    "have",
    "has",
    "had",
    "having",
    "can",
    "could",
    "may",
    "might",
    "must",
    "shall",
    "should",
    "will",
    "would",
    "i",
    "me",
    "my",
    "mine",
    "you",
    "your",
    "yours",
    "we",
    "us",
    "our",
    "ours",
    "he",
    "him",
    "his",
    "she",
    "her",
    "hers",
    "it",
    "its",
    "they",
    "them",
    "their",
    "theirs",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "each",
    "every",
    "some",
    "no",
    "not",
    "nor",
    "only",
    "own",
    "same",
    "such",
    "too",
    "very",
    "just",
    "also",
    "up",
    "down",
    "out",
    "over",
    "under",
    "again",
    "once",
    "get",
    "gets",
    "got",
    "yes",
    "according",
    "source",
    "sources",
    "say",
    "says",
    "said",
    "document",
    "documents",
    "knowledge",
    "base",
    "answer",
    "question",
    // Arabic particles and pronouns, in folded form.
    "في",
    "من",
    "الي",
    "علي",
    "عن",
    "مع",
    "هل",
    "ما",
    "ماذا",
    "متي",
    "كم",
    "كيف",
    "اين",
    "هذا",
    "هذه",
    "ذلك",
    "تلك",
    "التي",
    "الذي",
    "و",
    "او",
    "ثم",
    "لا",
    "نعم",
    "ان",
    "كان",
    "يوجد",
    "هو",
    "هي",
    "هم",
    "انا",
    "نحن",
    "كل",
    "بين",
    "حتي",
    "عند",
    "لكل",
];

/// Phrases of a sentence that says the sources do not hold the answer.
const NOT_IN_SOURCES: &[&str] = &[
    "do not say",
    "does not say",
    "don't say",
    "doesn't say",
    "do not contain",
    "does not contain",
    "doesn't contain",
    "don't contain",
    "do not mention",
    "does not mention",
    "not mentioned",
    "no information",
    "not in the sources",
    "not in the knowledge base",
    "cannot find",
    "can't find",
    "could not find",
    "i don't know",
    "i do not know",
    "not provided",
    "not specified",
    "do not specify",
    "does not specify",
    "لا تذكر",
    "لا يذكر",
    "لا تحتوي",
];

fn is_stop(word: &str) -> bool {
    STOP_WORDS.contains(&word)
}

/// Lower-cased words of `text` (letters, digits and the joiners `-`, `:`, `.`, `,` inside
/// numbers and codes), Arabic folded.
pub fn words(text: &str) -> Vec<String> {
    let folded = normalize_arabic(&text.to_lowercase());
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = folded.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let joins = matches!(c, '-' | ':' | '.' | ',' | '\'')
            && !cur.is_empty()
            && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric())
            && (c != ',' && c != '.' || cur.chars().last().is_some_and(|p| p.is_ascii_digit()));
        if c.is_alphanumeric() || joins {
            cur.push(c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A word's folded form for matching: possessives and plural `s` dropped, Arabic's
/// definite article `ال` dropped.
fn stem(word: &str) -> String {
    let w = word.strip_suffix("'s").unwrap_or(word);
    if let Some(rest) = w.strip_prefix("ال") {
        if rest.chars().count() >= 3 {
            return rest.to_owned();
        }
    }
    if w.len() > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..w.len() - 3]);
    }
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && w.is_ascii() {
        return w[..w.len() - 1].to_owned();
    }
    w.to_owned()
}

/// The content terms of `text`: its words minus stop words, folded.
pub fn terms(text: &str) -> HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stop(w))
        .map(|w| stem(&w))
        .collect()
}

/// The numbers and codes with digits in `text` (`25`, `10:00`, `p-104`), as written
/// once lower-cased; a trailing `.0` is dropped so `12.0` matches `12`.
pub fn numbers(text: &str) -> HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
        .map(|w| w.strip_suffix(".0").map(str::to_owned).unwrap_or(w))
        .collect()
}

/// `text` without its citation markers (`[1]`, `[2][3]`, `[1, 2]`), with their numbers.
pub fn strip_citations(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut cited = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let nums: Option<Vec<usize>> = inside
            .split(',')
            .map(|p| p.trim().parse::<usize>().ok())
            .collect();
        match nums {
            Some(ns) if !inside.trim().is_empty() => {
                out.push_str(rest[..open].trim_end());
                cited.extend(ns);
            }
            _ => out.push_str(&rest[..open + 1 + close + 1]),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    (out.trim().to_owned(), cited)
}

/// Whether `sentence` says the sources do not hold the answer.
pub fn says_not_in_sources(sentence: &str) -> bool {
    let s = sentence.to_lowercase().replace('’', "'");
    NOT_IN_SOURCES.iter().any(|p| s.contains(p))
}

/// Splits an answer into its sentences (line breaks end sentences too), keeping each
/// one's citation markers with it (a marker after the full stop belongs to the sentence
/// before it).
pub fn answer_sentences(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        for s in crate::chunk::sentences(line) {
            let s = without_lead_in(s);
            let s = s.as_str();
            let (bare, cited) = strip_citations(s);
            // "[2]." or "[1][3]" alone: the markers of the sentence before.
            let bare_is_empty = bare
                .trim_matches(|c: char| c.is_ascii_punctuation())
                .is_empty();
            match out.last_mut() {
                Some(prev) if bare_is_empty && !cited.is_empty() => {
                    prev.push(' ');
                    prev.push_str(s.trim());
                }
                _ if bare_is_empty => {}
                _ => out.push(s.trim().to_owned()),
            }
        }
    }
    out
}

/// Phrases a small model puts before what it says, lower-cased.
const LEAD_INS: &[&str] = &[
    "the answer to your question is",
    "the answer to this question is",
    "the answer to the question is",
    "here is the answer",
    "the answer is",
    "answer",
];

/// `sentence` without a lead-in that says nothing ("The answer is: Every 90 days [1]."
/// reads "Every 90 days [1]."), its first letter made upper-case.
fn without_lead_in(sentence: &str) -> String {
    let trimmed = sentence.trim();
    let lower = trimmed.to_lowercase();
    for lead in LEAD_INS {
        let Some(rest) = lower.strip_prefix(lead) else {
            continue;
        };
        // Only when the lead-in ends there: "The answer is:" / "Answer -", not
        // "Answering machines ..." or "The answer is simple".
        let after = rest.trim_start();
        if !after.starts_with([':', '-', '—']) {
            continue;
        }
        // The lead-in is ASCII, so its length in `lower` is its length in `trimmed`.
        let mark = after.chars().next().map_or(0, char::len_utf8);
        let cut = lower.len() - after.len() + mark;
        let body = trimmed[cut..].trim_start();
        let mut chars = body.chars();
        return match chars.next() {
            Some(c) => c.to_uppercase().chain(chars).collect(),
            None => String::new(),
        };
    }
    trimmed.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lead_ins_that_say_nothing_are_dropped() {
        assert_eq!(
            answer_sentences("The answer is: every 90 days [1]. Passwords have 12 characters."),
            vec!["Every 90 days [1].", "Passwords have 12 characters."]
        );
        assert_eq!(answer_sentences("Answer: 25 days."), vec!["25 days."]);
        assert_eq!(
            answer_sentences("Answer — élan 25 days."),
            vec!["Élan 25 days."]
        );
        assert!(answer_sentences("The answer is:.").is_empty());
        assert_eq!(
            answer_sentences("The answer is simple: 25 days."),
            vec!["The answer is simple: 25 days."]
        );
        assert_eq!(
            answer_sentences("Answering machines are not allowed."),
            vec!["Answering machines are not allowed."]
        );
    }

    #[test]
    fn terms_fold_case_plurals_and_stop_words() {
        let t = terms("Every employee gets 25 days of paid leave per year.");
        for w in ["employee", "25", "day", "paid", "leave", "year"] {
            assert!(t.contains(w), "{w} in {t:?}");
        }
        assert!(!t.contains("of") && !t.contains("gets"));
        let a = terms("يحصل الموظفون على إجازة");
        assert!(a.contains("اجازه"), "{a:?}");
    }

    #[test]
    fn numbers_keep_times_and_codes() {
        let n = numbers("Core hours 10:00 to 15:00; pump P-104 at 12.0 m3, 1,250 units.");
        for w in ["10:00", "15:00", "p-104", "12", "m3", "1,250"] {
            assert!(n.contains(w), "{w} in {n:?}");
        }
        assert!(numbers("The end. 5").contains("5"));
    }

    #[test]
    fn citations_are_stripped_and_read() {
        assert_eq!(
            strip_citations("You get 25 days [1][3]."),
            ("You get 25 days.".into(), vec![1, 3])
        );
        assert_eq!(strip_citations("A [2, 4] b"), ("A b".into(), vec![2, 4]));
        assert_eq!(strip_citations("a [x] b"), ("a [x] b".into(), vec![]));
        assert_eq!(
            answer_sentences("First one [1]. [2]\nSecond? Yes."),
            vec!["First one [1]. [2]", "Second?", "Yes."]
        );
    }

    #[test]
    fn refusals_are_recognised() {
        assert!(says_not_in_sources("The sources don’t say how many days."));
        assert!(says_not_in_sources("I don't know."));
        assert!(!says_not_in_sources("You get 25 days."));
    }
}
