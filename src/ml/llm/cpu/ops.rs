//! The row operations between the matrix products: RMSNorm, rotary embeddings, the gated
//! feed-forward activations (SiLU, Gemma's GELU). Written as candle computes them (same formulas), vectorised
//! over 16 lanes with the same operations on every kernel tier, so tiers agree bit for
//! bit.

use super::config::{Config, RopeStyle};
use crate::ml::quant::Tier;
use crate::ml::simd::{exp, F16x, Scalar16};

/// `out = x / sqrt(mean(x²) + eps) · w`.
pub fn rms_norm(tier: Tier, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    assert!(w.len() == x.len() && out.len() == x.len());
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the tier was checked against the CPU at load; lengths are checked above.
        Tier::Avx512 => unsafe { rms_norm_avx512(x, w, eps, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Tier::Avx2 => unsafe { rms_norm_avx2(x, w, eps, out) },
        // SAFETY: lengths are checked above.
        _ => unsafe { rms_norm_lanes::<Scalar16>(x, w, eps, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
unsafe fn rms_norm_avx512(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_lanes::<crate::ml::simd::Avx512x16>(x, w, eps, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn rms_norm_avx2(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_lanes::<crate::ml::simd::Avx2x16>(x, w, eps, out)
}

#[inline(always)]
unsafe fn rms_norm_lanes<V: F16x>(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len();
    let body = n / 16 * 16;
    let mut acc = V::splat(0.0);
    for i in (0..body).step_by(16) {
        let v = V::load(x.as_ptr().add(i));
        acc = v.fma(v, acc);
    }
    let mut sum2 = acc.sum();
    for v in &x[body..] {
        sum2 = v.mul_add(*v, sum2);
    }
    let m = V::splat((sum2 / n as f32 + eps).sqrt());
    for i in (0..body).step_by(16) {
        let v = V::load(x.as_ptr().add(i))
            .div(m)
            .mul(V::load(w.as_ptr().add(i)));
        v.store(out.as_mut_ptr().add(i));
    }
    let m = (sum2 / n as f32 + eps).sqrt();
    for i in body..n {
        out[i] = x[i] / m * w[i];
    }
}

/// `out = silu(gate) · up`, `silu(g) = g / (1 + e^-g)`.
pub fn silu_mul(tier: Tier, gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(up.len() == gate.len() && out.len() == gate.len());
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the tier was checked against the CPU at load; lengths are checked above.
        Tier::Avx512 => unsafe { silu_mul_avx512(gate, up, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Tier::Avx2 => unsafe { silu_mul_avx2(gate, up, out) },
        // SAFETY: lengths are checked above.
        _ => unsafe { silu_mul_lanes::<Scalar16>(gate, up, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
unsafe fn silu_mul_avx512(gate: &[f32], up: &[f32], out: &mut [f32]) {
    silu_mul_lanes::<crate::ml::simd::Avx512x16>(gate, up, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn silu_mul_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) {
    silu_mul_lanes::<crate::ml::simd::Avx2x16>(gate, up, out)
}

#[inline(always)]
unsafe fn silu_mul_lanes<V: F16x>(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = gate.len();
    let body = n / 16 * 16;
    let one = V::splat(1.0);
    let zero = V::splat(0.0);
    for i in (0..body).step_by(16) {
        let g = V::load(gate.as_ptr().add(i));
        let silu = g.div(one.add(zero.sub(g).exp()));
        silu.mul(V::load(up.as_ptr().add(i)))
            .store(out.as_mut_ptr().add(i));
    }
    for i in body..n {
        let g = gate[i];
        out[i] = g / (1.0 + exp(0.0 - g)) * up[i];
    }
}

/// `out = gelu_tanh(gate) · up` (Gemma's GeGLU), `gelu_tanh(g) = g/2 · (1 + tanh(√(2/π) ·
/// (g + 0.044715 g³)))`, with `tanh(y) = 1 - 2 / (e^{2y} + 1)`.
pub fn gelu_mul(tier: Tier, gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(up.len() == gate.len() && out.len() == gate.len());
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the tier was checked against the CPU at load; lengths are checked above.
        Tier::Avx512 => unsafe { gelu_mul_avx512(gate, up, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Tier::Avx2 => unsafe { gelu_mul_avx2(gate, up, out) },
        // SAFETY: lengths are checked above.
        _ => unsafe { gelu_mul_lanes::<Scalar16>(gate, up, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
unsafe fn gelu_mul_avx512(gate: &[f32], up: &[f32], out: &mut [f32]) {
    gelu_mul_lanes::<crate::ml::simd::Avx512x16>(gate, up, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_mul_avx2(gate: &[f32], up: &[f32], out: &mut [f32]) {
    gelu_mul_lanes::<crate::ml::simd::Avx2x16>(gate, up, out)
}

/// √(2/π).
const GELU_C: f32 = 0.797_884_6;
/// The cubic term's coefficient.
const GELU_A: f32 = 0.044_715;

#[inline(always)]
unsafe fn gelu_mul_lanes<V: F16x>(gate: &[f32], up: &[f32], out: &mut [f32]) {
    let n = gate.len();
    let body = n / 16 * 16;
    let (one, two, half) = (V::splat(1.0), V::splat(2.0), V::splat(0.5));
    let (c, a) = (V::splat(GELU_C), V::splat(GELU_A));
    for i in (0..body).step_by(16) {
        let g = V::load(gate.as_ptr().add(i));
        let y = c.mul(g).mul(a.mul(g).mul(g).add(one));
        let tanh = one.sub(two.div(two.mul(y).exp().add(one)));
        half.mul(g)
            .mul(one.add(tanh))
            .mul(V::load(up.as_ptr().add(i)))
            .store(out.as_mut_ptr().add(i));
    }
    for i in body..n {
        let g = gate[i];
        let y = GELU_C * g * (GELU_A * g * g + 1.0);
        let tanh = 1.0 - 2.0 / (exp(2.0 * y) + 1.0);
        out[i] = 0.5 * g * (1.0 + tanh) * up[i];
    }
}

/// Rotary angles of one model: `theta[i]` for each rotated pair.
pub struct Rope {
    theta: Vec<f32>,
    style: RopeStyle,
    dim: usize,
    pos_scale: f32,
    mscale: f32,
}

/// How one set of rotations is scaled (all ones but the base for plain RoPE).
#[derive(Debug, Clone, Copy)]
pub struct RopeScaling<'a> {
    /// Base frequency.
    pub base: f32,
    /// Per-pair frequency divisors (Llama 3's `rope_freqs`, Phi-3's LongRoPE factors).
    pub factors: Option<&'a [f32]>,
    /// Factor on positions (linear scaling).
    pub pos_scale: f32,
    /// Factor on cos and sin (LongRoPE's attention factor).
    pub mscale: f32,
}

impl Rope {
    /// The angles of `cfg` with `scaling`.
    pub fn new(cfg: &Config, scaling: RopeScaling<'_>) -> Self {
        let theta = (0..cfg.rope_dim)
            .step_by(2)
            .enumerate()
            .map(|(j, i)| {
                let t = 1.0 / scaling.base.powf(i as f32 / cfg.rope_dim as f32);
                scaling.factors.map_or(t, |f| t / f[j])
            })
            .collect();
        Self {
            theta,
            style: cfg.rope_style,
            dim: cfg.rope_dim,
            pos_scale: scaling.pos_scale,
            mscale: scaling.mscale,
        }
    }

    /// `(cos, sin)` of every pair at position `pos`, into `cs` (2 × pairs).
    pub fn angles(&self, pos: usize, cs: &mut Vec<f32>) {
        cs.clear();
        let p = pos as f32 * self.pos_scale;
        for &t in &self.theta {
            let a = p * t;
            cs.push(a.cos() * self.mscale);
            cs.push(a.sin() * self.mscale);
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
