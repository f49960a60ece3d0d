//! candle's `BertModel` as the embedder's backend for GPUs (`cuda`, `metal`) and for
//! configurations the CPU forward pass does not implement: padded batches with an
//! attention mask, masked mean pooling, L2 normalisation, all on the device.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use super::Pooling;
use crate::ml::MlError;

/// A BERT encoder run by candle on `device`.
pub(super) struct CandleBert {
    model: BertModel,
    device: Device,
}

impl CandleBert {
    /// Loads the encoder from `vb` onto its device.
    pub(super) fn load(vb: VarBuilder, c: &Config) -> Result<Self, MlError> {
        let device = vb.device().clone();
        let model = BertModel::load(vb, c).map_err(|e| MlError::Load(e.to_string()))?;
        Ok(Self { model, device })
    }

    /// One padded forward pass; one pooled, L2-normalised vector per sequence.
    pub(super) fn embed(
        &self,
        seqs: &[&[u32]],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, MlError> {
        let seq = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let n = seqs.len();
        let mut ids = vec![0u32; n * seq];
        let mut mask = vec![0u32; n * seq];
        for (row, s) in seqs.iter().enumerate() {
            let base = row * seq;
            ids[base..base + s.len()].copy_from_slice(s);
            mask[base..base + s.len()].fill(1);
        }
        let ids = Tensor::from_vec(ids, (n, seq), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, seq), &self.device)?;
        let type_ids = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;
        let pooled = match pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
        };
        let norm = pooled
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12, f64::MAX)?;
        Ok(pooled.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }
}
