//! 16-bit integer products for the dense layers, on x86-64 CPUs with AVX2 but without
//! AVX-512 VNNI (Zen 3, Intel before Ice Lake). `vpmaddwd` multiplies sixteen i16 pairs
//! and adds each pair into an i32 lane: 16 products per instruction, twice f32's FMA (8),
//! at the same rate on Zen 3 (two per cycle); with the `vpaddd` each needs, measured on
//! Zen 3 it does 1.65x the products per second of FMA.
//!
//! AVX2's 8-bit product (`vpmaddubsw`) gives 32 products per instruction, but its 16-bit
//! pair sums saturate for u8 × i8 (7-bit weights or activations would avoid that, and
//! fail the accuracy bound), and it needs a `vpmaddwd` after it anyway to widen them; i16
//! keeps over a thousand levels on both sides instead:
//!
//! - weights: symmetric, one f32 scale per output column over all its inputs, rounded
//!   once at load;
//! - activations: symmetric, one f32 scale per row over all its inputs, rounded per
//!   product (a row's rounding does not depend on the batch).
//!
//! Both take at most `q = ⌊√((2³¹ − 1) / inputs)⌋` levels on each side of zero (2,364 for
//! MiniLM's 384 inputs, 1,182 for its 1,536), so a row's whole sum `Σ qa·qw` fits an
//! i32 exactly whatever the values: no block ever has to be turned to f32 before the end,
//! and `Σ x·w ≈ sa·sw·Σ qa·qw`. With over a thousand levels, one scale per row or column
//! holds MiniLM within the accuracy bound although a few outlier inputs set the scales
//! (8 bits per row and column do not: docs/embedder.md).
//!
//! The product is a plain integer GEMM: panels of 16 columns (two vectors of 8 i32
//! lanes) × tiles of 6 rows, 12 accumulators, the weights' pairs packed
//! `[panel][pair][column][2]` so a step reads two vectors, and each row's pair is
//! broadcast as one i32. Products are sliced along the inputs ([`KC`] pairs), so a
//! panel's slice stays in L1 while every row tile passes it. The tile's loop is written in
//! assembly (as the VNNI and BF16 kernels' are).

pub(super) mod attention;

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;

/// Columns per panel: two vectors of 8 lanes.
const NR: usize = 16;
/// Activation rows per tile.
const MR: usize = 6;
/// Input pairs per slice of a product: a panel's slice is 12 KiB, in L1 (32 KiB on Zen
/// 3) with the row tiles' 4.5 KiB; MiniLM's 384-input products are one slice.
const KC: usize = 192;

/// A weight matrix `[inp, out]` quantized to i16 and packed for
/// [`product`](Self::product).
#[derive(Default)]
pub(super) struct PackedI16 {
    /// `panels × pairs × NR × 2`: for panel `p`, pair `kp` and column `c`, inputs
    /// `2·kp` and `2·kp + 1` of column `16·p + c`; zero past the edges.
    data: Vec<i16>,
    /// `panels × NR`: each column's scale (zero past the last column).
    scales: Vec<f32>,
    inp: usize,
    out: usize,
    pairs: usize,
    /// Largest magnitude of a quantized value, on either side.
    qmax: f32,
}

/// Activations quantized for one product, reused across calls.
#[derive(Default)]
struct Quantized {
    /// `tiles × pairs × MR` (and `8 − MR` more, see [`interleave`]): row `r` of tile
    /// `t`'s inputs `2·kp` and `2·kp + 1` as one i32 at `(t·pairs + kp)·MR + r` (rows
    /// past the last are zero).
    pairs: Vec<i32>,
    /// `MR × pairs`: one tile's rows, row-major, before they are interleaved.
    rows: Vec<i32>,
    /// `tiles × MR`: each row's scale.
    scales: Vec<f32>,
}

impl Quantized {
    /// Rounds `rows` rows of `kp` pairs with `round(i, out)` (which writes row `i`'s
    /// pairs and returns its scale) into the kernel's tile layout; returns the length of
    /// that layout in `pairs`.
    #[target_feature(enable = "avx2")]
    unsafe fn fill(
        &mut self,
        rows: usize,
        kp: usize,
        mut round: impl FnMut(usize, &mut [i32]) -> f32,
    ) -> usize {
        let Quantized {
            pairs,
            rows: tile,
            scales,
        } = self;
        let tiles = rows.div_ceil(MR);
        let len = tiles * kp * MR;
        if pairs.len() < len + (8 - MR) {
            pairs.resize(len + (8 - MR), 0);
        }
        tile.resize(MR * kp, 0);
        scales.clear();
        scales.resize(tiles * MR, 0.0);
        for t in 0..tiles {
            let m = (rows - t * MR).min(MR);
            for (r, q) in tile.chunks_exact_mut(kp).take(m).enumerate() {
                scales[t * MR + r] = round(t * MR + r, q);
            }
            tile[m * kp..].fill(0);
            interleave(
                tile,
                kp,
                &mut pairs[t * kp * MR..(t + 1) * kp * MR + 8 - MR],
            );
        }
        len
    }
}

thread_local! {
    static QUANTIZED: RefCell<Quantized> = RefCell::new(Quantized::default());
}

/// Whether this CPU runs these products.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The largest quantized magnitude for products over `inputs` inputs: both sides at most
/// this, `inputs` products of two of them never leave an i32.
fn qmax_for(inputs: usize) -> f32 {
    let q = ((i32::MAX as f64) / inputs.max(1) as f64).sqrt().floor();
    q.min(f64::from(i16::MAX)) as f32
}

/// The scale of values whose largest magnitude is `max`, and its inverse (both zero
/// when there is nothing to scale).
fn scale_of(max: f32, qmax: f32) -> (f32, f32) {
    // Two independent divisions (not `1 / scale`): a row of attention's 32 values waits
    // on them.
    let (scale, inv) = (max / qmax, qmax / max);
    if scale.is_finite() && scale > 0.0 && inv.is_finite() {
        (scale, inv)
    } else {
        (0.0, 0.0)
    }
}

#[cfg(test)]
/// The scalar definition of a row's rounding (the vector code matches it bit for bit):
/// `q = round(x · (1 / scale))`, ties to even, with `scale = max|x| / qmax`.
fn quantize_scalar(x: &[f32], qmax: f32) -> (Vec<i16>, f32) {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let (scale, inv) = scale_of(max, qmax);
    let q = x
        .iter()
        .map(|&v| (v * inv).round_ties_even().clamp(-qmax, qmax) as i16)
        .collect();
    (q, scale)
}

impl PackedI16 {
    /// Quantizes and packs `w` (`[inp, out]`, row-major). `None` unless [`available`].
    pub(super) fn pack(w: &[f32], inp: usize, out: usize) -> Option<Self> {
        assert_eq!(w.len(), inp * out, "weight shape");
        if !available() || inp == 0 || out == 0 {
            return None;
        }
        let mut packed = Self::default();
        packed.fill(inp, out, 1.0, |k, col| w[k * out + col]);
        Some(packed)
    }

    /// Sizes `self` for `[inp, out]` and zeroes its values.
    fn reset(&mut self, inp: usize, out: usize) {
        self.inp = inp;
        self.out = out;
        self.pairs = inp.div_ceil(2);
        self.qmax = qmax_for(2 * self.pairs);
        let panels = out.div_ceil(NR);
        self.data.clear();
        self.data.resize(panels * self.pairs * NR * 2, 0);
        self.scales.clear();
        self.scales.resize(panels * NR, 0.0);
    }

    /// The definition of the packing: `[inp, out]` values `w(k, col)`, each column
    /// rounded with its own scale (then multiplied by `factor`). Scalar; the vector
    /// packings of attention's operands are tested against it.
    fn fill(&mut self, inp: usize, out: usize, factor: f32, w: impl Fn(usize, usize) -> f32) {
        self.reset(inp, out);
        let (pairs, qmax) = (self.pairs, self.qmax);
        for col in 0..out {
            let (p, c) = (col / NR, col % NR);
            let max = (0..inp).map(|k| w(k, col).abs()).fold(0.0f32, f32::max);
            let (scale, inv) = scale_of(max, qmax);
            self.scales[col] = scale * factor;
            for k in 0..inp {
                let q = (w(k, col) * inv).round_ties_even().clamp(-qmax, qmax);
                self.data[((p * pairs + k / 2) * NR + c) * 2 + k % 2] = q as i16;
            }
        }
    }

    /// `y = x · W` (`y += x · W` when `accumulate`) for rows `x` (`inp` wide) into `y`
    /// (`out` wide).
    pub(super) fn product(&self, x: &[f32], y: &mut [f32], accumulate: bool) {
        let rows = super::product_rows(x, y, self.inp, self.out);
        if rows == 0 {
            return;
        }
        QUANTIZED.with(|cell| {
            let mut q = cell.borrow_mut();
            let (inp, qmax) = (self.inp, self.qmax);
            // SAFETY: a `PackedI16` exists only where `available()` held (AVX2 and FMA).
            unsafe {
                let len = q.fill(rows, self.pairs, |i, out| {
                    quantize_row(&x[i * inp..(i + 1) * inp], out, qmax)
                });
                self.kernel(&q.pairs[..len], &q.scales, rows, y, self.out, accumulate);
            }
        });
    }

    /// `y = xq · W` (or `+=`) for the rounded rows `pairs` (the tile layout of
    /// [`Quantized`]) with their scales, row `i` of the result at `y[i·ldy..]`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn kernel(
        &self,
        pairs: &[i32],
        ascales: &[f32],
        rows: usize,
        y: &mut [f32],
        ldy: usize,
        accumulate: bool,
    ) {
        let panels = self.out.div_ceil(NR);
        let kp = self.pairs;
        let mut sums = [0i32; MR * NR];
        // Slices of at most KC pairs: a panel's slice stays in L1 while every row tile
        // passes it; each slice's sums are added to what the slices before it gave.
        let mut k0 = 0;
        while k0 < kp {
            let kc = (kp - k0).min(KC);
            let add = accumulate || k0 > 0;
            for p in 0..panels {
                let cols = (self.out - p * NR).min(NR);
                let b = &self.data[(p * kp + k0) * NR * 2..(p * kp + k0 + kc) * NR * 2];
                let w = [
                    _mm256_loadu_ps(self.scales.as_ptr().add(p * NR)),
                    _mm256_loadu_ps(self.scales.as_ptr().add(p * NR + 8)),
                ];
                for t in 0..rows.div_ceil(MR) {
                    let m = (rows - t * MR).min(MR);
                    let a = &pairs[(t * kp + k0) * MR..(t * kp + k0 + kc) * MR];
                    // A short last tile (a search query's few tokens) skips its empty rows.
                    match m {
                        1 => few_sums::<1>(a, b, kc, &mut sums),
                        2 => few_sums::<2>(a, b, kc, &mut sums),
                        3 => few_sums::<3>(a, b, kc, &mut sums),
                        _ => tile_sums(a, b, kc, &mut sums),
                    }
                    for r in 0..m {
                        let s = _mm256_set1_ps(ascales[t * MR + r]);
                        let v = [0, 1].map(|j| {
                            let acc = _mm256_loadu_si256(sums.as_ptr().add(r * NR + 8 * j).cast());
                            _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(w[j], s))
                        });
                        let row = &mut y[(t * MR + r) * ldy + p * NR..][..cols];
                        if cols == NR {
                            for (j, v) in v.iter().enumerate() {
                                let d = row.as_mut_ptr().add(8 * j);
                                let v = if add {
                                    _mm256_add_ps(_mm256_loadu_ps(d), *v)
                                } else {
                                    *v
                                };
                                _mm256_storeu_ps(d, v);
                            }
                        } else {
                            let mut lanes = [0f32; NR];
                            _mm256_storeu_ps(lanes.as_mut_ptr(), v[0]);
                            _mm256_storeu_ps(lanes.as_mut_ptr().add(8), v[1]);
                            for (d, l) in row.iter_mut().zip(lanes) {
                                *d = if add { *d + l } else { l };
                            }
                        }
                    }
                }
            }
            k0 += kc;
        }
    }
}

/// Rounds one row into `out` (its pairs as i32) with at most `qmax` levels each side;
/// returns its scale.
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_row(x: &[f32], out: &mut [i32], qmax: f32) -> f32 {
    let n = x.len();
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_setzero_ps();
    let mut k = 0;
    while k + 8 <= n {
        m = _mm256_max_ps(
            m,
            _mm256_andnot_ps(sign, _mm256_loadu_ps(x.as_ptr().add(k))),
        );
        k += 8;
    }
    let h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    let mut max = _mm_cvtss_f32(_mm_max_ss(h, _mm_shuffle_ps::<1>(h, h)));
    for &v in &x[k..] {
        max = max.max(v.abs());
    }
    let (scale, inv) = scale_of(max, qmax);
    let vinv = _mm256_set1_ps(inv);
    let dst = out.as_mut_ptr().cast::<i16>();
    let mut k = 0;
    while k + 16 <= n {
        // Round to nearest even (the default rounding mode), as `quantize_scalar`;
        // |x · inv| <= qmax, so the packing never saturates.
        let a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(k)), vinv));
        let b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(k + 8)), vinv));
        // packs interleaves 128-bit lanes: [a0-3 b0-3 a4-7 b4-7] -> [a0-7 b0-7].
        let v = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(a, b));
        _mm256_storeu_si256(dst.add(k).cast(), v);
        k += 16;
    }
    for (j, &v) in x.iter().enumerate().skip(k) {
        *dst.add(j) = (v * inv).round_ties_even().clamp(-qmax, qmax) as i16;
    }
    if n % 2 == 1 {
        *dst.add(n) = 0;
    }
    scale
}

/// A tile's `MR` rows of `kp` pairs each (`src`, row-major) into the kernel's layout
/// (`dst`: pair by pair, the rows' values of a pair side by side). [`transpose`] stores
/// each pair's column 8 lanes wide, its last two lanes overwritten by the next pair's, so
/// `dst` holds `8 − MR` more values than the tile (the next tile's first, or spare room
/// at the end).
#[target_feature(enable = "avx2")]
unsafe fn interleave(src: &[i32], kp: usize, dst: &mut [i32]) {
    assert!(dst.len() >= kp * MR + 8 - MR, "interleave: destination");
    // SAFETY: the last store ends at (kp − 1)·MR + 8, inside `dst` (asserted).
    transpose(src, MR, kp, dst.as_mut_ptr(), MR);
}

/// `rows` (at most 8) rows of `pairs` i32 (`src`, row-major) into columns: pair `k` of
/// row `r` to `dst[k·stride + r]`. Eight pairs at a time as an 8 × 8 transpose of 32-bit
/// lanes (rows past `rows` are don't-cares): each column is stored 8 lanes wide, in the
/// order of `k`, so with fewer than 8 rows its last lanes are junk that the next column
/// overwrites (`stride == rows`) or that land in the caller's padding.
///
/// # Safety
/// AVX2; `dst` must be writable for `(pairs − 1)·stride + 8` values.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn transpose(
    src: &[i32],
    rows: usize,
    pairs: usize,
    dst: *mut i32,
    stride: usize,
) {
    assert!(
        (1..=8).contains(&rows) && src.len() >= rows * pairs,
        "transpose: source"
    );
    let s = src.as_ptr();
    let mut k = 0;
    while k + 8 <= pairs {
        // SAFETY: pairs k..k+8 of the `rows` rows are inside `src` (rows past them repeat
        // the first); the caller vouches for `dst`.
        let r: [__m256i; 8] = std::array::from_fn(|i| {
            _mm256_loadu_si256(s.add(if i < rows { i } else { 0 } * pairs + k).cast())
        });
        // Pairs of rows interleaved by 32 bits, then by 64: u[j] holds pairs j and j + 4
        // (lower and upper half) of rows 0-3, u[4 + j] the same of rows 4-7.
        let t: [__m256i; 8] = std::array::from_fn(|i| {
            let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi32(a, b)
            } else {
                _mm256_unpackhi_epi32(a, b)
            }
        });
        let u: [__m256i; 8] = std::array::from_fn(|i| {
            let base = if i < 4 { 0 } else { 4 };
            let (a, b) = (t[base + (i % 4) / 2], t[base + (i % 4) / 2 + 2]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi64(a, b)
            } else {
                _mm256_unpackhi_epi64(a, b)
            }
        });
        for j in 0..4 {
            let lo = _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]);
            _mm256_storeu_si256(dst.add((k + j) * stride).cast(), lo);
        }
        for j in 0..4 {
            let hi = _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]);
            _mm256_storeu_si256(dst.add((k + 4 + j) * stride).cast(), hi);
        }
        k += 8;
    }
    for k in k..pairs {
        for r in 0..rows {
            *dst.add(k * stride + r) = *s.add(r * pairs + k);
        }
    }
}

/// [`tile_sums`] for the first `M` rows of a tile only (the others are left as they
/// are in `sums`).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn few_sums<const M: usize>(a: &[i32], b: &[i16], kp: usize, sums: &mut [i32; MR * NR]) {
    assert!(
        M <= 3 && a.len() >= kp * MR && b.len() >= kp * NR * 2,
        "tile: operands"
    );
    let mut acc = [[_mm256_setzero_si256(); 2]; M];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for k in 0..kp {
        // SAFETY: k < kp, and the assert bounds `a` and `b` by kp steps.
        let b0 = _mm256_loadu_si256(bp.add(k * NR * 2).cast());
        let b1 = _mm256_loadu_si256(bp.add(k * NR * 2 + NR).cast());
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = _mm256_set1_epi32(*ap.add(k * MR + r));
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(x, b0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(x, b1));
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        _mm256_storeu_si256(sums.as_mut_ptr().add(r * NR).cast(), acc[0]);
        _mm256_storeu_si256(sums.as_mut_ptr().add(r * NR + 8).cast(), acc[1]);
    }
}

/// The integer sums of one tile: `MR` rows of pairs `a` (`kp` steps of `MR` pairs, row
/// by row within a step) times a panel `b` (`kp` steps of `NR` columns' pairs) into
/// `sums` (`MR × NR`, row-major). A step is two loads of the panel, and per row a
/// broadcast of its pair and two `vpmaddwd` + `vpaddd` into the row's two accumulators;
/// written in assembly so the 12 accumulators, 2 weight vectors and the broadcast stay
/// in the 16 registers (compiled from intrinsics, the loop spilled accumulators).
#[target_feature(enable = "avx2")]
unsafe fn tile_sums(a: &[i32], b: &[i16], kp: usize, sums: &mut [i32; MR * NR]) {
    assert!(kp > 0, "tile: no inputs");
    assert!(a.len() >= kp * MR, "tile: activations");
    assert!(b.len() >= kp * NR * 2, "tile: weights");
    // SAFETY: the asserts bound every load (kp steps of 24 and 64 bytes) and `sums`
    // holds the 12 vectors stored; ymm0-15 are declared clobbered; no stack use.
    asm!(
        "vpxor ymm0, ymm0, ymm0",
        "vpxor ymm1, ymm1, ymm1",
        "vpxor ymm2, ymm2, ymm2",
        "vpxor ymm3, ymm3, ymm3",
        "vpxor ymm4, ymm4, ymm4",
        "vpxor ymm5, ymm5, ymm5",
        "vpxor ymm6, ymm6, ymm6",
        "vpxor ymm7, ymm7, ymm7",
        "vpxor ymm8, ymm8, ymm8",
        "vpxor ymm9, ymm9, ymm9",
        "vpxor ymm10, ymm10, ymm10",
        "vpxor ymm11, ymm11, ymm11",
        "2:",
        "vmovdqu ymm12, [{b}]",
        "vmovdqu ymm13, [{b} + 32]",
        "vpbroadcastd ymm14, [{a}]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm0, ymm0, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm1, ymm1, ymm14",
        "vpbroadcastd ymm14, [{a} + 4]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm2, ymm2, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm3, ymm3, ymm14",
        "vpbroadcastd ymm14, [{a} + 8]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm4, ymm4, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm5, ymm5, ymm14",
        "vpbroadcastd ymm14, [{a} + 12]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm6, ymm6, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm7, ymm7, ymm14",
        "vpbroadcastd ymm14, [{a} + 16]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm8, ymm8, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm9, ymm9, ymm14",
        "vpbroadcastd ymm14, [{a} + 20]",
        "vpmaddwd ymm15, ymm14, ymm12",
        "vpaddd ymm10, ymm10, ymm15",
        "vpmaddwd ymm14, ymm14, ymm13",
        "vpaddd ymm11, ymm11, ymm14",
        "add {a}, 24",
        "add {b}, 64",
        "dec {k}",
        "jnz 2b",
        "vmovdqu [{s}], ymm0",
        "vmovdqu [{s} + 32], ymm1",
        "vmovdqu [{s} + 64], ymm2",
        "vmovdqu [{s} + 96], ymm3",
        "vmovdqu [{s} + 128], ymm4",
        "vmovdqu [{s} + 160], ymm5",
        "vmovdqu [{s} + 192], ymm6",
        "vmovdqu [{s} + 224], ymm7",
        "vmovdqu [{s} + 256], ymm8",
        "vmovdqu [{s} + 288], ymm9",
        "vmovdqu [{s} + 320], ymm10",
        "vmovdqu [{s} + 352], ymm11",
        a = inout(reg) a.as_ptr() => _,
        b = inout(reg) b.as_ptr() => _,
        k = inout(reg) kp => _,
        s = in(reg) sums.as_mut_ptr(),
        out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
        out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
        out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
        out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
        options(nostack),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product of the quantized values, in f64: what the kernel must give up to the
    /// f32 rounding of its last multiplications.
    fn quantized_reference(x: &[f32], w: &PackedI16, rows: usize) -> Vec<f64> {
        let (inp, out) = (w.inp, w.out);
        let mut y = vec![0f64; rows * out];
        for r in 0..rows {
            let (q, sa) = quantize_scalar(&x[r * inp..(r + 1) * inp], w.qmax);
            for c in 0..out {
                let (p, cc) = (c / NR, c % NR);
                let mut sum = 0i64;
                for (k, &qa) in q.iter().enumerate() {
                    let qw = w.data[((p * w.pairs + k / 2) * NR + cc) * 2 + k % 2];
                    sum += i64::from(qa) * i64::from(qw);
                }
                y[r * out + c] = sum as f64 * f64::from(sa) * f64::from(w.scales[c]);
            }
        }
        y
    }

    fn check(rows: usize, inp: usize, out: usize, accumulate: bool) {
        if !available() {
            return;
        }
        let x = super::super::test_values(rows * inp, 7 + rows as u64);
        let w = super::super::test_values(inp * out, 11 + out as u64);
        let packed = PackedI16::pack(&w, inp, out).expect("AVX2");
        let start = super::super::test_values(rows * out, 13);
        let mut y = if accumulate {
            start.clone()
        } else {
            vec![f32::NAN; rows * out]
        };
        packed.product(&x, &mut y, accumulate);
        let want = quantized_reference(&x, &packed, rows);
        for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
            let want = want + if accumulate { f64::from(start[i]) } else { 0.0 };
            assert!(
                (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "rows {rows}, {inp} -> {out}, accumulate {accumulate}: [{i}] {got} vs {want}"
            );
        }
        // And within 0.1% of the f32 product's scale.
        for r in 0..rows {
            for c in 0..out {
                let exact: f32 = (0..inp).map(|k| x[r * inp + k] * w[k * out + c]).sum();
                let got = y[r * out + c] - if accumulate { start[r * out + c] } else { 0.0 };
                assert!(
                    (got - exact).abs() <= 2e-3 * (inp as f32).sqrt(),
                    "[{r},{c}] {got} vs f32 {exact}"
                );
            }
        }
    }

    #[test]
    fn products_equal_the_quantized_definition() {
        // Whole tiles and panels, every short last tile (1-5 rows), column tails, odd
        // widths.
        let shapes = [
            (6, 64, 16),
            (12, 384, 32),
            (13, 48, 40),
            (1, 7, 3),
            (5, 33, 17),
            (8, 20, 16),
            (9, 30, 16),
            (4, 16, 48),
        ];
        for (rows, inp, out) in shapes {
            check(rows, inp, out, false);
            check(rows, inp, out, true);
        }
    }

    #[test]
    fn the_vector_rounding_is_the_scalar_definition() {
        if !available() {
            return;
        }
        for n in [1usize, 15, 16, 17, 384, 1536] {
            let mut x = super::super::test_values(n, n as u64);
            // Ties, an outlier and a zero.
            x[0] = 0.0;
            if n > 2 {
                x[1] = 40.0;
                x[2] = -0.5 * 40.0 / qmax_for(n.next_multiple_of(2));
            }
            let w = PackedI16::pack(&vec![1.0; n], n, 1).expect("AVX2");
            let (want, scale) = quantize_scalar(&x, w.qmax);
            let mut got = vec![0i32; n.div_ceil(2)];
            // SAFETY: `available()` held.
            let s = unsafe { quantize_row(&x, &mut got, w.qmax) };
            assert_eq!(s, scale);
            let got: Vec<i16> = got
                .iter()
                .flat_map(|p| [*p as i16, (*p >> 16) as i16])
                .take(n)
                .collect();
            assert_eq!(got, want, "n = {n}");
        }
    }

    #[test]
    fn sums_cannot_overflow() {
        // Every value at the largest magnitude, of one sign: the worst case stays in i32.
        for inp in [2usize, 384, 1536, 4096] {
            let q = f64::from(qmax_for(inp));
            assert!(q * q * inp as f64 <= f64::from(i32::MAX), "{inp}");
        }
        if available() {
            let (rows, inp, out) = (6, 1536, 16);
            let x = vec![-3.0f32; rows * inp];
            let w = vec![-2.0f32; inp * out];
            let packed = PackedI16::pack(&w, inp, out).expect("AVX2");
            let mut y = vec![0f32; rows * out];
            packed.product(&x, &mut y, false);
            for v in y {
                assert!(
                    (v - 6.0 * inp as f32).abs() <= 1e-3 * 6.0 * inp as f32,
                    "{v}"
                );
            }
        }
    }
}
