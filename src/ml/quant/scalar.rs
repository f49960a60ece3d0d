//! The reference kernels: plain Rust over the packed layout, one group block at a time.
//! Each type's arithmetic is written out once here; the SIMD tiers compute the same
//! integers and fold them into floats with the same operations in the same order (fused
//! multiply-adds included), so every tier gives bit-identical results for quantized
//! types. IQ4_NL / IQ4_XS indices decode to `K[q] + 128` (unsigned, like Q8_0's values),
//! so their dot products subtract `128·Σx` as Q8_0's do.

use std::ops::Range;

use super::formats::{h2f, KVALUES};
use super::packed::PackedMatrix;
use super::{Acts, WeightType, GROUP};

/// # Safety
/// As `quant::matmul_raw`.
pub(super) unsafe fn matmul(
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    match w.ty() {
        WeightType::F32 | WeightType::BF16 | WeightType::F16 => float(w, x, out, ldo, groups),
        _ => quantized(w, x, out, ldo, groups),
    }
}

unsafe fn float(w: &PackedMatrix, x: &Acts, out: *mut f32, ldo: usize, groups: Range<usize>) {
    let (k, bytes) = (w.cols(), w.quants.bytes());
    let mut row = vec![0f32; k];
    for r in groups.start * GROUP..(groups.end * GROUP).min(w.rows()) {
        for (i, v) in row.iter_mut().enumerate() {
            *v = if w.ty() == WeightType::F16 {
                let at = (r * k + i) * 2;
                h2f(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
            } else {
                let at = (r * k + i) * 4;
                f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
            };
        }
        for t in 0..x.tokens() {
            let xt = &x.f[t * k..(t + 1) * k];
            *out.add(t * ldo + r) = row.iter().zip(xt).map(|(a, b)| a * b).sum();
        }
    }
}

/// One group block decoded: 16 rows of unsigned values and their raw scales.
struct Block {
    q: [[u8; 256]; GROUP],
}

unsafe fn quantized(w: &PackedMatrix, x: &Acts, out: *mut f32, ldo: usize, groups: Range<usize>) {
    let ty = w.ty();
    let s = w.strides();
    let blocks = w.cols() / s.block;
    let mut blk = Block {
        q: [[0; 256]; GROUP],
    };
    for g in groups {
        let rows = GROUP.min(w.rows() - g * GROUP);
        let mut acc = vec![0f32; rows * x.tokens()];
        for b in 0..blocks {
            let q = &w.quants.bytes()[(g * blocks + b) * s.quants..][..s.quants];
            let p = &w.params.bytes()[(g * blocks + b) * s.params..][..s.params];
            decode(ty, q, &mut blk);
            let p16 = |at: usize| h2f(u16::from_le_bytes([p[at], p[at + 1]]));
            for t in 0..x.tokens() {
                let xq = &x.qs[t * w.cols() + b * s.block..][..s.block];
                for r in 0..rows {
                    let qr = &blk.q[r][..s.block];
                    acc[t * rows + r] = match ty {
                        WeightType::Q8_0
                        | WeightType::Q4_0
                        | WeightType::Q5_0
                        | WeightType::IQ4_NL => {
                            let z = match ty {
                                WeightType::Q8_0 | WeightType::IQ4_NL => 128,
                                WeightType::Q4_0 => 8,
                                _ => 16,
                            };
                            let i = t * blocks + b;
                            let v = dot(qr, xq) - z * x.sum32[i];
                            (v as f32).mul_add(p16(2 * r) * x.d[i], acc[t * rows + r])
                        }
                        WeightType::Q4_1 | WeightType::Q5_1 => {
                            let i = t * blocks + b;
                            let a = (dot(qr, xq) as f32)
                                .mul_add(p16(2 * r) * x.d[i], acc[t * rows + r]);
                            p16(32 + 2 * r).mul_add(x.s[i], a)
                        }
                        WeightType::Q4K | WeightType::Q5K => {
                            let (mut a, mut m) = (0i32, 0i32);
                            for j in 0..8 {
                                let sc = i32::from(p[64 + 16 * j + r]);
                                let mn = i32::from(p[192 + 16 * j + r]);
                                a += sc * dot(&qr[32 * j..32 * j + 32], &xq[32 * j..32 * j + 32]);
                                m += mn * x.sum32[(t * blocks + b) * 8 + j];
                            }
                            let dx = x.d[t * blocks + b];
                            let acc = (a as f32).mul_add(p16(2 * r) * dx, acc[t * rows + r]);
                            (-(m as f32)).mul_add(p16(32 + 2 * r) * dx, acc)
                        }
                        WeightType::Q6K => {
                            let mut a = 0i32;
                            for j in 0..16 {
                                let sc = i32::from(p[32 + 16 * j + r] as i8);
                                let d16 = dot(&qr[16 * j..16 * j + 16], &xq[16 * j..16 * j + 16]);
                                a += sc * (d16 - 32 * x.sum16[(t * blocks + b) * 16 + j]);
                            }
                            (a as f32).mul_add(p16(2 * r) * x.d[t * blocks + b], acc[t * rows + r])
                        }
                        WeightType::Q2K => {
                            let (mut a, mut m) = (0i32, 0i32);
                            for j in 0..16 {
                                let sc = i32::from(p[64 + 16 * j + r]);
                                let mn = i32::from(p[320 + 16 * j + r]);
                                a += sc * dot(&qr[16 * j..16 * j + 16], &xq[16 * j..16 * j + 16]);
                                m += mn * x.sum16[(t * blocks + b) * 16 + j];
                            }
                            let dx = x.d[t * blocks + b];
                            let acc = (a as f32).mul_add(p16(2 * r) * dx, acc[t * rows + r]);
                            (-(m as f32)).mul_add(p16(32 + 2 * r) * dx, acc)
                        }
                        WeightType::Q3K => {
                            let mut a = 0i32;
                            for j in 0..16 {
                                let sc = i32::from(p[32 + 16 * j + r] as i8);
                                let d16 = dot(&qr[16 * j..16 * j + 16], &xq[16 * j..16 * j + 16]);
                                a += sc * (d16 - 4 * x.sum16[(t * blocks + b) * 16 + j]);
                            }
                            (a as f32).mul_add(p16(2 * r) * x.d[t * blocks + b], acc[t * rows + r])
                        }
                        WeightType::IQ4_XS => {
                            let mut a = 0i32;
                            for j in 0..8 {
                                let sc = i32::from(p[32 + 16 * j + r] as i8);
                                let d32 = dot(&qr[32 * j..32 * j + 32], &xq[32 * j..32 * j + 32]);
                                a += sc * (d32 - 128 * x.sum32[(t * blocks + b) * 8 + j]);
                            }
                            (a as f32).mul_add(p16(2 * r) * x.d[t * blocks + b], acc[t * rows + r])
                        }
                        WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
                    };
                }
            }
        }
        for t in 0..x.tokens() {
            std::ptr::copy_nonoverlapping(
                acc[t * rows..].as_ptr(),
                out.add(t * ldo + g * GROUP),
                rows,
            );
        }
    }
}

fn dot(q: &[u8], x: &[i8]) -> i32 {
    q.iter()
        .zip(x)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum()
}

/// Decodes one group block's values (all 16 rows) from the packed layout.
fn decode(ty: WeightType, q: &[u8], blk: &mut Block) {
    let nibbles = |q: &[u8], masks: Option<&[u8]>, base: usize, blk: &mut Block| {
        for c in 0..4 {
            let mask = |at: usize| {
                masks.map_or(0, |m| {
                    u64::from_le_bytes(m[at..at + 8].try_into().expect("8 bytes"))
                })
            };
            let (lo, hi) = (mask(16 * c), mask(16 * c + 8));
            for r in 0..GROUP {
                for i in 0..4 {
                    let byte = q[64 * c + 4 * r + i];
                    let bit = 4 * r + i;
                    blk.q[r][base + 4 * c + i] = (byte & 0x0F) | ((((lo >> bit) & 1) as u8) << 4);
                    blk.q[r][base + 16 + 4 * c + i] =
                        (byte >> 4) | ((((hi >> bit) & 1) as u8) << 4);
                }
            }
        }
    };
    match ty {
        WeightType::Q8_0 => {
            for c in 0..8 {
                for r in 0..GROUP {
                    blk.q[r][4 * c..4 * c + 4]
                        .copy_from_slice(&q[64 * c + 4 * r..64 * c + 4 * r + 4]);
                }
            }
        }
        WeightType::Q4_0 | WeightType::Q4_1 => nibbles(q, None, 0, blk),
        WeightType::Q5_0 | WeightType::Q5_1 => nibbles(q, Some(&q[256..320]), 0, blk),
        WeightType::Q4K | WeightType::Q2K | WeightType::Q3K => {
            for j in 0..8 {
                nibbles(&q[256 * j..], None, 32 * j, blk);
            }
        }
        WeightType::IQ4_NL | WeightType::IQ4_XS => {
            let subs = if ty == WeightType::IQ4_NL { 1 } else { 8 };
            for j in 0..subs {
                nibbles(&q[256 * j..], None, 32 * j, blk);
            }
            for r in blk.q.iter_mut() {
                for v in r[..32 * subs].iter_mut() {
                    *v = (KVALUES[usize::from(*v)] as u8) ^ 0x80;
                }
            }
        }
        WeightType::Q5K => {
            for j in 0..8 {
                let q = &q[320 * j..320 * (j + 1)];
                nibbles(q, Some(&q[256..320]), 32 * j, blk);
            }
        }
        WeightType::Q6K => {
            for j in 0..8 {
                let q = &q[384 * j..384 * (j + 1)];
                nibbles(q, Some(&q[256..320]), 32 * j, blk);
                for c in 0..4 {
                    let lo =
                        u64::from_le_bytes(q[320 + 16 * c..328 + 16 * c].try_into().expect("8"));
                    let hi =
                        u64::from_le_bytes(q[328 + 16 * c..336 + 16 * c].try_into().expect("8"));
                    for r in 0..GROUP {
                        for i in 0..4 {
                            let bit = 4 * r + i;
                            blk.q[r][32 * j + 4 * c + i] |= (((lo >> bit) & 1) as u8) << 5;
                            blk.q[r][32 * j + 16 + 4 * c + i] |= (((hi >> bit) & 1) as u8) << 5;
                        }
                    }
                }
            }
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
    }
}
