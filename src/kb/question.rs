//! The question part of a long message. People paste an e-mail, a log or a page of
//! background and ask one thing at its end (or its start); retrieval and the grounding
//! check measure the whole text against each passage, so a few question words drown in
//! thousands of others and the answer becomes "the sources do not say". A message longer
//! than [`LONG_QUESTION_CHARS`] is reduced to its question sentences before retrieval: the
//! last sentence that asks something (ends with `?` or `؟`, or opens with a question
//! word), with the sentence before it when that one is short context ("About the pump
//! P-104. How often are its seals replaced?"); with no such sentence, the last sentence.

use std::borrow::Cow;

/// Messages up to this many characters are used whole.
pub const LONG_QUESTION_CHARS: usize = 400;
/// Most characters of the reduced question.
const MAX_REDUCED_CHARS: usize = 400;
/// A question sentence shorter than this many words takes the sentence before it along.
const SHORT_QUESTION_WORDS: usize = 3;

/// Words that open a question, lower-cased (English and Arabic).
const QUESTION_WORDS: &[&str] = &[
    "what",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "which",
    "why",
    "how",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "may",
    "must",
    "has",
    "have",
    "had",
    "tell",
    "explain",
    "list",
    "name",
    "give",
    "show",
    "describe",
    "متى",
    "ما",
    "ماذا",
    "كيف",
    "كم",
    "أين",
    "اين",
    "من",
    "هل",
    "لماذا",
    "أي",
];

/// `message` whole when it is short, else its question part (see the module docs).
pub fn question_part(message: &str) -> Cow<'_, str> {
    let trimmed = message.trim();
    if trimmed.chars().count() <= LONG_QUESTION_CHARS {
        return Cow::Borrowed(message);
    }
    let sentences: Vec<&str> = trimmed
        .lines()
        .flat_map(crate::chunk::sentences)
        .map(str::trim)
        .filter(|s| s.chars().any(char::is_alphanumeric))
        .collect();
    let Some(last) = sentences.len().checked_sub(1) else {
        return Cow::Borrowed(message);
    };
    let at = sentences.iter().rposition(|s| asks(s)).unwrap_or(last);
    let mut part = sentences[at].to_owned();
    if at > 0 && part.split_whitespace().count() < SHORT_QUESTION_WORDS {
        part = format!("{} {part}", sentences[at - 1]);
    }
    Cow::Owned(cut_at_word(&part, MAX_REDUCED_CHARS))
}

/// Whether `sentence` asks something.
fn asks(sentence: &str) -> bool {
    if sentence.ends_with(['?', '؟']) {
        return true;
    }
    let first = sentence
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_lowercase();
    QUESTION_WORDS.contains(&first.as_str())
}

/// The last `max` characters of `text`, cut after a space (the question's end matters
/// more than the start of its sentence).
fn cut_at_word(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - max).collect();
    match tail.find(char::is_whitespace) {
        Some(i) => tail[i..].trim_start().to_owned(),
        None => tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn background(chars: usize) -> String {
        let mut s = String::new();
        while s.chars().count() < chars {
            s.push_str("We moved the team to the new building last spring and the printers are on the second floor. ");
        }
        s
    }

    #[test]
    fn a_short_message_is_used_whole() {
        let q = "How many days of leave do I get? Thanks.";
        assert!(matches!(question_part(q), Cow::Borrowed(_)));
    }

    #[test]
    fn the_last_question_of_a_long_message_is_kept() {
        let msg = format!(
            "Hello team,\n\n{}\nAnyway, how many days of annual leave do I get per year? Thanks a lot, Sam",
            background(3000)
        );
        assert_eq!(
            question_part(&msg),
            "Anyway, how many days of annual leave do I get per year?"
        );
        // A question first, then the background.
        let msg = format!("When was the IBM MT/ST introduced? {}", background(3000));
        assert_eq!(question_part(&msg), "When was the IBM MT/ST introduced?");
    }

    #[test]
    fn a_short_question_takes_its_context_along() {
        let msg = format!("{} About pump P-104. Why?", background(1000));
        assert_eq!(question_part(&msg), "About pump P-104. Why?");
    }

    #[test]
    fn without_a_question_the_last_sentence_is_kept_and_cut_at_a_word() {
        let msg = format!(
            "{} Please summarise the travel policy for me",
            background(1000)
        );
        assert_eq!(
            question_part(&msg),
            "Please summarise the travel policy for me"
        );
        let long = format!("{}?", "word ".repeat(200));
        let part = question_part(&long);
        assert!(part.chars().count() <= MAX_REDUCED_CHARS, "{part}");
        assert!(
            part.starts_with("word") && part.ends_with("word ?"),
            "{part}"
        );
        let arabic = format!("{} متى يفتح المكتب؟", "نص طويل جدا. ".repeat(60));
        assert_eq!(question_part(&arabic), "متى يفتح المكتب؟");
    }
}
