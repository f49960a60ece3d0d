//! AVX2 kernels (for x86-64 CPUs without AVX-512 VNNI): the same packed layout read as
//! two 256-bit halves (rows 0..8 and 8..16 of a group). Without VNNI a 4-way dot product
//! is `vpmaddubsw` (unsigned × signed bytes into 16-bit pairs) then `vpmaddwd` with ones.
//! The 16-bit pairs cannot overflow: 4- to 6-bit weights are at most 63, and Q8_0 uses the
//! sign trick (|w| ≤ 128 unsigned, activations ≤ 127 in magnitude).
//!
//! Every function is `unsafe` because it needs AVX2 + FMA + F16C (checked by
//! `Tier::available`) and works on raw pointers into buffers whose sizes `quant::matmul`
//! has checked.

// Token loops index several register arrays at once (the tile is unrolled by `N`).
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::packed::PackedMatrix;
use super::{Acts, WeightType, GROUP};

const Q8_0: u8 = 0;
const Q4_0: u8 = 1;
const Q4_1: u8 = 2;
const Q5_0: u8 = 3;
const Q5_1: u8 = 4;
const IQ4NL: u8 = 5;
// From here on: super-blocks of 256 (`KIND >= Q4K`).
const Q4K: u8 = 6;
const Q5K: u8 = 7;
const Q6K: u8 = 8;
const Q2K: u8 = 9;
const Q3K: u8 = 10;
const IQ4XS: u8 = 11;

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn matmul(
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    match w.ty() {
        WeightType::F32 | WeightType::BF16 => float::<false>(w, x, out, ldo, groups),
        WeightType::F16 => float::<true>(w, x, out, ldo, groups),
        WeightType::Q8_0 => run::<Q8_0>(w, x, out, ldo, groups),
        WeightType::Q4_0 => run::<Q4_0>(w, x, out, ldo, groups),
        WeightType::Q4_1 => run::<Q4_1>(w, x, out, ldo, groups),
        WeightType::Q5_0 => run::<Q5_0>(w, x, out, ldo, groups),
        WeightType::Q5_1 => run::<Q5_1>(w, x, out, ldo, groups),
        WeightType::Q4K => run::<Q4K>(w, x, out, ldo, groups),
        WeightType::Q5K => run::<Q5K>(w, x, out, ldo, groups),
        WeightType::Q6K => run::<Q6K>(w, x, out, ldo, groups),
        WeightType::Q2K => run::<Q2K>(w, x, out, ldo, groups),
        WeightType::Q3K => run::<Q3K>(w, x, out, ldo, groups),
        WeightType::IQ4_NL => run::<IQ4NL>(w, x, out, ldo, groups),
        WeightType::IQ4_XS => run::<IQ4XS>(w, x, out, ldo, groups),
    }
}

#[derive(Clone, Copy)]
struct Tile {
    q: *const u8,
    p: *const u8,
    qstride: usize,
    pstride: usize,
    blocks: usize,
    out: *mut f32,
    ldo: usize,
    rows: usize,
    t0: usize,
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run<const KIND: u8>(
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    let s = w.strides();
    let blocks = w.cols() / s.block;
    for g in groups {
        let mut tile = Tile {
            q: w.quants.bytes().as_ptr().add(g * blocks * s.quants),
            p: w.params.bytes().as_ptr().add(g * blocks * s.params),
            qstride: s.quants,
            pstride: s.params,
            blocks,
            out: out.add(g * GROUP),
            ldo,
            rows: GROUP.min(w.rows() - g * GROUP),
            t0: 0,
        };
        while tile.t0 < x.tokens() {
            let n = x.tokens() - tile.t0;
            if KIND >= Q4K {
                if n >= 2 {
                    k_tile::<KIND, 2>(tile, x);
                    tile.t0 += 2;
                } else {
                    k_tile::<KIND, 1>(tile, x);
                    tile.t0 += 1;
                }
            } else if n >= 2 {
                small_tile::<KIND, 2>(tile, x);
                tile.t0 += 2;
            } else {
                small_tile::<KIND, 1>(tile, x);
                tile.t0 += 1;
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn bx(p: *const i8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(p.cast::<i32>()))
}

/// 4-way dot products of unsigned `w` (≤ 127) with signed `x`, into 8 int32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn dp(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
    let pairs = _mm256_maddubs_epi16(w, x);
    _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
}

/// Loads 8 f16 values as f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn h8(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
}

/// IQ4 values: `vpmaddubsw` of the activations' magnitudes (`|-128|` reads as the unsigned
/// 128, which Q8_K activations can hold) with the signed table values carrying the
/// activations' signs; `|K| ≤ 127` keeps the 16-bit pairs exact.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn dp_kvalues(acc: __m256i, idx: __m256i, x: __m256i) -> __m256i {
    let table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(super::formats::KVALUES.as_ptr().cast()));
    let ws = _mm256_shuffle_epi8(table, idx);
    dp(acc, _mm256_abs_epi8(x), _mm256_sign_epi8(ws, x))
}

/// Nibbles of 32 bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn nibbles(p: *const u8) -> (__m256i, __m256i) {
    let v = _mm256_loadu_si256(p.cast());
    let m = _mm256_set1_epi8(0x0F);
    (
        _mm256_and_si256(v, m),
        _mm256_and_si256(_mm256_srli_epi16::<4>(v), m),
    )
}

/// Adds `bit` to the bytes whose bit is set in the 32-bit mask.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn high_bits(v: __m256i, mask: u32, bit: i8) -> __m256i {
    let m = _mm256_set1_epi32(mask as i32);
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bytes = _mm256_shuffle_epi8(m, spread);
    let sel = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let on = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
    _mm256_add_epi8(v, _mm256_and_si256(on, _mm256_set1_epi8(bit)))
}

/// Half `h` (rows 8h..8h+8) of a 64-bit row mask.
fn half_mask(p: *const u8, h: usize) -> u32 {
    // SAFETY: callers pass pointers to the 8-byte masks inside a packed block.
    let m = unsafe { std::ptr::read_unaligned(p.cast::<u64>()) };
    (m >> (32 * h)) as u32
}

#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store(tile: &Tile, t: usize, h: usize, v: __m256) {
    let out = tile.out.add((tile.t0 + t) * tile.ldo + 8 * h);
    let rows = tile.rows.saturating_sub(8 * h).min(8);
    if rows == 8 {
        _mm256_storeu_ps(out, v);
    } else {
        let mut tmp = [0f32; 8];
        _mm256_storeu_ps(tmp.as_mut_ptr(), v);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), out, rows);
    }
}

/// The 32-value block types: `N` tokens, both halves of one group.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn small_tile<const KIND: u8, const N: usize>(tile: Tile, x: &Acts) {
    let k = x.cols();
    let xq = x.qs.as_ptr();
    for h in 0..2 {
        if tile.rows <= 8 * h {
            break;
        }
        let mut facc = [_mm256_setzero_ps(); N];
        for b in 0..tile.blocks {
            let qb = tile.q.add(b * tile.qstride);
            let pb = tile.p.add(b * tile.pstride);
            let mut acc = [_mm256_setzero_si256(); N];
            if KIND == Q8_0 {
                for c in 0..8 {
                    let ws = _mm256_xor_si256(
                        _mm256_loadu_si256(qb.add(64 * c + 32 * h).cast()),
                        _mm256_set1_epi8(-128),
                    );
                    let wa = _mm256_abs_epi8(ws);
                    for t in 0..N {
                        let xv = bx(xq.add((tile.t0 + t) * k + 32 * b + 4 * c));
                        acc[t] = dp(acc[t], wa, _mm256_sign_epi8(xv, ws));
                    }
                }
            } else {
                for c in 0..4 {
                    let (mut lo, mut hi) = nibbles(qb.add(64 * c + 32 * h));
                    if KIND == Q5_0 || KIND == Q5_1 {
                        lo = high_bits(lo, half_mask(qb.add(256 + 16 * c), h), 16);
                        hi = high_bits(hi, half_mask(qb.add(264 + 16 * c), h), 16);
                    }
                    for t in 0..N {
                        let base = xq.add((tile.t0 + t) * k + 32 * b);
                        if KIND == IQ4NL {
                            acc[t] = dp_kvalues(acc[t], lo, bx(base.add(4 * c)));
                            acc[t] = dp_kvalues(acc[t], hi, bx(base.add(16 + 4 * c)));
                        } else {
                            acc[t] = dp(acc[t], lo, bx(base.add(4 * c)));
                            acc[t] = dp(acc[t], hi, bx(base.add(16 + 4 * c)));
                        }
                    }
                }
            }
            let dw = h8(pb.add(16 * h));
            for t in 0..N {
                let i = (tile.t0 + t) * tile.blocks + b;
                let scale = _mm256_mul_ps(dw, _mm256_set1_ps(*x.d.get_unchecked(i)));
                if KIND == Q4_1 || KIND == Q5_1 {
                    facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[t]), scale, facc[t]);
                    let s = _mm256_set1_ps(*x.s.get_unchecked(i));
                    facc[t] = _mm256_fmadd_ps(h8(pb.add(32 + 16 * h)), s, facc[t]);
                } else {
                    // Q8_0's and IQ4_NL's dots are already signed (sign trick); 4/5-bit
                    // ones subtract their offset times the activations' sum.
                    let z = match KIND {
                        Q8_0 | IQ4NL => 0,
                        Q4_0 => 8,
                        _ => 16,
                    };
                    let corr = _mm256_set1_epi32(z * *x.sum32.get_unchecked(i));
                    let v = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t], corr));
                    facc[t] = _mm256_fmadd_ps(v, scale, facc[t]);
                }
            }
        }
        for (t, v) in facc.iter().enumerate() {
            store(&tile, t, h, *v);
        }
    }
}

/// The K types and IQ4_XS: `N` tokens, both halves of one group.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k_tile<const KIND: u8, const N: usize>(tile: Tile, x: &Acts) {
    let k = x.cols();
    let xq = x.qs.as_ptr();
    let per = match KIND {
        Q5K => 320,
        Q6K => 384,
        _ => 256,
    };
    for h in 0..2 {
        if tile.rows <= 8 * h {
            break;
        }
        let mut facc = [_mm256_setzero_ps(); N];
        for b in 0..tile.blocks {
            let qb = tile.q.add(b * tile.qstride);
            let pb = tile.p.add(b * tile.pstride);
            let mut a = [_mm256_setzero_si256(); N];
            let mut mn = [_mm256_setzero_si256(); N];
            for j in 0..8 {
                let qj = qb.add(per * j);
                let xj = |t: usize| xq.add((tile.t0 + t) * k + 256 * b + 32 * j);
                let mut dlo = [_mm256_setzero_si256(); N];
                let mut dhi = [_mm256_setzero_si256(); N];
                for c in 0..4 {
                    let (mut lo, mut hi) = nibbles(qj.add(64 * c + 32 * h));
                    if KIND == Q5K || KIND == Q6K {
                        lo = high_bits(lo, half_mask(qj.add(256 + 16 * c), h), 16);
                        hi = high_bits(hi, half_mask(qj.add(264 + 16 * c), h), 16);
                    }
                    if KIND == Q6K {
                        lo = high_bits(lo, half_mask(qj.add(320 + 16 * c), h), 32);
                        hi = high_bits(hi, half_mask(qj.add(328 + 16 * c), h), 32);
                    }
                    for t in 0..N {
                        if KIND == IQ4XS {
                            dlo[t] = dp_kvalues(dlo[t], lo, bx(xj(t).add(4 * c)));
                            dhi[t] = dp_kvalues(dhi[t], hi, bx(xj(t).add(16 + 4 * c)));
                        } else {
                            dlo[t] = dp(dlo[t], lo, bx(xj(t).add(4 * c)));
                            dhi[t] = dp(dhi[t], hi, bx(xj(t).add(16 + 4 * c)));
                        }
                    }
                }
                let s16 = |t: usize| {
                    x.sum16
                        .as_ptr()
                        .add(((tile.t0 + t) * tile.blocks + b) * 16 + 2 * j)
                };
                let bytes8 = |at: usize| _mm_loadl_epi64(pb.add(at + 8 * h).cast());
                if KIND == Q2K {
                    let sc_lo = _mm256_cvtepu8_epi32(bytes8(64 + 32 * j));
                    let sc_hi = _mm256_cvtepu8_epi32(bytes8(80 + 32 * j));
                    let m_lo = _mm256_cvtepu8_epi32(bytes8(320 + 32 * j));
                    let m_hi = _mm256_cvtepu8_epi32(bytes8(336 + 32 * j));
                    for t in 0..N {
                        let s = s16(t);
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(dlo[t], sc_lo));
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(dhi[t], sc_hi));
                        let ml = _mm256_mullo_epi32(m_lo, _mm256_set1_epi32(*s));
                        let mh = _mm256_mullo_epi32(m_hi, _mm256_set1_epi32(*s.add(1)));
                        mn[t] = _mm256_add_epi32(mn[t], _mm256_add_epi32(ml, mh));
                    }
                } else if KIND == Q3K {
                    let sc_lo = _mm256_cvtepi8_epi32(bytes8(32 + 32 * j));
                    let sc_hi = _mm256_cvtepi8_epi32(bytes8(48 + 32 * j));
                    for t in 0..N {
                        let s = s16(t);
                        let lo = _mm256_sub_epi32(dlo[t], _mm256_set1_epi32(4 * *s));
                        let hi = _mm256_sub_epi32(dhi[t], _mm256_set1_epi32(4 * *s.add(1)));
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(lo, sc_lo));
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(hi, sc_hi));
                    }
                } else if KIND == IQ4XS {
                    let sc = _mm256_cvtepi8_epi32(bytes8(32 + 16 * j));
                    for t in 0..N {
                        let dot = _mm256_add_epi32(dlo[t], dhi[t]);
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(dot, sc));
                    }
                } else if KIND == Q6K {
                    let sc_lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        pb.add(32 + 16 * (2 * j) + 8 * h).cast(),
                    ));
                    let sc_hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        pb.add(32 + 16 * (2 * j + 1) + 8 * h).cast(),
                    ));
                    for t in 0..N {
                        let s16 = x
                            .sum16
                            .as_ptr()
                            .add(((tile.t0 + t) * tile.blocks + b) * 16 + 2 * j);
                        let lo = _mm256_sub_epi32(dlo[t], _mm256_set1_epi32(32 * *s16));
                        let hi = _mm256_sub_epi32(dhi[t], _mm256_set1_epi32(32 * *s16.add(1)));
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(lo, sc_lo));
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(hi, sc_hi));
                    }
                } else {
                    let sc =
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(pb.add(64 + 16 * j + 8 * h).cast()));
                    let mv =
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(pb.add(192 + 16 * j + 8 * h).cast()));
                    for t in 0..N {
                        let s32 = *x
                            .sum32
                            .get_unchecked(((tile.t0 + t) * tile.blocks + b) * 8 + j);
                        let dot = _mm256_add_epi32(dlo[t], dhi[t]);
                        a[t] = _mm256_add_epi32(a[t], _mm256_mullo_epi32(dot, sc));
                        mn[t] =
                            _mm256_add_epi32(mn[t], _mm256_mullo_epi32(mv, _mm256_set1_epi32(s32)));
                    }
                }
            }
            let d = h8(pb.add(16 * h));
            for t in 0..N {
                let dx = _mm256_set1_ps(*x.d.get_unchecked((tile.t0 + t) * tile.blocks + b));
                facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[t]), _mm256_mul_ps(d, dx), facc[t]);
                if KIND == Q4K || KIND == Q5K || KIND == Q2K {
                    let dmin = _mm256_mul_ps(h8(pb.add(32 + 16 * h)), dx);
                    facc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mn[t]), dmin, facc[t]);
                }
            }
        }
        for (t, v) in facc.iter().enumerate() {
            store(&tile, t, h, *v);
        }
    }
}

/// Eight weights of row `r` from column `i`, as f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn wload<const F16: bool>(base: *const u8, k: usize, r: usize, i: usize) -> __m256 {
    if F16 {
        h8(base.add((r * k + i) * 2))
    } else {
        _mm256_loadu_ps(base.add((r * k + i) * 4).cast())
    }
}

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(s)
}

/// Float weights: row by row, four tokens at a time.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn float<const F16: bool>(
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    let k = w.cols();
    let base = w.quants.bytes().as_ptr();
    let xf = x.f.as_ptr();
    let body = k / 8 * 8;
    for r in groups.start * GROUP..(groups.end * GROUP).min(w.rows()) {
        let mut t = 0;
        while t < x.tokens() {
            let n = (x.tokens() - t).min(4);
            let mut acc = [_mm256_setzero_ps(); 4];
            for i in (0..body).step_by(8) {
                let wv = wload::<F16>(base, k, r, i);
                for (j, a) in acc.iter_mut().enumerate().take(n) {
                    *a = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xf.add((t + j) * k + i)), *a);
                }
            }
            for (j, a) in acc.iter().enumerate().take(n) {
                let mut s = hsum(*a);
                for i in body..k {
                    let wi = if F16 {
                        super::formats::h2f(std::ptr::read_unaligned(
                            base.add((r * k + i) * 2).cast::<u16>(),
                        ))
                    } else {
                        std::ptr::read_unaligned(base.add((r * k + i) * 4).cast::<f32>())
                    };
                    s += wi * *xf.add((t + j) * k + i);
                }
                *out.add((t + j) * ldo + r) = s;
            }
            t += n;
        }
    }
}
