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
