//! Tables fenced by ruling lines: full grids (in `grid`, taken in both modes) and, in
//! `accurate` mode, regions whose rules only frame or underline; those get columns
//! from text positions and must look like a table. Text outside every ruled table
//! goes through `fast`.

mod grid;

use grid::{from_grid, grid};

use super::{cells, fast, plausible, rows_of, separators, Found, MAX_AVG_CELL_WORDS};
use crate::parse::pdf::fragments::Fragment;
use crate::parse::pdf::layout::Rect;
use crate::parse::pdf::objects::Rule;

/// Tables fenced by ruling lines, then `fast` over what is left.
pub(crate) fn accurate(frags: &[Fragment], ids: &[usize], rules: &[Rule], em: f32) -> Vec<Found> {
    ruled(frags, ids, rules, em, Pass::All)
}

/// Tables in full grids of ruling lines (rules that vouch for a table on their own),
/// then `fast` over what is left.
pub(crate) fn grids(frags: &[Fragment], ids: &[usize], rules: &[Rule], em: f32) -> Vec<Found> {
    ruled(frags, ids, rules, em, Pass::Grids)
}

/// Tables in full grids of ruling lines across the whole page, before reading order
/// splits it into columns (which may cut a table apart). A grid that holds a long run
/// of text in one band is more likely a page frame with header and footer rules: it
/// is left to the column-by-column pass.
pub(crate) fn page_grids(frags: &[Fragment], ids: &[usize], rules: &[Rule], em: f32) -> Vec<Found> {
    ruled(frags, ids, rules, em, Pass::Page)
}

/// Lines of text one band of a page-wide grid may hold.
const MAX_PAGE_BAND_LINES: usize = 12;

#[derive(Clone, Copy, PartialEq)]
enum Pass {
    /// Whole page, grids only, no band with a long run of text, nothing else.
    Page,
    /// Grids, then `fast`.
    Grids,
    /// Grids, regions framed or underlined by rules, then `fast`.
    All,
}

fn ruled(frags: &[Fragment], ids: &[usize], rules: &[Rule], em: f32, pass: Pass) -> Vec<Found> {
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
        // A grid (row and column rules) vouches for the table: its rows are the bands
        // between row rules, so cells may wrap over several lines and hold running
        // text. Rules that only frame or underline need the text to look like a table.
        let found = match grid(rules, &region, em) {
            Some(g) => {
                let max_lines = if pass == Pass::Page {
                    MAX_PAGE_BAND_LINES
                } else {
                    usize::MAX
                };
                from_grid(frags, &inside, &g, max_lines)
            }
            None if pass == Pass::All => from_frame(frags, inside, rules, &region, em),
            None => None,
        };
        if let Some(t) = found {
            t.frags.iter().for_each(|&i| used[i] = true);
            out.push(t);
        }
    }
    if pass != Pass::Page {
        let rest: Vec<usize> = ids.iter().copied().filter(|&i| !used[i]).collect();
        out.extend(fast(frags, &rest, em));
    }
    out
}

/// A table in a region that rules only frame or underline: rows and (failing column
/// rules) columns from text positions, and it must look like a table.
fn from_frame(
    frags: &[Fragment],
    inside: Vec<usize>,
    rules: &[Rule],
    region: &Rect,
    em: f32,
) -> Option<Found> {
    let rows = rows_of(frags, &inside);
    let vert = column_rules(rules, region, region.top, region.bottom, em);
    let seps = if vert.is_empty() {
        separators(frags, &rows, em)
    } else {
        vert
    };
    let table = cells(frags, &rows, &seps, em);
    plausible(&table, MAX_AVG_CELL_WORDS).then_some(Found {
        rect: *region,
        rows: table,
        frags: inside,
    })
}

/// x positions of the vertical rules strictly inside `area` that reach between `top`
/// and `bottom`, left to right.
fn column_rules(rules: &[Rule], area: &Rect, top: f32, bottom: f32, em: f32) -> Vec<f32> {
    dedup(
        rules
            .iter()
            .filter(|r| !r.horizontal && r.at > area.x0 + 2.0 && r.at < area.x1 - 2.0)
            .filter(|r| r.to > top + 1.0 && r.from < bottom - 1.0)
            .filter(|r| r.to - r.from >= 0.3 * area.height().min(3.0 * em))
            .map(|r| r.at),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(text: &str, x0: f32, top: f32) -> Fragment {
        Fragment {
            text: text.into(),
            x0,
            x1: x0 + 6.0 * text.chars().count() as f32,
            top,
            bottom: top + 10.0,
            size: 10.0,
            bold: false,
            italic: false,
            rtl: false,
            ink: text.chars().count(),
            leader: false,
        }
    }

    fn h(at: f32, from: f32, to: f32) -> Rule {
        Rule {
            horizontal: true,
            at,
            from,
            to,
        }
    }

    fn v(at: f32, from: f32, to: f32) -> Rule {
        Rule {
            horizontal: false,
            at,
            from,
            to,
        }
    }

    #[test]
    fn a_grid_stops_where_no_column_rule_crosses_and_drops_empty_columns() {
        let frags = vec![
            frag("Name", 55.0, 104.0),
            frag("Qty", 160.0, 104.0),
            frag("Apples", 55.0, 124.0),
            frag("3", 160.0, 124.0),
            frag("Pears", 55.0, 144.0),
            frag("12", 160.0, 144.0),
            frag("Prose between two boxes", 55.0, 170.0),
            frag("code line", 55.0, 204.0),
        ];
        // A grid with a doubled column rule, then a code box of the same width below.
        let mut rules: Vec<Rule> = [100.0, 120.0, 140.0, 160.0]
            .iter()
            .map(|&y| h(y, 50.0, 250.0))
            .collect();
        rules.extend(
            [50.0, 150.0, 154.0, 250.0]
                .iter()
                .map(|&x| v(x, 100.0, 160.0)),
        );
        rules.extend([h(190.0, 50.0, 250.0), h(230.0, 50.0, 250.0)]);
        rules.extend([v(50.0, 190.0, 230.0), v(250.0, 190.0, 230.0)]);
        let ids: Vec<usize> = (0..frags.len()).collect();
        let found = grids(&frags, &ids, &rules, 10.0);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].rows,
            [["Name", "Qty"], ["Apples", "3"], ["Pears", "12"]]
        );
        assert_eq!(found[0].frags.len(), 6);
    }

    #[test]
    fn a_page_frame_is_no_page_wide_grid() {
        let mut frags = vec![frag("Header", 30.0, 30.0), frag("Title", 310.0, 30.0)];
        for k in 0..30 {
            let top = 70.0 + 20.0 * k as f32;
            frags.push(frag("left column text", 30.0, top));
            frags.push(frag("right column text", 310.0, top));
        }
        let mut rules: Vec<Rule> = [20.0, 60.0, 700.0, 740.0]
            .iter()
            .map(|&y| h(y, 20.0, 580.0))
            .collect();
        rules.extend([20.0, 300.0, 580.0].iter().map(|&x| v(x, 20.0, 740.0)));
        let ids: Vec<usize> = (0..frags.len()).collect();
        assert!(page_grids(&frags, &ids, &rules, 10.0).is_empty());
    }
}
