//! Chunks for the vector store. Each chunk is the body text of one section (or part of
//! one), packed greedily by whole blocks, then sentences, then words. What the embedder
//! sees is `embed_input()`: the section path and the body; it is guaranteed to fit the
//! model's token window (special tokens included), so the vector covers all of it.

use crate::ml::TokenCounter;
use crate::parse::{BlockKind, ParsedDocument};

/// One chunk ready to embed and store.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrievalChunk {
    /// Body text, as stored and returned.
    pub text: String,
    /// Headings from the top down to this chunk's section, joined by " > ".
    pub section_path: String,
    /// The innermost heading ("" before the first heading).
    pub heading: String,
    pub page_start: u32,
    pub page_end: u32,
}

impl RetrievalChunk {
    /// The text that is embedded: heading context, then the body.
    pub fn embed_input(&self) -> String {
        if self.section_path.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n\n{}", self.section_path, self.text)
        }
    }
}

/// Token counting net of the two special tokens a sequence always carries.
struct Budget<'a> {
    counter: &'a TokenCounter,
    window: usize,
}

impl Budget<'_> {
    fn inner(&self, text: &str) -> usize {
        self.counter.count(text).saturating_sub(2)
    }
    fn fits(&self, chunk: &RetrievalChunk) -> bool {
        self.counter.count(&chunk.embed_input()) <= self.window
    }
}

/// Splits `doc` into chunks whose embedding input fits `window` tokens.
pub fn for_retrieval(
    doc: &ParsedDocument,
    counter: &TokenCounter,
    window: usize,
) -> Vec<RetrievalChunk> {
    let b = Budget {
        counter,
        window: window.max(8),
    };
    let mut out = Vec::new();
    let mut headings: Vec<(u8, String)> = Vec::new();
    let mut section = Section::default();
    for block in &doc.blocks {
        let text = block.text.trim();
        if text.is_empty() {
            continue;
        }
        if let BlockKind::Heading(level) = block.kind {
            section.flush(&b, &mut out);
            headings.retain(|(l, _)| *l < level);
            headings.push((level, text.replace('\n', " ")));
            section = Section::new(&b, &headings);
            continue;
        }
        section.push(&b, text, block.page, &mut out);
    }
    section.flush(&b, &mut out);
    if out.is_empty() {
        // A document of headings only: its headings are its content.
        let mut only = Section::default();
        for block in doc.blocks.iter().filter(|b| !b.text.trim().is_empty()) {
            only.push(&b, block.text.trim(), block.page, &mut out);
        }
        only.flush(&b, &mut out);
    }
    out
}

/// The chunk being filled for the current section.
#[derive(Default)]
struct Section {
    path: String,
    heading: String,
    body: Vec<String>,
    tokens: usize,
    budget: usize,
    pages: Option<(u32, u32)>,
}

impl Section {
    fn new(b: &Budget<'_>, headings: &[(u8, String)]) -> Self {
        let full: Vec<&str> = headings.iter().map(|(_, h)| h.as_str()).collect();
        let heading = full.last().map(|s| s.to_string()).unwrap_or_default();
        // Heading context may use at most half the window; long paths shrink to the
        // innermost heading, then to none.
        let mut path = full.join(" > ");
        if b.inner(&path) > b.window / 2 {
            path = heading.clone();
        }
        if b.inner(&path) > b.window / 2 {
            path.clear();
        }
        let used = if path.is_empty() {
            0
        } else {
            b.inner(&path) + 1
        };
        Self {
            path,
            heading,
            budget: b.window - 2 - used,
            ..Self::default()
        }
    }

    fn budget(&self, b: &Budget<'_>) -> usize {
        if self.budget == 0 {
            b.window - 2
        } else {
            self.budget
        }
    }

    fn push(&mut self, b: &Budget<'_>, text: &str, page: u32, out: &mut Vec<RetrievalChunk>) {
        let budget = self.budget(b);
        for piece in split_to_fit(b, text, budget) {
            let n = b.inner(&piece);
            if self.tokens > 0 && self.tokens + n > budget {
                self.flush(b, out);
            }
            self.tokens += n;
            self.body.push(piece);
            self.pages = Some(match self.pages {
                Some((s, e)) => (s.min(page), e.max(page)),
                None => (page, page),
            });
        }
    }

    fn flush(&mut self, b: &Budget<'_>, out: &mut Vec<RetrievalChunk>) {
        if self.body.is_empty() {
            return;
        }
        let (page_start, page_end) = self.pages.unwrap_or((1, 1));
        let chunk = RetrievalChunk {
            text: self.body.join("\n\n"),
            section_path: self.path.clone(),
            heading: self.heading.clone(),
            page_start,
            page_end,
        };
        self.body.clear();
        self.tokens = 0;
        self.pages = None;
        emit_fitting(b, chunk, out);
    }
}

/// Pushes `chunk`, halving it by words until every part fits (token counts are nearly,
/// not exactly, additive across joins, so the packed result is checked for real).
fn emit_fitting(b: &Budget<'_>, chunk: RetrievalChunk, out: &mut Vec<RetrievalChunk>) {
    if b.fits(&chunk) {
        out.push(chunk);
        return;
    }
    let words: Vec<&str> = chunk.text.split_whitespace().collect();
    if words.len() < 2 {
        let chars: Vec<char> = chunk.text.chars().collect();
        if chars.len() < 2 {
            // One character that does not fit even alone: drop the heading context.
            if !chunk.section_path.is_empty() {
                emit_fitting(
                    b,
                    RetrievalChunk {
                        section_path: String::new(),
                        ..chunk
                    },
                    out,
                );
            }
            return;
        }
        let mid = chars.len() / 2;
        for half in [&chars[..mid], &chars[mid..]] {
            emit_fitting(
                b,
                RetrievalChunk {
                    text: half.iter().collect(),
                    ..chunk.clone()
                },
                out,
            );
        }
        return;
    }
    let mid = words.len() / 2;
    for half in [&words[..mid], &words[mid..]] {
        emit_fitting(
            b,
            RetrievalChunk {
                text: half.join(" "),
                ..chunk.clone()
            },
            out,
        );
    }
}

/// Splits text longer than `budget` tokens into sentences, then word runs.
fn split_to_fit(b: &Budget<'_>, text: &str, budget: usize) -> Vec<String> {
    if b.inner(text) <= budget {
        return vec![text.to_owned()];
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_tokens = 0;
    for sentence in sentences(text) {
        let n = b.inner(sentence);
        if n > budget {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
                cur_tokens = 0;
            }
            out.extend(split_words(b, sentence, budget));
            continue;
        }
        if cur_tokens + n > budget && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            cur_tokens = 0;
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(sentence);
        cur_tokens += n;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn split_words(b: &Budget<'_>, text: &str, budget: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut cur_tokens = 0;
    for w in text.split_whitespace() {
        let n = b.inner(w);
        if cur_tokens + n > budget && !cur.is_empty() {
            out.push(cur.join(" "));
            cur.clear();
            cur_tokens = 0;
        }
        cur.push(w);
        cur_tokens += n;
    }
    if !cur.is_empty() {
        out.push(cur.join(" "));
    }
    out
}

/// Sentence spans: a cut after `.`, `!`, `?`, `؟` or `。` followed by whitespace.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev_end = false;
    for (i, c) in text.char_indices() {
        if prev_end && c.is_whitespace() {
            let s = text[start..i].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = i;
        }
        prev_end = matches!(c, '.' | '!' | '?' | '؟' | '。');
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_split_on_terminal_punctuation() {
        assert_eq!(
            sentences("One. Two!  Three? Four"),
            vec!["One.", "Two!", "Three?", "Four"]
        );
        assert_eq!(sentences("v1.2 is out."), vec!["v1.2 is out."]);
    }
}
