//! Tables found on a page. From text: runs of text rows whose fragments line up in
//! columns (columns are the x-bands that nearly no row writes across). From ruling
//! lines (in `ruled`): full grids in both modes, and in `accurate` mode also regions
//! only framed or underlined by rules; text positions for the rest.

mod ruled;

pub(crate) use ruled::{accurate, grids, page_grids};

use super::fragments::Fragment;
use super::layout::Rect;

/// A table found on a page, with the fragments it consumed.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub rect: Rect,
    pub rows: Vec<Vec<String>>,
    pub frags: Vec<usize>,
}

/// Longest cell text (words, on average) for a table found from text alone: longer
/// cells are running text in columns.
const MAX_AVG_CELL_WORDS: f32 = 5.0;

/// Groups fragment ids into rows by vertical overlap, top to bottom.
fn rows_of(frags: &[Fragment], ids: &[usize]) -> Vec<Vec<usize>> {
    let mut order = ids.to_vec();
    order.sort_by(|&a, &b| frags[a].top.total_cmp(&frags[b].top));
    let mut rows: Vec<(f32, f32, Vec<usize>)> = Vec::new();
    for i in order {
        let f = &frags[i];
        // The band stays the first fragment's: stacked header lines are rows of their own.
        match rows.last_mut() {
            Some((t, b, ids))
                if b.min(f.bottom) - t.max(f.top) >= 0.4 * (*b - *t).min(f.height()) =>
            {
                ids.push(i)
            }
            _ => rows.push((f.top, f.bottom, vec![i])),
        }
    }
    rows.into_iter()
        .map(|(_, _, mut ids)| {
            ids.sort_by(|&a, &b| frags[a].x0.total_cmp(&frags[b].x0));
            ids
        })
        .collect()
}

fn row_top(frags: &[Fragment], row: &[usize]) -> f32 {
    row.iter().map(|&i| frags[i].top).fold(f32::MAX, f32::min)
}

fn row_bottom(frags: &[Fragment], row: &[usize]) -> f32 {
    row.iter()
        .map(|&i| frags[i].bottom)
        .fold(f32::MIN, f32::max)
}

/// Whether a row has at least two fragments with a cell-sized gap between them.
fn is_multi(frags: &[Fragment], row: &[usize], em: f32) -> bool {
    row.windows(2)
        .any(|w| frags[w[0]].leader || frags[w[1]].x0 - frags[w[0]].x1 >= 0.8 * em)
}

/// Column separators (x positions) for rows of fragments: the middles of x-bands that
/// at most a tenth of the rows write across.
fn separators(frags: &[Fragment], rows: &[Vec<usize>], em: f32) -> Vec<f32> {
    let ids = rows.iter().flatten();
    let x0 = ids.clone().map(|&i| frags[i].x0).fold(f32::MAX, f32::min);
    let x1 = ids.map(|&i| frags[i].x1).fold(f32::MIN, f32::max);
    if x1.partial_cmp(&x0) != Some(std::cmp::Ordering::Greater) || x1 - x0 > 5_000.0 {
        return Vec::new();
    }
    let bins = (x1 - x0).ceil() as usize + 1;
    let mut cover = vec![0usize; bins];
    for row in rows {
        let mut hit = vec![false; bins];
        for &i in row {
            let a = ((frags[i].x0 - x0).max(0.0)) as usize;
            let b = ((frags[i].x1 - x0).max(0.0) as usize).min(bins - 1);
            hit[a..=b.max(a)].iter_mut().for_each(|h| *h = true);
        }
        cover
            .iter_mut()
            .zip(hit)
            .for_each(|(c, h)| *c += usize::from(h));
    }
    // A spanning header cell or two may cross a column boundary.
    let allowed = if rows.len() >= 4 {
        (rows.len() / 10).max(1)
    } else {
        0
    };
    let mut seps = Vec::new();
    let mut start: Option<usize> = None;
    for (x, &c) in cover.iter().enumerate() {
        match (c <= allowed, start) {
            (true, None) => start = Some(x),
            (false, Some(s)) => {
                if (x - s) as f32 >= 0.5 * em && s > 0 {
                    seps.push(x0 + (s + x) as f32 / 2.0);
                }
                start = None;
            }
            _ => {}
        }
    }
    seps
}

/// Cells of `rows` split at `seps` (x positions), continuation lines of a wrapped cell
/// merged into the row above.
fn cells(frags: &[Fragment], rows: &[Vec<usize>], seps: &[f32], em: f32) -> Vec<Vec<String>> {
    let ncols = seps.len() + 1;
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut prev_bottom = f32::MIN;
    for row in rows {
        let mut cells = vec![String::new(); ncols];
        for &i in row {
            let f = &frags[i];
            let mid = (f.x0 + f.x1) / 2.0;
            let col = seps.iter().filter(|&&s| s < mid).count();
            let cell = &mut cells[col];
            if !cell.is_empty() {
                cell.push(' ');
            }
            cell.push_str(f.text.trim());
        }
        let filled = cells.iter().filter(|c| !c.is_empty()).count();
        let top = row_top(frags, row);
        // A row with nothing in its first column right under another continues it: a
        // wrapped cell, or a sub-row of a cell that spans both.
        let wrapped = !out.is_empty() && cells[0].is_empty() && top - prev_bottom < 0.6 * em;
        if wrapped {
            if let Some(last) = out.last_mut() {
                for (dst, src) in last.iter_mut().zip(cells) {
                    if !src.is_empty() {
                        if !dst.is_empty() {
                            dst.push(' ');
                        }
                        dst.push_str(&src);
                    }
                }
            }
        } else if filled > 0 {
            out.push(cells);
        }
        prev_bottom = row_bottom(frags, row);
    }
    out
}

fn rect_of(frags: &[Fragment], ids: &[usize]) -> Rect {
    let mut r = Rect {
        x0: f32::MAX,
        x1: f32::MIN,
        top: f32::MAX,
        bottom: f32::MIN,
    };
    for &i in ids {
        let f = &frags[i];
        r.x0 = r.x0.min(f.x0);
        r.x1 = r.x1.max(f.x1);
        r.top = r.top.min(f.top);
        r.bottom = r.bottom.max(f.bottom);
    }
    r
}

/// Longest cell text (characters, on average) for a table found from text alone.
const MAX_AVG_CELL_CHARS: f32 = 32.0;

/// Plausible as a table: two columns or more, most rows with two cells or more, short
/// cells.
fn plausible(rows: &[Vec<String>], max_avg_words: f32) -> bool {
    let ncols = rows.first().map_or(0, Vec::len);
    if ncols < 2 || rows.len() < 2 {
        return false;
    }
    let multi = rows
        .iter()
        .filter(|r| r.iter().filter(|c| !c.is_empty()).count() >= 2)
        .count();
    let filled: Vec<&String> = rows.iter().flatten().filter(|c| !c.is_empty()).collect();
    let words: usize = filled.iter().map(|c| c.split_whitespace().count()).sum();
    let chars: usize = filled.iter().map(|c| c.chars().count()).sum();
    let avg = words as f32 / filled.len().max(1) as f32;
    let avg_chars = chars as f32 / filled.len().max(1) as f32;
    let short =
        max_avg_words == f32::MAX || (avg <= max_avg_words && avg_chars <= MAX_AVG_CELL_CHARS);
    // A column of short keys beside longer text ("Term | what it means") is a table
    // too when it runs for a few rows.
    let keyed = multi >= 3
        && (0..ncols).any(|c| {
            let col: Vec<&String> = rows
                .iter()
                .filter_map(|r| r.get(c))
                .filter(|s| !s.is_empty())
                .collect();
            let w: usize = col.iter().map(|s| s.split_whitespace().count()).sum();
            col.len() * 2 >= rows.len() && (w as f32) <= 2.0 * col.len() as f32
        });
    multi * 2 >= rows.len() && multi >= 2 && (short || keyed)
}

/// Tables from text positions among the fragments `ids`.
pub(crate) fn fast(frags: &[Fragment], ids: &[usize], em: f32) -> Vec<Found> {
    let rows = rows_of(frags, ids);
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        if !is_multi(frags, &rows[i], em) {
            i += 1;
            continue;
        }
        // Extend a run of aligned rows; one plain row may sit inside (a wrapped cell).
        let mut j = i + 1;
        let mut last_multi = i;
        while j < rows.len() {
            let gap = row_top(frags, &rows[j]) - row_bottom(frags, &rows[j - 1]);
            if gap > 1.6 * em {
                break;
            }
            if is_multi(frags, &rows[j], em) {
                last_multi = j;
            } else if j - last_multi > 1 {
                break;
            }
            j += 1;
        }
        let run = &rows[i..=last_multi];
        if let Some(t) = table_from_rows(frags, run, em, MAX_AVG_CELL_WORDS) {
            out.push(t);
            i = last_multi + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn table_from_rows(
    frags: &[Fragment],
    run: &[Vec<usize>],
    em: f32,
    max_words: f32,
) -> Option<Found> {
    if run.len() < 2 {
        return None;
    }
    let leaders = run
        .iter()
        .filter(|r| r.iter().any(|&i| frags[i].leader))
        .count();
    if leaders * 2 >= run.len() {
        // A table of contents: entry, then page number.
        let rows: Vec<Vec<String>> = run
            .iter()
            .map(|r| {
                let k = r
                    .iter()
                    .position(|&i| frags[i].leader)
                    .map_or(r.len().saturating_sub(1), |k| k + 1);
                let join = |ids: &[usize]| {
                    ids.iter()
                        .map(|&i| frags[i].text.trim())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                vec![join(&r[..k]), join(&r[k..])]
            })
            .collect();
        let ids: Vec<usize> = run.iter().flatten().copied().collect();
        return Some(Found {
            rect: rect_of(frags, &ids),
            rows,
            frags: ids,
        });
    }
    let seps = separators(frags, run, em);
    let rows = cells(frags, run, &seps, em);
    if !plausible(&rows, max_words) {
        return None;
    }
    let ids: Vec<usize> = run.iter().flatten().copied().collect();
    Some(Found {
        rect: rect_of(frags, &ids),
        rows,
        frags: ids,
    })
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
            bottom: top + 12.0,
            size: 10.0,
            bold: false,
            italic: false,
            rtl: false,
            ink: text.chars().count(),
            leader: text.ends_with(". . . ."),
        }
    }

    #[test]
    fn aligned_rows_make_a_table_and_prose_does_not() {
        let mut frags = Vec::new();
        for (r, row) in [
            ["Name", "Qty", "Price"],
            ["Apples", "3", "1.20"],
            ["Pears", "12", "0.80"],
        ]
        .iter()
        .enumerate()
        {
            for (c, cell) in row.iter().enumerate() {
                frags.push(frag(cell, 50.0 + 120.0 * c as f32, 100.0 + 14.0 * r as f32));
            }
        }
        frags.push(frag(
            "A paragraph that runs along the whole line of text.",
            50.0,
            200.0,
        ));
        let ids: Vec<usize> = (0..frags.len()).collect();
        let found = fast(&frags, &ids, 10.0);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rows[0], ["Name", "Qty", "Price"]);
        assert_eq!(found[0].rows[2], ["Pears", "12", "0.80"]);
        assert_eq!(found[0].frags.len(), 9);
    }

    #[test]
    fn a_table_of_contents_is_entry_and_page() {
        let frags = vec![
            frag("Intro . . . .", 50.0, 100.0),
            frag("1", 300.0, 100.0),
            frag("Methods . . . .", 50.0, 114.0),
            frag("7", 300.0, 114.0),
        ];
        let found = fast(&frags, &[0, 1, 2, 3], 10.0);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].rows[1], ["Methods . . . .", "7"]);
    }
}
