//! AVX-512 kernels with VNNI: one `vpdpbusd` multiplies 16 rows × 4 unsigned weight
//! values by 4 broadcast signed activation values and adds into 16 int32 lanes, one lane
//! per row. A tile of up to 8 tokens reuses every weight vector it loads, which is what
//! makes prompts (many tokens) compute-bound instead of bandwidth-bound; decode (one
//! token) streams each weight once, splitting the work over two accumulators so the
//! dot-product latency does not limit it.
//!
//! Every function is `unsafe` because it needs AVX-512 F/BW/VL/DQ + VNNI (checked by
//! `Tier::available`) and works on raw pointers into buffers whose sizes `quant::matmul`
//! has checked.

// Token loops index several register arrays at once (the tile is unrolled by `N`).
#![allow(clippy::needless_range_loop)]

use std::arch::x86_64::*;
use std::ops::Range;

use super::packed::PackedMatrix;
use super::{Acts, WeightType, GROUP};
use crate::ml::simd::prefetch;

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

/// `KVALUES + 128` (unsigned, for `vpdpbusd`), the nibble look-up table of IQ4_NL/XS.
const KV_U8: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (super::formats::KVALUES[i] as u8) ^ 0x80;
        i += 1;
    }
    t
};

/// Tokens per tile for the 32-value block types and for the K types (which hold more
/// accumulators per token).
const TILE: usize = 8;
const TILE_K: usize = 4;
/// Blocks ahead that the small-block kernels prefetch their weights.
const AHEAD: usize = 8;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
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

/// Where one group's data and one tile's output are.
#[derive(Clone, Copy)]
struct Tile {
    q: *const u8,
    p: *const u8,
    qstride: usize,
    pstride: usize,
    blocks: usize,
    out: *mut f32,
    ldo: usize,
    mask: __mmask16,
    t0: usize,
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn run<const KIND: u8>(
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    let s = w.strides();
    let blocks = w.cols() / s.block;
    let tokens = x.tokens();
    // Tokens per pass over the groups: keep that many rows of activations in L2.
    let chunk = ((256 * 1024) / w.cols()).clamp(16, 256) / 8 * 8;
    let mut c0 = 0;
    while c0 < tokens {
        let c1 = (c0 + chunk).min(tokens);
        for g in groups.clone() {
            let rows = GROUP.min(w.rows() - g * GROUP);
            let mut tile = Tile {
                q: w.quants.bytes().as_ptr().add(g * blocks * s.quants),
                p: w.params.bytes().as_ptr().add(g * blocks * s.params),
                qstride: s.quants,
                pstride: s.params,
                blocks,
                out: out.add(g * GROUP),
                ldo,
                mask: ((1u32 << rows) - 1) as __mmask16,
                t0: c0,
            };
            let big = if KIND >= Q4K { TILE_K } else { TILE };
            while tile.t0 + big <= c1 {
                if KIND >= Q4K {
                    k_tile::<KIND, TILE_K>(tile, x);
                } else {
                    small_tile::<KIND, TILE>(tile, x);
                }
                tile.t0 += big;
            }
            match c1 - tile.t0 {
                0 => {}
                1 => tail::<KIND, 1>(tile, x),
                2 => tail::<KIND, 2>(tile, x),
                3 => tail::<KIND, 3>(tile, x),
                4 => tail::<KIND, 4>(tile, x),
                5 => tail::<KIND, 5>(tile, x),
                6 => tail::<KIND, 6>(tile, x),
                _ => tail::<KIND, 7>(tile, x),
            }
        }
        c0 = c1;
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn tail<const KIND: u8, const N: usize>(tile: Tile, x: &Acts) {
    if KIND >= Q4K {
        if N > TILE_K {
            k_tile::<KIND, TILE_K>(tile, x);
            let rest = Tile {
                t0: tile.t0 + TILE_K,
                ..tile
            };
            match N - TILE_K {
                1 => k_tile::<KIND, 1>(rest, x),
                2 => k_tile::<KIND, 2>(rest, x),
                _ => k_tile::<KIND, 3>(rest, x),
            }
        } else {
            k_tile::<KIND, N>(tile, x);
        }
    } else {
        small_tile::<KIND, N>(tile, x);
    }
}

/// Four activation bytes, broadcast to every 32-bit lane.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn bx(p: *const i8) -> __m512i {
    _mm512_set1_epi32(std::ptr::read_unaligned(p.cast::<i32>()))
}

#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn dp(acc: __m512i, w: __m512i, x: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(acc, w, x)
}

/// Loads 16 f16 values as f32.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn h16(p: *const u8) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
}

/// The low and high nibbles of 64 bytes, each as 64 values 0..15.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn nibbles(p: *const u8) -> (__m512i, __m512i) {
    let v = _mm512_load_si512(p.cast());
    let m = _mm512_set1_epi8(0x0F);
    (
        _mm512_and_si512(v, m),
        _mm512_and_si512(_mm512_srli_epi16::<4>(v), m),
    )
}

/// Adds `bit` to the bytes of `v` whose bit is set in the 64-bit mask at `p`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn high_bits(v: __m512i, p: *const u8, bit: i8) -> __m512i {
    let mask = std::ptr::read_unaligned(p.cast::<u64>());
    _mm512_mask_add_epi8(v, mask, v, _mm512_set1_epi8(bit))
}

/// The IQ4 values (`K + 128`) of 64 nibble indices.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn kvalues(idx: __m512i) -> __m512i {
    let table = _mm512_broadcast_i32x4(_mm_loadu_si128(KV_U8.as_ptr().cast()));
    _mm512_shuffle_epi8(table, idx)
}

/// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: `N` tokens of one group, all blocks of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn small_tile<const KIND: u8, const N: usize>(tile: Tile, x: &Acts) {
    let k = x.cols();
    let xq = x.qs.as_ptr();
    let split = N <= 2;
    let mut facc = [_mm512_setzero_ps(); N];
    for b in 0..tile.blocks {
        let qb = tile.q.add(b * tile.qstride);
        let pb = tile.p.add(b * tile.pstride);
        // The weights stream from beyond L2 once per pass: ask for them a few blocks
        // ahead (past the group's end this is the next group's start).
        prefetch(qb.wrapping_add(AHEAD * tile.qstride), tile.qstride);
        prefetch(pb.wrapping_add(AHEAD * tile.pstride), tile.pstride);
        let mut acc = [_mm512_setzero_si512(); N];
        let mut acc2 = [_mm512_setzero_si512(); N];
        if KIND == Q8_0 {
            for c in 0..8 {
                let wv = _mm512_load_si512(qb.add(64 * c).cast());
                for t in 0..N {
                    let xv = bx(xq.add((tile.t0 + t) * k + 32 * b + 4 * c));
                    if split && c % 2 == 1 {
                        acc2[t] = dp(acc2[t], wv, xv);
                    } else {
                        acc[t] = dp(acc[t], wv, xv);
                    }
                }
            }
        } else {
            for c in 0..4 {
                let (mut lo, mut hi) = nibbles(qb.add(64 * c));
                if KIND == Q5_0 || KIND == Q5_1 {
                    lo = high_bits(lo, qb.add(256 + 16 * c), 16);
                    hi = high_bits(hi, qb.add(264 + 16 * c), 16);
                }
                if KIND == IQ4NL {
                    lo = kvalues(lo);
                    hi = kvalues(hi);
                }
                for t in 0..N {
                    let base = xq.add((tile.t0 + t) * k + 32 * b);
                    acc[t] = dp(acc[t], lo, bx(base.add(4 * c)));
                    if split {
                        acc2[t] = dp(acc2[t], hi, bx(base.add(16 + 4 * c)));
                    } else {
                        acc[t] = dp(acc[t], hi, bx(base.add(16 + 4 * c)));
                    }
                }
            }
        }
        let dw = h16(pb);
        for t in 0..N {
            let mut dot = acc[t];
            if split {
                dot = _mm512_add_epi32(dot, acc2[t]);
            }
            let i = (tile.t0 + t) * tile.blocks + b;
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*x.d.get_unchecked(i)));
            if KIND == Q4_1 || KIND == Q5_1 {
                facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, facc[t]);
                let s = _mm512_set1_ps(*x.s.get_unchecked(i));
                facc[t] = _mm512_fmadd_ps(h16(pb.add(32)), s, facc[t]);
            } else {
                let z = match KIND {
                    Q8_0 | IQ4NL => 128,
                    Q4_0 => 8,
                    _ => 16,
                };
                let corr = _mm512_set1_epi32(z * *x.sum32.get_unchecked(i));
                let v = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot, corr));
                facc[t] = _mm512_fmadd_ps(v, scale, facc[t]);
            }
        }
    }
    for (t, v) in facc.iter().enumerate() {
        _mm512_mask_storeu_ps(tile.out.add((tile.t0 + t) * tile.ldo), tile.mask, *v);
    }
}

/// Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS: `N` tokens of one group, super-blocks of 256.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
unsafe fn k_tile<const KIND: u8, const N: usize>(tile: Tile, x: &Acts) {
    let k = x.cols();
    let xq = x.qs.as_ptr();
    let mut facc = [_mm512_setzero_ps(); N];
    for b in 0..tile.blocks {
        let qb = tile.q.add(b * tile.qstride);
        let pb = tile.p.add(b * tile.pstride);
        // The next super-block's weights (kilobytes each), asked for ahead as above.
        prefetch(qb.wrapping_add(tile.qstride), tile.qstride);
        prefetch(pb.wrapping_add(tile.pstride), tile.pstride);
        let mut a = [_mm512_setzero_si512(); N];
        let mut mn = [_mm512_setzero_si512(); N];
        for j in 0..8 {
            let per = match KIND {
                Q5K => 320,
                Q6K => 384,
                _ => 256,
            };
            let qj = qb.add(per * j);
            let xj = |t: usize| xq.add((tile.t0 + t) * k + 256 * b + 32 * j);
            if KIND == Q6K {
                // Two sub-blocks of 16 (low nibbles, then high), each with its own scale.
                let mut his = [_mm512_setzero_si512(); 4];
                let mut dlo = [_mm512_setzero_si512(); N];
                for (c, hi_c) in his.iter_mut().enumerate() {
                    let (lo, hi) = nibbles(qj.add(64 * c));
                    let lo = high_bits(
                        high_bits(lo, qj.add(256 + 16 * c), 16),
                        qj.add(320 + 16 * c),
                        32,
                    );
                    *hi_c = high_bits(
                        high_bits(hi, qj.add(264 + 16 * c), 16),
                        qj.add(328 + 16 * c),
                        32,
                    );
                    for t in 0..N {
                        dlo[t] = dp(dlo[t], lo, bx(xj(t).add(4 * c)));
                    }
                }
                let mut dhi = [_mm512_setzero_si512(); N];
                for (c, hi) in his.iter().enumerate() {
                    for t in 0..N {
                        dhi[t] = dp(dhi[t], *hi, bx(xj(t).add(16 + 4 * c)));
                    }
                }
                let sc_lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(pb.add(32 + 16 * (2 * j)).cast()));
                let sc_hi =
                    _mm512_cvtepi8_epi32(_mm_loadu_si128(pb.add(32 + 16 * (2 * j + 1)).cast()));
                for t in 0..N {
                    let s16 = x
                        .sum16
                        .as_ptr()
                        .add(((tile.t0 + t) * tile.blocks + b) * 16 + 2 * j);
                    let lo = _mm512_sub_epi32(dlo[t], _mm512_set1_epi32(32 * *s16));
                    let hi = _mm512_sub_epi32(dhi[t], _mm512_set1_epi32(32 * *s16.add(1)));
                    a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(lo, sc_lo));
                    a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(hi, sc_hi));
                }
            } else if KIND == Q2K || KIND == Q3K {
                // Two sub-blocks of 16 (low nibbles, then high), as Q6_K's.
                let mut dlo = [_mm512_setzero_si512(); N];
                let mut dhi = [_mm512_setzero_si512(); N];
                for c in 0..4 {
                    let (lo, hi) = nibbles(qj.add(64 * c));
                    for t in 0..N {
                        dlo[t] = dp(dlo[t], lo, bx(xj(t).add(4 * c)));
                        dhi[t] = dp(dhi[t], hi, bx(xj(t).add(16 + 4 * c)));
                    }
                }
                let s16 = |t: usize| {
                    x.sum16
                        .as_ptr()
                        .add(((tile.t0 + t) * tile.blocks + b) * 16 + 2 * j)
                };
                if KIND == Q2K {
                    let sc = |i: usize| _mm512_cvtepu8_epi32(_mm_loadu_si128(pb.add(i).cast()));
                    let (sc_lo, sc_hi) = (sc(64 + 32 * j), sc(80 + 32 * j));
                    let (m_lo, m_hi) = (sc(320 + 32 * j), sc(336 + 32 * j));
                    for t in 0..N {
                        let s = s16(t);
                        a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(dlo[t], sc_lo));
                        a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(dhi[t], sc_hi));
                        let ml = _mm512_mullo_epi32(m_lo, _mm512_set1_epi32(*s));
                        let mh = _mm512_mullo_epi32(m_hi, _mm512_set1_epi32(*s.add(1)));
                        mn[t] = _mm512_add_epi32(mn[t], _mm512_add_epi32(ml, mh));
                    }
                } else {
                    let sc = |i: usize| _mm512_cvtepi8_epi32(_mm_loadu_si128(pb.add(i).cast()));
                    let (sc_lo, sc_hi) = (sc(32 + 32 * j), sc(48 + 32 * j));
                    for t in 0..N {
                        let s = s16(t);
                        let lo = _mm512_sub_epi32(dlo[t], _mm512_set1_epi32(4 * *s));
                        let hi = _mm512_sub_epi32(dhi[t], _mm512_set1_epi32(4 * *s.add(1)));
                        a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(lo, sc_lo));
                        a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(hi, sc_hi));
                    }
                }
            } else {
                let mut dd = [_mm512_setzero_si512(); N];
                for c in 0..4 {
                    let (mut lo, mut hi) = nibbles(qj.add(64 * c));
                    if KIND == Q5K {
                        lo = high_bits(lo, qj.add(256 + 16 * c), 16);
                        hi = high_bits(hi, qj.add(264 + 16 * c), 16);
                    }
                    if KIND == IQ4XS {
                        lo = kvalues(lo);
                        hi = kvalues(hi);
                    }
                    for t in 0..N {
                        dd[t] = dp(dd[t], lo, bx(xj(t).add(4 * c)));
                        dd[t] = dp(dd[t], hi, bx(xj(t).add(16 + 4 * c)));
                    }
                }
                if KIND == IQ4XS {
                    let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(pb.add(32 + 16 * j).cast()));
                    for t in 0..N {
                        let s32 = *x
                            .sum32
                            .get_unchecked(((tile.t0 + t) * tile.blocks + b) * 8 + j);
                        let v = _mm512_sub_epi32(dd[t], _mm512_set1_epi32(128 * s32));
                        a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(v, sc));
                    }
                    continue;
                }
                let sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(pb.add(64 + 16 * j).cast()));
                let mv = _mm512_cvtepu8_epi32(_mm_loadu_si128(pb.add(192 + 16 * j).cast()));
                for t in 0..N {
                    let s32 = *x
                        .sum32
                        .get_unchecked(((tile.t0 + t) * tile.blocks + b) * 8 + j);
                    a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(dd[t], sc));
                    mn[t] = _mm512_add_epi32(mn[t], _mm512_mullo_epi32(mv, _mm512_set1_epi32(s32)));
                }
            }
        }
        let d = h16(pb);
        for t in 0..N {
            let dx = _mm512_set1_ps(*x.d.get_unchecked((tile.t0 + t) * tile.blocks + b));
            facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[t]), _mm512_mul_ps(d, dx), facc[t]);
            if KIND == Q4K || KIND == Q5K || KIND == Q2K {
                let dmin = _mm512_mul_ps(h16(pb.add(32)), dx);
                facc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mn[t]), dmin, facc[t]);
            }
        }
    }
    for (t, v) in facc.iter().enumerate() {
        _mm512_mask_storeu_ps(tile.out.add((tile.t0 + t) * tile.ldo), tile.mask, *v);
    }
}

/// Sixteen weights of row `r` from column `i`, as f32.
#[inline]
#[target_feature(enable = "avx512f,f16c")]
unsafe fn wload<const F16: bool>(base: *const u8, k: usize, r: usize, i: usize) -> __m512 {
    if F16 {
        h16(base.add((r * k + i) * 2))
    } else {
        _mm512_loadu_ps(base.add((r * k + i) * 4).cast())
    }
}

/// Float weights (f32, or f16 with `F16`): row by row, four tokens at a time.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")]
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
    let body = k / 16 * 16;
    for r in groups.start * GROUP..(groups.end * GROUP).min(w.rows()) {
        let mut t = 0;
        while t < x.tokens() {
            let n = (x.tokens() - t).min(4);
            let mut acc = [_mm512_setzero_ps(); 4];
            for i in (0..body).step_by(16) {
                let wv = wload::<F16>(base, k, r, i);
                for (j, a) in acc.iter_mut().enumerate().take(n) {
                    *a = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xf.add((t + j) * k + i)), *a);
                }
            }
            for (j, a) in acc.iter().enumerate().take(n) {
                let mut s = _mm512_reduce_add_ps(*a);
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
