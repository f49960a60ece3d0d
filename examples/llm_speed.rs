//! One measured run of LLM prompt processing (`pp`) and decode (`tg`) on a GGUF, token ids
//! in, for sizes where criterion's ten samples would take too long on a CPU build
//! (pp512 at a few tokens/s). `benches/llm.rs` is the criterion bench of the same path.
//!
//! Usage: cargo run --release --example llm_speed -- FILE.gguf [THREADS] [PP] [TG]

use std::time::Instant;

use ragd::ml::device;
use ragd::ml::llm::LlmEngine;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or_else(|| anyhow::anyhow!("usage: llm_speed FILE.gguf [THREADS] [PP] [TG]"))?;
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (threads, pp, tg) = (arg(1, 2), arg(2, 512), arg(3, 128));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut engine = LlmEngine::load(path.as_ref(), &device::best_device())?;
    let vocab = engine.tokenizer().vocab_size().max(1) as u64;
    let ids: Vec<u32> = (0..(pp.max(tg) + 1) as u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    let started = Instant::now();
    pool.install(|| engine.forward(&ids[..pp], 0))?;
    let pp_secs = started.elapsed().as_secs_f64();
    pool.install(|| engine.forward(&ids[..1], 0))?;
    let started = Instant::now();
    for pos in 1..=tg {
        pool.install(|| engine.forward(&ids[pos..pos + 1], pos))?;
    }
    let tg_secs = started.elapsed().as_secs_f64();
    println!(
        "{}: {threads} threads  pp{pp} {:.2} tok/s ({pp_secs:.1} s)  tg{tg} {:.2} tok/s ({tg_secs:.1} s)",
        engine.info().name,
        pp as f64 / pp_secs,
        tg as f64 / tg_secs
    );
    Ok(())
}
