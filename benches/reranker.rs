//! Cross-encoder reranking throughput: (query, passage) pairs scored per second by a
//! random-weight cross-encoder with the exact shape of cross-encoder/ms-marco-MiniLM-L-6-v2
//! (hidden 384, 6 layers, 12 heads, intermediate 1536, BERT uncased vocabulary), for one
//! query against 20 and 100 passages of 100 words (the first 100 words of the peers'
//! passages, `../shared/tools/passages.py`). The tokenizer is the installed embedder's
//! (all-MiniLM-L6-v2: the same vocabulary). Threads: candle's (`RAYON_NUM_THREADS`).

mod common;

use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use ragd::ml::device;
use ragd::ml::reranker::CrossEncoder;

const QUERY: &str = "how does the search engine rank documents for a user query";
const WORDS: usize = 100;

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = common::random_minilm_cross_encoder(tmp.path());
    let model = CrossEncoder::load(&dir, device::best_device()).expect("load the cross-encoder");
    let passages = common::passage_heads(100, WORDS);

    let mut group = c.benchmark_group("rerank");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(5));
    for n in [20usize, 100] {
        let batch = &passages[..n];
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("pairs", n), batch, |b, batch| {
            b.iter(|| model.score(QUERY, batch).expect("score"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
