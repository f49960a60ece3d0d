//! The LLM on a real inference server: llama.cpp's `llama-server` serving the same
//! SmolLM2 file, started on loopback by the test. The assistant's scenario (a tool chosen
//! and executed, a delete held, a grounded answer with citations) and `/query` (whole and
//! streamed) run as they do on the local engine; a server that is not there, or dies
//! during twenty concurrent requests, gives the contract's errors quickly and loses no
//! upload.

mod common;

use std::time::{Duration, Instant};

use common::engines::{free_port, LlamaServer, StallProxy};
use common::{assert_error_body, create_user, sse_events, test_config, Auth, TestServer};
use ragd::config::Config;
use serde_json::{json, Value};

fn smollm2() -> std::path::PathBuf {
    common::models_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn remote_config(data: &std::path::Path, url: &str) -> Config {
    Config {
        llm_url: url.to_owned(),
        remote_timeout_secs: 30,
        ..test_config(data)
    }
}

fn component(ready: &Value, name: &str) -> Value {
    ready["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assistant_and_query_run_on_llama_server() {
    let _one = common::engines::one_at_a_time().await;
    let engine = LlamaServer::start(&smollm2(), &["-t", "2", "-c", "8192", "-np", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let auth = Auth::Token(create_user(&data, "user@example.com", "password1", false).await);
    let server = TestServer::start_with(remote_config(&data, &engine.url)).await;
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    let llm = component(&ready, "llm");
    assert_eq!(llm["healthy"], true, "{ready}");
    assert!(llm["detail"].as_str().unwrap().contains("remote"), "{llm}");

    common::scenarios::small_model_assistant(&server, &auth, "smollm2").await;

    // Streamed: tokens, then `done` with the whole answer, as on the local engine.
    let r = server
        .client
        .post(server.url("/api/v1/query"))
        .json(&json!({"question": "How many days of leave do I get?", "stream": true, "temperature": 0.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let events = sse_events(r).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert!(
        kinds[..kinds.len() - 1].iter().all(|k| *k == "token"),
        "{kinds:?}"
    );
    let done = &events.last().unwrap().1;
    assert!(common::model_wrote(done), "{done}");
    common::truthful_mode(done);
    let text: String = events
        .iter()
        .filter(|(k, _)| k == "token")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text.trim(), done["answer"].as_str().unwrap().trim());
    assert!(done["answer"].as_str().unwrap().contains("25"), "{done}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_tools_path_runs_the_assistant_too() {
    // The same server taken as a plain OpenAI one: tool calls through `tools` and
    // `tool_choice` (llama.cpp's server needs --jinja for them), token counts from the
    // local copy of the model's tokenizer.
    let _one = common::engines::one_at_a_time().await;
    let engine = LlamaServer::start(
        &smollm2(),
        &["-t", "2", "-c", "8192", "-np", "1", "--jinja"],
    );
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let auth = Auth::Token(create_user(&data, "user@example.com", "password1", false).await);
    let server = TestServer::start_with(Config {
        llm_remote_api: ragd::config::RemoteLlmApi::Openai,
        llm_model: smollm2().display().to_string(),
        ..remote_config(&data, &engine.url)
    })
    .await;
    for (name, text) in common::scenarios::HANDBOOK {
        let (status, body) = server.upload(name, text.as_bytes()).await;
        assert_eq!(status, 200, "{body}");
    }
    // A call the router requires comes back as the call's JSON under a schema.
    let d = common::scenarios::chat(&server, &auth, "What time is it now?").await;
    let call = &d["tool_calls"][0];
    assert_eq!(call["tool_name"], "get_current_datetime", "{d}");
    assert_eq!(call["status"], "executed", "{d}");
    // A delete is held for confirmation; nothing is deleted.
    let d =
        common::scenarios::chat(&server, &auth, "Delete the document about the leave policy").await;
    let call = &d["tool_calls"][0];
    assert!(
        call["tool_name"].as_str().unwrap().starts_with("delete_"),
        "{d}"
    );
    assert_eq!(call["status"], "pending_confirmation", "{d}");
    let (_, docs) = server.get_json("/api/v1/documents?page_size=100").await;
    assert!(docs.to_string().contains("leave-policy.md"), "{docs}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_is_not_there_answers_503_at_once() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = TestServer::start_with(Config {
        llm_context_length: Some(2048),
        ..remote_config(&data, &url)
    })
    .await;
    let (status, body) = server
        .upload("leave.md", common::scenarios::HANDBOOK[0].1.as_bytes())
        .await;
    assert_eq!(status, 200, "uploads need no LLM: {body}");
    let question = json!({"question": "How many days of leave do I get?"});
    let mut elapsed = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let (status, body) = server.post_json("/api/v1/query", &question).await;
        elapsed.push(started.elapsed());
        assert_error_body(status, &body, 503);
        let message = body["detail"]
            .as_str()
            .or(body["error"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            body.to_string().contains(&url),
            "names the server: {body} ({message})"
        );
    }
    // Once the breaker is open the answer comes without trying the network.
    assert!(elapsed[4] < Duration::from_millis(500), "{elapsed:?}");
    let (_, ready) = server.get_json("/api/v1/health/ready").await;
    let llm = component(&ready, "llm");
    assert_eq!(llm["healthy"], false, "{ready}");
    assert!(llm["detail"].as_str().unwrap().contains(&url), "{llm}");
    // Searching needs no LLM and still works.
    let hits = server.search("annual leave", 3).await;
    assert!(!hits["results"].as_array().unwrap().is_empty(), "{hits}");
    server.stop().await;
}

/// One streamed `/query`: its status and the kinds of its events (or the error body).
async fn streamed_query(
    client: reqwest::Client,
    url: String,
    n: usize,
) -> (u16, Vec<(String, Value)>, Value) {
    let body = json!({"question": format!("How many days of leave do I get? ({n})"), "stream": true, "temperature": 0.7});
    let r = client.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    if status == 200 {
        (status, sse_events(r).await, Value::Null)
    } else {
        (status, Vec::new(), r.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_engine_mid_stream_breaks_nothing() {
    let _one = common::engines::one_at_a_time().await;
    let mut engine = LlamaServer::start(&smollm2(), &["-t", "2", "-c", "16384", "-np", "4"]);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = TestServer::start_with(remote_config(&data, &engine.url)).await;
    for (name, text) in common::scenarios::HANDBOOK {
        let (status, body) = server.upload(name, text.as_bytes()).await;
        assert_eq!(status, 200, "{body}");
    }
    let url = server.url("/api/v1/query");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let queries: Vec<_> = (0..20)
        .map(|n| tokio::spawn(streamed_query(client.clone(), url.clone(), n)))
        .collect();
    // Uploads go on while the engine dies.
    let uploads: Vec<_> = (0..5)
        .map(|n| {
            let c = server.client.clone();
            let u = server.url("/api/v1/upload");
            tokio::spawn(async move {
                let part = reqwest::multipart::Part::bytes(
                    format!("# Note {n}\n\nMeeting room {n} is on floor {n}.\n").into_bytes(),
                )
                .file_name(format!("note-{n}.md"));
                let form = reqwest::multipart::Form::new().part("file", part);
                c.post(u)
                    .multipart(form)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    engine.kill();
    let started = Instant::now();
    let mut outcomes = (0, 0, 0);
    for q in queries {
        let (status, events, body) = q.await.expect("no request hangs past the client timeout");
        match status {
            200 => {
                let last = events.last().expect("a stream ends with an event");
                assert_eq!(last.0, "done", "{events:?}");
                if let Some(err) = events.iter().find(|(k, _)| k == "error") {
                    // The contract's error body inside the stream.
                    assert!(
                        err.1["detail"].is_string() || err.1["error"].is_string(),
                        "{err:?}"
                    );
                    outcomes.1 += 1;
                } else {
                    outcomes.0 += 1;
                }
            }
            503 | 429 => {
                assert_error_body(status, &body, status);
                outcomes.2 += 1;
            }
            other => panic!("status {other}: {body}"),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "answers after the kill came quickly"
    );
    assert!(
        outcomes.1 + outcomes.2 > 0,
        "the kill was seen: {outcomes:?}"
    );
    for u in uploads {
        assert_eq!(u.await.unwrap(), 200, "an upload failed while the LLM died");
    }
    let (_, docs) = server.get_json("/api/v1/documents?page_size=100").await;
    let names: Vec<String> = docs["documents"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| x["source"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for n in 0..5 {
        assert!(
            docs.to_string().contains(&format!("note-{n}.md")),
            "note-{n}.md was lost: {names:?}"
        );
    }

    // The engine comes back: after the breaker's pause, answers come back too.
    engine.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = server
            .post_json(
                "/api/v1/query",
                &json!({"question": "How many days of leave do I get?"}),
            )
            .await;
        // A request caught by the restart may run out its deadline with nothing
        // written: it is answered from the sources and labelled so; the model's answers
        // must come back after it.
        if status == 200 {
            common::truthful_mode(&body);
            if common::model_wrote(&body) {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no answer from the model after the restart: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_that_stalls_gives_503_in_bounded_time() {
    let _one = common::engines::one_at_a_time().await;
    let engine = LlamaServer::start(&smollm2(), &["-t", "2", "-c", "4096", "-np", "1"]);
    let proxy = StallProxy::start(engine.port()).await;
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(Config {
        // Long enough for the prompt's processing before the first piece.
        remote_timeout_secs: 6,
        ..remote_config(&tmp.path().join("data"), &proxy.url)
    })
    .await;
    let (status, _) = server
        .upload("leave.md", common::scenarios::HANDBOOK[0].1.as_bytes())
        .await;
    assert_eq!(status, 200);
    let question = json!({"question": "How many days of leave do I get?", "temperature": 0.0});
    let (status, body) = server.post_json("/api/v1/query", &question).await;
    assert_eq!(status, 200, "through the proxy: {body}");

    proxy.set_stalled(true);
    let started = Instant::now();
    let (status, body) = server.post_json("/api/v1/query", &question).await;
    assert_error_body(status, &body, 503);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(
        body["detail"].as_str().unwrap().contains(&proxy.url),
        "{body}"
    );

    proxy.set_stalled(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = server.post_json("/api/v1/query", &question).await;
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answer after the stall: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    server.stop().await;
}
