//! int8 products for the dense layers, on x86-64 CPUs with AVX-512 VNNI (`vpdpbusd`:
//! four u8 × i8 products per 32-bit lane summed in i32, twice the products per
//! instruction of bf16's `vdpbf16ps`).
//!
//! Both sides are quantized in blocks of 64 inputs, the granularity that keeps
//! MiniLM's vectors within cosine 0.999 of the reference (one scale per row or column
//! over the whole input does not: outlier inputs then cost every other one its
//! resolution). Weights are rounded once, at load: symmetric i8, one f32 scale per
//! column and block. Activations are rounded block by block of each product: u8 with a
//! zero point, one scale per row and block, over the block's range including zero
//! (asymmetric, so GELU's output, mostly positive, keeps all 256 levels). For a row's
//! block with scale `sa` and zero point `zp` and a column's block with scale `sw`:
//!
//! `Σ x·w ≈ sa·sw·Σ qa·qw − sa·zp · sw·Σ qw`
//!
//! The integer sums of a block become f32 at once (no overflow, whatever the width);
//! `sw·Σ qw` is kept per column and block from load.
//!
//! The product is blocked as bf16.rs's: panels of 32 columns, a slice of `KC_BLOCKS`
//! blocks of one panel in L1 while tiles of 6 activation rows stream past it, each
//! tile's 6 × 32 integer sums and 6 × 32 f32 totals in 24 vector registers. The tile's
//! loop is written in assembly, as bf16.rs's is.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;

/// Columns per panel: two vectors of 16 lanes.
const NR: usize = 32;
/// Activation rows per tile.
const MR: usize = 6;
/// Inputs per quantization block.
const BLOCK: usize = 64;
/// Groups of four inputs (one `vpdpbusd` lane's) per block.
const QUADS: usize = BLOCK / 4;
/// Blocks of a panel per pass over the tiles: 512 inputs, a 16 KiB slice.
const KC_BLOCKS: usize = 8;

/// A weight matrix `[inp, out]` quantized and packed for [`product`](Self::product).
pub(super) struct PackedI8 {
    /// `panels × blocks × QUADS × NR × 4`: for panel `p`, block `b`, quad `kq` and column
    /// `c`, inputs `64·b + 4·kq .. + 4` of column `32·p + c`; zero past the edges.
    data: Vec<i8>,
    /// `panels × blocks × 2 × NR`: each column's scale `sw`, then `sw · Σ qw`.
    scales: Vec<f32>,
    inp: usize,
    out: usize,
    blocks: usize,
}

/// Activations quantized for one product, reused across calls.
#[derive(Default)]
struct Quantized {
    /// `tiles × blocks × QUADS × MR`: four u8 inputs of a row, tile by tile.
    quads: Vec<u32>,
    /// `tiles × blocks × MR × 2`: each row's block scale `sa`, then `−sa · zp`.
    scales: Vec<f32>,
}

thread_local! {
    static QUANTIZED: RefCell<Quantized> = RefCell::new(Quantized::default());
}

/// Whether this CPU runs these products.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// One block of activations quantized: `x ≈ scale · (q − zero)`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct BlockScale {
    scale: f32,
    zero: i32,
}

/// Scale and zero point of a block whose values lie in `lo ..= hi`: the range is widened
/// to include zero, split in 255 steps.
fn block_scale(lo: f32, hi: f32) -> (BlockScale, f32) {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = (hi - lo) / 255.0;
    let usable = scale.is_finite() && scale > 0.0;
    if !usable {
        return (
            BlockScale {
                scale: 0.0,
                zero: 0,
            },
            0.0,
        );
    }
    let inv = 1.0 / scale;
    let zero = (-lo * inv).round_ties_even().clamp(0.0, 255.0) as i32;
    (BlockScale { scale, zero }, inv)
}

#[cfg(test)]
/// The scalar definition of the activations' rounding (the vector code matches it bit
/// for bit): `q = clamp(round(x / scale) + zero, 0, 255)`, `x / scale` as `x · (1 / scale)`.
fn quantize_block(x: &[f32], q: &mut [u8]) -> BlockScale {
    let lo = x.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (s, inv) = block_scale(lo, hi);
    for (q, &v) in q.iter_mut().zip(x) {
        *q = ((v * inv).round_ties_even() as i32 + s.zero).clamp(0, 255) as u8;
    }
    s
}

impl PackedI8 {
    /// Quantizes and packs `w` (`[inp, out]`, row-major). `None` unless [`available`]
    /// and `inp` is a whole number of blocks.
    pub(super) fn pack(w: &[f32], inp: usize, out: usize) -> Option<Self> {
        assert_eq!(w.len(), inp * out, "weight shape");
        if !available() || inp == 0 || !inp.is_multiple_of(BLOCK) {
            return None;
        }
        let blocks = inp / BLOCK;
        let panels = out.div_ceil(NR);
        let mut data = vec![0i8; panels * blocks * QUADS * NR * 4];
        let mut scales = vec![0f32; panels * blocks * 2 * NR];
        for p in 0..panels {
            for b in 0..blocks {
                for c in 0..NR.min(out - p * NR) {
                    let col = p * NR + c;
                    let value = |k: usize| w[(b * BLOCK + k) * out + col];
                    let max = (0..BLOCK).map(|k| value(k).abs()).fold(0.0f32, f32::max);
                    let scale = max / 127.0;
                    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                    let mut sum = 0i32;
                    for k in 0..BLOCK {
                        let q = (value(k) * inv).round_ties_even().clamp(-127.0, 127.0) as i8;
                        sum += i32::from(q);
                        data[(((p * blocks + b) * QUADS + k / 4) * NR + c) * 4 + k % 4] = q;
                    }
                    let at = (p * blocks + b) * 2 * NR + c;
                    scales[at] = scale;
                    scales[at + NR] = scale * sum as f32;
                }
            }
        }
        Some(Self {
            data,
            scales,
            inp,
            out,
            blocks,
        })
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
            let tiles = rows.div_ceil(MR);
            let Quantized { quads, scales } = &mut *q;
            quads.clear();
            quads.resize(tiles * self.blocks * QUADS * MR, 0);
            scales.clear();
            scales.resize(tiles * self.blocks * MR * 2, 0.0);
            // SAFETY: a `PackedI8` exists only where `available()` held (AVX-512 F, BW
            // and VNNI); the buffers were sized for `rows` above.
            unsafe {
                for i in 0..rows {
                    self.quantize_row(&x[i * self.inp..(i + 1) * self.inp], i, quads, scales);
                }
                self.kernel(quads, scales, rows, y, accumulate);
            }
        });
    }

    /// Quantizes row `i` into its tile's quads and scales.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn quantize_row(&self, x: &[f32], i: usize, quads: &mut [u32], scales: &mut [f32]) {
        let (t, r) = (i / MR, i % MR);
        for b in 0..self.blocks {
            let src = &x[b * BLOCK..(b + 1) * BLOCK];
            // SAFETY: four vectors of 16 floats lie within the block.
            let v = [0, 16, 32, 48].map(|o| _mm512_loadu_ps(src.as_ptr().add(o)));
            let lo = _mm512_min_ps(_mm512_min_ps(v[0], v[1]), _mm512_min_ps(v[2], v[3]));
            let hi = _mm512_max_ps(_mm512_max_ps(v[0], v[1]), _mm512_max_ps(v[2], v[3]));
            let (s, inv) = block_scale(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
            let (inv, zero) = (_mm512_set1_ps(inv), _mm512_set1_epi32(s.zero));
            let (floor, ceil) = (_mm512_setzero_si512(), _mm512_set1_epi32(255));
            let mut bytes = [0u32; QUADS];
            for (j, &v) in v.iter().enumerate() {
                // Round to nearest even (the default rounding mode), as `quantize_block`.
                let q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v, inv)), zero);
                let q = _mm512_min_epi32(_mm512_max_epi32(q, floor), ceil);
                _mm_storeu_si128(
                    bytes.as_mut_ptr().add(4 * j).cast(),
                    _mm512_cvtepi32_epi8(q),
                );
            }
            let base = (t * self.blocks + b) * QUADS * MR + r;
            for (kq, &quad) in bytes.iter().enumerate() {
                quads[base + kq * MR] = quad;
            }
            let at = ((t * self.blocks + b) * MR + r) * 2;
            scales[at] = s.scale;
            scales[at + 1] = -s.scale * s.zero as f32;
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn kernel(
        &self,
        quads: &[u32],
        ascales: &[f32],
        rows: usize,
        y: &mut [f32],
        accumulate: bool,
    ) {
        let panels = self.out.div_ceil(NR);
        let tiles = rows.div_ceil(MR);
        // A tile whose rows or columns run past `y` goes through this buffer.
        let mut spare = [0f32; MR * NR];
        let mut b0 = 0;
        while b0 < self.blocks {
            let blocks = (self.blocks - b0).min(KC_BLOCKS);
            let load = accumulate || b0 > 0;
            for p in 0..panels {
                let cols = (self.out - p * NR).min(NR);
                let pb = p * self.blocks + b0;
                let b = &self.data[pb * QUADS * NR * 4..(pb + blocks) * QUADS * NR * 4];
                let ws = &self.scales[pb * 2 * NR..(pb + blocks) * 2 * NR];
                for t in 0..tiles {
                    let tb = t * self.blocks + b0;
                    let a = &quads[tb * QUADS * MR..(tb + blocks) * QUADS * MR];
                    let sa = &ascales[tb * MR * 2..(tb + blocks) * MR * 2];
                    let m = (rows - t * MR).min(MR);
                    let at = t * MR * self.out + p * NR;
                    let operands = Operands {
                        a,
                        sa,
                        b,
                        ws,
                        blocks,
                    };
                    if m == MR && cols == NR {
                        let c = &mut y[at..at + (MR - 1) * self.out + NR];
                        tile(operands, c, self.out, load);
                    } else {
                        for r in 0..m {
                            let row = at + r * self.out;
                            spare[r * NR..r * NR + cols].copy_from_slice(&y[row..row + cols]);
                        }
                        tile(operands, &mut spare, NR, load);
                        for r in 0..m {
                            let row = at + r * self.out;
                            y[row..row + cols].copy_from_slice(&spare[r * NR..r * NR + cols]);
                        }
                    }
                }
            }
            b0 += blocks;
        }
    }
}

/// What one tile multiplies: `blocks` blocks of a tile's quads `a` and scales `sa`, and
/// of a panel's weights `b` and scales `ws`.
struct Operands<'a> {
    a: &'a [u32],
    sa: &'a [f32],
    b: &'a [i8],
    ws: &'a [f32],
    blocks: usize,
}

/// `MR` rows of quantized activations times a panel slice into the `MR × NR` tile `c`
/// (rows `ldc` apart), adding to what `c` holds when `load`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile(o: Operands<'_>, c: &mut [f32], ldc: usize, load: bool) {
    let blocks = o.blocks;
    assert!(blocks > 0, "tile: no blocks");
    assert!(o.a.len() >= blocks * QUADS * MR, "tile: activations");
    assert!(o.sa.len() >= blocks * MR * 2, "tile: activation scales");
    assert!(o.b.len() >= blocks * QUADS * NR * 4, "tile: weights");
    assert!(o.ws.len() >= blocks * 2 * NR, "tile: weight scales");
    assert!(c.len() > (MR - 1) * ldc + NR - 1, "tile: output");
    // SAFETY: the asserts above bound every access; registers zmm0-31 are declared
    // clobbered; the stack is not touched.
    asm!(
        "test {load:e}, {load:e}",
        "jz 2f",
        "mov {p}, {c}",
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
        "6:",
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
        "mov {q:e}, 16",
        "4:",
        "vmovdqu32 zmm24, [{b}]",
        "vmovdqu32 zmm25, [{b} + 64]",
        "vpbroadcastd zmm26, dword ptr [{a} + 0]",
        "vpdpbusd zmm0, zmm26, zmm24",
        "vpdpbusd zmm1, zmm26, zmm25",
        "vpbroadcastd zmm27, dword ptr [{a} + 4]",
        "vpdpbusd zmm2, zmm27, zmm24",
        "vpdpbusd zmm3, zmm27, zmm25",
        "vpbroadcastd zmm26, dword ptr [{a} + 8]",
        "vpdpbusd zmm4, zmm26, zmm24",
        "vpdpbusd zmm5, zmm26, zmm25",
        "vpbroadcastd zmm27, dword ptr [{a} + 12]",
        "vpdpbusd zmm6, zmm27, zmm24",
        "vpdpbusd zmm7, zmm27, zmm25",
        "vpbroadcastd zmm26, dword ptr [{a} + 16]",
        "vpdpbusd zmm8, zmm26, zmm24",
        "vpdpbusd zmm9, zmm26, zmm25",
        "vpbroadcastd zmm27, dword ptr [{a} + 20]",
        "vpdpbusd zmm10, zmm27, zmm24",
        "vpdpbusd zmm11, zmm27, zmm25",
        "add {a}, 24",
        "add {b}, 128",
        "dec {q:e}",
        "jnz 4b",
        "vmovups zmm28, [{ws}]",
        "vmovups zmm29, [{ws} + 64]",
        "vmovups zmm24, [{ws} + 128]",
        "vmovups zmm25, [{ws} + 192]",
        "vcvtdq2ps zmm0, zmm0",
        "vcvtdq2ps zmm1, zmm1",
        "vmulps zmm0, zmm0, zmm28",
        "vmulps zmm1, zmm1, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 0]",
        "vfmadd231ps zmm12, zmm0, zmm30",
        "vfmadd231ps zmm13, zmm1, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 4]",
        "vfmadd231ps zmm12, zmm24, zmm31",
        "vfmadd231ps zmm13, zmm25, zmm31",
        "vcvtdq2ps zmm2, zmm2",
        "vcvtdq2ps zmm3, zmm3",
        "vmulps zmm2, zmm2, zmm28",
        "vmulps zmm3, zmm3, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 8]",
        "vfmadd231ps zmm14, zmm2, zmm30",
        "vfmadd231ps zmm15, zmm3, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 12]",
        "vfmadd231ps zmm14, zmm24, zmm31",
        "vfmadd231ps zmm15, zmm25, zmm31",
        "vcvtdq2ps zmm4, zmm4",
        "vcvtdq2ps zmm5, zmm5",
        "vmulps zmm4, zmm4, zmm28",
        "vmulps zmm5, zmm5, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 16]",
        "vfmadd231ps zmm16, zmm4, zmm30",
        "vfmadd231ps zmm17, zmm5, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 20]",
        "vfmadd231ps zmm16, zmm24, zmm31",
        "vfmadd231ps zmm17, zmm25, zmm31",
        "vcvtdq2ps zmm6, zmm6",
        "vcvtdq2ps zmm7, zmm7",
        "vmulps zmm6, zmm6, zmm28",
        "vmulps zmm7, zmm7, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 24]",
        "vfmadd231ps zmm18, zmm6, zmm30",
        "vfmadd231ps zmm19, zmm7, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 28]",
        "vfmadd231ps zmm18, zmm24, zmm31",
        "vfmadd231ps zmm19, zmm25, zmm31",
        "vcvtdq2ps zmm8, zmm8",
        "vcvtdq2ps zmm9, zmm9",
        "vmulps zmm8, zmm8, zmm28",
        "vmulps zmm9, zmm9, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 32]",
        "vfmadd231ps zmm20, zmm8, zmm30",
        "vfmadd231ps zmm21, zmm9, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 36]",
        "vfmadd231ps zmm20, zmm24, zmm31",
        "vfmadd231ps zmm21, zmm25, zmm31",
        "vcvtdq2ps zmm10, zmm10",
        "vcvtdq2ps zmm11, zmm11",
        "vmulps zmm10, zmm10, zmm28",
        "vmulps zmm11, zmm11, zmm29",
        "vbroadcastss zmm30, dword ptr [{sa} + 40]",
        "vfmadd231ps zmm22, zmm10, zmm30",
        "vfmadd231ps zmm23, zmm11, zmm30",
        "vbroadcastss zmm31, dword ptr [{sa} + 44]",
        "vfmadd231ps zmm22, zmm24, zmm31",
        "vfmadd231ps zmm23, zmm25, zmm31",
        "add {ws}, 256",
        "add {sa}, 48",
        "dec {blocks}",
        "jnz 6b",
        "mov {p}, {c}",
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
        a = inout(reg) o.a.as_ptr() => _,
        sa = inout(reg) o.sa.as_ptr() => _,
        b = inout(reg) o.b.as_ptr() => _,
        ws = inout(reg) o.ws.as_ptr() => _,
        blocks = inout(reg) blocks => _,
        q = out(reg) _,
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
        out("zmm28") _, out("zmm29") _, out("zmm30") _, out("zmm31") _,
        options(nostack),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ml::embedder::cpu::test_values as values;

    #[test]
    fn blocks_round_to_their_range() {
        let x: Vec<f32> = (0..BLOCK).map(|i| i as f32 / 8.0 - 1.0).collect();
        let mut q = [0u8; BLOCK];
        let s = quantize_block(&x, &mut q);
        // Range -1 ..= 6.875 in 255 steps: -1 is level 0, so the zero point is 1 / scale.
        assert_eq!(s.zero, (1.0 / s.scale).round() as i32);
        for (v, q) in x.iter().zip(q) {
            let back = s.scale * (i32::from(q) - s.zero) as f32;
            assert!(
                (back - v).abs() <= s.scale / 2.0 + 1e-6,
                "{v} came back as {back}"
            );
        }
        // All zero: scale 0, every level 0.
        let s = quantize_block(&[0.0; BLOCK], &mut q);
        assert_eq!(
            s,
            BlockScale {
                scale: 0.0,
                zero: 0
            }
        );
        assert!(q.iter().all(|&v| v == 0));
        // All positive: the range starts at zero, so the zero point is level 0.
        let x = vec![0.5f32; BLOCK];
        assert_eq!(quantize_block(&x, &mut q).zero, 0);
        assert!(q.iter().all(|&v| v == 255));
    }

    /// The product of the quantized values, in f64: what the kernel must give.
    fn expected(x: &[f32], w: &[f32], rows: usize, inp: usize, out: usize) -> Vec<f64> {
        let blocks = inp / BLOCK;
        let mut xq = vec![0f64; rows * inp];
        let mut q = [0u8; BLOCK];
        for r in 0..rows {
            for b in 0..blocks {
                let at = r * inp + b * BLOCK;
                let s = quantize_block(&x[at..at + BLOCK], &mut q);
                for k in 0..BLOCK {
                    xq[at + k] = s.scale as f64 * (i32::from(q[k]) - s.zero) as f64;
                }
            }
        }
        let mut wq = vec![0f64; inp * out];
        for c in 0..out {
            for b in 0..blocks {
                let col: Vec<f32> = (0..BLOCK).map(|k| w[(b * BLOCK + k) * out + c]).collect();
                let scale = col.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                for (k, v) in col.iter().enumerate() {
                    let q = if scale > 0.0 {
                        (v * (1.0 / scale)).round_ties_even()
                    } else {
                        0.0
                    };
                    wq[(b * BLOCK + k) * out + c] = scale as f64 * q as f64;
                }
            }
        }
        (0..rows * out)
            .map(|i| {
                let (r, c) = (i / out, i % out);
                (0..inp).map(|k| xq[r * inp + k] * wq[k * out + c]).sum()
            })
            .collect()
    }

    #[test]
    fn products_match_the_quantized_inputs_in_f64() {
        if !available() {
            eprintln!("no AVX-512 VNNI on this CPU: nothing to check");
            return;
        }
        // Tails of rows and columns, one block and more blocks than a pass holds.
        for &(rows, inp, out) in &[(1, 64, 5), (13, 192, 33), (7, 640, 70), (25, 1536, 64)] {
            let mut x = values(rows * inp, 1);
            // A block of zeros and a block of one sign, as GELU and padding give.
            x[..BLOCK].fill(0.0);
            if inp > BLOCK {
                x[BLOCK..2 * BLOCK]
                    .iter_mut()
                    .for_each(|v| *v = v.abs() * 3.0);
            }
            let w = values(inp * out, 2);
            let packed = PackedI8::pack(&w, inp, out).expect("available");
            let want = expected(&x, &w, rows, inp, out);
            for accumulate in [false, true] {
                let mut y = values(rows * out, 3);
                let before = y.clone();
                packed.product(&x, &mut y, accumulate);
                for (i, (&got, &exact)) in y.iter().zip(&want).enumerate() {
                    let exact = exact + if accumulate { before[i] as f64 } else { 0.0 };
                    assert!(
                        (got as f64 - exact).abs() <= 1e-4 * (1.0 + exact.abs()),
                        "{rows}x{inp}x{out} [{i}]: {got} vs {exact}"
                    );
                }
            }
        }
    }

    #[test]
    fn products_stay_close_to_f32() {
        if !available() {
            return;
        }
        let (rows, inp, out) = (12, 384, 96);
        let x = values(rows * inp, 5);
        let w = values(inp * out, 6);
        let packed = PackedI8::pack(&w, inp, out).expect("available");
        let mut y = vec![0f32; rows * out];
        packed.product(&x, &mut y, false);
        let (mut err, mut norm) = (0f64, 0f64);
        for r in 0..rows {
            for c in 0..out {
                let exact: f64 = (0..inp)
                    .map(|k| x[r * inp + k] as f64 * w[k * out + c] as f64)
                    .sum();
                err += (y[r * out + c] as f64 - exact).powi(2);
                norm += exact.powi(2);
            }
        }
        let rel = (err / norm).sqrt();
        assert!(rel < 1e-2, "relative error {rel}");
    }

    #[test]
    fn the_vector_rounding_is_the_scalar_one() {
        if !available() {
            return;
        }
        let (inp, out) = (192, 32);
        let packed = PackedI8::pack(&values(inp * out, 2), inp, out).expect("available");
        let mut x = values(inp, 9);
        x[70] = 0.0;
        x[100] = 5.0; // an outlier: the rest of its block rounds to few levels
        x[128..].iter_mut().for_each(|v| *v = v.abs()); // one sign: zero point 0
        let mut quads = vec![0u32; packed.blocks * QUADS * MR];
        let mut scales = vec![0f32; packed.blocks * MR * 2];
        // SAFETY: `available()` held; the buffers hold one tile.
        unsafe { packed.quantize_row(&x, 0, &mut quads, &mut scales) };
        let mut q = [0u8; BLOCK];
        for b in 0..packed.blocks {
            let s = quantize_block(&x[b * BLOCK..(b + 1) * BLOCK], &mut q);
            assert_eq!(scales[b * MR * 2], s.scale);
            assert_eq!(scales[b * MR * 2 + 1], -s.scale * s.zero as f32);
            for kq in 0..QUADS {
                let got = quads[(b * QUADS + kq) * MR].to_le_bytes();
                assert_eq!(got, q[4 * kq..4 * kq + 4], "block {b}, quad {kq}");
            }
        }
    }

    #[test]
    fn shapes_it_cannot_take_are_refused() {
        assert!(PackedI8::pack(&values(32 * 8, 1), 32, 8).is_none());
        assert!(PackedI8::pack(&[], 0, 8).is_none());
    }
}
