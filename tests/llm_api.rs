//! The LLM through the server: tiny random-weight GGUFs of every supported family (real
//! files, real loading and inference) behind /health, /query (whole and streamed) and
//! /parse's summary.

mod common;

use std::path::{Path, PathBuf};

use common::{sse_events, test_config, TestServer};
use ragd::config::Config;
use ragd::ml::llm::tiny::write_tiny_gguf;
use ragd::ml::llm::Arch;
use serde_json::{json, Value};

const DOC: &str = "# Cooling loop\n\nThe primary cooling loop of the reactor runs at 285 \
degrees Celsius. Pump P-104 circulates the coolant at 12 cubic metres per minute.\n\n\
## Maintenance\n\nThe pump seals are replaced every 18 months by the maintenance crew.\n";

fn tiny(dir: &Path, arch: Arch) -> PathBuf {
    let path = dir.join(format!("tiny-{}.gguf", arch.as_str()));
    write_tiny_gguf(&path, arch).expect("tiny model");
    path
}

fn llm_config(data: &Path, model: &Path, max_tokens: usize) -> Config {
    Config {
        llm_model: model.to_string_lossy().into_owned(),
        llm_max_tokens: max_tokens,
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

#[tokio::test]
async fn every_family_serves_generated_answers() {
    for arch in [Arch::Llama, Arch::Qwen2, Arch::Phi3] {
        let tmp = tempfile::tempdir().unwrap();
        let model = tiny(tmp.path(), arch);
        let server = TestServer::start_with(llm_config(&tmp.path().join("data"), &model, 24)).await;

        let (status, ready) = server.get_json("/api/v1/health/ready").await;
        assert_eq!(status, 200);
        let llm = component(&ready, "llm");
        assert_eq!(llm["healthy"], true, "{arch:?}: {ready}");
        assert!(
            llm["detail"].as_str().unwrap().contains(arch.as_str()),
            "{llm}"
        );
        assert_eq!(ready["ready"], true, "{ready}");
        let (_, stats) = server.get_json("/api/v1/health/stats").await;
        assert_ne!(stats["llm_model"], "none", "{stats}");
        assert!(stats["llm_model"].is_string());

        let (status, up) = server.upload("cooling.md", DOC.as_bytes()).await;
        assert_eq!(status, 200, "{up}");
        let (status, answer) = server
            .post_json(
                "/api/v1/query",
                &json!({"question": "How fast does pump P-104 circulate coolant?",
                        "temperature": 0.0, "include_context": true, "top_k": 2}),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        // The model wrote, and its sentences were checked; the mode says whose sentences
        // the answer shows.
        assert!(
            common::model_wrote(&answer),
            "{arch:?} generated nothing: {answer}"
        );
        common::truthful_mode(&answer);
        assert!(
            !answer["answer"].as_str().unwrap().is_empty(),
            "{arch:?} generated nothing: {answer}"
        );
        let timing = &answer["timing"];
        assert!(timing["llm_generation"].as_f64().unwrap() > 0.0, "{timing}");
        assert!(
            timing["context_formatting"].as_f64().unwrap() > 0.0,
            "{timing}"
        );
        assert!(
            timing["total"].as_f64().unwrap() >= timing["llm_generation"].as_f64().unwrap(),
            "{timing}"
        );
        let context = answer["context_used"].as_str().unwrap();
        assert!(
            context.starts_with("[1]") && context.contains("P-104"),
            "{context}"
        );
        assert_eq!(answer["sources"][0]["source"], "cooling.md");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_streamed_answer_is_the_same_answer_in_pieces() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path(), Arch::Qwen2);
    let server = TestServer::start_with(llm_config(&tmp.path().join("data"), &model, 32)).await;
    server.upload("cooling.md", DOC.as_bytes()).await;
    let question = json!({"question": "When are the pump seals replaced?", "temperature": 0.0});

    let (_, whole) = server.post_json("/api/v1/query", &question).await;
    let mut streamed = question.clone();
    streamed["stream"] = json!(true);
    let r = reqwest::Client::new()
        .post(server.url("/api/v1/query"))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    let events = sse_events(r).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert!(kinds.len() >= 2, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert!(
        kinds[..kinds.len() - 1].iter().all(|k| *k == "token"),
        "{kinds:?}"
    );
    let text: String = events
        .iter()
        .filter(|(k, _)| k == "token")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    let done = &events.last().unwrap().1;
    assert!(common::model_wrote(done), "{done}");
    common::truthful_mode(done);
    assert_eq!(done["answer_mode"], whole["answer_mode"]);
    assert_eq!(text.trim(), done["answer"].as_str().unwrap());
    // Greedy decoding: the same question gives the same answer either way.
    assert_eq!(done["answer"], whole["answer"], "{done} vs {whole}");
    assert_eq!(done["sources"], whole["sources"]);

    // Bad input in a streamed request is still a plain 400 before any event.
    let (status, body) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "x", "stream": true, "temperature": 3.0}),
        )
        .await;
    common::assert_error_body(status, &body, 400);
    server.stop().await;
}

#[tokio::test]
async fn without_an_llm_streaming_gives_the_extractive_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start(&tmp.path().join("data")).await;
    server.upload("cooling.md", DOC.as_bytes()).await;
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    assert_eq!(component(&ready, "llm")["healthy"], false);
    assert_eq!(ready["ready"], true, "the LLM is optional: {ready}");
    let r = reqwest::Client::new()
        .post(server.url("/api/v1/query"))
        .json(&json!({"question": "When are the pump seals replaced?", "stream": true}))
        .send()
        .await
        .unwrap();
    let events = sse_events(r).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["token", "done"]);
    assert_eq!(events[1].1["answer_mode"], "extractive");
    assert!(events[1].1["answer"]
        .as_str()
        .unwrap()
        .contains("18 months"));
    assert_eq!(events[0].1["delta"], events[1].1["answer"]);
    server.stop().await;
}

#[tokio::test]
async fn parse_summarises_with_the_llm_within_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path(), Arch::Llama);
    let server = TestServer::start_with(llm_config(&tmp.path().join("data"), &model, 16)).await;

    let (status, parsed) = server
        .post_file("/api/v1/parse", "cooling.md", DOC.as_bytes(), &[])
        .await;
    assert_eq!(status, 200, "{parsed}");
    assert_eq!(parsed["llm_ready_mode"], "llm_summary", "{parsed}");
    assert!(!parsed["llm_ready"].as_str().unwrap().is_empty());

    let (_, plain) = server
        .post_file(
            "/api/v1/parse",
            "cooling.md",
            DOC.as_bytes(),
            &[("summarize_llm_ready", "false")],
        )
        .await;
    assert_eq!(plain["llm_ready_mode"], "markdown");
    assert!(plain["llm_ready"].as_str().unwrap().contains("Pump P-104"));

    // Above 50,000 characters of content the summary is skipped.
    let big = "The coolant flows through the loop. ".repeat(1500);
    let (status, large) = server
        .post_file("/api/v1/parse", "big.txt", big.as_bytes(), &[])
        .await;
    assert_eq!(status, 200);
    assert_eq!(large["llm_ready_mode"], "markdown");
    server.stop().await;
}

#[test]
fn the_context_budget_fits_passages_to_the_window() {
    use ragd::kb::answer::fit_prompt;
    use ragd::kb::SearchHit;
    use ragd::ml::llm::{Backend, LlmEngine, LlmHandle, LlmWorkerOptions};

    let tmp = tempfile::tempdir().unwrap();
    let model = tiny(tmp.path(), Arch::Qwen2);
    let engine = LlmEngine::load(&model, Backend::cpu()).unwrap();
    let llm = LlmHandle::spawn(engine, LlmWorkerOptions::default()).unwrap();
    let window = llm.info().context_length;
    let hits: Vec<SearchHit> = (0..60)
        .map(|i| SearchHit {
            text: format!("Passage {i}: ") + &"the data base of the world is it and ".repeat(40),
            source: format!("doc-{i}.md"),
            metadata: serde_json::Map::from_iter([("title".to_owned(), json!(format!("Doc {i}")))]),
            score: 1.0 - i as f32 / 100.0,
            doc_id: format!("id-{i}"),
        })
        .collect();
    let fitted = fit_prompt(&llm, "What is the data base?", &hits, 512).unwrap();
    let prompt_tokens = llm.count_prompt_tokens(&fitted.prompt).unwrap();
    assert!(
        prompt_tokens + fitted.max_tokens <= window,
        "{prompt_tokens} + {} > {window}",
        fitted.max_tokens
    );
    assert_eq!(fitted.max_tokens, 512);
    assert!(
        fitted.passages_used >= 2 && fitted.passages_used < 60,
        "{}",
        fitted.passages_used
    );
    // Best passages first, numbered, each with its source.
    assert!(
        fitted.context.starts_with("[1] Doc 0 (doc-0.md)"),
        "{}",
        &fitted.context[..80]
    );
    assert!(fitted
        .context
        .contains(&format!("[{}] ", fitted.passages_used)));
    assert!(!fitted
        .context
        .contains(&format!("[{}] ", fitted.passages_used + 1)));
    // The prompt fills most of the window: little is wasted.
    assert!(
        prompt_tokens + fitted.max_tokens > window * 8 / 10,
        "{prompt_tokens}"
    );

    // A question too long for the window is a clear error, not a failed generation.
    let huge = "data ".repeat(window);
    let err = fit_prompt(&llm, &huge, &hits, 512).unwrap_err();
    assert!(err.to_string().contains("window"), "{err}");
}

/// When every generation slot and queue place is taken, `/query` answers from the
/// passages' own sentences (`answer_mode` extractive) instead of refusing; once the model
/// is free again, it generates. One slot (`llm_parallel` 1) and the worker's queue of
/// eight are held by nine long streamed chat completions that are not read (the real
/// SmolLM2, whose stories take seconds each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_llm_queue_answers_extractively_instead_of_refusing() {
    let tmp = tempfile::tempdir().unwrap();
    let model = common::models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    let config = Config {
        llm_parallel: 1,
        ..llm_config(&tmp.path().join("data"), &model, 64)
    };
    let server = TestServer::start_with(config).await;
    let (status, up) = server.upload("cooling.md", DOC.as_bytes()).await;
    assert_eq!(status, 200, "{up}");
    let (_, models) = server.get_json("/v1/models").await;
    let llm = models["data"][0]["id"].as_str().unwrap().to_owned();
    let client = reqwest::Client::new();
    let mut held = Vec::new();
    for _ in 0..9 {
        let r = client
            .post(server.url("/v1/chat/completions"))
            .json(
                &json!({"model": llm, "stream": true, "max_tokens": 1000, "temperature": 1.0,
                "messages": [{"role": "user", "content": "Write a long story about a dragon."}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        held.push(r);
    }
    let ask = json!({"question": "How fast does pump P-104 circulate coolant?",
        "temperature": 0.0, "top_k": 2});
    let (status, busy) = server.post_json("/api/v1/query", &ask).await;
    assert_eq!(status, 200, "{busy}");
    assert_eq!(busy["answer_mode"], "extractive", "{busy}");
    assert!(
        !common::model_wrote(&busy),
        "the model was not asked: {busy}"
    );
    assert!(
        busy["answer"].as_str().unwrap().contains("12 cubic metres"),
        "{busy}"
    );
    // The clients leave; their generations stop and the model answers again.
    drop(held);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, answer) = server.post_json("/api/v1/query", &ask).await;
        assert_eq!(status, 200, "{answer}");
        if common::model_wrote(&answer) {
            common::truthful_mode(&answer);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the model never answered again: {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    server.stop().await;
}
