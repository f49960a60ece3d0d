//! Turns a stream of token ids into text that only ever holds complete UTF-8 characters:
//! a character split over several byte tokens is held back until its last byte arrives.

use super::LlmTokenizer;

/// Incremental detokenizer for one generation.
pub struct Utf8Stream {
    pending: Vec<u8>,
    strip_space: bool,
}

impl Utf8Stream {
    /// A stream for `tokenizer`'s pieces (SentencePiece's leading space is dropped).
    pub fn new(tokenizer: &LlmTokenizer) -> Self {
        Self {
            pending: Vec::new(),
            strip_space: tokenizer.strips_leading_space(),
        }
    }

    /// Adds token `id` and returns the text that is now complete (often empty).
    pub fn push(&mut self, tokenizer: &LlmTokenizer, id: u32) -> String {
        if tokenizer.is_special(id) {
            return String::new();
        }
        self.push_bytes(tokenizer.piece_bytes(id))
    }

    /// Adds raw bytes and returns the complete characters.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // valid_up_to marks a char boundary, so this is complete UTF-8.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // Bytes that can never become a character: one U+FFFD, go on.
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                        // An unfinished character: keep it for the next token.
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                    }
                }
            }
        }
        self.strip(out)
    }

    /// Ends the stream: an unfinished character becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            return String::new();
        }
        self.pending.clear();
        self.strip("\u{FFFD}".to_owned())
    }

    fn strip(&mut self, out: String) -> String {
        if self.strip_space && !out.is_empty() {
            self.strip_space = false;
            if let Some(rest) = out.strip_prefix(' ') {
                return rest.to_owned();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Utf8Stream {
        Utf8Stream {
            pending: Vec::new(),
            strip_space: false,
        }
    }

    #[test]
    fn holds_back_split_characters() {
        let mut s = stream();
        let bytes = "aé€😀".as_bytes();
        let mut out = String::new();
        let mut pieces = Vec::new();
        for b in bytes {
            let p = s.push_bytes(&[*b]);
            pieces.push(p.clone());
            out.push_str(&p);
        }
        assert_eq!(out, "aé€😀");
        assert_eq!(pieces.iter().filter(|p| !p.is_empty()).count(), 4);
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = stream();
        assert_eq!(s.push_bytes(&[b'x', 0xFF, b'y']), "x\u{FFFD}y");
        assert_eq!(s.push_bytes(&[0xE2, 0x82]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn drops_one_leading_space() {
        let mut s = Utf8Stream {
            pending: Vec::new(),
            strip_space: true,
        };
        assert_eq!(s.push_bytes(b" hi"), "hi");
        assert_eq!(s.push_bytes(b" there"), " there");
    }
}
