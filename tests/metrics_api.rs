//! `GET /metrics`: the real server's output read by an independent Prometheus text
//! parser; its counters move with traffic; open by default, behind the key on request.

mod common;

use std::time::Duration;

use common::clients::run_client;
use common::{assert_error_body, test_config, TestServer};
use serde_json::Value;

const GUIDE: &str = "# Field Guide\n\n## Password resets\n\nTo reset a forgotten password, open \
the account page and choose 'Forgot password'.\n\n## Torque wrenches\n\nThe SKU-4471-B torque \
wrench clicks at the set torque. Calibrate it every twelve months.\n";

/// One sample as prometheus_client's parser read it.
struct Sample {
    family: String,
    kind: String,
    name: String,
    labels: serde_json::Map<String, Value>,
    value: f64,
}

/// `/metrics` read by prometheus_client's text parser (tests/clients/prometheus_scrape.py).
async fn scrape(s: &TestServer) -> Vec<Sample> {
    let run = run_client(
        "prometheus_scrape.py",
        &[&s.url("/metrics")],
        &[],
        Duration::from_secs(60),
    )
    .await;
    run.assert_ok();
    let ct = run.lines_with("CONTENT_TYPE ").join("");
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    run.lines_with("SAMPLE ")
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Sample {
                family: v["family"].as_str().unwrap().to_owned(),
                kind: v["type"].as_str().unwrap().to_owned(),
                name: v["name"].as_str().unwrap().to_owned(),
                labels: v["labels"].as_object().unwrap().clone(),
                value: v["value"].as_f64().unwrap(),
            }
        })
        .collect()
}

/// The sum of the samples `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|x| x.name == name)
        .filter(|x| {
            labels
                .iter()
                .all(|(k, v)| x.labels.get(*k).and_then(Value::as_str) == Some(*v))
        })
        .map(|x| x.value)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_move_with_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;
    let before = scrape(&s).await;
    for (family, kind) in [
        ("ragd_http_requests", "counter"),
        ("ragd_http_request_duration_seconds", "histogram"),
        ("ragd_queue_depth", "gauge"),
        ("ragd_queue_rejections", "counter"),
        ("ragd_tasks", "gauge"),
        ("ragd_index_entries", "gauge"),
        ("ragd_disk_bytes", "gauge"),
        ("ragd_embedder_tokens", "counter"),
        ("ragd_embedder_cache_hits", "counter"),
        ("ragd_embedder_cache_misses", "counter"),
        ("ragd_ingested_chunks", "counter"),
        ("ragd_llm_completion_tokens", "counter"),
        ("ragd_llm_prompt_cache_reused_tokens", "counter"),
    ] {
        assert!(
            before.iter().any(|x| x.family == family && x.kind == kind),
            "/metrics lacks the {kind} {family}"
        );
    }
    for state in ["pending", "running", "completed", "failed", "cancelled"] {
        assert!(before.iter().any(|x| x.name == "ragd_tasks"
            && x.labels.get("state").and_then(Value::as_str) == Some(state)));
    }
    assert_eq!(value(&before, "ragd_tasks", &[("state", "pending")]), 0.0);
    let uploads = [("route", "/api/v1/upload"), ("status", "200")];
    assert_eq!(value(&before, "ragd_http_requests_total", &uploads), 0.0);

    let (st, body) = s.upload("guide.md", GUIDE.as_bytes()).await;
    assert_eq!(st, 200, "{body}");
    let results = s.search("forgotten password", 3).await;
    assert!(results["count"].as_u64().unwrap() > 0);
    // The same query again: its vector comes from the cache of recent texts.
    let again = s.search("forgotten password", 3).await;
    assert_eq!(again["results"], results["results"]);
    let (st, _) = s.get_json("/api/v1/documents/not-a-doc").await;
    assert_eq!(st, 404);
    let (st, _) = s.get_json("/no/such/route").await;
    assert_eq!(st, 404);

    let after = scrape(&s).await;
    assert_eq!(value(&after, "ragd_http_requests_total", &uploads), 1.0);
    assert_eq!(
        value(
            &after,
            "ragd_http_requests_total",
            &[("route", "/api/v1/search"), ("method", "POST")]
        ),
        2.0
    );
    // Ids never become labels: the pattern does.
    assert_eq!(
        value(
            &after,
            "ragd_http_requests_total",
            &[("route", "/api/v1/documents/{doc_id}"), ("status", "404")]
        ),
        1.0
    );
    assert!(
        value(
            &after,
            "ragd_http_requests_total",
            &[("route", "unmatched")]
        ) >= 1.0
    );
    assert!(!after.iter().any(|x| x.labels.values().any(|v| v
        .as_str()
        .is_some_and(|v| v.contains("not-a-doc") || v.contains("/no/such")))));
    let upload = [("route", "/api/v1/upload")];
    assert_eq!(
        value(&after, "ragd_http_request_duration_seconds_count", &upload),
        1.0
    );
    assert_eq!(
        value(
            &after,
            "ragd_http_request_duration_seconds_bucket",
            &[("route", "/api/v1/upload"), ("le", "+Inf")]
        ),
        1.0
    );
    assert!(value(&after, "ragd_http_request_duration_seconds_sum", &upload) > 0.0);
    let chunks = value(&after, "ragd_ingested_chunks_total", &[]);
    assert!(chunks >= 1.0, "ingested chunks: {chunks}");
    assert_eq!(
        value(&after, "ragd_index_entries", &[("index", "chunks")]),
        chunks
    );
    assert_eq!(
        value(&after, "ragd_index_entries", &[("index", "sources")]),
        1.0
    );
    assert!(
        value(&after, "ragd_embedder_tokens_total", &[])
            > value(&before, "ragd_embedder_tokens_total", &[])
    );
    assert!(value(&after, "ragd_disk_bytes", &[("what", "database")]) > 0.0);
    let hits = |m: &[_]| value(m, "ragd_embedder_cache_hits_total", &[]);
    assert!(
        hits(&after) >= hits(&before) + 1.0,
        "the repeated query was embedded again"
    );
    assert!(value(&after, "ragd_embedder_cache_misses_total", &[]) >= 1.0);

    // Counters never go back between scrapes.
    let again = scrape(&s).await;
    for x in after.iter().filter(|x| x.kind == "counter") {
        let pairs: Vec<(&str, &str)> = x
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
            .collect();
        assert!(
            value(&again, &x.name, &pairs) >= x.value,
            "{} went back",
            x.name
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_open_unless_the_setting_asks_for_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = test_config(dir.path());
    cfg.api_keys = vec!["k1".into()];
    let s = TestServer::start_with(cfg.clone()).await;
    let r = s.client.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    s.stop().await;

    cfg.metrics_require_key = true;
    let s = TestServer::start_with(cfg).await;
    let r = s.client.get(s.url("/metrics")).send().await.unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 401);
    let r = s
        .client
        .get(s.url("/metrics"))
        .header("X-API-Key", "nope")
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    assert_error_body(st, &r.json().await.unwrap(), 403);
    let r = s
        .client
        .get(s.url("/metrics"))
        .header("X-API-Key", "k1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    s.stop().await;
}
