//! Embedder throughput: passages per second at 128 and 256 tokens for batch sizes
//! 1, 8 and 32, and on the peers' passages (`../shared/tools/passages.py`).
//! The whole 2,000-passage run is `scripts/bench_embedder.sh`.

mod common;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ragd::ml::{device, BertEmbedder, Embedder};

fn bench(c: &mut Criterion) {
    let model = BertEmbedder::load(&common::embedder_dir(), device::best_device(), 32)
        .expect("run scripts/setup.sh");
    let counter = model.token_counter();
    for tokens in [128usize, 256] {
        let mut group = c.benchmark_group(format!("embed_{tokens}_tokens"));
        group.sample_size(10);
        for batch in [1usize, 8, 32] {
            let texts: Vec<String> = (0..batch)
                .map(|s| common::text_of_tokens(|t| counter.count(t), tokens, s))
                .collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            group.throughput(Throughput::Elements(batch as u64));
            group.bench_with_input(BenchmarkId::new("batch", batch), &refs, |b, refs| {
                b.iter(|| model.embed(refs).expect("embed"))
            });
        }
        group.finish();
    }
    let passages = common::peer_passages(128);
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("peers_passages");
    group.sample_size(10);
    group.throughput(Throughput::Elements(refs.len() as u64));
    group.bench_function("first_128_batch_32", |b| {
        b.iter(|| model.embed(&refs).expect("embed"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
