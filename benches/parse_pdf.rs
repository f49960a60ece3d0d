//! PDF parsing speed on the shared docling fixtures (`../shared/fixtures/docling`): one
//! benchmark per text PDF, reported in pages per second (criterion's elements/s), in
//! both table modes. Scanned PDFs are left out: their time is tesseract's.

use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ragd::parse::{self, Format, ParseOptions, TableMode};

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("../shared/fixtures/docling/tests/data/pdf/sources");
    assert!(dir.is_dir(), "fixtures missing: {}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pdf"))
        .collect();
    files.sort();
    for (mode, name) in [
        (TableMode::Fast, "parse_pdf_fast"),
        (TableMode::Accurate, "parse_pdf_accurate"),
    ] {
        let opts = ParseOptions {
            table_mode: mode,
            pdfium_library: root.join("models/pdfium/libpdfium.so"),
            ..ParseOptions::default()
        };
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        for file in &files {
            let bytes = std::fs::read(file).expect("read fixture");
            let pages = parse::parse(Format::named("pdf"), &bytes, &opts)
                .expect("parse")
                .pages;
            let label = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            group.throughput(Throughput::Elements(u64::from(pages)));
            group.bench_with_input(BenchmarkId::from_parameter(label), &bytes, |b, bytes| {
                b.iter(|| parse::parse(Format::named("pdf"), bytes, &opts).expect("parse"))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
