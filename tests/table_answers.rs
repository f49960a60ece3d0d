//! Questions about tables are answered from rows that name their columns: the CSV
//! manager question ("Who manages the Lisbon office and how many people work there?")
//! is answered with "Marta Sousa" and "130", from the row quoted as a sentence, not raw
//! cells, without an LLM and with the real SmolLM2 at its defaults; so is the berries
//! question of the shared DOCX fixture (a table whose first column has no header). The
//! PDF fact the chat used to refuse ("When was the IBM MT/ST introduced?") is found in
//! chat, and a question at the end of a 4,000-character message is answered by its
//! question part.

mod common;

use std::path::{Path, PathBuf};

use common::{create_user, test_config, Auth, TestServer};
use ragd::config::Config;
use reqwest::Method;
use serde_json::{json, Value};

/// The server's default LLM (the SmolLM2 file in models/) on two threads.
fn smollm2(data: &Path) -> Config {
    Config {
        llm_model: Config::default().llm_model,
        llm_threads: Some(2),
        ..test_config(data)
    }
}

/// A file of the shared docling fixtures (`../shared/fixtures`, beside the repository).
fn fixture(path: &str) -> (String, Vec<u8>) {
    let full: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/docling/tests/data")
        .join(path);
    let bytes = std::fs::read(&full).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; this test needs the shared fixtures, expected beside the repository \
             in ../shared/fixtures",
            full.display()
        )
    });
    let name = full.file_name().unwrap().to_string_lossy().into_owned();
    (name, bytes)
}

fn no_raw_cells(answer: &str) {
    assert!(!answer.contains(" | "), "raw cells: {answer}");
}

/// The manager question's answer (returned): the name and the head count, from the
/// CSV, without raw cells.
fn answered_from_the_row(r: &Value) -> &str {
    let answer = r["answer"].as_str().unwrap();
    assert!(
        answer.contains("Marta Sousa") && answer.contains("130"),
        "{r}"
    );
    no_raw_cells(answer);
    assert_eq!(r["sources"][0]["source"], "offices.csv", "{r}");
    answer
}

const OFFICES: &str = "office,city,country,staff,manager,since
North,Oslo,Norway,42,Ola Nordmann,2019
South,Lisbon,Portugal,130,Marta Sousa,2015
East,Warsaw,Poland,87,Piotr Nowak,2017
West,Dublin,Ireland,64,Aoife Byrne,2020
Central,Vienna,Austria,55,Lena Huber,2012
";

const OTHER: &str = "# Travel policy\n\nEmployees book travel through the internal portal. \
Economy class is used for flights under six hours. Receipts are submitted within thirty days.\n";

async fn ask(s: &TestServer) -> serde_json::Value {
    let (st, r) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "Who manages the Lisbon office and how many people work there?"}),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    r
}

async fn load(s: &TestServer) {
    for (name, text) in [("offices.csv", OFFICES), ("travel.md", OTHER)] {
        let (st, r) = s.upload(name, text.as_bytes()).await;
        assert_eq!(st, 200, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_manager_question_is_answered_from_its_row() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start(&tmp.path().join("data")).await;
    load(&s).await;
    let r = ask(&s).await;
    let answer = answered_from_the_row(&r);
    assert!(answer.contains("manager: Marta Sousa"), "{answer}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_csv_manager_question_is_answered_with_smollm2() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(smollm2(&tmp.path().join("data"))).await;
    load(&s).await;
    let r = ask(&s).await;
    answered_from_the_row(&r);
    assert_ne!(r["grounding"]["outcome"], "not_in_sources", "{r}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_berries_question_is_answered_in_a_sentence() {
    let tmp = tempfile::tempdir().unwrap();
    let s = TestServer::start_with(smollm2(&tmp.path().join("data"))).await;
    let (name, bytes) = fixture("docx/sources/word_sample.docx");
    let (st, r) = s.upload(&name, &bytes).await;
    assert_eq!(st, 200, "{r}");
    let (st, r) = s
        .post_json(
            "/api/v1/query",
            &json!({"question": "How many calories are in a portion of berries?"}),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    let answer = r["answer"].as_str().unwrap();
    // The row as a sentence: each value named by its column.
    assert!(answer.contains("Calories per portion: 150"), "{r}");
    assert!(answer.contains("Berries"), "{r}");
    no_raw_cells(answer);
    s.stop().await;
}

async fn chat(s: &TestServer, auth: &Auth, message: &str) -> Value {
    let r = s
        .call(
            Method::POST,
            "assistant.api.chat_with_tools",
            &json!({"user_message": message}),
            auth,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["message"]["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pdf_fact_is_found_in_chat_and_a_long_message_is_answered_by_its_question() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let token = create_user(&data, "ana@example.com", "password-ana", false).await;
    let auth = Auth::Token(token);
    let s = TestServer::start_with(smollm2(&data)).await;
    let (name, bytes) = fixture("pdf/sources/multi_page.pdf");
    let (st, r) = s.upload(&name, &bytes).await;
    assert_eq!(st, 200, "{r}");
    let d = chat(&s, &auth, "When was the IBM MT/ST introduced?").await;
    let reply = d["response"].as_str().unwrap_or_default();
    assert!(reply.contains("1964"), "{d}");
    assert!(!reply.contains("do not say"), "{d}");
    // The question after 4,000 characters of background, through /query and chat.
    let background = "This week the design team and I went through the drafts of the \
        quarterly report again and moved two meetings to Thursday. "
        .repeat(40);
    let long = format!("{background}Anyway: when was the IBM MT/ST introduced? Thanks, Sam");
    assert!(long.chars().count() > 4000);
    let (st, r) = s
        .post_json("/api/v1/query", &json!({"question": long}))
        .await;
    assert_eq!(st, 200, "{r}");
    assert!(r["answer"].as_str().unwrap().contains("1964"), "{r}");
    assert_eq!(
        r["question"],
        long.as_str(),
        "the question is returned as asked"
    );
    let d = chat(&s, &auth, &long).await;
    let reply = d["response"].as_str().unwrap_or_default();
    assert!(reply.contains("1964"), "{d}");
    s.stop().await;
}
