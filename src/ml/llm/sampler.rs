//! Chooses the next token from the logits: repetition penalty over the last N tokens,
//! the constraint's mask, then greedy, temperature or top-p sampling with a seeded RNG.

use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};

use super::{GenerationParams, MlError};

/// The sampling state of one generation.
pub struct Sampler {
    processor: LogitsProcessor,
    penalty: f32,
    last_n: usize,
}

impl Sampler {
    /// A sampler for `params` (the seed makes it deterministic).
    pub fn new(params: &GenerationParams) -> Self {
        let sampling = if params.temperature <= 0.0 {
            Sampling::ArgMax
        } else if params.top_p > 0.0 && params.top_p < 1.0 {
            Sampling::TopP {
                p: params.top_p,
                temperature: params.temperature,
            }
        } else {
            Sampling::All {
                temperature: params.temperature,
            }
        };
        Self {
            processor: LogitsProcessor::from_sampling(params.seed, sampling),
            penalty: params.repeat_penalty,
            last_n: params.repeat_last_n,
        }
    }

    /// Picks a token from `logits` given the tokens so far; `allowed` (when given) masks
    /// the rest. `None` when the mask allows nothing.
    pub fn sample(
        &mut self,
        mut logits: Vec<f32>,
        history: &[u32],
        allowed: Option<&[bool]>,
    ) -> Result<Option<u32>, MlError> {
        if self.penalty != 1.0 && self.last_n > 0 {
            let start = history.len().saturating_sub(self.last_n);
            let mut seen = std::collections::HashSet::new();
            for &t in &history[start..] {
                if seen.insert(t) {
                    if let Some(l) = logits.get_mut(t as usize) {
                        *l = if *l >= 0.0 {
                            *l / self.penalty
                        } else {
                            *l * self.penalty
                        };
                    }
                }
            }
        }
        if let Some(mask) = allowed {
            let mut any = false;
            for (l, &ok) in logits.iter_mut().zip(mask) {
                if ok {
                    any = true;
                } else {
                    *l = f32::NEG_INFINITY;
                }
            }
            if !any {
                return Ok(None);
            }
        }
        let n = logits.len();
        let t = Tensor::from_vec(logits, n, &Device::Cpu)?;
        Ok(Some(self.processor.sample(&t)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f64) -> GenerationParams {
        GenerationParams {
            temperature,
            top_p: 0.9,
            seed: 7,
            repeat_penalty: 1.0,
            ..GenerationParams::default()
        }
    }

    #[test]
    fn greedy_takes_the_best_allowed() {
        let mut s = Sampler::new(&params(0.0));
        let logits = vec![0.1, 3.0, 2.0];
        assert_eq!(s.sample(logits.clone(), &[], None).unwrap(), Some(1));
        assert_eq!(
            s.sample(logits.clone(), &[], Some(&[true, false, true]))
                .unwrap(),
            Some(2)
        );
        assert_eq!(s.sample(logits, &[], Some(&[false; 3])).unwrap(), None);
    }

    #[test]
    fn penalty_demotes_repeats() {
        let mut p = params(0.0);
        p.repeat_penalty = 2.0;
        let mut s = Sampler::new(&p);
        assert_eq!(s.sample(vec![0.0, 3.0, 2.0], &[1], None).unwrap(), Some(2));
    }

    #[test]
    fn same_seed_same_choices() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let run = || {
            let mut s = Sampler::new(&params(1.0));
            (0..20)
                .map(|_| s.sample(logits.clone(), &[], None).unwrap().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
