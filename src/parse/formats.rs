//! The one table of file formats: for each, its extensions, media types, description,
//! whether it has real pages or is an image, whether it may be parsed incrementally,
//! and the parser that reads it. `/parse/formats`, upload checks, scraping, the
//! streaming choice and the assistant's attachments all read this table; adding a
//! format is one parser module and one row here.

use std::fmt;
use std::ops::ControlFlow;
use std::path::Path;

use super::{
    delimited, html, image, json, markdown, office, pdf, rst, text, PageEvent, ParseError,
    ParseOptions, ParsedDocument,
};

/// Reads a whole file.
pub type ReadFn = fn(&[u8], &ParseOptions) -> Result<ParsedDocument, ParseError>;
/// Reads a file page by page, reporting `Opened` then each `Page` to the callback,
/// which may stop it early.
pub type PagesFn = fn(
    &[u8],
    &ParseOptions,
    &mut dyn FnMut(PageEvent) -> ControlFlow<()>,
) -> Result<(), ParseError>;

/// One row of the table.
pub struct Format {
    /// Short name: `file_type` metadata when the file name says nothing (scraped pages).
    pub name: &'static str,
    /// Extensions, lower case with the dot; the first is the usual one.
    pub extensions: &'static [&'static str],
    /// Media types a fetched body of this format is served as.
    pub media_types: &'static [&'static str],
    /// What `/parse/formats` says of it.
    pub description: &'static str,
    /// An image: OCR reads it; the assistant attaches it as an image.
    pub image: bool,
    /// May be parsed page by page with chunks streamed as they come
    /// (`/parse/sections/incremental`).
    pub incremental: bool,
    /// The parser.
    pub read: ReadFn,
    /// A parser that reports real pages one by one, when the format has pages.
    pub pages: Option<PagesFn>,
}

/// Every format, in the order `/parse/formats` lists their extensions.
pub static FORMATS: &[Format] = &[
    Format {
        name: "text",
        extensions: &[".txt"],
        media_types: &["text/plain"],
        description: "Plain text",
        image: false,
        incremental: true,
        read: |b, _| Ok(text::parse(&text::decode(b)?)),
        pages: None,
    },
    Format {
        name: "markdown",
        extensions: &[".md", ".markdown"],
        media_types: &["text/markdown", "text/x-markdown"],
        description: "Markdown",
        image: false,
        incremental: true,
        read: |b, _| Ok(markdown::parse(&text::decode(b)?)),
        pages: None,
    },
    Format {
        name: "rst",
        extensions: &[".rst"],
        media_types: &[],
        description: "reStructuredText",
        image: false,
        incremental: false,
        read: |b, _| Ok(rst::parse(&text::decode(b)?)),
        pages: None,
    },
    Format {
        name: "pdf",
        extensions: &[".pdf"],
        media_types: &["application/pdf"],
        description: "PDF: text by page, headings, tables, images; OCR for scanned pages",
        image: false,
        incremental: true,
        read: pdf::parse,
        pages: Some(pdf::for_each_page),
    },
    Format {
        name: "docx",
        extensions: &[".docx"],
        media_types: &[],
        description: "Word document: headings, lists, tables, text boxes, headers and footers",
        image: false,
        incremental: true,
        read: |b, _| office::parse_docx(b),
        pages: None,
    },
    Format {
        name: "pptx",
        extensions: &[".pptx"],
        media_types: &[],
        description: "PowerPoint: slides, tables, speaker notes",
        image: false,
        incremental: false,
        read: |b, _| office::parse_pptx(b),
        pages: None,
    },
    Format {
        name: "html",
        extensions: &[".html", ".htm"],
        media_types: &["text/html", "application/xhtml+xml"],
        description: "Web page: main content, headings, tables, lists",
        image: false,
        incremental: true,
        read: |b, _| Ok(html::parse(&text::decode(b)?)),
        pages: None,
    },
    Format {
        name: "json",
        extensions: &[".json"],
        media_types: &["application/json"],
        description: "JSON data",
        image: false,
        incremental: false,
        read: |b, _| json::parse(b),
        pages: None,
    },
    Format {
        name: "csv",
        extensions: &[".csv"],
        media_types: &["text/csv"],
        description: "Delimited text (delimiter and encoding detected)",
        image: false,
        incremental: false,
        read: |b, _| delimited::parse(b),
        pages: None,
    },
    Format {
        name: "xlsx",
        extensions: &[".xlsx"],
        media_types: &[],
        description: "Excel workbook: every sheet as a table",
        image: false,
        incremental: false,
        read: |b, _| office::parse_xlsx(b),
        pages: None,
    },
    Format {
        name: "xlsm",
        extensions: &[".xlsm"],
        media_types: &[],
        description: "Excel macro-enabled workbook: every sheet as a table (macros are ignored)",
        image: false,
        incremental: false,
        read: |b, _| office::parse_xlsx(b),
        pages: None,
    },
    Format {
        name: "image",
        extensions: &[".png", ".jpg", ".jpeg", ".tiff", ".tif", ".bmp"],
        media_types: &[],
        description: "Image: text by OCR",
        image: true,
        incremental: false,
        read: image::parse,
        pages: None,
    },
];

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Format {}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Extension of a file name, lower case, with the dot ("" when none).
pub fn extension_of(name: &str) -> String {
    Path::new(name)
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy().to_lowercase()))
        .unwrap_or_default()
}

/// Every extension of `table`, in order.
pub fn extensions_in(table: &'static [Format]) -> impl Iterator<Item = &'static str> {
    table.iter().flat_map(|f| f.extensions.iter().copied())
}

impl Format {
    /// The format for a file name, by extension.
    pub fn for_filename(name: &str) -> Result<&'static Self, ParseError> {
        Self::for_filename_in(FORMATS, name)
    }

    /// The format for a file name in `table`, by extension.
    pub fn for_filename_in(
        table: &'static [Format],
        name: &str,
    ) -> Result<&'static Self, ParseError> {
        let ext = extension_of(name);
        if ext.is_empty() {
            return Err(ParseError::Unsupported(format!(
                "'{name}' has no file extension"
            )));
        }
        table
            .iter()
            .find(|f| f.extensions.contains(&ext.as_str()))
            .ok_or_else(|| {
                let all: Vec<&str> = extensions_in(table).collect();
                ParseError::Unsupported(format!(
                    "unsupported file type '{ext}'; supported: {}",
                    all.join(" ")
                ))
            })
    }

    /// The format a body served as `media_type` (no parameters, lower case) is in.
    pub fn for_media_type(media_type: &str) -> Option<&'static Self> {
        FORMATS.iter().find(|f| f.media_types.contains(&media_type))
    }

    /// The format of this short name (`pdf`, `docx`...), for tests and tools that name
    /// one. Panics on a name that is not in the table.
    pub fn named(name: &str) -> &'static Self {
        FORMATS
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no format named '{name}'"))
    }

    /// Extensions of the formats that can be parsed incrementally, space-separated.
    pub fn incremental_extensions() -> String {
        FORMATS
            .iter()
            .filter(|f| f.incremental)
            .flat_map(|f| f.extensions.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extension_and_media_type_has_one_format() {
        let exts: Vec<&str> = extensions_in(FORMATS).collect();
        let mut unique = exts.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), exts.len(), "{exts:?}");
        for f in FORMATS {
            for e in f.extensions {
                assert!(e.starts_with('.') && *e == e.to_lowercase(), "{e}");
                assert_eq!(
                    Format::for_filename(&format!("A{}", e.to_uppercase())).unwrap(),
                    f
                );
            }
            for m in f.media_types {
                assert_eq!(Format::for_media_type(m).unwrap(), f);
            }
        }
        assert_eq!(Format::for_filename("book.xlsm").unwrap().name, "xlsm");
        assert!(Format::for_filename("tool.exe").is_err());
        assert!(Format::for_filename("noext").is_err());
        assert_eq!(
            Format::incremental_extensions(),
            ".txt .md .markdown .pdf .docx .html .htm"
        );
    }

    /// A format that exists only in this test: one reader and one row are all it takes
    /// for lookups, whole parses and page-by-page parses.
    fn toy_read(bytes: &[u8], _: &ParseOptions) -> Result<ParsedDocument, ParseError> {
        let text = text::decode(bytes)?;
        let mut doc = text::parse(&text.replace(';', "\n\n"));
        for (i, b) in doc.blocks.iter_mut().enumerate() {
            b.page = i as u32 + 1;
        }
        doc.pages = doc.blocks.len() as u32;
        Ok(doc)
    }

    static TOY: &[Format] = &[Format {
        name: "toy",
        extensions: &[".toy"],
        media_types: &["text/x-toy"],
        description: "Semicolon-separated pages",
        image: false,
        incremental: true,
        read: toy_read,
        pages: None,
    }];

    #[test]
    fn a_new_format_is_one_row_and_one_reader() {
        let toy = Format::for_filename_in(TOY, "notes.TOY").unwrap();
        assert!(Format::for_filename_in(TOY, "notes.pdf").is_err());
        let doc = super::super::parse(toy, b"one;two;three", &ParseOptions::default()).unwrap();
        assert_eq!(doc.pages, 3);
        let mut pages = Vec::new();
        super::super::for_each_page(toy, b"one;two", &ParseOptions::default(), &mut |e| {
            if let PageEvent::Page { number, blocks } = e {
                pages.push((number, blocks[0].text.clone()));
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(pages, [(1, "one".to_owned()), (2, "two".to_owned())]);
    }
}
