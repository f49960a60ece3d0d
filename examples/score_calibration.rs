//! Fits the calibration of search scores: a relevance in [0, 1] that means the same
//! across queries, `1 / (1 + exp(-(a * cosine + b * keyword + c)))` of a candidate's
//! cosine with the query (the embedder's default path) and its keyword evidence
//! (`1 / (1 + rank)` in the BM25 list of ragd's own tantivy index, 0 when absent), on a
//! retrieval set from public data (Debian's package descriptions, each synopsis the
//! query for its own long description; see `scripts/calibrate_scores.sh`).
//!
//! Each query's candidates are the server's: its 20 nearest passages and its 20 best
//! BM25 matches; 10 random passages stand for the unrelated ones a question about
//! something else meets. Each query is also asked of the passages without its relevant
//! one, a question the knowledge base does not answer, whose best matches are all
//! irrelevant (without these the keyword evidence of a first BM25 match would count as
//! relevance, as it nearly always is in a set where every query has its answer). Queries are split in two: the even ones fit `a`, `b`, `c`
//! (logistic regression by Newton's method, relevant against the rest, the two classes
//! weighted equally so that 0.5 is the point where relevant and irrelevant are equally
//! likely); the odd ones are held out to report precision and recall of a 0.5 cut, how
//! often the relevant passage is the only one at or above it, and the ranking (MRR@10,
//! recall@5) of ordering the candidates by the calibrated score against reciprocal rank
//! fusion (the order before) and the cosine alone.
//! Usage: `score_calibration SET.json`.

#[path = "../benches/common/mod.rs"]
mod common;

use ragd::kb::search::relevance;
use ragd::ml::{device, BertEmbedder, Embedder};
use ragd::retrieval::fulltext::FtDoc;
use ragd::retrieval::{fusion, FullTextIndex};

/// Candidates from each retriever (the server's default `initial_k`).
const K: usize = 20;
/// Random passages per query.
const RANDOM: usize = 10;

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x * y) as f64).sum()
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// One candidate of a query: its features and whether it is the relevant passage.
#[derive(Clone, Copy)]
struct Sample {
    cosine: f64,
    keyword: f64,
    /// Reciprocal-rank-fusion score (for the order before).
    fused: f64,
    relevant: bool,
    /// Drawn at random, not retrieved.
    random: bool,
}

/// Keyword evidence of a BM25 rank (0-based).
fn keyword(rank: Option<usize>) -> f64 {
    rank.map_or(0.0, |r| 1.0 / (1.0 + r as f64))
}

/// The candidates of every query: as retrieved, and as retrieved from the passages
/// without its relevant one (a question the knowledge base does not answer).
fn samples(
    d: &[Vec<f32>],
    q: &[Vec<f32>],
    texts: &[&str],
    relevant: &[usize],
    index: &FullTextIndex,
) -> Vec<(Vec<Sample>, Vec<Sample>)> {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    q.iter()
        .zip(texts)
        .zip(relevant)
        .map(|((qv, text), &rel)| {
            let mut by_cos: Vec<(usize, f64)> =
                d.iter().enumerate().map(|(i, v)| (i, dot(qv, v))).collect();
            by_cos.sort_by(|a, b| b.1.total_cmp(&a.1));
            let bm25: Vec<u64> = index
                .search(&ragd::kb::search::searchable(text), K + 1)
                .expect("bm25")
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            let mut candidates = |without: Option<usize>| {
                let kept = |i: &usize| Some(*i) != without;
                let dense: Vec<u64> = by_cos
                    .iter()
                    .map(|(i, _)| *i)
                    .filter(kept)
                    .take(K)
                    .map(|i| i as u64)
                    .collect();
                let sparse: Vec<u64> = bm25
                    .iter()
                    .copied()
                    .filter(|k| kept(&(*k as usize)))
                    .take(K)
                    .collect();
                let fused = fusion::reciprocal_rank(&[&dense, &sparse]);
                let sample = |i: usize, fused: f64, random: bool| Sample {
                    cosine: dot(qv, &d[i]),
                    keyword: keyword(sparse.iter().position(|&k| k == i as u64)),
                    fused,
                    relevant: i == rel,
                    random,
                };
                let mut out: Vec<Sample> = fused
                    .iter()
                    .map(|&(k, f)| sample(k as usize, f as f64, false))
                    .collect();
                let mut drawn = 0;
                while drawn < RANDOM {
                    let i = (next() % d.len() as u64) as usize;
                    if i != rel && !fused.iter().any(|&(k, _)| k == i as u64) {
                        out.push(sample(i, 0.0, true));
                        drawn += 1;
                    }
                }
                out
            };
            (candidates(None), candidates(Some(rel)))
        })
        .collect()
}

/// The calibration: `sigmoid(w[0] * cosine + w[1] * keyword + w[2])`.
fn relevance(w: &[f64; 3], s: &Sample) -> f64 {
    sigmoid(w[0] * s.cosine + w[1] * s.keyword + w[2])
}

/// Weighted logistic regression on (cosine, keyword) by Newton's method.
fn fit(samples: &[Sample]) -> [f64; 3] {
    let pos = samples.iter().filter(|s| s.relevant).count() as f64;
    let neg = samples.len() as f64 - pos;
    let weight = |y: bool| if y { 0.5 / pos } else { 0.5 / neg };
    let mut w = [1.0, 0.0, 0.0];
    for _ in 0..100 {
        let mut g = [0.0; 3];
        let mut h = [[0.0; 3]; 3];
        for i in 0..2 {
            // A tiny ridge on the slopes.
            g[i] += 1e-6 * w[i];
            h[i][i] += 1e-6;
        }
        for s in samples {
            let x = [s.cosine, s.keyword, 1.0];
            let p = relevance(&w, s);
            let r = p - if s.relevant { 1.0 } else { 0.0 };
            let c = weight(s.relevant);
            for i in 0..3 {
                g[i] += c * r * x[i];
                for j in 0..3 {
                    h[i][j] += c * p * (1.0 - p) * x[i] * x[j];
                }
            }
        }
        let step = solve(h, g);
        for i in 0..3 {
            w[i] -= step[i];
        }
        if step.iter().map(|x| x.abs()).sum::<f64>() < 1e-10 {
            break;
        }
    }
    w
}

/// `h^-1 g` for a 3x3 system (Cramer's rule).
fn solve(h: [[f64; 3]; 3], g: [f64; 3]) -> [f64; 3] {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(h);
    let mut out = [0.0; 3];
    for (i, o) in out.iter_mut().enumerate() {
        let mut m = h;
        for r in 0..3 {
            m[r][i] = g[r];
        }
        *o = det(m) / d;
    }
    out
}

/// MRR@10 and recall@5 of the relevant passage when each query's retrieved candidates
/// are ordered by `key` (higher first).
fn ranking(test: &[&Vec<Sample>], key: impl Fn(&Sample) -> f64) -> (f64, f64) {
    let (mut mrr, mut recall) = (0.0, 0.0);
    for candidates in test {
        let retrieved: Vec<&Sample> = candidates.iter().filter(|s| !s.random).collect();
        let Some(target) = retrieved.iter().find(|s| s.relevant) else {
            continue;
        };
        let rank = retrieved
            .iter()
            .filter(|s| !s.relevant && key(s) >= key(target))
            .count();
        if rank < 10 {
            mrr += 1.0 / (rank as f64 + 1.0);
        }
        if rank < 5 {
            recall += 1.0;
        }
    }
    (mrr / test.len() as f64, recall / test.len() as f64)
}

/// One row of the held-out table for weights `w`.
fn held_out(name: &str, w: &[f64; 3], test: &[&Vec<Sample>], unanswered: &[&Vec<Sample>]) {
    let (mut tp, mut fp, mut fneg, mut tn) = (0usize, 0usize, 0usize, 0usize);
    let (mut fp_retrieved, mut fp_random) = (0usize, 0usize);
    let mut separated = 0usize;
    for candidates in test {
        let above = |s: &Sample| relevance(w, s) >= 0.5;
        if candidates.iter().all(|s| above(s) == s.relevant) {
            separated += 1;
        }
        for s in candidates.iter() {
            match (above(s), s.relevant) {
                (true, true) => tp += 1,
                (true, false) => {
                    fp += 1;
                    if s.random {
                        fp_random += 1
                    } else {
                        fp_retrieved += 1
                    }
                }
                (false, true) => fneg += 1,
                (false, false) => tn += 1,
            }
        }
    }
    let n = test.len();
    let precision = tp as f64 / (tp + fp).max(1) as f64;
    let recall = tp as f64 / (tp + fneg).max(1) as f64;
    let alarms = unanswered
        .iter()
        .filter(|c| c.iter().any(|s| relevance(w, s) >= 0.5))
        .count();
    println!(
        "| {name} | 0.5 | {precision:.3} | {recall:.3} | {tp} | {fp} ({fp_retrieved} / {fp_random}) | {fneg} | {tn} | {separated} of {n} | {alarms} of {n} |"
    );
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
            .flat_map(|c| {
                let normalised: Vec<String> =
                    c.iter().map(|t| ragd::kb::search::searchable(t)).collect();
                let refs: Vec<&str> = normalised.iter().map(String::as_str).collect();
                model.embed(&refs).expect("embed")
            })
            .collect()
    };
    let d = embed(&docs);
    let texts: Vec<&str> = queries.iter().map(|(t, _)| *t).collect();
    let q = embed(&texts);
    let tmp = tempfile::tempdir().expect("temp dir");
    let (index, _) = FullTextIndex::open(tmp.path()).expect("full-text index");
    let ids: Vec<String> = (0..docs.len()).map(|i| format!("d{i}")).collect();
    let ft: Vec<FtDoc> = docs
        .iter()
        .enumerate()
        .map(|(i, t)| FtDoc {
            key: i as u64,
            chunk_id: &ids[i],
            text: t,
        })
        .collect();
    index.apply(&[], &ft, 1).expect("index the passages");
    let relevant: Vec<usize> = queries.iter().map(|(_, r)| *r).collect();
    let all = samples(&d, &q, &texts, &relevant, &index);
    let (train, test): (Vec<_>, Vec<_>) = all.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let train: Vec<Sample> = train
        .into_iter()
        .flat_map(|(_, (with, without))| with.iter().chain(without).copied())
        .collect();
    let unanswered: Vec<&Vec<Sample>> = test.iter().map(|(_, (_, without))| without).collect();
    let test: Vec<&Vec<Sample>> = test.into_iter().map(|(_, (with, _))| with).collect();
    let w = fit(&train);
    println!(
        "fitted on {} candidates ({} queries): a = {:.4} (cosine), b = {:.4} (keyword), c = {:.4}",
        train.len(),
        queries.len().div_ceil(2),
        w[0],
        w[1],
        w[2]
    );
    println!(
        "cosine at relevance 0.5: {:.4} without keyword evidence, {:.4} as the best BM25 match",
        -w[2] / w[0],
        -(w[2] + w[1]) / w[0]
    );
    let shipped = [
        relevance::COSINE as f64,
        relevance::KEYWORD as f64,
        relevance::BIAS as f64,
    ];
    println!(
        "held out ({} queries; each: its retrieved candidates (up to {} with 1 relevant) and {RANDOM} random):",
        test.len(),
        2 * K
    );
    println!("| weights | cut | precision | recall | true pos | false pos (retrieved / random) | false neg | true neg | relevant the only one >= 0.5 | without the relevant passage: any >= 0.5 |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    held_out("fitted here", &w, &test, &unanswered);
    held_out(
        "shipped (src/kb/search/relevance.rs)",
        &shipped,
        &test,
        &unanswered,
    );
    println!("ranking of the retrieved candidates (held out):");
    println!("| order | MRR@10 | recall@5 |");
    println!("|---|---|---|");
    for (name, r) in [
        (
            "reciprocal rank fusion (before)",
            ranking(&test, |s| s.fused),
        ),
        (
            "calibrated relevance (fitted here)",
            ranking(&test, |s| relevance(&w, s)),
        ),
        (
            "calibrated relevance (shipped)",
            ranking(&test, |s| relevance(&shipped, s)),
        ),
        ("cosine alone", ranking(&test, |s| s.cosine)),
    ] {
        println!("| {name} | {:.4} | {:.4} |", r.0, r.1);
    }
}
