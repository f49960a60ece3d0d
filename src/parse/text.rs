//! Plain text: decoding (UTF-8, UTF-16 by BOM, else Windows-1252) and paragraphs.

use encoding_rs::{UTF_16BE, UTF_16LE, WINDOWS_1252};

use super::{Block, BlockKind, ParseError, ParsedDocument};

/// Decodes text bytes. Binary data (NUL bytes outside UTF-16) is refused.
pub fn decode(bytes: &[u8]) -> Result<String, ParseError> {
    let text = if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        String::from_utf8(rest.to_vec())
            .map_err(|_| ParseError::Invalid("invalid UTF-8 after BOM".into()))?
    } else if bytes.starts_with(&[0xFF, 0xFE]) {
        UTF_16LE.decode(&bytes[2..]).0.into_owned()
    } else if bytes.starts_with(&[0xFE, 0xFF]) {
        UTF_16BE.decode(&bytes[2..]).0.into_owned()
    } else {
        if bytes.contains(&0) {
            return Err(ParseError::Invalid(
                "the file looks binary, not text".into(),
            ));
        }
        match std::str::from_utf8(bytes) {
            Ok(s) => s.to_owned(),
            Err(_) => WINDOWS_1252.decode(bytes).0.into_owned(),
        }
    };
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Splits text into paragraphs at blank lines.
pub fn parse(text: &str) -> ParsedDocument {
    let mut blocks = Vec::new();
    let mut para = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut para, &mut blocks);
        } else {
            if !para.is_empty() {
                para.push('\n');
            }
            para.push_str(line.trim_end());
        }
    }
    flush(&mut para, &mut blocks);
    ParsedDocument {
        title: None,
        author: None,
        pages: 1,
        blocks,
    }
}

fn flush(para: &mut String, blocks: &mut Vec<Block>) {
    let t = para.trim();
    if !t.is_empty() {
        blocks.push(Block {
            kind: BlockKind::Paragraph,
            text: t.to_owned(),
            page: 1,
        });
    }
    para.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_splits() {
        assert_eq!(decode(b"caf\xe9").unwrap(), "café");
        assert_eq!(decode("\u{feff}hi".as_bytes()).unwrap(), "hi");
        assert!(matches!(
            decode(b"\x00\x01bin"),
            Err(ParseError::Invalid(_))
        ));
        let d = parse("one\r\ntwo\n\n\nthree");
        assert_eq!(d.blocks.len(), 2);
        assert_eq!(d.blocks[0].text, "one\r\ntwo".replace('\r', "").as_str());
    }
}
