//! Aggregate decode speed with continuous batching: for each batch size B, B requests of
//! PP prompt tokens (token ids, different per stream) and TG generated tokens each, sent
//! at once to an [`LlmHandle`] with `parallel` = B (ragd's CPU engine, no prompt cache,
//! greedy, end-of-sequence ignored). As llama.cpp's `llama-batched-bench` reports S_TG,
//! the decode rate counts only decode steps of all B streams at once: tokens run by the
//! steps between the moment every stream has its first token and the moment the first
//! one ends, over that time. (The streams join one prompt at a time, so the first ones
//! also end first; `llama-batched-bench` runs every prompt before its B streams decode
//! in step. The rate up to the moment the last one ends, with fewer than B streams at
//! the end, is printed after it.) Also prints peak resident memory.
//!
//! Usage: llm_batch FILE.gguf [THREADS=2] [PP=128] [TG=128] [NPL=1,2,4,8]
//! Env: RAGD_LLM_KERNELS=scalar|avx2|avx512 picks the kernels (default: the best).

use std::sync::atomic::Ordering;
use std::time::Instant;

use ragd::ml::llm::{
    Backend, CpuOptions, GenerateRequest, GenerationParams, LlmEngine, LlmEvent, LlmHandle,
    LlmWorkerOptions, Prompt,
};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or_else(|| {
        anyhow::anyhow!("usage: llm_batch FILE.gguf [THREADS] [PP] [TG] [NPL=1,2,4,8]")
    })?;
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (threads, pp, tg) = (arg(1, 2), arg(2, 128), arg(3, 128));
    let npl: Vec<usize> = args
        .get(4)
        .map_or("1,2,4,8", String::as_str)
        .split(',')
        .map(|v| v.trim().parse())
        .collect::<Result<_, _>>()?;
    // The kernels (`scalar`, `avx2`, `avx512`): the best the CPU runs unless set.
    let tier = match std::env::var("RAGD_LLM_KERNELS") {
        Ok(name) => Some(
            ragd::ml::quant::Tier::parse(&name)
                .ok_or_else(|| anyhow::anyhow!("unknown kernel tier {name:?}"))?,
        ),
        Err(_) => None,
    };
    for &b in &npl {
        let backend = Backend::Cpu {
            options: CpuOptions {
                threads: Some(threads),
                tier,
                ..CpuOptions::default()
            },
            prompt_cache_bytes: 0,
        };
        let engine = LlmEngine::load(path.as_ref(), backend)?;
        let vocab = engine.tokenizer().vocab_size().max(1) as u64;
        let name = engine.info().name.clone();
        let h = LlmHandle::spawn(
            engine,
            LlmWorkerOptions {
                queue_capacity: 64,
                threads: Some(threads),
                parallel: b,
                kv_budget: 8 << 30,
                max_wait: None,
            },
        )?;
        let request = |s: u64, pp: usize, tg: usize| GenerateRequest {
            prompt: Prompt::Tokens(
                (0..pp as u64)
                    .map(|i| ((i * 7919 + 13 + s * 104_729) % vocab) as u32)
                    .collect(),
            ),
            params: GenerationParams {
                max_tokens: tg,
                temperature: 0.0,
                ignore_eos: true,
                ..GenerationParams::default()
            },
            filter: None,
        };
        // Warm the threads and buffers.
        drain(h.generate(request(99, 16, 4))?).await;
        let started = Instant::now();
        let mut first = Vec::new();
        let mut tasks = Vec::new();
        let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel();
        for s in 0..b {
            let mut rx = h.generate(request(s as u64, pp, tg))?;
            let (tx, got) = tokio::sync::oneshot::channel();
            first.push(got);
            let ended_tx = ended_tx.clone();
            tasks.push(tokio::spawn(async move {
                let mut tx = Some(tx);
                let mut n = 0usize;
                while let Some(ev) = rx.recv().await {
                    match ev {
                        LlmEvent::Token { .. } => {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(Instant::now());
                            }
                        }
                        LlmEvent::Done {
                            completion_tokens, ..
                        } => {
                            let _ = ended_tx.send(Instant::now());
                            n = completion_tokens;
                        }
                        LlmEvent::Error(e) => panic!("generation failed: {e}"),
                    }
                }
                (n, Instant::now())
            }));
        }
        for f in first {
            f.await?;
        }
        // Every stream has its first token: from here on, decode steps only.
        let t0 = Instant::now();
        let tokens0 = h.batch_stats().tokens.load(Ordering::Relaxed);
        // The first end: all B streams decoded together until then.
        let t_full = ended_rx.recv().await.unwrap_or(t0).max(t0);
        let full = h.batch_stats().tokens.load(Ordering::Relaxed) - tokens0;
        let full_secs = (t_full - t0).as_secs_f64();
        let mut generated = 0;
        let mut t1 = t0;
        for t in tasks {
            let (n, end) = t.await?;
            generated += n;
            t1 = t1.max(end);
        }
        let decoded = h.batch_stats().tokens.load(Ordering::Relaxed) - tokens0;
        let tg_secs = (t1 - t0).as_secs_f64();
        println!(
            "{name}: B={b} threads {threads} pp{pp} tg{tg}  S_TG {:.2} tok/s ({full} tokens in {full_secs:.2} s, all {b} decoding)  to the last end {:.2} tok/s ({decoded} tokens in {tg_secs:.2} s)  all {:.2} tok/s ({generated} generated in {:.2} s)  peak batch {}  peak RSS {} MB",
            full as f64 / full_secs,
            decoded as f64 / tg_secs,
            generated as f64 / (t1 - started).as_secs_f64(),
            (t1 - started).as_secs_f64(),
            h.batch_stats().peak.load(Ordering::Relaxed),
            peak_rss_mb()
        );
    }
    Ok(())
}

async fn drain(mut rx: tokio::sync::mpsc::Receiver<LlmEvent>) {
    while rx.recv().await.is_some() {}
}

/// Peak resident memory of this process (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
