//! Chooses the next token from the logits: repetition penalty over the last N tokens,
//! the constraint's mask, then greedy, temperature or top-p sampling with a seeded RNG.
//!
//! Top-p runs ragd's own [`nucleus`]: the same tokens as candle's sampler for the same
//! seed, without sorting the whole vocabulary for every token (a 49,152-entry sort took
//! milliseconds per token, on the model's thread, once per sequence of a decode step).
//! Greedy runs ragd's own [`argmax`] on the logits in place: candle's choice, without a
//! tensor and its copy of the vocabulary for each sequence of each step.

use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use rand::distr::{weighted::WeightedIndex, Distribution};
use rand::SeedableRng;

use super::{GenerationParams, MlError};

/// The sampling state of one generation.
pub struct Sampler {
    processor: LogitsProcessor,
    /// Top-p sampling: its own seeded generator, temperature and `p`.
    top_p: Option<(rand::rngs::StdRng, f64, f32)>,
    /// Greedy (temperature 0): [`argmax`].
    greedy: bool,
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
        let top_p = match sampling {
            Sampling::TopP { p, temperature } => Some((
                rand::rngs::StdRng::seed_from_u64(params.seed),
                temperature,
                p as f32,
            )),
            _ => None,
        };
        Self {
            greedy: matches!(sampling, Sampling::ArgMax),
            processor: LogitsProcessor::from_sampling(params.seed, sampling),
            top_p,
            penalty: params.repeat_penalty,
            last_n: params.repeat_last_n,
        }
    }

    /// Picks a token from `logits` given the tokens so far; `allowed` (when given) masks
    /// the rest. `None` when the mask allows nothing. The repetition penalty and the mask
    /// are applied to `logits` in place.
    pub fn sample(
        &mut self,
        logits: &mut [f32],
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
        if self.greedy {
            return Ok(Some(argmax(logits)));
        }
        let t = Tensor::from_slice(logits, logits.len(), &Device::Cpu)?;
        let Some((rng, temperature, p)) = self.top_p.as_mut() else {
            return Ok(Some(self.processor.sample(&t)?));
        };
        // Probabilities as candle's sampler computes them, then its nucleus and draw.
        let t = (&t / *temperature)?;
        let mut prs = candle_nn::ops::softmax_last_dim(&t)?.to_vec1::<f32>()?;
        nucleus(&mut prs, *p);
        let draw = WeightedIndex::new(&prs).map_err(|e| MlError::Inference(e.to_string()))?;
        Ok(Some(draw.sample(rng) as u32))
    }
}

/// The index of the largest of `x` as candle's argmax picks it (`Tensor::argmax` on the
/// CPU): the first of equal largest values, NaN never chosen unless it comes first (then
/// index 0). Two passes of 16 lanes: the largest value, then the first index holding it.
pub fn argmax(x: &[f32]) -> u32 {
    const L: usize = 16;
    let Some(&first) = x.first() else { return 0 };
    if first.is_nan() {
        return 0;
    }
    // The lanes keep a value only when a larger comes (`<` is false for NaN), as candle's
    // running maximum does; equal values compare equal whichever is kept (0.0 and -0.0).
    let mut lanes = [first; L];
    let mut chunks = x.chunks_exact(L);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if *m < v { v } else { *m };
        }
    }
    let mut best = first;
    for &v in lanes.iter().chain(chunks.remainder()) {
        if best < v {
            best = v;
        }
    }
    let mut base = 0;
    for c in x.chunks(L) {
        if c.contains(&best) {
            let i = c.iter().position(|&v| v == best).unwrap_or(0);
            return (base + i) as u32;
        }
        base += L;
    }
    0
}

/// Keeps the most likely tokens until their probabilities reach `top_p` and zeroes the
/// rest: exactly the tokens candle's top-p keeps (it walks the whole vocabulary sorted by
/// descending probability, ties in index order, summing in that order). Only the tokens
/// at or above a floor are sorted; every token below it comes after them in that order,
/// so when they reach `top_p` the walk never gets past them. Otherwise (or on NaN) the
/// whole vocabulary is sorted, as before.
pub fn nucleus(prs: &mut [f32], top_p: f32) {
    let finite = prs.iter().all(|p| !p.is_nan());
    let floor = prs.iter().fold(0f32, |m, &p| m.max(p)) * 1e-4;
    let mut order: Vec<usize> = if finite && floor > 0.0 {
        (0..prs.len()).filter(|&i| prs[i] >= floor).collect()
    } else {
        (0..prs.len()).collect()
    };
    let mut whole = order.len() == prs.len();
    let kept = loop {
        order.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
        let mut cumsum = 0f32;
        let mut end = None;
        for (n, &i) in order.iter().enumerate() {
            if cumsum >= top_p {
                end = Some(n);
                break;
            }
            cumsum += prs[i];
        }
        match end {
            Some(n) => break n,
            None if whole => break order.len(),
            None => {
                order = (0..prs.len()).collect();
                whole = true;
            }
        }
    };
    let keep: Vec<(usize, f32)> = order[..kept].iter().map(|&i| (i, prs[i])).collect();
    prs.fill(0.0);
    for (i, p) in keep {
        prs[i] = p;
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
        assert_eq!(s.sample(&mut logits.clone(), &[], None).unwrap(), Some(1));
        assert_eq!(
            s.sample(&mut logits.clone(), &[], Some(&[true, false, true]))
                .unwrap(),
            Some(2)
        );
        assert_eq!(
            s.sample(&mut logits.clone(), &[], Some(&[false; 3]))
                .unwrap(),
            None
        );
    }

    #[test]
    fn penalty_demotes_repeats() {
        let mut p = params(0.0);
        p.repeat_penalty = 2.0;
        let mut s = Sampler::new(&p);
        assert_eq!(s.sample(&mut [0.0, 3.0, 2.0], &[1], None).unwrap(), Some(2));
    }

    #[test]
    fn argmax_picks_what_candle_picks() {
        let candle = |x: &[f32]| {
            let t = Tensor::from_slice(x, x.len(), &Device::Cpu).unwrap();
            t.argmax(candle_core::D::Minus1)
                .unwrap()
                .to_scalar::<u32>()
                .unwrap()
        };
        let nan = f32::NAN;
        let inf = f32::INFINITY;
        let mut cases: Vec<Vec<f32>> = vec![
            vec![1.0],
            vec![nan, 5.0, 6.0],
            vec![1.0, nan, 0.5],
            vec![1.0, 3.0, nan, 3.0],
            vec![-0.0, 0.0, -1.0],
            vec![0.0, -0.0],
            vec![-inf; 40],
            vec![nan; 33],
            vec![2.0, inf, 1.0, inf],
        ];
        // A real vocabulary's size: ties inside one lane chunk, across chunks, in the
        // remainder, NaN and infinities scattered.
        let mut state = 7u64;
        for case in 0..40 {
            let n = 49_152 + case % 17;
            let mut x: Vec<f32> = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 40) % 1000) as f32 / 37.0 - 10.0
                })
                .collect();
            if case % 3 == 0 {
                x[(case * 997) % n] = nan;
            }
            if case % 4 == 1 {
                let top = x.iter().cloned().fold(f32::MIN, f32::max);
                x[n - 1] = top;
                x[(case * 131) % n] = top;
            }
            if case % 5 == 2 {
                x[(case * 7919) % n] = -inf;
            }
            cases.push(x);
        }
        for (i, x) in cases.iter().enumerate() {
            assert_eq!(argmax(x), candle(x), "case {i}");
        }
    }

    /// candle's top-p, as it was used: every token sorted.
    fn candle_nucleus(prs: &mut [f32], top_p: f32) {
        let mut order: Vec<usize> = (0..prs.len()).collect();
        order.sort_by(|&i, &j| prs[j].total_cmp(&prs[i]));
        let mut cumsum = 0.;
        for &i in &order {
            if cumsum >= top_p {
                prs[i] = 0.0;
            } else {
                cumsum += prs[i];
            }
        }
    }

    #[test]
    fn nucleus_keeps_what_a_whole_sort_keeps() {
        // Peaked, flat, tied and tiny-tailed distributions over a real vocabulary's size.
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        for (case, top_p) in [
            (0, 0.9f32),
            (1, 0.9),
            (2, 0.5),
            (3, 0.99),
            (4, 0.9),
            (5, 1.0),
        ] {
            let n = 49_152;
            let mut prs: Vec<f32> = (0..n)
                .map(|i| match case {
                    0 => (-20.0 * next()).exp(),
                    1 => 1.0,
                    2 => [4.0, 4.0, 1.0, 0.0][i % 4] + next() * 1e-9,
                    3 => {
                        if i < 3 {
                            100.0
                        } else {
                            next() * 1e-3
                        }
                    }
                    4 => (-3.0 * next()).exp(),
                    _ => next(),
                })
                .collect();
            let sum: f32 = prs.iter().sum();
            prs.iter_mut().for_each(|p| *p /= sum);
            let (mut a, mut b) = (prs.clone(), prs);
            nucleus(&mut a, top_p);
            candle_nucleus(&mut b, top_p);
            assert_eq!(a, b, "case {case}");
            assert!(a.iter().any(|&p| p > 0.0));
        }
    }

    #[test]
    fn top_p_draws_what_candle_draws() {
        let mut state = 99u64;
        let logits: Vec<f32> = (0..49_152)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 40) as f32 / (1u64 << 20) as f32
            })
            .collect();
        let p = GenerationParams {
            temperature: 0.3,
            top_p: 0.9,
            seed: 42,
            repeat_penalty: 1.0,
            ..GenerationParams::default()
        };
        let mut ours = Sampler::new(&p);
        let mut theirs = LogitsProcessor::from_sampling(
            42,
            Sampling::TopP {
                p: 0.9,
                temperature: 0.3,
            },
        );
        for step in 0..50 {
            let mut l = logits.clone();
            l.rotate_left(step * 97);
            let t = Tensor::from_vec(l.clone(), l.len(), &Device::Cpu).unwrap();
            assert_eq!(
                ours.sample(&mut l, &[], None).unwrap(),
                Some(theirs.sample(&t).unwrap()),
                "step {step}"
            );
        }
    }

    #[test]
    fn same_seed_same_choices() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let run = || {
            let mut s = Sampler::new(&params(1.0));
            (0..20)
                .map(|_| s.sample(&mut logits.clone(), &[], None).unwrap().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
