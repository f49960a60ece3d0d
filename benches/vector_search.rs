//! Vector search latency (top-10, one query at a time) on 10,000 and 100,000 random
//! normalised 384-d vectors in ragd's usearch index, as `../shared/reference/peers.md`
//! measured other engines; the build rate (vectors/s) is printed once per size.

use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ragd::retrieval::vectors::pseudo_random_units;
use ragd::retrieval::VectorIndex;

const DIM: usize = 384;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("vector_search_top10");
    // `cargo test` runs benches once as a check: a small index is enough there.
    let sizes: &[usize] = if std::env::args().any(|a| a == "--bench") {
        &[10_000, 100_000]
    } else {
        &[1_000]
    };
    for &n in sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let (index, _) = VectorIndex::open(dir.path(), DIM, num_cpus::get()).expect("index");
        let data = pseudo_random_units(n, DIM, 7);
        let started = Instant::now();
        for (chunk_no, chunk) in data.chunks(1000).enumerate() {
            let items: Vec<(u64, &[f32])> = chunk
                .iter()
                .enumerate()
                .map(|(i, v)| ((chunk_no * 1000 + i) as u64, v.as_slice()))
                .collect();
            index.apply(&[], &items, 1).expect("insert");
        }
        eprintln!(
            "built {n} vectors in {:.1}s ({:.0} vectors/s)",
            started.elapsed().as_secs_f64(),
            n as f64 / started.elapsed().as_secs_f64()
        );
        let queries = pseudo_random_units(256, DIM, 99);
        let mut i = 0;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                index.search(&queries[i], 10).expect("search")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
