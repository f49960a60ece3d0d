//! Lines in reading order -> paragraphs, headings and list items. Headings are told by
//! font size and weight against the page's body text; paragraphs by line spacing,
//! indentation and changes of font; list items by their bullet or number.

use crate::parse::{Block, BlockKind};

/// One visual line of text.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub text: String,
    pub x0: f32,
    pub x1: f32,
    pub top: f32,
    pub bottom: f32,
    pub size: f32,
    pub bold: bool,
    pub italic: bool,
    /// Leading text set apart in bold or italic from the plain rest of the line: the
    /// candidate for a run-in heading.
    pub lead: Option<String>,
    /// The reading-order column (leaves of one vertical cut share it).
    pub column: usize,
}

/// What reading order produced: a line of text, or a finished block (table, picture).
pub(crate) enum Piece {
    Line(Line),
    Block(Block),
}

/// Page-level typography the decisions are made against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Body {
    /// Font size of most of the text.
    pub size: f32,
    /// Most of the text is bold (then bold says nothing about headings).
    pub bold: bool,
    /// Most of the text is italic.
    pub italic: bool,
    /// Usual white between two lines of one paragraph.
    pub line_gap: f32,
}

const BULLETS: &[char] = &[
    '•', '●', '○', '◦', '▪', '▫', '■', '□', '‣', '⁃', '∙', '·', '\u{f0b7}', '➢', '➤', '✓', '✔',
    '-', '–', '*',
];

/// The list marker a line starts with, if any: (marker length in bytes, keep marker).
fn list_marker(text: &str) -> Option<(usize, bool)> {
    let t = text.trim_start();
    let mut chars = t.char_indices();
    let (_, first) = chars.next()?;
    if BULLETS.contains(&first) {
        let rest = &t[first.len_utf8()..];
        if rest.starts_with(' ') && rest.trim().chars().count() > 1 {
            return Some((first.len_utf8(), false));
        }
        return None;
    }
    // "1." "12)" "a)" "(iv)" followed by a space.
    let head: String = t.chars().take(6).collect();
    let bytes = head.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if (1..=2).contains(&digits)
        && matches!(bytes.get(digits), Some(b'.') | Some(b')'))
        && bytes.get(digits + 1) == Some(&b' ')
    {
        return Some((digits + 1, true));
    }
    if bytes.len() >= 3 && bytes[0].is_ascii_lowercase() && bytes[1] == b')' && bytes[2] == b' ' {
        return Some((2, true));
    }
    None
}

fn ends_sentence(s: &str) -> bool {
    s.trim_end().ends_with(['.', ':', '!', '?', '؟', '。', ';'])
}

/// Joins a continuation line, repairing a word hyphenated across the break.
fn join_line(text: &mut String, next: &str) {
    let next = next.trim();
    if text.is_empty() {
        text.push_str(next);
        return;
    }
    let hyphen =
        text.ends_with('-') && text.chars().rev().nth(1).is_some_and(char::is_alphanumeric);
    if hyphen && next.chars().next().is_some_and(char::is_lowercase) {
        text.pop();
    } else if !hyphen {
        text.push(' ');
    }
    text.push_str(next);
}

struct Para {
    lines: Vec<Line>,
    list: Option<bool>,
    text: String,
}

impl Para {
    fn new(line: Line) -> Self {
        let list = list_marker(&line.text).map(|(_, keep)| keep);
        let text = match list_marker(&line.text) {
            Some((n, false)) => line
                .text
                .trim_start()
                .get(n..)
                .unwrap_or_default()
                .trim()
                .to_owned(),
            _ => line.text.trim().to_owned(),
        };
        Self {
            lines: vec![line],
            list,
            text,
        }
    }

    fn last(&self) -> &Line {
        // Invariant: a Para is created with one line and only grows.
        &self.lines[self.lines.len() - 1]
    }

    fn push(&mut self, line: Line) {
        join_line(&mut self.text, &line.text);
        self.lines.push(line);
    }

    fn size(&self) -> f32 {
        self.lines.iter().map(|l| l.size).fold(0.0, f32::max)
    }

    fn into_block(self, body: &Body, page: u32) -> Option<Block> {
        let text = self.text.trim().to_owned();
        if text.is_empty() {
            return None;
        }
        let kind = if let Some(level) = heading_level(&self, &text, body) {
            BlockKind::Heading(level)
        } else if self.list.is_some() {
            BlockKind::ListItem
        } else {
            BlockKind::Paragraph
        };
        Some(Block { kind, text, page })
    }
}

fn heading_level(p: &Para, text: &str, body: &Body) -> Option<u8> {
    let words = text.split_whitespace().count();
    let size = p.size();
    let ratio = size / body.size.max(1.0);
    if chapter_number(p, text, ratio) {
        return Some(1);
    }
    if p.lines.len() > 3 || words > 24 || !text.chars().any(char::is_alphabetic) {
        return None;
    }
    let all_bold = p.lines.iter().all(|l| l.bold);
    if ratio >= 1.15 {
        return Some(if ratio >= 1.7 {
            1
        } else if ratio >= 1.3 {
            2
        } else {
            3
        });
    }
    let looks_like_sentence = text.ends_with(['.', ',', ';']) && !numbered_heading(text);
    if all_bold && !body.bold && ratio > 0.95 && words <= 16 && !looks_like_sentence {
        return Some(if numbered_depth(text) >= 2 { 4 } else { 3 });
    }
    // A short italic line of its own, starting with a capital: a minor heading.
    let all_italic = p.lines.iter().all(|l| l.italic);
    let capital = text
        .chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
    if all_italic
        && !body.italic
        && p.lines.len() == 1
        && ratio > 0.95
        && words <= 10
        && capital
        && !text.ends_with(['.', ',', ';', ':'])
    {
        return Some(4);
    }
    None
}

/// A chapter number set alone in display type (the big "1" over a chapter title): a
/// heading of its own, though it has no letters.
fn chapter_number(p: &Para, text: &str, ratio: f32) -> bool {
    p.lines.len() == 1
        && ratio >= 1.7
        && (1..=2).contains(&text.len())
        && text.chars().all(|c| c.is_ascii_digit())
}

/// "3", "3.1", "A.2" style section numbers at the start.
fn numbered_heading(text: &str) -> bool {
    numbered_depth(text) > 0
}

fn numbered_depth(text: &str) -> usize {
    let first = text.split_whitespace().next().unwrap_or("");
    let first = first.trim_end_matches('.');
    if first.is_empty()
        || !first
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return 0;
    }
    let parts: Vec<&str> = first.split('.').collect();
    let numeric = parts
        .iter()
        .skip(1)
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && (parts[0].chars().all(|c| c.is_ascii_digit()) || parts[0].len() == 1);
    if numeric && parts[0].len() <= 2 && text.split_whitespace().count() > 1 {
        parts.len()
    } else {
        0
    }
}

/// Whether `line` starts a new paragraph after `para`.
fn breaks(para: &Para, line: &Line, body: &Body) -> bool {
    let prev = para.last();
    let em = body.size.max(1.0);
    if list_marker(&line.text).is_some() {
        return true;
    }
    if line.column != prev.column {
        // A paragraph running on into the next column carries on mid-sentence.
        let continues =
            !ends_sentence(&para.text) && line.text.chars().next().is_some_and(char::is_lowercase);
        return !continues;
    }
    let gap = line.top - prev.bottom;
    if gap > body.line_gap + 0.6 * em || gap < -0.5 * em {
        return true;
    }
    // A change of weight or slant mid-sentence is emphasis, not a new block: a list
    // item's bold lead ("IBM MT/ST: Introduced in 1964, this") going on in regular type
    // on the next line ("machine combined ...").
    let mid_sentence =
        !ends_sentence(&para.text) && line.text.trim_start().starts_with(char::is_lowercase);
    if (line.size - prev.size).abs() > 0.12 * em
        || (line.bold != prev.bold || line.italic != prev.italic) && !mid_sentence
    {
        return true;
    }
    if para.list.is_some() {
        // A list item's wrapped lines are indented past its bullet.
        return line.x0 < para.lines[0].x0 - 0.5 * em;
    }
    let first_line_indent = line.x0 > prev.x0 + 0.8 * em && line.x0 - prev.x0 < 6.0 * em;
    let prev_short = prev.x1 < para.lines.iter().map(|l| l.x1).fold(0.0, f32::max) - 3.0 * em;
    (first_line_indent && ends_sentence(&prev.text)) || (prev_short && ends_sentence(&prev.text))
}

/// A bold or italic lead of a line that reads as a run-in heading ("5.1 Results The
/// model ..."): short, not a sentence fragment, followed by a capitalised sentence.
fn run_in_heading(line: &Line, body: &Body) -> Option<String> {
    let lead = line.lead.as_deref()?.trim();
    let rest = line
        .text
        .trim()
        .get(lead.len()..)
        .unwrap_or_default()
        .trim_start();
    let words = lead.split_whitespace().count();
    let styled_apart = !(body.italic || body.bold && line.bold);
    let ok = styled_apart
        && (1..=12).contains(&words)
        && lead.chars().any(char::is_alphabetic)
        && lead
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
        && !lead.ends_with([',', ';'])
        && rest.chars().next().is_some_and(char::is_uppercase)
        && (numbered_heading(lead) || words >= 2);
    ok.then(|| lead.trim_end_matches(['.', ':']).to_owned())
}

/// The blocks of one page, from its pieces in reading order.
pub(crate) fn blocks(pieces: Vec<Piece>, body: &Body, page: u32) -> Vec<Block> {
    let mut out = Vec::new();
    let mut para: Option<Para> = None;
    for piece in pieces {
        match piece {
            Piece::Line(mut line) => {
                let heading = run_in_heading(&line, body);
                match para.as_mut() {
                    Some(p) if heading.is_none() && !breaks(p, &line, body) => p.push(line),
                    _ => {
                        if let Some(done) = para.take() {
                            out.extend(done.into_block(body, page));
                        }
                        if let Some(h) = heading {
                            let lead_len = line.lead.as_deref().map_or(0, |l| l.trim().len());
                            let text = line.text.trim();
                            line.text = text.get(lead_len..).unwrap_or_default().trim().to_owned();
                            line.lead = None;
                            line.bold = false;
                            line.italic = false;
                            let level = if numbered_depth(&h) >= 2 { 3 } else { 2 };
                            out.push(Block {
                                kind: BlockKind::Heading(level),
                                text: h,
                                page,
                            });
                        }
                        para = Some(Para::new(line));
                    }
                }
            }
            Piece::Block(b) => {
                if let Some(done) = para.take() {
                    out.extend(done.into_block(body, page));
                }
                out.push(b);
            }
        }
    }
    if let Some(done) = para {
        out.extend(done.into_block(body, page));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_markers_and_hyphens() {
        assert_eq!(list_marker("• item one"), Some((3, false)));
        assert_eq!(list_marker("12) twelve"), Some((3, true)));
        assert_eq!(list_marker("2021 was a year"), None);
        let mut s = "infor-".to_owned();
        join_line(&mut s, "mation here");
        assert_eq!(s, "information here");
        let mut s = "COVID-".to_owned();
        join_line(&mut s, "19");
        assert_eq!(s, "COVID-19");
        assert_eq!(numbered_depth("3.1 Results"), 2);
        assert_eq!(numbered_depth("Results"), 0);
    }

    fn line(text: &str, size: f32) -> Line {
        Line {
            text: text.into(),
            x0: 50.0,
            x1: 50.0 + size * text.len() as f32,
            top: 100.0,
            bottom: 100.0 + size,
            size,
            bold: true,
            italic: false,
            lead: None,
            column: 0,
        }
    }

    #[test]
    fn a_bold_line_going_on_in_regular_type_mid_sentence_is_one_paragraph() {
        let body = Body {
            size: 10.0,
            bold: false,
            italic: false,
            line_gap: 2.0,
        };
        let first = line(
            "IBM MT/ST (Magnetic Tape/Selectric Typewriter): Introduced in 1964, this",
            10.0,
        );
        let mut next = line(
            "machine combined IBM's Selectric typewriter with magnetic tape storage.",
            10.0,
        );
        (next.bold, next.top, next.bottom) = (false, 112.0, 122.0);
        let out = blocks(
            vec![Piece::Line(first.clone()), Piece::Line(next.clone())],
            &body,
            1,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].kind, BlockKind::Paragraph);
        assert!(
            out[0].text.contains("1964, this machine combined"),
            "{out:?}"
        );
        // A bold line that ends its sentence, or a next line that starts one, still
        // breaks: a heading over its paragraph.
        let mut heading = first;
        heading.text = "Early machines".into();
        next.text = "Machines combined a typewriter with tape.".into();
        let out = blocks(vec![Piece::Line(heading), Piece::Line(next)], &body, 1);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].kind, BlockKind::Heading(3));
    }

    #[test]
    fn a_chapter_number_in_display_type_is_a_heading() {
        let body = Body {
            size: 10.0,
            bold: false,
            italic: false,
            line_gap: 2.0,
        };
        let level =
            |text: &str, size: f32| heading_level(&Para::new(line(text, size)), text, &body);
        assert_eq!(level("1", 40.0), Some(1));
        assert_eq!(level("1", 11.0), None);
        assert_eq!(level("2021", 40.0), None);
        assert_eq!(level("Results", 14.0), Some(2));
    }
}
