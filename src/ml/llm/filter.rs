//! Constrained decoding: a [`TokenFilter`] is asked before every sampled token which ids may
//! come next, and the sampler never picks the others. A JSON-schema constraint for tool
//! calls is one such filter; [`DigitsOnly`] is the simplest.

/// The text of every token, for filters to judge candidates by.
#[derive(Debug)]
pub struct Vocabulary {
    texts: Vec<String>,
    special: Vec<bool>,
    eos: Vec<u32>,
}

impl Vocabulary {
    pub(super) fn new(texts: Vec<String>, special: Vec<bool>, eos: Vec<u32>) -> Self {
        Self {
            texts,
            special,
            eos,
        }
    }

    /// The text token `id` adds (empty for control tokens; a lone byte of a multi-byte
    /// character reads as U+FFFD).
    pub fn text(&self, id: u32) -> &str {
        self.texts
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Whether `id` is a control token.
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// Whether `id` ends the generation.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.contains(&id)
    }

    /// Tokens with text (the model's output layer may be wider).
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    /// Whether the vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Restricts which tokens may come next. `allowed` has one entry per logit, all `true` on
/// entry; clear the ones that must not be sampled. Ids past the vocabulary (padding rows of
/// the output layer) are cleared before the filter is asked. If a filter leaves nothing
/// allowed, the generation ends with [`FinishReason::Stop`](super::FinishReason::Stop).
pub trait TokenFilter: Send {
    /// Called once per step with the text generated so far (complete UTF-8 only).
    fn restrict(&mut self, generated: &str, vocab: &Vocabulary, allowed: &mut [bool]);

    /// The same constraint for an inference server, which cannot run this filter; `None`
    /// lets a remote model write freely.
    fn remote(&self) -> Option<RemoteConstraint> {
        None
    }
}

/// A constraint as an inference server takes it.
#[derive(Debug, Clone)]
pub struct RemoteConstraint {
    /// In llama.cpp's GBNF (its `grammar` field).
    pub gbnf: String,
    /// For servers with OpenAI's tool calling but no grammars: the tools (name and JSON
    /// schema of the arguments) and whether a call is required. The server's calls are
    /// then written back as ragd's `<tool_call>` text.
    pub tools: Option<(
        Vec<(String, serde_json::Value)>,
        crate::ml::llm::tool_grammar::CallMode,
    )>,
}

/// Only ASCII digits, at most `max_digits` of them; the generation may end once there is
/// at least one.
#[derive(Debug, Clone, Copy)]
pub struct DigitsOnly {
    /// The longest number allowed.
    pub max_digits: usize,
}

impl TokenFilter for DigitsOnly {
    fn remote(&self) -> Option<RemoteConstraint> {
        Some(RemoteConstraint {
            gbnf: super::gbnf::digits(self.max_digits),
            tools: None,
        })
    }

    fn restrict(&mut self, generated: &str, vocab: &Vocabulary, allowed: &mut [bool]) {
        let room = self.max_digits.saturating_sub(generated.len());
        for (id, ok) in allowed.iter_mut().enumerate() {
            let id = id as u32;
            *ok = if vocab.is_eos(id) {
                !generated.is_empty()
            } else {
                let t = vocab.text(id);
                !vocab.is_special(id)
                    && !t.is_empty()
                    && t.len() <= room
                    && t.bytes().all(|b| b.is_ascii_digit())
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_only_masks_everything_else() {
        let vocab = Vocabulary::new(
            vec!["".into(), "12".into(), "a".into(), "7".into(), " 3".into()],
            vec![true, false, false, false, false],
            vec![0],
        );
        let mut f = DigitsOnly { max_digits: 2 };
        let mut allowed = vec![true; 6];
        f.restrict("", &vocab, &mut allowed);
        assert_eq!(allowed, [false, true, false, true, false, false]);
        let mut allowed = vec![true; 6];
        f.restrict("1", &vocab, &mut allowed);
        assert_eq!(allowed, [true, false, false, true, false, false]);
    }
}
