//! GPT-2's byte-level alphabet: printable bytes stand for themselves, every other byte for
//! a character from U+0100 on, so that any byte string is spelled in visible characters.

use std::collections::HashMap;

/// The character that spells each byte.
pub(in crate::ml::llm) fn alphabet() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        out[b as usize] = if matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF) {
            char::from(b)
        } else {
            next += 1;
            // 256 + at most 68 is always a valid scalar value.
            char::from_u32(next - 1).unwrap_or('\u{FFFD}')
        };
    }
    out
}

/// Each character of the alphabet back to its byte.
pub(super) fn decoder() -> HashMap<char, u8> {
    alphabet()
        .iter()
        .enumerate()
        .map(|(b, &c)| (c, b as u8))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alphabet_is_gpt2s() {
        let a = alphabet();
        assert_eq!(a[b'A' as usize], 'A');
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(decoder().len(), 256);
    }
}
