//! XLSX (and macro-enabled XLSM content) through calamine: one page per sheet, the
//! sheet name as a heading, its cells as tables (blocks of rows separated by empty
//! rows, each trimmed to its used columns; title rows above a table as paragraphs;
//! merged cells repeat their value; formulas give their cached values; dates as ISO
//! 8601, see `cell_text`), then the charts, pictures and reviewer comments of the
//! sheet. Chart sheets contribute their chart.

mod cell_text;
mod extras;

use std::collections::{BTreeMap, HashMap};
use std::io::Cursor;

use calamine::{open_workbook_from_rs, Reader, SheetType, Xlsx, XlsxError};

use self::cell_text::{cell_text, TimeFormats};
use self::extras::{push_drawing, sheet_extras};
use super::blocks::Blocks;
use super::package::Package;
use super::{expect_root, finish};
use crate::parse::{ParseError, ParsedDocument, Table};

/// Most non-empty cells read from one workbook.
const MAX_CELLS: usize = 2_000_000;
/// Largest grid (rows x columns) one block of rows may span.
const MAX_GRID: usize = 4_000_000;
/// A merged range: first and last (row, column), inclusive.
type Merge = ((u32, u32), (u32, u32));

/// Largest merged region whose value is repeated into every cell.
const MAX_MERGE_AREA: u64 = 10_000;
/// Most bytes of text merged regions may copy, per sheet.
const MAX_REPEATED_BYTES: usize = 16 << 20;

/// Parses an XLSX/XLSM file.
pub fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let mut pkg = Package::open(bytes)?;
    // calamine inflates parts itself, without limits: prove the archive safe first.
    pkg.zip().verify_all()?;
    let main = pkg.main_part()?;
    let workbook = pkg
        .xml(&main)?
        .ok_or_else(|| ParseError::Invalid("the workbook part is missing".into()))?;
    expect_root(&workbook, "workbook")?;
    check_shared_strings(&mut pkg)?;
    let extras = sheet_extras(&mut pkg);
    let time_formats = TimeFormats::read(&mut pkg);
    let mut wb: Xlsx<_> = open_workbook_from_rs(Cursor::new(bytes)).map_err(xlsx_error)?;
    let sheets = wb.sheets_metadata().to_vec();
    let mut out = Blocks::new();
    let mut budget = MAX_CELLS;
    for (i, sheet) in sheets.iter().enumerate() {
        out.page = i as u32 + 1;
        out.heading(1, &sheet.name);
        if matches!(sheet.typ, SheetType::WorkSheet | SheetType::MacroSheet) {
            // Merged cells only refine the tables; a sheet whose merges cannot be
            // read still parses.
            let merges: Vec<Merge> = wb
                .merge_cells_by_sheet_name(&sheet.name)
                .unwrap_or_default()
                .into_iter()
                .map(|d| (d.start, d.end))
                .collect();
            let cells = read_cells(&mut wb, &sheet.name, &time_formats, &mut budget)?;
            push_cells(cells, &merges, &mut out)?;
        }
        if let Some(extra) = extras.get(&sheet.name) {
            for part in &extra.drawings {
                push_drawing(&mut pkg, part, &mut out);
            }
            for line in &extra.comments {
                out.paragraph(line);
            }
        }
    }
    let (title, author) = pkg.core_properties();
    Ok(finish(
        out.blocks,
        title,
        author,
        sheets.len().max(1) as u32,
    ))
}

/// calamine reserves room for as many shared strings as the table's `uniqueCount`
/// claims, before reading any: a forged count would make it allocate terabytes. Every
/// string takes at least a few bytes of XML, which bounds any honest count.
fn check_shared_strings(pkg: &mut Package) -> Result<(), ParseError> {
    let names: Vec<String> = pkg
        .zip()
        .names()
        .into_iter()
        .filter(|n| n.ends_with("sharedstrings.xml"))
        .collect();
    for name in names {
        let Some(bytes) = pkg.zip().read(&name)? else {
            continue;
        };
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).into_owned();
        let attr = "uniqueCount=";
        let Some(at) = head.find(attr) else {
            continue;
        };
        let digits: String = head[at + attr.len()..]
            .chars()
            .skip_while(|c| *c == '"' || *c == '\'' || c.is_whitespace())
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() {
            continue;
        }
        // Too many digits for a u64 is as forged as a huge number.
        let declared: u64 = digits.parse().unwrap_or(u64::MAX);
        if declared > bytes.len() as u64 / 4 + 16 {
            return Err(ParseError::Invalid(
                "the workbook's shared string table declares more strings than it holds".into(),
            ));
        }
    }
    Ok(())
}

/// Non-empty cells of a sheet as (row, column) -> text.
fn read_cells(
    wb: &mut Xlsx<Cursor<&[u8]>>,
    name: &str,
    time_formats: &TimeFormats,
    budget: &mut usize,
) -> Result<BTreeMap<(u32, u32), String>, ParseError> {
    let mut cells = BTreeMap::new();
    let mut reader = wb.worksheet_cells_reader(name).map_err(xlsx_error)?;
    while let Some((cell, style)) = reader.next_cell_with_style_id().map_err(xlsx_error)? {
        let text = cell_text(cell.get_value(), time_formats.shows_time(style));
        if text.trim().is_empty() {
            continue;
        }
        if *budget == 0 {
            return Err(ParseError::TooLarge(format!(
                "the workbook has more than {MAX_CELLS} non-empty cells"
            )));
        }
        *budget -= 1;
        cells.insert(cell.get_position(), text);
    }
    Ok(cells)
}

/// Splits a sheet's cells into blocks of consecutive rows and appends each as a table
/// (a lone cell as a paragraph).
fn push_cells(
    mut cells: BTreeMap<(u32, u32), String>,
    merges: &[Merge],
    out: &mut Blocks,
) -> Result<(), ParseError> {
    let mut repeat_budget = MAX_REPEATED_BYTES;
    for &(start, end) in merges {
        let area = (u64::from(end.0.saturating_sub(start.0)) + 1)
            .saturating_mul(u64::from(end.1.saturating_sub(start.1)) + 1);
        let Some(value) = cells.get(&start).cloned() else {
            continue;
        };
        let cost = usize::try_from(area)
            .unwrap_or(usize::MAX)
            .saturating_mul(value.len());
        if area > MAX_MERGE_AREA || cost > repeat_budget {
            continue;
        }
        repeat_budget -= cost;
        for r in start.0..=end.0 {
            for c in start.1..=end.1 {
                cells.entry((r, c)).or_insert_with(|| value.clone());
            }
        }
    }
    let mut group: Vec<((u32, u32), String)> = Vec::new();
    let mut last_row: Option<u32> = None;
    for (pos, text) in cells {
        if last_row.is_some_and(|r| pos.0 > r.saturating_add(1)) {
            push_group(std::mem::take(&mut group), out)?;
        }
        last_row = Some(pos.0);
        group.push((pos, text));
    }
    push_group(group, out)
}

fn push_group(mut group: Vec<((u32, u32), String)>, out: &mut Blocks) -> Result<(), ParseError> {
    // Title rows above a table (one label, maybe merged across the row) read as
    // paragraphs; a one-column table keeps its rows.
    loop {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let (row, label) = (first.0 .0, first.1.clone());
        let in_row = group.iter().take_while(|(p, _)| p.0 == row).count();
        let one_label = group[..in_row].iter().all(|(_, t)| *t == label);
        let rest_wide = {
            let mut cols: Vec<u32> = group[in_row..].iter().map(|(p, _)| p.1).collect();
            cols.sort_unstable();
            cols.dedup();
            cols.len() > 1
        };
        if !one_label || (in_row < group.len() && !rest_wide) {
            break;
        }
        out.paragraph(&label);
        group.drain(..in_row);
    }
    let mut rows: Vec<u32> = group.iter().map(|((r, _), _)| *r).collect();
    rows.dedup();
    let mut cols: Vec<u32> = group.iter().map(|((_, c), _)| *c).collect();
    cols.sort_unstable();
    cols.dedup();
    if rows.len().saturating_mul(cols.len()) > MAX_GRID {
        return Err(ParseError::TooLarge(
            "a sheet's used range is too large to tabulate".into(),
        ));
    }
    let col_index: HashMap<u32, usize> = cols.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let mut grid = vec![vec![String::new(); cols.len()]; rows.len()];
    let mut row_i = 0;
    let mut cur = rows[0];
    for ((r, c), text) in group {
        if r != cur {
            row_i += 1;
            cur = r;
        }
        if let (Some(row), Some(&ci)) = (grid.get_mut(row_i), col_index.get(&c)) {
            row[ci] = text;
        }
    }
    out.table(Table { rows: grid });
    Ok(())
}

fn xlsx_error(e: XlsxError) -> ParseError {
    match e {
        XlsxError::Password => ParseError::Encrypted,
        other => ParseError::Invalid(format!("the workbook could not be read: {other}")),
    }
}
