//! File bytes -> a structured document (title, pages, ordered blocks). One module per
//! format; nothing here knows about storage or HTTP.

pub mod markdown;
pub mod text;

use std::path::Path;

use thiserror::Error;

/// A parsed document, the input of every chunker.
#[derive(Debug, Clone, Default)]
pub struct ParsedDocument {
    pub title: Option<String>,
    pub author: Option<String>,
    /// Number of pages (1 for formats without pages).
    pub pages: u32,
    pub blocks: Vec<Block>,
}

/// One block of content, in reading order.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub kind: BlockKind,
    pub text: String,
    /// 1-based page the block is on.
    pub page: u32,
}

/// What a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A heading of level 1-6.
    Heading(u8),
    Paragraph,
    ListItem,
    Code,
    Table,
}

/// Formats this build can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
}

impl Format {
    /// The format for a file name, by extension.
    pub fn for_filename(name: &str) -> Result<Self, ParseError> {
        let ext = Path::new(name)
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "txt" => Ok(Format::Text),
            "md" | "markdown" => Ok(Format::Markdown),
            "" => Err(ParseError::Unsupported(format!(
                "'{name}' has no file extension"
            ))),
            other => Err(ParseError::Unsupported(format!(
                "unsupported file type '.{other}'; supported: {}",
                SUPPORTED.join(", ")
            ))),
        }
    }

    /// The extension reported for this format (with the dot).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => ".txt",
            Format::Markdown => ".md",
        }
    }
}

/// Extensions accepted for upload.
pub const SUPPORTED: &[&str] = &[".txt", ".md", ".markdown"];

/// Why a file could not be parsed; every variant is the caller's 400.
#[derive(Debug, Error)]
pub enum ParseError {
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Invalid(String),
    #[error("the file is empty")]
    Empty,
}

/// Parses `bytes` as `format`.
pub fn parse(format: Format, bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let text = text::decode(bytes)?;
    let doc = match format {
        Format::Text => text::parse(&text),
        Format::Markdown => markdown::parse(&text),
    };
    if doc.blocks.iter().all(|b| b.text.trim().is_empty()) {
        return Err(ParseError::Empty);
    }
    Ok(doc)
}
