//! Ingestion throughput through the HTTP API: a 100-page PDF (pages of the shared PDF
//! fixtures) through `/upload`, and 1,000 small Markdown files through `/upload/bulk`
//! (ten requests of 100), with the share of time in parsing, embedding and storage.
//! Run through `scripts/bench_ingest.sh`.

use std::path::Path;
use std::time::Instant;

use pdfium_render::prelude::*;
use ragd::config::Config;
use serde_json::Value;

fn hundred_page_pdf(pdfium_lib: &Path) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data/pdf/sources");
    let pdfium = ragd::parse::pdf::pdfium(pdfium_lib).expect("pdfium");
    let names = [
        "redp5110_sampled.pdf",
        "normal_4pages.pdf",
        "multi_page.pdf",
        "2305.03393v1-pg9.pdf",
        "amt_handbook_sample.pdf",
    ];
    let sources: Vec<PdfDocument> = names
        .iter()
        .map(|f| {
            pdfium
                .load_pdf_from_file(&dir.join(f), None)
                .expect("fixture PDF")
        })
        .collect();
    let mut out = pdfium.create_new_pdf().expect("new PDF");
    'fill: loop {
        for src in &sources {
            for i in 0..src.pages().len() {
                let at = out.pages().len();
                if at >= 100 {
                    break 'fill;
                }
                out.pages_mut()
                    .copy_page_from_document(src, i, at)
                    .expect("copy page");
            }
        }
    }
    out.save_to_bytes().expect("save PDF")
}

fn markdown(i: usize) -> String {
    const WORDS: &[&str] = &[
        "pump",
        "valve",
        "seal",
        "torque",
        "pressure",
        "flow",
        "inspection",
        "schedule",
        "gasket",
        "bearing",
        "alignment",
        "vibration",
        "lubricant",
        "filter",
        "motor",
        "coupling",
        "impeller",
        "housing",
        "manual",
        "safety",
    ];
    let para = |k: usize| {
        (0..60)
            .map(|j| WORDS[(i * 7 + k * 13 + j * 3) % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!("# Note {i}\n\n{}.\n\n## Details\n\n{}.\n", para(1), para(2))
}

async fn stats(client: &reqwest::Client, base: &str) -> Value {
    client
        .get(format!("{base}/api/v1/health/stats"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["ingestion"]
        .clone()
}

fn report(label: &str, secs: f64, before: &Value, after: &Value, pages: Option<u64>) {
    let d = |k: &str| after[k].as_f64().unwrap_or(0.0) - before[k].as_f64().unwrap_or(0.0);
    let (parse, embed, store) = (d("parse_s"), d("embed_s"), d("store_s"));
    let busy = (parse + embed + store).max(1e-9);
    let chunks = d("chunks");
    println!(
        "{label}: {secs:.1}s wall, {:.0} sources, {chunks:.0} chunks: {:.1} chunks/s{}",
        d("sources"),
        chunks / secs,
        pages
            .map(|p| format!(", {:.2} pages/s", p as f64 / secs))
            .unwrap_or_default()
    );
    println!("  stage time: parse {parse:.1}s ({:.0}%), embed {embed:.1}s ({:.0}%), store {store:.1}s ({:.0}%)",
        100.0 * parse / busy, 100.0 * embed / busy, 100.0 * store / busy);
}

#[tokio::main]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        port: 0,
        data_dir: dir.path().to_owned(),
        models_dir: root.join("models"),
        ..Config::default()
    };
    let pdfium_lib = config.pdfium_library_path();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ragd::run(config, listener, async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3600))
        .build()
        .unwrap();
    for _ in 0..600 {
        if client
            .get(format!("{base}/api/v1/health"))
            .send()
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let pdf = tokio::task::spawn_blocking(move || hundred_page_pdf(&pdfium_lib))
        .await
        .unwrap();
    let before = stats(&client, &base).await;
    let t = Instant::now();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(pdf).file_name("hundred.pdf"),
    );
    let r: Value = client
        .post(format!("{base}/api/v1/upload"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["success"], true, "{r}");
    report(
        "100-page PDF via /upload",
        t.elapsed().as_secs_f64(),
        &before,
        &stats(&client, &base).await,
        Some(100),
    );

    let before = stats(&client, &base).await;
    let t = Instant::now();
    for batch in 0..10 {
        let mut form = reqwest::multipart::Form::new();
        for i in batch * 100..(batch + 1) * 100 {
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(markdown(i).into_bytes())
                    .file_name(format!("note-{i}.md")),
            );
        }
        let r: Value = client
            .post(format!("{base}/api/v1/upload/bulk"))
            .multipart(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["failed"], 0, "{r}");
    }
    report(
        "1,000 Markdown files via /upload/bulk",
        t.elapsed().as_secs_f64(),
        &before,
        &stats(&client, &base).await,
        None,
    );
    let _ = tx.send(());
    let _ = server.await;
}
