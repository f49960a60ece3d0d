//! The key/value state of one sequence, whichever engine holds it: ragd's CPU engine
//! (host memory, laid out for its kernels) or the candle engine (on the device). The
//! prompt cache and the batched scheduler keep sequences through this one type.

use super::candle::CandleKv;
use super::cpu::KvCache;

/// One sequence's keys and values.
pub enum Kv {
    /// In host memory, for ragd's CPU engine.
    Cpu(KvCache),
    /// On candle's device.
    Candle(CandleKv),
}

impl Kv {
    /// The CPU engine's state, if it is one.
    pub fn cpu_mut(&mut self) -> Option<&mut KvCache> {
        match self {
            Kv::Cpu(c) => Some(c),
            Kv::Candle(_) => None,
        }
    }

    /// The candle engine's state, if it is one.
    pub fn candle_mut(&mut self) -> Option<&mut CandleKv> {
        match self {
            Kv::Candle(c) => Some(c),
            Kv::Cpu(_) => None,
        }
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        match self {
            Kv::Cpu(c) => c.len(),
            Kv::Candle(c) => c.len(),
        }
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        match self {
            Kv::Cpu(c) => c.truncate(len),
            Kv::Candle(c) => c.truncate(len),
        }
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        match self {
            Kv::Cpu(c) => c.bytes(),
            Kv::Candle(c) => c.bytes(),
        }
    }

    /// Bytes per position.
    pub fn bytes_per_token(&self) -> usize {
        match self {
            Kv::Cpu(c) => c.bytes_per_token(),
            Kv::Candle(c) => c.bytes_per_token(),
        }
    }

    /// Room for exactly `len` positions; `false` when the device could not allocate it.
    pub fn reserve_exact(&mut self, len: usize) -> bool {
        match self {
            Kv::Cpu(c) => {
                c.reserve_exact(len);
                true
            }
            Kv::Candle(c) => c.reserve_exact(len).is_ok(),
        }
    }

    /// Frees the room past the stored positions; `false` when the copy failed (the
    /// state is then unknown and must not be kept).
    pub fn shrink_to_fit(&mut self) -> bool {
        match self {
            Kv::Cpu(c) => {
                c.shrink_to_fit();
                true
            }
            Kv::Candle(c) => c.shrink_to_fit().is_ok(),
        }
    }

    /// A copy of the first `len` positions; `None` when the device could not make one.
    pub fn prefix(&self, len: usize) -> Option<Kv> {
        match self {
            Kv::Cpu(c) => Some(Kv::Cpu(c.prefix(len))),
            Kv::Candle(c) => c.prefix(len).ok().map(Kv::Candle),
        }
    }
}
