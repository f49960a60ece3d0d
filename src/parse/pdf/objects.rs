//! A page's drawing objects: picture regions (image objects, also inside form
//! XObjects) and ruling lines (thin path objects and the edges of path rectangles),
//! the raw material of picture blocks, of ruled tables and of the walls fragments never
//! cross.

use pdfium_render::prelude::{
    PdfPage, PdfPageObject, PdfPageObjectCommon, PdfPageObjectsCommon, PdfPathSegmentType,
    PdfPathSegments,
};

use super::layout::Rect;

/// Objects read per page at most (including those nested in forms).
const MAX_OBJECTS: usize = 20_000;
/// Path segments read per page at most (each is a call into pdfium).
const MAX_SEGMENTS: usize = 100_000;
/// Form XObjects nest at most this deep before they are ignored.
const MAX_NESTING: usize = 4;
/// Pictures smaller than this (points, either side) are decoration.
const MIN_PICTURE_SIDE: f32 = 24.0;
/// A path thinner than this (points) is a ruling line.
const MAX_RULE_THICKNESS: f32 = 2.5;

/// A horizontal or vertical ruling line in top-down page coordinates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    pub horizontal: bool,
    /// y of a horizontal rule, x of a vertical one.
    pub at: f32,
    pub from: f32,
    pub to: f32,
}

/// Pictures and rules of one page.
#[derive(Debug, Default)]
pub(crate) struct Drawing {
    /// Picture regions with their pixel size.
    pub pictures: Vec<(Rect, u32, u32)>,
    pub rules: Vec<Rule>,
}

struct Walk {
    page_top: f32,
    seen: usize,
    segments: usize,
    out: Drawing,
}

/// Reads the pictures and the rules of `page`.
pub(crate) fn drawing(page: &PdfPage) -> Drawing {
    let mut walk = Walk {
        page_top: page.height().value,
        seen: 0,
        segments: 0,
        out: Drawing::default(),
    };
    for obj in page.objects().iter() {
        if !walk.visit(&obj, 0) {
            break;
        }
    }
    walk.out
}

impl Walk {
    fn rect(&self, obj: &PdfPageObject) -> Option<Rect> {
        let b = obj.bounds().ok()?;
        let r = Rect {
            x0: b.left().value,
            x1: b.right().value,
            top: self.page_top - b.top().value,
            bottom: self.page_top - b.bottom().value,
        };
        [r.x0, r.x1, r.top, r.bottom]
            .iter()
            .all(|v| v.is_finite())
            .then_some(r)
    }

    /// Visits one object; false once the object budget is spent.
    fn visit(&mut self, obj: &PdfPageObject, depth: usize) -> bool {
        self.seen += 1;
        if self.seen > MAX_OBJECTS {
            return false;
        }
        match obj {
            PdfPageObject::Image(img) => {
                if let Some(r) = self.rect(obj) {
                    if r.width() >= MIN_PICTURE_SIDE && r.height() >= MIN_PICTURE_SIDE {
                        let w = img.width().unwrap_or(0).max(0) as u32;
                        let h = img.height().unwrap_or(0).max(0) as u32;
                        self.out.pictures.push((r, w, h));
                    }
                }
            }
            PdfPageObject::Path(path) => {
                let Some(r) = self.rect(obj) else { return true };
                if r.height() <= MAX_RULE_THICKNESS && r.width() > MAX_RULE_THICKNESS {
                    let at = (r.top + r.bottom) / 2.0;
                    self.out.rules.push(Rule {
                        horizontal: true,
                        at,
                        from: r.x0,
                        to: r.x1,
                    });
                } else if r.width() <= MAX_RULE_THICKNESS && r.height() > MAX_RULE_THICKNESS {
                    let at = (r.x0 + r.x1) / 2.0;
                    self.out.rules.push(Rule {
                        horizontal: false,
                        at,
                        from: r.top,
                        to: r.bottom,
                    });
                } else if let Ok(m) = path.matrix() {
                    // A path of several rectangles or lines (cell borders drawn at once).
                    let mut prev: Option<(f32, f32)> = None;
                    let mut start: Option<(f32, f32)> = None;
                    for seg in path.segments().transform(m).iter().take(4_000) {
                        self.segments += 1;
                        if self.segments > MAX_SEGMENTS {
                            break;
                        }
                        let p = (seg.x().value, self.page_top - seg.y().value);
                        match seg.segment_type() {
                            PdfPathSegmentType::MoveTo => {
                                start = Some(p);
                            }
                            PdfPathSegmentType::LineTo => {
                                if let Some(q) = prev {
                                    self.edge(q, p);
                                }
                            }
                            _ => {}
                        }
                        if seg.is_close() {
                            if let Some(s) = start {
                                self.edge(p, s);
                            }
                        }
                        prev = Some(p);
                    }
                }
            }
            PdfPageObject::XObjectForm(form) if depth < MAX_NESTING => {
                for child in form.iter() {
                    if !self.visit(&child, depth + 1) {
                        return false;
                    }
                }
            }
            _ => {}
        }
        true
    }

    fn edge(&mut self, a: (f32, f32), b: (f32, f32)) {
        let (dx, dy) = ((a.0 - b.0).abs(), (a.1 - b.1).abs());
        if dy <= 0.5 && dx > MAX_RULE_THICKNESS {
            self.out.rules.push(Rule {
                horizontal: true,
                at: a.1,
                from: a.0.min(b.0),
                to: a.0.max(b.0),
            });
        } else if dx <= 0.5 && dy > MAX_RULE_THICKNESS {
            self.out.rules.push(Rule {
                horizontal: false,
                at: a.0,
                from: a.1.min(b.1),
                to: a.1.max(b.1),
            });
        }
    }
}
