//! The installed all-MiniLM-L6-v2 through both backends: the packed CPU forward pass
//! must give candle's vectors (the integration tests compare both with
//! sentence-transformers' own output).

use std::path::PathBuf;

use super::*;

fn model_dir() -> PathBuf {
    std::env::var_os("RAGD_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
        .join("all-MiniLM-L6-v2")
}

#[test]
fn cpu_forward_pass_matches_candle_on_the_real_model() {
    let load = |force_candle| {
        BertEmbedder::load_backend(&model_dir(), Device::Cpu, 8, Precision::F32, force_candle)
            .unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh to install the embedder"))
    };
    let (fast, slow) = (load(false), load(true));
    assert!(matches!(fast.backend, Backend::Cpu(_)));
    assert!(matches!(slow.backend, Backend::Candle(_)));
    let long = "the quick brown fox jumps over the lazy dog ".repeat(40);
    let texts = [
        "hello",
        "A local knowledge base answers questions from your own documents.",
        "قاعدة المعرفة المحلية تجيب عن الأسئلة",
        "知识库 🙂 検索",
        long.as_str(),
    ];
    let (a, b) = (fast.embed(&texts).unwrap(), slow.embed(&texts).unwrap());
    for ((x, y), text) in a.iter().zip(&b).zip(texts) {
        let dot: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
        assert!(dot > 0.99999, "cosine {dot} for {text:?}");
    }
}

#[test]
fn the_gpu_pass_in_f16_stays_within_cosine_0_999_of_f32() {
    // The code path a GPU runs (ragd's BERT on candle), on the CPU device: f16 and bf16
    // products against the exact f32 pass, on the real model, a batch of mixed lengths.
    let load = |precision| {
        BertEmbedder::load_backend(&model_dir(), Device::Cpu, 8, precision, true)
            .unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh to install the embedder"))
    };
    let long = "maintenance of the cooling pump follows the schedule in annex B ".repeat(30);
    let texts = [
        "hello",
        "A local knowledge base answers questions from your own documents.",
        "قاعدة المعرفة المحلية تجيب عن الأسئلة",
        long.as_str(),
        "知识库 🙂 検索",
    ];
    let reference = load(Precision::F32);
    assert_eq!(reference.arithmetic(), "candle-f32");
    let want = reference.embed(&texts).unwrap();
    // bf16 runs on GPUs only (candle's CPU pass has no bf16 products): gpu_check.sh
    // measures it there.
    let m = load(Precision::F16);
    assert_eq!(m.arithmetic(), "candle-f16");
    let got = m.embed(&texts).unwrap();
    for ((x, y), text) in got.iter().zip(&want).zip(texts) {
        assert_eq!(x.len(), y.len());
        let dot: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
        assert!(dot >= 0.999, "f16: cosine {dot} for {text:?}");
    }
}

#[test]
fn precision_is_applied_or_refused_never_ignored() {
    let err = |precision, candle| match BertEmbedder::load_backend(
        &model_dir(),
        Device::Cpu,
        8,
        precision,
        candle,
    ) {
        Ok(_) => panic!("{precision:?} (candle: {candle}) loaded"),
        Err(e) => e.to_string(),
    };
    assert!(err(Precision::F16, false).contains("runs on a GPU only"));
    assert!(err(Precision::Int8, true).contains("CPU engine only"));
    assert!(err(Precision::Bf16, true).contains("no bf16 products"));
    assert_eq!("f16".parse::<Precision>(), Ok(Precision::F16));
}

#[test]
fn padded_passes_are_cut_by_rows_and_by_padded_tokens() {
    let lens = [3usize, 5, 5, 9, 100, 100, 300];
    let order: Vec<usize> = (0..lens.len()).collect();
    let groups = padded_groups(&order, |i| lens[i], 4, 400);
    // Every index once, in order.
    assert_eq!(groups.concat(), order);
    for g in &groups {
        let longest = g.iter().map(|&i| lens[i]).max().unwrap();
        assert!(g.len() <= 4);
        assert!(g.len() == 1 || g.len() * longest <= 400, "{g:?}");
    }
    assert_eq!(groups, vec![vec![0, 1, 2, 3], vec![4, 5], vec![6]]);
    // A row longer than the budget goes alone rather than failing.
    assert_eq!(padded_groups(&[0], |_| 10_000, 4, 400), vec![vec![0]]);
}
