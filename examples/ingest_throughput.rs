//! Ingestion against the embedder alone, on the same chunks, in one run:
//! 1. the peers' 2,000 passages (`../shared/tools/passages.py`), one `.txt` file each,
//!    sent through `/upload/bulk` 50 files per request, while `/search` is timed (one
//!    query every 250 ms: a user searching while the upload runs);
//! 2. three 100-page PDFs of distinct text (300 more of those passages each) through
//!    `/upload`, one after another.
//!
//! The files go in rounds (five parts of the text files, then each PDF). In each
//! round the texts ingestion embeds are embedded by the embedder alone (the library,
//! batch `embed_batch_size`, same threads) right before and right after they are
//! ingested through the HTTP API of an in-process server on a temp dir, and that round's
//! ingestion is compared with the mean of the two: the machine's speed drifts by several
//! percent within a minute. The ratio of a workload is its rounds' embedder-alone time
//! over their ingestion time. Prints a table of passages/s, the ratios (each round's
//! too) and the `/search` latency percentiles. Run through `scripts/bench_ingest.sh`.
//! Usage: `ingest_throughput [files] [files_per_request] [requests_in_flight] [rounds]
//! [search_every_ms]`.
//!
//! The `/search` probe is the instrument for latency, and each query costs the bulk
//! passes what it takes (its embedding runs ahead of them, ~3 ms on one core, plus the
//! search itself): one query every 50 ms (~15 a second) took ~10% of the bulk upload's
//! rate on Zen 3 (rounds with and without the probe, alternated within runs); one every
//! 250 ms is about a fifth of those queries. The default samples a few hundred latencies
//! over the run; pass 50 to measure under the heavier load.

#[path = "../benches/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use pdfium_render::prelude::*;
use ragd::config::Config;
use ragd::ml::{device, BertEmbedder, Embedder};
use serde_json::Value;

/// 100-page PDFs ingested one after another.
const PDFS: usize = 3;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A 100-page PDF of distinct text (so no chunk repeats another): each page a bold
/// heading and three of `passages`, wrapped at about 95 characters, in Helvetica.
fn hundred_page_pdf(pdfium_lib: &Path, passages: &[String]) -> Vec<u8> {
    const A4_HEIGHT: f32 = 841.89;
    let pdfium = ragd::parse::pdf::pdfium(pdfium_lib).expect("pdfium");
    let mut doc = pdfium.create_new_pdf().expect("new PDF");
    let regular = doc.fonts_mut().helvetica();
    let bold = doc.fonts_mut().helvetica_bold();
    for (i, three) in passages.chunks(3).take(100).enumerate() {
        let mut page = doc
            .pages_mut()
            .create_page_at_end(PdfPagePaperSize::a4())
            .expect("page");
        let mut y = 60.0;
        let mut line = |text: &str, font, size: f32, y: &mut f32| {
            page.objects_mut()
                .create_text_object(
                    PdfPoints::new(50.0),
                    PdfPoints::new(A4_HEIGHT - *y),
                    text,
                    font,
                    PdfPoints::new(size),
                )
                .expect("text");
            *y += size * 1.35;
        };
        line(
            &format!("Section {} of the report", i + 1),
            bold,
            14.0,
            &mut y,
        );
        y += 6.0;
        for p in three {
            let mut current = String::new();
            for word in p.split_whitespace() {
                if current.len() + word.len() + 1 > 95 {
                    line(&current, regular, 9.5, &mut y);
                    current.clear();
                }
                if !current.is_empty() {
                    current.push(' ');
                }
                current.push_str(word);
            }
            line(&current, regular, 9.5, &mut y);
            y += 8.0;
        }
    }
    doc.save_to_bytes().expect("save PDF")
}

/// Seconds the embedder alone takes over `texts`, in batches of `batch`.
fn embedder_alone_secs(model: &BertEmbedder, texts: &[String], batch: usize) -> f64 {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    model
        .embed(&refs[..batch.min(refs.len())])
        .expect("warm-up");
    let t = Instant::now();
    for chunk in refs.chunks(batch) {
        model.embed(chunk).expect("embed");
    }
    t.elapsed().as_secs_f64()
}

/// Sends `files` through `/upload/bulk`, `per_request` a request and `in_flight`
/// requests at once; returns the chunks added.
async fn ingest_bulk(
    client: &reqwest::Client,
    base: &str,
    files: &[(String, Vec<u8>)],
    per_request: usize,
    in_flight: usize,
) -> u64 {
    let requests = files.chunks(per_request).map(|part| async move {
        let mut form = reqwest::multipart::Form::new();
        for (name, bytes) in part {
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone()),
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
        r["total_chunks_added"].as_u64().unwrap_or(0)
    });
    futures::stream::iter(requests)
        .buffer_unordered(in_flight)
        .fold(0, |sum, n| async move { sum + n })
        .await
}

/// Sends one file through `/upload`; returns the chunks added.
async fn upload(client: &reqwest::Client, base: &str, name: &str, bytes: Vec<u8>) -> u64 {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()),
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
    r["chunks_added"].as_u64().unwrap_or(0)
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

fn stage_line(before: &Value, after: &Value) -> String {
    let d = |k: &str| after[k].as_f64().unwrap_or(0.0) - before[k].as_f64().unwrap_or(0.0);
    format!(
        "parse {:.1}s, embed {:.1}s (embedder busy), store {:.1}s",
        d("parse_s"),
        d("embed_s"),
        d("store_s")
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Times `/search` one query at a time, `every` apart, until `stop`.
async fn probe_search(
    client: reqwest::Client,
    base: String,
    stop: Arc<AtomicBool>,
    every: Duration,
) -> Vec<f64> {
    const QUERIES: &[&str] = &[
        "patient treatment dose outcome",
        "search engine ranking of documents",
        "backup and restore of a storage volume",
        "river valley village in winter",
        "quarterly revenue growth compared with cost",
    ];
    let mut out = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let r = client
            .post(format!("{base}/api/v1/search"))
            .json(&serde_json::json!({"query": QUERIES[i % QUERIES.len()], "top_k": 5}))
            .send()
            .await
            .expect("search");
        assert!(r.status().is_success(), "search failed: {}", r.status());
        let _ = r.bytes().await;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        i += 1;
        tokio::time::sleep(every).await;
    }
    out
}

#[tokio::main]
async fn main() {
    let (n_files, per_request, in_flight) = (arg(1, 2000), arg(2, 50).max(1), arg(3, 1).max(1));
    let rounds = arg(4, 5).max(1);
    let search_every = Duration::from_millis(arg(5, 250) as u64);
    // The server's log on stderr, filtered by RUST_LOG (default: warnings).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        port: 0,
        data_dir: dir.path().to_owned(),
        models_dir: root.join("models"),
        llm_model: "none".into(),
        ..Config::default()
    };
    let batch = config.embed_batch_size;
    let pdfium_lib = config.pdfium_library_path();
    let parse_opts = ragd::parse::ParseOptions {
        pdfium_library: pdfium_lib.clone(),
        ocr_languages: config.ocr_languages.clone(),
        ..Default::default()
    };

    // The inputs, and the texts ingestion will embed for them.
    let passages = common::peer_passages(n_files + PDFS * 300);
    let (passages, for_pdf) = passages.split_at(n_files);
    let files: Vec<(String, Vec<u8>)> = passages
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("passage-{i:05}.txt"), p.clone().into_bytes()))
        .collect();
    let pdfs: Vec<(String, Vec<u8>)> = for_pdf
        .chunks(300)
        .enumerate()
        .map(|(k, p)| (format!("hundred-{k}.pdf"), hundred_page_pdf(&pdfium_lib, p)))
        .collect();
    let model = BertEmbedder::load(&config.embedding_model_dir(), device::best_device(), batch)
        .expect("run scripts/setup.sh");
    let counter = model.token_counter();
    let window = model.max_tokens();
    let inputs = |name: &str, bytes: &[u8]| {
        ragd::kb::ingest::embedding_inputs(name, bytes, &parse_opts, &counter, window)
            .expect("chunks")
    };
    let pdf_chunks: Vec<Vec<String>> = pdfs.iter().map(|(n, b)| inputs(n, b)).collect();

    // The server (its embedder is idle while the one here runs alone).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ragd::run(config, listener, async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Rounds, each the embedder alone on a part's chunks and then ingestion of that
    // part: the machine's speed drifts by several percent within a minute, so each
    // round's ingestion is compared with the embedder alone right before and after it
    // (their mean), and the ratio is the sum over the rounds.
    let verdict = |ok: bool| if ok { "ok" } else { "BELOW TARGET" };
    let part = n_files.div_ceil(rounds);
    let parts: Vec<&[(String, Vec<u8>)]> = files.chunks(part).collect();
    let part_chunks: Vec<Vec<String>> = parts
        .iter()
        .map(|p| p.iter().flat_map(|(n, b)| inputs(n, b)).collect())
        .collect();
    let before = stats(&client, &base).await;
    let mut latencies = Vec::new();
    let (mut bulk_chunks, mut bulk_secs, mut text_alone_secs) = (0u64, 0.0, 0.0);
    let mut text_rounds = Vec::new();
    let mut alone_before = embedder_alone_secs(&model, &part_chunks[0], batch);
    for (r, p) in parts.iter().enumerate() {
        let stop = Arc::new(AtomicBool::new(false));
        let probe = tokio::spawn(probe_search(
            client.clone(),
            base.clone(),
            stop.clone(),
            search_every,
        ));
        let t = Instant::now();
        let stored = ingest_bulk(&client, &base, p, per_request, in_flight).await;
        let secs = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        latencies.extend(probe.await.unwrap());
        assert_eq!(
            stored,
            part_chunks[r].len() as u64,
            "round {r}: other chunks stored than embedded alone"
        );
        let alone_after = embedder_alone_secs(&model, &part_chunks[r], batch);
        let alone = (alone_before + alone_after) / 2.0;
        text_rounds.push(alone / secs);
        bulk_chunks += stored;
        bulk_secs += secs;
        text_alone_secs += alone;
        alone_before = match part_chunks.get(r + 1) {
            Some(next) => embedder_alone_secs(&model, next, batch),
            None => 0.0,
        };
    }
    latencies.sort_by(f64::total_cmp);
    let bulk_stages = stage_line(&before, &stats(&client, &base).await);

    // The PDFs, the same way.
    let before = stats(&client, &base).await;
    let (mut pdf_stored, mut pdf_secs, mut pdf_alone_secs) = (0u64, 0.0, 0.0);
    let mut pdf_rounds = Vec::new();
    let mut alone_before = embedder_alone_secs(&model, &pdf_chunks[0], batch);
    for (k, (name, bytes)) in pdfs.iter().enumerate() {
        let t = Instant::now();
        let stored = upload(&client, &base, name, bytes.clone()).await;
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(
            stored,
            pdf_chunks[k].len() as u64,
            "{name}: other chunks stored than embedded alone"
        );
        let alone_after = embedder_alone_secs(&model, &pdf_chunks[k], batch);
        let alone = (alone_before + alone_after) / 2.0;
        pdf_rounds.push(alone / secs);
        pdf_stored += stored;
        pdf_secs += secs;
        pdf_alone_secs += alone;
        alone_before = match pdf_chunks.get(k + 1) {
            Some(next) => embedder_alone_secs(&model, next, batch),
            None => 0.0,
        };
    }
    let pdf_stages = stage_line(&before, &stats(&client, &base).await);
    let _ = tx.send(());
    let _ = server.await;

    let rounds_line = |r: &[f64]| {
        r.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let bulk_ratio = text_alone_secs / bulk_secs;
    let pdf_ratio = pdf_alone_secs / pdf_secs;
    println!();
    println!(
        "| workload | chunks | embedder alone (passages/s) | ingestion (chunks/s) | ratio (target >= 0.90) | each round |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {n_files} .txt files, /upload/bulk {per_request} per request, {in_flight} in flight, {} rounds | {bulk_chunks} | {:.1} | {:.1} | {bulk_ratio:.2} {} | {} |",
        parts.len(),
        bulk_chunks as f64 / text_alone_secs,
        bulk_chunks as f64 / bulk_secs,
        verdict(bulk_ratio >= 0.9),
        rounds_line(&text_rounds)
    );
    println!(
        "| {} 100-page PDFs, /upload one at a time | {pdf_stored} | {:.1} | {:.1} | {pdf_ratio:.2} {} | {} |",
        pdfs.len(),
        pdf_stored as f64 / pdf_alone_secs,
        pdf_stored as f64 / pdf_secs,
        verdict(pdf_ratio >= 0.9),
        rounds_line(&pdf_rounds)
    );
    println!();
    let p95 = percentile(&latencies, 0.95);
    println!(
        "/search during the bulk ingestion, one query every {} ms: {} queries, p50 {:.1} ms, p95 {p95:.1} ms, max {:.1} ms (target p95 <= 100 ms: {})",
        search_every.as_millis(),
        latencies.len(),
        percentile(&latencies, 0.5),
        latencies.last().copied().unwrap_or(f64::NAN),
        verdict(p95 <= 100.0)
    );
    println!("bulk stage times: {bulk_stages}; {bulk_secs:.1}s wall");
    println!("PDF stage times: {pdf_stages}; {pdf_secs:.1}s wall");
}
