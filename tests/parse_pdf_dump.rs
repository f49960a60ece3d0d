//! Development aid: prints a fixture parsed to Markdown (`RAGD_DUMP=path cargo test
//! --test parse_pdf_dump -- --nocapture`).

use ragd::parse::{self, render, Format, ParseOptions, TableMode};

#[test]
fn dump() {
    let Ok(path) = std::env::var("RAGD_DUMP") else {
        return;
    };
    let bytes = std::fs::read(&path).expect("read");
    let opts = ParseOptions {
        enable_ocr: std::env::var("RAGD_OCR").is_ok(),
        table_mode: if std::env::var("RAGD_ACCURATE").is_ok() {
            TableMode::Accurate
        } else {
            TableMode::Fast
        },
        ..ParseOptions::default()
    };
    let t = std::time::Instant::now();
    let doc = parse::parse(Format::for_filename(&path).unwrap(), &bytes, &opts);
    let dt = t.elapsed();
    match doc {
        Ok(doc) => {
            println!("{}", render::to_markdown(&doc));
            println!(
                "---- title {:?} author {:?} pages {} in {dt:?}",
                doc.title, doc.author, doc.pages
            );
        }
        Err(e) => println!("error: {e:?}"),
    }
}
