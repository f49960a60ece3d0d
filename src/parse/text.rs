//! Plain text: decoding (BOMs for UTF-8/16/32, UTF-16/32 without a BOM by their NUL
//! pattern, UTF-8, else the charset detector's guess: Shift-JIS, GBK, Windows-125x, ...)
//! and paragraphs.

use encoding_rs::{Encoding, UTF_16BE, UTF_16LE};

use super::{Block, BlockKind, ParseError, ParsedDocument};

/// Decodes text bytes. Binary data (NUL bytes outside UTF-16/32) is refused.
pub fn decode(bytes: &[u8]) -> Result<String, ParseError> {
    let text = if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        String::from_utf8(rest.to_vec())
            .map_err(|_| ParseError::Invalid("invalid UTF-8 after BOM".into()))?
    } else if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE, 0, 0]) {
        utf32(rest, false).ok_or_else(|| ParseError::Invalid("invalid UTF-32 text".into()))?
    } else if let Some(rest) = bytes.strip_prefix(&[0, 0, 0xFE, 0xFF]) {
        utf32(rest, true).ok_or_else(|| ParseError::Invalid("invalid UTF-32 text".into()))?
    } else if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        UTF_16LE.decode_without_bom_handling(rest).0.into_owned()
    } else if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        UTF_16BE.decode_without_bom_handling(rest).0.into_owned()
    } else if bytes.contains(&0) {
        without_bom(bytes)
            .ok_or_else(|| ParseError::Invalid("the file looks binary, not text".into()))?
    } else {
        match std::str::from_utf8(bytes) {
            Ok(s) => s.to_owned(),
            Err(_) => guess(bytes)
                .decode_without_bom_handling(bytes)
                .0
                .into_owned(),
        }
    };
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The charset detector's guess for bytes that are not UTF-8.
fn guess(bytes: &[u8]) -> &'static Encoding {
    let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    det.feed(bytes, true);
    det.guess(None, chardetng::Utf8Detection::Deny)
}

/// UTF-32 code units, `None` if one is not a Unicode scalar value.
fn utf32(bytes: &[u8], big_endian: bool) -> Option<String> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    bytes
        .chunks_exact(4)
        .map(|u| {
            let u: [u8; 4] = [u[0], u[1], u[2], u[3]];
            char::from_u32(if big_endian {
                u32::from_be_bytes(u)
            } else {
                u32::from_le_bytes(u)
            })
        })
        .collect()
}

/// UTF-32 or UTF-16 without a BOM, recognised by where the NUL bytes fall: each UTF-32
/// unit's top byte is zero and the next at most 0x10; in UTF-16 text mostly made of
/// one script, each unit's high byte is zero. `None` for anything else (binary data).
fn without_bom(bytes: &[u8]) -> Option<String> {
    let units = |width: usize, check: &dyn Fn(&[u8]) -> bool| {
        bytes.len().is_multiple_of(width)
            && bytes
                .chunks_exact(width)
                .all(|u| check(u) && u.iter().any(|&b| b != 0))
    };
    let text = if units(4, &|u| u[3] == 0 && u[2] <= 0x10) {
        utf32(bytes, false)?
    } else if units(4, &|u| u[0] == 0 && u[1] <= 0x10) {
        utf32(bytes, true)?
    } else if units(2, &|u| u[1] == 0) {
        UTF_16LE.decode_without_bom_handling(bytes).0.into_owned()
    } else if units(2, &|u| u[0] == 0) {
        UTF_16BE.decode_without_bom_handling(bytes).0.into_owned()
    } else {
        return None;
    };
    plausible(&text).then_some(text)
}

/// Whether decoded text looks like text: no control characters but whitespace, and
/// mostly characters of the Basic Multilingual Plane (random bytes decode to rare
/// supplementary-plane characters).
fn plausible(text: &str) -> bool {
    let (mut all, mut bmp) = (0usize, 0usize);
    for c in text.chars() {
        if c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c') {
            return false;
        }
        all += 1;
        bmp += usize::from((c as u32) < 0x10000);
    }
    all > 0 && bmp * 2 >= all
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
        // UTF-32 with and without a BOM, both byte orders.
        let words = "Grüße, 日本 🎉\nzwei";
        let le: Vec<u8> = words
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        let be: Vec<u8> = words
            .chars()
            .flat_map(|c| (c as u32).to_be_bytes())
            .collect();
        for (bom, body) in [
            (&[0xFF, 0xFE, 0, 0][..], &le),
            (&[0, 0, 0xFE, 0xFF][..], &be),
            (&[][..], &le),
            (&[][..], &be),
        ] {
            assert_eq!(decode(&[bom, body].concat()).unwrap(), words);
        }
        // Random bytes that happen to fit the UTF-32 pattern are still binary.
        assert!(decode(&[0, 1, 2, 0]).is_err());
        assert!(decode(&[7, 0, 0, 0, 8, 0, 0, 0]).is_err());
        // UTF-16 without a BOM.
        let le16: Vec<u8> = "plain words"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(decode(&le16).unwrap(), "plain words");
        // Shift-JIS and GBK by the detector.
        let jp = "社員番号,氏名,部署\n1001,山田太郎,営業部\n1002,鈴木花子,総務部\n";
        let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode(jp);
        assert_eq!(decode(&sjis).unwrap(), jp);
        let cn = "这是一个用于测试中文编码检测的句子，包含足够多的常用汉字。";
        let (gbk, _, _) = encoding_rs::GBK.encode(cn);
        assert_eq!(decode(&gbk).unwrap(), cn);
        let d = parse("one\r\ntwo\n\n\nthree");
        assert_eq!(d.blocks.len(), 2);
        assert_eq!(d.blocks[0].text, "one\r\ntwo".replace('\r', "").as_str());
    }
}
