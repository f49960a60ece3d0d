//! The key/value state of one sequence on candle's device: per layer, keys and values
//! `[kv_heads, cap, head_dim]` in f16 (the default) or f32, written in place
//! (`slice_set`), grown by doubling up to the model's window, cut and copied for the
//! prompt cache as the CPU engine's [`KvCache`](super::super::cpu::KvCache) is.

use candle_core::{DType, Device, Tensor};

use super::super::cpu::config::Config;
use super::super::cpu::KvType;
use crate::ml::MlError;

/// The state of one sequence. Not `Clone`: its tensors are written in place, so a copy
/// is made with [`CandleKv::prefix`], never by sharing them.
pub struct CandleKv {
    dtype: DType,
    device: Device,
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    max: usize,
    len: usize,
    cap: usize,
    /// Per layer: keys and values, `None` until the first token.
    kv: Vec<Option<(Tensor, Tensor)>>,
}

impl CandleKv {
    /// An empty state for a `cfg`-shaped model on `device`.
    pub fn new(cfg: &Config, ty: KvType, device: &Device) -> Self {
        Self {
            dtype: match ty {
                KvType::F16 => DType::F16,
                KvType::F32 => DType::F32,
            },
            device: device.clone(),
            layers: cfg.layers,
            kv_heads: cfg.kv_heads,
            head_dim: cfg.head_dim,
            max: cfg.context,
            len: 0,
            cap: 0,
            kv: vec![None; cfg.layers],
        }
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes of one position's keys and values over all layers.
    pub fn bytes_per_token(&self) -> usize {
        2 * self.layers * self.kv_heads * self.head_dim * self.dtype.size_in_bytes()
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        self.cap * self.bytes_per_token()
    }

    /// Room for `len` positions, growing by doubling (within the window).
    pub fn reserve(&mut self, len: usize) -> Result<(), MlError> {
        if len > self.cap {
            let want = len.max(self.cap * 2).max(64).min(self.max.max(len));
            self.resize(want)?;
        }
        Ok(())
    }

    /// Room for exactly `len` positions (at least those stored).
    pub fn reserve_exact(&mut self, len: usize) -> Result<(), MlError> {
        if len > self.cap {
            self.resize(len)?;
        }
        Ok(())
    }

    /// Frees the room past the stored positions.
    pub fn shrink_to_fit(&mut self) -> Result<(), MlError> {
        if self.cap > self.len {
            self.resize(self.len)?;
        }
        Ok(())
    }

    /// A copy of the first `len` positions.
    pub fn prefix(&self, len: usize) -> Result<Self, MlError> {
        let mut out = Self {
            dtype: self.dtype,
            device: self.device.clone(),
            layers: self.layers,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            max: self.max,
            len: 0,
            cap: 0,
            kv: vec![None; self.layers],
        };
        let len = len.min(self.len);
        out.resize(len)?;
        for (dst, src) in out.kv.iter_mut().zip(&self.kv) {
            if let (Some((dk, dv)), Some((sk, sv))) = (dst.as_mut(), src.as_ref()) {
                dk.slice_set(&sk.narrow(1, 0, len)?.contiguous()?, 1, 0)?;
                dv.slice_set(&sv.narrow(1, 0, len)?.contiguous()?, 1, 0)?;
            }
        }
        out.len = len;
        Ok(out)
    }

    /// Reallocates every layer to `cap` positions, keeping the stored ones.
    fn resize(&mut self, cap: usize) -> Result<(), MlError> {
        let keep = self.len.min(cap);
        for slot in self.kv.iter_mut() {
            if cap == 0 {
                *slot = None;
                continue;
            }
            let shape = (self.kv_heads, cap, self.head_dim);
            let k = Tensor::zeros(shape, self.dtype, &self.device)?;
            let v = Tensor::zeros(shape, self.dtype, &self.device)?;
            if let (Some((ok, ov)), true) = (slot.as_ref(), keep > 0) {
                k.slice_set(&ok.narrow(1, 0, keep)?.contiguous()?, 1, 0)?;
                v.slice_set(&ov.narrow(1, 0, keep)?.contiguous()?, 1, 0)?;
            }
            *slot = Some((k, v));
        }
        self.cap = cap;
        self.len = keep;
        Ok(())
    }

    /// Stores layer `l`'s keys and values `[kv_heads, n, head_dim]` after the stored
    /// positions (the caller advances once every layer has stored) and returns all of
    /// them, `[kv_heads, len + n, head_dim]` in f32.
    pub(super) fn store(
        &mut self,
        l: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor), MlError> {
        let n = k.dim(1)?;
        self.reserve(self.len + n)?;
        let (ck, cv) = self.kv[l]
            .as_ref()
            .ok_or_else(|| MlError::Inference("a key/value layer is missing".into()))?;
        ck.slice_set(&k.to_dtype(self.dtype)?.contiguous()?, 1, self.len)?;
        cv.slice_set(&v.to_dtype(self.dtype)?.contiguous()?, 1, self.len)?;
        let all = |t: &Tensor| -> Result<Tensor, MlError> {
            Ok(t.narrow(1, 0, self.len + n)?.to_dtype(DType::F32)?)
        };
        Ok((all(ck)?, all(cv)?))
    }

    /// Counts `n` more positions as stored (after every layer's [`Self::store`]).
    pub(super) fn advance(&mut self, n: usize) {
        self.len += n;
    }
}
