//! Inputs shared by the benches.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The installed default embedder's folder.
pub fn embedder_dir() -> PathBuf {
    std::env::var_os("RAGD_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
        .join("all-MiniLM-L6-v2")
}

/// The peers' benchmark passages: `make_passages(n, seed=1234)` from
/// `../shared/tools/passages.py`, produced by running that script.
pub fn peer_passages(n: usize) -> Vec<String> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import json, sys; sys.path.insert(0, {:?}); from passages import make_passages; print(json.dumps(make_passages({n}, seed=1234)))",
            tools.display().to_string()
        ))
        .output()
        .expect("python3 is needed to generate the peers' passages");
    assert!(
        out.status.success(),
        "passages.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("passages JSON")
}

/// Deterministic English-like text of exactly `tokens` tokens (special tokens included)
/// for the given counter.
pub fn text_of_tokens(count: impl Fn(&str) -> usize, tokens: usize, seed: usize) -> String {
    const WORDS: &[&str] = &[
        "retrieval",
        "index",
        "document",
        "passage",
        "the",
        "model",
        "of",
        "server",
        "query",
        "vector",
        "search",
        "answer",
        "local",
        "memory",
        "token",
        "and",
        "engine",
        "quickly",
        "table",
        "report",
    ];
    let mut words: Vec<&str> = Vec::new();
    let mut i = seed;
    while count(&words.join(" ")) < tokens {
        words.push(WORDS[i % WORDS.len()]);
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    while count(&words.join(" ")) > tokens {
        words.pop();
    }
    words.join(" ")
}

/// A random-weight cross-encoder of cross-encoder/ms-marco-MiniLM-L-6-v2's exact shape,
/// written under `dir` (the tokenizer is the installed embedder's: the same vocabulary).
pub fn random_minilm_cross_encoder(dir: &Path) -> PathBuf {
    let model = dir.join("ms-marco-MiniLM-L-6-v2-shape-random");
    ragd::ml::reranker::write_random_cross_encoder_shaped(
        &model,
        &embedder_dir().join("tokenizer.json"),
        ragd::ml::reranker::CrossEncoderShape::MINILM_L6,
    )
    .expect("write the random cross-encoder (run scripts/setup.sh for the tokenizer)");
    model
}

/// The first `words` words of each of the peers' first `n` passages.
pub fn passage_heads(n: usize, words: usize) -> Vec<String> {
    peer_passages(n)
        .iter()
        .map(|p| {
            p.split_whitespace()
                .take(words)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A retrieval set (`{"docs": [..], "queries": [{"text", "relevant"}], "fingerprint"}`,
/// one relevant document per query, as `scripts/peers/debian_retrieval_set.py` writes
/// it): its documents and (query, relevant document) pairs, and a line naming it.
pub struct RetrievalSet {
    pub docs: Vec<String>,
    pub queries: Vec<(String, usize)>,
    pub name: String,
}

impl RetrievalSet {
    pub fn load(path: &str) -> Self {
        let set: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).expect("read the set")).expect("JSON");
        let docs: Vec<String> = set["docs"]
            .as_array()
            .expect("docs")
            .iter()
            .map(|d| d.as_str().expect("a document").to_owned())
            .collect();
        let queries: Vec<(String, usize)> = set["queries"]
            .as_array()
            .expect("queries")
            .iter()
            .map(|q| {
                (
                    q["text"].as_str().expect("a query").to_owned(),
                    q["relevant"].as_u64().expect("relevant") as usize,
                )
            })
            .collect();
        let name = format!(
            "set {} ({}): {} documents, {} queries",
            path,
            set["fingerprint"].as_str().unwrap_or("?"),
            docs.len(),
            queries.len()
        );
        Self {
            docs,
            queries,
            name,
        }
    }
}
