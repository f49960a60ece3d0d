//! Streamed answers on the real SmolLM2-135M-Instruct file and the real embedder, as a
//! user meets them: the first text of a `/query` answer and of a chat reply is the
//! sources' own sentences, cited, shown before the model has finished (long before, for
//! a small model whose sentences mostly fail the check); the model's checked sentences
//! only ever extend it; and `answer_mode` says truthfully where the text comes from, with
//! the counts in `grounding`.

mod common;

use std::time::Instant;

use common::{create_user, sse_events_timed, test_config, with_auth, Auth, TestServer};
use ragd::config::Config;
use serde_json::{json, Value};

fn smollm2_config(data: &std::path::Path) -> Config {
    Config {
        // The server's default LLM: the SmolLM2 file in models/.
        llm_model: Config::default().llm_model,
        llm_threads: Some(2),
        ..test_config(data)
    }
}

/// The evaluation's documents written out in it (a handbook of six files and a CSV; its
/// third-party PDF and DOCX are left out here).
fn docs() -> Vec<(String, String)> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/eval_assistant/docs.json");
    let docs: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let docs: Vec<(String, String)> = docs
        .iter()
        .filter_map(|d| {
            Some((
                d["name"].as_str()?.to_owned(),
                d["text"].as_str()?.to_owned(),
            ))
        })
        .collect();
    assert!(docs.len() >= 6, "{docs:?}");
    docs
}

async fn load(server: &TestServer) -> String {
    let mut all = String::new();
    for (name, text) in docs() {
        let (status, body) = server.upload(&name, text.as_bytes()).await;
        assert_eq!(status, 200, "{body}");
        all.push_str(&text);
        all.push('\n');
    }
    all
}

/// Each sentence of `quoted` (citations removed) is a sentence of the documents.
fn assert_quoted_from(quoted: &str, documents: &str) {
    let flat = documents.split_whitespace().collect::<Vec<_>>().join(" ");
    for sentence in quoted.split_inclusive(['.', '!', '?']) {
        let bare: String = sentence
            .split(" [")
            .next()
            .unwrap()
            .trim()
            .trim_end_matches(['.', '!', '?'])
            .to_owned();
        if bare.is_empty() || bare.starts_with('[') {
            continue;
        }
        assert!(
            flat.contains(&bare),
            "{bare:?} is not a sentence of the documents"
        );
    }
}

/// The pieces' text by origin, and whether they are all appended in order.
fn text_of(events: &[(f64, String, Value)], kind: &str, origin: &str) -> String {
    events
        .iter()
        .filter(|(_, k, d)| k == kind && d["origin"] == origin)
        .map(|(_, _, d)| d["delta"].as_str().unwrap())
        .collect()
}

/// `answer_mode` as the counts say, and the counts as the pieces say.
fn assert_mode_is_true(
    events: &[(f64, String, Value)],
    kind: &str,
    mode: &Value,
    g: &Value,
    answer: &str,
) {
    let generated = g["generated_sentences"].as_u64().unwrap();
    let quoted = g["extractive_sentences"].as_u64().unwrap();
    let expected = match (generated, quoted) {
        (0, _) => "extractive",
        (_, 0) => "generative",
        _ => "mixed",
    };
    assert_eq!(mode, expected, "{g}");
    let pieces = |origin: &str| {
        events
            .iter()
            .filter(|(_, k, d)| k == kind && d["origin"] == origin)
            .count() as u64
    };
    // One piece per kept sentence of the model; the quotes come as one piece.
    assert_eq!(pieces("generated"), generated, "{g}");
    assert_eq!(pieces("extractive") > 0, quoted > 0, "{g}");
    let kept = g["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["supported"] == true && s["on_topic"] == true && s["repeated"] != true)
        .count() as u64;
    assert_eq!(kept, generated, "{g}");
    let all: String = events
        .iter()
        .filter(|(_, k, _)| k == kind)
        .map(|(_, _, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(all.trim(), answer.trim(), "the pieces only ever append");
}

#[tokio::test]
async fn query_shows_cited_quotes_at_once_and_tells_where_the_text_comes_from() {
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(smollm2_config(&tmp.path().join("data"))).await;
    let documents = load(&server).await;
    let ask = |question: &str| {
        server
            .client
            .post(server.url("/api/v1/query"))
            .json(&json!({"question": question, "stream": true}))
            .send()
    };
    // Warm: the first answer also loads the model's prompt cache.
    let _ = sse_events_timed(
        ask("How many days of leave do I get?").await.unwrap(),
        Instant::now(),
    )
    .await;

    let mut modes = Vec::new();
    for question in [
        "How many days of leave do I get?",
        "How often are the pump seals replaced?",
        "Can I work from home?",
    ] {
        let started = Instant::now();
        let events = sse_events_timed(ask(question).await.unwrap(), started).await;
        let (first_at, kind, first) = &events[0];
        assert_eq!(kind, "token", "{events:?}");
        let (done_at, kind, done) = events.last().unwrap();
        assert_eq!(kind, "done", "{events:?}");
        assert!(
            events[..events.len() - 1]
                .iter()
                .all(|(_, k, _)| k == "token"),
            "{events:?}"
        );
        // The first text is grounded: the sources' own sentences, each cited.
        assert_eq!(first["origin"], "extractive", "{question}: {first}");
        let lead = first["delta"].as_str().unwrap();
        assert!(lead.contains("[1]") || lead.contains("[2]"), "{lead}");
        assert_quoted_from(lead, &documents);
        // ...and it came before the model had finished: the model wrote (and the check
        // judged) its sentences after the quotes were on their way.
        let g = &done["grounding"];
        assert!(
            !g["sentences"].as_array().unwrap().is_empty(),
            "the model wrote nothing: {g}"
        );
        let generation = done["timing"]["llm_generation"].as_f64().unwrap();
        assert!(
            done_at - first_at >= 0.8 * generation,
            "{question}: first text at {first_at:.3} s, done at {done_at:.3} s, generation {generation:.3} s"
        );
        assert!(done["answer"].as_str().unwrap().starts_with(lead.trim()));
        assert_mode_is_true(
            &events,
            "token",
            &done["answer_mode"],
            g,
            done["answer"].as_str().unwrap(),
        );
        assert_eq!(
            text_of(&events, "token", "extractive").trim(),
            lead.trim(),
            "quotes come once, first"
        );
        modes.push(done["answer_mode"].as_str().unwrap().to_owned());
    }
    assert!(
        modes.iter().all(|m| m == "extractive" || m == "mixed"),
        "strong passages are quoted first: {modes:?}"
    );

    // Passages that do not hold the answer: the statement, at once, and no model text.
    let events = sse_events_timed(
        ask("What is the dress code at the office?").await.unwrap(),
        Instant::now(),
    )
    .await;
    let done = &events.last().unwrap().2;
    assert_eq!(done["grounding"]["outcome"], "not_in_sources", "{done}");
    assert_eq!(
        done["answer_mode"], "extractive",
        "no sentence of the model: {done}"
    );
    assert_eq!(events[0].2["origin"], "not_in_sources", "{events:?}");
    assert_eq!(done["grounding"]["generated_sentences"], 0);
    assert_eq!(done["grounding"]["extractive_sentences"], 0);

    // The whole answer says the same as the streamed one.
    let (status, whole) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "How many days of leave do I get?"}),
        )
        .await;
    assert_eq!(status, 200, "{whole}");
    let g = &whole["grounding"];
    assert!(g["extractive_sentences"].as_u64().unwrap() > 0, "{g}");
    assert!(whole["answer"].as_str().unwrap().contains("25"), "{whole}");
    assert_ne!(whole["answer_mode"], "generative", "{whole}");

    // The /v1 knowledge-base model carries the same mode and counts.
    let (status, v1) = server
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "knowledge-base",
                    "messages": [{"role": "user", "content": "How many days of leave do I get?"}]}),
        )
        .await;
    assert_eq!(status, 200, "{v1}");
    let g = &v1["grounding"];
    let expected = match (
        g["generated_sentences"].as_u64().unwrap(),
        g["extractive_sentences"].as_u64().unwrap(),
    ) {
        (0, _) => "extractive",
        (_, 0) => "generative",
        _ => "mixed",
    };
    assert_eq!(v1["answer_mode"], expected, "{v1}");
    assert!(g["extractive_sentences"].as_u64().unwrap() > 0, "{v1}");
    server.stop().await;
}

#[tokio::test]
async fn chat_streams_the_quotes_first_and_tells_where_the_reply_comes_from() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let auth = Auth::Token(create_user(&data, "user@example.com", "password1", false).await);
    let server = TestServer::start_with(smollm2_config(&data)).await;
    let documents = load(&server).await;
    let chat = |prompt: &str| {
        let req = server
            .client
            .get(server.url("/api/method/assistant.api.stream_ai_response"))
            .query(&[("prompt", prompt)]);
        with_auth(req, &auth).send()
    };
    let _ = sse_events_timed(
        chat("How often are the pump seals replaced?")
            .await
            .unwrap(),
        Instant::now(),
    )
    .await;

    for prompt in [
        "How many days of leave do I get?",
        "How often are the pump seals replaced?",
    ] {
        let started = Instant::now();
        let events = sse_events_timed(chat(prompt).await.unwrap(), started).await;
        let (done_at, kind, done) = events.last().unwrap();
        assert_eq!(kind, "done", "{events:?}");
        let first = events
            .iter()
            .find(|(_, k, _)| k == "content")
            .unwrap_or_else(|| panic!("no content: {events:?}"));
        assert_eq!(first.2["origin"], "extractive", "{prompt}: {events:?}");
        let lead = first.2["delta"].as_str().unwrap();
        assert_quoted_from(lead, &documents);
        assert!(lead.contains('['), "cited: {lead}");
        let g = &done["grounding"];
        assert!(g.is_object(), "a knowledge-base reply: {done}");
        assert!(
            !g["sentences"].as_array().unwrap().is_empty(),
            "the model wrote nothing: {g}"
        );
        // The quotes were shown well before the reply was complete.
        assert!(
            done_at - first.0 >= 0.25,
            "{prompt}: first text at {:.3} s, done at {done_at:.3} s",
            first.0
        );
        assert_mode_is_true(
            &events,
            "content",
            &done["answer_mode"],
            g,
            done["response"].as_str().unwrap(),
        );
        assert!(
            done["sources"].as_array().is_some_and(|s| !s.is_empty()),
            "{done}"
        );
    }
    server.stop().await;
}

/// The nice value of each of this process's threads, by thread name.
#[cfg(target_os = "linux")]
fn thread_nices() -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(t.path().join("comm")),
            std::fs::read_to_string(t.path().join("stat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        out.push((comm.trim().to_owned(), nice_in(&stat)));
    }
    out
}

/// The nice value in a thread's `/proc/.../stat` line (its 19th field; the thread's name,
/// in parentheses, may hold spaces).
#[cfg(target_os = "linux")]
fn nice_in(stat: &str) -> i64 {
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(16).unwrap().parse().unwrap()
}

/// Under load the models keep every core busy; their threads run nicer than the
/// server's (`model_nice`, default 10) so that short requests get a core at once.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_run_below_the_servers_own_priority() {
    // The test process's own priority (the server's), whatever it was started with.
    let own = nice_in(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(smollm2_config(&tmp.path().join("data"))).await;
    assert_eq!(Config::default().model_nice, 10);
    load(&server).await;
    // An answer the model generates: every model thread has run.
    let (status, body) = server
        .post_json(
            "/api/v1/query",
            &json!({"question": "How many days of leave do I get?"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let threads = thread_nices();
    let model = |name: &str| {
        name == "ragd-embedder" || name.starts_with("ragd-llm") || name.starts_with("ragd-compute")
    };
    let mut seen: Vec<&str> = threads
        .iter()
        .filter(|(n, _)| model(n))
        .map(|(n, _)| n.as_str())
        .collect();
    seen.sort();
    seen.dedup();
    // The embedder's thread and its compute pool, the LLM's thread and its pool's worker.
    for want in ["ragd-embedder", "ragd-compute-0", "ragd-llm", "ragd-llm-1"] {
        assert!(seen.contains(&want), "no {want} thread: {threads:?}");
    }
    for (name, nice) in &threads {
        if model(name) {
            assert_eq!(*nice, own.max(10), "{name}: {threads:?}");
        } else if name.starts_with("tokio-r") || name == "ragd-writer" {
            // The runtime's threads and the store's writer keep the server's priority.
            assert_eq!(*nice, own, "{name}: {threads:?}");
        }
    }
    server.stop().await;
}
