//! Embeds the peers' 2,000 passages (`make_passages(2000, seed=1234)`) at batch 32 and
//! prints passages/s, tokens/s and peak RSS, as `../shared/reference/peers.md` measured
//! sentence-transformers. Run through `scripts/bench_embedder.sh`.

#[path = "../benches/common/mod.rs"]
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
