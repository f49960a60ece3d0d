//! Chunks for the vector store. Each chunk is the body text of one section (or part of
//! one), packed greedily by whole blocks, then sentences, then words. What the embedder
//! sees is `embed_input()`: the section path and the body; it is guaranteed to fit the
//! model's token window (special tokens included), so the vector covers all of it.

use crate::ml::TokenCounter;
use crate::parse::{Block, BlockKind, ParsedDocument, Table};

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
    /// The ids the embedder sees for `embed_input()` (special tokens included), as
    /// [`TokenCounter::encode`] gives them: the chunker has them from fitting the chunk,
    /// so ingestion does not tokenize it again.
    pub tokens: Vec<u32>,
}

impl RetrievalChunk {
    /// The text that is embedded: heading context, then the body.
    pub fn embed_input(&self) -> String {
        embed_input(&self.section_path, &self.text)
    }
}

/// The text embedded for a chunk of body `text` under `section_path`: what
/// [`RetrievalChunk::embed_input`] gives, rebuilt from a stored chunk's fields.
pub fn embed_input(section_path: &str, text: &str) -> String {
    if section_path.is_empty() {
        text.to_owned()
    } else {
        format!("{section_path}\n\n{text}")
    }
}

/// A piece of text and its tokens, special tokens excluded: the ids too where texts
/// join by concatenation (see [`TokenCounter::joins_by_concatenation`]).
struct Measured {
    tokens: usize,
    ids: Option<Vec<u32>>,
}

impl Measured {
    /// Nothing yet: no tokens, and (empty) ids.
    fn empty() -> Self {
        Measured {
            tokens: 0,
            ids: Some(Vec::new()),
        }
    }

    /// Appends `more`, as a text joined after this one by whitespace; the ids stay known
    /// only while both sides have them.
    fn extend(&mut self, more: Measured) {
        self.tokens += more.tokens;
        match (&mut self.ids, more.ids) {
            (Some(ids), Some(more)) => ids.extend(more),
            (ids, _) => *ids = None,
        }
    }
}

/// Token counting net of the two special tokens a sequence always carries.
struct Budget<'a> {
    counter: &'a TokenCounter,
    window: usize,
}

impl Budget<'_> {
    fn measure(&self, text: &str) -> Measured {
        if self.counter.joins_by_concatenation() {
            if let Some(ids) = self.counter.inner_ids(text) {
                return Measured {
                    tokens: ids.len(),
                    ids: Some(ids),
                };
            }
        }
        Measured {
            tokens: self.counter.count(text).saturating_sub(2),
            ids: None,
        }
    }

    /// The chunk's ids if its embedding input fits the window.
    fn fitting_ids(&self, chunk: &RetrievalChunk) -> Option<Vec<u32>> {
        let ids = self.counter.encode_untruncated(&chunk.embed_input())?;
        (ids.len() <= self.window).then_some(ids)
    }
}

/// Splits `doc` into chunks whose embedding input fits `window` tokens.
pub fn for_retrieval(
    doc: &ParsedDocument,
    counter: &TokenCounter,
    window: usize,
) -> Vec<RetrievalChunk> {
    let mut chunker = Chunker::new(counter, window);
    let mut out = Vec::new();
    for block in &doc.blocks {
        chunker.push(block, &mut out);
    }
    chunker.finish(&mut out);
    out
}

/// [`for_retrieval`] block by block, for a document read page by page: each chunk is
/// appended to `out` once its section has filled it, and [`finish`](Self::finish) adds
/// the rest. The chunks are those `for_retrieval` gives for all the blocks at once.
pub struct Chunker<'a> {
    b: Budget<'a>,
    headings: Vec<(u8, String)>,
    section: Section,
    /// Every non-empty block, while no chunk has come out: a document of headings only
    /// has its headings as its content.
    so_far: Option<Vec<(String, u32)>>,
}

impl<'a> Chunker<'a> {
    pub fn new(counter: &'a TokenCounter, window: usize) -> Self {
        let b = Budget {
            counter,
            window: window.max(8),
        };
        let section = Section::new(&b, &[]);
        Self {
            b,
            headings: Vec::new(),
            section,
            so_far: Some(Vec::new()),
        }
    }

    /// Takes the next block; chunks its section completes go to `out`.
    pub fn push(&mut self, block: &Block, out: &mut Vec<RetrievalChunk>) {
        let text = block.text.trim();
        if text.is_empty() {
            return;
        }
        let before = out.len();
        if let Some(all) = &mut self.so_far {
            all.push((text.to_owned(), block.page));
        }
        match &block.kind {
            BlockKind::Heading(level) => {
                let level = *level;
                self.section.flush(&self.b, out);
                self.headings.retain(|(l, _)| *l < level);
                self.headings.push((level, text.replace('\n', " ")));
                self.section = Section::new(&self.b, &self.headings);
            }
            // A table goes in row by row, each row a sentence naming its columns: a
            // chunk cut inside a table still says what every value is, and an answer
            // can quote one row.
            BlockKind::Table(t) => {
                for row in table_sentences(t) {
                    self.section.push(&self.b, &row, block.page, out);
                }
            }
            _ => self.section.push(&self.b, text, block.page, out),
        }
        if out.len() > before {
            self.so_far = None;
        }
    }

    /// Ends the document: its last section's chunks go to `out`.
    pub fn finish(mut self, out: &mut Vec<RetrievalChunk>) {
        let before = out.len();
        self.section.flush(&self.b, out);
        if out.len() > before {
            return;
        }
        if let Some(all) = self.so_far {
            let mut only = Section::new(&self.b, &[]);
            for (text, page) in &all {
                only.push(&self.b, text, *page, out);
            }
            only.flush(&self.b, out);
        }
    }
}

/// A table's rows as text to retrieve and quote: with a header row, each data row as
/// one sentence pairing every value with its column (`office: South; city: Lisbon;
/// staff: 130.`); without one (a first row of numbers or blanks), each row's cells
/// joined by ` | `.
pub fn table_sentences(t: &Table) -> Vec<String> {
    let clean = |c: &String| c.split_whitespace().collect::<Vec<_>>().join(" ");
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(clean).collect::<Vec<_>>())
        .filter(|r| r.iter().any(|c| !c.is_empty()))
        .collect();
    let plain = |r: &Vec<String>| {
        r.iter()
            .filter(|c| !c.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let Some((header, data)) = rows.split_first() else {
        return Vec::new();
    };
    if data.is_empty() || !is_header(header) {
        return rows.iter().map(plain).collect();
    }
    data.iter()
        .filter(|r| *r != header)
        .map(|r| {
            let parts: Vec<String> = r
                .iter()
                .enumerate()
                .filter(|(_, v)| !v.is_empty())
                .map(
                    |(i, v)| match header.get(i).filter(|h| !h.is_empty() && *h != v) {
                        Some(h) => format!("{h}: {v}"),
                        None => v.clone(),
                    },
                )
                .collect();
            let mut line = parts.join("; ");
            if !line.ends_with(['.', '!', '?']) {
                line.push('.');
            }
            line
        })
        .collect()
}

/// Whether a table's first row names its columns: most cells filled, none a number,
/// none long.
fn is_header(row: &[String]) -> bool {
    let filled = row.iter().filter(|c| !c.is_empty()).count();
    let number = |c: &str| {
        let c = c.trim_matches(|ch: char| "%$€£+-".contains(ch));
        !c.is_empty() && c.chars().all(|ch| ch.is_ascii_digit() || ".,".contains(ch))
    };
    filled * 2 >= row.len() && row.iter().all(|c| !number(c) && c.chars().count() <= 80)
}

/// The chunk being filled for the current section.
struct Section {
    path: String,
    heading: String,
    body: Vec<String>,
    /// Ids of the path, if known.
    path_ids: Option<Vec<u32>>,
    /// Tokens of the body so far (and its ids while every piece has them).
    measured: Measured,
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
        let mut m = b.measure(&path);
        if m.tokens > b.window / 2 {
            path = heading.clone();
            m = b.measure(&path);
        }
        if m.tokens > b.window / 2 {
            path.clear();
            m = b.measure(&path);
        }
        let used = if path.is_empty() { 0 } else { m.tokens + 1 };
        Self {
            path_ids: if path.is_empty() {
                Some(Vec::new())
            } else {
                m.ids
            },
            path,
            heading,
            body: Vec::new(),
            measured: Measured::empty(),
            budget: b.window - 2 - used,
            pages: None,
        }
    }

    fn push(&mut self, b: &Budget<'_>, text: &str, page: u32, out: &mut Vec<RetrievalChunk>) {
        for (piece, m) in split_to_fit(b, text, self.budget) {
            if self.measured.tokens > 0 && self.measured.tokens + m.tokens > self.budget {
                self.flush(b, out);
            }
            self.measured.extend(m);
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
            tokens: Vec::new(),
        };
        // Pieces join with whitespace, so where ids concatenate the chunk's are known.
        let body = std::mem::replace(&mut self.measured, Measured::empty());
        let known = match (&self.path_ids, &body.ids) {
            (Some(path), Some(body)) => b.counter.wrap(&[path, body], b.window),
            _ => None,
        };
        self.body.clear();
        self.pages = None;
        match known {
            Some(tokens) => out.push(RetrievalChunk { tokens, ..chunk }),
            None => emit_fitting(b, chunk, out),
        }
    }
}

/// Pushes `chunk`, halving it by words until every part fits (token counts are nearly,
/// not exactly, additive across joins, so the packed result is checked for real).
fn emit_fitting(b: &Budget<'_>, chunk: RetrievalChunk, out: &mut Vec<RetrievalChunk>) {
    if let Some(tokens) = b.fitting_ids(&chunk) {
        out.push(RetrievalChunk { tokens, ..chunk });
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

/// Splits text longer than `budget` tokens into sentences, then word runs, each with
/// its tokens.
fn split_to_fit(b: &Budget<'_>, text: &str, budget: usize) -> Vec<(String, Measured)> {
    let whole = b.measure(text);
    if whole.tokens <= budget {
        return vec![(text.to_owned(), whole)];
    }
    let mut out = Vec::new();
    let mut cur: Vec<(&str, Measured)> = Vec::new();
    let mut cur_tokens = 0;
    for sentence in sentences(text) {
        let m = b.measure(sentence);
        if m.tokens > budget {
            if !cur.is_empty() {
                out.push(joined(std::mem::take(&mut cur)));
                cur_tokens = 0;
            }
            out.extend(split_words(b, sentence, budget));
            continue;
        }
        if cur_tokens + m.tokens > budget && !cur.is_empty() {
            out.push(joined(std::mem::take(&mut cur)));
            cur_tokens = 0;
        }
        cur_tokens += m.tokens;
        cur.push((sentence, m));
    }
    if !cur.is_empty() {
        out.push(joined(cur));
    }
    out
}

/// Parts joined by spaces, with their tokens summed and ids concatenated.
fn joined(parts: Vec<(&str, Measured)>) -> (String, Measured) {
    let text = parts.iter().map(|(t, _)| *t).collect::<Vec<_>>().join(" ");
    let mut m = Measured::empty();
    for (_, p) in parts {
        m.extend(p);
    }
    (text, m)
}

fn split_words(b: &Budget<'_>, text: &str, budget: usize) -> Vec<(String, Measured)> {
    let mut out = Vec::new();
    let mut cur: Vec<(&str, Measured)> = Vec::new();
    let mut cur_tokens = 0;
    for w in text.split_whitespace() {
        let m = b.measure(w);
        if cur_tokens + m.tokens > budget && !cur.is_empty() {
            out.push(joined(std::mem::take(&mut cur)));
            cur_tokens = 0;
        }
        cur_tokens += m.tokens;
        cur.push((w, m));
    }
    if !cur.is_empty() {
        out.push(joined(cur));
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
    fn a_table_with_a_header_becomes_one_sentence_per_row() {
        let t = |rows: &[&[&str]]| Table {
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect(),
        };
        let offices = t(&[
            &["office", "city", "country", "staff", "manager", "since"],
            &["South", "Lisbon", "Portugal", "130", "Marta  Sousa", "2015"],
            &["North", "Oslo", "", "42", "Ola Nordmann", "2019"],
            &["office", "city", "country", "staff", "manager", "since"],
        ]);
        assert_eq!(
            table_sentences(&offices),
            [
                "office: South; city: Lisbon; country: Portugal; staff: 130; manager: Marta Sousa; since: 2015.",
                "office: North; city: Oslo; staff: 42; manager: Ola Nordmann; since: 2019.",
            ]
        );
        // No header (a first row of numbers): rows as they are.
        let numbers = t(&[&["1", "2"], &["3", "4"]]);
        assert_eq!(table_sentences(&numbers), ["1 | 2", "3 | 4"]);
        // One row: nothing to pair it with.
        assert_eq!(table_sentences(&t(&[&["a", "b"]])), ["a | b"]);
    }

    #[test]
    fn sentences_split_on_terminal_punctuation() {
        assert_eq!(
            sentences("One. Two!  Three? Four"),
            vec!["One.", "Two!", "Three?", "Four"]
        );
        assert_eq!(sentences("v1.2 is out."), vec!["v1.2 is out."]);
    }
}
