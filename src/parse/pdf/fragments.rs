//! Glyphs -> fragments: runs of characters drawn next to each other on one baseline.
//! A fragment never crosses a wide gap (column gutter, table cell border), so fragments
//! are the atoms of the page layout.

use super::glyphs::{is_arabic_mark, is_rtl, Glyph};
use super::objects::Rule;

/// A run of text on one line, in logical order.
#[derive(Debug, Clone)]
pub(crate) struct Fragment {
    pub text: String,
    pub x0: f32,
    pub x1: f32,
    pub top: f32,
    pub bottom: f32,
    /// Dominant font size.
    pub size: f32,
    /// Most of the ink is bold.
    pub bold: bool,
    /// Most of the ink is italic.
    pub italic: bool,
    /// More right-to-left letters than left-to-right ones.
    pub rtl: bool,
    /// Characters that draw ink.
    pub ink: usize,
    /// Ends in a dot leader ("Chapter 1 . . . . ."): a table-of-contents entry whose
    /// page number follows.
    pub leader: bool,
}

impl Fragment {
    pub fn height(&self) -> f32 {
        (self.bottom - self.top).max(0.1)
    }

    pub fn words(&self) -> usize {
        self.text.split_whitespace().count()
    }
}

/// Gap (in font sizes) beyond which left-to-right text starts a new fragment.
const MAX_GAP_EM: f32 = 0.8;
/// How far (in font sizes) a right-to-left run may jump left within one fragment: an
/// embedded left-to-right word is drawn to the left of the text logically before it.
const MAX_RTL_JUMP_EM: f32 = 15.0;

struct Builder {
    frag: Fragment,
    last: Glyph,
    rtl_chars: usize,
    ltr_chars: usize,
    bold_chars: usize,
    italic_chars: usize,
    size_sum: f32,
}

impl Builder {
    fn new(g: Glyph) -> Self {
        let mut b = Self {
            frag: Fragment {
                text: String::new(),
                x0: g.x0,
                x1: g.x1,
                top: g.top,
                bottom: g.bottom,
                size: g.size,
                bold: false,
                italic: false,
                rtl: false,
                ink: 0,
                leader: false,
            },
            last: g,
            rtl_chars: 0,
            ltr_chars: 0,
            bold_chars: 0,
            italic_chars: 0,
            size_sum: 0.0,
        };
        b.push(g, false);
        b
    }

    fn push(&mut self, g: Glyph, space: bool) {
        if space && !self.frag.text.ends_with(' ') {
            self.frag.text.push(' ');
        }
        self.frag.text.push(g.ch);
        let f = &mut self.frag;
        f.x0 = f.x0.min(g.x0);
        f.x1 = f.x1.max(g.x1);
        f.top = f.top.min(g.top);
        f.bottom = f.bottom.max(g.bottom);
        f.ink += 1;
        if is_rtl(g.ch) {
            self.rtl_chars += 1;
        } else if g.ch.is_alphabetic() {
            self.ltr_chars += 1;
        }
        if g.bold {
            self.bold_chars += 1;
        }
        if g.italic {
            self.italic_chars += 1;
        }
        self.size_sum += g.size;
        if !is_arabic_mark(g.ch) {
            // Marks sit over their letter; spacing is measured between letters.
            self.last = g;
        }
    }

    fn has_rtl(&self) -> bool {
        self.rtl_chars > 0
    }

    /// Whether `g` (after `space` separators) continues this fragment.
    fn continues(&self, g: &Glyph) -> bool {
        let l = &self.last;
        if g.vertical != l.vertical {
            return false;
        }
        if g.vertical {
            // Text running up or down: same column of glyphs, small vertical step.
            let w = (g.x1 - g.x0).min(l.x1 - l.x0).max(0.1);
            let overlap = g.x1.min(l.x1) - g.x0.max(l.x0);
            let step = (g.top.max(l.top) - g.bottom.min(l.bottom)).max(0.0);
            return overlap >= 0.4 * w && step < MAX_GAP_EM * g.size.max(l.size);
        }
        let h = (g.bottom - g.top).min(l.bottom - l.top).max(0.1);
        let overlap = g.bottom.min(l.bottom) - g.top.max(l.top);
        if overlap < 0.4 * h {
            return false;
        }
        let em = g.size.max(l.size);
        if self.has_rtl() || is_rtl(g.ch) {
            let f = &self.frag;
            g.x0 <= f.x1 + MAX_GAP_EM * em && g.x1 >= f.x0 - MAX_RTL_JUMP_EM * em
        } else {
            let gap = g.x0 - l.x1;
            // Ligatures ("fi") give both letters the same box.
            let same_glyph = (g.x0 - l.x0).abs() < 0.05;
            (gap > -0.5 * em || same_glyph) && gap < MAX_GAP_EM * em
        }
    }

    fn finish(mut self) -> Fragment {
        let f = &mut self.frag;
        let n = f.ink.max(1) as f32;
        f.size = self.size_sum / n;
        f.bold = self.bold_chars * 2 > f.ink;
        f.italic = self.italic_chars * 2 > f.ink;
        f.leader = ends_in_leader(&f.text);
        f.rtl = self.rtl_chars > self.ltr_chars;
        let trimmed = f.text.trim_end();
        f.text.truncate(trimmed.len());
        self.frag
    }
}

/// White (points) between two glyphs a wall may stand in.
const MIN_WALL_GAP: f32 = 1.0;

/// Vertical ruling lines, sorted by x: a fragment never runs across one (the border
/// between two table cells may be narrower than a word gap).
pub(crate) struct Walls(Vec<Rule>);

impl Walls {
    pub fn new(rules: &[Rule]) -> Self {
        let mut v: Vec<Rule> = rules.iter().filter(|r| !r.horizontal).copied().collect();
        v.sort_by(|a, b| a.at.total_cmp(&b.at));
        Self(v)
    }

    /// Whether a wall stands in the white between glyphs `a` and `b` (a rule through
    /// the letters of a word is the edge of a box drawn behind the text, no border).
    fn between(&self, a: &Glyph, b: &Glyph) -> bool {
        let (left, right) = if a.x0 <= b.x0 { (a, b) } else { (b, a) };
        let (lo, hi) = (left.x1 - 0.5, right.x0 + 0.5);
        if right.x0 - left.x1 < MIN_WALL_GAP {
            return false;
        }
        let y = (b.top + b.bottom) / 2.0;
        let start = self.0.partition_point(|r| r.at <= lo);
        self.0[start..]
            .iter()
            .take_while(|r| r.at < hi)
            .any(|r| r.from <= y && r.to >= y)
    }
}

/// Splits the page's glyph stream into fragments.
pub(crate) fn fragments(glyphs: &[Glyph], walls: &Walls) -> Vec<Fragment> {
    let mut out = Vec::new();
    let mut cur: Option<Builder> = None;
    let mut space = false;
    for g in glyphs {
        if g.is_space() {
            space = true;
            continue;
        }
        match cur.as_mut() {
            // A change of style at a word break starts a new fragment (run-in headings),
            // and so does the end of a dot leader (table-of-contents page numbers).
            Some(b)
                if b.continues(g)
                    && !(g.ch != '.' && ends_in_leader(&b.frag.text))
                    && !(space && (g.bold, g.italic) != (b.last.bold, b.last.italic))
                    && (g.vertical || !walls.between(&b.last, g)) =>
            {
                let l = &b.last;
                let gap = if g.vertical {
                    (g.top.max(l.top) - g.bottom.min(l.bottom)).max(0.0)
                } else if b.has_rtl() || is_rtl(g.ch) {
                    // Logical order may run either way on screen: the white between.
                    (g.x0.max(l.x0) - g.x1.min(l.x1)).max(0.0)
                } else {
                    g.x0 - l.x1
                };
                let word_gap = gap > 0.2 * g.size.max(l.size);
                b.push(*g, !is_arabic_mark(g.ch) && (space || word_gap));
            }
            _ => {
                if let Some(b) = cur.take() {
                    out.push(b.finish());
                }
                cur = Some(Builder::new(*g));
            }
        }
        space = false;
    }
    if let Some(b) = cur {
        out.push(b.finish());
    }
    out
}

/// Whether `text` ends with at least four leader dots (spaced or not).
fn ends_in_leader(text: &str) -> bool {
    text.trim_end()
        .chars()
        .rev()
        .filter(|c| *c != ' ')
        .take(4)
        .filter(|c| *c == '.' || *c == '…')
        .count()
        == 4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glyphs(text: &str, x0: f32) -> Vec<Glyph> {
        text.chars()
            .enumerate()
            .map(|(k, ch)| Glyph {
                ch,
                x0: x0 + 6.0 * k as f32,
                x1: x0 + 6.0 * (k + 1) as f32,
                top: 100.0,
                bottom: 110.0,
                size: 10.0,
                bold: false,
                italic: false,
                vertical: false,
            })
            .collect()
    }

    #[test]
    fn a_cell_border_splits_a_fragment_and_a_box_edge_through_a_word_does_not() {
        let mut g = glyphs("ab", 10.0);
        g.extend(glyphs("cd", 24.0));
        let wall = |at: f32| Rule {
            horizontal: false,
            at,
            from: 90.0,
            to: 120.0,
        };
        let texts = |rules: &[Rule]| -> Vec<String> {
            fragments(&g, &Walls::new(rules))
                .into_iter()
                .map(|f| f.text)
                .collect()
        };
        assert_eq!(texts(&[]), ["abcd"]);
        assert_eq!(texts(&[wall(23.0)]), ["ab", "cd"]);
        assert_eq!(texts(&[wall(15.0)]), ["abcd"]);
    }
}
