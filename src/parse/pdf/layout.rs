//! Reading order: a recursive XY-cut over the page's fragments, tables and pictures.
//! A column gutter (a vertical band of white running the height of a region) splits
//! first; otherwise the widest horizontal band of white does. Leaves come out in reading
//! order (left column before right, or right before left on a right-to-left page).

use super::fragments::Fragment;

/// An axis-aligned box in top-down page coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rect {
    pub x0: f32,
    pub x1: f32,
    pub top: f32,
    pub bottom: f32,
}

impl Rect {
    pub fn of(f: &Fragment) -> Self {
        Self {
            x0: f.x0,
            x1: f.x1,
            top: f.top,
            bottom: f.bottom,
        }
    }

    pub fn width(&self) -> f32 {
        self.x1 - self.x0
    }

    pub fn height(&self) -> f32 {
        self.bottom - self.top
    }

    pub fn contains_center_of(&self, r: &Rect) -> bool {
        let (cx, cy) = ((r.x0 + r.x1) / 2.0, (r.top + r.bottom) / 2.0);
        cx >= self.x0 && cx <= self.x1 && cy >= self.top && cy <= self.bottom
    }
}

/// What the reading order is computed over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Atom {
    pub rect: Rect,
    /// Words, for telling running text from short labels and table cells.
    pub words: usize,
    pub rtl: bool,
}

/// One leaf of the cut: atom indices, and which column (vertical-cut side) it is in.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    pub atoms: Vec<usize>,
    pub column: usize,
}

/// Cuts deeper than this are not tried (a defence against degenerate pages).
const MAX_DEPTH: usize = 400;

/// The atoms grouped into leaves in reading order. `em` is the page's body font size.
pub(crate) fn reading_order(atoms: &[Atom], em: f32) -> Vec<Leaf> {
    let mut out = Vec::new();
    let mut next_column = 1;
    let all: Vec<usize> = (0..atoms.len()).collect();
    cut(atoms, all, em, 0, 0, &mut next_column, &mut out);
    out
}

fn cut(
    atoms: &[Atom],
    ids: Vec<usize>,
    em: f32,
    column: usize,
    depth: usize,
    next_column: &mut usize,
    out: &mut Vec<Leaf>,
) {
    if ids.len() <= 1 || depth > MAX_DEPTH {
        if !ids.is_empty() {
            out.push(Leaf { atoms: ids, column });
        }
        return;
    }
    if let Some((left, right)) = vertical_cut(atoms, &ids, em) {
        let rtl_ink: usize = ids
            .iter()
            .filter(|&&i| atoms[i].rtl)
            .map(|&i| atoms[i].words)
            .sum();
        let ltr_ink: usize = ids
            .iter()
            .filter(|&&i| !atoms[i].rtl)
            .map(|&i| atoms[i].words)
            .sum();
        let (first, second) = if rtl_ink > ltr_ink {
            (right, left)
        } else {
            (left, right)
        };
        for side in [first, second] {
            let col = *next_column;
            *next_column += 1;
            cut(atoms, side, em, col, depth + 1, next_column, out);
        }
        return;
    }
    if let Some((above, below)) = horizontal_cut(atoms, &ids) {
        cut(atoms, above, em, column, depth + 1, next_column, out);
        cut(atoms, below, em, column, depth + 1, next_column, out);
        return;
    }
    out.push(Leaf { atoms: ids, column });
}

/// Intervals merged along one axis: (start, end) sorted, with the ids in each.
fn merged(ids: &[usize], span: impl Fn(usize) -> (f32, f32)) -> Vec<(f32, f32, Vec<usize>)> {
    let mut sorted: Vec<usize> = ids.to_vec();
    sorted.sort_by(|&a, &b| span(a).0.total_cmp(&span(b).0));
    let mut groups: Vec<(f32, f32, Vec<usize>)> = Vec::new();
    for i in sorted {
        let (s, e) = span(i);
        match groups.last_mut() {
            Some(g) if s < g.1 => {
                g.1 = g.1.max(e);
                g.2.push(i);
            }
            _ => groups.push((s, e, vec![i])),
        }
    }
    groups
}

/// The widest gutter that leaves running text (or a table or picture) on both sides.
fn vertical_cut(atoms: &[Atom], ids: &[usize], em: f32) -> Option<(Vec<usize>, Vec<usize>)> {
    let groups = merged(ids, |i| (atoms[i].rect.x0, atoms[i].rect.x1));
    if groups.len() < 2 {
        return None;
    }
    // Running text on both sides: table columns of short cells are not cut apart.
    let text_like = |side: &[usize]| {
        let words: usize = side.iter().map(|&i| atoms[i].words).sum();
        !side.is_empty() && words as f32 / side.len() as f32 >= 2.5
    };
    let mut best: Option<(f32, usize)> = None;
    for k in 1..groups.len() {
        let gap = groups[k].0 - groups[k - 1].1;
        if gap < 0.8 * em || best.is_some_and(|(w, _)| w >= gap) {
            continue;
        }
        let left: Vec<usize> = groups[..k]
            .iter()
            .flat_map(|g| g.2.iter().copied())
            .collect();
        let right: Vec<usize> = groups[k..]
            .iter()
            .flat_map(|g| g.2.iter().copied())
            .collect();
        if text_like(&left) && text_like(&right) {
            best = Some((gap, k));
        }
    }
    let (_, k) = best?;
    let left = groups[..k]
        .iter()
        .flat_map(|g| g.2.iter().copied())
        .collect();
    let right = groups[k..]
        .iter()
        .flat_map(|g| g.2.iter().copied())
        .collect();
    Some((left, right))
}

/// Splits at the widest horizontal band of white.
fn horizontal_cut(atoms: &[Atom], ids: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    let groups = merged(ids, |i| {
        // Shrink boxes a little: loose glyph boxes of adjacent lines touch.
        let r = atoms[i].rect;
        let shrink = (r.height() * 0.15).min(1.5);
        (r.top + shrink, (r.bottom - shrink).max(r.top + shrink))
    });
    if groups.len() < 2 {
        return None;
    }
    let k = (1..groups.len()).max_by(|&a, &b| {
        let ga = groups[a].0 - groups[a - 1].1;
        let gb = groups[b].0 - groups[b - 1].1;
        ga.total_cmp(&gb)
    })?;
    let above = groups[..k]
        .iter()
        .flat_map(|g| g.2.iter().copied())
        .collect();
    let below = groups[k..]
        .iter()
        .flat_map(|g| g.2.iter().copied())
        .collect();
    Some((above, below))
}

/// Fragments of one leaf grouped into visual lines, top to bottom; within a line in
/// reading order (right to left when the line is mostly right-to-left).
pub(crate) fn lines_of(frags: &[&Fragment]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..frags.len()).collect();
    order.sort_by(|&a, &b| frags[a].top.total_cmp(&frags[b].top));
    // (top, bottom, font size of the first fragment, members)
    let mut lines: Vec<(f32, f32, f32, Vec<usize>)> = Vec::new();
    for i in order {
        let f = frags[i];
        let joined = lines.iter_mut().rev().take(3).find(|(t, b, size, _)| {
            let overlap = b.min(f.bottom) - t.max(f.top);
            // A title beside small print is not one line with it; a footnote mark is.
            let ratio = size.max(f.size) / size.min(f.size).max(0.1);
            overlap >= 0.5 * (b - t).min(f.height()) && (ratio <= 1.2 || f.ink <= 3)
        });
        match joined {
            Some(l) => {
                l.0 = l.0.min(f.top);
                l.1 = l.1.max(f.bottom);
                l.3.push(i);
            }
            None => lines.push((f.top, f.bottom, f.size, vec![i])),
        }
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines
        .into_iter()
        .map(|(_, _, _, mut ids)| {
            let rtl: usize = ids
                .iter()
                .filter(|&&i| frags[i].rtl)
                .map(|&i| frags[i].ink)
                .sum();
            let ltr: usize = ids
                .iter()
                .filter(|&&i| !frags[i].rtl)
                .map(|&i| frags[i].ink)
                .sum();
            if rtl > ltr {
                ids.sort_by(|&a, &b| frags[b].x1.total_cmp(&frags[a].x1));
            } else {
                ids.sort_by(|&a, &b| frags[a].x0.total_cmp(&frags[b].x0));
            }
            ids
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atom(x0: f32, x1: f32, top: f32, words: usize) -> Atom {
        Atom {
            rect: Rect {
                x0,
                x1,
                top,
                bottom: top + 10.0,
            },
            words,
            rtl: false,
        }
    }

    #[test]
    fn title_then_left_column_then_right_column() {
        let mut atoms = vec![atom(50.0, 550.0, 40.0, 6)];
        for i in 0..5 {
            atoms.push(atom(50.0, 280.0, 80.0 + 12.0 * i as f32, 8));
            atoms.push(atom(320.0, 550.0, 80.0 + 12.0 * i as f32, 8));
        }
        let order: Vec<usize> = reading_order(&atoms, 10.0)
            .into_iter()
            .flat_map(|l| l.atoms)
            .collect();
        assert_eq!(order, [0, 1, 3, 5, 7, 9, 2, 4, 6, 8, 10]);
        let mut rtl = atoms.clone();
        rtl.iter_mut().for_each(|a| a.rtl = true);
        let order: Vec<usize> = reading_order(&rtl, 10.0)
            .into_iter()
            .flat_map(|l| l.atoms)
            .collect();
        assert_eq!(order, [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9]);
    }
}
