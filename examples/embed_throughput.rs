//! Embeds the peers' 2,000 passages (`make_passages(2000, seed=1234)`) at batch 32 and
//! prints passages/s, tokens/s and peak RSS, as `../shared/reference/peers.md` measured
//! sentence-transformers, and the worst cosine to sentence-transformers' reference
//! vectors (`../shared/reference/minilm-embeddings.json`). The last line is a JSON
//! summary. Run through `scripts/bench_embedder.sh`.
//! Usage: `embed_throughput [passages] [runs] [auto|f32|bf16] [batch]`.

#[path = "../benches/common/mod.rs"]
mod common;

use std::time::Instant;

use ragd::ml::{device, BertEmbedder, Embedder, Precision};

/// The worst cosine between the model's vectors and the reference file's.
fn worst_reference_cosine(model: &BertEmbedder) -> f64 {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/reference/minilm-embeddings.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("reference vectors")).unwrap();
    let items = v["items"].as_array().expect("items");
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    let got = model.embed(&texts).expect("embed");
    items
        .iter()
        .zip(&got)
        .map(|(item, g)| {
            let want: Vec<f64> = item["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            let dot: f64 = want.iter().zip(g).map(|(a, b)| a * *b as f64).sum();
            let na = want.iter().map(|a| a * a).sum::<f64>().sqrt();
            let nb = g.iter().map(|b| (*b as f64).powi(2)).sum::<f64>().sqrt();
            dot / (na * nb)
        })
        .fold(1.0, f64::min)
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`, 100 ticks/s):
/// on a shared machine, CPU time per passage is steadier than wall time.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the parenthesised command name; utime and stime are 14th and 15th.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let runs: usize = std::env::args()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let precision: Precision = std::env::args()
        .nth(3)
        .map(|p| p.parse().expect("precision"))
        .unwrap_or_default();
    let batch: usize = std::env::args()
        .nth(4)
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let passages = common::peer_passages(n);
    let model = BertEmbedder::load_with(
        &common::embedder_dir(),
        device::best_device(),
        batch,
        precision,
    )
    .expect("run scripts/setup.sh");
    let worst = worst_reference_cosine(&model);
    let counter = model.token_counter();
    let tokens: usize = passages
        .iter()
        .map(|p| counter.count(p).min(model.max_tokens()))
        .sum();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    model
        .embed(&refs[..batch.min(refs.len())])
        .expect("warm-up");
    let mut rates = Vec::new();
    for run in 0..runs {
        let t = Instant::now();
        let cpu = cpu_seconds();
        for chunk in refs.chunks(batch) {
            model.embed(chunk).expect("embed");
        }
        let secs = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        let rate = n as f64 / secs;
        println!(
            "run {}: {n} passages ({:.0} tokens avg) in {secs:.1}s: {rate:.1} passages/s, {:.0} tokens/s; \
             CPU {cpu:.1}s ({:.1} ms/passage, {:.2} cores busy)",
            run + 1,
            tokens as f64 / n as f64,
            tokens as f64 / secs,
            cpu * 1000.0 / n as f64,
            cpu / secs
        );
        rates.push(rate);
    }
    let runs_json = serde_json::json!(rates);
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "median {median:.1} passages/s (batch {batch}, {} threads, {} arithmetic); peak RSS {:.0} MiB; worst cosine to the reference {worst:.6}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        model.arithmetic(),
        peak_rss_mib()
    );
    println!(
        "{}",
        serde_json::json!({
            "engine": format!("ragd-{}", model.arithmetic()),
            "passages_per_s": median,
            "runs": runs_json,
            "worst_reference_cosine": worst,
            "peak_rss_mib": peak_rss_mib(),
        })
    );
}
