//! Attention's two products in i16, for the same CPUs as the dense layers' (AVX2 without
//! AVX-512 VNNI/BF16): `Q·Kᵀ` with the keys as the weights (one scale per key, the
//! attention scale folded in) and each query row rounded with its own, then the softmax
//! rounded straight to i16 (`RoundedSoftmax`: no pass that divides by the sum) and
//! `P·V` with the values as the weights (one scale per value column over the sequence).
//! A head's two products are ~11% of a MiniLM pass in f32 (gemm: small shapes, `d` = 32,
//! and a repack of both operands per call); here they run on the dense layers' kernel.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{available, quantize_row, scale_of, transpose, PackedI16, Quantized, NR};
use crate::ml::embedder::cpu::kernels::avx2::RoundedSoftmax;

/// One head of attention for a block of query rows.
pub(in crate::ml::embedder::cpu) struct Head<'a> {
    /// Query row `i` (`d` values) at `q[i·ld..]`, for `rows` rows.
    pub q: &'a [f32],
    /// Key row `j` at `k[j·ld..]`, for the sequence's `len` tokens.
    pub k: &'a [f32],
    /// Value row `j` at `v[j·ld..]`.
    pub v: &'a [f32],
    pub ld: usize,
    pub rows: usize,
    pub len: usize,
    pub d: usize,
    /// The scores' scale, `1/√d`.
    pub scale: f32,
}

/// The operands of one head, reused across heads and calls.
#[derive(Default)]
struct Scratch {
    keys: PackedI16,
    values: PackedI16,
    rows: Quantized,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// `out = softmax(scale · Q·Kᵀ)·V` for one head: row `i` of the result at `out[i·ldo..]`
/// (`d` values); `scores` is `rows × len` scratch. Panics unless [`available`].
pub(in crate::ml::embedder::cpu) fn attend(
    head: Head<'_>,
    scores: &mut [f32],
    out: &mut [f32],
    ldo: usize,
) {
    assert!(available(), "int16 attention on a CPU without AVX2");
    let Head {
        q,
        k,
        v,
        ld,
        rows,
        len,
        d,
        scale,
    } = head;
    if rows == 0 || len == 0 || d == 0 {
        return;
    }
    let scores = &mut scores[..rows * len];
    SCRATCH.with(|cell| {
        let Scratch {
            keys,
            values,
            rows: quantized,
        } = &mut *cell.borrow_mut();
        // SAFETY: AVX2 and FMA were asserted above; every slice is bounds-checked.
        unsafe {
            keys.pack_columns(k, ld, d, len, scale);
            let qmax = keys.qmax;
            let n = quantized.fill(rows, keys.pairs, |i, o| {
                prefetch(q, (i + AHEAD) * ld, d);
                quantize_row(&q[i * ld..i * ld + d], o, qmax)
            });
            keys.kernel(
                &quantized.pairs[..n],
                &quantized.scales,
                rows,
                scores,
                len,
                false,
            );
            values.pack_rows(v, ld, len, d);
            let qmax = values.qmax;
            let softmax = RoundedSoftmax::new();
            let n = quantized.fill(rows, values.pairs, |i, o| {
                softmax.row(&scores[i * len..(i + 1) * len], o, qmax)
            });
            values.kernel(
                &quantized.pairs[..n],
                &quantized.scales,
                rows,
                out,
                ldo,
                false,
            );
        }
    });
}

/// How many rows ahead the packings prefetch: a head's rows are `3·hidden` floats apart
/// (4.5 KiB for MiniLM), a page or more, so the hardware's stride prefetchers (which
/// stay within a page) do not fetch them, and a sequence's `qkv` (800 KiB for 175
/// tokens) is past L2.
const AHEAD: usize = 8;

/// Prefetches `len` floats from `row` (cache lines of 16); addresses past `src` are only
/// hints, so the caller need not check them.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn prefetch(src: &[f32], at: usize, len: usize) {
    if at < src.len() {
        crate::ml::simd::prefetch(src.as_ptr().add(at).cast(), len * size_of::<f32>());
    }
}

/// Most inputs of a column [`PackedI16::pack_columns`] rounds on the stack.
const MAX_COLUMN_PAIRS: usize = 128;

impl PackedI16 {
    /// `[inp, out]` whose column `j` is row `j` of `src` (`inp` values at `src[j·ld..]`),
    /// the scales multiplied by `factor`: the same values as
    /// `fill(inp, out, factor, |k, j| src[j·ld + k])`, each column rounded by the
    /// activations' vector code.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pack_columns(
        &mut self,
        src: &[f32],
        ld: usize,
        inp: usize,
        out: usize,
        factor: f32,
    ) {
        if inp.div_ceil(2) > MAX_COLUMN_PAIRS {
            return self.fill(inp, out, factor, |k, j| src[j * ld + k]);
        }
        self.reset(inp, out);
        let (pairs, qmax) = (self.pairs, self.qmax);
        // Eight columns at a time: rounded into `group` (row-major, one column's pairs
        // per row), then transposed into the panel's layout.
        let mut group = [0i32; 8 * MAX_COLUMN_PAIRS];
        assert!(self.data.len() >= out.div_ceil(NR) * pairs * NR * 2);
        let data = self.data.as_mut_ptr().cast::<i32>();
        for j0 in (0..out).step_by(8) {
            let n = (out - j0).min(8);
            for (c, q) in group.chunks_exact_mut(pairs).take(n).enumerate() {
                let j = j0 + c;
                prefetch(src, (j + AHEAD) * ld, inp);
                self.scales[j] = quantize_row(&src[j * ld..j * ld + inp], q, qmax) * factor;
            }
            group[n * pairs..8 * pairs].fill(0);
            let (p, c0) = (j0 / NR, j0 % NR);
            // SAFETY: the eight columns c0..c0+8 of panel p (past `out`: its zero
            // padding) are inside `data` (asserted) for every pair.
            transpose(
                &group[..8 * pairs],
                8,
                pairs,
                data.add(p * pairs * NR + c0),
                NR,
            );
        }
    }

    /// `[inp, out]` from rows `src` (row `k` at `src[k·ld..]`): the same values as
    /// `fill(inp, out, 1.0, |k, c| src[k·ld + c])`, sixteen columns of two rows at a
    /// time when `out` is a multiple of 16.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pack_rows(&mut self, src: &[f32], ld: usize, inp: usize, out: usize) {
        if !out.is_multiple_of(NR) || inp == 0 {
            return self.fill(inp, out, 1.0, |k, c| src[k * ld + c]);
        }
        assert!(src.len() >= (inp - 1) * ld + out, "pack_rows: source");
        self.reset(inp, out);
        let (pairs, qmax) = (self.pairs, self.qmax);
        let sign = _mm256_set1_ps(-0.0);
        let s = src.as_ptr();
        // Each column's largest magnitude, kept in `scales` until the scales replace it.
        for g in (0..out).step_by(8) {
            let mut m = _mm256_setzero_ps();
            for k in 0..inp {
                if g == 0 {
                    prefetch(src, (k + AHEAD) * ld, out);
                }
                // SAFETY: row k's columns g..g+8 are inside `src` (asserted).
                m = _mm256_max_ps(
                    m,
                    _mm256_andnot_ps(sign, _mm256_loadu_ps(s.add(k * ld + g))),
                );
            }
            _mm256_storeu_ps(self.scales.as_mut_ptr().add(g), m);
        }
        let dst = self.data.as_mut_ptr();
        for p in 0..out / NR {
            let mut inv = [0f32; NR];
            for (c, inv) in inv.iter_mut().enumerate() {
                let (scale, i) = scale_of(self.scales[p * NR + c], qmax);
                self.scales[p * NR + c] = scale;
                *inv = i;
            }
            let inv = [
                _mm256_loadu_ps(inv.as_ptr()),
                _mm256_loadu_ps(inv.as_ptr().add(8)),
            ];
            // Sixteen columns of row k as i16 in packs' lane order: [c0-3 c8-11 | c4-7
            // c12-15], which unpacking by 16 bits turns into pairs in column order.
            let round = |k: usize| {
                let row = s.add(k * ld + p * NR);
                let a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(row), inv[0]));
                let b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(row.add(8)), inv[1]));
                _mm256_packs_epi32(a, b)
            };
            for kp in 0..pairs {
                let a = round(2 * kp);
                let b = if 2 * kp + 1 < inp {
                    round(2 * kp + 1)
                } else {
                    _mm256_setzero_si256()
                };
                // SAFETY: pair kp of panel p (NR columns, 2 values each) is inside `data`
                // (sized by `reset`).
                let at = dst.add((p * pairs + kp) * NR * 2);
                _mm256_storeu_si256(at.cast(), _mm256_unpacklo_epi16(a, b));
                _mm256_storeu_si256(at.add(NR).cast(), _mm256_unpackhi_epi16(a, b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ml::embedder::cpu::test_values;

    #[test]
    fn vector_packings_are_the_definition() {
        if !available() {
            return;
        }
        for (len, d) in [
            (1, 32),
            (5, 32),
            (17, 32),
            (175, 32),
            (6, 24),
            (33, 64),
            (7, 17),
        ] {
            let ld = 3 * d + 5;
            let src = test_values(len * ld, len as u64 + d as u64);
            let (mut fast, mut slow) = (PackedI16::default(), PackedI16::default());
            // SAFETY: `available()` held.
            unsafe { fast.pack_columns(&src, ld, d, len, 0.25) };
            slow.fill(d, len, 0.25, |k, j| src[j * ld + k]);
            assert_eq!(fast.data, slow.data, "keys {len}x{d}");
            assert_eq!(fast.scales, slow.scales, "keys {len}x{d}");
            // SAFETY: as above.
            unsafe { fast.pack_rows(&src, ld, len, d) };
            slow.fill(len, d, 1.0, |k, c| src[k * ld + c]);
            assert_eq!(fast.data, slow.data, "values {len}x{d}");
            assert_eq!(fast.scales, slow.scales, "values {len}x{d}");
        }
    }

    #[test]
    fn the_rounded_softmax_is_the_definition() {
        if !available() {
            return;
        }
        for n in [1usize, 3, 8, 15, 16, 17, 24, 31, 175] {
            let row: Vec<f32> = test_values(n, n as u64).iter().map(|x| 6.0 * x).collect();
            let qmax = 3000.0;
            let mut out = vec![-1i32; n.div_ceil(2)];
            // SAFETY: `available()` held.
            let scale = unsafe { RoundedSoftmax::new().row(&row, &mut out, qmax) };
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f64> = row.iter().map(|&x| f64::from(x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            let got: Vec<i16> = out
                .iter()
                .flat_map(|p| [*p as i16, (*p >> 16) as i16])
                .collect();
            for (j, e) in e.iter().enumerate() {
                let want = (e * f64::from(qmax)).round();
                assert!(
                    (f64::from(got[j]) - want).abs() <= 1.0,
                    "n {n} [{j}]: {} vs {want}",
                    got[j]
                );
            }
            if n % 2 == 1 {
                assert_eq!(got[n], 0, "n {n}: the odd value's partner");
            }
            let want = 1.0 / (f64::from(qmax) * sum);
            assert!(
                (f64::from(scale) / want - 1.0).abs() < 1e-5,
                "n {n}: scale {scale} vs {want}"
            );
        }
    }

    /// Attention in f64 from the same f32 operands.
    fn reference(h: &Head<'_>) -> Vec<f64> {
        let mut out = vec![0f64; h.rows * h.d];
        for i in 0..h.rows {
            let s: Vec<f64> = (0..h.len)
                .map(|j| {
                    (0..h.d)
                        .map(|c| f64::from(h.q[i * h.ld + c]) * f64::from(h.k[j * h.ld + c]))
                        .sum::<f64>()
                        * f64::from(h.scale)
                })
                .collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..h.d {
                out[i * h.d + c] = (0..h.len)
                    .map(|j| e[j] / sum * f64::from(h.v[j * h.ld + c]))
                    .sum::<f64>();
            }
        }
        out
    }

    #[test]
    fn heads_match_attention_in_f64() {
        if !available() {
            return;
        }
        for (rows, len, d) in [
            (1, 1, 32),
            (6, 7, 32),
            (13, 33, 32),
            (175, 175, 32),
            (5, 9, 24),
            (8, 40, 64),
        ] {
            let ld = 3 * d;
            // Scores of a few units, as in a trained model, so the softmax is not flat.
            let q: Vec<f32> = test_values(rows * ld, 1 + len as u64)
                .iter()
                .map(|x| 3.0 * x)
                .collect();
            let kv = test_values(len * ld, 2 + len as u64);
            let (k, v) = (&kv[..], &kv[d..]);
            let head = Head {
                q: &q,
                k,
                v,
                ld,
                rows,
                len,
                d,
                scale: 1.0 / (d as f32).sqrt(),
            };
            let want = reference(&head);
            let ldo = d + 3;
            let mut out = vec![f32::NAN; rows * ldo];
            let mut scores = vec![0f32; rows * len];
            attend(head, &mut scores, &mut out, ldo);
            let mut worst = 0f64;
            for i in 0..rows {
                for c in 0..d {
                    let err = (f64::from(out[i * ldo + c]) - want[i * d + c]).abs();
                    worst = worst.max(err);
                }
            }
            // Values are within [-1, 1): an error of a few thousandths of that at most.
            assert!(
                worst < 2e-3,
                "rows {rows}, len {len}, d {d}: worst error {worst}"
            );
        }
    }
}
