//! The prompt cache: key/value states of recent sequences, kept so that a request whose
//! tokens start like an earlier one (the same system prompt and tool schemas, the same
//! conversation's earlier turns) runs only its new tokens.
//!
//! A request takes the cached sequence sharing the longest prefix with its prompt. When
//! that whole sequence is a prefix of the prompt (a conversation going on) it is used in
//! place; when they part earlier (another conversation with the same instructions) the
//! shared prefix is copied and the cached sequence stays. Sequences are returned after
//! generation with everything they hold, and the least recently used go first when the
//! states together exceed the budget.

use super::kv::Kv;

/// A sequence's tokens and the cache holding their keys and values.
pub struct Sequence {
    /// Tokens whose keys and values are in `cache`, in order.
    pub tokens: Vec<u32>,
    /// Their state.
    pub cache: Kv,
}

/// What a look-up found.
pub struct Hit {
    /// The sequence to continue (its cache holds `reused` positions).
    pub sequence: Sequence,
    /// Prompt tokens whose state was reused.
    pub reused: usize,
    /// The reused state was copied from a sequence that stays cached.
    pub copied: bool,
}

struct Slot {
    seq: Sequence,
    used: u64,
}

/// Recent sequences within a memory budget.
pub struct PromptCache {
    slots: Vec<Slot>,
    budget: usize,
    clock: u64,
}

impl PromptCache {
    /// An empty cache that keeps at most `budget` bytes of state.
    pub fn new(budget: usize) -> Self {
        Self {
            slots: Vec::new(),
            budget,
            clock: 0,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.slots.iter().map(|s| s.seq.cache.bytes()).sum()
    }

    /// Sequences held.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The best starting point for `prompt`: a cached sequence sharing its longest prefix
    /// (at most all but the last prompt token, whose logits are needed), or `empty` when
    /// none shares any.
    pub fn take(&mut self, prompt: &[u32], empty: impl FnOnce() -> Kv) -> Hit {
        let limit = prompt.len().saturating_sub(1);
        let best = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| (i, common_prefix(&s.seq.tokens, prompt).min(limit)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(i, n)| (n, self.slots[i].used));
        // A copy the device cannot make starts empty instead.
        let copy = best.and_then(|(i, n)| {
            if n == self.slots[i].seq.tokens.len() {
                None
            } else {
                Some(self.slots[i].seq.cache.prefix(n))
            }
        });
        let best = best.filter(|_| !matches!(copy, Some(None)));
        crate::telemetry::prompt_cache_lookup(best.map_or(0, |(_, n)| n));
        let Some((i, n)) = best else {
            return Hit {
                sequence: Sequence {
                    tokens: Vec::new(),
                    cache: empty(),
                },
                reused: 0,
                copied: false,
            };
        };
        if n == self.slots[i].seq.tokens.len() {
            let mut seq = self.slots.swap_remove(i).seq;
            seq.cache.truncate(n);
            return Hit {
                sequence: seq,
                reused: n,
                copied: false,
            };
        }
        let slot = &mut self.slots[i];
        self.clock += 1;
        slot.used = self.clock;
        let cache = copy.flatten().expect("a prefix to copy was made above");
        Hit {
            sequence: Sequence {
                tokens: prompt[..n].to_vec(),
                cache,
            },
            reused: n,
            copied: true,
        }
    }

    /// Keeps `seq` as the most recently used sequence and drops the least recently used
    /// ones beyond the budget (a sequence larger than the whole budget is not kept).
    pub fn put(&mut self, mut seq: Sequence) {
        if !seq.cache.shrink_to_fit() || seq.tokens.is_empty() || seq.cache.bytes() > self.budget {
            return;
        }
        // A sequence that is a prefix of the new one is superseded by it.
        self.slots
            .retain(|s| common_prefix(&s.seq.tokens, &seq.tokens) < s.seq.tokens.len());
        self.clock += 1;
        self.slots.push(Slot {
            seq,
            used: self.clock,
        });
        while self.bytes() > self.budget {
            let Some((oldest, _)) = self.slots.iter().enumerate().min_by_key(|(_, s)| s.used)
            else {
                break;
            };
            self.slots.swap_remove(oldest);
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ml::llm::cpu::config::{Config, RopeStyle};
    use crate::ml::llm::cpu::{KvCache, KvType};
    use crate::ml::llm::Arch;

    fn cfg() -> Config {
        Config {
            arch: Arch::Llama,
            hidden: 32,
            layers: 1,
            heads: 2,
            kv_heads: 1,
            head_dim: 16,
            ffn: 64,
            rope_dim: 16,
            rope_base: 10_000.0,
            rope_style: RopeStyle::Interleaved,
            eps: 1e-5,
            context: 4096,
            family: Default::default(),
        }
    }

    /// A sequence of `tokens` with a cache sized for them.
    fn seq(tokens: &[u32]) -> Sequence {
        let mut cache = KvCache::new(&cfg(), KvType::F16);
        cache.reserve(tokens.len());
        cache.advance(tokens.len());
        let cache = Kv::Cpu(cache);
        Sequence {
            tokens: tokens.to_vec(),
            cache,
        }
    }

    #[test]
    fn a_conversation_continues_in_place() {
        let mut pc = PromptCache::new(1 << 30);
        pc.put(seq(&[1, 2, 3, 4]));
        let hit = pc.take(&[1, 2, 3, 4, 5, 6], || {
            Kv::Cpu(KvCache::new(&cfg(), KvType::F16))
        });
        assert_eq!((hit.reused, hit.copied), (4, false));
        assert!(pc.is_empty(), "the sequence is taken out while it runs");
    }

    #[test]
    fn a_shared_prefix_is_copied_and_the_original_stays() {
        let mut pc = PromptCache::new(1 << 30);
        pc.put(seq(&[1, 2, 3, 4]));
        let hit = pc.take(&[1, 2, 9, 9], || Kv::Cpu(KvCache::new(&cfg(), KvType::F16)));
        assert_eq!((hit.reused, hit.copied), (2, true));
        assert_eq!(hit.sequence.cache.len(), 2);
        assert_eq!(pc.len(), 1);
    }

    #[test]
    fn the_last_prompt_token_is_always_run() {
        let mut pc = PromptCache::new(1 << 30);
        pc.put(seq(&[1, 2, 3]));
        let hit = pc.take(&[1, 2, 3], || Kv::Cpu(KvCache::new(&cfg(), KvType::F16)));
        assert_eq!(hit.reused, 2);
        assert_eq!(hit.sequence.cache.len(), 2);
    }

    #[test]
    fn nothing_shared_starts_empty() {
        let mut pc = PromptCache::new(1 << 30);
        pc.put(seq(&[1, 2, 3]));
        let hit = pc.take(&[7, 8], || Kv::Cpu(KvCache::new(&cfg(), KvType::F16)));
        assert_eq!(hit.reused, 0);
        assert!(hit.sequence.cache.is_empty());
    }

    #[test]
    fn the_least_recently_used_go_first_beyond_the_budget() {
        let one = seq(&[1; 100]).cache.bytes();
        let mut pc = PromptCache::new(2 * one);
        pc.put(seq(&[1; 100]));
        pc.put(seq(&[2; 100]));
        // Touch the first so the second is the oldest.
        let hit = pc.take(&[1, 1, 5], || Kv::Cpu(KvCache::new(&cfg(), KvType::F16)));
        assert!(hit.copied);
        pc.put(seq(&[3; 100]));
        assert!(pc.bytes() <= 2 * one);
        let firsts: Vec<u32> = pc.slots.iter().map(|s| s.seq.tokens[0]).collect();
        assert!(
            firsts.contains(&1) && firsts.contains(&3) && !firsts.contains(&2),
            "{firsts:?}"
        );
    }
}
