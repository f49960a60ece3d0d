//! Peak memory of parsing a 100-page PDF, built by repeating the pages of the shared
//! docling fixtures. Run alone (its own process) so the peak is this parse's:
//! `cargo test --test parse_pdf_memory -- --nocapture` prints the figures.

use std::path::Path;
use std::time::Instant;

use pdfium_render::prelude::*;
use ragd::parse::{self, pdf, Format, ParseOptions};

fn opts() -> ParseOptions {
    ParseOptions {
        pdfium_library: Path::new(env!("CARGO_MANIFEST_DIR")).join("models/pdfium/libpdfium.so"),
        ..ParseOptions::default()
    }
}

/// A PDF of `n` pages cycling through the text fixtures' pages.
fn hundred_pages(n: i32) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data/pdf/sources");
    assert!(dir.is_dir(), "fixtures missing: {}", dir.display());
    let pdfium = pdf::pdfium(&opts().pdfium_library).expect("pdfium");
    let names = [
        "redp5110_sampled.pdf",
        "normal_4pages.pdf",
        "multi_page.pdf",
        "2305.03393v1-pg9.pdf",
        "amt_handbook_sample.pdf",
    ];
    let sources: Vec<PdfDocument> = names
        .iter()
        .map(|f| pdfium.load_pdf_from_file(&dir.join(f), None).expect(f))
        .collect();
    let mut out = pdfium.create_new_pdf().unwrap();
    'fill: loop {
        for src in &sources {
            for i in 0..src.pages().len() {
                let at = out.pages().len();
                if at >= n {
                    break 'fill;
                }
                out.pages_mut().copy_page_from_document(src, i, at).unwrap();
            }
        }
    }
    out.save_to_bytes().unwrap()
}

fn status(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_hundred_page_pdf_parses_in_bounded_memory() {
    let bytes = hundred_pages(100);
    // Restart the peak-RSS counter so it measures the parse only.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status("VmRSS:");
    let started = Instant::now();
    let doc = parse::parse(Format::named("pdf"), &bytes, &opts()).expect("parse");
    let secs = started.elapsed().as_secs_f64();
    let peak = status("VmHWM:");
    assert_eq!(doc.pages, 100);
    println!(
        "100-page PDF ({} KiB): {:.1} pages/s, RSS before {} MiB, peak during parse {} MiB",
        bytes.len() / 1024,
        100.0 / secs,
        before / 1024,
        peak / 1024
    );
    assert!(peak < 1024 * 1024, "peak RSS {} MiB", peak / 1024);
}
