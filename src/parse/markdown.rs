//! Markdown (CommonMark + tables): headings with levels, paragraphs, list items, code
//! blocks and tables as blocks; the first level-1 heading is the title.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::{Block, BlockKind, ParsedDocument, Table};

/// What the parser is inside of.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    None,
    Heading(u8),
    Paragraph,
    Item,
    Code,
}

/// Parses Markdown text.
pub fn parse(text: &str) -> ParsedDocument {
    let mut blocks: Vec<Block> = Vec::new();
    let mut buf = String::new();
    let mut open = Open::None;
    let mut list_depth = 0usize;
    let mut table: Option<Table> = None;
    // Raw HTML blocks are parsed as HTML (tables, lists, paragraphs inside them).
    let mut html: Option<String> = None;
    let emit = |blocks: &mut Vec<Block>, kind: BlockKind, buf: &mut String| {
        let t = buf.trim();
        if !t.is_empty() {
            blocks.push(Block {
                kind,
                text: t.to_owned(),
                page: 1,
            });
        }
        buf.clear();
    };
    for ev in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match ev {
            Event::Start(Tag::Heading { level, .. }) => open = Open::Heading(level as u8),
            Event::End(TagEnd::Heading(_)) => {
                if let Open::Heading(l) = open {
                    emit(&mut blocks, BlockKind::Heading(l), &mut buf);
                }
                open = Open::None;
            }
            Event::Start(Tag::Item) => {
                // Text of an outer item before a nested list is its own item.
                if list_depth > 0 {
                    emit(&mut blocks, BlockKind::ListItem, &mut buf);
                }
                list_depth += 1;
                open = Open::Item;
            }
            Event::End(TagEnd::Item) => {
                emit(&mut blocks, BlockKind::ListItem, &mut buf);
                list_depth = list_depth.saturating_sub(1);
                open = if list_depth > 0 {
                    Open::Item
                } else {
                    Open::None
                };
            }
            Event::Start(Tag::Paragraph) if open == Open::None => open = Open::Paragraph,
            Event::End(TagEnd::Paragraph) if open == Open::Paragraph => {
                emit(&mut blocks, BlockKind::Paragraph, &mut buf);
                open = Open::None;
            }
            Event::End(TagEnd::Paragraph) => buf.push(' '),
            Event::Start(Tag::CodeBlock(_)) => {
                emit(&mut blocks, BlockKind::Paragraph, &mut buf);
                open = Open::Code;
            }
            Event::End(TagEnd::CodeBlock) => {
                emit(&mut blocks, BlockKind::Code, &mut buf);
                open = if list_depth > 0 {
                    Open::Item
                } else {
                    Open::None
                };
            }
            Event::Start(Tag::Table(_)) => table = Some(Table::default()),
            Event::End(TagEnd::Table) => {
                if let Some(t) = table.take() {
                    if !t.rows.is_empty() {
                        blocks.push(Block {
                            text: t.to_text(),
                            kind: BlockKind::Table(t),
                            page: 1,
                        });
                    }
                }
            }
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                if let Some(t) = table.as_mut() {
                    t.rows.push(Vec::new());
                }
            }
            Event::Start(Tag::TableCell) => {
                if let Some(row) = table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(String::new());
                }
            }
            Event::Text(t) | Event::Code(t) => push_text(&mut table, &mut buf, &t),
            Event::SoftBreak | Event::HardBreak => {
                let sep = if open == Open::Code { "\n" } else { " " };
                push_text(&mut table, &mut buf, sep);
            }
            Event::Start(Tag::HtmlBlock) => {
                emit(&mut blocks, BlockKind::Paragraph, &mut buf);
                html = Some(String::new());
            }
            Event::End(TagEnd::HtmlBlock) => {
                if let Some(h) = html.take() {
                    blocks.extend(super::html::parse(&h).blocks);
                }
            }
            Event::Html(h) if html.is_some() => html.get_or_insert_with(String::new).push_str(&h),
            // Inline HTML is kept only as its text, never as markup.
            Event::Html(h) | Event::InlineHtml(h) => {
                push_text(&mut table, &mut buf, &strip_tags(&h))
            }
            _ => {}
        }
    }
    emit(&mut blocks, BlockKind::Paragraph, &mut buf);
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

fn push_text(table: &mut Option<Table>, buf: &mut String, s: &str) {
    match table
        .as_mut()
        .and_then(|t| t.rows.last_mut())
        .and_then(|r| r.last_mut())
    {
        Some(cell) => cell.push_str(s),
        None => buf.push_str(s),
    }
}

fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_lists_tables_code() {
        let d = parse(
            "# Title\n\nIntro text.\n\n## Part\n\n- one\n- two\n  - nested\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nfn x()\n```\n",
        );
        let kinds: Vec<String> = d
            .blocks
            .iter()
            .map(|b| format!("{:?}", b.kind).chars().take(9).collect())
            .collect();
        assert_eq!(
            kinds,
            [
                "Heading(1",
                "Paragraph",
                "Heading(2",
                "ListItem",
                "ListItem",
                "ListItem",
                "Table(Tab",
                "Code"
            ]
        );
        assert_eq!(d.title.as_deref(), Some("Title"));
        assert_eq!(d.blocks[3].text, "one");
        assert_eq!(d.blocks[5].text, "nested");
        match &d.blocks[6].kind {
            BlockKind::Table(t) => assert_eq!(t.rows, vec![vec!["a", "b"], vec!["1", "2"]]),
            other => panic!("expected a table, got {other:?}"),
        }
        assert_eq!(d.blocks[7].text, "fn x()");
    }
}
