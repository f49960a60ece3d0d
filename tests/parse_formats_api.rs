//! PDF, DOCX, PPTX, XLSX and images through `/parse`, `/parse/sections` and `/upload`,
//! on documents the tests write themselves.

mod common;

use common::pdf::{encode, render, text_pdf, Run};
use common::{assert_error_body, TestServer};

fn report_pdf() -> Vec<u8> {
    text_pdf(&[
        vec![
            Run(72.0, 80.0, "Quarterly Maintenance Report", 22.0, true),
            Run(
                72.0,
                130.0,
                "The compressor station ran without faults this quarter.",
                11.0,
                false,
            ),
            Run(
                72.0,
                146.0,
                "Inspections found worn seals on two pumps, replaced in March.",
                11.0,
                false,
            ),
            Run(72.0, 190.0, "Findings", 16.0, true),
            Run(
                72.0,
                220.0,
                "Vibration on motor three rose slightly and is being watched.",
                11.0,
                false,
            ),
        ],
        vec![
            Run(72.0, 80.0, "Outlook", 16.0, true),
            Run(
                72.0,
                110.0,
                "Next quarter the team will replace the cooling fans on line two.",
                11.0,
                false,
            ),
        ],
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdf_through_every_parse_endpoint_and_upload() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let pdf = report_pdf();
    let (st, p) = s.post_file("/api/v1/parse", "report.pdf", &pdf, &[]).await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["format"], ".pdf");
    assert_eq!(p["metadata"]["num_pages"], 2);
    let md = p["llm_ready"].as_str().unwrap();
    assert!(md.contains("# Quarterly Maintenance Report"), "{md}");
    assert!(
        md.contains("## Findings") || md.contains("# Findings"),
        "{md}"
    );
    assert!(p["content"]["cleaned_text"]
        .as_str()
        .unwrap()
        .contains("cooling fans"));

    let (st, r) = s
        .post_file(
            "/api/v1/parse/sections",
            "report.pdf",
            &pdf,
            &[("chunking_mode", "page")],
        )
        .await;
    assert_eq!(st, 200, "{r}");
    let chunks = r["chunks"].as_array().unwrap();
    assert_eq!(chunks.len(), 2);
    assert_eq!(
        (
            chunks[1]["page_start"].as_u64(),
            chunks[1]["page_end"].as_u64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(r["chunking_stats"]["pages_processed"], 2);

    // Incremental: a progress event per page, the first chunk right after page 1.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(pdf.clone()).file_name("report.pdf"),
    );
    let body = s
        .client
        .post(s.url("/api/v1/parse/sections/incremental"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let kinds: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(kinds[..3], ["metadata", "progress", "chunk"], "{body}");
    assert_eq!(kinds.iter().filter(|k| **k == "progress").count(), 2);
    assert_eq!(kinds.last(), Some(&"done"));

    let (st, u) = s.post_file("/api/v1/upload", "report.pdf", &pdf, &[]).await;
    assert_eq!(st, 200, "{u}");
    assert_eq!(u["title"], "Quarterly Maintenance Report");
    let hit = s.search("which parts were replaced on the pumps", 1).await;
    assert_eq!(hit["results"][0]["metadata"]["file_type"], "pdf");
    assert_eq!(hit["results"][0]["metadata"]["page_start"], 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn office_documents_through_http() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let docx = common::office::docx();
    let (st, p) = s.post_file("/api/v1/parse", "doc.docx", &docx, &[]).await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["format"], ".docx");
    assert!(
        p["llm_ready"]
            .as_str()
            .unwrap()
            .lines()
            .any(|l| l.starts_with('#')),
        "headings come through: {p}"
    );
    let (st, r) = s
        .post_file(
            "/api/v1/parse/sections",
            "doc.docx",
            &docx,
            &[("chunking_mode", "semantic")],
        )
        .await;
    assert_eq!(st, 200, "{r}");
    assert!(r["chunking_stats"]["sections_found"].as_u64().unwrap() >= 1);

    let pptx = common::office::pptx();
    let (st, p) = s.post_file("/api/v1/parse", "deck.pptx", &pptx, &[]).await;
    assert_eq!(st, 200, "{p}");
    assert!(
        p["metadata"]["num_pages"].as_u64().unwrap() >= 2,
        "one page per slide: {p}"
    );

    let xlsx = common::office::xlsx();
    let (st, p) = s.post_file("/api/v1/parse", "book.xlsx", &xlsx, &[]).await;
    assert_eq!(st, 200, "{p}");
    assert!(
        p["tables_count"].as_u64().unwrap() >= 1,
        "sheets are tables: {p}"
    );
    let t = &p["tables"][0];
    assert!(t["rows"].as_u64().unwrap() >= 2 && t["cols"].as_u64().unwrap() >= 2);
    assert!(t["markdown"].as_str().unwrap().starts_with('|'));

    for (name, bytes) in [("doc.docx", docx), ("deck.pptx", pptx), ("book.xlsx", xlsx)] {
        let (st, u) = s.post_file("/api/v1/upload", name, &bytes, &[]).await;
        assert_eq!(st, 200, "{name}: {u}");
        assert!(u["chunks_added"].as_u64().unwrap() >= 1);
        // Damaged and empty copies are clear 400s.
        let (st, b) = s
            .post_file("/api/v1/parse", name, &bytes[..bytes.len() / 3], &[])
            .await;
        assert_error_body(st, &b, 400);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_encodings_and_macro_workbooks() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let text_of = |p: &serde_json::Value| p["llm_ready"].as_str().unwrap().to_owned();

    // A Shift-JIS CSV (as Excel on Japanese Windows writes it): every cell comes out.
    let csv = "名前,年齢,都市,職業\n佐藤太郎,30,東京,エンジニア\n三木英子,25,大阪,デザイナー\n髙橋淳,35,名古屋,営業\n";
    let (sjis, _, lossy) = encoding_rs::SHIFT_JIS.encode(csv);
    assert!(!lossy);
    let (st, p) = s.post_file("/api/v1/parse", "staff.csv", &sjis, &[]).await;
    assert_eq!(st, 200, "{p}");
    let text = text_of(&p);
    for cell in [
        "佐藤太郎",
        "三木英子",
        "髙橋淳",
        "エンジニア",
        "名古屋",
        "営業",
    ] {
        assert!(text.contains(cell), "{cell} lost: {text}");
    }

    // UTF-32 text, with and without a byte-order mark.
    let words = "Ümlauts, ελληνικά and 日本語 survive.\n\nA second paragraph.";
    let body: Vec<u8> = words
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    for bytes in [[&[0xFF, 0xFE, 0, 0][..], &body].concat(), body.clone()] {
        let (st, p) = s.post_file("/api/v1/parse", "notes.txt", &bytes, &[]).await;
        assert_eq!(st, 200, "{p}");
        let text = text_of(&p);
        assert!(text.contains("ελληνικά and 日本語 survive"), "{text}");
        assert!(text.contains("A second paragraph"), "{text}");
    }

    // A macro-enabled workbook is read like a workbook; its macros are ignored.
    let (_, f) = s.get_json("/api/v1/parse/formats").await;
    assert!(
        f["formats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == ".xlsm"),
        "{f}"
    );
    assert!(f["descriptions"][".xlsm"]
        .as_str()
        .unwrap()
        .contains("macro"));
    let xlsm = common::office::xlsm();
    let (st, p) = s.post_file("/api/v1/parse", "book.xlsm", &xlsm, &[]).await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(p["format"], ".xlsm");
    assert!(text_of(&p).contains("Widget"), "{p}");
    assert!(!text_of(&p).contains("Boom"), "{p}");
    let (st, u) = s.post_file("/api/v1/upload", "book.xlsm", &xlsm, &[]).await;
    assert_eq!(st, 200, "{u}");
    assert!(u["chunks_added"].as_u64().unwrap() >= 1);
    let hits = s.search("Widget", 1).await;
    assert_eq!(
        hits["results"][0]["metadata"]["file_type"], "xlsm",
        "{hits}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_read_by_ocr() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let img = render(&report_pdf(), 1800);
    for (name, format) in [
        ("scan.png", image::ImageFormat::Png),
        ("scan.jpg", image::ImageFormat::Jpeg),
        ("scan.tiff", image::ImageFormat::Tiff),
        ("scan.bmp", image::ImageFormat::Bmp),
    ] {
        let bytes = encode(&img, format);
        let (st, p) = s.post_file("/api/v1/parse", name, &bytes, &[]).await;
        assert_eq!(st, 200, "{name}: {p}");
        let text = p["content"]["cleaned_text"].as_str().unwrap();
        for word in ["Quarterly", "Maintenance", "compressor"] {
            assert!(text.contains(word), "{name}: {word} not read: {text}");
        }
        assert_eq!(p["images_count"], 1, "{name}");
        assert_eq!(p["images"][0]["description_source"], "ocr");
        assert!(
            p["images"][0]["description"]
                .as_str()
                .unwrap()
                .contains("1800"),
            "the size is described: {p}"
        );
    }
    // A scanned PDF (no text layer) is OCR'd too.
    let scanned = common::pdf::scanned_pdf(&img);
    let (st, p) = s
        .post_file("/api/v1/parse", "scanned.pdf", &scanned, &[])
        .await;
    assert_eq!(st, 200, "{p}");
    assert!(
        p["content"]["cleaned_text"]
            .as_str()
            .unwrap()
            .contains("compressor"),
        "{p}"
    );
    let (st, b) = s
        .post_file(
            "/api/v1/parse",
            "broken.png",
            b"\x89PNG\r\n\x1a\nnot really",
            &[],
        )
        .await;
    assert_error_body(st, &b, 400);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_files_of_every_format_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for ext in ragd::parse::formats::extensions_in(ragd::parse::FORMATS) {
        let name = format!("empty{ext}");
        let (st, b) = s.post_file("/api/v1/parse", &name, b"", &[]).await;
        assert_error_body(st, &b, 400);
        let (st, b) = s.post_file("/api/v1/upload", &name, b"", &[]).await;
        assert_error_body(st, &b, 400);
    }
    s.stop().await;
}
