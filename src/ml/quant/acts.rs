//! Activations quantized for the integer kernels, exactly as ggml quantizes a matmul's
//! input (so ragd's products equal candle's and llama.cpp's up to float rounding):
//! - [`ActKind::Q8`] (ggml's Q8_0 / Q8_1, for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weights): blocks of
//!   32, `d = max|x| / 127` kept as f16, `q = round(x / d)`, and Q8_1's `s = d · Σq`
//!   computed in f16.
//! - [`ActKind::Q8K`] (for the K types): blocks of 256, `q = min(127, round(-128 / m · x))`
//!   where `m` is the value of largest magnitude, `d = m / -128`.
//! - [`ActKind::F32`]: the floats as they are, for float weights.
//!
//! Beside the values, the sums of every 16 and 32 values are kept: kernels use them for
//! the weights' offsets and mins.

use half::f16;

use super::{Tier, WeightType};

/// How a matrix's input is quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActKind {
    /// Floats, unquantized.
    F32,
    /// Blocks of 32 with an f16 scale.
    Q8,
    /// Blocks of 256 with an f32 scale.
    Q8K,
}

/// A batch of `tokens` input rows of `cols` values, quantized for one kind of weight.
/// Buffers are reused from call to call.
#[derive(Debug, Clone)]
pub struct Acts {
    kind: ActKind,
    tokens: usize,
    cols: usize,
    /// `F32`: the values.
    pub(super) f: Vec<f32>,
    /// Quantized values, `tokens × cols`.
    pub(super) qs: Vec<i8>,
    /// Scales: per 32 values (`Q8`) or per 256 (`Q8K`).
    pub(super) d: Vec<f32>,
    /// `Q8`: Q8_1's `s` per 32 values.
    pub(super) s: Vec<f32>,
    /// Sums of each 16 quantized values.
    pub(super) sum16: Vec<i32>,
    /// Sums of each 32 quantized values.
    pub(super) sum32: Vec<i32>,
}

impl Default for Acts {
    fn default() -> Self {
        Self::new()
    }
}

impl Acts {
    /// Empty buffers.
    pub fn new() -> Self {
        Self {
            kind: ActKind::F32,
            tokens: 0,
            cols: 0,
            f: Vec::new(),
            qs: Vec::new(),
            d: Vec::new(),
            s: Vec::new(),
            sum16: Vec::new(),
            sum32: Vec::new(),
        }
    }

    /// The kind these activations were quantized for.
    pub fn kind(&self) -> ActKind {
        self.kind
    }

    /// Input rows.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Quantizes `x` (`tokens` rows of `cols`) for `kind` with the kernels of `tier`.
    /// `cols` must be a multiple of 32 (256 for `Q8K`).
    pub fn quantize(&mut self, tier: Tier, kind: ActKind, x: &[f32], tokens: usize, cols: usize) {
        assert_eq!(x.len(), tokens * cols);
        self.prepare(kind, tokens, cols);
        let w = self.writer();
        for t in 0..tokens {
            // SAFETY: the buffers were sized by `prepare` and nothing else writes them.
            unsafe { w.token(tier, t, &x[t * cols..(t + 1) * cols]) };
        }
    }

    /// Sizes the buffers for `tokens` rows of `cols` values of `kind`, to be filled with
    /// a [`ActsWriter`] (one token per call, from any thread).
    pub fn prepare(&mut self, kind: ActKind, tokens: usize, cols: usize) {
        match kind {
            ActKind::F32 => {}
            ActKind::Q8 => assert!(
                cols.is_multiple_of(32),
                "Q8 activations need cols % 32 == 0"
            ),
            ActKind::Q8K => assert!(
                cols.is_multiple_of(256),
                "Q8K activations need cols % 256 == 0"
            ),
        }
        self.kind = kind;
        self.tokens = tokens;
        self.cols = cols;
        let n = tokens * cols;
        if kind == ActKind::F32 {
            self.f.resize(n, 0.0);
            return;
        }
        let block = if kind == ActKind::Q8 { 32 } else { 256 };
        self.qs.resize(n, 0);
        self.d.resize(n / block, 0.0);
        self.s
            .resize(if kind == ActKind::Q8 { n / 32 } else { 0 }, 0.0);
        self.sum16.resize(n / 16, 0);
        self.sum32.resize(n / 32, 0);
    }

    /// Raw access for filling the prepared buffers token by token.
    pub fn writer(&mut self) -> ActsWriter {
        ActsWriter {
            kind: self.kind,
            cols: self.cols,
            f: self.f.as_mut_ptr(),
            qs: self.qs.as_mut_ptr(),
            d: self.d.as_mut_ptr(),
            s: self.s.as_mut_ptr(),
            sum16: self.sum16.as_mut_ptr(),
            sum32: self.sum32.as_mut_ptr(),
        }
    }
}

/// Fills one token's row of prepared [`Acts`]; threads may fill different tokens at once.
#[derive(Clone, Copy)]
pub struct ActsWriter {
    kind: ActKind,
    cols: usize,
    f: *mut f32,
    qs: *mut i8,
    d: *mut f32,
    s: *mut f32,
    sum16: *mut i32,
    sum32: *mut i32,
}

// SAFETY: the writer only hands out disjoint per-token regions (see `token`).
unsafe impl Send for ActsWriter {}
// SAFETY: as above.
unsafe impl Sync for ActsWriter {}

impl ActsWriter {
    /// Quantizes `x` (one row of `cols` values) as token `t`.
    ///
    /// # Safety
    /// The [`Acts`] it came from must still be prepared for at least `t + 1` tokens and
    /// not otherwise borrowed, and no other thread may write token `t` at the same time.
    pub unsafe fn token(&self, tier: Tier, t: usize, x: &[f32]) {
        let cols = self.cols;
        assert_eq!(x.len(), cols);
        if self.kind == ActKind::F32 {
            std::ptr::copy_nonoverlapping(x.as_ptr(), self.f.add(t * cols), cols);
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if tier == Tier::Avx512 && self.kind == ActKind::Q8 {
            let at = t * cols;
            avx512::q8_row(
                x,
                self.qs.add(at),
                self.d.add(at / 32),
                self.s.add(at / 32),
                self.sum16.add(at / 16),
                self.sum32.add(at / 32),
            );
            return;
        }
        let qs = std::slice::from_raw_parts_mut(self.qs.add(t * cols), cols);
        let block = if self.kind == ActKind::Q8 { 32 } else { 256 };
        for (b, xb) in x.chunks_exact(block).enumerate() {
            let i = t * cols / block + b;
            let qb = &mut qs[b * block..(b + 1) * block];
            match self.kind {
                ActKind::Q8 => {
                    let (d, sum) = quantize_q8_block(xb, qb);
                    *self.d.add(i) = d;
                    // ggml's Q8_1: s = d · Σq, in f16 arithmetic.
                    *self.s.add(i) = (f16::from_f32(sum as f32) * f16::from_f32(d)).to_f32();
                }
                ActKind::Q8K => *self.d.add(i) = quantize_q8k_block(tier, xb, qb),
                ActKind::F32 => unreachable!(),
            }
        }
        for (i, q16) in qs.chunks_exact(16).enumerate() {
            *self.sum16.add(t * cols / 16 + i) = q16.iter().map(|&q| i32::from(q)).sum();
        }
        for i in 0..cols / 32 {
            let j = t * cols / 16 + 2 * i;
            *self.sum32.add(t * cols / 32 + i) = *self.sum16.add(j) + *self.sum16.add(j + 1);
        }
    }
}

/// Q8_0 of one block of 32: writes `q`, returns (`d` rounded to f16, `Σq`). (AVX-512
/// quantizes whole rows: [`avx512::q8_row`].)
fn quantize_q8_block(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
        sum += i32::from(*q);
    }
    (f16::from_f32(d).to_f32(), sum)
}

/// Q8_K of one block of 256: writes `q`, returns `d`.
fn quantize_q8k_block(tier: Tier, x: &[f32], q: &mut [i8]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if tier == Tier::Avx512 {
        // SAFETY: the tier is only chosen when the CPU has AVX-512; a block is 256 values.
        return unsafe { avx512::q8k_block(x, q) };
    }
    let _ = tier;
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        q.fill(0);
        return 0.0;
    }
    let iscale = -128.0 / max;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (iscale * v).round().min(127.0) as i8;
    }
    1.0 / iscale
}

/// Quantizes row-major f32 `weights` (rows of `cols`) into the file layout of `ty`, as
/// ggml's reference quantizers do. Supports the 32-value block types.
pub fn quantize_weights(ty: WeightType, cols: usize, weights: &[f32]) -> Result<Vec<u8>, String> {
    if !cols.is_multiple_of(32) || !weights.len().is_multiple_of(cols) {
        return Err(format!("cannot quantize rows of {cols} values"));
    }
    let mut out = Vec::with_capacity(weights.len() / 32 * ty.block_bytes());
    for x in weights.chunks_exact(32) {
        match ty {
            WeightType::Q8_0 => {
                let mut q = [0i8; 32];
                let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                for (q, &v) in q.iter_mut().zip(x) {
                    *q = (v * id).round() as i8;
                }
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                out.extend(q.iter().map(|&v| v as u8));
            }
            WeightType::Q4_0 | WeightType::Q5_0 => {
                let (mut amax, mut max) = (0f32, 0f32);
                for &v in x {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let five = ty == WeightType::Q5_0;
                let d = max / if five { -16.0 } else { -8.0 };
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let top = if five { 31 } else { 15 };
                let q: Vec<u8> = x
                    .iter()
                    .map(|&v| ((v * id + if five { 16.5 } else { 8.5 }) as i32).clamp(0, top) as u8)
                    .collect();
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                push_nibbles(&mut out, &q, five);
            }
            WeightType::Q4_1 | WeightType::Q5_1 => {
                let min = x.iter().fold(f32::INFINITY, |a, &v| a.min(v));
                let max = x.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
                let five = ty == WeightType::Q5_1;
                let top = if five { 31 } else { 15 };
                let d = (max - min) / top as f32;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let q: Vec<u8> = x
                    .iter()
                    .map(|&v| (((v - min) * id + 0.5) as i32).clamp(0, top) as u8)
                    .collect();
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_bits().to_le_bytes());
                push_nibbles(&mut out, &q, five);
            }
            _ => return Err(format!("quantizing to {} is not supported", ty.name())),
        }
    }
    Ok(out)
}

/// ggml's nibble layout for 32 values (plus the high-bit word for 5-bit types).
fn push_nibbles(out: &mut Vec<u8>, q: &[u8], five: bool) {
    if five {
        let mut qh = 0u32;
        for (j, &v) in q.iter().enumerate() {
            qh |= u32::from((v >> 4) & 1) << j;
        }
        out.extend_from_slice(&qh.to_le_bytes());
    }
    for j in 0..16 {
        out.push((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    }
}

/// AVX-512 versions of the block quantizers: the same IEEE operations as the scalar ones
/// (exact maxima, one multiply, rounding half away from zero), so the same bytes.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// `round` (half away from zero) of every lane, as `f32::round`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn round_away(v: __m512) -> __m512 {
        let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
        let frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
        let away = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
        // ±1.0 with v's sign, in integer operations: the float ones are AVX-512 DQ, which
        // this function's callers do not enable, so they would be calls, not instructions.
        let sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(i32::MIN));
        let one = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3f80_0000)));
        _mm512_mask_add_ps(t, away, t, one)
    }

    /// Rounds `v · scale` (at most `top`) to bytes at `q`; returns their sum.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(v: __m512, scale: f32, top: Option<f32>, q: *mut i8) -> __m512i {
        let mut r = round_away(_mm512_mul_ps(v, _mm512_set1_ps(scale)));
        if let Some(top) = top {
            r = _mm512_min_ps(r, _mm512_set1_ps(top));
        }
        let i = _mm512_cvttps_epi32(r);
        _mm_storeu_si128(q.cast(), _mm512_cvtepi32_epi8(i));
        i
    }

    /// A whole row as [`ActsWriter::token`] writes it for Q8, block by block in one
    /// function (no calls between blocks, so their dependency chains overlap): the bytes
    /// and `d` of [`super::quantize_q8_block`], `s = f16(f16(Σq) · f16(d))` as `half`
    /// multiplies, and the sums of every 16 and 32 bytes.
    ///
    /// # Safety
    /// `x.len()` is a multiple of 32 and the outputs hold its `len` bytes, `len / 32`
    /// values of `d`, `s` and `sum32`, and `len / 16` of `sum16`.
    #[target_feature(enable = "avx512f,f16c")]
    pub(super) unsafe fn q8_row(
        x: &[f32],
        qs: *mut i8,
        d: *mut f32,
        s: *mut f32,
        sum16: *mut i32,
        sum32: *mut i32,
    ) {
        #[inline]
        #[target_feature(enable = "avx512f,f16c")]
        unsafe fn f16_round(v: f32) -> f32 {
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(
                _mm_set_ss(v),
            )))
        }
        let blocks = x.len() / 32;
        let mut b = 0;
        while b + 16 <= blocks {
            q8_blocks16(
                x.as_ptr().add(32 * b),
                qs.add(32 * b),
                d.add(b),
                s.add(b),
                sum16.add(2 * b),
                sum32.add(b),
            );
            b += 16;
        }
        for b in b..blocks {
            let p = x.as_ptr().add(32 * b);
            let (lo, hi) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
            let db = amax / 127.0;
            let id = if db != 0.0 { 1.0 / db } else { 0.0 };
            let ilo = _mm512_reduce_add_epi32(store(lo, id, None, qs.add(32 * b)));
            let ihi = _mm512_reduce_add_epi32(store(hi, id, None, qs.add(32 * b + 16)));
            let d16 = f16_round(db);
            *d.add(b) = d16;
            *s.add(b) = f16_round(f16_round((ilo + ihi) as f32) * d16);
            *sum16.add(2 * b) = ilo;
            *sum16.add(2 * b + 1) = ihi;
            *sum32.add(b) = ilo + ihi;
        }
    }

    /// Sixteen blocks of [`q8_row`] at once: the same values, with each block's maximum
    /// and sums reduced across blocks (a transposing tree: 16 vectors of one block each
    /// to one vector of 16 blocks in four levels) instead of one horizontal reduction per
    /// block, and the scales computed for 16 blocks in vector arithmetic. A maximum of
    /// magnitudes and a sum of integers do not depend on their order, and each scale is
    /// the same IEEE operation as the scalar one, so the bytes and scales are the same.
    #[inline]
    #[target_feature(enable = "avx512f,f16c")]
    unsafe fn q8_blocks16(
        p: *const f32,
        qs: *mut i8,
        d: *mut f32,
        s: *mut f32,
        sum16: *mut i32,
        sum32: *mut i32,
    ) {
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn f16_round(v: __m512) -> __m512 {
            _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v))
        }
        let mut m = [_mm512_setzero_ps(); 16];
        for (b, mb) in m.iter_mut().enumerate() {
            let (lo, hi) = (
                _mm512_loadu_ps(p.add(32 * b)),
                _mm512_loadu_ps(p.add(32 * b + 16)),
            );
            *mb = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi));
        }
        let amax = tree_max(m);
        let db = _mm512_div_ps(amax, _mm512_set1_ps(127.0));
        // `if db != 0.0 { 1.0 / db } else { 0.0 }`, where a NaN is not 0 either.
        let nonzero = _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(db, _mm512_setzero_ps());
        let id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0), db);
        let mut ids = [0f32; 16];
        _mm512_storeu_ps(ids.as_mut_ptr(), id);
        let (mut lo, mut hi) = ([_mm512_setzero_si512(); 16], [_mm512_setzero_si512(); 16]);
        for b in 0..16 {
            let q = qs.add(32 * b);
            lo[b] = store(_mm512_loadu_ps(p.add(32 * b)), ids[b], None, q);
            hi[b] = store(_mm512_loadu_ps(p.add(32 * b + 16)), ids[b], None, q.add(16));
        }
        let (slo, shi) = (tree_add(lo), tree_add(hi));
        let d16 = f16_round(db);
        _mm512_storeu_ps(d, d16);
        let total = _mm512_add_epi32(slo, shi);
        _mm512_storeu_ps(
            s,
            f16_round(_mm512_mul_ps(f16_round(_mm512_cvtepi32_ps(total)), d16)),
        );
        _mm512_storeu_si512(sum32.cast(), total);
        // Each block's two sums of 16, in order.
        let (first, second) = (
            _mm512_loadu_si512(INTERLEAVE[0].as_ptr().cast()),
            _mm512_loadu_si512(INTERLEAVE[1].as_ptr().cast()),
        );
        _mm512_storeu_si512(sum16.cast(), _mm512_permutex2var_epi32(slo, first, shi));
        _mm512_storeu_si512(
            sum16.add(16).cast(),
            _mm512_permutex2var_epi32(slo, second, shi),
        );
    }

    /// Lanes `0..8` then `8..16` of two vectors, alternating (`a0 b0 a1 b1 ...`).
    static INTERLEAVE: [[i32; 16]; 2] = {
        let mut t = [[0i32; 16]; 2];
        let mut i = 0;
        while i < 16 {
            t[0][i] = (i / 2 + 16 * (i % 2)) as i32;
            t[1][i] = (8 + i / 2 + 16 * (i % 2)) as i32;
            i += 1;
        }
        t
    };

    /// The indices of one level of [`tree`]: the first (`second` false) or second half
    /// of every run of `run` lanes of `a`, then of `b` (as `permutex2var` numbers them:
    /// `b`'s lanes are `16..32`).
    const fn halves(run: usize, second: bool) -> [i32; 16] {
        let mut idx = [0i32; 16];
        let half = run / 2;
        let mut o = 0;
        let mut src = 0;
        while src <= 16 {
            let mut j = 0;
            while j < 16 / run {
                let mut l = 0;
                while l < half {
                    idx[o] = (src + j * run + l + if second { half } else { 0 }) as i32;
                    o += 1;
                    l += 1;
                }
                j += 1;
            }
            src += 16;
        }
        idx
    }

    static HALVES: [[[i32; 16]; 2]; 4] = [
        [halves(16, false), halves(16, true)],
        [halves(8, false), halves(8, true)],
        [halves(4, false), halves(4, true)],
        [halves(2, false), halves(2, true)],
    ];

    /// Reduces each of 16 vectors over its lanes with `$op` (associative and
    /// commutative), into lane `i` of one vector for vector `i`: each level pairs vectors
    /// and keeps, per run of lanes, `$op` of the run's two halves (taken with `$perm`), so
    /// runs halve while vectors do.
    macro_rules! tree {
        ($name:ident, $v:ty, $op:ident, $perm:ident) => {
            #[inline]
            #[target_feature(enable = "avx512f")]
            unsafe fn $name(mut v: [$v; 16]) -> $v {
                let mut n = 16;
                for level in HALVES.iter() {
                    let (first, second) = (
                        _mm512_loadu_si512(level[0].as_ptr().cast()),
                        _mm512_loadu_si512(level[1].as_ptr().cast()),
                    );
                    for k in 0..n / 2 {
                        let (a, b) = (v[2 * k], v[2 * k + 1]);
                        v[k] = $op($perm(a, first, b), $perm(a, second, b));
                    }
                    n /= 2;
                }
                v[0]
            }
        };
    }
    tree!(tree_max, __m512, _mm512_max_ps, _mm512_permutex2var_ps);
    tree!(
        tree_add,
        __m512i,
        _mm512_add_epi32,
        _mm512_permutex2var_epi32
    );

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn q8k_block(x: &[f32], q: &mut [i8]) -> f32 {
        assert!(x.len() == 256 && q.len() == 256);
        let p = x.as_ptr();
        let mut m = _mm512_setzero_ps();
        for i in (0..256).step_by(16) {
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(p.add(i))));
        }
        let amax = _mm512_reduce_max_ps(m);
        if amax == 0.0 {
            q.fill(0);
            return 0.0;
        }
        // The first value of that magnitude, as the scalar scan keeps it.
        let mut max = 0.0;
        for i in (0..256).step_by(16) {
            let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(
                _mm512_abs_ps(_mm512_loadu_ps(p.add(i))),
                _mm512_set1_ps(amax),
            );
            if hit != 0 {
                max = x[i + hit.trailing_zeros() as usize];
                break;
            }
        }
        let iscale = -128.0 / max;
        for i in (0..256).step_by(16) {
            store(
                _mm512_loadu_ps(p.add(i)),
                iscale,
                Some(127.0),
                q.as_mut_ptr().add(i),
            );
        }
        1.0 / iscale
    }
}
