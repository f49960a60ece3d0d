//! nDCG@10 of the embedder's default path against its exact f32 path on a retrieval
//! set (`{"docs": [..], "queries": [{"text", "relevant"}]}`, one relevant document per
//! query): documents and queries are embedded by each path, every query ranks every
//! document by exact cosine. Run through `scripts/bench_retrieval.sh`.
//! Usage: `retrieval_quality SET.json`.

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use ragd::ml::{device, BertEmbedder, Embedder, Precision};

struct Scores {
    ndcg: f64,
    recall: f64,
    mrr: f64,
}

fn evaluate(model: &BertEmbedder, docs: &[&str], queries: &[(&str, usize)]) -> Scores {
    let embed = |texts: &[&str]| -> Vec<Vec<f32>> {
        texts
            .chunks(32)
            .flat_map(|c| model.embed(c).expect("embed"))
            .collect()
    };
    let d = embed(docs);
    let q = embed(&queries.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    let (mut ndcg, mut recall, mut mrr) = (0.0, 0.0, 0.0);
    for (qv, (_, relevant)) in q.iter().zip(queries) {
        let score = |v: &Vec<f32>| v.iter().zip(qv).map(|(a, b)| a * b).sum::<f32>();
        let target = score(&d[*relevant]);
        // Rank of the relevant document: documents scoring higher (ties count against it).
        let rank = d
            .iter()
            .enumerate()
            .filter(|(i, v)| *i != *relevant && score(v) >= target)
            .count();
        if rank < 10 {
            ndcg += 1.0 / (rank as f64 + 2.0).log2();
            recall += 1.0;
            mrr += 1.0 / (rank as f64 + 1.0);
        }
    }
    let n = queries.len() as f64;
    Scores {
        ndcg: ndcg / n,
        recall: recall / n,
        mrr: mrr / n,
    }
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: retrieval_quality SET.json");
    let set = common::RetrievalSet::load(&path);
    println!("{}", set.name);
    let docs: Vec<&str> = set.docs.iter().map(String::as_str).collect();
    let queries: Vec<(&str, usize)> = set.queries.iter().map(|(q, r)| (q.as_str(), *r)).collect();
    println!("| path | nDCG@10 | recall@10 | MRR@10 | seconds |");
    println!("|---|---|---|---|---|");
    let mut ndcg = Vec::new();
    for precision in [Precision::Auto, Precision::F32] {
        let model = BertEmbedder::load_with(
            &common::embedder_dir(),
            device::best_device(),
            32,
            precision,
        )
        .expect("run scripts/setup.sh");
        let t = Instant::now();
        let s = evaluate(&model, &docs, &queries);
        println!(
            "| {} | {:.4} | {:.4} | {:.4} | {:.0} |",
            model.arithmetic(),
            s.ndcg,
            s.recall,
            s.mrr,
            t.elapsed().as_secs_f64()
        );
        ndcg.push(s.ndcg);
    }
    let diff = (ndcg[0] - ndcg[1]).abs();
    println!(
        "nDCG@10 default - f32: {:+.4} (target: within 0.005: {})",
        ndcg[0] - ndcg[1],
        if diff <= 0.005 { "ok" } else { "NOT MET" }
    );
}
