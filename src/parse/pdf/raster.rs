//! Rendering a page to a greyscale bitmap for OCR, at about 300 dpi and never larger
//! than a fixed pixel budget.

use image::GrayImage;
use pdfium_render::prelude::{PdfPage, PdfRenderConfig};

/// Target resolution for OCR.
const DPI: f32 = 300.0;
/// Longest side of a rendered page, in pixels (a 300-dpi A3 page fits).
const MAX_SIDE: i32 = 5_000;

/// A rendered page and the resolution it was rendered at.
pub(crate) struct Raster {
    pub image: GrayImage,
    pub dpi: u32,
    /// Pixels per point, for mapping page regions into the bitmap.
    pub scale: f32,
}

/// Renders `page`; `None` when pdfium cannot (the page is then skipped for OCR).
pub(crate) fn render(page: &PdfPage) -> Option<Raster> {
    let (w, h) = (page.width().value, page.height().value);
    if !(w > 1.0 && h > 1.0 && w.is_finite() && h.is_finite()) {
        return None;
    }
    let scale = (DPI / 72.0).min(MAX_SIDE as f32 / w.max(h));
    let cfg = PdfRenderConfig::new()
        .scale_page_by_factor(scale)
        .set_maximum_width(MAX_SIDE)
        .set_maximum_height(MAX_SIDE)
        .use_grayscale_rendering(true)
        .render_annotations(true)
        .render_form_data(false);
    let bitmap = page.render_with_config(&cfg).ok()?;
    let image = bitmap.as_image().ok()?.to_luma8();
    drop(bitmap);
    let scale = image.width() as f32 / w;
    Some(Raster {
        image,
        dpi: (scale * 72.0).round() as u32,
        scale,
    })
}
