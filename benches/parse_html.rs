//! HTML parsing throughput on the docling HTML fixtures (pages per second, bytes per
//! second), plus the same pages through the main-content extraction used by scraping.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ragd::parse::{self, Format, ParseOptions};

fn fixtures() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data/html/sources");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared fixtures are needed)", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("read fixture"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let pages = fixtures();
    let bytes: u64 = pages.iter().map(|p| p.len() as u64).sum();
    let opts = ParseOptions::default();
    let mut group = c.benchmark_group("parse_html");
    group.throughput(Throughput::Elements(pages.len() as u64));
    group.bench_function("fixture_pages", |b| {
        b.iter(|| {
            for p in &pages {
                parse::parse(Format::named("html"), p, &opts).expect("parse");
            }
        })
    });
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("fixture_bytes", |b| {
        b.iter(|| {
            for p in &pages {
                parse::parse(Format::named("html"), p, &opts).expect("parse");
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
