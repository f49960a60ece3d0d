//! Switching the LLM at run time through the `llm_model` setting (`update_setting`,
//! confirmed by an administrator), with the real SmolLM2 file under two names: a
//! generation running on the old model finishes on it, the next request gets the new
//! one, peak memory stays within old + new, the old model is freed, and a file that
//! cannot be loaded keeps the running model and says why.
//!
//! One test per binary: it measures the process's memory.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{create_user, Auth, Reply, TestServer};
use ragd::config::Config;
use ragd::ml::llm::{GenerateRequest, Generation, Prompt};
use reqwest::Method;
use serde_json::{json, Value};

const SMOL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Slack for what a loaded engine holds beside its weights (thread stacks, buffers,
/// the first sequence's key/value state) and for the allocator's own rounding.
const MARGIN_BYTES: u64 = 48 << 20;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn config_on(data: &Path, models: &Path) -> Config {
    Config {
        llm_max_tokens: 24,
        ..common::models_config(data, models, "old.gguf")
    }
}

fn llm_detail(ready: &Value) -> String {
    ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "llm")
        .map(|c| format!("{} {}", c["healthy"], c["detail"]))
        .unwrap_or_default()
}

/// Proposes `update_setting llm_model=<name>` and confirms it, as an admin does.
async fn set_llm_model(server: &TestServer, admin: &Auth, name: &str) -> Reply {
    let r = server
        .call(
            Method::POST,
            "assistant.api.execute_tool",
            &json!({"tool_name": "update_setting",
                    "params": {"key": "llm_model", "value": name}}),
            admin,
        )
        .await;
    let d = r.data();
    assert_eq!(d["requires_confirmation"], true, "{d}");
    let id = d["action_id"].as_str().unwrap().to_owned();
    server
        .call(
            Method::POST,
            "assistant.api.confirm_action",
            &json!({"action_id": id}),
            admin,
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switching_while_a_generation_streams() {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let real = common::models_dir().join(SMOL);
    // Two names for the real file: two separate loads of the same weights.
    std::os::unix::fs::symlink(&real, models.join("old.gguf")).unwrap();
    std::os::unix::fs::symlink(&real, models.join("new.gguf")).unwrap();
    std::fs::write(
        models.join("truncated.gguf"),
        &std::fs::read(&real).unwrap()[..4096],
    )
    .unwrap();
    let model_bytes = std::fs::metadata(&real).unwrap().len();
    let data = tmp.path().join("data");
    let admin = Auth::Token(create_user(&data, "admin@example.com", "password1", true).await);
    let (server, state) = TestServer::start_with_state(config_on(&data, &models)).await;
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert!(
        llm_detail(&ready).starts_with("true") && llm_detail(&ready).contains("old.gguf"),
        "{ready}"
    );
    server
        .upload(
            "cooling.md",
            b"The pump seals are replaced every 18 months.",
        )
        .await;

    // A long generation on the running model, read as a service reads it.
    let old = state.kb.llm().expect("an LLM");
    let mut request = GenerateRequest::new(Prompt::Text("Once upon a time".into()));
    request.params.max_tokens = 160;
    request.params.temperature = 0.0;
    request.params.ignore_eos = true;
    let mut generation = Generation::start(old.as_ref(), request).unwrap();
    let mut text = generation
        .next_text()
        .await
        .unwrap()
        .expect("a first piece");

    // Peak memory from here on, sampled beside the switch.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status_kib("VmRSS:") << 10;
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(status_kib("VmRSS:") << 10, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let r = set_llm_model(&server, &admin, "new.gguf").await;
    let d = r.data();
    assert_eq!(d["status"], "executed", "{d}");
    assert_eq!(d["result"]["value"], "new.gguf", "{d}");
    assert_eq!(d["result"]["model"]["family"], "llama", "{d}");
    // The old model is still generating: the switch did not wait for it, nor stop it.
    assert_eq!(old.in_flight(), 1, "the generation ended before the switch");
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert!(llm_detail(&ready).contains("new.gguf"), "{ready}");
    let current = state.kb.llm().unwrap();
    assert!(
        !Arc::ptr_eq(&current, &old),
        "the slot still holds the old model"
    );
    drop(current);

    // The stream completes on the old model.
    while let Some(piece) = generation.next_text().await.unwrap() {
        text.push_str(&piece);
    }
    assert_eq!(generation.finished().completion_tokens, 160);
    assert!(!text.trim().is_empty());
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed).max(status_kib("VmHWM:") << 10);
    println!(
        "RSS before the switch {} MiB (old model loaded), peak {} MiB, file {} MiB",
        before >> 20,
        peak >> 20,
        model_bytes >> 20
    );
    assert!(
        peak <= before + model_bytes + MARGIN_BYTES,
        "peak {} MiB > before {} MiB + new {} MiB + margin {} MiB",
        peak >> 20,
        before >> 20,
        model_bytes >> 20,
        MARGIN_BYTES >> 20
    );

    // The next request uses the new model; the old one is freed once nothing holds it.
    let (status, answer) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "When are the pump seals replaced?", "temperature": 0.0}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        common::model_wrote(&answer),
        "the new model wrote: {answer}"
    );
    common::truthful_mode(&answer);
    drop(generation);
    drop(old);
    let freed_below = peak.saturating_sub(model_bytes / 2);
    let started = Instant::now();
    let mut now = status_kib("VmRSS:") << 10;
    while now > freed_below && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        now = status_kib("VmRSS:") << 10;
    }
    println!("RSS after the old model was dropped {} MiB", now >> 20);
    assert!(
        now <= freed_below,
        "the old model was not freed: RSS {} MiB, peak {} MiB",
        now >> 20,
        peak >> 20
    );

    // A file that cannot be loaded: the action fails with the reason; the model stays.
    let r = set_llm_model(&server, &admin, "truncated.gguf").await;
    let d = r.data();
    assert_eq!(
        (d["status"].as_str(), d["success"].as_bool()),
        (Some("failed"), Some(false)),
        "{d}"
    );
    let why = d["error"].as_str().unwrap();
    assert!(
        why.contains("llm_model") && why.contains("not switched") && why.contains("truncated.gguf"),
        "{why}"
    );
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert!(
        llm_detail(&ready).starts_with("true") && llm_detail(&ready).contains("new.gguf"),
        "{ready}"
    );
    // Files outside the models folder, or missing, are refused before any load.
    for bad in ["../old.gguf", "missing.gguf"] {
        let r = set_llm_model(&server, &admin, bad).await;
        assert_eq!(r.data()["status"], "failed", "{bad}: {}", r.body);
    }
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_settings",
            &json!({}),
            &admin,
        )
        .await;
    let d = r.data();
    assert_eq!(d["settings"]["llm_model"], "new.gguf", "{d}");
    assert!(d["server"]["llm_model"]
        .as_str()
        .unwrap()
        .ends_with("new.gguf"));
    server.stop().await;

    // The choice is remembered: a restart loads the chosen file, not the configured one.
    let server = TestServer::start_with(config_on(&data, &models)).await;
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert!(llm_detail(&ready).contains("new.gguf"), "{ready}");
    server.stop().await;
}
