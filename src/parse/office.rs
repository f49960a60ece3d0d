//! Office Open XML documents: DOCX, PPTX and XLSX (also macro-enabled `.xlsm` content).
//! All three are ZIP packages read through the guarded reader of `parse::archive`;
//! encrypted Office files (an OLE compound file
//! wrapping the encrypted package) are recognised and refused.

mod blocks;
mod chart;
mod docx;
mod drawing;
mod numerals;
mod package;
mod pptx;
mod xlsx;
mod xml;

use super::{Block, BlockKind, ParseError, ParsedDocument};

/// Magic number of OLE compound files (legacy `.doc/.xls/.ppt`, and encrypted OOXML).
const CFB_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// Parses a `.docx` file.
pub fn parse_docx(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    sniff(bytes, "Word")?;
    docx::parse(bytes)
}

/// Parses a `.pptx` file.
pub fn parse_pptx(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    sniff(bytes, "PowerPoint")?;
    pptx::parse(bytes)
}

/// Parses a `.xlsx` (or `.xlsm`) file.
pub fn parse_xlsx(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    sniff(bytes, "Excel")?;
    xlsx::parse(bytes)
}

/// Refuses what is not a ZIP package before any parsing: encrypted Office files and
/// legacy binary formats are OLE compound files.
fn sniff(bytes: &[u8], app: &str) -> Result<(), ParseError> {
    if bytes.starts_with(&CFB_MAGIC) {
        // The encrypted package is stored in streams named (in UTF-16)
        // "EncryptionInfo" and "EncryptedPackage".
        let marker: Vec<u8> = "EncryptedPackage"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        if bytes.windows(marker.len()).any(|w| w == marker.as_slice()) {
            return Err(ParseError::Encrypted);
        }
        return Err(ParseError::Invalid(format!(
            "this is a legacy binary {app} file (97-2003 format), not Office Open XML; \
             save it in the current format and upload it again"
        )));
    }
    if !bytes.starts_with(b"PK") {
        return Err(ParseError::Invalid(format!(
            "not a valid {app} file (expected an Office Open XML ZIP package)"
        )));
    }
    Ok(())
}

/// Refuses a package whose main part is not what the extension promised (a `.pptx`
/// that is really a Word document), naming what it is instead.
fn expect_root(root: &xml::Element, wanted: &str) -> Result<(), ParseError> {
    if root.name() == wanted {
        return Ok(());
    }
    let what = |name: &str| match name {
        "document" => "a Word document (.docx)",
        "presentation" => "a PowerPoint presentation (.pptx)",
        "workbook" => "an Excel workbook (.xlsx)",
        _ => "an unknown kind of Office package",
    };
    Err(ParseError::Invalid(format!(
        "expected {}, but the file is {}",
        what(wanted),
        what(root.name())
    )))
}

/// One reviewer comment as a line of text: `[comment by Ann (AB), 2024-05-01T10:00:00]: text`.
fn comment_line(author: Option<&str>, time: Option<&str>, text: &str) -> String {
    let who = [author, time]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    if who.is_empty() {
        format!("[comment]: {}", text.trim())
    } else {
        format!("[comment by {who}]: {}", text.trim())
    }
}

/// Final touches shared by the Office parsers: heading levels shifted so that a
/// document title (level 0) sits above `Heading 1` and clamped to 1-6, the title taken
/// from the first title heading when the metadata has none, the page count.
fn finish(
    mut blocks: Vec<Block>,
    title: Option<String>,
    author: Option<String>,
    pages: u32,
) -> ParsedDocument {
    let has_title = blocks
        .iter()
        .any(|b| matches!(b.kind, BlockKind::Heading(0)));
    let shift = u8::from(has_title);
    for b in &mut blocks {
        if let BlockKind::Heading(l) = &mut b.kind {
            *l = l.saturating_add(shift).clamp(1, 6);
        }
    }
    let title = title.or_else(|| {
        has_title.then(|| {
            blocks
                .iter()
                .find(|b| matches!(b.kind, BlockKind::Heading(1)))
                .map(|b| b.text.clone())
        })?
    });
    let pages = blocks.iter().map(|b| b.page).max().unwrap_or(1).max(pages);
    ParsedDocument {
        title,
        author,
        pages,
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_containers() {
        assert!(matches!(
            sniff(b"hello", "Word"),
            Err(ParseError::Invalid(_))
        ));
        let mut cfb = CFB_MAGIC.to_vec();
        cfb.extend([0u8; 64]);
        assert!(matches!(sniff(&cfb, "Word"), Err(ParseError::Invalid(_))));
        cfb.extend("EncryptedPackage".encode_utf16().flat_map(u16::to_le_bytes));
        assert!(matches!(sniff(&cfb, "Word"), Err(ParseError::Encrypted)));
        assert!(sniff(b"PK\x03\x04", "Word").is_ok());
    }
}
