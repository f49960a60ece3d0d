//! The row operations between the matrix products: RMSNorm, rotary embeddings, the gated
//! feed-forward activation. Written as candle computes them (same formulas and order), so
//! the two engines agree closely.

use super::config::{Config, RopeStyle};

/// `out = x / sqrt(mean(x²) + eps) · w`.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum2: f32 = x.iter().map(|v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for ((o, v), w) in out.iter_mut().zip(x).zip(w) {
        *o = v / m * w;
    }
}

/// `out = silu(gate) · up`.
pub fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, g), u) in out.iter_mut().zip(gate).zip(up) {
        *o = g / (1.0 + (-g).exp()) * u;
    }
}

/// Rotary angles of one model: `theta[i]` for each rotated pair.
pub struct Rope {
    theta: Vec<f32>,
    style: RopeStyle,
    dim: usize,
}

impl Rope {
    /// The angles of `cfg`, with Llama 3's per-pair frequency factors when given.
    pub fn new(cfg: &Config, factors: Option<&[f32]>) -> Self {
        let theta = (0..cfg.rope_dim)
            .step_by(2)
            .enumerate()
            .map(|(j, i)| {
                let t = 1.0 / cfg.rope_base.powf(i as f32 / cfg.rope_dim as f32);
                factors.map_or(t, |f| t / f[j])
            })
            .collect();
        Self {
            theta,
            style: cfg.rope_style,
            dim: cfg.rope_dim,
        }
    }

    /// `(cos, sin)` of every pair at position `pos`, into `cs` (2 × pairs).
    pub fn angles(&self, pos: usize, cs: &mut Vec<f32>) {
        cs.clear();
        let p = pos as f32;
        for &t in &self.theta {
            let a = p * t;
            cs.push(a.cos());
            cs.push(a.sin());
        }
    }

    /// Rotates one head's vector in place with the angles of [`Rope::angles`].
    pub fn apply(&self, x: &mut [f32], cs: &[f32]) {
        let half = self.dim / 2;
        for i in 0..half {
            let (c, s) = (cs[2 * i], cs[2 * i + 1]);
            let (a, b) = match self.style {
                RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                RopeStyle::Halves => (i, i + half),
            };
            let (x0, x1) = (x[a], x[b]);
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}
