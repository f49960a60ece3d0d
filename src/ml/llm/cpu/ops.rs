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
        for (c, s) in self.cos_sin(pos) {
            cs.push(c);
            cs.push(s);
        }
    }

    /// The angles of [`Rope::angles`] at `pos`, laid out for [`Rope::apply`]: for rotated
    /// halves, every cosine, then every sine; for interleaved pairs, each cosine twice,
    /// then each sine twice with the first of the two negated (`2 × rope_dim` values).
    pub fn table(&self, pos: usize, cs: &mut Vec<f32>) {
        let (half, dim) = (self.dim / 2, self.dim);
        cs.clear();
        cs.resize(self.table_len(), 0.0);
        for (i, (c, s)) in self.cos_sin(pos).enumerate() {
            match self.style {
                RopeStyle::Halves => (cs[i], cs[half + i]) = (c, s),
                RopeStyle::Interleaved => {
                    (cs[2 * i], cs[2 * i + 1]) = (c, c);
                    (cs[dim + 2 * i], cs[dim + 2 * i + 1]) = (-s, s);
                }
            }
        }
    }

    /// Values in a [`Rope::table`].
    fn table_len(&self) -> usize {
        match self.style {
            RopeStyle::Halves => self.dim,
            RopeStyle::Interleaved => 2 * self.dim,
        }
    }

    /// `(cos, sin)` of every pair's angle at `pos`, scaled.
    fn cos_sin(&self, pos: usize) -> impl Iterator<Item = (f32, f32)> + '_ {
        let p = pos as f32 * self.pos_scale;
        self.theta.iter().map(move |&t| {
            let a = p * t;
            (a.cos() * self.mscale, a.sin() * self.mscale)
        })
    }

    /// Rotates every head (`head_dim` values each) of `x` in place with the angles of
    /// [`Rope::table`]. Each pair `(x0, x1)` becomes `(x0·c − x1·s, x0·s + x1·c)`, two
    /// products and a sum each, not fused, on every tier.
    pub fn apply(&self, tier: Tier, x: &mut [f32], head_dim: usize, cs: &[f32]) {
        assert!(self.dim <= head_dim && x.len().is_multiple_of(head_dim));
        assert_eq!(cs.len(), self.table_len());
        match tier {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the tier was checked against the CPU at load; lengths are checked above.
            Tier::Avx512 => unsafe { self.apply_avx512(x, head_dim, cs) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Tier::Avx2 => unsafe { self.apply_avx2(x, head_dim, cs) },
            // SAFETY: lengths are checked above.
            _ => unsafe { self.apply_lanes::<Scalar16>(x, head_dim, cs) },
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
    unsafe fn apply_avx512(&self, x: &mut [f32], head_dim: usize, cs: &[f32]) {
        self.apply_lanes::<crate::ml::simd::Avx512x16>(x, head_dim, cs)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn apply_avx2(&self, x: &mut [f32], head_dim: usize, cs: &[f32]) {
        self.apply_lanes::<crate::ml::simd::Avx2x16>(x, head_dim, cs)
    }

    #[inline(always)]
    unsafe fn apply_lanes<V: F16x>(&self, x: &mut [f32], head_dim: usize, cs: &[f32]) {
        let (dim, half) = (self.dim, self.dim / 2);
        let c = cs.as_ptr();
        for head in x.chunks_exact_mut(head_dim) {
            let h = head.as_mut_ptr();
            match self.style {
                RopeStyle::Halves => {
                    let body = half / 16 * 16;
                    for i in (0..body).step_by(16) {
                        let (x0, x1) = (V::load(h.add(i)), V::load(h.add(half + i)));
                        let (cv, sv) = (V::load(c.add(i)), V::load(c.add(half + i)));
                        x0.mul(cv).sub(x1.mul(sv)).store(h.add(i));
                        x0.mul(sv).add(x1.mul(cv)).store(h.add(half + i));
                    }
                    for i in body..half {
                        let (x0, x1) = (head[i], head[half + i]);
                        let (cv, sv) = (cs[i], cs[half + i]);
                        head[i] = x0 * cv - x1 * sv;
                        head[half + i] = x0 * sv + x1 * cv;
                    }
                }
                RopeStyle::Interleaved => {
                    // Lane 2i: x0·c + x1·(−s); lane 2i + 1: x1·c + x0·s.
                    let body = dim / 16 * 16;
                    for i in (0..body).step_by(16) {
                        let v = V::load(h.add(i));
                        let (cv, sv) = (V::load(c.add(i)), V::load(c.add(dim + i)));
                        v.mul(cv).add(v.swap_pairs().mul(sv)).store(h.add(i));
                    }
                    for i in (body..dim).step_by(2) {
                        let (x0, x1) = (head[i], head[i + 1]);
                        head[i] = x0 * cs[i] + x1 * cs[dim + i];
                        head[i + 1] = x1 * cs[i + 1] + x0 * cs[dim + i + 1];
                    }
                }
            }
        }
    }
}

/// `out[i] = x[i]` as f16 bits (round to nearest even).
pub fn to_f16(tier: Tier, x: &[f32], out: &mut [u16]) {
    assert_eq!(x.len(), out.len());
    match tier {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the tier was checked against the CPU at load; lengths are checked above.
        Tier::Avx512 => unsafe { to_f16_avx512(x, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Tier::Avx2 => unsafe { to_f16_avx2(x, out) },
        // SAFETY: lengths are checked above.
        _ => unsafe { to_f16_lanes::<Scalar16>(x, out) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
unsafe fn to_f16_avx512(x: &[f32], out: &mut [u16]) {
    to_f16_lanes::<crate::ml::simd::Avx512x16>(x, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn to_f16_avx2(x: &[f32], out: &mut [u16]) {
    to_f16_lanes::<crate::ml::simd::Avx2x16>(x, out)
}

#[inline(always)]
unsafe fn to_f16_lanes<V: F16x>(x: &[f32], out: &mut [u16]) {
    let body = x.len() / 16 * 16;
    for i in (0..body).step_by(16) {
        V::load(x.as_ptr().add(i)).store_f16(out.as_mut_ptr().add(i));
    }
    for i in body..x.len() {
        out[i] = half::f16::from_f32(x[i]).to_bits();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rope(style: RopeStyle, dim: usize) -> Rope {
        Rope {
            theta: (0..dim / 2)
                .map(|i| 1.0 / 10_000f32.powf(2.0 * i as f32 / dim as f32))
                .collect(),
            style,
            dim,
            pos_scale: 1.0,
            mscale: 1.0,
        }
    }

    /// The rotation pair by pair with the angles of [`Rope::angles`].
    fn reference(r: &Rope, x: &mut [f32], head_dim: usize, pos: usize) {
        let mut cs = Vec::new();
        r.angles(pos, &mut cs);
        let half = r.dim / 2;
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..half {
                let (c, s) = (cs[2 * i], cs[2 * i + 1]);
                let (a, b) = match r.style {
                    RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                    RopeStyle::Halves => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }

    #[test]
    fn every_tier_rotates_as_the_pairwise_formula() {
        for style in [RopeStyle::Interleaved, RopeStyle::Halves] {
            // Whole lanes, a remainder, and fewer rotated dimensions than the head's.
            for (dim, head_dim) in [(64, 64), (128, 128), (40, 40), (36, 64), (16, 80)] {
                let r = rope(style, dim);
                let x: Vec<f32> = (0..3 * head_dim)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.031)
                    .collect();
                for pos in [0, 1, 17, 4_000] {
                    let mut want = x.clone();
                    reference(&r, &mut want, head_dim, pos);
                    let mut cs = Vec::new();
                    r.table(pos, &mut cs);
                    for tier in Tier::available() {
                        let mut got = x.clone();
                        r.apply(tier, &mut got, head_dim, &cs);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(
                            same,
                            "{style:?} dim {dim} head {head_dim} pos {pos} {tier:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_tier_rounds_to_f16_as_half_does() {
        let mut x: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 1.37e-3).collect();
        x.extend([
            65_504.0,
            65_520.0,
            1e9,
            -1e9,
            5.9e-8,
            2.98e-8,
            -0.0,
            f32::NAN,
        ]);
        x.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0 + 1.0 / 2048.0,
            3.0 / 4096.0,
        ]);
        let want: Vec<u16> = x
            .iter()
            .map(|&v| half::f16::from_f32(v).to_bits())
            .collect();
        for tier in Tier::available() {
            for len in [0, 5, 16, 31, x.len()] {
                let mut got = vec![0u16; len];
                to_f16(tier, &x[..len], &mut got);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    // NaN stays NaN; its payload need not.
                    let nan = |b: u16| b & 0x7c00 == 0x7c00 && b & 0x3ff != 0;
                    assert!(
                        g == w || (nan(*g) && nan(*w)),
                        "{tier:?} value {i}: {g:#x} {w:#x}"
                    );
                }
            }
        }
    }
}
