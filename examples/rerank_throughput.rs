//! Cross-encoder throughput: (query, passage) pairs scored per second by a random-weight
//! cross-encoder with the exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2, one query
//! against 100 passages of 100 words (the peers' passages), through candle's padded
//! pass (the reference), the packed CPU pass in f32, and the default arithmetic. Prints
//! the median of the runs and the largest score difference to the reference. Run
//! through `scripts/bench_embedder.sh`. Usage: `rerank_throughput [runs]`.

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use ragd::ml::reranker::CrossEncoder;
use ragd::ml::Precision;

const QUERY: &str = "how does the search engine rank documents for a user query";

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = common::random_minilm_cross_encoder(tmp.path());
    let passages = common::passage_heads(100, 100);
    let models = [
        ("candle (padded, f32)", CrossEncoder::load_reference(&dir)),
        (
            "packed f32",
            CrossEncoder::load_with(&dir, candle_core::Device::Cpu, Precision::F32),
        ),
        (
            "packed default",
            CrossEncoder::load_with(&dir, candle_core::Device::Cpu, Precision::Auto),
        ),
    ];
    let mut reference: Option<Vec<f32>> = None;
    println!("| pass | arithmetic | pairs/s | largest score difference to candle |");
    println!("|---|---|---|---|");
    for (name, model) in models {
        let model = model.expect("load the cross-encoder");
        let scores = model.score(QUERY, &passages).expect("score");
        let mut rates: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                model.score(QUERY, &passages).expect("score");
                passages.len() as f64 / t.elapsed().as_secs_f64()
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        let diff = reference.get_or_insert_with(|| scores.clone());
        let worst = diff
            .iter()
            .zip(&scores)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        println!(
            "| {name} | {} | {:.1} | {worst:.2e} |",
            model.arithmetic(),
            rates[rates.len() / 2]
        );
    }
}
