//! bfloat16 products for the dense layers, on x86-64 CPUs with AVX-512 BF16
//! (`vdpbf16ps`, two products per 32-bit lane summed in f32). Weights are rounded to
//! bf16 once, at load, and packed in panels of 32 columns whose rows come in pairs (the
//! pairs the instruction multiplies); activations are rounded to bf16 block by block.
//! Accumulation is in f32 throughout, so the error is the two roundings' alone.
//!
//! The product is blocked as BLIS does: a slice of `KC` rows of one panel stays in L1
//! while tiles of 12 activation rows (packed pair by pair, so one tile's pairs are
//! contiguous) stream past it, each tile's 12 × 32 sums held in 24 vector registers.
//! The tile's inner loop is written in assembly: its speed then does not depend on the
//! optimisation level (unoptimised test builds run the real models too).

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;

/// Columns per panel: two vectors of 16 lanes.
const NR: usize = 32;
/// Activation rows per tile.
const MR: usize = 12;
/// Pairs of the inner dimension per block: 256 values, a 16 KiB slice of a panel.
const KC_PAIRS: usize = 128;

/// A weight matrix `[inp, out]`, rounded to bf16 and packed for [`product`](Self::product).
pub(super) struct PackedBf16 {
    /// `panels × pairs × NR × 2` values: for panel `p`, pair `kp` and column `c`, the
    /// rows `2·kp` and `2·kp + 1` of column `p·NR + c` side by side; zero past the edges.
    data: Vec<u16>,
    inp: usize,
    out: usize,
    pairs: usize,
}

thread_local! {
    /// Activations rounded to bf16 and packed in tiles, reused across calls.
    static ROUNDED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    /// One row of activations rounded to bf16 pairs.
    static ROW: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Rounds to the nearest bf16, ties to even (as `vcvtne2ps2bf16`).
pub(super) fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// Whether this CPU runs these products.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")
}

impl PackedBf16 {
    /// Rounds and packs `w` (`[inp, out]`, row-major). `None` unless [`available`].
    pub(super) fn pack(w: &[f32], inp: usize, out: usize) -> Option<Self> {
        assert_eq!(w.len(), inp * out, "weight shape");
        if !available() {
            return None;
        }
        let pairs = inp.div_ceil(2);
        let panels = out.div_ceil(NR);
        let mut data = vec![0u16; panels * pairs * NR * 2];
        for p in 0..panels {
            for kp in 0..pairs {
                for c in 0..NR.min(out - p * NR) {
                    for h in 0..2 {
                        let k = 2 * kp + h;
                        if k < inp {
                            data[((p * pairs + kp) * NR + c) * 2 + h] =
                                to_bf16(w[k * out + p * NR + c]);
                        }
                    }
                }
            }
        }
        Some(Self {
            data,
            inp,
            out,
            pairs,
        })
    }

    /// `y = x · W` (`y += x · W` when `accumulate`) for rows `x` (`inp` wide) into `y`
    /// (`out` wide).
    pub(super) fn product(&self, x: &[f32], y: &mut [f32], accumulate: bool) {
        let rows = super::product_rows(x, y, self.inp, self.out);
        let tiles = rows.div_ceil(MR);
        ROUNDED.with(|cell| {
            let mut buf = cell.borrow_mut();
            let len = tiles * self.pairs * MR;
            if buf.len() < len {
                buf.resize(len, 0);
            }
            let xb = &mut buf[..len];
            // SAFETY: a `PackedBf16` exists only where `available()` held: the CPU has
            // AVX-512F and AVX-512 BF16. Shapes were checked above and in `pack_rows`.
            unsafe {
                self.pack_rows(x, rows, xb);
                self.kernel(xb, rows, y, accumulate);
            }
        });
    }

    /// Rounds the rows of `x` to bf16 pairs and packs them in tiles of `MR` rows:
    /// `xb[(tile · pairs + kp) · MR + r]` is row `tile · MR + r`'s pair `kp` (zero past
    /// the last row and column).
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn pack_rows(&self, x: &[f32], rows: usize, xb: &mut [u32]) {
        let pairs = self.pairs;
        assert!(xb.len() >= rows.div_ceil(MR) * pairs * MR);
        ROW.with(|cell| {
            let mut row = cell.borrow_mut();
            row.resize(pairs, 0);
            for t in 0..rows.div_ceil(MR) {
                let tile = &mut xb[t * pairs * MR..(t + 1) * pairs * MR];
                for r in 0..MR {
                    let i = t * MR + r;
                    if i < rows {
                        round_row(&x[i * self.inp..(i + 1) * self.inp], &mut row);
                    } else {
                        row.fill(0);
                    }
                    for (kp, &v) in row.iter().enumerate() {
                        tile[kp * MR + r] = v;
                    }
                }
            }
        });
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn kernel(&self, xb: &[u32], rows: usize, y: &mut [f32], accumulate: bool) {
        let panels = self.out.div_ceil(NR);
        // A tile whose rows or columns run past `y` goes through this buffer.
        let mut spare = [0f32; MR * NR];
        let mut kp0 = 0;
        while kp0 < self.pairs {
            let kps = (self.pairs - kp0).min(KC_PAIRS);
            let load = accumulate || kp0 > 0;
            for p in 0..panels {
                let cols = (self.out - p * NR).min(NR);
                // SAFETY: the panel holds `pairs` pairs of NR columns; kp0 + kps <= pairs.
                let b = self.data.as_ptr().add((p * self.pairs + kp0) * NR * 2);
                for t in 0..rows.div_ceil(MR) {
                    let a = &xb[(t * self.pairs + kp0) * MR..(t * self.pairs + kp0 + kps) * MR];
                    let m = (rows - t * MR).min(MR);
                    let at = t * MR * self.out + p * NR;
                    if m == MR && cols == NR {
                        let c = &mut y[at..at + (MR - 1) * self.out + NR];
                        tile(a, b, kps, c, self.out, load);
                    } else {
                        for r in 0..m {
                            let row = at + r * self.out;
                            spare[r * NR..r * NR + cols].copy_from_slice(&y[row..row + cols]);
                        }
                        tile(a, b, kps, &mut spare, NR, load);
                        for r in 0..m {
                            let row = at + r * self.out;
                            y[row..row + cols].copy_from_slice(&spare[r * NR..r * NR + cols]);
                        }
                    }
                }
            }
            kp0 += kps;
        }
    }
}

/// Rounds one row of activations to bf16 pairs (the last one zero-padded).
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn round_row(src: &[f32], dst: &mut [u32]) {
    assert_eq!(dst.len(), src.len().div_ceil(2));
    let mut k = 0;
    while k + 32 <= src.len() {
        // SAFETY: 32 floats read and 16 pairs written, within both rows.
        let lo = _mm512_loadu_ps(src.as_ptr().add(k));
        let hi = _mm512_loadu_ps(src.as_ptr().add(k + 16));
        let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
        _mm512_storeu_si512(dst.as_mut_ptr().add(k / 2).cast(), v);
        k += 32;
    }
    for (i, d) in dst.iter_mut().enumerate().skip(k / 2) {
        let lo = to_bf16(src[2 * i]) as u32;
        let hi = src.get(2 * i + 1).map_or(0, |&v| to_bf16(v) as u32);
        *d = lo | hi << 16;
    }
}

/// `MR` rows of packed pairs `a` (`kps` pairs) times the panel slice at `b` into the
/// `MR × NR` tile `c` (rows `ldc` apart), adding to what `c` holds when `load`.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile(a: &[u32], b: *const u16, kps: usize, c: &mut [f32], ldc: usize, load: bool) {
    assert!(a.len() >= kps * MR, "tile: activations");
    assert!(c.len() > (MR - 1) * ldc + NR - 1, "tile: output");
    // SAFETY: the asserts above bound every access to `a` and `c`; `b` points at `kps`
    // pairs of NR columns (the caller's panel slice). Registers zmm0-27 are declared
    // clobbered; the stack is not touched.
    asm!(
            "test {load:e}, {load:e}",
            "jz 2f",
            "mov {p}, {c}",
            "vmovups zmm0, [{p}]",
            "vmovups zmm1, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm2, [{p}]",
            "vmovups zmm3, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm4, [{p}]",
            "vmovups zmm5, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm6, [{p}]",
            "vmovups zmm7, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm8, [{p}]",
            "vmovups zmm9, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm10, [{p}]",
            "vmovups zmm11, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm12, [{p}]",
            "vmovups zmm13, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm14, [{p}]",
            "vmovups zmm15, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm16, [{p}]",
            "vmovups zmm17, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm18, [{p}]",
            "vmovups zmm19, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm20, [{p}]",
            "vmovups zmm21, [{p} + 64]",
            "add {p}, {ldc}",
            "vmovups zmm22, [{p}]",
            "vmovups zmm23, [{p} + 64]",
            "jmp 3f",
            "2:",
            "vpxord zmm0, zmm0, zmm0",
            "vpxord zmm1, zmm1, zmm1",
            "vpxord zmm2, zmm2, zmm2",
            "vpxord zmm3, zmm3, zmm3",
            "vpxord zmm4, zmm4, zmm4",
            "vpxord zmm5, zmm5, zmm5",
            "vpxord zmm6, zmm6, zmm6",
            "vpxord zmm7, zmm7, zmm7",
            "vpxord zmm8, zmm8, zmm8",
            "vpxord zmm9, zmm9, zmm9",
            "vpxord zmm10, zmm10, zmm10",
            "vpxord zmm11, zmm11, zmm11",
            "vpxord zmm12, zmm12, zmm12",
            "vpxord zmm13, zmm13, zmm13",
            "vpxord zmm14, zmm14, zmm14",
            "vpxord zmm15, zmm15, zmm15",
            "vpxord zmm16, zmm16, zmm16",
            "vpxord zmm17, zmm17, zmm17",
            "vpxord zmm18, zmm18, zmm18",
            "vpxord zmm19, zmm19, zmm19",
            "vpxord zmm20, zmm20, zmm20",
            "vpxord zmm21, zmm21, zmm21",
            "vpxord zmm22, zmm22, zmm22",
            "vpxord zmm23, zmm23, zmm23",
            "3:",
            "test {kps}, {kps}",
            "jz 5f",
            "4:",
            "vmovups zmm24, [{b}]",
            "vmovups zmm25, [{b} + 64]",
            "vpbroadcastd zmm26, dword ptr [{a} + 0]",
            "vdpbf16ps zmm0, zmm26, zmm24",
            "vdpbf16ps zmm1, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 4]",
            "vdpbf16ps zmm2, zmm27, zmm24",
            "vdpbf16ps zmm3, zmm27, zmm25",
            "vpbroadcastd zmm26, dword ptr [{a} + 8]",
            "vdpbf16ps zmm4, zmm26, zmm24",
            "vdpbf16ps zmm5, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 12]",
            "vdpbf16ps zmm6, zmm27, zmm24",
            "vdpbf16ps zmm7, zmm27, zmm25",
            "vpbroadcastd zmm26, dword ptr [{a} + 16]",
            "vdpbf16ps zmm8, zmm26, zmm24",
            "vdpbf16ps zmm9, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 20]",
            "vdpbf16ps zmm10, zmm27, zmm24",
            "vdpbf16ps zmm11, zmm27, zmm25",
            "vpbroadcastd zmm26, dword ptr [{a} + 24]",
            "vdpbf16ps zmm12, zmm26, zmm24",
            "vdpbf16ps zmm13, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 28]",
            "vdpbf16ps zmm14, zmm27, zmm24",
            "vdpbf16ps zmm15, zmm27, zmm25",
            "vpbroadcastd zmm26, dword ptr [{a} + 32]",
            "vdpbf16ps zmm16, zmm26, zmm24",
            "vdpbf16ps zmm17, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 36]",
            "vdpbf16ps zmm18, zmm27, zmm24",
            "vdpbf16ps zmm19, zmm27, zmm25",
            "vpbroadcastd zmm26, dword ptr [{a} + 40]",
            "vdpbf16ps zmm20, zmm26, zmm24",
            "vdpbf16ps zmm21, zmm26, zmm25",
            "vpbroadcastd zmm27, dword ptr [{a} + 44]",
            "vdpbf16ps zmm22, zmm27, zmm24",
            "vdpbf16ps zmm23, zmm27, zmm25",
            "add {a}, 48",
            "add {b}, 128",
            "dec {kps}",
            "jnz 4b",
            "5:",
            "mov {p}, {c}",
            "vmovups [{p}], zmm0",
            "vmovups [{p} + 64], zmm1",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm2",
            "vmovups [{p} + 64], zmm3",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm4",
            "vmovups [{p} + 64], zmm5",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm6",
            "vmovups [{p} + 64], zmm7",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm8",
            "vmovups [{p} + 64], zmm9",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm10",
            "vmovups [{p} + 64], zmm11",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm12",
            "vmovups [{p} + 64], zmm13",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm14",
            "vmovups [{p} + 64], zmm15",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm16",
            "vmovups [{p} + 64], zmm17",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm18",
            "vmovups [{p} + 64], zmm19",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm20",
            "vmovups [{p} + 64], zmm21",
            "add {p}, {ldc}",
            "vmovups [{p}], zmm22",
            "vmovups [{p} + 64], zmm23",
        a = inout(reg) a.as_ptr() => _,
        b = inout(reg) b => _,
        kps = inout(reg) kps => _,
        c = in(reg) c.as_mut_ptr(),
        ldc = in(reg) ldc * 4,
        load = in(reg) u32::from(load),
        p = out(reg) _,
        out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _,
        out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
        out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _,
        out("zmm12") _, out("zmm13") _, out("zmm14") _, out("zmm15") _,
        out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
        out("zmm20") _, out("zmm21") _, out("zmm22") _, out("zmm23") _,
        out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _,
        options(nostack),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ml::embedder::cpu::test_values as values;

    fn bf16_value(x: f32) -> f32 {
        f32::from_bits((to_bf16(x) as u32) << 16)
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one.
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert!(f32::from_bits((to_bf16(f32::NAN) as u32) << 16).is_nan());
    }

    #[test]
    fn products_match_the_rounded_inputs_in_f64() {
        if !available() {
            eprintln!("no AVX-512 BF16 on this CPU: nothing to check");
            return;
        }
        // Odd sizes: tails of rows, columns, pairs and blocks are all exercised.
        for &(rows, inp, out) in &[(1, 3, 5), (13, 37, 33), (25, 300, 70), (7, 384, 64)] {
            let x = values(rows * inp, 1);
            let w = values(inp * out, 2);
            let packed = PackedBf16::pack(&w, inp, out).expect("available");
            for accumulate in [false, true] {
                let mut y = values(rows * out, 3);
                let before = y.clone();
                packed.product(&x, &mut y, accumulate);
                for r in 0..rows {
                    for c in 0..out {
                        let exact: f64 = (0..inp)
                            .map(|k| {
                                bf16_value(x[r * inp + k]) as f64
                                    * bf16_value(w[k * out + c]) as f64
                            })
                            .sum::<f64>()
                            + if accumulate {
                                before[r * out + c] as f64
                            } else {
                                0.0
                            };
                        let got = y[r * out + c] as f64;
                        assert!(
                            (got - exact).abs() <= 1e-4 * (1.0 + exact.abs()),
                            "{rows}x{inp}x{out} [{r},{c}]: {got} vs {exact}"
                        );
                    }
                }
            }
        }
    }
}
