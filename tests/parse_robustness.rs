//! Every fixture document, and damaged copies of it (truncated, bytes flipped), goes
//! through `/parse`: each answer is a 200 or a 400 with a clear detail in the error
//! body, never a 500, a panic or a hang.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::TestServer;
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let root = common::shared_dir().join("fixtures/docling/tests/data");
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "groundtruth") {
                    stack.push(p);
                }
            } else if ragd::parse::Format::for_filename(&p.to_string_lossy()).is_ok() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Deterministic damage: the first half, the first tenth, and 16 flipped bytes.
fn mutations(bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut flipped = bytes.to_vec();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..16 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if !flipped.is_empty() {
            let i = (x as usize) % flipped.len();
            flipped[i] ^= 0xa5;
        }
    }
    vec![
        ("half", bytes[..bytes.len() / 2].to_vec()),
        ("tenth", bytes[..bytes.len() / 10].to_vec()),
        ("flipped", flipped),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_and_damaged_copies_never_break_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let files = fixtures();
    assert!(
        files.len() > 50,
        "expected the docling fixtures, found {}",
        files.len()
    );
    let (mut ok, mut refused) = (0, 0);
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let started = std::time::Instant::now();
        let original = std::fs::read(&path).unwrap();
        let mut variants = vec![("original", original.clone())];
        variants.extend(mutations(&original));
        for (kind, bytes) in variants {
            let form = reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(bytes).file_name(name.clone()),
            );
            let req = s.client.post(s.url("/api/v1/parse")).multipart(form).send();
            let r = tokio::time::timeout(Duration::from_secs(180), req)
                .await
                .unwrap_or_else(|_| panic!("{name} ({kind}) hung"))
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            match status {
                200 => {
                    assert_eq!(body["success"], true, "{name} ({kind})");
                    ok += 1;
                }
                400 => {
                    assert_eq!(body["status_code"], 400, "{name} ({kind}): {body}");
                    let detail = body["detail"].as_str().unwrap_or_default();
                    assert!(
                        detail.contains(&name),
                        "{name} ({kind}): the detail names the file: {detail}"
                    );
                    refused += 1;
                }
                other => panic!("{name} ({kind}) answered {other}: {body}"),
            }
            let encrypted = path.to_string_lossy().contains("pdf_password");
            if kind == "original" && !encrypted {
                // Real documents parse (the encrypted one is refused with a reason).
                assert_eq!(status, 200, "{name} should parse: {body}");
            }
        }
        eprintln!("{name}: {:?}", started.elapsed());
    }
    eprintln!("parsed {ok}, refused {refused}");
    // The server is still healthy after all of it.
    let (st, h) = s.get_json("/api/v1/health").await;
    assert_eq!((st, h["status"].as_str()), (200, Some("healthy")));
    s.stop().await;
}
