//! Text cleaning applied after parsing: URL removal, Arabic normalisation, whitespace
//! and hyphenation repair. Right-to-left text stays in logical order: nothing here
//! reorders characters.
//!
//! `normalize_arabic` maps exactly:
//! - alef with hamza above (أ U+0623), with hamza below (إ U+0625), with madda (آ U+0622)
//!   and alef wasla (ٱ U+0671) -> alef (ا U+0627);
//! - alef maqsura (ى U+0649) -> yeh (ي U+064A);
//! - teh marbuta (ة U+0629) -> heh (ه U+0647);
//! - Persian/Urdu letters: keheh (ک U+06A9) -> kaf (ك U+0643); farsi yeh (ی U+06CC) and
//!   yeh barree (ے U+06D2) -> yeh (ي U+064A); heh with yeh above (ۀ U+06C0), heh goal
//!   (ہ U+06C1) and ae (ە U+06D5) -> heh (ه U+0647);
//! - removed: tatweel (ـ U+0640) and the diacritics U+064B-U+065F (tanween, fatha,
//!   damma, kasra, shadda, sukun, madda/hamza marks) and U+0670 (superscript alef).

use std::sync::OnceLock;

use regex::Regex;

/// Maps one character per the table in the module documentation; `None` drops it.
pub fn normalize_arabic_char(c: char) -> Option<char> {
    match c {
        '\u{0623}' | '\u{0625}' | '\u{0622}' | '\u{0671}' => Some('\u{0627}'),
        '\u{0649}' | '\u{06CC}' | '\u{06D2}' => Some('\u{064A}'),
        '\u{0629}' | '\u{06C0}' | '\u{06C1}' | '\u{06D5}' => Some('\u{0647}'),
        '\u{06A9}' => Some('\u{0643}'),
        '\u{0640}' | '\u{064B}'..='\u{065F}' | '\u{0670}' => None,
        other => Some(other),
    }
}

/// Arabic normalisation (see the module documentation for the exact mapping).
pub fn normalize_arabic(text: &str) -> String {
    text.chars().filter_map(normalize_arabic_char).collect()
}

fn url_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r#"(?i)\b(?:https?://|ftp://|www\.)[^\s<>"'\)\]]+"#).expect("static regex")
    })
}

/// Removes URLs (`http(s)://`, `ftp://`, `www.`) and the space they leave.
pub fn remove_urls(text: &str) -> String {
    let out = url_re().replace_all(text, "");
    out.lines()
        .map(collapse_spaces)
        .collect::<Vec<_>>()
        .join("\n")
}

fn collapse_spaces(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.chars() {
        if c == ' ' || c == '\t' || c == '\u{a0}' {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.push(c);
    }
    out
}

/// Collapses runs of spaces, trims lines, keeps at most one blank line in a row, and
/// joins words hyphenated across a line break (`exam-\nple` -> `example`).
pub fn repair_whitespace(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut blank = 0;
    for raw in text.lines() {
        let line = collapse_spaces(raw);
        if line.is_empty() {
            blank += 1;
            if blank == 1 && !lines.is_empty() {
                lines.push(String::new());
            }
            continue;
        }
        blank = 0;
        if let Some(prev) = lines.last_mut() {
            if let Some(stem) = prev.strip_suffix('-') {
                let joins = stem.chars().last().is_some_and(char::is_lowercase)
                    && line.chars().next().is_some_and(char::is_lowercase);
                if joins {
                    *prev = format!("{stem}{line}");
                    continue;
                }
            }
        }
        lines.push(line);
    }
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines.join("\n")
}

/// What to clean.
#[derive(Debug, Clone, Copy)]
pub struct CleanOptions {
    pub remove_urls: bool,
    pub normalize_arabic: bool,
}

/// Applies the cleaning steps to one text.
pub fn clean(text: &str, o: CleanOptions) -> String {
    let mut t = if o.remove_urls {
        remove_urls(text)
    } else {
        text.to_owned()
    };
    if o.normalize_arabic {
        t = normalize_arabic(&t);
    }
    repair_whitespace(&t)
}

/// Cleans every block (and table cell) of a document in place; drops blocks left empty.
pub fn clean_document(doc: &mut super::ParsedDocument, o: CleanOptions) {
    for b in &mut doc.blocks {
        clean_block(b, o);
    }
    doc.blocks.retain(keeps);
    if let Some(t) = doc.title.as_mut() {
        *t = clean(t, o);
    }
}

/// Cleans one block as [`clean_document`] does (for a document read page by page).
pub fn clean_block(b: &mut super::Block, o: CleanOptions) {
    if let super::BlockKind::Table(t) = &mut b.kind {
        for cell in t.rows.iter_mut().flatten() {
            *cell = clean(cell, o);
        }
        b.text = t.to_text();
    } else if b.kind == super::BlockKind::Code {
        if o.remove_urls {
            b.text = url_re().replace_all(&b.text, "").into_owned();
        }
    } else {
        b.text = clean(&b.text, o);
    }
}

/// Whether [`clean_document`] keeps a cleaned block: it has text, or it is an image.
pub fn keeps(b: &super::Block) -> bool {
    !b.text.trim().is_empty() || matches!(b.kind, super::BlockKind::Image(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arabic_mapping_is_exact() {
        assert_eq!(normalize_arabic("أإآٱ"), "اااا");
        assert_eq!(normalize_arabic("مدرسة"), "مدرسه");
        assert_eq!(normalize_arabic("على"), "علي");
        assert_eq!(normalize_arabic("العـــربية"), "العربيه");
        assert_eq!(normalize_arabic("اللُّغَةُ العَرَبِيَّةُ"), "اللغه العربيه");
        assert_eq!(normalize_arabic("کتاب یک"), "كتاب يك");
        // Logical order is kept: the first character stays first.
        assert!(normalize_arabic("مرحبا").starts_with('م'));
        assert_eq!(normalize_arabic("plain text 123"), "plain text 123");
    }

    #[test]
    fn urls_whitespace_hyphenation() {
        assert_eq!(
            remove_urls("see https://x.org/a?b=1 and www.y.com now"),
            "see and now"
        );
        assert_eq!(
            repair_whitespace("exam-\nple  text\n\n\n\nnext"),
            "example text\n\nnext"
        );
        assert_eq!(repair_whitespace("Jean-\nPaul"), "Jean-\nPaul");
    }
}
