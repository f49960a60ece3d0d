//! The packed CPU forward pass against candle's `BertModel` on small random encoders:
//! every token's final hidden state must agree, for sequences of different lengths
//! packed into one batch, with widths that are and are not multiples of the vector width.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use super::*;

/// Deterministic values in `[-scale, scale]` (a small LCG; no RNG dependency).
fn values(seed: &mut u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((*seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn config(hidden: usize, heads: usize, prefix: Option<&str>) -> Config {
    Config {
        vocab_size: 50,
        hidden_size: hidden,
        num_hidden_layers: 2,
        num_attention_heads: heads,
        intermediate_size: 4 * hidden,
        max_position_embeddings: 40,
        model_type: prefix.map(str::to_owned),
        ..Config::default()
    }
}

/// Every tensor a BERT checkpoint holds, named as in the file, optionally prefixed.
fn random_weights(c: &Config, prefix: &str) -> HashMap<String, Tensor> {
    let (h, i) = (c.hidden_size, c.intermediate_size);
    let mut seed = 7u64;
    let mut shapes: Vec<(String, Vec<usize>, f32)> = vec![
        (
            "embeddings.word_embeddings.weight".into(),
            vec![c.vocab_size, h],
            1.0,
        ),
        (
            "embeddings.position_embeddings.weight".into(),
            vec![c.max_position_embeddings, h],
            0.5,
        ),
        (
            "embeddings.token_type_embeddings.weight".into(),
            vec![c.type_vocab_size, h],
            0.5,
        ),
    ];
    let norm = |name: &str, shapes: &mut Vec<(String, Vec<usize>, f32)>| {
        shapes.push((format!("{name}.weight"), vec![h], -1.0));
        shapes.push((format!("{name}.bias"), vec![h], 0.1));
    };
    norm("embeddings.LayerNorm", &mut shapes);
    for l in 0..c.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", i, h),
            ("output.dense", h, i),
        ] {
            let scale = 1.5 / (inp as f32).sqrt();
            shapes.push((format!("{p}.{name}.weight"), vec![out, inp], scale));
            shapes.push((format!("{p}.{name}.bias"), vec![out], 0.2));
        }
        norm(&format!("{p}.attention.output.LayerNorm"), &mut shapes);
        norm(&format!("{p}.output.LayerNorm"), &mut shapes);
    }
    shapes
        .into_iter()
        .map(|(name, shape, scale)| {
            let n = shape.iter().product();
            // A negative scale marks a LayerNorm gain: around 1, not around 0.
            let data = match scale < 0.0 {
                true => values(&mut seed, n, 0.3)
                    .into_iter()
                    .map(|v| 1.0 + v)
                    .collect(),
                false => values(&mut seed, n, scale),
            };
            let t = Tensor::from_vec(data, shape, &Device::Cpu).expect("tensor");
            (format!("{prefix}{name}"), t)
        })
        .collect()
}

fn candle_hidden(model: &BertModel, ids: &[u32]) -> Vec<f32> {
    let ids = Tensor::new(ids, &Device::Cpu)
        .and_then(|t| t.unsqueeze(0))
        .expect("ids");
    let types = ids.zeros_like().expect("types");
    let out = model.forward(&ids, &types, None).expect("candle forward");
    out.flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .expect("to_vec")
}

/// The packed pass in `arithmetic` against candle: every hidden state within 1e-4 in
/// f32; in a rounded arithmetic, all of them within `tolerance` relative L2 (the
/// rounding of a random model's activations, not a real model's accuracy, which
/// tests/embedder.rs checks against the reference vectors).
fn compare(
    hidden: usize,
    heads: usize,
    prefix: Option<&str>,
    arithmetic: Arithmetic,
    tolerance: f64,
) {
    let c = config(hidden, heads, prefix);
    let tensors = random_weights(&c, &prefix.map(|p| format!("{p}.")).unwrap_or_default());
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let fast = CpuBert::load(&vb, &c, arithmetic).expect("cpu load");
    let slow = BertModel::load(vb, &c).expect("candle load");
    let lens = [1usize, 7, 40, 19, 2, 33];
    let mut seed = 99u64;
    let seqs: Vec<Vec<u32>> = lens
        .iter()
        .map(|&n| {
            values(&mut seed, n, 1.0)
                .iter()
                .map(|v| ((v + 1.0) * 24.9) as u32)
                .collect()
        })
        .collect();
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let mut bufs = Buffers::default();
    let spans = fast
        .encode(
            &mut bufs,
            Packed {
                ids: &refs,
                types: None,
            },
            &mut || {},
        )
        .expect("encode");
    let (mut worst, mut err, mut norm) = (0.0f32, 0.0f64, 0.0f64);
    for (ids, span) in seqs.iter().zip(&spans) {
        let want = candle_hidden(&slow, ids);
        let got = &bufs.hidden[span.start * hidden..(span.start + span.len) * hidden];
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            worst = worst.max((a - b).abs());
            err += f64::from(a - b).powi(2);
            norm += f64::from(*b).powi(2);
        }
    }
    let relative = (err / norm).sqrt();
    let name = fast.arithmetic().name();
    eprintln!("{name}, hidden {hidden}: max difference {worst}, relative L2 {relative:.2e}");
    if arithmetic == Arithmetic::F32 {
        assert!(
            worst < 1e-4,
            "hidden {hidden}, heads {heads}: max difference {worst}"
        );
    } else {
        assert!(
            relative < tolerance,
            "{name}, hidden {hidden}: relative L2 {relative}"
        );
    }

    // Pooling: mean of the rows, unit length; the same text alone gives the same vector.
    let pooled = fast.embed(&refs, Pooling::Mean, &mut || {}).expect("embed");
    let alone = fast
        .embed(&refs[2..3], Pooling::Mean, &mut || {})
        .expect("embed one");
    let norm: f32 = pooled[2].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5);
    for (a, b) in pooled[2].iter().zip(&alone[0]) {
        assert!((a - b).abs() < 1e-5);
    }
}

#[test]
fn matches_candle_on_random_weights() {
    compare(64, 4, None, Arithmetic::F32, 0.0);
}

#[test]
fn matches_candle_with_odd_widths_and_a_prefix() {
    compare(36, 3, Some("bert"), Arithmetic::F32, 0.0);
}

#[test]
fn rounded_arithmetics_stay_close_to_candle() {
    // 128 wide: every product's inputs are whole blocks of the int8 path (64), so its
    // own kernel runs, not a fallback.
    for arithmetic in [
        Arithmetic::pick(Precision::Bf16),
        Arithmetic::pick(Precision::Int8),
        Arithmetic::pick(Precision::Int16),
    ] {
        compare(128, 4, None, arithmetic, 3e-2);
    }
}

#[test]
fn refuses_unknown_tokens_and_overlong_texts() {
    let c = config(16, 2, None);
    let vb = VarBuilder::from_tensors(random_weights(&c, ""), DType::F32, &Device::Cpu);
    let fast = CpuBert::load(&vb, &c, Arithmetic::F32).expect("cpu load");
    assert!(fast.embed(&[&[1, 50]], Pooling::Mean, &mut || {}).is_err());
    assert!(fast.embed(&[&[1; 41]], Pooling::Mean, &mut || {}).is_err());
    assert!(fast.embed(&[&[]], Pooling::Mean, &mut || {}).is_err());
    assert!(fast.embed(&[&[1; 40]], Pooling::Cls, &mut || {}).is_ok());
}

#[test]
fn block_sizes_split_large_passes_evenly_and_keep_small_ones_whole() {
    // A search query's pass is one block (one thread).
    for n in [1, 7, ONE_BLOCK_ROWS] {
        assert_eq!(block_rows(n, 2), n);
    }
    // Larger passes: blocks of at most MAX_BLOCK_ROWS, split between the threads.
    for n in [ONE_BLOCK_ROWS + 1, 176, 1000, 5632, 8192] {
        for threads in [1, 2, 4] {
            let b = block_rows(n, threads);
            assert!(b <= MAX_BLOCK_ROWS, "{n} rows, {threads} threads: {b}");
            let blocks = n.div_ceil(b);
            assert!(
                threads == 1 || blocks > 1,
                "{n} rows, {threads} threads: one block"
            );
        }
    }
}
