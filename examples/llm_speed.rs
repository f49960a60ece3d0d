//! One measured run of LLM prompt processing (`pp`) and decode (`tg`) on a GGUF, token ids
//! in, for sizes where criterion's ten samples would take too long (`benches/llm.rs` is
//! the criterion bench of the same path). Decode starts after the first token, as
//! llama.cpp's `llama-bench -n` does, and counts `TG` tokens.
//!
//! Usage: cargo run --release --example llm_speed -- FILE.gguf [THREADS] [PP] [TG]
//! `RAGD_LLM_ENGINE=candle` runs candle's quantized models instead of ragd's engine;
//! `RAGD_LLM_KERNELS=scalar|avx2|avx512` forces a kernel tier of ragd's engine.

use std::time::Instant;

use ragd::ml::llm::{Backend, CpuOptions, LlmEngine};
use ragd::ml::quant::Tier;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or_else(|| anyhow::anyhow!("usage: llm_speed FILE.gguf [THREADS] [PP] [TG]"))?;
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (threads, pp, tg) = (arg(1, 2), arg(2, 512), arg(3, 128));
    let tier = match std::env::var("RAGD_LLM_KERNELS") {
        Ok(name) => Some(
            Tier::parse(&name).ok_or_else(|| anyhow::anyhow!("unknown kernel tier {name:?}"))?,
        ),
        Err(_) => None,
    };
    let candle = std::env::var("RAGD_LLM_ENGINE").is_ok_and(|v| v == "candle");
    let backend = if candle {
        Backend::reference()
    } else {
        Backend::Cpu {
            options: CpuOptions {
                threads: Some(threads),
                tier,
                ..CpuOptions::default()
            },
            prompt_cache_bytes: 0,
        }
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut engine = LlmEngine::load(path.as_ref(), backend)?;
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
        "{} [{}]: {threads} threads  pp{pp} {:.2} tok/s ({pp_secs:.2} s)  tg{tg} {:.2} tok/s ({tg_secs:.2} s)",
        engine.info().name,
        engine.engine_name(),
        pp as f64 / pp_secs,
        tg as f64 / tg_secs
    );
    Ok(())
}
