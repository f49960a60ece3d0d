//! The GGUF (ggml) block formats ragd runs, decoded row by row into one canonical form:
//! unsigned integer values plus the scales that turn them into weights. Everything else in
//! [`super`] (repacking, the kernels, dequantization) starts from this form, so the bit
//! layouts of ggml live here only.
//!
//! Canonical values per type (`q` unsigned, per 32-value block `b`, or per sub-block `j` of
//! a 256-value super-block for the K types):
//! - Q8_0: `w = d·(q − 128)`            (q = stored i8 + 128)
//! - Q4_0: `w = d·(q − 8)`, Q5_0: `w = d·(q − 16)`
//! - Q4_1, Q5_1: `w = d·q + m`
//! - Q4_K, Q5_K: `w = d·sc_j·q − dmin·m_j` (8 sub-blocks of 32, 6-bit `sc`, `m`)
//! - Q6_K: `w = d·sc_j·(q − 32)` (16 sub-blocks of 16, signed 8-bit `sc`)
//! - Q2_K: `w = d·sc_j·q − dmin·m_j` (16 sub-blocks of 16, 4-bit `sc`, `m`, 2-bit `q`)
//! - Q3_K: `w = d·sc_j·(q − 4)` (16 sub-blocks of 16, `sc` = 6-bit scale − 32 stored as a
//!   signed byte, `q` = low 2 bits + 4·high bit)
//! - IQ4_NL: `w = d·K[q]`, IQ4_XS: `w = d·sc_j·K[q]` (8 sub-blocks of 32, `sc` = 6-bit
//!   scale − 32 as a signed byte), `K` = [`KVALUES`], `q` the 4-bit index

use half::f16;

use super::WeightType;

/// One row of a matrix in canonical form. Scales stay as the file stores them (f16 bits),
/// so kernels compute with exactly the file's values.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Unsigned values, one per column.
    pub q: Vec<u8>,
    /// Per block (32 values; per super-block for K types): the scale `d`, as f16 bits.
    pub d: Vec<u16>,
    /// Q4_1/Q5_1: per block, the offset `m` (f16 bits); K types (not Q6_K): per super-block,
    /// `dmin` (f16 bits).
    pub m: Vec<u16>,
    /// K types and IQ4_XS: per sub-block, the scale (`sc`, 6-bit for Q4_K/Q5_K, 4-bit for
    /// Q2_K, signed for Q6_K, Q3_K and IQ4_XS, stored as its byte).
    pub sc: Vec<u8>,
    /// Q4_K/Q5_K: per sub-block, the 6-bit min; Q2_K: the 4-bit min.
    pub mins: Vec<u8>,
}

/// ggml's `kvalues_iq4nl`: the 16 values a 4-bit IQ4_NL / IQ4_XS index stands for.
pub const KVALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Bytes of one row of `cols` values of type `ty` in the file.
pub fn row_bytes(ty: WeightType, cols: usize) -> usize {
    cols / ty.block_size() * ty.block_bytes()
}

/// Decodes one row of `ty` (its file bytes) into canonical form. `bytes` must be exactly
/// [`row_bytes`] long; float types are not decoded here (see [`row_to_f32`]).
pub fn decode_row(ty: WeightType, bytes: &[u8], cols: usize) -> Row {
    debug_assert_eq!(bytes.len(), row_bytes(ty, cols));
    let mut row = Row {
        q: Vec::with_capacity(cols),
        ..Row::default()
    };
    for block in bytes.chunks_exact(ty.block_bytes()) {
        match ty {
            WeightType::Q8_0 => {
                row.d.push(u16le(block, 0));
                row.q
                    .extend(block[2..34].iter().map(|&b| (b as i8 as i16 + 128) as u8));
            }
            WeightType::Q4_0 | WeightType::Q4_1 => {
                let (head, qs) = if ty == WeightType::Q4_0 {
                    (2, &block[2..18])
                } else {
                    (4, &block[4..20])
                };
                row.d.push(u16le(block, 0));
                if head == 4 {
                    row.m.push(u16le(block, 2));
                }
                row.q.extend(qs.iter().map(|b| b & 0x0F));
                row.q.extend(qs.iter().map(|b| b >> 4));
            }
            WeightType::Q5_0 | WeightType::Q5_1 => {
                let head = if ty == WeightType::Q5_0 { 2 } else { 4 };
                row.d.push(u16le(block, 0));
                if head == 4 {
                    row.m.push(u16le(block, 2));
                }
                let qh = u32::from_le_bytes([
                    block[head],
                    block[head + 1],
                    block[head + 2],
                    block[head + 3],
                ]);
                let qs = &block[head + 4..head + 20];
                for (j, b) in qs.iter().enumerate() {
                    row.q.push((b & 0x0F) | ((((qh >> j) & 1) as u8) << 4));
                }
                for (j, b) in qs.iter().enumerate() {
                    row.q.push((b >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4));
                }
            }
            WeightType::Q4K | WeightType::Q5K => {
                // d, dmin, scales[12], (qh[32] for Q5_K), qs[128]
                row.d.push(u16le(block, 0));
                row.m.push(u16le(block, 2));
                let scales = &block[4..16];
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, scales);
                    row.sc.push(sc);
                    row.mins.push(m);
                }
                let (qh, qs) = if ty == WeightType::Q5K {
                    (Some(&block[16..48]), &block[48..176])
                } else {
                    (None, &block[16..144])
                };
                // Each 32 bytes of qs hold two sub-blocks: low nibbles, then high nibbles.
                for (pair, q32) in qs.chunks_exact(32).enumerate() {
                    for half in 0..2 {
                        let bit = 2 * pair + half;
                        for (l, b) in q32.iter().enumerate() {
                            let low = if half == 0 { b & 0x0F } else { b >> 4 };
                            let high = qh.map_or(0, |h| ((h[l] >> bit) & 1) << 4);
                            row.q.push(low | high);
                        }
                    }
                }
            }
            WeightType::Q6K => {
                // ql[128], qh[64], scales[16] (i8), d
                let ql = &block[0..128];
                let qh = &block[128..192];
                row.sc.extend_from_slice(&block[192..208]);
                row.d.push(u16le(block, 208));
                let mut values = [0u8; 256];
                for n in 0..2 {
                    let (ql, qh, out) = (&ql[64 * n..], &qh[32 * n..], &mut values[128 * n..]);
                    for l in 0..32 {
                        out[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
                        out[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
                        out[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                        out[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                    }
                }
                row.q.extend_from_slice(&values);
            }
            WeightType::Q2K | WeightType::Q3K => {
                // Q2_K: scales[16], qs[64], d, dmin. Q3_K: hmask[32], qs[64], scales[12], d.
                let (qs, hmask) = if ty == WeightType::Q2K {
                    for &s in &block[0..16] {
                        row.sc.push(s & 0x0F);
                        row.mins.push(s >> 4);
                    }
                    row.d.push(u16le(block, 80));
                    row.m.push(u16le(block, 82));
                    (&block[16..80], None)
                } else {
                    row.sc
                        .extend(q3k_scales(&block[96..108]).map(|s| (s - 32) as u8));
                    row.d.push(u16le(block, 108));
                    (&block[32..96], Some(&block[0..32]))
                };
                // Each 32 bytes of qs hold 128 values: 2-bit fields at shifts 0, 2, 4, 6,
                // each 32 consecutive values (16 from bytes 0..16, 16 from 16..32).
                for (n, q32) in qs.chunks_exact(32).enumerate() {
                    for shift in 0..4 {
                        let bit = 4 * n + shift;
                        for (l, b) in q32.iter().enumerate() {
                            let high = hmask.map_or(0, |h| ((h[l] >> bit) & 1) << 2);
                            row.q.push(((b >> (2 * shift)) & 3) | high);
                        }
                    }
                }
            }
            WeightType::IQ4_NL => {
                row.d.push(u16le(block, 0));
                row.q.extend(block[2..18].iter().map(|b| b & 0x0F));
                row.q.extend(block[2..18].iter().map(|b| b >> 4));
            }
            WeightType::IQ4_XS => {
                // d, scales_h (u16), scales_l[4], qs[128]
                row.d.push(u16le(block, 0));
                let high = u16le(block, 2);
                for j in 0..8 {
                    let low = (block[4 + j / 2] >> (4 * (j % 2))) & 0x0F;
                    let ls = low | ((((high >> (2 * j)) & 3) as u8) << 4);
                    row.sc.push((ls as i8 - 32) as u8);
                }
                for q16 in block[8..136].chunks_exact(16) {
                    row.q.extend(q16.iter().map(|b| b & 0x0F));
                    row.q.extend(q16.iter().map(|b| b >> 4));
                }
            }
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => {
                unreachable!("float rows are not decoded into canonical form")
            }
        }
    }
    row
}

/// The 6-bit scale and min of sub-block `j` of a Q4_K/Q5_K super-block (ggml's
/// `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The sixteen 6-bit scales (0..63) of a Q3_K super-block from its 12 bytes: low nibbles
/// in bytes 0..8, high 2-bit pairs in bytes 8..12 (ggml's `kmask` unpacking).
fn q3k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { s[j] & 0x0F } else { s[j - 8] >> 4 };
        let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = (low | (high << 4)) as i8;
    }
    out
}

fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// f16 bits to f32.
pub fn h2f(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

/// The weights of a canonical row as floats (the reference the tests compare with ggml's
/// own dequantization).
pub fn dequantize(ty: WeightType, row: &Row) -> Vec<f32> {
    let mut out = Vec::with_capacity(row.q.len());
    for (i, &q) in row.q.iter().enumerate() {
        let q = f32::from(q);
        let w = match ty {
            WeightType::Q8_0 => h2f(row.d[i / 32]) * (q - 128.0),
            WeightType::Q4_0 => h2f(row.d[i / 32]) * (q - 8.0),
            WeightType::Q5_0 => h2f(row.d[i / 32]) * (q - 16.0),
            WeightType::Q4_1 | WeightType::Q5_1 => h2f(row.d[i / 32]) * q + h2f(row.m[i / 32]),
            WeightType::Q4K | WeightType::Q5K => {
                let (s, j) = (i / 256, i / 32);
                h2f(row.d[s]) * f32::from(row.sc[j]) * q - h2f(row.m[s]) * f32::from(row.mins[j])
            }
            WeightType::Q6K => h2f(row.d[i / 256]) * f32::from(row.sc[i / 16] as i8) * (q - 32.0),
            WeightType::Q2K => {
                let (s, j) = (i / 256, i / 16);
                h2f(row.d[s]) * f32::from(row.sc[j]) * q - h2f(row.m[s]) * f32::from(row.mins[j])
            }
            WeightType::Q3K => h2f(row.d[i / 256]) * f32::from(row.sc[i / 16] as i8) * (q - 4.0),
            WeightType::IQ4_NL => h2f(row.d[i / 32]) * f32::from(KVALUES[usize::from(row.q[i])]),
            WeightType::IQ4_XS => {
                let dl = h2f(row.d[i / 256]) * f32::from(row.sc[i / 32] as i8);
                dl * f32::from(KVALUES[usize::from(row.q[i])])
            }
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
        };
        out.push(w);
    }
    out
}

/// One row of a float type (F32, F16, BF16) as f32.
pub fn row_to_f32(ty: WeightType, bytes: &[u8]) -> Vec<f32> {
    match ty {
        WeightType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        WeightType::F16 => bytes
            .chunks_exact(2)
            .map(|b| h2f(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        WeightType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
            .collect(),
        _ => unreachable!("row_to_f32 is for float types"),
    }
}
