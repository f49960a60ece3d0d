//! `accurate` tables: regions fenced by ruling lines. In a full grid the rows are the
//! bands between row rules (cells may wrap over lines) and the columns come from the
//! column rules; rules that only frame or underline get columns from text positions
//! and must look like a table. Text outside every ruled region goes through `fast`.

use super::{cells, fast, plausible, rows_of, separators, Found, MAX_AVG_CELL_WORDS};
use crate::parse::pdf::fragments::Fragment;
use crate::parse::pdf::layout::Rect;
use crate::parse::pdf::objects::Rule;

/// Tables fenced by ruling lines, then `fast` over what is left.
pub(crate) fn accurate(frags: &[Fragment], ids: &[usize], rules: &[Rule], em: f32) -> Vec<Found> {
    let mut out = Vec::new();
    let mut used = vec![false; frags.len()];
    for region in ruled_regions(rules) {
        let inside: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&i| !used[i] && region.contains_center_of(&Rect::of(&frags[i])))
            .collect();
        if inside.len() < 2 {
            continue;
        }
        let vert: Vec<f32> = dedup(
            rules
                .iter()
                .filter(|r| !r.horizontal && r.at > region.x0 + 2.0 && r.at < region.x1 - 2.0)
                .filter(|r| r.to - r.from >= 0.3 * region.height().min(3.0 * em))
                .map(|r| r.at),
        );
        let horiz = row_rules(rules, &region);
        // A grid (row and column rules) vouches for the table: its rows are the bands
        // between row rules, so cells may wrap over several lines and hold running
        // text. Rules that only frame or underline need the text to look like a table.
        let grid = !vert.is_empty() && horiz.len() >= 3;
        let (rows, inside) = if grid {
            let (first, last) = (horiz[0], horiz[horiz.len() - 1]);
            let inside: Vec<usize> = inside
                .into_iter()
                .filter(|&i| {
                    let mid = (frags[i].top + frags[i].bottom) / 2.0;
                    mid > first && mid < last
                })
                .collect();
            let rows: Vec<Vec<usize>> = horiz
                .windows(2)
                .map(|w| {
                    let mut row: Vec<usize> = inside
                        .iter()
                        .copied()
                        .filter(|&i| {
                            let mid = (frags[i].top + frags[i].bottom) / 2.0;
                            mid > w[0] && mid <= w[1]
                        })
                        .collect();
                    row.sort_by(|&a, &b| frags[a].top.total_cmp(&frags[b].top));
                    row
                })
                .filter(|r| !r.is_empty())
                .collect();
            (rows, inside)
        } else {
            (rows_of(frags, &inside), inside)
        };
        if inside.len() < 2 {
            continue;
        }
        let seps = if vert.is_empty() {
            separators(frags, &rows, em)
        } else {
            vert
        };
        let table = if grid {
            grid_cells(frags, &rows, &seps)
        } else {
            cells(frags, &rows, &seps, em)
        };
        let limit = if grid { f32::MAX } else { MAX_AVG_CELL_WORDS };
        if plausible(&table, limit) {
            inside.iter().for_each(|&i| used[i] = true);
            out.push(Found {
                rect: region,
                rows: table,
                frags: inside,
            });
        }
    }
    let rest: Vec<usize> = ids.iter().copied().filter(|&i| !used[i]).collect();
    out.extend(fast(frags, &rest, em));
    out
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
/// column its middle falls in, lines of one cell joined top to bottom.
fn grid_cells(frags: &[Fragment], rows: &[Vec<usize>], seps: &[f32]) -> Vec<Vec<String>> {
    rows.iter()
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
        .collect()
}

fn dedup(xs: impl Iterator<Item = f32>) -> Vec<f32> {
    let mut v: Vec<f32> = xs.collect();
    v.sort_by(f32::total_cmp);
    v.dedup_by(|a, b| (*a - *b).abs() < 2.0);
    v
}

/// Boxes around groups of touching rules with at least three horizontal rules or two
/// of each direction (a grid, or a booktabs-style top/middle/bottom rule set).
fn ruled_regions(rules: &[Rule]) -> Vec<Rect> {
    let rules: Vec<&Rule> = rules.iter().take(2_000).collect();
    let n = rules.len();
    let mut group: Vec<usize> = (0..n).collect();
    fn find(g: &mut [usize], mut i: usize) -> usize {
        while g[i] != i {
            g[i] = g[g[i]];
            i = g[i];
        }
        i
    }
    let near = |a: &Rule, b: &Rule| {
        let tol = 3.0;
        match (a.horizontal, b.horizontal) {
            (true, true) | (false, false) => {
                // Parallel rules of one table span the same extent.
                (a.from - b.from).abs() < tol
                    && (a.to - b.to).abs() < tol
                    && (a.at - b.at).abs() < 500.0
            }
            _ => {
                let (h, v) = if a.horizontal { (a, b) } else { (b, a) };
                v.at >= h.from - tol
                    && v.at <= h.to + tol
                    && h.at >= v.from - tol
                    && h.at <= v.to + tol
            }
        }
    };
    for i in 0..n {
        for j in i + 1..n {
            if near(rules[i], rules[j]) {
                let (a, b) = (find(&mut group, i), find(&mut group, j));
                group[a] = b;
            }
        }
    }
    let mut out = Vec::new();
    for root in 0..n {
        let members: Vec<&Rule> = (0..n)
            .filter(|&i| find(&mut group, i) == root)
            .map(|i| rules[i])
            .collect();
        let hs = dedup(members.iter().filter(|r| r.horizontal).map(|r| r.at)).len();
        let vs = dedup(members.iter().filter(|r| !r.horizontal).map(|r| r.at)).len();
        if hs >= 3 || (hs >= 2 && vs >= 2) {
            let mut r = Rect {
                x0: f32::MAX,
                x1: f32::MIN,
                top: f32::MAX,
                bottom: f32::MIN,
            };
            for m in &members {
                let (x0, x1, t, b) = if m.horizontal {
                    (m.from, m.to, m.at, m.at)
                } else {
                    (m.at, m.at, m.from, m.to)
                };
                r.x0 = r.x0.min(x0);
                r.x1 = r.x1.max(x1);
                r.top = r.top.min(t);
                r.bottom = r.bottom.max(b);
            }
            if r.width() > 20.0 && r.height() > 10.0 {
                out.push(r);
            }
        }
    }
    out
}
