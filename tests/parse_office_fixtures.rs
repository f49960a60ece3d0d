//! The Office parsers against the docling fixtures (read in place from
//! `../shared/fixtures/docling/tests/data`), damaged copies of them, and hostile
//! archives: every fixture parses; truncated and byte-flipped copies give an error or
//! a document, never a panic or a hang; ZIP bombs and archives with thousands of
//! entries are refused.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ragd::parse::archive;
use ragd::parse::office;
use ragd::parse::{self, BlockKind, Format, ParseError, ParseOptions, ParsedDocument};
use zip::write::SimpleFileOptions;

/// Longest one parse of a damaged file may take (debug build, shared machine).
const PATIENCE: Duration = Duration::from_secs(20);

fn fixtures(kind: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data")
        .join(kind)
        .join("sources");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "the docling fixtures are missing: cannot read {} ({e}); \
             they are expected beside the repository in ../shared/fixtures",
            dir.display()
        )
    });
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name.unwrap_or_default(), bytes)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// The parser for a format, called directly: no `catch_unwind`, so a panic fails
/// the test instead of turning into an error.
fn direct(format: &Format) -> fn(&[u8]) -> Result<ParsedDocument, ParseError> {
    match format.name {
        "docx" => office::parse_docx,
        "pptx" => office::parse_pptx,
        _ => office::parse_xlsx,
    }
}

const KINDS: [&str; 3] = ["docx", "pptx", "xlsx"];

/// The office formats, each with the fixture folder of its kind.
fn formats() -> impl Iterator<Item = (&'static str, &'static Format)> {
    KINDS.into_iter().map(|k| (k, Format::named(k)))
}

#[test]
fn every_fixture_parses() {
    for (kind, format) in formats() {
        for (name, bytes) in fixtures(kind) {
            let doc = parse::parse(format, &bytes, &ParseOptions::default())
                .unwrap_or_else(|e| panic!("{kind}/{name}: {e}"));
            assert!(!doc.blocks.is_empty(), "{kind}/{name}: no blocks");
            assert!(
                doc.blocks
                    .iter()
                    .all(|b| b.page >= 1 && b.page <= doc.pages),
                "{kind}/{name}: a block outside the page range"
            );
            // Page-by-page streaming relies on blocks coming in page order.
            assert!(
                doc.blocks.windows(2).all(|w| w[0].page <= w[1].page),
                "{kind}/{name}: blocks out of page order"
            );
        }
    }
}

#[test]
fn fixtures_keep_their_structure() {
    let find = |kind: &str, name: &str| -> ParsedDocument {
        let (_, bytes) = fixtures(kind)
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("fixture {kind}/{name} is missing"));
        let format = formats().find(|(k, _)| *k == kind).map(|(_, f)| f);
        parse::parse(
            format.expect("known kind"),
            &bytes,
            &ParseOptions::default(),
        )
        .expect("parses")
    };
    let headings = |d: &ParsedDocument| {
        d.blocks
            .iter()
            .filter(|b| matches!(b.kind, BlockKind::Heading(_)))
            .count()
    };
    let tables = |d: &ParsedDocument| {
        d.blocks
            .iter()
            .filter(|b| matches!(b.kind, BlockKind::Table(_)))
            .count()
    };
    assert_eq!(headings(&find("docx", "unit_test_headers.docx")), 8);
    assert_eq!(tables(&find("docx", "word_tables.docx")), 7);
    let strict = find("docx", "Strict.docx");
    assert_eq!(strict.blocks[0].text, "Some text");
    let slides = find("pptx", "powerpoint_sample.pptx");
    assert_eq!(slides.pages, 3);
    assert_eq!(tables(&slides), 1);
    let sheets = find("xlsx", "xlsx_01.xlsx");
    assert_eq!(sheets.pages, 4);
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn damaged_fixtures_never_panic_or_hang() {
    let mut rng = Rng(0x5eed_0ff1_ce00_0001);
    for (kind, format) in formats() {
        let parse = direct(format);
        for (name, bytes) in fixtures(kind) {
            let mut copies: Vec<(String, Vec<u8>)> = Vec::new();
            for frac in [0.05, 0.3, 0.5, 0.8, 0.95] {
                let cut = (bytes.len() as f64 * frac) as usize;
                copies.push((format!("cut at {cut}"), bytes[..cut].to_vec()));
            }
            copies.push(("last byte cut".into(), bytes[..bytes.len() - 1].to_vec()));
            for round in 0..12 {
                let mut flipped = bytes.clone();
                let flips = 1 + round % 4;
                for _ in 0..flips {
                    let at = (rng.next() % flipped.len() as u64) as usize;
                    flipped[at] ^= 1 << (rng.next() % 8);
                }
                copies.push((format!("flip round {round}"), flipped));
            }
            for (what, copy) in copies {
                let started = Instant::now();
                // Either outcome is fine; reaching the next line is the test.
                let _ = parse(&copy);
                assert!(
                    started.elapsed() < PATIENCE,
                    "{kind}/{name} ({what}) took {:?}",
                    started.elapsed()
                );
            }
        }
    }
}

fn zip_of(entries: impl IntoIterator<Item = (String, Vec<u8>)>) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, content) in entries {
        zip.start_file(name, SimpleFileOptions::default())
            .expect("start entry");
        zip.write_all(&content).expect("write entry");
    }
    zip.finish().expect("finish zip").into_inner()
}

#[test]
fn zip_bombs_are_refused() {
    // 64 MiB of one byte deflates to a few dozen KiB: far past the ratio cap.
    let bomb = zip_of([
        (
            "_rels/.rels".to_owned(),
            br#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#.to_vec(),
        ),
        ("word/document.xml".to_owned(), vec![b' '; 64 << 20]),
    ]);
    assert!(bomb.len() < 1 << 20, "the bomb should be small on disk");
    for format in [
        Format::named("docx"),
        Format::named("pptx"),
        Format::named("xlsx"),
    ] {
        let started = Instant::now();
        let err = parse::parse(format, &bomb, &ParseOptions::default())
            .expect_err("a bomb must not parse");
        assert!(
            matches!(err, ParseError::TooLarge(_)),
            "{format:?}: expected TooLarge, got {err:?}"
        );
        assert!(started.elapsed() < PATIENCE);
    }
    // Declared sizes are checked on opening...
    let limits = archive::ZipLimits {
        max_entry_bytes: 1 << 20,
        max_ratio: u64::MAX,
        ..Default::default()
    };
    assert!(matches!(
        archive::GuardedZip::open(&bomb, limits),
        Err(ParseError::TooLarge(_))
    ));
    // ...and the real, inflated sizes on reading, whatever the archive declares.
    let liar = declare_sizes(&bomb, 1000);
    let mut zip = archive::GuardedZip::open(&liar, limits).expect("opens");
    assert!(matches!(
        zip.read("word/document.xml"),
        Err(ParseError::TooLarge(_))
    ));
    let limits = archive::ZipLimits {
        max_total_bytes: 1 << 20,
        max_entry_bytes: 1 << 20,
        max_ratio: u64::MAX,
        ..Default::default()
    };
    let spread = zip_of((0..4).map(|i| (format!("part{i}.xml"), vec![b'x'; 400 << 10])));
    assert!(matches!(
        archive::GuardedZip::open(&spread, limits),
        Err(ParseError::TooLarge(_))
    ));
    let spread_liar = declare_sizes(&spread, 10);
    let mut zip = archive::GuardedZip::open(&spread_liar, limits).expect("opens");
    assert!(matches!(zip.verify_all(), Err(ParseError::TooLarge(_))));
}

/// Rewrites every entry's declared uncompressed size (local and central headers).
fn declare_sizes(zip: &[u8], size: u32) -> Vec<u8> {
    let mut out = zip.to_vec();
    let mut i = 0;
    while i + 30 <= out.len() {
        let field = match out[i..i + 4] {
            [0x50, 0x4b, 0x03, 0x04] => Some(i + 22),
            [0x50, 0x4b, 0x01, 0x02] => Some(i + 24),
            _ => None,
        };
        if let Some(at) = field {
            out[at..at + 4].copy_from_slice(&size.to_le_bytes());
        }
        i += 1;
    }
    out
}

#[test]
fn archives_with_thousands_of_entries_are_refused() {
    let many = zip_of((0..20_000).map(|i| (format!("junk/{i}.xml"), Vec::new())));
    for format in [
        Format::named("docx"),
        Format::named("pptx"),
        Format::named("xlsx"),
    ] {
        let err =
            parse::parse(format, &many, &ParseOptions::default()).expect_err("too many entries");
        assert!(
            matches!(err, ParseError::TooLarge(_)),
            "{format:?}: expected TooLarge, got {err:?}"
        );
    }
}

#[test]
fn forged_shared_string_counts_are_refused() {
    let (_, bytes) = fixtures("xlsx")
        .into_iter()
        .find(|(n, _)| n == "xlsx_01.xlsx")
        .expect("fixture xlsx_01.xlsx");
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(&bytes[..])).expect("zip");
    let mut parts = Vec::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).expect("entry");
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut content).expect("read");
        if f.name().ends_with("sharedStrings.xml") {
            let text = String::from_utf8_lossy(&content).into_owned();
            let at = text.find("uniqueCount=\"").expect("a uniqueCount") + 13;
            let end = at + text[at..].find('"').expect("closing quote");
            content = format!("{}{}{}", &text[..at], "99999999999999", &text[end..]).into_bytes();
        }
        parts.push((f.name().to_owned(), content));
    }
    let forged = zip_of(parts);
    assert!(matches!(
        parse::parse(Format::named("xlsx"), &forged, &ParseOptions::default()),
        Err(ParseError::Invalid(_))
    ));
}

fn docx_with_body(body: &str) -> Vec<u8> {
    let doc = format!(
        r#"<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
    );
    zip_of([
        (
            "_rels/.rels".to_owned(),
            br#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#.to_vec(),
        ),
        ("word/document.xml".to_owned(), doc.into_bytes()),
    ])
}

#[test]
fn deep_nesting_is_bounded() {
    // Tables inside tables as deep as the XML depth cap allows: parsed without
    // exhausting the (debug-build) stack.
    let depth = 60;
    let body = format!(
        "{}<w:p><w:r><w:t>core</w:t></w:r></w:p>{}",
        "<w:tbl><w:tr><w:tc>".repeat(depth),
        "</w:tc></w:tr></w:tbl>".repeat(depth)
    );
    let doc = parse::parse(
        Format::named("docx"),
        &docx_with_body(&body),
        &ParseOptions::default(),
    )
    .expect("nested tables parse");
    assert!(doc.blocks[0].text.contains("core"));
    // Past the cap, the part is refused rather than walked.
    let body = format!(
        "{}<w:p><w:r><w:t>core</w:t></w:r></w:p>{}",
        "<w:sdt><w:sdtContent>".repeat(150),
        "</w:sdtContent></w:sdt>".repeat(150)
    );
    assert!(matches!(
        parse::parse(
            Format::named("docx"),
            &docx_with_body(&body),
            &ParseOptions::default()
        ),
        Err(ParseError::Invalid(_))
    ));
}

#[test]
fn merged_cells_do_not_multiply_memory() {
    // One long text merged across many columns and rows: copies stop at a budget.
    let long = "x".repeat(1 << 20);
    let first = format!(
        r#"<w:tr><w:tc><w:tcPr><w:gridSpan w:val="500"/><w:vMerge w:val="restart"/></w:tcPr><w:p><w:r><w:t>{long}</w:t></w:r></w:p></w:tc></w:tr>"#
    );
    let next =
        r#"<w:tr><w:tc><w:tcPr><w:gridSpan w:val="500"/><w:vMerge/></w:tcPr><w:p/></w:tc></w:tr>"#;
    let body = format!("<w:tbl>{first}{}</w:tbl>", next.repeat(200));
    let started = Instant::now();
    let doc = parse::parse(
        Format::named("docx"),
        &docx_with_body(&body),
        &ParseOptions::default(),
    )
    .expect("parses");
    let cells: usize = doc
        .blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t.rows.iter().flatten().map(String::len).sum::<usize>()),
            _ => None,
        })
        .sum();
    assert!(cells <= 16 << 20, "{cells} bytes of cell text");
    assert!(started.elapsed() < PATIENCE);
}

#[test]
fn entity_expansion_is_not_performed() {
    // A "billion laughs" document: custom entities are never expanded.
    let doc = br#"<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>safe &b; text</w:t></w:r></w:p></w:body></w:document>"#;
    let bytes = zip_of([
        (
            "_rels/.rels".to_owned(),
            br#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#.to_vec(),
        ),
        ("word/document.xml".to_owned(), doc.to_vec()),
    ]);
    let parsed =
        parse::parse(Format::named("docx"), &bytes, &ParseOptions::default()).expect("parses");
    assert_eq!(parsed.blocks[0].text, "safe text");
}
