//! Fits the calibration of search scores: a relevance in [0, 1] that means the same
//! across queries, `1 / (1 + exp(-(a * cosine + b)))` of the query's cosine with a
//! passage (the embedder's default path), on a retrieval set from public data (Debian's
//! package descriptions, each synopsis the query for its own long description; see
//! `scripts/calibrate_scores.sh`).
//!
//! Queries are split in two: the even ones fit `a` and `b` (logistic regression by
//! Newton's method, the relevant passage against its query's 10 nearest other passages
//! and 10 random ones, the two classes weighted equally so that 0.5 is the point where
//! relevant and irrelevant are equally likely); the odd ones are held out to report
//! precision and recall of a 0.5 cut, and how often the relevant passage outscores
//! every irrelevant one at that one threshold.
//! Usage: `score_calibration SET.json`.

#[path = "../benches/common/mod.rs"]
mod common;

use ragd::ml::{device, BertEmbedder, Embedder};

/// Hard and random negatives per query.
const HARD: usize = 10;
const RANDOM: usize = 10;

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x * y) as f64).sum()
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// (cosine, relevant) pairs of each query.
fn pairs(d: &[Vec<f32>], q: &[Vec<f32>], relevant: &[usize]) -> Vec<Vec<(f64, bool)>> {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    q.iter()
        .zip(relevant)
        .map(|(qv, &rel)| {
            let mut scored: Vec<(usize, f64)> =
                d.iter().enumerate().map(|(i, v)| (i, dot(qv, v))).collect();
            let positive = scored[rel].1;
            scored.sort_by(|a, b| b.1.total_cmp(&a.1));
            let mut out = vec![(positive, true)];
            out.extend(
                scored
                    .iter()
                    .filter(|(i, _)| *i != rel)
                    .take(HARD)
                    .map(|(_, s)| (*s, false)),
            );
            for _ in 0..RANDOM {
                let i = (next() % d.len() as u64) as usize;
                if i != rel {
                    out.push((dot(qv, &d[i]), false));
                }
            }
            out
        })
        .collect()
}

/// Weighted logistic regression on one feature: (a, b).
fn fit(samples: &[(f64, bool)]) -> (f64, f64) {
    let pos = samples.iter().filter(|s| s.1).count() as f64;
    let neg = samples.len() as f64 - pos;
    let weight = |y: bool| if y { 0.5 / pos } else { 0.5 / neg };
    let (mut a, mut b) = (1.0, 0.0);
    for _ in 0..100 {
        // Gradient and Hessian of the weighted log-loss (with a tiny ridge on a).
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (1e-6 * a, 0.0, 1e-6, 0.0, 0.0);
        for &(x, y) in samples {
            let w = weight(y);
            let p = sigmoid(a * x + b);
            let r = p - if y { 1.0 } else { 0.0 };
            ga += w * r * x;
            gb += w * r;
            let h = w * p * (1.0 - p);
            haa += h * x * x;
            hab += h * x;
            hbb += h;
        }
        let det = haa * hbb - hab * hab;
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        a -= da;
        b -= db;
        if da.abs() + db.abs() < 1e-10 {
            break;
        }
    }
    (a, b)
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: score_calibration SET.json");
    let set = common::RetrievalSet::load(&path);
    println!("{}", set.name);
    let docs: Vec<&str> = set.docs.iter().map(String::as_str).collect();
    let queries: Vec<(&str, usize)> = set.queries.iter().map(|(q, r)| (q.as_str(), *r)).collect();
    let model = BertEmbedder::load(&common::embedder_dir(), device::best_device(), 32)
        .expect("run scripts/setup.sh");
    let embed = |texts: &[&str]| -> Vec<Vec<f32>> {
        texts
            .chunks(32)
            .flat_map(|c| model.embed(c).expect("embed"))
            .collect()
    };
    let d = embed(&docs);
    let q = embed(&queries.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    let relevant: Vec<usize> = queries.iter().map(|(_, r)| *r).collect();
    let all = pairs(&d, &q, &relevant);
    let (train, test): (Vec<_>, Vec<_>) =
        all.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let train: Vec<(f64, bool)> = train.into_iter().flat_map(|(_, p)| p).collect();
    let (a, b) = fit(&train);
    println!(
        "fitted on {} pairs ({} queries): a = {a:.4}, b = {b:.4}",
        train.len(),
        queries.len().div_ceil(2)
    );
    println!("cosine at relevance 0.5: {:.4}", -b / a);
    let (mut tp, mut fp, mut fneg, mut tn) = (0usize, 0usize, 0usize, 0usize);
    let (mut separated, mut n_test) = (0usize, 0usize);
    for (_, p) in &test {
        n_test += 1;
        let score = |x: f64| sigmoid(a * x + b);
        let pos_above = p.iter().filter(|s| s.1).all(|s| score(s.0) >= 0.5);
        let neg_below = p.iter().filter(|s| !s.1).all(|s| score(s.0) < 0.5);
        if pos_above && neg_below {
            separated += 1;
        }
        for &(x, y) in p {
            match (score(x) >= 0.5, y) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fneg += 1,
                (false, false) => tn += 1,
            }
        }
    }
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / (tp + fneg).max(1) as f64;
    let hard_fp = test
        .iter()
        .flat_map(|(_, p)| p.iter().skip(1).take(HARD))
        .filter(|s| sigmoid(a * s.0 + b) >= 0.5)
        .count();
    let random_fp = test
        .iter()
        .flat_map(|(_, p)| p.iter().skip(1 + HARD))
        .filter(|s| sigmoid(a * s.0 + b) >= 0.5)
        .count();
    println!(
        "held out ({n_test} queries; each: 1 relevant, {HARD} nearest others, {RANDOM} random):"
    );
    println!("| cut | precision | recall | true pos | false pos (nearest / random) | false neg | true neg |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| 0.5 | {precision:.3} | {recall:.3} | {tp} | {fp} ({hard_fp} / {random_fp}) | {fneg} | {tn} |"
    );
    println!(
        "queries whose relevant passage is >= 0.5 and every other < 0.5: {separated} of {n_test} ({:.1}%)",
        100.0 * separated as f64 / n_test as f64
    );
}
