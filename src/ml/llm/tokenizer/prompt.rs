//! A rendered chat to token ids, as llama.cpp tokenizes with special tokens parsed: the
//! template's own text is searched for the vocabulary's added tokens (control and
//! user-defined, longest first), the caller's text is not, and the text between two
//! tokens, template and caller text together, is encoded as one run (so SentencePiece adds
//! its space prefix once per run, after a control token or at the start).

use std::collections::HashMap;

use tokenizers::Tokenizer;

use super::super::template::Part;

/// The added tokens by first byte, longest first.
pub(super) struct SpecialMatcher {
    by_first: HashMap<u8, Vec<(String, u32)>>,
}

/// A piece of a prompt before encoding.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fragment {
    /// A token by id.
    Token(u32),
    /// Text to encode, control tokens not recognised.
    Text(String),
}

impl SpecialMatcher {
    /// The matcher of `inner`'s added tokens.
    pub(super) fn new(inner: &Tokenizer) -> Self {
        let mut by_first: HashMap<u8, Vec<(String, u32)>> = HashMap::new();
        for (id, t) in inner.get_added_tokens_decoder() {
            if let Some(&b) = t.content.as_bytes().first() {
                by_first.entry(b).or_default().push((t.content.clone(), id));
            }
        }
        for v in by_first.values_mut() {
            v.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        }
        Self { by_first }
    }

    /// The added token that `text` starts with, if any.
    fn at<'a>(&'a self, text: &str) -> Option<&'a (String, u32)> {
        let first = text.as_bytes().first()?;
        self.by_first
            .get(first)?
            .iter()
            .find(|(t, _)| text.starts_with(t.as_str()))
    }

    /// The first added token spelled somewhere in `text`, if any.
    pub(super) fn find_in<'a>(&'a self, text: &str) -> Option<&'a str> {
        (0..text.len())
            .filter(|&i| text.is_char_boundary(i))
            .find_map(|i| self.at(&text[i..]))
            .map(|(t, _)| t.as_str())
    }

    /// `parts` as fragments; `id_of` names control tokens, `bos`/`eos` are the model's.
    pub(super) fn fragments(
        &self,
        parts: Vec<Part>,
        id_of: impl Fn(&str) -> Option<u32>,
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Vec<Fragment> {
        let mut out = Vec::new();
        for part in parts {
            match part {
                Part::Special(name) => match id_of(name) {
                    Some(id) => out.push(Fragment::Token(id)),
                    // A layout's marker the vocabulary lacks is spelled out as text.
                    None => push_text(&mut out, name),
                },
                Part::Bos => out.extend(bos.map(Fragment::Token)),
                Part::Eos => out.extend(eos.map(Fragment::Token)),
                Part::Text(t) => push_text(&mut out, &t),
                Part::Template(t) => self.split_into(&t, &mut out),
            }
        }
        out
    }

    fn split_into(&self, text: &str, out: &mut Vec<Fragment>) {
        let mut plain = 0;
        let mut i = 0;
        while i < text.len() {
            if !text.is_char_boundary(i) {
                i += 1;
                continue;
            }
            match self.at(&text[i..]) {
                Some((t, id)) => {
                    push_text(out, &text[plain..i]);
                    out.push(Fragment::Token(*id));
                    i += t.len();
                    plain = i;
                }
                None => i += 1,
            }
        }
        push_text(out, &text[plain..]);
    }
}

fn push_text(out: &mut Vec<Fragment>, text: &str) {
    if text.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(Fragment::Text(t)) => t.push_str(text),
        _ => out.push(Fragment::Text(text.to_owned())),
    }
}
