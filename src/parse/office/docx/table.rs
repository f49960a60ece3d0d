//! `w:tbl` -> a rectangular grid: horizontal spans (`gridSpan`) and vertical merges
//! (`vMerge`) repeat the merged cell's text in every grid cell it covers, and rows
//! that start late (`gridBefore`) are padded.

use crate::parse::office::xml::Element;
use crate::parse::Table;

/// Widest grid built (a hostile `gridSpan` could ask for millions of columns).
const MAX_COLS: usize = 512;
/// Most bytes of text one table may copy into the cells a merge covers; past it,
/// covered cells stay empty (a long text merged over thousands of cells would
/// otherwise multiply memory).
const MAX_REPEATED_BYTES: usize = 8 << 20;

/// Builds the grid of `tbl`, asking `cell_text` for the text of each cell.
pub fn grid(tbl: &Element, mut cell_text: impl FnMut(&Element) -> String) -> Table {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut repeat_budget = MAX_REPEATED_BYTES;
    for tr in unwrap_all(tbl, "tr") {
        let mut row: Vec<String> = Vec::new();
        let before = tr
            .child("trPr")
            .and_then(|p| p.child("gridBefore"))
            .and_then(|g| g.attr("val"))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
            .min(MAX_COLS);
        row.resize(before, String::new());
        for tc in unwrap_all(tr, "tc") {
            let pr = tc.child("tcPr");
            let span = pr
                .and_then(|p| p.child("gridSpan"))
                .and_then(|g| g.attr("val"))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(1)
                .clamp(1, MAX_COLS);
            let continues = pr
                .and_then(|p| p.child("vMerge"))
                .is_some_and(|m| m.attr("val").is_none_or(|v| v == "continue"));
            let col = row.len();
            let (text, copied) = if continues {
                let above = rows
                    .last()
                    .and_then(|above| above.get(col))
                    .cloned()
                    .unwrap_or_default();
                (above, true)
            } else {
                (cell_text(tc), false)
            };
            for i in 0..span {
                if row.len() >= MAX_COLS {
                    break;
                }
                if (copied || i > 0) && text.len() > repeat_budget {
                    row.push(String::new());
                    continue;
                }
                if copied || i > 0 {
                    repeat_budget -= text.len();
                }
                row.push(text.clone());
            }
        }
        rows.push(row);
    }
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    for r in &mut rows {
        r.resize(cols, String::new());
    }
    Table { rows }
}

/// Children named `name`, looking through content controls and custom XML wrappers.
fn unwrap_all<'e>(parent: &'e Element, name: &str) -> Vec<&'e Element> {
    let mut out = Vec::new();
    for e in parent.elements() {
        if e.name() == name {
            out.push(e);
        } else if matches!(e.name(), "sdt" | "customXml" | "sdtContent") {
            out.extend(unwrap_all(e, name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::office::xml;

    #[test]
    fn spans_and_merges_repeat_text() {
        let x = br#"<w:tbl xmlns:w="w"><w:tr><w:tc><w:p>A</w:p></w:tc><w:tc><w:tcPr><w:gridSpan w:val="2"/><w:vMerge w:val="restart"/></w:tcPr><w:p>B</w:p></w:tc></w:tr><w:tr><w:trPr><w:gridBefore w:val="1"/></w:trPr><w:tc><w:tcPr><w:gridSpan w:val="2"/><w:vMerge/></w:tcPr></w:tc></w:tr></w:tbl>"#;
        let t = grid(&xml::parse(x).unwrap(), |tc| tc.text());
        assert_eq!(
            t.rows,
            vec![
                vec!["A".to_string(), "B".into(), "B".into()],
                vec!["".into(), "B".into(), "B".into()],
            ]
        );
    }
}
