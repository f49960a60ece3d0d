//! Full grids of ruling lines: the run of row bands that column rules cross, and the
//! table read from it (every band a row, even when its cells wrap over lines).

use super::column_rules;
use crate::parse::pdf::fragments::Fragment;
use crate::parse::pdf::layout::Rect;
use crate::parse::pdf::objects::Rule;
use crate::parse::pdf::tables::{plausible, rows_of, Found};

/// Whether the middle of fragment `i` lies between `top` and `bottom`.
fn mid_within(frags: &[Fragment], i: usize, top: f32, bottom: f32) -> bool {
    let mid = (frags[i].top + frags[i].bottom) / 2.0;
    mid > top && mid <= bottom
}

/// A table in a grid: every band between row rules is a row, columns at the column
/// rules; None past `max_lines` lines of text in one band.
pub(super) fn from_grid(
    frags: &[Fragment],
    inside: &[usize],
    g: &Grid,
    max_lines: usize,
) -> Option<Found> {
    let (first, last) = (g.ys[0], g.ys[g.ys.len() - 1]);
    let inside: Vec<usize> = inside
        .iter()
        .copied()
        .filter(|&i| {
            mid_within(frags, i, first, last) && g.rect.contains_center_of(&Rect::of(&frags[i]))
        })
        .collect();
    if inside.len() < 2 {
        return None;
    }
    let mut rows: Vec<Vec<usize>> = Vec::new();
    for w in g.ys.windows(2) {
        let band: Vec<usize> = inside
            .iter()
            .copied()
            .filter(|&i| mid_within(frags, i, w[0], w[1]))
            .collect();
        // Line by line, each left to right: fragments of one line in different fonts
        // may not share a top.
        let lines = rows_of(frags, &band);
        if lines.len() > max_lines {
            return None;
        }
        if !band.is_empty() {
            rows.push(lines.concat());
        }
    }
    let table = grid_cells(frags, &rows, &g.seps);
    plausible(&table, f32::MAX).then_some(Found {
        rect: g.rect,
        rows: table,
        frags: inside,
    })
}

/// A grid of rules: row rule positions, column separators and its box.
pub(super) struct Grid {
    ys: Vec<f32>,
    seps: Vec<f32>,
    rect: Rect,
}

/// The grid in `region`: the longest run of bands between row rules that some
/// vertical rule crosses (a band no vertical rule crosses lies between two ruled
/// boxes, not inside one table), with its column rules. None without two such bands
/// and a column rule.
pub(super) fn grid(rules: &[Rule], region: &Rect, em: f32) -> Option<Grid> {
    let horiz = row_rules(rules, region);
    let crossed = |a: f32, b: f32| {
        let mid = (a + b) / 2.0;
        rules.iter().any(|r| {
            !r.horizontal
                && r.at >= region.x0 - 2.0
                && r.at <= region.x1 + 2.0
                && r.from <= mid
                && r.to >= mid
        })
    };
    let (mut best, mut start) = ((0, 0), 0);
    for k in 0..horiz.len().saturating_sub(1) {
        if crossed(horiz[k], horiz[k + 1]) {
            if k + 1 - start > best.1 {
                best = (start, k + 1 - start);
            }
        } else {
            start = k + 1;
        }
    }
    if best.1 < 2 {
        return None;
    }
    let ys = horiz[best.0..=best.0 + best.1].to_vec();
    let (top, bottom) = (ys[0], ys[ys.len() - 1]);
    // The grid's width is that of its own row rules, not of the whole region.
    let (mut x0, mut x1) = (f32::MAX, f32::MIN);
    for r in rules.iter().filter(|r| {
        r.horizontal
            && r.at >= top - 2.0
            && r.at <= bottom + 2.0
            && r.from >= region.x0 - 2.0
            && r.to <= region.x1 + 2.0
    }) {
        x0 = x0.min(r.from);
        x1 = x1.max(r.to);
    }
    let rect = Rect {
        x0,
        x1,
        top,
        bottom,
    };
    let seps = column_rules(rules, &rect, top, bottom, em);
    (!seps.is_empty()).then_some(Grid { ys, seps, rect })
}

/// y positions of the horizontal rules that run across at least half of `region`
/// (rules drawn cell by cell are summed), top to bottom.
fn row_rules(rules: &[Rule], region: &Rect) -> Vec<f32> {
    let mut ys: Vec<(f32, f32)> = Vec::new();
    for r in rules.iter().filter(|r| r.horizontal) {
        if r.at < region.top - 1.0 || r.at > region.bottom + 1.0 {
            continue;
        }
        let len = (r.to.min(region.x1) - r.from.max(region.x0)).max(0.0);
        match ys.iter_mut().find(|(y, _)| (*y - r.at).abs() < 2.0) {
            Some(e) => e.1 += len,
            None => ys.push((r.at, len)),
        }
    }
    let mut out: Vec<f32> = ys
        .into_iter()
        .filter(|(_, len)| *len >= 0.5 * region.width())
        .map(|(y, _)| y)
        .collect();
    out.sort_by(f32::total_cmp);
    out
}

/// Cells of rows that are bands between rules: every fragment of a band goes to the
/// column its middle falls in, lines of one cell joined top to bottom. Columns empty
/// in every row (between doubled rules) are dropped.
fn grid_cells(frags: &[Fragment], rows: &[Vec<usize>], seps: &[f32]) -> Vec<Vec<String>> {
    let mut table: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let mut cells = vec![String::new(); seps.len() + 1];
            for &i in row {
                let f = &frags[i];
                let mid = (f.x0 + f.x1) / 2.0;
                let cell = &mut cells[seps.iter().filter(|&&s| s < mid).count()];
                if !cell.is_empty() {
                    cell.push(' ');
                }
                cell.push_str(f.text.trim());
            }
            cells
        })
        .collect();
    let ncols = seps.len() + 1;
    let keep: Vec<bool> = (0..ncols)
        .map(|c| table.iter().any(|r| !r[c].is_empty()))
        .collect();
    for row in &mut table {
        let mut c = 0;
        row.retain(|_| {
            c += 1;
            keep[c - 1]
        });
    }
    table
}
