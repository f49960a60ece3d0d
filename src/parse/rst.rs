//! reStructuredText: section titles from their adornments (levels in order of first
//! appearance, as docutils assigns them), paragraphs, bullet and enumerated list items,
//! literal blocks; directives and comments are skipped except their indented content.

use super::{Block, BlockKind, ParsedDocument};

fn is_adornment(line: &str) -> Option<char> {
    let t = line.trim_end();
    let c = t.chars().next()?;
    (t.len() >= 3 && c.is_ascii_punctuation() && t.chars().all(|x| x == c)).then_some(c)
}

fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for p in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = t.strip_prefix(p) {
            return Some(rest);
        }
    }
    let digits = t
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '#')
        .count();
    if digits > 0 {
        let rest = &t[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some(r);
        }
    }
    None
}

/// Parses reStructuredText.
pub fn parse(text: &str) -> ParsedDocument {
    let lines: Vec<&str> = text.lines().collect();
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let mut kind = BlockKind::Paragraph;
    let mut literal_next = false;
    let mut i = 0;
    let flush = |para: &mut Vec<&str>, kind: &mut BlockKind, blocks: &mut Vec<Block>| {
        let t = para.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        if !t.trim().is_empty() {
            blocks.push(Block {
                kind: kind.clone(),
                text: t.trim().to_owned(),
                page: 1,
            });
        }
        para.clear();
        *kind = BlockKind::Paragraph;
    };
    while i < lines.len() {
        let line = lines[i];
        // Overlined title: adornment, text, same adornment.
        if let (Some(c), Some(next), Some(under)) =
            (is_adornment(line), lines.get(i + 1), lines.get(i + 2))
        {
            if !next.trim().is_empty() && is_adornment(under) == Some(c) {
                flush(&mut para, &mut kind, &mut blocks);
                let level = level_of(&mut styles, (c, true));
                blocks.push(Block {
                    kind: BlockKind::Heading(level),
                    text: next.trim().to_owned(),
                    page: 1,
                });
                i += 3;
                continue;
            }
        }
        // Underlined title: text, adornment at least as long.
        if let Some(under) = lines.get(i + 1) {
            if let Some(c) = is_adornment(under) {
                if !line.trim().is_empty()
                    && is_adornment(line).is_none()
                    && under.trim().len() >= line.trim().chars().count()
                {
                    flush(&mut para, &mut kind, &mut blocks);
                    let level = level_of(&mut styles, (c, false));
                    blocks.push(Block {
                        kind: BlockKind::Heading(level),
                        text: line.trim().to_owned(),
                        page: 1,
                    });
                    i += 2;
                    continue;
                }
            }
        }
        if line.trim().is_empty() {
            flush(&mut para, &mut kind, &mut blocks);
            i += 1;
            if literal_next {
                // An indented literal block follows `::`.
                let mut code = Vec::new();
                while i < lines.len()
                    && (lines[i].starts_with(' ')
                        || lines[i].starts_with('\t')
                        || lines[i].trim().is_empty())
                {
                    code.push(lines[i]);
                    i += 1;
                }
                let body = dedent(&code);
                if !body.is_empty() {
                    blocks.push(Block {
                        kind: BlockKind::Code,
                        text: body,
                        page: 1,
                    });
                }
                literal_next = false;
            }
            continue;
        }
        if line.trim_start().starts_with(".. ") {
            // A directive or comment: skip its first line; its indented body is read as text.
            flush(&mut para, &mut kind, &mut blocks);
            literal_next = line.contains("code")
                || line.trim_end().ends_with("::") && line.contains("code-block");
            i += 1;
            continue;
        }
        if let Some(item) = list_item(line) {
            flush(&mut para, &mut kind, &mut blocks);
            kind = BlockKind::ListItem;
            para.push(item);
        } else {
            para.push(line);
        }
        if line.trim_end().ends_with("::") {
            if let Some(last) = para.last_mut() {
                // docutils: "text::" ends in one colon; " ::" alone disappears.
                let t = last.trim_end();
                *last = match t.strip_suffix(" ::") {
                    Some(stem) => stem,
                    None => t.strip_suffix(':').unwrap_or(t),
                };
            }
            literal_next = true;
        }
        i += 1;
    }
    flush(&mut para, &mut kind, &mut blocks);
    let title = blocks
        .iter()
        .find(|b| b.kind == BlockKind::Heading(1))
        .map(|b| b.text.clone());
    ParsedDocument {
        title,
        author: None,
        pages: 1,
        blocks,
    }
}

fn level_of(styles: &mut Vec<(char, bool)>, style: (char, bool)) -> u8 {
    let idx = styles.iter().position(|s| *s == style).unwrap_or_else(|| {
        styles.push(style);
        styles.len() - 1
    });
    (idx + 1).min(6) as u8
}

fn dedent(lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_matches('\n')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_lists_literals() {
        let d = parse("=====\nGuide\n=====\n\nIntro para\nwraps here.\n\nInstall\n-------\n\n- one\n- two\n\nExample::\n\n    cargo run\n\nUsage\n-----\n\nText.\n");
        let got: Vec<(String, &str)> = d
            .blocks
            .iter()
            .map(|b| (format!("{:?}", b.kind), b.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Heading(1)".into(), "Guide"),
                ("Paragraph".into(), "Intro para wraps here."),
                ("Heading(2)".into(), "Install"),
                ("ListItem".into(), "one"),
                ("ListItem".into(), "two"),
                ("Paragraph".into(), "Example:"),
                ("Code".into(), "cargo run"),
                ("Heading(2)".into(), "Usage"),
                ("Paragraph".into(), "Text."),
            ]
        );
    }
}
