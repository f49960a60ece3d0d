//! The block list every Office parser appends to: empty text is dropped, whitespace
//! tidied, and each block stamped with the current page (slide, sheet).

use crate::parse::{Block, BlockKind, Image, Table};

/// Blocks in reading order, plus the page they are being written on.
#[derive(Debug, Default)]
pub struct Blocks {
    pub blocks: Vec<Block>,
    /// 1-based page the next block lands on.
    pub page: u32,
}

impl Blocks {
    /// An empty list starting on page 1.
    pub fn new() -> Self {
        Self {
            blocks: Vec::new(),
            page: 1,
        }
    }

    /// A heading; level 0 is the document title (callers shift levels at the end).
    pub fn heading(&mut self, level: u8, text: &str) {
        self.text_block(BlockKind::Heading(level), text);
    }

    pub fn paragraph(&mut self, text: &str) {
        self.text_block(BlockKind::Paragraph, text);
    }

    pub fn list_item(&mut self, text: &str) {
        self.text_block(BlockKind::ListItem, text);
    }

    /// A table; tables without any text are dropped.
    pub fn table(&mut self, table: Table) {
        let table = trim_table(table);
        if table.rows.is_empty() {
            return;
        }
        let text = table.to_text();
        self.blocks.push(Block {
            kind: BlockKind::Table(table),
            text,
            page: self.page,
        });
    }

    pub fn image(&mut self, image: Image) {
        let text = image.description.clone();
        self.blocks.push(Block {
            kind: BlockKind::Image(image),
            text,
            page: self.page,
        });
    }

    /// Appends another list's blocks, keeping their pages.
    pub fn extend(&mut self, other: Blocks) {
        self.blocks.extend(other.blocks);
    }

    fn text_block(&mut self, kind: BlockKind, text: &str) {
        let text = tidy(text);
        if text.is_empty() {
            return;
        }
        self.blocks.push(Block {
            kind,
            text,
            page: self.page,
        });
    }
}

/// Collapses runs of spaces and tabs, trims every line, drops blank lines at the ends
/// and control characters Office leaves behind (vertical tab = soft break).
pub fn tidy(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| match c {
            '\u{b}' | '\u{2028}' | '\u{2029}' => '\n',
            '\u{a0}' | '\t' => ' ',
            c => c,
        })
        .filter(|c| *c == '\n' || !c.is_control())
        .collect();
    let lines: Vec<String> = cleaned
        .split('\n')
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.join("\n").trim_matches('\n').to_owned()
}

/// Drops rows and columns with no text at all (layout spacers) and tidies cells.
pub fn trim_table(table: Table) -> Table {
    let rows: Vec<Vec<String>> = table
        .rows
        .into_iter()
        .map(|r| r.iter().map(|c| tidy(c)).collect::<Vec<_>>())
        .filter(|r| r.iter().any(|c| !c.is_empty()))
        .collect();
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let keep: Vec<bool> = (0..cols)
        .map(|i| rows.iter().any(|r| r.get(i).is_some_and(|c| !c.is_empty())))
        .collect();
    let rows = rows
        .into_iter()
        .map(|r| {
            let mut r: Vec<String> = (0..cols)
                .filter(|i| keep[*i])
                .map(|i| r.get(i).cloned().unwrap_or_default())
                .collect();
            r.shrink_to_fit();
            r
        })
        .collect();
    Table { rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidies_text_and_tables() {
        assert_eq!(tidy("  a \t b\u{b}c  \n\n"), "a b\nc");
        let t = trim_table(Table {
            rows: vec![
                vec!["".into(), "a".into(), "".into()],
                vec!["".into(), "".into(), "".into()],
                vec!["".into(), "b".into()],
            ],
        });
        assert_eq!(t.rows, vec![vec!["a".to_string()], vec!["b".to_string()]]);
    }
}
