//! AVX2 + FMA versions of the row kernels, eight lanes at a time with the portable
//! code for the tails. Every function here is `unsafe` only because it requires a CPU
//! with AVX2 and FMA; memory accesses are bounds-checked.

use std::arch::x86_64::*;

use super::{Norm, ERF_A, ERF_P, EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, LOG2E};

const LANES: usize = 8;

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn splat(x: f32) -> __m256 {
    _mm256_set1_ps(x)
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn load(s: &[f32]) -> __m256 {
    assert!(s.len() >= LANES);
    // Eight readable floats, checked above; an unaligned load.
    _mm256_loadu_ps(s.as_ptr())
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store(s: &mut [f32], v: __m256) {
    assert!(s.len() >= LANES);
    // Eight writable floats, checked above; an unaligned store.
    _mm256_storeu_ps(s.as_mut_ptr(), v)
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn hmax(v: __m256) -> f32 {
    let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_max_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// The polynomial constants, splatted once per kernel call rather than per vector
/// (which also keeps unoptimised test builds tolerable).
struct Consts {
    one: __m256,
    half: __m256,
    sign: __m256,
    exp_hi: __m256,
    exp_lo: __m256,
    log2e: __m256,
    ln2_hi: __m256,
    ln2_lo: __m256,
    exp_p: [__m256; 6],
    exp_bias: __m256i,
    /// `ln2^k / k!` for k = 5 down to 0: 2^f's Taylor polynomial.
    exp2_taylor: [__m256; 6],
    frac_1_sqrt_2: __m256,
    erf_p: __m256,
    erf_a: [__m256; 5],
}

impl Consts {
    #[target_feature(enable = "avx2,fma")]
    unsafe fn new() -> Self {
        Self {
            one: splat(1.0),
            half: splat(0.5),
            sign: splat(-0.0),
            exp_hi: splat(EXP_HI),
            exp_lo: splat(EXP_LO),
            log2e: splat(LOG2E),
            ln2_hi: splat(LN2_HI),
            ln2_lo: splat(LN2_LO),
            exp_p: EXP_P.map(|p| splat(p)),
            exp_bias: _mm256_set1_epi32(127),
            exp2_taylor: [
                1.333_355_8e-3,
                9.618_129e-3,
                5.550_411e-2,
                0.240_226_5,
                std::f32::consts::LN_2,
                1.0,
            ]
            .map(|p| splat(p)),
            frac_1_sqrt_2: splat(std::f32::consts::FRAC_1_SQRT_2),
            erf_p: splat(ERF_P),
            erf_a: ERF_A.map(|a| splat(a)),
        }
    }
}

/// e^x per lane, the same polynomial as the portable `exp`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp(x: __m256, c: &Consts) -> __m256 {
    let x = _mm256_max_ps(_mm256_min_ps(x, c.exp_hi), c.exp_lo);
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x, c.log2e,
    ));
    let r = _mm256_fnmadd_ps(n, c.ln2_hi, x);
    let r = _mm256_fnmadd_ps(n, c.ln2_lo, r);
    let mut y = c.exp_p[0];
    for p in &c.exp_p[1..] {
        y = _mm256_fmadd_ps(y, r, *p);
    }
    let y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, c.one));
    let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), c.exp_bias));
    _mm256_mul_ps(y, _mm256_castsi256_ps(pow2))
}

/// e^x per lane for x <= 0 where ~1e-6 relative is enough (probabilities rounded to at
/// most 13 bits): 2^(x·log₂e) split into 2^n · 2^f, |f| <= 1/2, 2^f by its Taylor
/// polynomial of degree 5 (truncation < 3e-6), 2^n added into the exponent bits. Below
/// -87 (past f32's normal range) the result is clamped at e^-87.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_nonpositive(x: __m256, c: &Consts) -> __m256 {
    let t = _mm256_mul_ps(_mm256_max_ps(x, c.exp_lo), c.log2e);
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
    let f = _mm256_sub_ps(t, n);
    let mut p = c.exp2_taylor[0];
    for k in &c.exp2_taylor[1..] {
        p = _mm256_fmadd_ps(p, f, *k);
    }
    let pow2 = _mm256_slli_epi32::<23>(_mm256_cvtps_epi32(n));
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), pow2))
}

/// GELU per lane: `x/2 · (1 + erf(x/√2))`, erf as the portable `erf`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu(x: __m256, c: &Consts) -> __m256 {
    let z = _mm256_mul_ps(x, c.frac_1_sqrt_2);
    let a = _mm256_andnot_ps(c.sign, z);
    let t = _mm256_div_ps(c.one, _mm256_fmadd_ps(c.erf_p, a, c.one));
    let mut poly = c.erf_a[4];
    for k in c.erf_a[..4].iter().rev() {
        poly = _mm256_fmadd_ps(poly, t, *k);
    }
    let e = exp(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)), c);
    let erf_abs = _mm256_fnmadd_ps(_mm256_mul_ps(poly, t), e, c.one);
    let erf = _mm256_or_ps(erf_abs, _mm256_and_ps(c.sign, z));
    _mm256_mul_ps(_mm256_mul_ps(c.half, x), _mm256_add_ps(c.one, erf))
}

/// See [`super::Simd::bias_gelu`].
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn bias_gelu(rows: &mut [f32], bias: &[f32]) {
    let width = bias.len();
    let body = width - width % LANES;
    let c = Consts::new();
    for row in rows.chunks_exact_mut(width) {
        let (head, tail) = row.split_at_mut(body);
        for (x, b) in head.chunks_exact_mut(LANES).zip(bias.chunks_exact(LANES)) {
            store(x, gelu(_mm256_add_ps(load(x), load(b)), &c));
        }
        for (x, b) in tail.iter_mut().zip(&bias[body..]) {
            *x = super::gelu(*x + b);
        }
    }
}

/// See [`super::Simd::bias_layer_norm`]; one row.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn bias_layer_norm(row: &mut [f32], bias: Option<&[f32]>, norm: Norm<'_>) {
    let width = row.len();
    let body = width - width % LANES;
    if let Some(bias) = bias {
        let (head, tail) = row.split_at_mut(body);
        for (x, b) in head.chunks_exact_mut(LANES).zip(bias.chunks_exact(LANES)) {
            store(x, _mm256_add_ps(load(x), load(b)));
        }
        for (x, b) in tail.iter_mut().zip(&bias[body..]) {
            *x += b;
        }
    }
    let (head, tail) = row.split_at_mut(body);
    let mut acc = _mm256_setzero_ps();
    for x in head.chunks_exact(LANES) {
        acc = _mm256_add_ps(acc, load(x));
    }
    let n = width as f32;
    let mean = (hsum(acc) + tail.iter().sum::<f32>()) / n;
    let m = splat(mean);
    let mut acc = _mm256_setzero_ps();
    for x in head.chunks_exact(LANES) {
        let d = _mm256_sub_ps(load(x), m);
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    let var = (hsum(acc) + tail.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>()) / n;
    let inv = 1.0 / (var + norm.eps).sqrt();
    let iv = splat(inv);
    for ((x, g), b) in head
        .chunks_exact_mut(LANES)
        .zip(norm.gamma.chunks_exact(LANES))
        .zip(norm.beta.chunks_exact(LANES))
    {
        let y = _mm256_mul_ps(_mm256_sub_ps(load(x), m), iv);
        store(x, _mm256_fmadd_ps(y, load(g), load(b)));
    }
    for ((x, g), b) in tail
        .iter_mut()
        .zip(&norm.gamma[body..])
        .zip(&norm.beta[body..])
    {
        *x = (*x - mean) * inv * g + b;
    }
}

/// See [`super::Simd::softmax`].
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn softmax(rows: &mut [f32], width: usize) {
    let c = Consts::new();
    for row in rows.chunks_exact_mut(width) {
        softmax_row(row, &c);
    }
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_row(row: &mut [f32], c: &Consts) {
    let Tail {
        body,
        mask,
        tail_in,
        max: m,
    } = row_max(row);
    let (head, tail) = row.split_at_mut(body);
    let t = tail.as_mut_ptr();
    let mut acc = _mm256_setzero_ps();
    for x in head.chunks_exact_mut(LANES) {
        let e = exp(_mm256_sub_ps(load(x), m), c);
        acc = _mm256_add_ps(acc, e);
        store(x, e);
    }
    let tail_e = _mm256_and_ps(exp(_mm256_sub_ps(tail_in, m), c), _mm256_castsi256_ps(mask));
    acc = _mm256_add_ps(acc, tail_e);
    let iv = splat(1.0 / hsum(acc));
    for x in head.chunks_exact_mut(LANES) {
        store(x, _mm256_mul_ps(load(x), iv));
    }
    // SAFETY: as the load above.
    _mm256_maskstore_ps(t, mask, _mm256_mul_ps(tail_e, iv));
}

/// A softmax row's maximum and its tail (attention rows are sequence lengths: any
/// width) as one masked vector, whose missing lanes read as -inf.
struct Tail {
    /// Values before the tail (a multiple of 8).
    body: usize,
    /// The tail's lanes.
    mask: __m256i,
    tail_in: __m256,
    /// The row's maximum in every lane.
    max: __m256,
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_max(row: &[f32]) -> Tail {
    let body = row.len() - row.len() % LANES;
    let mask = tail_mask(row.len() - body);
    // SAFETY: the mask enables only the lanes past `body` that are inside `row`.
    let tail_in = _mm256_blendv_ps(
        splat(f32::NEG_INFINITY),
        _mm256_maskload_ps(row.as_ptr().add(body), mask),
        _mm256_castsi256_ps(mask),
    );
    let mut vmax = tail_in;
    for x in row[..body].chunks_exact(LANES) {
        vmax = _mm256_max_ps(vmax, load(x));
    }
    Tail {
        body,
        mask,
        tail_in,
        max: splat(hmax(vmax)),
    }
}

/// A mask of the first `n` (< 8) lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn tail_mask(n: usize) -> __m256i {
    debug_assert!(n < LANES);
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Attention's softmax rounded straight to i16, its constants splatted once per head
/// rather than once per row.
pub(in crate::ml::embedder::cpu) struct RoundedSoftmax(Consts);

impl RoundedSoftmax {
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::ml::embedder::cpu) unsafe fn new() -> Self {
        Self(Consts::new())
    }

    /// Softmax of `row` rounded straight to i16 for a product: `q_j = round(qmax ·
    /// e^(x_j − max))`, pairs of values as one i32 in `out` (`row.len()` rounded up to
    /// even values, the odd one's partner zero), and returns the scale that turns `q`
    /// into probabilities, `1 / (qmax · Σ e^(x_j − max))`. The largest probability's
    /// exponential is 1, so `qmax` levels cover the row exactly as rounding the softmax
    /// with a scale of its own maximum would, without the pass that divides by the sum.
    #[target_feature(enable = "avx2,fma")]
    pub(in crate::ml::embedder::cpu) unsafe fn row(
        &self,
        row: &[f32],
        out: &mut [i32],
        qmax: f32,
    ) -> f32 {
        let c = &self.0;
        let n = row.len();
        assert!(out.len() >= n.div_ceil(2), "rounded softmax: output");
        let Tail {
            body,
            mask,
            tail_in,
            max: m,
        } = row_max(row);
        let q = splat(qmax);
        let dst = out.as_mut_ptr().cast::<i16>();
        let mut acc = _mm256_setzero_ps();
        let mut k = 0;
        // Sixteen values at a time: two vectors rounded, packed to i16 (in the default
        // rounding mode, to nearest even; 0 <= e·qmax <= qmax, so nothing saturates).
        while k + 16 <= body {
            let e0 = exp_nonpositive(_mm256_sub_ps(load(&row[k..]), m), c);
            let e1 = exp_nonpositive(_mm256_sub_ps(load(&row[k + 8..]), m), c);
            acc = _mm256_add_ps(acc, _mm256_add_ps(e0, e1));
            let a = _mm256_cvtps_epi32(_mm256_mul_ps(e0, q));
            let b = _mm256_cvtps_epi32(_mm256_mul_ps(e1, q));
            let v = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(a, b));
            // SAFETY: values k..k+16 are inside `out` (n.div_ceil(2) pairs, asserted).
            _mm256_storeu_si256(dst.add(k).cast(), v);
            k += 16;
        }
        // The rest (fewer than 16 values): at most one whole vector and the masked tail.
        let mut rest = [0i32; 16];
        let mut j = 0;
        while k + j + LANES <= body {
            let e = exp_nonpositive(_mm256_sub_ps(load(&row[k + j..]), m), c);
            acc = _mm256_add_ps(acc, e);
            _mm256_storeu_si256(
                rest.as_mut_ptr().add(j).cast(),
                _mm256_cvtps_epi32(_mm256_mul_ps(e, q)),
            );
            j += LANES;
        }
        let tail_e = _mm256_and_ps(
            exp_nonpositive(_mm256_sub_ps(tail_in, m), c),
            _mm256_castsi256_ps(mask),
        );
        acc = _mm256_add_ps(acc, tail_e);
        _mm256_storeu_si256(
            rest.as_mut_ptr().add(j).cast(),
            _mm256_cvtps_epi32(_mm256_mul_ps(tail_e, q)),
        );
        for (i, &v) in rest[..n - k].iter().enumerate() {
            // SAFETY: value k + i < n is inside `out`.
            *dst.add(k + i) = v as i16;
        }
        if n % 2 == 1 {
            // SAFETY: the pair of value n - 1 is inside `out`.
            *dst.add(n) = 0;
        }
        1.0 / (qmax * hsum(acc))
    }
}
