//! DOCX parsing throughput over the docling fixtures
//! (`../shared/fixtures/docling/tests/data/docx/sources`): each file on its own, in
//! bytes per second, and the whole set in documents per second.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ragd::parse::{self, Format, ParseOptions};

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data/docx/sources");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "the docling fixtures are missing: cannot read {} ({e})",
            dir.display()
        )
    });
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "docx"))
        .map(|p| {
            let name = p
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, std::fs::read(&p).expect("read fixture"))
        })
        .collect();
    files.sort();
    files
}

fn bench(c: &mut Criterion) {
    let files = fixtures();
    let opts = ParseOptions::default();
    let mut group = c.benchmark_group("parse_docx");
    group.sample_size(20);
    for (name, bytes) in &files {
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("file", name), bytes, |b, bytes| {
            b.iter(|| parse::parse(Format::named("docx"), bytes, &opts).expect("parses"))
        });
    }
    group.throughput(Throughput::Elements(files.len() as u64));
    group.bench_function("all_fixtures", |b| {
        b.iter(|| {
            for (_, bytes) in &files {
                parse::parse(Format::named("docx"), bytes, &opts).expect("parses");
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
