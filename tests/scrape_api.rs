//! Scraping through HTTP against a local web server: duplicates, update in place,
//! redirects, charsets, and the clear errors for private addresses, silence and floods.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use common::{assert_error_body, test_config, TestServer};
use serde_json::{json, Value};

const PAGE: &str = "<html><head><title>Pump Guide</title></head><body><nav>Menu</nav><main><h1>Pump Guide</h1>\
    <p>Prime the centrifugal pump before starting it, and never run it dry.</p></main></body></html>";

/// A local site: pages, a redirect, a silent URL and two floods.
async fn site() -> (String, tokio::task::JoinHandle<()>) {
    let version = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let v = version.clone();
    let app = Router::new()
        .route("/pump", get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }))
        .route("/pump-copy", get(|| async { ([(header::CONTENT_TYPE, "text/html")], PAGE) }))
        .route("/moving", get(|| async { Redirect::temporary("/pump") }))
        .route("/changing", get(move || {
            let n = v.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let html = format!("<html><body><h1>Changing</h1><p>Version {n} of the valve notes says torque {}.</p></body></html>", 10 + n);
                ([(header::CONTENT_TYPE, "text/html")], html)
            }
        }))
        .route("/latin1", get(|| async {
            ([(header::CONTENT_TYPE, "text/plain; charset=iso-8859-1")], b"Caf\xe9 cr\xe8me recipes for the canteen.".to_vec())
        }))
        .route("/silent", get(|| async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            "late"
        }))
        .route("/flood", get(|| async {
            // Endless body without a length: the reader must stop at its cap.
            let chunk = bytes_of(64 * 1024);
            let s = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            Response::builder().header(header::CONTENT_TYPE, "text/plain").body(Body::from_stream(s)).unwrap()
        }))
        .route("/five-gb", get(|| async {
            let chunk = bytes_of(64 * 1024);
            let s = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            let mut r = Response::builder().header(header::CONTENT_TYPE, "text/plain").body(Body::from_stream(s)).unwrap();
            r.headers_mut().insert(header::CONTENT_LENGTH, (5u64 << 30).into());
            r.into_response()
        }))
        .route("/binary", get(|| async { ([(header::CONTENT_TYPE, "application/octet-stream")], vec![0u8; 10]) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), task)
}

fn bytes_of(n: usize) -> bytes::Bytes {
    bytes::Bytes::from(vec![b'a'; n])
}

async fn scrape(s: &TestServer, body: Value) -> (u16, Value) {
    s.post_json("/api/v1/scrape", &body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraping_a_local_site() {
    let (web, _site) = site().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.scrape_allow_private = true;
    cfg.max_scrape_bytes = 1024 * 1024;
    let s = TestServer::start_with(cfg).await;

    let (st, r) = scrape(&s, json!({"url": format!("{web}/pump")})).await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["url"], format!("{web}/pump"));
    assert_eq!(r["title"], "Pump Guide");
    assert!(r["chunks_added"].as_u64().unwrap() >= 1);
    let hit = s.search("how do I start a centrifugal pump", 1).await;
    assert_eq!(hit["results"][0]["source"], format!("{web}/pump"));
    assert_eq!(hit["results"][0]["metadata"]["source_type"], "url");
    assert!(!hit["results"][0]["text"].as_str().unwrap().contains("Menu"));

    // Same URL: skipped as "url". Same content elsewhere: "content_hash".
    let (_, r) = scrape(&s, json!({"url": format!("{web}/pump")})).await;
    assert_eq!(
        (r["is_duplicate"].as_bool(), r["duplicate_type"].as_str()),
        (Some(true), Some("url"))
    );
    let (_, r) = scrape(&s, json!({"url": format!("{web}/pump-copy")})).await;
    assert_eq!(r["duplicate_type"], "content_hash", "{r}");
    // skip_duplicates=false re-scrapes and updates in place.
    scrape(&s, json!({"url": format!("{web}/changing")})).await;
    let (_, r) = scrape(
        &s,
        json!({"url": format!("{web}/changing"), "skip_duplicates": false}),
    )
    .await;
    assert_eq!(r["duplicate_type"], "url");
    assert_eq!(
        (r["chunks_added"].as_u64(), r["chunks_updated"].as_u64()),
        (Some(0), Some(1)),
        "{r}"
    );
    assert!(
        s.search("valve notes torque", 1).await["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Version 1")
    );
    // Redirects are followed; charsets decoded.
    let (st, r) = scrape(
        &s,
        json!({"url": format!("{web}/moving"), "skip_duplicates": false}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    let (st, _) = scrape(&s, json!({"url": format!("{web}/latin1")})).await;
    assert_eq!(st, 200);
    assert!(
        s.search("cafe creme canteen", 1).await["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Café crème")
    );

    let (_, before) = s.get_json("/api/v1/documents/stats").await;
    // Clear errors, nothing written.
    let started = std::time::Instant::now();
    let (st, b) = scrape(&s, json!({"url": format!("{web}/silent"), "timeout": 5})).await;
    assert_error_body(st, &b, 400);
    assert!(b["detail"].as_str().unwrap().contains("within 5s"), "{b}");
    assert!(started.elapsed() < Duration::from_secs(9));
    let (st, b) = scrape(&s, json!({"url": format!("{web}/flood")})).await;
    assert_error_body(st, &b, 413);
    let (st, b) = scrape(&s, json!({"url": format!("{web}/five-gb")})).await;
    assert_error_body(st, &b, 413);
    let (st, b) = scrape(&s, json!({"url": format!("{web}/binary")})).await;
    assert_error_body(st, &b, 400);
    let (st, b) = scrape(&s, json!({"url": format!("{web}/missing")})).await;
    assert_error_body(st, &b, 400);
    for bad in [
        json!({"url": "ftp://x/y"}),
        json!({"url": "not a url"}),
        json!({"url": format!("{web}/pump"), "timeout": 4}),
        json!({"url": format!("{web}/pump"), "timeout": 121}),
        json!({"timeout": 30}),
    ] {
        let (st, b) = scrape(&s, bad).await;
        assert_error_body(st, &b, 400);
    }
    let (_, after) = s.get_json("/api/v1/documents/stats").await;
    assert_eq!(before, after);

    // Async: progress through the task, counts in the result.
    let (st, ack) = s.post_json("/api/v1/scrape/async", &json!({"urls": [format!("{web}/latin1"), format!("{web}/missing")], "skip_duplicates": false})).await;
    assert_eq!(st, 200, "{ack}");
    let mut t = Value::Null;
    for _ in 0..200 {
        t = s
            .get_json(&format!(
                "/api/v1/tasks/{}",
                ack["task_id"].as_str().unwrap()
            ))
            .await
            .1;
        if t["status"] == "completed" || t["status"] == "failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["urls_processed"], 2);
    assert_eq!(t["result"]["successful"], 1);
    assert_eq!(t["result"]["failed"], 1);
    assert!(t["result"]["total_chunks_added"].is_u64());
    for bad in [
        json!({"urls": []}),
        json!({"urls": (0..51).map(|i| format!("{web}/p{i}")).collect::<Vec<_>>()}),
        json!({"urls": ["gopher://x"]}),
        json!({"urls": [format!("{web}/pump")], "timeout": 200}),
    ] {
        let (st, b) = s.post_json("/api/v1/scrape/async", &bad).await;
        assert_error_body(st, &b, 400);
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_by_default() {
    let (web, _site) = site().await;
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    for url in [
        format!("{web}/pump"),
        "http://localhost:9/".into(),
        "http://169.254.169.254/latest".into(),
        "http://[::1]:80/".into(),
    ] {
        let (st, b) = scrape(&s, json!({"url": url})).await;
        assert_error_body(st, &b, 400);
        assert!(b["detail"].as_str().unwrap().contains("non-public"), "{b}");
    }
    let (_, stats) = s.get_json("/api/v1/documents/stats").await;
    assert_eq!(stats["total_documents"], 0);
    s.stop().await;

    // An allow-list entry opens one host only.
    let mut cfg = test_config(dir.path());
    cfg.scrape_allowed_hosts = vec!["127.0.0.1".into()];
    let s = TestServer::start_with(cfg).await;
    let (st, r) = scrape(&s, json!({"url": format!("{web}/pump")})).await;
    assert_eq!(st, 200, "{r}");
    let (st, _) = scrape(&s, json!({"url": "http://localhost:9/"})).await;
    assert_eq!(st, 400);
    s.stop().await;
}
