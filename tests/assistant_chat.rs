//! The chat engine through HTTP: the exact tool loop with a scripted model (the
//! `Generator` trait the engine uses), constrained tool calls with a real tiny GGUF, the
//! extractive mode without an LLM, attachments, and the SSE stream (event order, `done`
//! last, a client that leaves stops the model).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{create_user, sse_events, test_config, with_auth, Auth, TestServer};
use parking_lot::Mutex;
use ragd::config::Config;
use ragd::ml::llm::tiny::write_tiny_gguf;
use ragd::ml::llm::{
    Arch, FinishReason, GenerateRequest, Generator, LlmEvent, ModelInfo, Prompt, Role,
};
use ragd::ml::MlError;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Answers each generation with the next scripted text, in small pieces; records every
/// prompt. An endless script keeps generating until the receiver goes away.
struct Scripted {
    info: ModelInfo,
    replies: Mutex<Vec<String>>,
    prompts: Mutex<Vec<Vec<(Role, String)>>>,
    /// Per generation: the tools shown through the template, and each message's
    /// structured calls (names) and result id.
    structured: Mutex<Vec<Structured>>,
    endless: bool,
    stopped: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
}

/// What a generation's prompt carried besides text.
#[derive(Debug, Clone)]
struct Structured {
    tools: Vec<String>,
    calls: Vec<(Role, Vec<String>, Option<String>)>,
}

impl Scripted {
    /// A model whose chat template shows tool definitions.
    fn with_template_tools(replies: &[&str]) -> Arc<Self> {
        let mut s = Arc::try_unwrap(Self::new(replies)).ok().unwrap();
        s.info.template_tools = true;
        Arc::new(s)
    }

    fn structured(&self) -> Vec<Structured> {
        self.structured.lock().clone()
    }

    fn new(replies: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            info: ModelInfo {
                name: "scripted".into(),
                family: "qwen2".into(),
                context_length: 8192,
                template_tools: false,
            },
            replies: Mutex::new(replies.iter().rev().map(|s| s.to_string()).collect()),
            prompts: Mutex::new(Vec::new()),
            structured: Mutex::new(Vec::new()),
            endless: false,
            stopped: Arc::new(AtomicBool::new(false)),
            in_flight: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn endless() -> Arc<Self> {
        let mut s = Arc::try_unwrap(Self::new(&[])).ok().unwrap();
        s.endless = true;
        Arc::new(s)
    }

    fn prompts(&self) -> Vec<Vec<(Role, String)>> {
        self.prompts.lock().clone()
    }
}

impl Generator for Scripted {
    fn generate(&self, request: GenerateRequest) -> Result<mpsc::Receiver<LlmEvent>, MlError> {
        let (messages, tools) = match request.prompt {
            Prompt::Chat(messages) => (messages, Vec::new()),
            Prompt::ToolChat { messages, tools } => (messages, tools),
            _ => return Err(MlError::InvalidInput("scripted model wants a chat".into())),
        };
        self.structured.lock().push(Structured {
            tools: tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect(),
            calls: messages
                .iter()
                .map(|m| {
                    let names = m.tool_calls.iter().map(|c| c.name.clone()).collect();
                    (m.role, names, m.tool_call_id.clone())
                })
                .collect(),
        });
        let prompt_tokens: usize = messages.iter().map(|m| m.content.len() / 4 + 4).sum();
        self.prompts
            .lock()
            .push(messages.into_iter().map(|m| (m.role, m.content)).collect());
        let (tx, rx) = mpsc::channel(16);
        let (stopped, in_flight) = (self.stopped.clone(), self.in_flight.clone());
        in_flight.fetch_add(1, Ordering::SeqCst);
        if self.endless {
            tokio::spawn(async move {
                loop {
                    if tx
                        .send(LlmEvent::Token {
                            text: "word ".into(),
                        })
                        .await
                        .is_err()
                    {
                        stopped.store(true, Ordering::SeqCst);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
            return Ok(rx);
        }
        let text = self
            .replies
            .lock()
            .pop()
            .unwrap_or_else(|| "(script ended)".into());
        tokio::spawn(async move {
            let chars: Vec<char> = text.chars().collect();
            let pieces: Vec<String> = chars.chunks(5).map(|c| c.iter().collect()).collect();
            for p in &pieces {
                let _ = tx.send(LlmEvent::Token { text: p.clone() }).await;
            }
            let _ = tx
                .send(LlmEvent::Done {
                    prompt_tokens,
                    completion_tokens: pieces.len(),
                    finish_reason: FinishReason::Stop,
                })
                .await;
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(rx)
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.len() / 4 + 1
    }
    fn count_prompt_tokens(&self, prompt: &Prompt) -> Result<usize, MlError> {
        Ok(match prompt {
            Prompt::Chat(m) | Prompt::ToolChat { messages: m, .. } => {
                m.iter().map(|m| m.content.len() / 4 + 4).sum()
            }
            Prompt::Text(t) => t.len() / 4,
            Prompt::Tokens(t) => t.len(),
        })
    }
    fn info(&self) -> &ModelInfo {
        &self.info
    }
    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

async fn start(data: &Path, llm: Option<Arc<Scripted>>) -> (TestServer, Auth) {
    let creds = create_user(data, "ana@example.com", "password-ana", false).await;
    let mut config = ragd::AppState::builder(test_config(data));
    if let Some(l) = llm {
        config = config.llm(l as Arc<dyn Generator>);
    }
    (TestServer::start_with(config).await, Auth::Token(creds))
}

async fn chat(server: &TestServer, auth: &Auth, params: Value) -> Value {
    server
        .call(Method::POST, "assistant.api.chat_with_tools", &params, auth)
        .await
        .body["message"]
        .clone()
}

#[tokio::test]
async fn the_tool_loop_runs_rounds_exactly_as_the_model_asks() {
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::new(&[
        "Let me compute that.<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"6*7\"}}</tool_call>",
        "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expr\": \"1\"}}</tool_call>",
        "<tool_call>{\"name\": \"get_current_datetime\", \"arguments\": {}}</tool_call>",
        "Six times seven is 42.",
        "You asked about 42 before.",
    ]);
    let (server, auth) = start(&tmp.path().join("data"), Some(model.clone())).await;

    let m = chat(&server, &auth, json!({"user_message": "What is 6*7?"})).await;
    assert_eq!(m["success"], true, "{m}");
    let data = &m["data"];
    assert_eq!(data["response"], "Six times seven is 42.");
    assert_eq!(data["answer_mode"], "generative");
    assert_eq!(data["requires_confirmation"], false);
    let calls = data["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{data}");
    assert_eq!(calls[0]["tool_name"], "calculate");
    assert_eq!(calls[0]["status"], "executed");
    assert_eq!(
        calls[0]["result"]["result"].as_f64(),
        Some(42.0),
        "{}",
        calls[0]
    );
    // A call that breaks the schema is not run; its error goes back to the model.
    assert_eq!(calls[1]["status"], "failed");
    assert!(
        calls[1]["error"].as_str().unwrap().contains("expression"),
        "{}",
        calls[1]
    );
    assert_eq!(calls[2]["tool_name"], "get_current_datetime");
    assert_eq!(calls[2]["status"], "executed");
    assert!(m["tokens_used"]["input"].as_u64().unwrap() > 0);
    assert!(m["tokens_used"]["output"].as_u64().unwrap() > 0);
    assert_eq!(
        m["tokens_used"]["total"].as_u64().unwrap(),
        m["tokens_used"]["input"].as_u64().unwrap() + m["tokens_used"]["output"].as_u64().unwrap()
    );

    // Four rounds: each later prompt carries the tool results of the earlier ones.
    let prompts = model.prompts();
    assert_eq!(prompts.len(), 4);
    // The instructions come first and stay the same from turn to turn (for the prompt
    // cache); the tools offered this turn, with their schemas, go with the user's message.
    assert!(
        !prompts[0][0].1.contains("calculate"),
        "{}",
        prompts[0][0].1
    );
    let first_turn = &prompts[0].last().unwrap().1;
    assert!(
        first_turn.contains("calculate") && first_turn.ends_with("What is 6*7?"),
        "tools are offered with the message: {first_turn}"
    );
    let last_tool = prompts[1]
        .iter()
        .rev()
        .find(|(r, _)| *r == Role::Tool)
        .unwrap();
    assert!(last_tool.1.contains("42"), "{}", last_tool.1);
    let fed_error = prompts[2]
        .iter()
        .rev()
        .find(|(r, _)| *r == Role::Tool)
        .unwrap();
    assert!(fed_error.1.contains("expression"), "{}", fed_error.1);

    // The next turn sees the conversation so far.
    let cid = data["conversation_id"].as_str().unwrap().to_owned();
    let m2 = chat(
        &server,
        &auth,
        json!({"user_message": "What did I ask?", "conversation_id": cid,
               "system_prompt": "You are terse."}),
    )
    .await;
    assert_eq!(m2["data"]["response"], "You asked about 42 before.");
    let p = &model.prompts()[4];
    assert_eq!(p[0].0, Role::System);
    assert!(
        p[0].1.starts_with("You are terse."),
        "custom system prompt: {}",
        p[0].1
    );
    assert!(p
        .iter()
        .any(|(r, t)| *r == Role::User && t == "What is 6*7?"));
    assert!(p
        .iter()
        .any(|(r, t)| *r == Role::Assistant && t == "Six times seven is 42."));

    let history = server
        .call(
            Method::GET,
            "assistant.api.get_conversation_history",
            &json!({"conversation_id": cid}),
            &auth,
        )
        .await;
    let msgs = history.data()["messages"].as_array().unwrap().clone();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[1]["tool_calls"].as_array().unwrap().len(), 3);
    assert_eq!(msgs[3]["message_id"], m2["data"]["message_id"]);
    server.stop().await;
}

/// A model whose template shows tools gets them through it: the definitions beside the
/// chat (not in the user's message), its calls as structured calls and each result as a
/// tool message answering its call's id. Models without (the test above) get them in text.
#[tokio::test]
async fn a_template_that_shows_tools_gets_definitions_calls_and_results_structured() {
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::with_template_tools(&[
        "<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"6*7\"}}</tool_call>",
        "Six times seven is 42.",
    ]);
    let (server, auth) = start(&tmp.path().join("data"), Some(model.clone())).await;
    let m = chat(&server, &auth, json!({"user_message": "What is 6*7?"})).await;
    assert_eq!(m["data"]["response"], "Six times seven is 42.", "{m}");
    assert_eq!(m["data"]["tool_calls"][0]["status"], "executed", "{m}");

    let (prompts, structured) = (model.prompts(), model.structured());
    assert_eq!(prompts.len(), 2);
    assert!(
        structured[0].tools.iter().any(|t| t == "calculate"),
        "{structured:?}"
    );
    assert_eq!(structured[0].tools, structured[1].tools);
    let first_turn = &prompts[0].last().unwrap().1;
    assert_eq!(first_turn, "What is 6*7?", "no tool text in the message");
    let second = &structured[1].calls;
    let n = second.len();
    assert!(n >= 4, "{second:?}");
    let (role, calls, _) = &second[n - 2];
    assert_eq!(
        (*role, calls.as_slice()),
        (Role::Assistant, &["calculate".to_owned()][..])
    );
    let (role, _, answered) = &second[n - 1];
    assert_eq!(*role, Role::Tool);
    assert!(answered.is_some(), "the result names its call: {second:?}");
    let result = &prompts[1].last().unwrap().1;
    assert!(
        result.contains("42") && !result.starts_with('['),
        "{result}"
    );
    server.stop().await;
}

#[tokio::test]
async fn high_risk_calls_are_held_and_proposals_are_not_run() {
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::new(&[
        "<tool_call>{\"name\": \"delete_document\", \"arguments\": {\"document_id\": \"abc\"}}</tool_call>",
        "<tool_call>{\"name\": \"upload_text\", \"arguments\": {\"text\": \"Notes on pumps.\", \"title\": \"notes\"}}</tool_call>",
    ]);
    let (server, auth) = start(&tmp.path().join("data"), Some(model.clone())).await;

    let m = chat(
        &server,
        &auth,
        json!({"user_message": "Delete document abc",
                                         "auto_execute_tools": true}),
    )
    .await;
    let data = &m["data"];
    assert_eq!(data["requires_confirmation"], true, "{m}");
    let call = &data["tool_calls"][0];
    assert_eq!(call["status"], "pending_confirmation");
    let action_id = call["action_id"].as_str().unwrap();
    assert_eq!(model.prompts().len(), 1, "the loop stops at a held call");
    let pending = server
        .call(
            Method::GET,
            "assistant.api.list_pending_actions",
            &json!({}),
            &auth,
        )
        .await;
    let listed = pending.data().to_string();
    assert!(listed.contains(action_id), "{listed}");

    let m = chat(
        &server,
        &auth,
        json!({"user_message": "Save a note",
                                         "auto_execute_tools": false}),
    )
    .await;
    let call = &m["data"]["tool_calls"][0];
    assert_eq!(call["status"], "proposed", "{m}");
    assert!(call["result"].is_null());
    let (_, docs) = server.get_json("/api/v1/documents").await;
    assert_eq!(docs["total"], 0, "a proposed call does not run: {docs}");
    server.stop().await;
}

#[tokio::test]
async fn the_stream_sends_content_tools_then_done_and_stops_when_the_client_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::new(&[
        "Checking.<tool_call>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"2+2\"}}</tool_call>",
        "It is 4.",
    ]);
    let (server, auth) = start(&tmp.path().join("data"), Some(model)).await;
    let req = reqwest::Client::new()
        .get(server.url("/api/method/assistant.api.stream_ai_response"))
        .query(&[("prompt", "What is 2+2?")]);
    let events = sse_events(with_auth(req, &auth).send().await.unwrap()).await;
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    let first_tool = kinds.iter().position(|k| *k == "tool_start").unwrap();
    assert!(
        kinds[..first_tool].iter().all(|k| *k == "content"),
        "{kinds:?}"
    );
    assert_eq!(kinds[first_tool + 1], "tool_result", "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    let text: String = events
        .iter()
        .filter(|(k, _)| k == "content")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(
        text, "Checking.It is 4.",
        "the call itself is not shown as content"
    );
    let result = &events[first_tool + 1].1;
    assert_eq!(result["success"], true);
    assert_eq!(result["result"]["result"].as_f64(), Some(4.0));
    let done = &events.last().unwrap().1;
    assert!(done["conversation_id"].is_string() && done["message_id"].is_string());
    assert!(done["tokens_used"]["total"].as_u64().unwrap() > 0);

    // Errors arrive as an error event.
    let req = reqwest::Client::new()
        .get(server.url("/api/method/assistant.api.stream_ai_response"))
        .query(&[("prompt", "x"), ("conversation_id", "no-such-conversation")]);
    let events = sse_events(with_auth(req, &auth).send().await.unwrap()).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "error");
    assert_eq!(events[0].1["status_code"], 404);
    server.stop().await;

    // A client that leaves mid-answer stops the generation and frees the model.
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::endless();
    let (server, auth) = start(&tmp.path().join("data"), Some(model.clone())).await;
    let req = reqwest::Client::new()
        .get(server.url("/api/method/assistant.api.stream_ai_response"))
        .query(&[("prompt", "Talk forever"), ("tool_choice", "none")]);
    let mut r = with_auth(req, &auth).send().await.unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("content"));
    assert_eq!(model.in_flight(), 1);
    drop(r);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !(model.stopped.load(Ordering::SeqCst) && model.in_flight() == 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "generation did not stop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

#[tokio::test]
async fn attachments_join_the_turn_and_are_listed_on_the_message() {
    let tmp = tempfile::tempdir().unwrap();
    let model = Scripted::new(&["The file is about pump seals."]);
    let (server, auth) = start(&tmp.path().join("data"), Some(model.clone())).await;
    let form = reqwest::multipart::Form::new()
        .text("user_message", "What is in this file?")
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(
                b"# Seals\n\nPump seals are replaced every 18 months.".to_vec(),
            )
            .file_name("seals.md"),
        )
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(b"part,count\nseal,4\n".to_vec())
                .file_name("parts.csv"),
        );
    let req = reqwest::Client::new()
        .post(server.url("/api/method/assistant.api.chat_with_tools_multimodal"))
        .multipart(form);
    let reply = server.send_reply(with_auth(req, &auth)).await;
    let data = reply.data();
    assert_eq!(data["response"], "The file is about pump seals.");
    let turn = model.prompts()[0].last().unwrap().1.clone();
    assert!(
        turn.contains("18 months") && turn.contains("seals.md"),
        "{turn}"
    );
    assert!(turn.contains("parts.csv"));
    assert!(!model.prompts()[0][0].1.contains("seals.md"));
    let history = server
        .call(
            Method::GET,
            "assistant.api.get_conversation_history",
            &json!({"conversation_id": data["conversation_id"]}),
            &auth,
        )
        .await;
    let attachments = &history.data()["messages"][0]["attachments"];
    assert_eq!(attachments[0]["filename"], "seals.md", "{attachments}");
    assert_eq!(attachments[1]["filename"], "parts.csv");

    // A file no parser reads is a clear 400.
    let form = reqwest::multipart::Form::new()
        .text("user_message", "and this?")
        .part(
            "files[]",
            reqwest::multipart::Part::bytes(vec![0u8; 10]).file_name("blob.exe"),
        );
    let req = reqwest::Client::new()
        .post(server.url("/api/method/assistant.api.chat_with_tools_multimodal"))
        .multipart(form);
    server.send_reply(with_auth(req, &auth)).await.error(400);
    server.stop().await;
}

#[tokio::test]
async fn without_an_llm_the_chat_answers_from_the_knowledge_base() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, auth) = start(&tmp.path().join("data"), None).await;
    server
        .upload(
            "seals.md",
            b"# Seals\n\nPump seals are replaced every 18 months by the crew.",
        )
        .await;
    let m = chat(
        &server,
        &auth,
        json!({"user_message": "How often are pump seals replaced?"}),
    )
    .await;
    assert_eq!(m["success"], true, "{m}");
    assert_eq!(m["data"]["answer_mode"], "extractive");
    assert!(
        m["data"]["response"]
            .as_str()
            .unwrap()
            .contains("18 months"),
        "{m}"
    );
    assert_eq!(m["data"]["sources"][0]["source"], "seals.md");
    assert_eq!(m["tokens_used"]["total"], 0);
    // Bad input: the envelope's 400.
    let r = server
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": ""}),
            &auth,
        )
        .await;
    r.error(400);
    let r = server
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": "hi", "max_tokens": 100000}),
            &auth,
        )
        .await;
    r.error(400);
    server
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": "hi"}),
            &Auth::None,
        )
        .await
        .error(401);
    server.stop().await;
}

#[tokio::test]
async fn a_tiny_gguf_writes_valid_tool_calls_under_the_constraint() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("tiny-qwen2.gguf");
    write_tiny_gguf(&model, Arch::Qwen2).unwrap();
    let data = tmp.path().join("data");
    let creds = create_user(&data, "ana@example.com", "password-ana", false).await;
    let auth = Auth::Token(creds);
    let config = Config {
        llm_model: model.to_string_lossy().into_owned(),
        llm_max_tokens: 1024,
        llm_threads: Some(1),
        llm_temperature: 0.8,
        ..test_config(&data)
    };
    let server = TestServer::start_with(config).await;
    for (tool, expected) in [
        ("get_current_datetime", &["executed"][..]),
        // Random weights write a random expression: the call is valid, its evaluation
        // may fail.
        ("calculate", &["executed", "failed"][..]),
        ("delete_document", &["pending_confirmation"][..]),
    ] {
        let m = chat(
            &server,
            &auth,
            json!({"user_message": "Use the tool.", "tool_choice": tool, "max_tokens": 1024}),
        )
        .await;
        assert_eq!(m["success"], true, "{m}");
        let call = &m["data"]["tool_calls"][0];
        assert_eq!(call["tool_name"], tool, "{m}");
        let status = call["status"].as_str().unwrap();
        assert!(expected.contains(&status), "{tool}: {call}");
        if status == "failed" {
            let err = call["error"].as_str().unwrap();
            assert!(!err.contains("params"), "the call itself was valid: {err}");
        }
        if tool == "delete_document" {
            assert!(call["params"]["document_id"].is_string(), "{call}");
            assert_eq!(m["data"]["requires_confirmation"], true);
        }
    }
    server.stop().await;
}

/// A chat turn has a deadline (2 x `max_queue_wait_secs`): past it, its generation stops
/// as soon as another request waits on the model, and the text written so far is the
/// reply. A model serving the turn alone finishes it.
#[tokio::test]
async fn a_turn_past_its_deadline_yields_the_model_to_others() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let creds = create_user(&data, "ana@example.com", "password-ana", false).await;
    let model = Scripted::endless();
    let mut config = test_config(&data);
    config.max_queue_wait_secs = 1;
    let state = ragd::AppState::builder(config).llm(model.clone() as Arc<dyn Generator>);
    let server = TestServer::start_with(state).await;
    let auth = Auth::Token(creds);

    let started = std::time::Instant::now();
    let first = {
        let req = reqwest::Client::new()
            .post(server.url("/api/method/assistant.api.chat_with_tools"))
            .json(&json!({"user_message": "Talk forever", "tool_choice": "none"}));
        let req = with_auth(req, &auth);
        tokio::spawn(async move { req.send().await.unwrap().json::<Value>().await.unwrap() })
    };
    // Alone, the turn writes on past its 2 s deadline.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!first.is_finished(), "a turn alone on the model was cut");
    assert_eq!(model.in_flight(), 1);

    // A second turn now waits on the model: the first one ends within a poll.
    let req = reqwest::Client::new()
        .get(server.url("/api/method/assistant.api.stream_ai_response"))
        .query(&[("prompt", "Talk forever too"), ("tool_choice", "none")]);
    let second_started = std::time::Instant::now();
    let second = with_auth(req, &auth).send().await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(3), first)
        .await
        .expect("the turn past its deadline did not yield the model")
        .unwrap();
    let yielded = second_started.elapsed();
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(yielded < Duration::from_secs(2), "{yielded:?}");
    let text = reply["message"]["data"]["response"].as_str().unwrap();
    assert!(text.starts_with("word word"), "{reply}");
    assert_eq!(reply["message"]["data"]["answer_mode"], "generative");
    // What the client saw is what was stored.
    let history = server
        .call(
            Method::GET,
            "assistant.api.get_conversation_history",
            &json!({"conversation_id": reply["message"]["data"]["conversation_id"]}),
            &auth,
        )
        .await;
    let messages = history.body["message"]["data"]["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(messages.last().unwrap()["content"], text, "{messages:?}");
    drop(second);
    server.stop().await;
}
