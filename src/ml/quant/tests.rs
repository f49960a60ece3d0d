//! The kernels against ggml's formats (through candle's implementation of them) and
//! every tier against the scalar reference, on shapes with tails.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Module, Tensor};

use super::*;

mod gguf_py;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Roughly normal values (sum of uniforms), scaled.
    fn normal(&mut self, scale: f32) -> f32 {
        let s: f32 = (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
            .sum();
        (s - 2.0) * scale
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal(scale)).collect()
    }
}

/// candle's dtype for `ty`; `None` for the IQ4 types, which candle 0.9.2 lacks (those are
/// checked against gguf-py in `gguf_py.rs`).
fn ggml(ty: WeightType) -> Option<GgmlDType> {
    Some(match ty {
        WeightType::F32 => GgmlDType::F32,
        WeightType::F16 => GgmlDType::F16,
        WeightType::BF16 => GgmlDType::BF16,
        WeightType::Q8_0 => GgmlDType::Q8_0,
        WeightType::Q4_0 => GgmlDType::Q4_0,
        WeightType::Q4_1 => GgmlDType::Q4_1,
        WeightType::Q5_0 => GgmlDType::Q5_0,
        WeightType::Q5_1 => GgmlDType::Q5_1,
        WeightType::Q4K => GgmlDType::Q4K,
        WeightType::Q5K => GgmlDType::Q5K,
        WeightType::Q6K => GgmlDType::Q6K,
        WeightType::Q2K => GgmlDType::Q2K,
        WeightType::Q3K => GgmlDType::Q3K,
        WeightType::IQ4_NL | WeightType::IQ4_XS => return None,
    })
}

/// The types candle can quantize and multiply.
fn candle_types() -> Vec<WeightType> {
    WeightType::ALL
        .into_iter()
        .filter(|&t| ggml(t).is_some())
        .collect()
}

/// A random `rows × cols` matrix quantized by candle (ggml's reference quantizers): the
/// file bytes and candle's own tensor.
fn candle_matrix(ty: WeightType, rows: usize, cols: usize, rng: &mut Rng) -> (Vec<u8>, QTensor) {
    let w = rng.vec(rows * cols, 0.05);
    let t = Tensor::from_vec(w, (rows, cols), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, ggml(ty).unwrap()).unwrap();
    (q.data().unwrap().into_owned(), q)
}

/// Random file bytes of type `ty` without quantizing (fast for big shapes): random quants
/// with small, finite scales.
fn random_bytes(ty: WeightType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n = rows * formats::row_bytes(ty, cols);
    let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    let h = |v: f32| half::f16::from_f32(v).to_bits().to_le_bytes();
    for block in b.chunks_exact_mut(ty.block_bytes()) {
        let small = h(0.001 + (rng.next() % 100) as f32 * 1e-5);
        match ty {
            WeightType::Q8_0 | WeightType::Q4_0 | WeightType::Q5_0 => {
                block[0..2].copy_from_slice(&small)
            }
            WeightType::Q4_1 | WeightType::Q5_1 | WeightType::Q4K | WeightType::Q5K => {
                block[0..2].copy_from_slice(&small);
                block[2..4].copy_from_slice(&h(-0.002));
            }
            WeightType::Q6K => block[208..210].copy_from_slice(&small),
            WeightType::Q2K => {
                block[80..82].copy_from_slice(&small);
                block[82..84].copy_from_slice(&h(0.002));
            }
            WeightType::Q3K => block[108..110].copy_from_slice(&small),
            WeightType::IQ4_NL | WeightType::IQ4_XS => block[0..2].copy_from_slice(&small),
            _ => unreachable!(),
        }
    }
    b
}

fn rel_l2(a: &[f32], b: &[f32]) -> f32 {
    let num: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f32 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-30)).sqrt()
}

fn quant_types() -> Vec<WeightType> {
    WeightType::ALL
        .into_iter()
        .filter(|t| !matches!(t, WeightType::F32 | WeightType::F16 | WeightType::BF16))
        .collect()
}

fn run_tier(tier: Tier, w: &PackedMatrix, x: &[f32], tokens: usize) -> Vec<f32> {
    let mut acts = Acts::new();
    acts.quantize(tier, w.ty().act_kind(), x, tokens, w.cols());
    let mut out = vec![f32::NAN; tokens * w.rows()];
    matmul(tier, w, &acts, &mut out, w.rows(), 0..w.groups());
    out
}

#[test]
fn repacked_rows_dequantize_exactly_as_ggml() {
    let mut rng = Rng(1);
    for ty in candle_types() {
        let (rows, cols) = (21, 512);
        let (bytes, q) = candle_matrix(ty, rows, cols, &mut rng);
        let reference = q
            .dequantize(&Device::Cpu)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let packed = PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap();
        let mut row = vec![0f32; cols];
        for (r, want) in reference.iter().enumerate() {
            packed.dequantize_row(r, &mut row);
            assert_eq!(&row, want, "{} row {r}", ty.name());
        }
    }
}

#[test]
fn canonical_rows_survive_packing() {
    let mut rng = Rng(2);
    for ty in quant_types() {
        let cols = if ty.block_size() == 256 { 768 } else { 96 };
        let rows = 35;
        let bytes = random_bytes(ty, rows, cols, &mut rng);
        let packed = PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap();
        let rb = formats::row_bytes(ty, cols);
        for r in 0..rows {
            let want = formats::decode_row(ty, &bytes[r * rb..(r + 1) * rb], cols);
            let got = packed.canonical_row(r);
            assert_eq!(got.q, want.q, "{} row {r} values", ty.name());
            assert_eq!(
                (got.d, got.m, got.sc, got.mins),
                (want.d, want.m, want.sc, want.mins)
            );
        }
    }
}

#[test]
fn scalar_kernel_matches_candle_matmul() {
    let mut rng = Rng(3);
    for ty in candle_types() {
        let (rows, cols, tokens) = (37, 512, 5);
        let (bytes, q) = candle_matrix(ty, rows, cols, &mut rng);
        let x = rng.vec(tokens * cols, 1.0);
        let packed = PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap();
        let ours = run_tier(Tier::Scalar, &packed, &x, tokens);
        let mm = candle_core::quantized::QMatMul::from_qtensor(q).unwrap();
        let xt = Tensor::from_vec(x, (tokens, cols), &Device::Cpu).unwrap();
        let theirs: Vec<f32> = mm
            .forward(&xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let e = rel_l2(&ours, &theirs);
        assert!(e < 1e-5, "{}: relative L2 {e} against candle", ty.name());
    }
}

#[test]
fn every_tier_matches_the_scalar_reference_on_shapes_with_tails() {
    let mut rng = Rng(4);
    let tiers = Tier::available();
    // Widths of Qwen2.5-0.5B (896, 4864, the 151,936-row output layer; 896 is not a
    // multiple of 256, so the K types use the next multiple), token counts 1, 5, 67, 512.
    let shapes: &[(usize, usize, &[usize])] = &[
        (896, 896, &[1, 5, 67]),
        (4864, 896, &[1]),
        (899, 4864, &[5]),
        (151_936, 64, &[1]),
        (53, 512, &[512]),
    ];
    for ty in WeightType::ALL {
        for &(rows, cols, token_counts) in shapes {
            let cols = if ty.block_size() == 256 {
                cols.div_ceil(256) * 256
            } else {
                cols
            };
            let packed = if ty.block_size() == 1 {
                let w = rng.vec(rows * cols, 0.05);
                let bytes: Vec<u8> = match ty {
                    WeightType::F32 => w.iter().flat_map(|v| v.to_le_bytes()).collect(),
                    WeightType::F16 => w
                        .iter()
                        .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
                        .collect(),
                    _ => w
                        .iter()
                        .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
                        .collect(),
                };
                PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap()
            } else {
                PackedMatrix::from_gguf(ty, rows, cols, &random_bytes(ty, rows, cols, &mut rng))
                    .unwrap()
            };
            for &tokens in token_counts {
                let x = rng.vec(tokens * cols, 1.0);
                let reference = run_tier(Tier::Scalar, &packed, &x, tokens);
                for &tier in &tiers[1..] {
                    let got = run_tier(tier, &packed, &x, tokens);
                    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
                    for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
                        assert!(
                            (g - r).abs() <= 1e-5 * scale.max(1e-6) + 1e-5 * r.abs(),
                            "{} {rows}x{cols} tokens {tokens} {tier:?}: out[{i}] {g} vs {r}",
                            ty.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn quantized_activations_are_the_same_on_every_tier() {
    let mut rng = Rng(5);
    for kind in [ActKind::Q8, ActKind::Q8K] {
        // 1,024 columns are whole runs of 16 blocks for the AVX-512 row quantizer, 576
        // (SmolLM2's width) one run and 2 blocks, 96 blocks only.
        for (tokens, cols) in [(1, 1024), (3, 1024), (67, 1024), (5, 576), (4, 96)] {
            if kind == ActKind::Q8K && cols % 256 != 0 {
                continue;
            }
            let mut x = rng.vec(tokens * cols, 2.0);
            // Edge cases: an all-zero block, exact halves, the largest value negative.
            x[..32].fill(0.0);
            x[32] = -3.0;
            x[33] = 1.5;
            // Scales that round to f16 subnormals, and sums whose f16 product overflows.
            x[64..96].iter_mut().for_each(|v| *v *= 1e-6);
            x[96..128].iter_mut().for_each(|v| *v *= 4e5);
            let mut reference = Acts::new();
            reference.quantize(Tier::Scalar, kind, &x, tokens, cols);
            for tier in Tier::available() {
                let mut a = Acts::new();
                a.quantize(tier, kind, &x, tokens, cols);
                assert_eq!(a.qs, reference.qs, "{tier:?} {kind:?} values");
                assert_eq!(a.d, reference.d, "{tier:?} {kind:?} scales");
                assert_eq!(a.s, reference.s, "{tier:?} {kind:?} Q8_1 sums");
                assert_eq!(a.sum16, reference.sum16);
                assert_eq!(a.sum32, reference.sum32);
            }
        }
    }
}

#[test]
fn partial_group_ranges_write_only_their_rows() {
    let mut rng = Rng(6);
    let (rows, cols) = (50, 64);
    let packed = PackedMatrix::from_gguf(
        WeightType::Q4_0,
        rows,
        cols,
        &random_bytes(WeightType::Q4_0, rows, cols, &mut rng),
    )
    .unwrap();
    let x = rng.vec(3 * cols, 1.0);
    for tier in Tier::available() {
        let mut acts = Acts::new();
        acts.quantize(tier, ActKind::Q8, &x, 3, cols);
        let mut out = vec![f32::NAN; 3 * rows];
        matmul(tier, &packed, &acts, &mut out, rows, 1..3);
        for t in 0..3 {
            for r in 0..rows {
                assert_eq!(
                    out[t * rows + r].is_nan(),
                    !(16..48).contains(&r),
                    "{tier:?} row {r}"
                );
            }
        }
    }
}

#[test]
fn weights_quantized_by_ragd_match_ggml() {
    let mut rng = Rng(7);
    for ty in [
        WeightType::Q8_0,
        WeightType::Q4_0,
        WeightType::Q4_1,
        WeightType::Q5_0,
        WeightType::Q5_1,
    ] {
        let (rows, cols) = (5, 128);
        let w = rng.vec(rows * cols, 0.1);
        let ours = acts::quantize_weights(ty, cols, &w).unwrap();
        let t = Tensor::from_vec(w, (rows, cols), &Device::Cpu).unwrap();
        let theirs = QTensor::quantize(&t, ggml(ty).unwrap())
            .unwrap()
            .data()
            .unwrap()
            .into_owned();
        assert_eq!(ours, theirs, "{}", ty.name());
    }
}
