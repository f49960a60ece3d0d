//! File bytes -> a structured document (title, author, pages, ordered blocks). One
//! module per format; nothing here knows about storage or HTTP. Every parser treats its
//! input as hostile: bounded work and memory, errors instead of panics.

pub mod archive;
pub mod clean;
pub mod delimited;
pub mod formats;
pub mod html;
pub mod image;
pub mod json;
pub mod language;
pub mod markdown;
pub mod office;
pub mod pdf;
pub mod render;
pub mod rst;
pub mod text;

use std::path::PathBuf;

use thiserror::Error;

pub use formats::{extension_of, Format, FORMATS};

/// A parsed document, the input of every chunker.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedDocument {
    pub title: Option<String>,
    pub author: Option<String>,
    /// Number of pages (1 for formats without pages; slides and sheets count as pages).
    pub pages: u32,
    /// Content in reading order.
    pub blocks: Vec<Block>,
}

/// One block of content.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: BlockKind,
    /// Plain text of the block (for a table: its plain-text rendering; for an image:
    /// its description).
    pub text: String,
    /// 1-based page (slide, sheet) the block is on.
    pub page: u32,
}

/// What a block is.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    /// A heading of level 1-6.
    Heading(u8),
    Paragraph,
    ListItem,
    Code,
    Table(Table),
    Image(Image),
}

/// A table: rows of cells, the first row being the header when there is one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub rows: Vec<Vec<String>>,
}

/// An image found in a document (or the document itself, for image files).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// What the image shows, as far as ragd can tell.
    pub description: String,
    /// Where the description came from.
    pub description_source: DescriptionSource,
}

/// Provenance of an image description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptionSource {
    /// A vision model described it.
    Vision,
    /// Built from OCR text and the image size.
    Ocr,
    /// Only the size is known (no text found, or OCR off).
    Size,
}

impl DescriptionSource {
    /// Name used in API responses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vision => "vision_model",
            Self::Ocr => "ocr",
            Self::Size => "image_size",
        }
    }
}

/// How PDF tables are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableMode {
    /// Ruled grids where the page draws them, else columns from text positions.
    #[default]
    Fast,
    /// Ruling lines and cell boxes.
    Accurate,
}

/// Options every parser receives.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// OCR every page (PDF), not only pages without a text layer.
    pub enable_ocr: bool,
    pub table_mode: TableMode,
    /// Tesseract languages, e.g. `eng+ara`.
    pub ocr_languages: String,
    /// pdfium's shared library.
    pub pdfium_library: PathBuf,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self {
            enable_ocr: false,
            table_mode: TableMode::Fast,
            ocr_languages: "eng+ara".into(),
            pdfium_library: PathBuf::from("models/pdfium/libpdfium.so"),
        }
    }
}

/// Why a file could not be parsed; every variant is the caller's 400.
#[derive(Debug, Error)]
pub enum ParseError {
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Invalid(String),
    #[error("the file is encrypted or password-protected")]
    Encrypted,
    #[error("the file is empty")]
    Empty,
    #[error("{0}")]
    TooLarge(String),
}

/// Parses `bytes` as `format`. Parsers never panic on bad input; a panic that slips
/// through is still caught here and reported as an invalid file.
pub fn parse(
    format: &Format,
    bytes: &[u8],
    opts: &ParseOptions,
) -> Result<ParsedDocument, ParseError> {
    if bytes.is_empty() {
        return Err(ParseError::Empty);
    }
    let run = || (format.read)(bytes, opts);
    let doc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|_| {
        ParseError::Invalid("the file could not be parsed (malformed content)".into())
    })??;
    if doc.blocks.iter().all(|b| b.text.trim().is_empty()) {
        return Err(ParseError::Empty);
    }
    Ok(doc)
}

/// Document-level facts known before its pages are read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocInfo {
    pub title: Option<String>,
    pub author: Option<String>,
    pub pages: u32,
}

/// What a page-by-page parse reports, in order: `Opened` once, then each `Page`.
#[derive(Debug)]
pub enum PageEvent {
    Opened(DocInfo),
    Page { number: u32, blocks: Vec<Block> },
}

/// Parses page by page, calling `f` as soon as each page is ready; `f` may stop the
/// parse early by returning `Break`. Formats without real pages are parsed whole and
/// then reported page by page.
pub fn for_each_page(
    format: &Format,
    bytes: &[u8],
    opts: &ParseOptions,
    f: &mut dyn FnMut(PageEvent) -> std::ops::ControlFlow<()>,
) -> Result<(), ParseError> {
    if let Some(pages) = format.pages.filter(|_| !bytes.is_empty()) {
        return pages(bytes, opts, f);
    }
    let doc = parse(format, bytes, opts)?;
    let info = DocInfo {
        title: doc.title.clone(),
        author: doc.author.clone(),
        pages: doc.pages.max(1),
    };
    if f(PageEvent::Opened(info)).is_break() {
        return Ok(());
    }
    let mut blocks = doc.blocks.into_iter().peekable();
    for number in 1..=doc.pages.max(1) {
        let mut page = Vec::new();
        while let Some(b) = blocks.next_if(|b| b.page <= number) {
            page.push(b);
        }
        if number == doc.pages.max(1) {
            page.extend(blocks.by_ref());
        }
        if f(PageEvent::Page {
            number,
            blocks: page,
        })
        .is_break()
        {
            break;
        }
    }
    Ok(())
}
