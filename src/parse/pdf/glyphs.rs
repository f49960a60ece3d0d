//! A page's characters as positioned glyphs, in pdfium's text order (which is already
//! logical order for right-to-left scripts), in top-down page coordinates.

use pdfium_render::prelude::{PdfFontWeight, PdfPage};

/// At most this many characters are read from one page (a hostile page can claim
/// millions); the rest of the page is ignored.
const MAX_CHARS_PER_PAGE: usize = 200_000;

/// One character and where it is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Glyph {
    pub ch: char,
    pub x0: f32,
    pub x1: f32,
    /// Top edge, measured downwards from the top of the page.
    pub top: f32,
    /// Bottom edge, measured downwards from the top of the page.
    pub bottom: f32,
    /// Effective font size in points.
    pub size: f32,
    pub bold: bool,
    pub italic: bool,
    /// Drawn turned by a quarter: the text runs up or down the page.
    pub vertical: bool,
}

impl Glyph {
    /// Whether the character separates words rather than drawing ink.
    pub fn is_space(&self) -> bool {
        self.ch.is_whitespace() || self.ch.is_control()
    }
}

/// Whether `c` belongs to a right-to-left script (Hebrew, Arabic, Syriac, Thaana, N'Ko
/// and their presentation forms).
pub(crate) fn is_rtl(c: char) -> bool {
    matches!(c as u32,
        0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF | 0x10800..=0x10FFF | 0x1E800..=0x1EFFF)
}

/// The visible glyphs of `page`, plus spaces (kept as word separators). Text turned a
/// quarter (vertical table headers, margin stamps) is flagged `vertical`; text at other
/// angles (watermarks) is left out. On a page whose text is mostly turned, nothing is
/// flagged: the page itself is rotated.
pub(crate) fn page_glyphs(page: &PdfPage) -> Vec<Glyph> {
    let Ok(text) = page.text() else {
        return Vec::new();
    };
    let page_top = page.height().value;
    let mut out = Vec::new();
    let mut last_font: Option<(String, Style)> = None;
    for ch in text.chars().iter().take(MAX_CHARS_PER_PAGE) {
        let Some(c) = ch.unicode_char() else { continue };
        // pdfium reports a hyphen it split at a line end as U+0002.
        let c = if c == '\u{2}' { '-' } else { c };
        if c == '\u{fffe}' || c == '\u{feff}' {
            continue;
        }
        let Ok(rect) = ch.loose_bounds() else {
            continue;
        };
        let size = ch.scaled_font_size().value;
        let size = if size.is_finite() && size > 0.5 {
            size
        } else {
            (rect.top().value - rect.bottom().value).abs().max(1.0)
        };
        let style = if c.is_whitespace() {
            Style::default()
        } else {
            style_of(ch.font_weight(), || ch.font_name(), &mut last_font)
        };
        let g = Glyph {
            ch: c,
            x0: rect.left().value,
            x1: rect.right().value,
            top: page_top - rect.top().value,
            bottom: page_top - rect.bottom().value,
            size,
            bold: style.bold,
            italic: style.italic,
            vertical: false,
        };
        if !(g.x0.is_finite() && g.x1.is_finite() && g.top.is_finite() && g.bottom.is_finite()) {
            continue;
        }
        let angle = ch.angle_degrees().unwrap_or(0.0);
        let upright = !(2.0..=358.0).contains(&angle);
        let quarter = (88.0..=92.0).contains(&angle) || (268.0..=272.0).contains(&angle);
        if upright || g.is_space() {
            out.push(g);
        } else if quarter {
            out.push(Glyph {
                vertical: true,
                ..g
            });
        }
    }
    let ink = out.iter().filter(|g| !g.is_space()).count();
    let turned = out.iter().filter(|g| g.vertical && !g.is_space()).count();
    if turned * 2 > ink {
        out.iter_mut().for_each(|g| g.vertical = false);
    }
    fix_lam_alef(&mut out);
    attach_marks(out)
}

/// Whether `c` is a combining mark of the Arabic script (harakat, tanween, shadda).
pub(crate) fn is_arabic_mark(c: char) -> bool {
    matches!(c as u32, 0x0610..=0x061A | 0x064B..=0x065F | 0x0670 | 0x06D6..=0x06ED)
}

/// A lam-alef ligature is one glyph that ToUnicode maps to two characters; they come out
/// in visual order (alef first). Both halves share the glyph's box, which tells them
/// apart from a real alef followed by a lam.
fn fix_lam_alef(glyphs: &mut [Glyph]) {
    for i in 1..glyphs.len() {
        let (a, b) = (&glyphs[i - 1], &glyphs[i]);
        let alef = matches!(a.ch, 'ا' | 'أ' | 'إ' | 'آ' | 'ٱ');
        let same_box = (a.x0 - b.x0).abs() < 0.01 && (a.x1 - b.x1).abs() < 0.01;
        if alef && b.ch == 'ل' && same_box {
            glyphs.swap(i - 1, i);
        }
    }
}

/// An Arabic mark can come out before the letter it sits on, even after a space pdfium
/// made up from the mark's offset: each mark drawn over the next letter (and not over
/// the previous one) is moved after that letter, and the spaces between are dropped.
fn attach_marks(glyphs: Vec<Glyph>) -> Vec<Glyph> {
    let over = |m: &Glyph, g: &Glyph| {
        let c = (m.x0 + m.x1) / 2.0;
        c >= g.x0 - 0.3 && c <= g.x1 + 0.3
    };
    let mut out: Vec<Glyph> = Vec::with_capacity(glyphs.len());
    let mut i = 0;
    while i < glyphs.len() {
        let m = glyphs[i];
        if is_arabic_mark(m.ch) {
            let prev = out.iter().rev().find(|g| !g.is_space());
            let next = (i + 1..glyphs.len().min(i + 4)).find(|&j| !glyphs[j].is_space());
            if let Some(j) = next {
                let n = glyphs[j];
                if over(&m, &n) && !prev.is_some_and(|p| over(&m, p)) && !is_arabic_mark(n.ch) {
                    while out.last().is_some_and(Glyph::is_space) {
                        out.pop();
                    }
                    out.push(n);
                    out.push(m);
                    i = j + 1;
                    continue;
                }
            }
        }
        out.push(m);
        i += 1;
    }
    out
}

/// Weight and slant of a font.
#[derive(Debug, Clone, Copy, Default)]
struct Style {
    bold: bool,
    italic: bool,
}

/// Bold from the font weight, or from the font's name when pdfium does not know the
/// weight (embedded subset fonts often carry it only in the name); italic from the name.
fn style_of(
    weight: Option<PdfFontWeight>,
    name: impl FnOnce() -> String,
    cache: &mut Option<(String, Style)>,
) -> Style {
    let heavy = weight.as_ref().is_some_and(|w| match w {
        PdfFontWeight::Weight600
        | PdfFontWeight::Weight700Bold
        | PdfFontWeight::Weight800
        | PdfFontWeight::Weight900 => true,
        PdfFontWeight::Custom(v) => *v >= 600,
        _ => false,
    });
    let name = name();
    if let Some((n, s)) = cache {
        if *n == name {
            return Style {
                bold: s.bold || heavy,
                italic: s.italic,
            };
        }
    }
    let lower = name.to_ascii_lowercase();
    // "Medi" is the bold cut of the Nimbus (LaTeX Times) family; CMBX and SFBX are the
    // bold extended cuts of Computer Modern and cm-super, CMTI and SFTI the italics.
    // A "Medium" cut is set apart from body text often enough to count as bold.
    let bold = [
        "bold", "black", "heavy", "semibold", "demi", "medium", "cmbx", "sfbx", "-medi",
    ]
    .iter()
    .any(|k| lower.contains(k));
    let italic = ["italic", "oblique", "cmti", "sfti", "-ital"]
        .iter()
        .any(|k| lower.contains(k))
        || lower.ends_with("-it")
        || lower.ends_with("-bi")
        || lower.ends_with("-mediita")
        || lower.ends_with("-regita");
    let style = Style { bold, italic };
    *cache = Some((name, style));
    Style {
        bold: bold || heavy,
        italic,
    }
}
