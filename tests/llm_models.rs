//! Model management with real files: a GGUF ragd cannot run leaves the server up with an
//! unhealthy `llm` component and extractive answers, and `ragd models list` (the built
//! binary) and `list_models` say why it is not runnable.

mod common;

use std::path::Path;
use std::process::Command;

use candle_core::quantized::gguf_file::{self, Value as Gv};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use common::{create_user, test_config, Auth, TestServer};
use ragd::config::Config;
use reqwest::Method;
use serde_json::{json, Value};

const DOC: &str = "# Cooling loop\n\nThe primary cooling loop of the reactor runs at 285 \
degrees Celsius. Pump P-104 circulates the coolant at 12 cubic metres per minute.\n\n\
## Maintenance\n\nThe pump seals are replaced every 18 months by the maintenance crew.\n";

/// A well-formed GGUF of an architecture no engine of ragd runs (RWKV-6).
fn write_rwkv_gguf(path: &Path) {
    let embd = Tensor::zeros((16, 64), candle_core::DType::F32, &Device::Cpu).unwrap();
    let embd = QTensor::quantize(&embd, GgmlDType::F32).unwrap();
    let arch = Gv::String("rwkv6".into());
    let name = Gv::String("Tiny RWKV".into());
    let ctx = Gv::U32(1024);
    let ftype = Gv::U32(0);
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(
        &mut f,
        &[
            ("general.architecture", &arch),
            ("general.name", &name),
            ("general.file_type", &ftype),
            ("rwkv6.context_length", &ctx),
        ],
        &[("token_embd.weight", &embd)],
    )
    .unwrap();
}

/// A models folder holding only `files` (the embedder comes from the real models folder).
fn config_on(data: &Path, models: &Path) -> Config {
    Config {
        models_dir: models.to_owned(),
        embedding_model: common::models_dir()
            .join("all-MiniLM-L6-v2")
            .display()
            .to_string(),
        // The first *.gguf by name, as a user who drops files in models/ gets.
        llm_model: String::new(),
        llm_threads: Some(1),
        ..test_config(data)
    }
}

fn component<'a>(ready: &'a Value, name: &str) -> &'a Value {
    ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} component in {ready}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsupported_architecture_leaves_the_server_up_and_extractive() {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    std::fs::create_dir_all(models.join("llm")).unwrap();
    // First by name: the server picks it, as it would for a user.
    write_rwkv_gguf(&models.join("a-rwkv6.gguf"));
    let smol = common::models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::os::unix::fs::symlink(&smol, models.join("llm/smollm2.gguf")).unwrap();
    std::fs::write(models.join("llm/broken.gguf"), b"GGUF but not really").unwrap();
    let data = tmp.path().join("data");
    let admin = create_user(&data, "admin@example.com", "password1", true).await;

    let server = TestServer::start_with(config_on(&data, &models)).await;
    let (status, ready) = server.get_json("/api/v1/health/ready").await;
    assert_eq!(status, 200);
    let llm = component(&ready, "llm");
    assert_eq!(llm["healthy"], false, "{ready}");
    let detail = llm["detail"].as_str().unwrap();
    assert!(
        detail.contains("rwkv6") && detail.contains("not supported"),
        "{detail}"
    );
    // The LLM is optional: the essential components decide readiness.
    assert_eq!(ready["ready"], true, "{ready}");

    let (status, up) = server.upload("cooling.md", DOC.as_bytes()).await;
    assert_eq!(status, 200, "{up}");
    let (status, answer) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "How fast does pump P-104 circulate coolant?"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["answer_mode"], "extractive", "{answer}");
    assert!(
        answer["answer"]
            .as_str()
            .unwrap()
            .contains("12 cubic metres"),
        "{answer}"
    );

    // The assistant's chat answers extractively too.
    let r = server
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": "How fast does pump P-104 circulate coolant?"}),
            &Auth::Token(admin.clone()),
        )
        .await;
    let d = r.data();
    assert_eq!(d["answer_mode"], "extractive", "{d}");
    assert!(d.to_string().contains("12 cubic metres"), "{d}");

    // The client-safe configuration says answers are extractive.
    let r = server
        .call(
            Method::GET,
            "assistant.api.get_config",
            &json!({}),
            &Auth::None,
        )
        .await;
    assert_eq!(r.data()["answer_mode"], "extractive");

    // The admin list through the assistant API.
    let r = server
        .call(
            Method::GET,
            "assistant.api.list_models",
            &json!({}),
            &Auth::Token(admin.clone()),
        )
        .await;
    let d = r.data();
    let rows = d["models"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|m| m["llm_model"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["a-rwkv6.gguf", "llm/broken.gguf", "llm/smollm2.gguf"],
        "{d}"
    );
    assert_eq!(rows[0]["runnable"], false);
    assert!(rows[0]["reason"].as_str().unwrap().contains("rwkv6"));
    assert_eq!(rows[2]["runnable"], true, "{d}");
    assert_eq!(rows[2]["architecture"], "llama");
    assert_eq!(rows[2]["quantization"], "Q4_1");
    assert!(rows.iter().all(|m| m["active"] == false), "{d}");
    assert!(d["llm_failure"].as_str().unwrap().contains("rwkv6"));
    let user = create_user(&data, "user@example.com", "password2", false).await;
    let r = server
        .call(
            Method::GET,
            "assistant.api.list_models",
            &json!({}),
            &Auth::Token(user),
        )
        .await;
    assert_eq!(r.error(403), "PermissionError");
    server.stop().await;

    // The command line, on the built binary.
    let list = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ragd"));
        cmd.args(["models", "list", "--models-dir"])
            .arg(&models)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("RAGD_LLM_MODEL")
            .env_remove("RAGD_CONFIG")
            .current_dir(tmp.path());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let rows: Value = serde_json::from_str(&list(true)).unwrap();
    let rwkv = &rows[0];
    assert_eq!(rwkv["llm_model"], "a-rwkv6.gguf", "{rows}");
    assert_eq!(rwkv["architecture"], "rwkv6");
    assert_eq!(rwkv["parameters"], 16 * 64);
    assert_eq!(rwkv["quantization"], "F32");
    assert_eq!(rwkv["context_length"], 1024);
    assert_eq!(rwkv["runnable"], false);
    assert!(
        rwkv["reason"].as_str().unwrap().contains("\"rwkv6\""),
        "{rwkv}"
    );
    // The configuration's choice (the first file by name) is the active one.
    assert_eq!(rwkv["active"], true);
    let broken = &rows[1];
    assert_eq!(broken["runnable"], false);
    assert!(broken["reason"]
        .as_str()
        .unwrap()
        .contains("not a readable GGUF"));
    let smol_row = &rows[2];
    assert_eq!(smol_row["runnable"], true, "{smol_row}");
    assert_eq!(smol_row["parameters"], 134_515_008u64);
    assert_eq!(smol_row["context_length"], 8192);
    let table = list(false);
    let line = table
        .lines()
        .find(|l| l.contains("a-rwkv6.gguf"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.starts_with('*'), "{table}");
    assert!(
        line.contains(" no ") && line.contains("rwkv6") && line.contains("not supported"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("llm/smollm2.gguf") && l.contains("135M") && l.contains(" yes")),
        "{table}"
    );
}
