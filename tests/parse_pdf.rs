//! PDF parsing on documents the tests build themselves with pdfium: headings from size
//! and weight, paragraphs, lists, tables, two-column reading order, page-by-page
//! events, OCR of a page without a text layer, and bad input.

use std::ops::ControlFlow;
use std::path::PathBuf;

use pdfium_render::prelude::*;
use ragd::parse::{self, pdf, BlockKind, Format, PageEvent, ParseError, ParseOptions, TableMode};

fn opts() -> ParseOptions {
    ParseOptions {
        pdfium_library: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models/pdfium/libpdfium.so"),
        ..ParseOptions::default()
    }
}

/// One run of text: x and y (from the top) in points, size, bold.
struct Run(f32, f32, &'static str, f32, bool);

const A4_HEIGHT: f32 = 841.89;

fn make_pdf(pages: &[Vec<Run>]) -> Vec<u8> {
    let pdfium = pdf::pdfium(&opts().pdfium_library).expect("pdfium (run scripts/setup.sh)");
    let mut doc = pdfium.create_new_pdf().unwrap();
    let regular = doc.fonts_mut().helvetica();
    let bold = doc.fonts_mut().helvetica_bold();
    for runs in pages {
        let mut page = doc
            .pages_mut()
            .create_page_at_end(PdfPagePaperSize::a4())
            .unwrap();
        for Run(x, y, text, size, b) in runs {
            let font = if *b { bold } else { regular };
            page.objects_mut()
                .create_text_object(
                    PdfPoints::new(*x),
                    PdfPoints::new(A4_HEIGHT - y),
                    *text,
                    font,
                    PdfPoints::new(*size),
                )
                .unwrap();
        }
    }
    doc.save_to_bytes().unwrap()
}

fn report_page() -> Vec<Run> {
    let mut runs = vec![
        Run(72.0, 80.0, "Annual Report", 24.0, false),
        Run(
            72.0,
            120.0,
            "This report describes the results of the year. It covers",
            11.0,
            false,
        ),
        Run(
            72.0,
            134.0,
            "sales, costs and the outlook for the next period in some",
            11.0,
            false,
        ),
        Run(
            72.0,
            148.0,
            "detail for every region we work in.",
            11.0,
            false,
        ),
        Run(72.0, 180.0, "Key Figures", 11.0, true),
        Run(72.0, 200.0, "- First point of the list", 11.0, false),
        Run(72.0, 214.0, "- Second point of the list", 11.0, false),
    ];
    let table = [
        ["Region", "Sales", "Costs"],
        ["North", "120", "80"],
        ["South", "95", "60"],
        ["East", "130", "70"],
    ];
    for (r, row) in table.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            runs.push(Run(
                72.0 + 160.0 * c as f32,
                250.0 + 16.0 * r as f32,
                cell,
                11.0,
                r == 0,
            ));
        }
    }
    runs.push(Run(
        72.0,
        340.0,
        "The table above sums up the year for every region.",
        11.0,
        false,
    ));
    runs
}

fn two_column_page() -> Vec<Run> {
    const LEFT: [&str; 4] = [
        "Left column line one is here",
        "left column line two goes on",
        "left column line three goes on",
        "left column line four ends.",
    ];
    const RIGHT: [&str; 4] = [
        "Right column line one is here",
        "right column line two goes on",
        "right column line three goes on",
        "right column line four ends.",
    ];
    let mut runs = Vec::new();
    for (i, (l, r)) in LEFT.iter().zip(RIGHT).enumerate() {
        runs.push(Run(72.0, 100.0 + 14.0 * i as f32, l, 11.0, false));
        runs.push(Run(320.0, 100.0 + 14.0 * i as f32, r, 11.0, false));
    }
    runs
}

#[test]
fn headings_paragraphs_lists_and_tables() {
    let bytes = make_pdf(&[report_page(), two_column_page()]);
    let doc = parse::parse(Format::named("pdf"), &bytes, &opts()).expect("parse");
    assert_eq!(doc.pages, 2);
    let b = &doc.blocks;
    assert!(matches!(b[0].kind, BlockKind::Heading(1 | 2)), "{:?}", b[0]);
    assert_eq!(b[0].text, "Annual Report");
    assert_eq!(doc.title.as_deref(), Some("Annual Report"));
    assert_eq!(b[1].kind, BlockKind::Paragraph);
    assert!(
        b[1].text
            .contains("results of the year. It covers sales, costs"),
        "{}",
        b[1].text
    );
    assert!(
        matches!(b[2].kind, BlockKind::Heading(_)) && b[2].text == "Key Figures",
        "{:?}",
        b[2]
    );
    let items: Vec<&str> = b
        .iter()
        .filter(|b| b.kind == BlockKind::ListItem)
        .map(|b| b.text.as_str())
        .collect();
    assert_eq!(
        items,
        ["First point of the list", "Second point of the list"]
    );
    let table = b
        .iter()
        .find_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t),
            _ => None,
        })
        .expect("a table");
    assert_eq!(table.rows[0], ["Region", "Sales", "Costs"]);
    assert_eq!(table.rows[3], ["East", "130", "70"]);
    assert!(b.iter().all(|b| b.page == 1 || b.page == 2));

    // Two columns: all of the left one before the right one.
    let page2: String = b
        .iter()
        .filter(|b| b.page == 2)
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let left_end = page2.find("left column line four").expect("left");
    let right_start = page2.find("Right column line one").expect("right");
    assert!(left_end < right_start, "{page2}");
}

#[test]
fn accurate_mode_falls_back_to_text_positions() {
    let bytes = make_pdf(&[report_page()]);
    let o = ParseOptions {
        table_mode: TableMode::Accurate,
        ..opts()
    };
    let doc = parse::parse(Format::named("pdf"), &bytes, &o).expect("parse");
    let tables: Vec<_> = doc
        .blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Table(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables[0].n_rows(), 4);
}

#[test]
fn page_events_come_one_page_at_a_time_and_stop_early() {
    let bytes = make_pdf(&[report_page(), two_column_page(), report_page()]);
    let mut seen = Vec::new();
    parse::for_each_page(Format::named("pdf"), &bytes, &opts(), &mut |e| {
        match e {
            PageEvent::Opened(info) => seen.push(format!("opened {}", info.pages)),
            PageEvent::Page { number, blocks } => {
                seen.push(format!("page {number} {}", !blocks.is_empty()))
            }
        }
        if seen.len() == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .expect("parse");
    assert_eq!(seen, ["opened 3", "page 1 true", "page 2 true"]);
}

/// Renders `bytes`' first page and wraps the bitmap into a new PDF with no text layer.
fn scanned_copy(bytes: &[u8]) -> (Vec<u8>, image::DynamicImage) {
    let pdfium = pdf::pdfium(&opts().pdfium_library).unwrap();
    let src = pdfium.load_pdf_from_byte_slice(bytes, None).unwrap();
    let page = src.pages().get(0).unwrap();
    let img = page
        .render_with_config(&PdfRenderConfig::new().set_target_width(1800))
        .unwrap()
        .as_image()
        .unwrap();
    let mut doc = pdfium.create_new_pdf().unwrap();
    let mut out = doc
        .pages_mut()
        .create_page_at_end(PdfPagePaperSize::a4())
        .unwrap();
    out.objects_mut()
        .create_image_object(
            PdfPoints::ZERO,
            PdfPoints::ZERO,
            &img,
            Some(PdfPoints::new(595.28)),
            Some(PdfPoints::new(A4_HEIGHT)),
        )
        .unwrap();
    drop(out);
    (doc.save_to_bytes().unwrap(), img)
}

#[test]
fn pages_without_text_are_read_by_ocr() {
    let (scan, _) = scanned_copy(&make_pdf(&[report_page()]));
    let doc = parse::parse(Format::named("pdf"), &scan, &opts()).expect("parse");
    let text = parse::render::to_plain_text(&doc);
    for word in ["Annual", "Report", "outlook", "region", "Sales"] {
        assert!(text.contains(word), "{word} missing from OCR text: {text}");
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(matches!(
        parse::parse(Format::named("pdf"), b"", &opts()),
        Err(ParseError::Empty)
    ));
    assert!(matches!(
        parse::parse(Format::named("pdf"), b"hello, not a pdf", &opts()),
        Err(ParseError::Invalid(_))
    ));
    let bytes = make_pdf(&[report_page()]);
    let truncated = &bytes[..bytes.len() / 3];
    // Either an error or whatever pdfium could recover; never a panic.
    let _ = parse::parse(Format::named("pdf"), truncated, &opts());
    let missing = ParseOptions {
        pdfium_library: PathBuf::from("/nonexistent/libpdfium.so"),
        ..opts()
    };
    // The library is bound once per process: a later wrong path still parses.
    let _ = parse::parse(Format::named("pdf"), &bytes, &missing);
}
