//! Markdown (CommonMark + tables): headings with levels, paragraphs, list items,
//! code blocks and tables as blocks; the first level-1 heading is the title.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::{Block, BlockKind, ParsedDocument};

/// Parses Markdown text.
pub fn parse(text: &str) -> ParsedDocument {
    let mut blocks: Vec<Block> = Vec::new();
    let mut buf = String::new();
    let mut kind: Option<BlockKind> = None;
    let mut list_depth = 0usize;
    let mut table_row: Vec<String> = Vec::new();
    let mut in_table = false;
    let push = |blocks: &mut Vec<Block>, kind: BlockKind, buf: &mut String| {
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
            Event::Start(Tag::Heading { level, .. }) => {
                push(&mut blocks, kind.unwrap_or(BlockKind::Paragraph), &mut buf);
                kind = Some(BlockKind::Heading(level as u8));
            }
            Event::End(TagEnd::Heading(_)) => {
                push(
                    &mut blocks,
                    kind.take().unwrap_or(BlockKind::Paragraph),
                    &mut buf,
                );
            }
            Event::Start(Tag::Item) => {
                list_depth += 1;
                push(&mut blocks, kind.unwrap_or(BlockKind::ListItem), &mut buf);
                kind = Some(BlockKind::ListItem);
            }
            Event::End(TagEnd::Item) => {
                list_depth = list_depth.saturating_sub(1);
                push(&mut blocks, BlockKind::ListItem, &mut buf);
                kind = None;
            }
            Event::Start(Tag::Paragraph) if list_depth == 0 && !in_table => {
                kind = Some(BlockKind::Paragraph);
            }
            Event::End(TagEnd::Paragraph) if list_depth == 0 && !in_table => {
                push(
                    &mut blocks,
                    kind.take().unwrap_or(BlockKind::Paragraph),
                    &mut buf,
                );
            }
            Event::End(TagEnd::Paragraph) => buf.push('\n'),
            Event::Start(Tag::CodeBlock(_)) => {
                push(&mut blocks, kind.unwrap_or(BlockKind::Paragraph), &mut buf);
                kind = Some(BlockKind::Code);
            }
            Event::End(TagEnd::CodeBlock) => push(
                &mut blocks,
                kind.take().unwrap_or(BlockKind::Code),
                &mut buf,
            ),
            Event::Start(Tag::Table(_)) => {
                push(&mut blocks, kind.unwrap_or(BlockKind::Paragraph), &mut buf);
                in_table = true;
                kind = Some(BlockKind::Table);
            }
            Event::End(TagEnd::Table) => {
                in_table = false;
                push(&mut blocks, BlockKind::Table, &mut buf);
                kind = None;
            }
            Event::Start(Tag::TableCell) => table_row.push(String::new()),
            Event::End(TagEnd::TableHead) | Event::End(TagEnd::TableRow) => {
                buf.push_str(&table_row.join(" | "));
                buf.push('\n');
                table_row.clear();
            }
            Event::Text(t) | Event::Code(t) => match table_row.last_mut() {
                Some(cell) if in_table => cell.push_str(&t),
                _ => buf.push_str(&t),
            },
            Event::SoftBreak | Event::HardBreak => buf.push(if kind == Some(BlockKind::Code) {
                '\n'
            } else {
                ' '
            }),
            Event::Html(h) | Event::InlineHtml(h) => {
                // Raw HTML is kept only as its text, never as markup.
                let stripped: String = strip_tags(&h);
                buf.push_str(&stripped);
            }
            _ => {}
        }
    }
    push(&mut blocks, kind.unwrap_or(BlockKind::Paragraph), &mut buf);
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
        let d = parse("# Title\n\nIntro text.\n\n## Part\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nfn x()\n```\n");
        let kinds: Vec<_> = d.blocks.iter().map(|b| b.kind).collect();
        assert_eq!(
            kinds,
            vec![
                BlockKind::Heading(1),
                BlockKind::Paragraph,
                BlockKind::Heading(2),
                BlockKind::ListItem,
                BlockKind::ListItem,
                BlockKind::Table,
                BlockKind::Code
            ]
        );
        assert_eq!(d.title.as_deref(), Some("Title"));
        assert_eq!(d.blocks[5].text, "a | b\n1 | 2");
        assert_eq!(d.blocks[3].text, "one");
    }
}
