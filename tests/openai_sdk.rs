//! The OpenAI-compatible routes driven by the real `openai` SDK (tests/clients/openai_sdk.py)
//! against the real server with SmolLM2 and MiniLM, behind a server key.

mod common;

use std::time::Duration;

use common::clients::run_client;
use common::{models_config, models_dir, TestServer};

#[tokio::test]
async fn the_openai_sdk_talks_to_ragd() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = models_config(
        &tmp.path().join("data"),
        &models_dir(),
        "SmolLM2-135M-Instruct.Q4_1.gguf",
    );
    config.api_keys = vec!["sk-test-key".into()];
    let server = TestServer::start_with(config).await;
    let run = run_client(
        "openai_sdk.py",
        &[&server.url(""), "sk-test-key"],
        &[],
        Duration::from_secs(300),
    )
    .await;
    run.assert_ok();
    eprintln!("{}", run.stdout);
    for check in [
        "models",
        "chat",
        "stream",
        "tool call",
        "tool_choice required",
        "tool_choice none",
        "tool_choice auto",
        "streamed tool call",
        "tool result round trip",
        "json_schema",
        "knowledge-base",
        "knowledge-base stream",
        "embeddings",
        "unknown model",
        "wrong key",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l == format!("ok {check}") || l.starts_with(&format!("ok {check} "))),
            "{check} not checked:\n{}",
            run.stdout
        );
    }
    server.stop().await;
}
