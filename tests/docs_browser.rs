//! `/docs` and `/redoc` render in a real headless Chromium with no network: their
//! scripts come from the binary. Chromium is installed by scripts/setup.sh.

mod common;

use std::time::Duration;

use common::{browser, TestServer};

/// Loads `url` in headless Chromium, lets its scripts run, and returns the final DOM.
async fn rendered_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(browser::chromium())
        .args(browser::FLAGS)
        .arg("--virtual-time-budget=15000")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("chromium timed out")
        .expect("chromium ran");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swagger_ui_and_redoc_render_offline() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::start(dir.path()).await;

    let swagger = rendered_dom(&s.url("/docs")).await;
    // Swagger UI rendered the operations from /openapi.json.
    assert!(
        swagger.contains("opblock-summary-path"),
        "Swagger UI did not render operations"
    );
    for path in ["/api/v1/search", "/api/v1/upload", "/api/v1/health/ready"] {
        assert!(swagger.contains(path), "Swagger UI lacks {path}");
    }
    assert!(swagger.contains("ragd knowledge base API"));

    let redoc = rendered_dom(&s.url("/redoc")).await;
    assert!(
        redoc.contains("ragd knowledge base API"),
        "ReDoc did not render the title"
    );
    assert!(
        redoc.contains("/api/v1/search"),
        "ReDoc did not render the operations"
    );
    assert!(
        !redoc.contains("Something went wrong"),
        "ReDoc reported an error"
    );
    s.stop().await;
}
