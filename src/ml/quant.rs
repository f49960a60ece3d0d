//! Block-quantized matrices and the CPU kernels that multiply them: the arithmetic of
//! ragd's own LLM engine (and of any other model that wants int8 speed).
//!
//! A weight matrix from a GGUF file is decoded ([`formats`]) and repacked once, at load,
//! into [`PackedMatrix`]: rows in groups of 16, each group's values interleaved so that one
//! 64-byte vector holds four consecutive values of all 16 rows, and the scales in a stream
//! of their own. Activations are quantized once per matrix input ([`acts`]) the way ggml
//! does (int8 blocks of 32 with an f16 scale for the Q4/Q5/Q8 types, blocks of 256 for the
//! K types and IQ4_XS), so a product is integer dot products of unsigned weights with signed
//! activations, folded into floats block by block.
//!
//! Three kernel tiers compute exactly the same integers and the same floats up to
//! rounding: [`Tier::Scalar`] (the reference, any CPU), [`Tier::Avx2`] (AVX2 + FMA +
//! F16C) and [`Tier::Avx512`] (AVX-512 F/BW/VL with VNNI). The best the CPU offers is
//! chosen at run time; no build flag is needed.

pub mod acts;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod formats;
pub mod gguf;
pub mod packed;
mod scalar;

use std::ops::Range;

pub use acts::{ActKind, Acts};
pub use packed::PackedMatrix;

/// Rows per interleaved group of a packed matrix.
pub const GROUP: usize = 16;

/// The tensor types the kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum WeightType {
    /// 32-bit floats.
    F32,
    /// 16-bit IEEE floats.
    F16,
    /// bfloat16.
    BF16,
    /// 8-bit, blocks of 32 with an f16 scale.
    Q8_0,
    /// 4-bit, blocks of 32, scale and implicit offset 8.
    Q4_0,
    /// 4-bit, blocks of 32, scale and min.
    Q4_1,
    /// 5-bit, blocks of 32, scale and implicit offset 16.
    Q5_0,
    /// 5-bit, blocks of 32, scale and min.
    Q5_1,
    /// 4-bit K-quant: super-blocks of 256 in 8 sub-blocks with 6-bit scales and mins.
    Q4K,
    /// 5-bit K-quant, laid out as Q4_K plus a high-bit plane.
    Q5K,
    /// 6-bit K-quant: super-blocks of 256 in 16 sub-blocks with 8-bit scales.
    Q6K,
    /// 2-bit K-quant: super-blocks of 256 in 16 sub-blocks with 4-bit scales and mins.
    Q2K,
    /// 3-bit K-quant: super-blocks of 256 in 16 sub-blocks with signed 6-bit scales.
    Q3K,
    /// 4-bit non-linear: blocks of 32 indexing ggml's `kvalues_iq4nl` table, f16 scale.
    IQ4_NL,
    /// 4-bit non-linear super-blocks of 256: 8 sub-blocks with signed 6-bit scales.
    IQ4_XS,
}

impl WeightType {
    /// Values per block in the file.
    pub fn block_size(self) -> usize {
        match self {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => 1,
            WeightType::Q8_0
            | WeightType::Q4_0
            | WeightType::Q4_1
            | WeightType::Q5_0
            | WeightType::Q5_1
            | WeightType::IQ4_NL => 32,
            WeightType::Q4K
            | WeightType::Q5K
            | WeightType::Q6K
            | WeightType::Q2K
            | WeightType::Q3K
            | WeightType::IQ4_XS => 256,
        }
    }

    /// Bytes per block in the file.
    pub fn block_bytes(self) -> usize {
        match self {
            WeightType::F32 => 4,
            WeightType::F16 | WeightType::BF16 => 2,
            WeightType::Q8_0 => 34,
            WeightType::Q4_0 => 18,
            WeightType::Q4_1 => 20,
            WeightType::Q5_0 => 22,
            WeightType::Q5_1 => 24,
            WeightType::Q4K => 144,
            WeightType::Q5K => 176,
            WeightType::Q6K => 210,
            WeightType::Q2K => 84,
            WeightType::Q3K => 110,
            WeightType::IQ4_NL => 18,
            WeightType::IQ4_XS => 136,
        }
    }

    /// The type's name as ggml writes it.
    pub fn name(self) -> &'static str {
        match self {
            WeightType::F32 => "F32",
            WeightType::F16 => "F16",
            WeightType::BF16 => "BF16",
            WeightType::Q8_0 => "Q8_0",
            WeightType::Q4_0 => "Q4_0",
            WeightType::Q4_1 => "Q4_1",
            WeightType::Q5_0 => "Q5_0",
            WeightType::Q5_1 => "Q5_1",
            WeightType::Q4K => "Q4_K",
            WeightType::Q5K => "Q5_K",
            WeightType::Q6K => "Q6_K",
            WeightType::Q2K => "Q2_K",
            WeightType::Q3K => "Q3_K",
            WeightType::IQ4_NL => "IQ4_NL",
            WeightType::IQ4_XS => "IQ4_XS",
        }
    }

    /// How this type's inputs are quantized.
    pub fn act_kind(self) -> ActKind {
        match self {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => ActKind::F32,
            WeightType::Q8_0 | WeightType::Q4_0 | WeightType::Q5_0 => ActKind::Q8,
            WeightType::Q4_1 | WeightType::Q5_1 | WeightType::IQ4_NL => ActKind::Q8,
            WeightType::Q4K
            | WeightType::Q5K
            | WeightType::Q6K
            | WeightType::Q2K
            | WeightType::Q3K
            | WeightType::IQ4_XS => ActKind::Q8K,
        }
    }

    /// Every type, for tests and benches.
    pub const ALL: [WeightType; 15] = [
        WeightType::F32,
        WeightType::F16,
        WeightType::BF16,
        WeightType::Q8_0,
        WeightType::Q4_0,
        WeightType::Q4_1,
        WeightType::Q5_0,
        WeightType::Q5_1,
        WeightType::Q4K,
        WeightType::Q5K,
        WeightType::Q6K,
        WeightType::Q2K,
        WeightType::Q3K,
        WeightType::IQ4_NL,
        WeightType::IQ4_XS,
    ];
}

/// The instruction set the kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Plain Rust, any CPU: the reference.
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL/DQ with VNNI (integer dot products).
    Avx512,
}

impl Tier {
    /// The best tier this CPU runs.
    pub fn detect() -> Tier {
        *Tier::available().last().unwrap_or(&Tier::Scalar)
    }

    /// Every tier this CPU runs, slowest first.
    pub fn available() -> Vec<Tier> {
        let mut tiers = vec![Tier::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
            {
                tiers.push(Tier::Avx2);
                if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512dq")
                    && is_x86_feature_detected!("avx512vnni")
                {
                    tiers.push(Tier::Avx512);
                }
            }
        }
        tiers
    }

    /// The tier's name for logs.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Scalar => "scalar",
            Tier::Avx2 => "avx2",
            Tier::Avx512 => "avx512-vnni",
        }
    }

    /// Parses a tier name (`scalar`, `avx2`, `avx512`); `None` for anything else.
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "scalar" => Some(Tier::Scalar),
            "avx2" => Some(Tier::Avx2),
            "avx512" | "avx512-vnni" => Some(Tier::Avx512),
            _ => None,
        }
    }
}

/// `out[t][r] = Σ_k w[r][k] · x[t][k]` for the rows of `w` in `groups` (groups of
/// [`GROUP`] rows) and every token `t` of `x`; `out` holds `x.tokens()` rows of `ldo`
/// floats. `x` must be quantized for `w` ([`WeightType::act_kind`]) and `tier` must be
/// one the CPU runs ([`Tier::available`]).
pub fn matmul(
    tier: Tier,
    w: &PackedMatrix,
    x: &Acts,
    out: &mut [f32],
    ldo: usize,
    groups: Range<usize>,
) {
    assert!(ldo >= w.rows() && out.len() >= (x.tokens().max(1) - 1) * ldo + w.rows());
    // SAFETY: `out` is exclusively borrowed and large enough (checked above).
    unsafe { matmul_raw(tier, w, x, out.as_mut_ptr(), ldo, groups) }
}

/// [`matmul`] writing through a raw pointer, so threads can fill disjoint rows of one
/// output buffer.
///
/// # Safety
/// `out` must point at `x.tokens()` rows of `ldo >= w.rows()` writable floats, and no
/// other thread may access the elements of the rows in `groups` while this runs.
pub unsafe fn matmul_raw(
    tier: Tier,
    w: &PackedMatrix,
    x: &Acts,
    out: *mut f32,
    ldo: usize,
    groups: Range<usize>,
) {
    assert_eq!(x.kind(), w.ty().act_kind(), "activations of the wrong kind");
    assert_eq!(x.cols(), w.cols(), "inner dimensions differ");
    assert!(groups.end <= w.groups() && ldo >= w.rows());
    if groups.is_empty() || x.tokens() == 0 {
        return;
    }
    match tier {
        Tier::Scalar => scalar::matmul(w, x, out, ldo, groups),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => avx2::matmul(w, x, out, ldo, groups),
        #[cfg(target_arch = "x86_64")]
        Tier::Avx512 => avx512::matmul(w, x, out, ldo, groups),
        #[cfg(not(target_arch = "x86_64"))]
        _ => scalar::matmul(w, x, out, ldo, groups),
    }
}

#[cfg(test)]
mod tests;
