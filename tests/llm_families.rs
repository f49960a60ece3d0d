//! The families beyond Llama 2, Qwen2 and Phi-3 (Qwen3, Gemma 3, Phi-3.5 LongRoPE,
//! Mistral-Nemo's explicit head dimension, Mistral's sliding window) against a plain f32
//! forward pass written in the test (`llm_ref/reference.rs`, from llama.cpp's graphs), on
//! tiny random-weight GGUF files whose windows are shorter than the prompts: every token
//! of a prompt and six decode steps after it. (Qwen3 is also compared with candle's
//! model, and Qwen3 and Gemma 3 run on every kernel tier and in pieces, in
//! `tests/llm_engine.rs`; candle's Gemma 3 is wrong in details, see `ml::llm::model`.)

mod common;
#[path = "llm_ref/reference.rs"]
mod reference;

use std::path::{Path, PathBuf};

use common::logits::{argmax, rel_l2};
use ragd::ml::llm::tiny::{write_tiny_gguf_variant, TinyVariant};
use ragd::ml::llm::{Arch, Backend, CpuOptions, KvType, LlmEngine};
use ragd::ml::quant::WeightType;
use ragd::ml::MlError;
use reference::Reference;

/// Each case: a name, the family, its shape details.
fn cases() -> Vec<(&'static str, Arch, TinyVariant)> {
    let v = TinyVariant::default();
    vec![
        ("qwen3", Arch::Qwen3, v),
        ("gemma3", Arch::Gemma3, v),
        (
            "phi3-longrope",
            Arch::Phi3,
            TinyVariant {
                longrope: true,
                ..v
            },
        ),
        (
            "nemo-head-dim",
            Arch::Llama,
            TinyVariant {
                head_dim: Some(128),
                ..v
            },
        ),
        (
            "mistral-window",
            Arch::Llama,
            TinyVariant {
                window: Some(8),
                ..v
            },
        ),
    ]
}

fn file(dir: &Path, name: &str, arch: Arch, v: TinyVariant, ty: WeightType) -> PathBuf {
    let path = dir.join(format!("{name}-{}.gguf", ty.name()));
    write_tiny_gguf_variant(&path, arch, ty, v).unwrap();
    path
}

fn cpu(path: &Path, kv: KvType) -> LlmEngine {
    let backend = Backend::Cpu {
        options: CpuOptions {
            threads: Some(2),
            tier: None,
            kv,
        },
        prompt_cache_bytes: 0,
    };
    LlmEngine::load(path, backend).unwrap()
}

#[test]
fn new_families_match_the_f32_reference() {
    let dir = tempfile::tempdir().unwrap();
    for (name, arch, variant) in cases() {
        for ty in [WeightType::F32, WeightType::F16] {
            let path = file(dir.path(), name, arch, variant, ty);
            let reference = Reference::load(&path);
            for kv in [KvType::F32, KvType::F16] {
                let mut ours = cpu(&path, kv);
                let vocab = ours.tokenizer().vocab_size();
                let mut ids: Vec<u32> = (0..23).map(|i| ((i * 7919 + 13) % vocab) as u32).collect();
                let want = reference.forward(&ids);
                let got = ours.forward_all(&ids, 0).unwrap();
                let what = format!("{name} {} {kv:?} cache", ty.name());
                for (t, w) in want.iter().enumerate() {
                    let g = &got[t * vocab..(t + 1) * vocab];
                    let e = rel_l2(g, w);
                    assert!(e <= 1e-3, "{what}, prompt token {t}: relative L2 {e}");
                    assert_eq!(argmax(g), argmax(w), "{what}, prompt token {t}");
                }
                for step in 0..6 {
                    let next = argmax(want.last().unwrap()) as u32;
                    ids.push(next);
                    let got = ours.forward(&[next], ids.len() - 1).unwrap();
                    let want = reference.forward(&ids);
                    let w = want.last().unwrap();
                    let e = rel_l2(&got, w);
                    assert!(e <= 1e-3, "{what}, decode step {step}: relative L2 {e}");
                    assert_eq!(argmax(&got), argmax(w), "{what}, decode step {step}");
                }
            }
        }
    }
}

/// The details matter: the same files run as if the window, the LongRoPE factors or the
/// explicit head dimension were ignored differ from the reference far beyond 1e-3 (so the
/// comparisons above could fail).
#[test]
fn the_reference_sees_the_details() {
    let dir = tempfile::tempdir().unwrap();
    let ty = WeightType::F32;
    // Mistral with and without its window: same weights, other logits past the window.
    let plain = file(dir.path(), "plain", Arch::Llama, TinyVariant::default(), ty);
    let windowed = file(
        dir.path(),
        "windowed",
        Arch::Llama,
        TinyVariant {
            window: Some(8),
            ..TinyVariant::default()
        },
        ty,
    );
    let ids: Vec<u32> = (0..23).map(|i| (i * 37 % 300) as u32).collect();
    let (a, b) = (
        Reference::load(&plain).forward(&ids),
        Reference::load(&windowed).forward(&ids),
    );
    assert!(rel_l2(&a[5], &b[5]) < 1e-6, "inside the window");
    assert!(rel_l2(&a[22], &b[22]) > 1e-2, "past the window");
    let mut e = cpu(&windowed, KvType::F32);
    let got = e.forward(&ids, 0).unwrap();
    assert!(rel_l2(&got, &b[22]) <= 1e-3 && rel_l2(&got, &a[22]) > 1e-2);
}

#[test]
fn shapes_ragd_cannot_run_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let odd = TinyVariant {
        head_dim: Some(24),
        ..TinyVariant::default()
    };
    let path = file(dir.path(), "odd", Arch::Qwen3, odd, WeightType::F32);
    match LlmEngine::load(&path, Backend::cpu()) {
        Err(MlError::Load(msg)) => assert!(msg.contains("qwen3") && msg.contains("24"), "{msg}"),
        Err(e) => panic!("expected a load error, got {e}"),
        Ok(_) => panic!("heads of 24 dimensions loaded"),
    }
}
