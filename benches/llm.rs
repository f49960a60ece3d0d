//! LLM speed: prompt processing (`pp`, one forward pass over N prompt tokens) and decode
//! (`tg`, one token per forward pass) in tokens per second, token ids in, on the GGUF named
//! by `RAGD_BENCH_GGUF` (a tiny random model when unset), with ragd's CPU engine.
//! Threads: `RAGD_BENCH_THREADS` (default 2). Sizes: `RAGD_BENCH_PP` (default 512) and
//! `RAGD_BENCH_TG` (default 128). `examples/llm_speed` is one measured run of the same
//! path for sizes where ten samples take too long; `scripts/bench_llm.sh` compares it with
//! llama.cpp.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use ragd::ml::llm::tiny::write_tiny_gguf;
use ragd::ml::llm::{Arch, Backend, CpuOptions, LlmEngine};

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = match std::env::var_os("RAGD_BENCH_GGUF") {
        Some(p) => PathBuf::from(p),
        None => {
            let p = tmp.path().join("tiny-qwen2.gguf");
            write_tiny_gguf(&p, Arch::Qwen2).expect("tiny model");
            p
        }
    };
    let threads = env_usize("RAGD_BENCH_THREADS", 2);
    let pp = env_usize("RAGD_BENCH_PP", 512);
    let tg = env_usize("RAGD_BENCH_TG", 128);
    let backend = Backend::Cpu {
        options: CpuOptions {
            threads: Some(threads),
            tier: None,
            ..CpuOptions::default()
        },
        prompt_cache_bytes: 0,
    };
    let mut engine = LlmEngine::load(&path, backend).expect("load the GGUF");
    let vocab = engine.tokenizer().vocab_size().max(1) as u64;
    // Any ids of the vocabulary will do: the cost does not depend on which.
    let ids: Vec<u32> = (0..(pp.max(tg) + 1) as u64)
        .map(|i| ((i * 7919 + 13) % vocab) as u32)
        .collect();
    eprintln!(
        "model {} ({}), context {}, {threads} threads",
        engine.info().name,
        path.display(),
        engine.info().context_length
    );

    let mut group = c.benchmark_group("llm");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(1));
    group.warm_up_time(Duration::from_millis(1));
    group.throughput(Throughput::Elements(pp as u64));
    group.bench_function(format!("pp{pp}"), |b| {
        b.iter(|| engine.forward(&ids[..pp], 0).expect("forward"))
    });
    group.throughput(Throughput::Elements(tg as u64));
    group.bench_function(format!("tg{tg}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                engine.forward(&ids[..1], 0).expect("first token");
                let started = Instant::now();
                for pos in 1..=tg {
                    engine.forward(&ids[pos..pos + 1], pos).expect("decode");
                }
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
