//! Image files (PNG, JPEG, TIFF with every page, BMP) -> OCR text as paragraphs plus one
//! picture block per page whose description is built honestly from the OCR text and the
//! image size. Decoding is bounded against decompression bombs.

pub(crate) mod ocr;
mod pages;

use image::{imageops, GrayImage};

use super::{Block, BlockKind, DescriptionSource, Image, ParseError, ParseOptions, ParsedDocument};

/// Widest or tallest image accepted, in pixels.
pub(crate) const MAX_SIDE: u32 = 20_000;
/// Most memory one decoded image may take.
pub(crate) const MAX_ALLOC: u64 = 512 * 1024 * 1024;
/// Most pages read from a multi-page TIFF.
pub(crate) const MAX_PAGES: usize = 500;

/// Images are scaled so their long side is about this many pixels before OCR: small
/// scans are enlarged (tesseract reads 10-pixel glyphs badly), huge ones reduced.
const OCR_LONG_SIDE: u32 = 2500;

/// Parses an image file: every page is OCR'd (an image has no other text).
pub fn parse(bytes: &[u8], opts: &ParseOptions) -> Result<ParsedDocument, ParseError> {
    let pages = pages::decode(bytes)?;
    let total = pages.len();
    let mut doc = ParsedDocument {
        pages: u32::try_from(total).unwrap_or(u32::MAX),
        ..Default::default()
    };
    for (i, page) in pages.into_iter().enumerate() {
        let page_no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let (w, h) = page.dimensions();
        let text = ocr_page(&page, &opts.ocr_languages);
        drop(page);
        doc.blocks
            .extend(text.iter().flat_map(|t| &t.paragraphs).map(|p| Block {
                kind: BlockKind::Paragraph,
                text: p.clone(),
                page: page_no,
            }));
        let joined = text.as_ref().map(ocr::OcrText::joined);
        let (description, source) = describe(w, h, joined.as_deref());
        doc.blocks.push(Block {
            kind: BlockKind::Image(Image {
                width: w,
                height: h,
                description: description.clone(),
                description_source: source,
            }),
            text: description,
            page: page_no,
        });
    }
    Ok(doc)
}

/// OCR of one page; `None` when tesseract is unavailable or fails (the page then has
/// only its size description).
fn ocr_page(page: &GrayImage, languages: &str) -> Option<ocr::OcrText> {
    let (w, h) = page.dimensions();
    let long = w.max(h).max(1);
    let scale = (OCR_LONG_SIDE as f32 / long as f32).clamp(0.25, 4.0);
    let scaled;
    let img = if (scale - 1.0).abs() > 0.15 {
        let nw = ((w as f32 * scale) as u32).max(1);
        let nh = ((h as f32 * scale) as u32).max(1);
        scaled = imageops::resize(page, nw, nh, imageops::FilterType::Triangle);
        &scaled
    } else {
        page
    };
    // Without a recorded resolution assume a letter page across the long side.
    let dpi = (img.width().max(img.height()) as f32 / 11.0) as u32;
    match ocr::recognize(img, dpi.clamp(72, 600), languages) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(error = %e, "OCR of an image failed");
            None
        }
    }
}

/// An honest description of a picture: its size, and what OCR read in it (`None` when
/// OCR did not run).
pub(crate) fn describe(
    width: u32,
    height: u32,
    ocr_text: Option<&str>,
) -> (String, DescriptionSource) {
    let size = format!("Image, {width}×{height} pixels");
    match ocr_text.map(str::trim) {
        Some(t) if !t.is_empty() => {
            let words: Vec<&str> = t.split_whitespace().collect();
            let shown = words.iter().take(30).copied().collect::<Vec<_>>().join(" ");
            let more = if words.len() > 30 { " …" } else { "" };
            (
                format!(
                    "{size}, containing text ({} words, read by OCR): \"{shown}{more}\"",
                    words.len()
                ),
                DescriptionSource::Ocr,
            )
        }
        Some(_) => (
            format!("{size}; OCR found no text."),
            DescriptionSource::Size,
        ),
        None => (format!("{size}."), DescriptionSource::Size),
    }
}
