//! CSV and other delimited text: encoding and delimiter detection, quoted fields,
//! ragged rows padded to the widest row; the whole file is one table.

use super::{text, Block, BlockKind, ParseError, ParsedDocument, Table};

/// Candidate delimiters, in order of preference on ties.
const DELIMITERS: &[u8] = b",;\t|";
/// Rows read at most (a larger file is refused rather than held in memory twice).
const MAX_ROWS: usize = 1_000_000;

/// Parses delimited text.
pub fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let text = text::decode(bytes)?;
    let delimiter = detect_delimiter(&text);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| ParseError::Invalid(format!("CSV: {e}")))?;
        let row: Vec<String> = rec.iter().map(|c| c.trim().to_owned()).collect();
        if row.iter().any(|c| !c.is_empty()) {
            rows.push(row);
        }
        if rows.len() > MAX_ROWS {
            return Err(ParseError::TooLarge(format!("more than {MAX_ROWS} rows")));
        }
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    for r in &mut rows {
        r.resize(width, String::new());
    }
    let table = Table { rows };
    let blocks = if table.rows.is_empty() {
        Vec::new()
    } else {
        vec![Block {
            text: table.to_text(),
            kind: BlockKind::Table(table),
            page: 1,
        }]
    };
    Ok(ParsedDocument {
        title: None,
        author: None,
        pages: 1,
        blocks,
    })
}

/// The delimiter whose per-line count (outside quotes) is highest and most consistent
/// over the first lines.
fn detect_delimiter(text: &str) -> u8 {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(50)
        .collect();
    let mut best = (b',', 0.0f64);
    for &d in DELIMITERS {
        let counts: Vec<usize> = lines.iter().map(|l| count_outside_quotes(l, d)).collect();
        if counts.is_empty() || counts.iter().all(|&c| c == 0) {
            continue;
        }
        let mode = mode(&counts);
        let agree = counts.iter().filter(|&&c| c == mode).count() as f64 / counts.len() as f64;
        let score = agree * (mode as f64).min(50.0).sqrt() + if mode > 0 { 1.0 } else { 0.0 };
        if score > best.1 {
            best = (d, score);
        }
    }
    best.0
}

fn count_outside_quotes(line: &str, d: u8) -> usize {
    let mut quoted = false;
    line.bytes()
        .filter(|&b| {
            if b == b'"' {
                quoted = !quoted;
            }
            b == d && !quoted
        })
        .count()
}

fn mode(v: &[usize]) -> usize {
    let mut counts = std::collections::HashMap::new();
    for &x in v {
        *counts.entry(x).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(x, n)| (n, x))
        .map(|(x, _)| x)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(d: &ParsedDocument) -> Vec<Vec<String>> {
        match &d.blocks[0].kind {
            BlockKind::Table(t) => t.rows.clone(),
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn detects_delimiters_and_pads_ragged_rows() {
        assert_eq!(rows(&parse(b"a;b;c\n1;2;3\n").unwrap())[1], ["1", "2", "3"]);
        assert_eq!(rows(&parse(b"a\tb\n1\t2\n").unwrap())[0], ["a", "b"]);
        assert_eq!(rows(&parse(b"a|b\n1|2\n").unwrap())[1], ["1", "2"]);
        let r = rows(&parse(b"x,y,z\n\"1,5\",2\n3,4,5,6\n").unwrap());
        assert_eq!(r[1], ["1,5", "2", "", ""]);
        assert_eq!(r[0].len(), 4);
        assert_eq!(rows(&parse(b"only\nvalues\n").unwrap())[1], ["values"]);
    }
}
