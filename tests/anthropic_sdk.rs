//! Anthropic's Messages API driven by the real `anthropic` SDK
//! (tests/clients/anthropic_sdk.py) against the real server with SmolLM2, behind a server
//! key sent as `x-api-key`.

mod common;

use std::time::Duration;

use common::clients::run_client;
use common::{models_config, models_dir, TestServer};

const LLM: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

#[tokio::test]
async fn the_anthropic_sdk_talks_to_ragd() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = models_config(&tmp.path().join("data"), &models_dir(), LLM);
    config.api_keys = vec!["sk-ant-test".into()];
    let server = TestServer::start_with(config).await;
    let run = run_client(
        "anthropic_sdk.py",
        &[&server.url(""), "sk-ant-test", LLM],
        &[],
        Duration::from_secs(300),
    )
    .await;
    run.assert_ok();
    eprintln!("{}", run.stdout);
    for check in [
        "message",
        "stream",
        "stop_sequences",
        "tool use",
        "streamed tool use",
        "tool result round trip",
        "count_tokens",
        "unknown model",
        "bad request",
        "wrong key",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with(&format!("ok {check} ")) || l == format!("ok {check}")),
            "{check} not checked:\n{}",
            run.stdout
        );
    }
    server.stop().await;
}
