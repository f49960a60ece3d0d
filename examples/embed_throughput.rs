//! Embeds the peers' 2,000 passages (`make_passages(2000, seed=1234)`) at batch 32 and
//! prints passages/s, tokens/s and peak RSS, as `../shared/reference/peers.md` measured
//! sentence-transformers. Run through `scripts/bench_embedder.sh`.

#[path = "../benches/common.rs"]
mod common;

use std::time::Instant;

use ragd::ml::{device, BertEmbedder, Embedder};

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

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let runs: usize = std::env::args()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let batch = 32;
    let passages = common::peer_passages(n);
    let model = BertEmbedder::load(&common::embedder_dir(), device::best_device(), batch)
        .expect("run scripts/setup.sh");
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
        for chunk in refs.chunks(batch) {
            model.embed(chunk).expect("embed");
        }
        let secs = t.elapsed().as_secs_f64();
        let rate = n as f64 / secs;
        println!(
            "run {}: {n} passages ({:.0} tokens avg) in {secs:.1}s: {rate:.1} passages/s, {:.0} tokens/s",
            run + 1,
            tokens as f64 / n as f64,
            tokens as f64 / secs
        );
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "median {:.1} passages/s (batch {batch}, {} threads); peak RSS {:.0} MiB",
        rates[rates.len() / 2],
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        peak_rss_mib()
    );
}
