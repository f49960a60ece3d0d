//! PDF files through pdfium: text by page in reading order, headings from font size and
//! weight, lists, tables (grids of ruling lines and text positions; `accurate` also
//! regions that rules only frame or underline), picture regions and metadata. Pages
//! without a text layer are rendered (about 300 dpi) and read by tesseract. When OCR is asked for, every page is rendered: a page
//! with a real text layer keeps it (it beats OCR of itself) and its pictures are read,
//! their text going into the picture descriptions. Pages are processed one at a time so
//! memory stays bounded however long the document is.

mod blocks;
mod fragments;
mod glyphs;
mod layout;
mod library;
mod objects;
mod page;
mod raster;
mod tables;

use std::ops::ControlFlow;

use pdfium_render::prelude::{
    PdfDocument, PdfDocumentMetadataTagType, PdfiumError, PdfiumInternalError,
};

use super::image::{describe, ocr};
use super::{
    Block, BlockKind, DescriptionSource, DocInfo, Image, PageEvent, ParseError, ParseOptions,
    ParsedDocument,
};

/// Pages read from one document at most; the rest are ignored (with a warning).
pub const MAX_PAGES: u32 = 5_000;

/// A page with fewer inked characters than this has no usable text layer.
const MIN_TEXT_CHARS: usize = 16;

/// The process's pdfium instance, bound to `library` on first use (later calls share
/// it). For tools and tests that build or inspect PDFs with `pdfium-render` themselves:
/// pdfium can be bound only once per process.
pub fn pdfium(
    library: &std::path::Path,
) -> Result<&'static pdfium_render::prelude::Pdfium, ParseError> {
    library::pdfium(library).map_err(ParseError::Unsupported)
}

fn open_error(e: PdfiumError) -> ParseError {
    match e {
        PdfiumError::PdfiumLibraryInternalError(
            PdfiumInternalError::PasswordError | PdfiumInternalError::SecurityError,
        ) => ParseError::Encrypted,
        PdfiumError::PdfiumLibraryInternalError(PdfiumInternalError::FormatError) => {
            ParseError::Invalid("the file is not a valid PDF (damaged or truncated)".into())
        }
        other => {
            tracing::debug!(error = ?other, "pdfium could not open a PDF");
            ParseError::Invalid("the PDF could not be opened (damaged or unsupported)".into())
        }
    }
}

/// A metadata field, unless empty or a file name that a converter left behind
/// ("Screenshot 2025-07-29.png", "report.docx").
fn metadata(doc: &PdfDocument, tag: PdfDocumentMetadataTagType) -> Option<String> {
    let v = doc.metadata().get(tag)?.value().trim().to_owned();
    let lower = v.to_ascii_lowercase();
    let file_name = [
        ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls",
        ".xlsx", ".txt", ".html", ".htm", ".indd", ".tex", ".dvi",
    ]
    .iter()
    .any(|e| lower.ends_with(e));
    (v.chars().any(char::is_alphanumeric) && !file_name).then_some(v)
}

/// Parses the PDF in `bytes` page by page: `f` gets [`PageEvent::Opened`] with the
/// document's facts, then one [`PageEvent::Page`] per page as soon as it is read, and
/// may stop the parse early with `ControlFlow::Break`. Only one page is in memory at a
/// time (its rendered bitmap, when OCR'd, is dropped before the next page).
pub fn for_each_page(
    bytes: &[u8],
    opts: &ParseOptions,
    f: &mut dyn FnMut(PageEvent) -> ControlFlow<()>,
) -> Result<(), ParseError> {
    let head = &bytes[..bytes.len().min(1024)];
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(ParseError::Invalid(
            "the file is not a PDF (no %PDF- header)".into(),
        ));
    }
    let run = || pages(bytes, opts, f);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|_| {
        tracing::error!("pdfium or the PDF layout code panicked");
        ParseError::Invalid("the PDF could not be parsed (malformed content)".into())
    })?
}

fn pages(
    bytes: &[u8],
    opts: &ParseOptions,
    f: &mut dyn FnMut(PageEvent) -> ControlFlow<()>,
) -> Result<(), ParseError> {
    let pdfium = pdfium(&opts.pdfium_library)?;
    let doc = pdfium
        .load_pdf_from_byte_slice(bytes, None)
        .map_err(open_error)?;
    let count = u32::try_from(doc.pages().len()).unwrap_or(0);
    if count > MAX_PAGES {
        tracing::warn!(
            pages = count,
            max = MAX_PAGES,
            "PDF truncated to the page limit"
        );
    }
    let info = DocInfo {
        title: metadata(&doc, PdfDocumentMetadataTagType::Title),
        author: metadata(&doc, PdfDocumentMetadataTagType::Author),
        pages: count,
    };
    if f(PageEvent::Opened(info)).is_break() {
        return Ok(());
    }
    for index in 0..count.min(MAX_PAGES) {
        let number = index + 1;
        let blocks = match doc.pages().get(index as i32) {
            Ok(pdf_page) => read_page(&pdf_page, number, opts),
            Err(e) => {
                tracing::warn!(page = number, error = ?e, "unreadable PDF page skipped");
                Vec::new()
            }
        };
        if f(PageEvent::Page { number, blocks }).is_break() {
            break;
        }
    }
    Ok(())
}

/// One page: its text layer, or OCR when it has none (or OCR is asked for).
fn read_page(
    pdf_page: &pdfium_render::prelude::PdfPage,
    number: u32,
    opts: &ParseOptions,
) -> Vec<Block> {
    let text = page::read(pdf_page, number, opts.table_mode);
    // A scan with a stray line of text (a stamp, a page number) still needs OCR.
    let has_text = text.ink >= MIN_TEXT_CHARS && !(text.picture_cover > 0.8 && text.ink < 100);
    if has_text && !opts.enable_ocr {
        return text.blocks;
    }
    let Some(raster) = raster::render(pdf_page) else {
        return text.blocks;
    };
    if has_text {
        // A real text layer beats OCR of it; OCR reads what is only in the pictures.
        let mut blocks = text.blocks;
        let mut pics = text.pictures.iter();
        for b in blocks.iter_mut() {
            if let BlockKind::Image(img) = &mut b.kind {
                let Some((r, _, _)) = pics.next() else { break };
                let crop = crop(&raster, r);
                let read =
                    crop.and_then(|c| ocr::recognize(&c, raster.dpi, &opts.ocr_languages).ok());
                if let Some(t) = read.filter(|t| t.words() > 0) {
                    let (d, s) = describe(img.width, img.height, Some(&t.joined()));
                    img.description = d.clone();
                    img.description_source = s;
                    b.text = d;
                }
            }
        }
        return blocks;
    }
    let (w, h) = raster.image.dimensions();
    if is_blank(&raster.image) {
        // Nothing drawn: no text to read, and OCR of white space is slow noise.
        return text.blocks;
    }
    let read = match ocr::recognize(&raster.image, raster.dpi, &opts.ocr_languages) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(page = number, error = %e, "OCR of a PDF page failed");
            return text.blocks;
        }
    };
    drop(raster);
    let mut blocks: Vec<Block> = read
        .paragraphs
        .iter()
        .map(|p| Block {
            kind: BlockKind::Paragraph,
            text: p.clone(),
            page: number,
        })
        .collect();
    if blocks.is_empty() {
        // Nothing legible: say what the page is rather than return nothing.
        let (description, _) = describe(w, h, Some(""));
        blocks.push(Block {
            text: description.clone(),
            kind: BlockKind::Image(Image {
                width: w,
                height: h,
                description,
                description_source: DescriptionSource::Size,
            }),
            page: number,
        });
    }
    blocks
}

/// Whether a rendered page is (nearly) all white.
fn is_blank(img: &image::GrayImage) -> bool {
    let dark = img.as_raw().iter().step_by(7).filter(|&&p| p < 160).count();
    let sampled = img.as_raw().len().div_ceil(7).max(1);
    dark * 2000 < sampled
}

fn crop(raster: &raster::Raster, r: &layout::Rect) -> Option<image::GrayImage> {
    let s = raster.scale;
    let (iw, ih) = raster.image.dimensions();
    let x = ((r.x0 * s).max(0.0) as u32).min(iw);
    let y = ((r.top * s).max(0.0) as u32).min(ih);
    let w = ((r.width() * s) as u32).min(iw - x);
    let h = ((r.height() * s) as u32).min(ih - y);
    (w >= 16 && h >= 16).then(|| image::imageops::crop_imm(&raster.image, x, y, w, h).to_image())
}

/// Parses the whole PDF into one document.
pub fn parse(bytes: &[u8], opts: &ParseOptions) -> Result<ParsedDocument, ParseError> {
    let mut doc = ParsedDocument::default();
    for_each_page(bytes, opts, &mut |event| {
        match event {
            PageEvent::Opened(info) => {
                doc.title = info.title;
                doc.author = info.author;
                doc.pages = info.pages;
            }
            PageEvent::Page { blocks, .. } => doc.blocks.extend(blocks),
        }
        ControlFlow::Continue(())
    })?;
    if doc.title.is_none() {
        doc.title = heading_title(&doc.blocks);
    }
    Ok(doc)
}

/// The title of a document whose metadata has none: its first heading on page 1 (a
/// chapter number is a heading but no title). Page-by-page readers apply it to page 1.
pub fn heading_title(blocks: &[Block]) -> Option<String> {
    blocks.iter().find_map(|b| match b.kind {
        BlockKind::Heading(_) if b.page == 1 && b.text.chars().any(char::is_alphabetic) => {
            Some(b.text.clone())
        }
        _ => None,
    })
}
