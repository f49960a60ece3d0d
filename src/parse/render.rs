//! Renderings of a parsed document and its tables: Markdown (headings, lists, tables)
//! and plain text.

use super::{Block, BlockKind, ParsedDocument, Table};

impl Table {
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.rows.len()
    }

    /// Number of columns (of the widest row).
    pub fn n_cols(&self) -> usize {
        self.rows.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Rows as lines of cells separated by " | ".
    pub fn to_text(&self) -> String {
        self.rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| one_line(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A GitHub-flavoured Markdown table; the first row is the header.
    pub fn to_markdown(&self) -> String {
        let cols = self.n_cols();
        if cols == 0 {
            return String::new();
        }
        let line = |r: &[String]| {
            let cells: Vec<String> = (0..cols)
                .map(|i| {
                    r.get(i)
                        .map(|c| one_line(c).replace('|', "\\|"))
                        .unwrap_or_default()
                })
                .collect();
            format!("| {} |", cells.join(" | "))
        };
        let mut out = vec![line(&self.rows[0]), format!("|{}", "---|".repeat(cols))];
        out.extend(self.rows[1..].iter().map(|r| line(r)));
        out.join("\n")
    }
}

/// Whether a list item's text starts with its own number ("3. text").
fn is_numbered(t: &str) -> bool {
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && t[digits..].starts_with(". ")
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One block as Markdown (an image without a description is a `<!-- image -->` marker).
pub fn block_markdown(b: &Block) -> String {
    let t = b.text.trim();
    match &b.kind {
        BlockKind::Heading(l) => {
            format!("{} {}", "#".repeat((*l).clamp(1, 6) as usize), one_line(t))
        }
        BlockKind::Paragraph => t.to_owned(),
        BlockKind::ListItem if is_numbered(t) => one_line(t),
        BlockKind::ListItem => format!("- {}", one_line(t)),
        BlockKind::Code => format!("```\n{t}\n```"),
        BlockKind::Table(table) => table.to_markdown(),
        BlockKind::Image(_) if t.is_empty() => "<!-- image -->".to_owned(),
        BlockKind::Image(_) => format!("<!-- image -->\n{t}"),
    }
}

/// Blocks as Markdown, separated by blank lines.
pub fn blocks_markdown<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> String {
    blocks
        .into_iter()
        .map(block_markdown)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The document as Markdown.
pub fn to_markdown(doc: &ParsedDocument) -> String {
    blocks_markdown(&doc.blocks)
}

/// The document as plain text, blocks separated by blank lines.
pub fn to_plain_text(doc: &ParsedDocument) -> String {
    doc.blocks
        .iter()
        .map(|b| b.text.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A table as the API reports it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TableInfo {
    pub index: usize,
    pub page_number: u32,
    pub rows: usize,
    pub cols: usize,
    /// Plain text, one row per line, cells separated by " | ".
    pub content: String,
    pub markdown: String,
}

/// An image as the API reports it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ImageInfo {
    pub index: usize,
    pub page_number: u32,
    pub description: String,
    /// `vision_model`, `ocr` or `image_size`: where the description came from.
    pub description_source: String,
}

/// Tables of `blocks` with their document-wide indexes starting at `first`.
pub fn tables_of<'a>(blocks: impl IntoIterator<Item = &'a Block>, first: usize) -> Vec<TableInfo> {
    blocks
        .into_iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Table(t) => Some((b.page, t)),
            _ => None,
        })
        .enumerate()
        .map(|(i, (page, t))| TableInfo {
            index: first + i,
            page_number: page,
            rows: t.n_rows(),
            cols: t.n_cols(),
            content: t.to_text(),
            markdown: t.to_markdown(),
        })
        .collect()
}

/// Images of `blocks` with their document-wide indexes starting at `first`.
pub fn images_of<'a>(blocks: impl IntoIterator<Item = &'a Block>, first: usize) -> Vec<ImageInfo> {
    blocks
        .into_iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Image(img) => Some((b, img)),
            _ => None,
        })
        .enumerate()
        .map(|(i, (b, img))| ImageInfo {
            index: first + i,
            page_number: b.page,
            description: b.text.clone(),
            description_source: img.description_source.as_str().to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_tables_and_headings() {
        let t = Table {
            rows: vec![vec!["a".into(), "b|c".into()], vec!["1".into()]],
        };
        assert_eq!(t.to_markdown(), "| a | b\\|c |\n|---|---|\n| 1 |  |");
        assert_eq!((t.n_rows(), t.n_cols()), (2, 2));
        let doc = ParsedDocument {
            blocks: vec![
                Block {
                    kind: BlockKind::Heading(2),
                    text: "Part".into(),
                    page: 1,
                },
                Block {
                    kind: BlockKind::ListItem,
                    text: "x".into(),
                    page: 1,
                },
            ],
            ..Default::default()
        };
        assert_eq!(to_markdown(&doc), "## Part\n\n- x");
    }
}
