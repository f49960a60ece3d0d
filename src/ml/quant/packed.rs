//! [`PackedMatrix`]: a weight matrix repacked for the kernels.
//!
//! Rows come in groups of [`GROUP`] (16). For each group and each block of the inner
//! dimension (32 values; 256 for the K types) two streams hold the data:
//! - `quants`: 64-byte chunks. Chunk `c` of a 32-value block holds, for rows `r = 0..16`,
//!   bytes `4r..4r+4` = values `4c..4c+4` of row `r` (Q8_0: eight chunks of bytes; 4- to
//!   6-bit types: four chunks of nibbles, low nibble value `4c + i`, high nibble value
//!   `16 + 4c + i`, then for 5- and 6-bit types one 64-bit mask per chunk and nibble half
//!   and high bit: bit `4r + i` is that value's bit 4 (and, for Q6_K, a second set for
//!   bit 5)). One vector load thus gives 16 rows × 4 values, the operand of a 4-way
//!   integer dot product.
//! - `params`: the block's scales for the 16 rows, as the file stores them (f16 bits,
//!   6- or 8-bit sub-block scales), transposed so 16 rows' values are contiguous.
//!
//! Q2_K and Q3_K values (at most 7) are packed as nibbles like Q4_K's; IQ4_NL and IQ4_XS
//! keep their 4-bit indices as nibbles (like Q4_0 and Q4_K) and the kernels look the
//! values up in [`formats::KVALUES`].
//!
//! Float matrices (F32, BF16 as f32; F16 as f16 bits) are kept row-major.

use super::formats::{self, Row};
use super::{WeightType, GROUP};

/// A 64-byte aligned line of bytes.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A byte buffer whose start is 64-byte aligned.
#[derive(Clone, Default)]
pub(super) struct Aligned {
    lines: Vec<Line>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line([0; 64]); len.div_ceil(64)],
            len,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `lines` is `len.div_ceil(64)` contiguous 64-byte lines, so its first
        // `len` bytes are initialised and in bounds.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// A weight matrix of `rows × cols` (output × input), repacked for the kernels.
#[derive(Clone)]
pub struct PackedMatrix {
    ty: WeightType,
    rows: usize,
    cols: usize,
    pub(super) quants: Aligned,
    pub(super) params: Aligned,
}

/// Bytes of one block of one group in each stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Strides {
    /// Values per block of the inner dimension.
    pub block: usize,
    /// Bytes in `quants` per (group, block).
    pub quants: usize,
    /// Bytes in `params` per (group, block).
    pub params: usize,
}

impl PackedMatrix {
    /// Repacks a matrix read from a GGUF file: `bytes` holds `rows` rows of `cols` values
    /// of type `ty`, in the file's layout. Fails when the sizes do not fit the type.
    pub fn from_gguf(
        ty: WeightType,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self, String> {
        if cols == 0 || rows == 0 || !cols.is_multiple_of(ty.block_size()) {
            return Err(format!(
                "a {rows}x{cols} matrix cannot be stored as {} (rows of a multiple of {} values)",
                ty.name(),
                ty.block_size()
            ));
        }
        let row_bytes = formats::row_bytes(ty, cols);
        if bytes.len() != rows * row_bytes {
            return Err(format!(
                "{} bytes for a {rows}x{cols} {} matrix, expected {}",
                bytes.len(),
                ty.name(),
                rows * row_bytes
            ));
        }
        let mut m = Self::empty(ty, rows, cols);
        match ty {
            WeightType::F32 | WeightType::BF16 => {
                let out = m.quants.bytes_mut();
                for (r, src) in bytes.chunks_exact(row_bytes).enumerate() {
                    for (i, v) in formats::row_to_f32(ty, src).into_iter().enumerate() {
                        let at = (r * cols + i) * 4;
                        out[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            WeightType::F16 => m.quants.bytes_mut().copy_from_slice(bytes),
            _ => {
                let s = m.strides();
                let blocks = cols / s.block;
                let mut group_rows: Vec<Row> = Vec::with_capacity(GROUP);
                for g in 0..m.groups() {
                    group_rows.clear();
                    for r in g * GROUP..((g + 1) * GROUP).min(rows) {
                        let src = &bytes[r * row_bytes..(r + 1) * row_bytes];
                        group_rows.push(formats::decode_row(ty, src, cols));
                    }
                    for b in 0..blocks {
                        let at = (g * blocks + b) * s.quants;
                        let q = &mut m.quants.bytes_mut()[at..at + s.quants];
                        pack_quants(ty, &group_rows, b, q);
                        let at = (g * blocks + b) * s.params;
                        let p = &mut m.params.bytes_mut()[at..at + s.params];
                        pack_params(ty, &group_rows, b, p);
                    }
                }
            }
        }
        Ok(m)
    }

    /// Repacks row-major f32 weights as `ty` (quantizing them the way ggml does): for
    /// models whose weights are not stored quantized, and for tests.
    pub fn quantize(
        ty: WeightType,
        rows: usize,
        cols: usize,
        weights: &[f32],
    ) -> Result<Self, String> {
        let bytes = super::acts::quantize_weights(ty, cols, weights)?;
        Self::from_gguf(ty, rows, cols, &bytes)
    }

    fn empty(ty: WeightType, rows: usize, cols: usize) -> Self {
        let groups = rows.div_ceil(GROUP);
        let (quants, params) = match ty {
            WeightType::F32 | WeightType::BF16 => (rows * cols * 4, 0),
            WeightType::F16 => (rows * cols * 2, 0),
            _ => {
                let s = strides(ty);
                let blocks = cols / s.block;
                (groups * blocks * s.quants, groups * blocks * s.params)
            }
        };
        Self {
            ty,
            rows,
            cols,
            quants: Aligned::zeroed(quants),
            params: Aligned::zeroed(params),
        }
    }

    /// The weight type.
    pub fn ty(&self) -> WeightType {
        self.ty
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Groups of [`GROUP`] rows (the last may be partial).
    pub fn groups(&self) -> usize {
        self.rows.div_ceil(GROUP)
    }

    /// Bytes the matrix holds in memory.
    pub fn bytes(&self) -> usize {
        self.quants.len + self.params.len
    }

    pub(super) fn strides(&self) -> Strides {
        strides(self.ty)
    }

    /// Row `r` as floats, into `out` (`cols` long): embedding look-ups.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        assert!(r < self.rows && out.len() == self.cols);
        let q = self.quants.bytes();
        match self.ty {
            WeightType::F32 | WeightType::BF16 => {
                for (i, o) in out.iter_mut().enumerate() {
                    let at = (r * self.cols + i) * 4;
                    *o = f32::from_le_bytes([q[at], q[at + 1], q[at + 2], q[at + 3]]);
                }
            }
            WeightType::F16 => {
                for (i, o) in out.iter_mut().enumerate() {
                    let at = (r * self.cols + i) * 2;
                    *o = formats::h2f(u16::from_le_bytes([q[at], q[at + 1]]));
                }
            }
            _ => {
                let row = self.canonical_row(r);
                out.copy_from_slice(&formats::dequantize(self.ty, &row));
            }
        }
    }

    /// Row `r` back in canonical form (the inverse of packing).
    pub(super) fn canonical_row(&self, r: usize) -> Row {
        let s = self.strides();
        let blocks = self.cols / s.block;
        let (g, lane) = (r / GROUP, r % GROUP);
        let mut row = Row::default();
        for b in 0..blocks {
            let at = (g * blocks + b) * s.quants;
            let q = &self.quants.bytes()[at..at + s.quants];
            let at = (g * blocks + b) * s.params;
            let p = &self.params.bytes()[at..at + s.params];
            unpack_block(self.ty, q, p, lane, &mut row);
        }
        row
    }
}

fn strides(ty: WeightType) -> Strides {
    let (block, quants, params) = match ty {
        WeightType::Q8_0 => (32, 512, 32),
        WeightType::Q4_0 => (32, 256, 32),
        WeightType::Q4_1 => (32, 256, 64),
        WeightType::Q5_0 => (32, 320, 32),
        WeightType::Q5_1 => (32, 320, 64),
        WeightType::Q4K => (256, 8 * 256, 320),
        WeightType::Q5K => (256, 8 * 320, 320),
        WeightType::Q6K => (256, 8 * 384, 288),
        WeightType::Q2K => (256, 8 * 256, 576),
        WeightType::Q3K => (256, 8 * 256, 288),
        WeightType::IQ4_NL => (32, 256, 32),
        WeightType::IQ4_XS => (256, 8 * 256, 160),
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => (1, 0, 0),
    };
    Strides {
        block,
        quants,
        params,
    }
}

/// Writes the quants of block `b` of a group (its rows in canonical form) into `out`.
fn pack_quants(ty: WeightType, rows: &[Row], b: usize, out: &mut [u8]) {
    match ty {
        WeightType::Q8_0 => {
            for (r, row) in rows.iter().enumerate() {
                for c in 0..8 {
                    let src = &row.q[32 * b + 4 * c..32 * b + 4 * c + 4];
                    out[64 * c + 4 * r..64 * c + 4 * r + 4].copy_from_slice(src);
                }
            }
        }
        WeightType::Q4_0
        | WeightType::Q4_1
        | WeightType::Q5_0
        | WeightType::Q5_1
        | WeightType::IQ4_NL => {
            pack_32(
                rows,
                32 * b,
                out,
                matches!(ty, WeightType::Q5_0 | WeightType::Q5_1),
            );
        }
        WeightType::Q2K | WeightType::Q3K | WeightType::IQ4_XS => {
            for j in 0..8 {
                pack_32(
                    rows,
                    256 * b + 32 * j,
                    &mut out[256 * j..256 * (j + 1)],
                    false,
                );
            }
        }
        WeightType::Q4K | WeightType::Q5K => {
            let per = if ty == WeightType::Q5K { 320 } else { 256 };
            for j in 0..8 {
                pack_32(
                    rows,
                    256 * b + 32 * j,
                    &mut out[per * j..per * (j + 1)],
                    per == 320,
                );
            }
        }
        WeightType::Q6K => {
            for j in 0..8 {
                let out = &mut out[384 * j..384 * (j + 1)];
                pack_32(rows, 256 * b + 32 * j, &mut out[..320], true);
                // The second high bit (bit 5) after the first's masks.
                for c in 0..4 {
                    let (mut lo, mut hi) = (0u64, 0u64);
                    for (r, row) in rows.iter().enumerate() {
                        for i in 0..4 {
                            let base = 256 * b + 32 * j + 4 * c + i;
                            lo |= u64::from((row.q[base] >> 5) & 1) << (4 * r + i);
                            hi |= u64::from((row.q[base + 16] >> 5) & 1) << (4 * r + i);
                        }
                    }
                    out[320 + 16 * c..320 + 16 * c + 8].copy_from_slice(&lo.to_le_bytes());
                    out[328 + 16 * c..328 + 16 * c + 8].copy_from_slice(&hi.to_le_bytes());
                }
            }
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
    }
}

/// Packs 32 values (from `base`) of each row as four nibble chunks, plus (with
/// `high_bit`) the bit-4 masks after them.
fn pack_32(rows: &[Row], base: usize, out: &mut [u8], high_bit: bool) {
    for c in 0..4 {
        let (mut lo, mut hi) = (0u64, 0u64);
        for (r, row) in rows.iter().enumerate() {
            for i in 0..4 {
                let a = row.q[base + 4 * c + i];
                let h = row.q[base + 16 + 4 * c + i];
                out[64 * c + 4 * r + i] = (a & 0x0F) | ((h & 0x0F) << 4);
                lo |= u64::from((a >> 4) & 1) << (4 * r + i);
                hi |= u64::from((h >> 4) & 1) << (4 * r + i);
            }
        }
        if high_bit {
            out[256 + 16 * c..256 + 16 * c + 8].copy_from_slice(&lo.to_le_bytes());
            out[264 + 16 * c..264 + 16 * c + 8].copy_from_slice(&hi.to_le_bytes());
        }
    }
}

/// Writes the scales of block `b` of a group into `out` (zeros for missing rows).
fn pack_params(ty: WeightType, rows: &[Row], b: usize, out: &mut [u8]) {
    let put16 =
        |out: &mut [u8], at: usize, v: u16| out[at..at + 2].copy_from_slice(&v.to_le_bytes());
    for (r, row) in rows.iter().enumerate() {
        match ty {
            WeightType::Q8_0 | WeightType::Q4_0 | WeightType::Q5_0 | WeightType::IQ4_NL => {
                put16(out, 2 * r, row.d[b])
            }
            WeightType::Q4_1 | WeightType::Q5_1 => {
                put16(out, 2 * r, row.d[b]);
                put16(out, 32 + 2 * r, row.m[b]);
            }
            WeightType::Q4K | WeightType::Q5K => {
                put16(out, 2 * r, row.d[b]);
                put16(out, 32 + 2 * r, row.m[b]);
                for j in 0..8 {
                    out[64 + 16 * j + r] = row.sc[8 * b + j];
                    out[192 + 16 * j + r] = row.mins[8 * b + j];
                }
            }
            WeightType::Q6K | WeightType::Q3K => {
                put16(out, 2 * r, row.d[b]);
                for j in 0..16 {
                    out[32 + 16 * j + r] = row.sc[16 * b + j];
                }
            }
            WeightType::Q2K => {
                put16(out, 2 * r, row.d[b]);
                put16(out, 32 + 2 * r, row.m[b]);
                for j in 0..16 {
                    out[64 + 16 * j + r] = row.sc[16 * b + j];
                    out[320 + 16 * j + r] = row.mins[16 * b + j];
                }
            }
            WeightType::IQ4_XS => {
                put16(out, 2 * r, row.d[b]);
                for j in 0..8 {
                    out[32 + 16 * j + r] = row.sc[8 * b + j];
                }
            }
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
        }
    }
}

/// Appends block `q`/`p` of row `lane` of a group to `row` in canonical form.
fn unpack_block(ty: WeightType, q: &[u8], p: &[u8], lane: usize, row: &mut Row) {
    let get16 = |at: usize| u16::from_le_bytes([p[at], p[at + 1]]);
    let r = lane;
    let unpack_32 = |q: &[u8], high: Option<&[u8]>, row: &mut Row| {
        let mut vals = [0u8; 32];
        for c in 0..4 {
            let (lo, hi) = match high {
                Some(h) => (
                    u64::from_le_bytes(h[16 * c..16 * c + 8].try_into().expect("8 bytes")),
                    u64::from_le_bytes(h[16 * c + 8..16 * c + 16].try_into().expect("8 bytes")),
                ),
                None => (0, 0),
            };
            for i in 0..4 {
                let byte = q[64 * c + 4 * r + i];
                let bit = 4 * r + i;
                vals[4 * c + i] = (byte & 0x0F) | ((((lo >> bit) & 1) as u8) << 4);
                vals[16 + 4 * c + i] = (byte >> 4) | ((((hi >> bit) & 1) as u8) << 4);
            }
        }
        row.q.extend_from_slice(&vals);
    };
    match ty {
        WeightType::Q8_0 => {
            row.d.push(get16(2 * r));
            for c in 0..8 {
                row.q
                    .extend_from_slice(&q[64 * c + 4 * r..64 * c + 4 * r + 4]);
            }
        }
        WeightType::Q4_0
        | WeightType::Q4_1
        | WeightType::Q5_0
        | WeightType::Q5_1
        | WeightType::IQ4_NL => {
            row.d.push(get16(2 * r));
            if matches!(ty, WeightType::Q4_1 | WeightType::Q5_1) {
                row.m.push(get16(32 + 2 * r));
            }
            let five = matches!(ty, WeightType::Q5_0 | WeightType::Q5_1);
            unpack_32(q, five.then(|| &q[256..320]), row);
        }
        WeightType::Q4K | WeightType::Q5K => {
            row.d.push(get16(2 * r));
            row.m.push(get16(32 + 2 * r));
            let per = if ty == WeightType::Q5K { 320 } else { 256 };
            for j in 0..8 {
                row.sc.push(p[64 + 16 * j + r]);
                row.mins.push(p[192 + 16 * j + r]);
                let q = &q[per * j..per * (j + 1)];
                unpack_32(q, (per == 320).then(|| &q[256..320]), row);
            }
        }
        WeightType::Q2K | WeightType::Q3K | WeightType::IQ4_XS => {
            row.d.push(get16(2 * r));
            match ty {
                WeightType::Q2K => {
                    row.m.push(get16(32 + 2 * r));
                    for j in 0..16 {
                        row.sc.push(p[64 + 16 * j + r]);
                        row.mins.push(p[320 + 16 * j + r]);
                    }
                }
                WeightType::Q3K => row.sc.extend((0..16).map(|j| p[32 + 16 * j + r])),
                _ => row.sc.extend((0..8).map(|j| p[32 + 16 * j + r])),
            }
            for j in 0..8 {
                unpack_32(&q[256 * j..256 * (j + 1)], None, row);
            }
        }
        WeightType::Q6K => {
            row.d.push(get16(2 * r));
            for j in 0..16 {
                row.sc.push(p[32 + 16 * j + r]);
            }
            for j in 0..8 {
                let q = &q[384 * j..384 * (j + 1)];
                let start = row.q.len();
                unpack_32(q, Some(&q[256..320]), row);
                for c in 0..4 {
                    let lo =
                        u64::from_le_bytes(q[320 + 16 * c..328 + 16 * c].try_into().expect("8"));
                    let hi =
                        u64::from_le_bytes(q[328 + 16 * c..336 + 16 * c].try_into().expect("8"));
                    for i in 0..4 {
                        let bit = 4 * r + i;
                        row.q[start + 4 * c + i] |= (((lo >> bit) & 1) as u8) << 5;
                        row.q[start + 16 + 4 * c + i] |= (((hi >> bit) & 1) as u8) << 5;
                    }
                }
            }
        }
        WeightType::F32 | WeightType::F16 | WeightType::BF16 => unreachable!(),
    }
}
