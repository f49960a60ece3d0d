//! PDF parsing over the shared docling fixtures (`../shared/fixtures/docling`, never
//! copied into the repository): Arabic and Persian text in logical order, encrypted
//! files, and truncated or byte-flipped copies of every PDF giving an error or a
//! document, never a panic or a hang.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use ragd::parse::{self, render, Format, ParseError, ParseOptions};

fn data() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/docling/tests/data");
    assert!(
        dir.is_dir(),
        "fixtures missing: {} (these tests read the shared docling fixtures)",
        dir.display()
    );
    dir
}

fn opts() -> ParseOptions {
    ParseOptions {
        pdfium_library: Path::new(env!("CARGO_MANIFEST_DIR")).join("models/pdfium/libpdfium.so"),
        ..ParseOptions::default()
    }
}

fn parse_file(path: &Path) -> Result<parse::ParsedDocument, ParseError> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse::parse(Format::named("pdf"), &bytes, &opts())
}

fn pdfs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pdf"))
        .collect();
    v.sort();
    v
}

#[test]
fn right_to_left_text_comes_out_in_logical_order() {
    let dir = data().join("pdf/sources");
    let cases: [(&str, &[&str]); 3] = [
        (
            "right_to_left_01.pdf",
            &["الإنتاجية", "المشكلات", "البرمجة", "أيضًا", "Python", "pandas"],
        ),
        (
            "right_to_left_02.pdf",
            &["الحكومة", "المصرية", "السيد", "رئيس"],
        ),
        (
            "right_to_left_03.pdf",
            &["شرکت", "بورس", "استاندارد", "پذيرش"],
        ),
    ];
    for (file, words) in cases {
        let doc = parse_file(&dir.join(file)).expect(file);
        let text = render::to_plain_text(&doc);
        for w in words {
            assert!(text.contains(w), "{file}: '{w}' not found in:\n{text}");
            let reversed: String = w.chars().rev().collect();
            if reversed != *w && !w.is_ascii() {
                assert!(!text.contains(&reversed), "{file}: '{w}' came out reversed");
            }
        }
    }
}

#[test]
fn encrypted_pdf_is_reported_as_encrypted() {
    for pdf in pdfs(&data().join("pdf_password/sources")) {
        assert!(
            matches!(parse_file(&pdf), Err(ParseError::Encrypted)),
            "{}",
            pdf.display()
        );
    }
}

#[test]
fn every_text_pdf_fixture_parses_with_metadata() {
    let mut dirs = pdfs(&data().join("pdf/sources"));
    dirs.extend(pdfs(&data().join("pdf")));
    for pdf in dirs {
        let doc = parse_file(&pdf).unwrap_or_else(|e| panic!("{}: {e}", pdf.display()));
        assert!(doc.pages >= 1);
        assert!(!doc.blocks.is_empty(), "{}", pdf.display());
        assert!(doc
            .blocks
            .iter()
            .all(|b| b.page >= 1 && b.page <= doc.pages));
    }
}

/// Parses `bytes` on a worker thread; a parse that takes longer than a minute is a hang.
fn parse_with_deadline(name: &str, bytes: Vec<u8>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = parse::parse(Format::named("pdf"), &bytes, &opts()).map(|_| ());
        let _ = tx.send(outcome);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) | Ok(Err(_)) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{name}: parse hung"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{name}: parse panicked"),
    }
}

#[test]
fn truncated_and_flipped_pdfs_never_panic_or_hang() {
    let root = data();
    let mut files = pdfs(&root.join("pdf/sources"));
    files.extend(pdfs(&root.join("pdf")));
    files.extend(pdfs(&root.join("pdf_password/sources")));
    let scans = pdfs(&root.join("ocr/sources"));
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for file in files.iter().chain(&scans) {
        let bytes = std::fs::read(file).expect("read");
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // Scanned fixtures are OCR'd page by page: one cut each keeps the test quick.
        let cuts: Vec<usize> = if scans.contains(file) {
            vec![bytes.len() / 2]
        } else {
            vec![
                1,
                8,
                100,
                1000,
                bytes.len() / 3,
                bytes.len() / 2,
                bytes.len() - 1,
            ]
        };
        for cut in cuts.into_iter().filter(|&c| c < bytes.len()) {
            parse_with_deadline(&format!("{name} cut at {cut}"), bytes[..cut].to_vec());
        }
        if scans.contains(file) {
            continue;
        }
        for round in 0..6 {
            let mut mutated = bytes.clone();
            for _ in 0..(1 << round) {
                let at = (next() as usize) % mutated.len();
                mutated[at] ^= (next() as u8) | 1;
            }
            parse_with_deadline(&format!("{name} flip round {round}"), mutated);
        }
    }
}
