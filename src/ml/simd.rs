//! Sixteen f32 lanes, written once and run on three instruction sets: [`F16x`] is the
//! interface, [`Scalar16`], [`Avx2x16`] (two 256-bit halves) and [`Avx512x16`] (one
//! 512-bit register) implement it. Kernels are generic functions marked
//! `#[inline(always)]` and called from a `#[target_feature]` entry point per tier, so the
//! compiler inlines the lane operations with the right instructions.
//!
//! Every operation is the same sequence of IEEE operations on every tier (fused
//! multiply-adds, rounding to nearest even, the same pairwise order for sums), so the
//! tiers give bit-identical results. `exp` is Cephes' single-precision polynomial.

#![allow(clippy::missing_safety_doc)]

/// Sixteen f32 lanes. Every method is `unsafe`: the SIMD implementations need their CPU
/// features (the caller checked them), and loads and stores take raw pointers to at
/// least 16 valid elements.
pub trait F16x: Copy {
    /// All lanes `v`.
    unsafe fn splat(v: f32) -> Self;
    /// Sixteen floats from `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// Sixteen f16 values (bits) from `p`, as f32.
    unsafe fn load_f16(p: *const u16) -> Self;
    /// Stores to `p`.
    unsafe fn store(self, p: *mut f32);
    /// Stores as f16 bits (round to nearest even) to `p`.
    unsafe fn store_f16(self, p: *mut u16);
    /// Lane-wise sum.
    unsafe fn add(self, o: Self) -> Self;
    /// Lane-wise difference.
    unsafe fn sub(self, o: Self) -> Self;
    /// Lane-wise product.
    unsafe fn mul(self, o: Self) -> Self;
    /// Lane-wise quotient.
    unsafe fn div(self, o: Self) -> Self;
    /// `self * a + b`.
    unsafe fn fma(self, a: Self, b: Self) -> Self;
    /// Lane-wise maximum.
    unsafe fn max(self, o: Self) -> Self;
    /// Sum of the lanes.
    unsafe fn sum(self) -> f32;
    /// Largest lane.
    unsafe fn hmax(self) -> f32;
    /// `e^x` per lane.
    unsafe fn exp(self) -> Self;
    /// Lanes `2i` and `2i + 1` swapped, for every `i`.
    unsafe fn swap_pairs(self) -> Self;
}

const EXP_HI: f32 = 88.376_26;
const EXP_LO: f32 = -87.336_55;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_2e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];

/// Asks for the cache lines of the `bytes` bytes at `p` ahead of their use (on x86-64; a
/// no-op elsewhere). Only hints: an address past an allocation is never read, so callers
/// need not check it, but must form it with `wrapping_add`.
#[inline(always)]
pub fn prefetch(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..bytes).step_by(64) {
        // SAFETY: a prefetch never faults, whatever the address; SSE is in every x86-64.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                p.wrapping_add(off).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// Cephes' `expf`, scalar, with the vector versions' operations.
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(EXP_LO, EXP_HI);
    let n = (x * LOG2E).round_ties_even();
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    let mut y = EXP_P[0];
    for p in &EXP_P[1..] {
        y = y.mul_add(r, *p);
    }
    let y = y.mul_add(r * r, r) + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Sum of 16 lanes in the vector tiers' order: halves, then quarters, pairs, neighbours.
fn tree_sum(v: [f32; 16]) -> f32 {
    let mut s = [0f32; 8];
    for i in 0..8 {
        s[i] = v[i] + v[i + 8];
    }
    let q = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    let p = [q[0] + q[2], q[1] + q[3]];
    p[0] + p[1]
}

/// Plain arrays: any CPU.
#[derive(Clone, Copy)]
pub struct Scalar16([f32; 16]);

impl Scalar16 {
    fn map(self, f: impl Fn(f32) -> f32) -> Self {
        Self(self.0.map(f))
    }
    fn zip(self, o: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        let mut r = self.0;
        for (a, b) in r.iter_mut().zip(o.0) {
            *a = f(*a, b);
        }
        Self(r)
    }
}

impl F16x for Scalar16 {
    unsafe fn splat(v: f32) -> Self {
        Self([v; 16])
    }
    unsafe fn load(p: *const f32) -> Self {
        Self(std::ptr::read_unaligned(p.cast::<[f32; 16]>()))
    }
    unsafe fn load_f16(p: *const u16) -> Self {
        let h = std::ptr::read_unaligned(p.cast::<[u16; 16]>());
        Self(h.map(|b| half::f16::from_bits(b).to_f32()))
    }
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p.cast::<[f32; 16]>(), self.0)
    }
    unsafe fn store_f16(self, p: *mut u16) {
        std::ptr::write_unaligned(
            p.cast::<[u16; 16]>(),
            self.0.map(|v| half::f16::from_f32(v).to_bits()),
        )
    }
    unsafe fn add(self, o: Self) -> Self {
        self.zip(o, |a, b| a + b)
    }
    unsafe fn sub(self, o: Self) -> Self {
        self.zip(o, |a, b| a - b)
    }
    unsafe fn mul(self, o: Self) -> Self {
        self.zip(o, |a, b| a * b)
    }
    unsafe fn div(self, o: Self) -> Self {
        self.zip(o, |a, b| a / b)
    }
    unsafe fn fma(self, a: Self, b: Self) -> Self {
        let mut r = self.0;
        for ((x, a), b) in r.iter_mut().zip(a.0).zip(b.0) {
            *x = x.mul_add(a, b);
        }
        Self(r)
    }
    unsafe fn max(self, o: Self) -> Self {
        self.zip(o, f32::max)
    }
    unsafe fn sum(self) -> f32 {
        tree_sum(self.0)
    }
    unsafe fn hmax(self) -> f32 {
        self.0.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b))
    }
    unsafe fn swap_pairs(self) -> Self {
        let mut r = self.0;
        for p in r.chunks_exact_mut(2) {
            p.swap(0, 1);
        }
        Self(r)
    }
    unsafe fn exp(self) -> Self {
        self.map(exp)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2x16, Avx512x16};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{F16x, EXP_HI, EXP_LO, EXP_P, LN2_HI, LN2_LO, LOG2E};

    /// Two 256-bit halves (AVX2 + FMA + F16C).
    #[derive(Clone, Copy)]
    pub struct Avx2x16(__m256, __m256);

    impl F16x for Avx2x16 {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn splat(v: f32) -> Self {
            Self(_mm256_set1_ps(v), _mm256_set1_ps(v))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn load(p: *const f32) -> Self {
            Self(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn load_f16(p: *const u16) -> Self {
            Self(
                _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast())),
            )
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn store(self, p: *mut f32) {
            _mm256_storeu_ps(p, self.0);
            _mm256_storeu_ps(p.add(8), self.1);
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn store_f16(self, p: *mut u16) {
            _mm_storeu_si128(
                p.cast(),
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self.0),
            );
            _mm_storeu_si128(
                p.add(8).cast(),
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self.1),
            );
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn add(self, o: Self) -> Self {
            Self(_mm256_add_ps(self.0, o.0), _mm256_add_ps(self.1, o.1))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn sub(self, o: Self) -> Self {
            Self(_mm256_sub_ps(self.0, o.0), _mm256_sub_ps(self.1, o.1))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn mul(self, o: Self) -> Self {
            Self(_mm256_mul_ps(self.0, o.0), _mm256_mul_ps(self.1, o.1))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn div(self, o: Self) -> Self {
            Self(_mm256_div_ps(self.0, o.0), _mm256_div_ps(self.1, o.1))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn fma(self, a: Self, b: Self) -> Self {
            Self(
                _mm256_fmadd_ps(self.0, a.0, b.0),
                _mm256_fmadd_ps(self.1, a.1, b.1),
            )
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn max(self, o: Self) -> Self {
            Self(_mm256_max_ps(self.0, o.0), _mm256_max_ps(self.1, o.1))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn sum(self) -> f32 {
            let v = _mm256_add_ps(self.0, self.1);
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn hmax(self) -> f32 {
            let v = _mm256_max_ps(self.0, self.1);
            let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps::<1>(s, s)))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn swap_pairs(self) -> Self {
            Self(
                _mm256_permute_ps::<0b10_11_00_01>(self.0),
                _mm256_permute_ps::<0b10_11_00_01>(self.1),
            )
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn exp(self) -> Self {
            Self(exp8(self.0), exp8(self.1))
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn exp8(x: __m256) -> __m256 {
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(EXP_LO)),
            _mm256_set1_ps(EXP_HI),
        );
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut y = _mm256_set1_ps(EXP_P[0]);
        for p in &EXP_P[1..] {
            y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(*p));
        }
        let y = _mm256_add_ps(
            _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r),
            _mm256_set1_ps(1.0),
        );
        // 2^n for n in the clamped range, as the scalar version builds it.
        let pow = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvtps_epi32(n),
            _mm256_set1_epi32(127),
        ));
        _mm256_mul_ps(y, _mm256_castsi256_ps(pow))
    }

    /// One 512-bit register (AVX-512 F).
    #[derive(Clone, Copy)]
    pub struct Avx512x16(__m512);

    impl F16x for Avx512x16 {
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn splat(v: f32) -> Self {
            Self(_mm512_set1_ps(v))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn load(p: *const f32) -> Self {
            Self(_mm512_loadu_ps(p))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn load_f16(p: *const u16) -> Self {
            Self(_mm512_cvtph_ps(_mm256_loadu_si256(p.cast())))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn store(self, p: *mut f32) {
            _mm512_storeu_ps(p, self.0)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn store_f16(self, p: *mut u16) {
            _mm256_storeu_si256(
                p.cast(),
                _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self.0),
            )
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn add(self, o: Self) -> Self {
            Self(_mm512_add_ps(self.0, o.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn sub(self, o: Self) -> Self {
            Self(_mm512_sub_ps(self.0, o.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn mul(self, o: Self) -> Self {
            Self(_mm512_mul_ps(self.0, o.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn div(self, o: Self) -> Self {
            Self(_mm512_div_ps(self.0, o.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn fma(self, a: Self, b: Self) -> Self {
            Self(_mm512_fmadd_ps(self.0, a.0, b.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn max(self, o: Self) -> Self {
            Self(_mm512_max_ps(self.0, o.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
        unsafe fn sum(self) -> f32 {
            let h = _mm256_add_ps(
                _mm512_castps512_ps256(self.0),
                _mm512_extractf32x8_ps::<1>(self.0),
            );
            let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn hmax(self) -> f32 {
            _mm512_reduce_max_ps(self.0)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn swap_pairs(self) -> Self {
            Self(_mm512_permute_ps::<0b10_11_00_01>(self.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx2,fma,f16c")]
        unsafe fn exp(self) -> Self {
            let x = _mm512_min_ps(
                _mm512_max_ps(self.0, _mm512_set1_ps(EXP_LO)),
                _mm512_set1_ps(EXP_HI),
            );
            let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                _mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
            );
            let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
            let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
            let mut y = _mm512_set1_ps(EXP_P[0]);
            for p in &EXP_P[1..] {
                y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(*p));
            }
            let y = _mm512_add_ps(
                _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), r),
                _mm512_set1_ps(1.0),
            );
            Self(_mm512_scalef_ps(y, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe fn check<V: F16x>() {
        let xs: Vec<f32> = (0..16).map(|i| i as f32 * 0.7 - 5.0).collect();
        let v = V::load(xs.as_ptr());
        let mut out = [0f32; 16];
        v.exp().store(out.as_mut_ptr());
        for (o, x) in out.iter().zip(&xs) {
            assert_eq!(*o, exp(*x), "exp({x})");
            assert!((o - x.exp()).abs() <= 1e-6 * o.abs(), "exp({x}) = {o}");
        }
        assert_eq!(v.sum(), tree_sum(xs.clone().try_into().unwrap()));
        assert_eq!(v.hmax(), 5.5);
        v.swap_pairs().store(out.as_mut_ptr());
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, xs[i ^ 1], "lane {i} of swapped pairs");
        }
        let mut h = [0u16; 16];
        v.store_f16(h.as_mut_ptr());
        V::load_f16(h.as_ptr()).store(out.as_mut_ptr());
        for (o, x) in out.iter().zip(&xs) {
            assert_eq!(*o, half::f16::from_f32(*x).to_f32());
        }
    }

    #[test]
    fn every_tier_agrees_with_the_scalar_functions() {
        unsafe { check::<Scalar16>() };
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                unsafe { check::<Avx2x16>() };
            }
            if is_x86_feature_detected!("avx512f") {
                unsafe { check::<Avx512x16>() };
            }
        }
    }
}
