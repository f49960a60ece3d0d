//! The assistant's evaluation, from outside as a user sees it: starts `ragd serve` on a
//! temp data directory with the configured LLM (the real SmolLM2 file by default, or
//! `--llm none` for extractive answers), uploads the documents of `docs.json`, then
//!
//! - sends every message of `tool_cases.json` to `chat_with_tools` (auto-executing, each in
//!   a new conversation) and scores tool selection (the right tool, or rightly none),
//!   schema-valid calls, arguments where the case says what they must be, and high-risk
//!   calls held for confirmation (with a check that every seeded document is still there);
//! - asks every question of `questions.json` through `/query` and through the chat, and
//!   scores answer correctness and citations on the answerable ones, refusal on the
//!   unanswerable ones, and the share of the answers' sentences that the seeded documents
//!   do not support (judged here, independently of the server's own grounding check).
//!
//! Prints one line per case and a summary; `--json FILE` writes every result.
//! `scripts/eval_assistant.sh` builds and runs it.

mod score;
#[path = "../load_test/server.rs"]
#[allow(dead_code)]
mod server;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;
use serde::Deserialize;
use serde_json::{json, Value};

use server::{Launch, Server};

#[derive(Parser)]
#[command(about = "Evaluation of ragd's assistant (see scripts/eval_assistant.sh)")]
struct Args {
    /// The ragd binary to start.
    #[arg(long, default_value = "target/debug/ragd")]
    server: PathBuf,
    /// Models folder (the embedder, and the LLM unless --llm says otherwise).
    #[arg(long, default_value = "models")]
    models_dir: PathBuf,
    /// The LLM: a GGUF file, or `none` for extractive answers. Default: the server's
    /// default (the SmolLM2 file installed by scripts/setup.sh).
    #[arg(long)]
    llm: Option<String>,
    /// Only the tool cases, or only the questions.
    #[arg(long, value_parser = ["tools", "questions"])]
    only: Option<String>,
    /// Skip asking the questions through the chat (only `/query`).
    #[arg(long)]
    no_chat_questions: bool,
    /// Write every result to this file as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep the data directory (and its server.log) and print where it is.
    #[arg(long)]
    keep: bool,
    /// The shared fixtures folder (the third-party PDF and DOCX documents of `docs.json`;
    /// without it their questions are skipped, and the summary says so).
    #[arg(long, default_value = "../shared/fixtures")]
    fixtures: PathBuf,
}

#[derive(Deserialize)]
struct Doc {
    name: String,
    /// The document's text, or...
    #[serde(default)]
    text: String,
    /// ...a file under the fixtures folder, uploaded as it is...
    fixture: Option<String>,
    /// ...with a reference conversion (under the fixtures folder) to judge support by.
    corpus: Option<String>,
}

#[derive(Deserialize, Clone)]
struct ToolCase {
    message: String,
    expect: Vec<String>,
    #[serde(default)]
    args: HashMap<String, Value>,
    /// The calculator's expected result.
    result: Option<f64>,
    /// Patterns the answer must hold (for knowledge-base questions).
    #[serde(default)]
    answer: Vec<String>,
}

#[derive(Deserialize, Clone)]
struct Question {
    question: String,
    #[serde(default)]
    answer: Vec<String>,
    source: Option<String>,
    #[serde(default)]
    unanswerable: bool,
    /// Characters of unrelated background put before the question (a long message with
    /// the question at its end)...
    #[serde(default)]
    pad_before: usize,
    /// ...or after it.
    #[serde(default)]
    pad_after: usize,
}

impl Question {
    /// The message as sent: the question with its background.
    fn message(&self) -> String {
        match (self.pad_before, self.pad_after) {
            (0, 0) => self.question.clone(),
            (b, a) => [background(b), self.question.clone(), background(a)]
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// `chars` characters (or a few more) of a message's background that holds no question
/// and no fact of the documents.
fn background(chars: usize) -> String {
    const PARAGRAPH: &str = "This week the design team and I went through the drafts of \
the quarterly report again, moved two meetings to Thursday and agreed on the colours of \
the charts. The printer on the second floor was repaired, and the new chairs arrived on \
Monday afternoon. ";
    let mut s = String::new();
    while s.chars().count() < chars {
        s.push_str(PARAGRAPH);
    }
    s
}

/// A signed-in HTTP client of the server.
struct Api {
    http: reqwest::Client,
    base: String,
    auth: String,
}

impl Api {
    async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Authorization", format!("token {}", self.auth))
            .json(body)
            .send()
            .await?;
        Ok(r.json().await?)
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("Authorization", format!("token {}", self.auth))
            .send()
            .await?;
        Ok(r.json().await?)
    }

    async fn upload(&self, name: &str, text: &str, asynchronous: bool) -> anyhow::Result<Value> {
        self.upload_bytes(name, text.as_bytes().to_vec(), asynchronous)
            .await
    }

    async fn upload_bytes(
        &self,
        name: &str,
        bytes: Vec<u8>,
        asynchronous: bool,
    ) -> anyhow::Result<Value> {
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()),
        );
        let path = if asynchronous {
            "/api/v1/upload/async"
        } else {
            "/api/v1/upload"
        };
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .multipart(form)
            .send()
            .await?;
        let status = r.status();
        let body: Value = r.json().await?;
        if !status.is_success() {
            bail!("upload of {name} failed: {status} {body}");
        }
        Ok(body)
    }

    async fn chat(&self, message: &str) -> anyhow::Result<Value> {
        let m = self
            .post(
                "/api/method/assistant.api.chat_with_tools",
                &json!({"user_message": message, "auto_execute_tools": true}),
            )
            .await?;
        Ok(m["message"].clone())
    }
}

/// Every document id and source, for the check that nothing was deleted.
async fn stored(api: &Api) -> anyhow::Result<Vec<(String, String, u64)>> {
    let mut out = Vec::new();
    for page in 1.. {
        let r = api
            .get(&format!("/api/v1/documents?page={page}&page_size=100"))
            .await?;
        let docs = r["documents"].as_array().cloned().unwrap_or_default();
        for d in &docs {
            out.push((
                d["id"].as_str().unwrap_or_default().to_owned(),
                d["metadata"]["source"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                d["metadata"]["chunk_index"].as_u64().unwrap_or(0),
            ));
        }
        if docs.len() < 100 {
            break;
        }
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut docs: Vec<Doc> = serde_json::from_str(include_str!("docs.json"))?;
    let mut tool_cases: Vec<ToolCase> = serde_json::from_str(include_str!("tool_cases.json"))?;
    let mut questions: Vec<Question> = serde_json::from_str(include_str!("questions.json"))?;

    let tmp = tempfile::Builder::new().prefix("ragd-eval-").tempdir()?;
    let data = tmp.path().to_owned();
    let bin = std::fs::canonicalize(&args.server)
        .with_context(|| format!("no server binary at {}", args.server.display()))?;
    let models = std::fs::canonicalize(&args.models_dir)
        .with_context(|| format!("no models folder at {}", args.models_dir.display()))?;
    let auth = server::create_user(&bin, &data, "eval@example.com", true)?;
    // The server's own default LLM unless told otherwise (the launcher's default is none).
    let llm = match &args.llm {
        Some(l) => l.clone(),
        None => String::new(),
    };
    let env = vec![
        ("RAGD_LLM_MODEL".to_owned(), llm),
        // The cases run one after another; no rate limit should decide a result.
        ("RAGD_RATE_LIMIT_CHAT".to_owned(), "100000".to_owned()),
        ("RAGD_RATE_LIMIT_TOOLS".to_owned(), "100000".to_owned()),
    ];
    let srv = Server::start(&Launch {
        bin: &bin,
        data_dir: &data,
        models_dir: &models,
        env: &env,
    })?;
    let api = Api {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(600))
            .build()?,
        base: srv.base.clone(),
        auth,
    };
    let ready = api.get("/api/v1/health/ready").await?;
    let llm_line = ready["components"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "llm"))
        .map(|c| c["detail"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    println!(
        "machine: {} cores, load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("llm: {llm_line}");

    // Fixture documents are read from the shared folder; without it they and their
    // questions are left out (and the summary says how many).
    let mut missing = Vec::new();
    for d in &mut docs {
        let Some(fixture) = &d.fixture else {
            continue;
        };
        let path = args.fixtures.join(fixture);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let corpus = d.corpus.as_ref().map(|c| args.fixtures.join(c));
                d.text = match corpus {
                    Some(c) => std::fs::read_to_string(&c)
                        .with_context(|| format!("no reference conversion at {}", c.display()))?,
                    None => String::from_utf8_lossy(&bytes).into_owned(),
                };
                let r = api.upload_bytes(&d.name, bytes, false).await?;
                if r["success"] != true {
                    bail!("uploading {} failed: {r}", path.display());
                }
            }
            Err(e) => {
                println!(
                    "fixture {} not readable ({e}): its questions are skipped",
                    path.display()
                );
                missing.push(d.name.clone());
            }
        }
    }
    docs.retain(|d| !missing.contains(&d.name));
    let skipped = questions.len();
    questions.retain(|q| q.source.as_ref().is_none_or(|s| !missing.contains(s)));
    let skipped = skipped - questions.len();
    for d in docs.iter().filter(|d| d.fixture.is_none()) {
        api.upload(&d.name, &d.text, false).await?;
    }
    // One background task for the task tools to find.
    let task = api
        .upload(
            "notes-task.md",
            "# Notes\n\nThe canteen menu changes weekly.",
            true,
        )
        .await?;
    let task_id = task["task_id"].as_str().unwrap_or_default().to_owned();
    let before = stored(&api).await?;
    let first_chunk = |source: &str| {
        before
            .iter()
            .find(|(_, s, i)| s == source && *i == 0)
            .map(|(id, _, _)| id.clone())
            .unwrap_or_default()
    };
    let fill = |s: &str| {
        let mut s = s.replace("{task_id}", &task_id);
        while let Some(p) = s.find("{doc_id:") {
            let end = s[p..].find('}').map_or(s.len(), |e| p + e);
            let id = first_chunk(&s[p + 8..end]);
            s.replace_range(p..=end.min(s.len() - 1), &id);
        }
        s
    };
    for c in &mut tool_cases {
        c.message = fill(&c.message);
        for v in c.args.values_mut() {
            if let Some(Value::String(e)) = v.get_mut("equals") {
                *e = fill(e);
            }
        }
    }
    let tools = api
        .get("/api/method/assistant.api.get_available_tools")
        .await?;
    let high_risk: Vec<String> = tools["message"]["data"]["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter(|t| t["risk"] == "high")
                .filter_map(|t| t["tool_name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();

    let mut report = json!({"llm": llm_line});
    let started = Instant::now();
    if args.only.as_deref() != Some("questions") {
        let tools = run_tool_cases(&api, &tool_cases, &high_risk).await?;
        let after = stored(&api).await?;
        let lost: Vec<&(String, String, u64)> =
            before.iter().filter(|d| !after.contains(d)).collect();
        println!(
            "data after the tool cases: {} of {} seeded documents still stored{}",
            before.len() - lost.len(),
            before.len(),
            if lost.is_empty() {
                String::new()
            } else {
                format!(" (LOST: {lost:?})")
            }
        );
        report["tools"] = tools;
        report["tools"]["summary"]["seeded_documents_kept"] = json!(lost.is_empty());
    }
    if args.only.as_deref() != Some("tools") {
        let corpus: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
        report["query"] = run_questions(&api, &questions, &corpus, Via::Query).await?;
        report["query"]["summary"]["questions_skipped"] = json!(skipped);
        if !args.no_chat_questions {
            report["chat"] = run_questions(&api, &questions, &corpus, Via::Chat).await?;
            report["chat"]["summary"]["questions_skipped"] = json!(skipped);
        }
    }
    println!("\nsummary ({:.0} s)", started.elapsed().as_secs_f64());
    for part in ["tools", "query", "chat"] {
        if let Some(s) = report[part].get("summary") {
            println!("  {part:6} {s}");
        }
    }
    let errors = srv.error_lines();
    if !errors.is_empty() {
        println!("server ERROR log lines: {}", errors.len());
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("results written to {}", path.display());
    }
    if args.keep {
        let kept = tmp.keep();
        println!("kept {} (server log: server.log)", kept.display());
    }
    Ok(())
}

async fn run_tool_cases(
    api: &Api,
    cases: &[ToolCase],
    high_risk: &[String],
) -> anyhow::Result<Value> {
    println!("\n(a-c) tool selection: {} messages", cases.len());
    let (mut right, mut calls, mut valid, mut args_checked, mut args_right) = (0, 0, 0, 0, 0);
    let (mut risky, mut held, mut answers, mut answers_right) = (0, 0, 0, 0);
    let mut prompt_tokens = Vec::new();
    let mut rows = Vec::new();
    for case in cases {
        let t = Instant::now();
        let m = api.chat(&case.message).await?;
        let secs = t.elapsed().as_secs_f64();
        let data = &m["data"];
        if m["success"] != true {
            println!("  ERROR {}: {m}", case.message);
        }
        let first = data["tool_calls"]
            .as_array()
            .and_then(|c| c.first())
            .cloned();
        let chosen = first
            .as_ref()
            .and_then(|c| c["tool_name"].as_str())
            .unwrap_or("none")
            .to_owned();
        let ok = case.expect.contains(&chosen);
        right += ok as usize;
        let mut notes = Vec::new();
        if let Some(call) = &first {
            calls += 1;
            let invalid = call["status"] == "failed"
                && call["error"].as_str().is_some_and(|e| e.contains("params"));
            valid += (!invalid) as usize;
            if invalid {
                notes.push(format!("invalid: {}", call["error"]));
            }
            if high_risk.contains(&chosen) {
                risky += 1;
                let h = call["status"] == "pending_confirmation" && call["action_id"].is_string();
                held += h as usize;
                if !h {
                    notes.push("HIGH-RISK CALL NOT HELD".into());
                }
            }
        }
        // Arguments, where the case says what they must be (only for the right tool).
        if ok && chosen != "none" {
            let params = first
                .as_ref()
                .map(|c| c["params"].clone())
                .unwrap_or_default();
            for (name, want) in &case.args {
                if !score::argument_applies(&chosen, name) {
                    continue;
                }
                args_checked += 1;
                let good = score::argument_matches(&params[name.as_str()], want);
                args_right += good as usize;
                if !good {
                    notes.push(format!("{name}={} (want {want})", params[name.as_str()]));
                }
            }
            if let Some(expected) = case.result {
                args_checked += 1;
                let got = first.as_ref().and_then(|c| c["result"]["result"].as_f64());
                let good = got.is_some_and(|g| (g - expected).abs() < 1e-6);
                args_right += good as usize;
                if !good {
                    notes.push(format!("result {got:?} (want {expected}) from {}", params));
                }
            }
        }
        if !case.answer.is_empty() {
            answers += 1;
            let text = data["response"].as_str().unwrap_or_default();
            let good = score::holds_all(text, &case.answer);
            answers_right += good as usize;
            if !good {
                notes.push(format!("answer: {text:?}"));
            }
        }
        let tokens = m["tokens_used"]["input"].as_u64().unwrap_or(0);
        if tokens > 0 {
            prompt_tokens.push(tokens);
        }
        println!(
            "  {} {:<22} {:>5.1}s {:>5} tok  {}{}",
            if ok { "ok  " } else { "MISS" },
            chosen,
            secs,
            tokens,
            case.message.chars().take(70).collect::<String>(),
            if notes.is_empty() {
                String::new()
            } else {
                format!("  [{}]", notes.join("; "))
            }
        );
        rows.push(json!({
            "message": case.message, "expect": case.expect, "chosen": chosen, "right": ok,
            "call": first, "response": data["response"], "seconds": secs,
            "prompt_tokens": tokens, "notes": notes,
        }));
    }
    prompt_tokens.sort_unstable();
    let ratio = |a: usize, b: usize| {
        if b == 0 {
            Value::Null
        } else {
            json!((a as f64 / b as f64 * 1000.0).round() / 1000.0)
        }
    };
    let summary = json!({
        "messages": cases.len(),
        "tool_selection": ratio(right, cases.len()),
        "schema_valid_calls": ratio(valid, calls),
        "calls": calls,
        "arguments_correct": ratio(args_right, args_checked),
        "arguments_checked": args_checked,
        "high_risk_held": ratio(held, risky),
        "high_risk_calls": risky,
        "kb_answers_correct": ratio(answers_right, answers),
        "prompt_tokens_median": prompt_tokens.get(prompt_tokens.len() / 2),
        "prompt_tokens_max": prompt_tokens.last(),
    });
    Ok(json!({"summary": summary, "cases": rows}))
}

#[derive(Clone, Copy, PartialEq)]
enum Via {
    Query,
    Chat,
}

async fn run_questions(
    api: &Api,
    questions: &[Question],
    corpus: &[String],
    via: Via,
) -> anyhow::Result<Value> {
    let name = if via == Via::Query { "/query" } else { "chat" };
    println!("\n(d) questions through {name}: {}", questions.len());
    let (mut answerable, mut correct, mut cited_right, mut unanswerable, mut refused) =
        (0, 0, 0, 0, 0);
    let (mut sentences, mut unsupported) = (0, 0);
    let mut rows = Vec::new();
    for q in questions {
        let t = Instant::now();
        let (answer, sources, grounding) = match via {
            Via::Query => {
                let r = api
                    .post(
                        "/api/v1/query",
                        &json!({"question": q.message(), "top_k": 3}),
                    )
                    .await?;
                (
                    r["answer"].clone(),
                    r["sources"].clone(),
                    r["grounding"].clone(),
                )
            }
            Via::Chat => {
                let m = api.chat(&q.message()).await?;
                let d = &m["data"];
                // An ask_knowledge_base call carries its own sources.
                let sources = d["tool_calls"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["tool_name"] == "ask_knowledge_base"))
                    .map(|c| c["result"]["sources"].clone())
                    .unwrap_or_else(|| d["sources"].clone());
                (d["response"].clone(), sources, d["grounding"].clone())
            }
        };
        let secs = t.elapsed().as_secs_f64();
        let text = answer.as_str().unwrap_or_default().to_owned();
        let refusal = score::is_refusal(&text);
        let claims = score::claims(&text);
        let unsupported_here: Vec<&String> = claims
            .iter()
            .filter(|c| !score::supported_by(c, corpus))
            .collect();
        sentences += claims.len();
        unsupported += unsupported_here.len();
        let verdict = if q.unanswerable {
            unanswerable += 1;
            refused += refusal as usize;
            if refusal {
                "refused"
            } else {
                "ANSWERED"
            }
        } else {
            answerable += 1;
            let good = !refusal && score::holds_all(&text, &q.answer);
            correct += good as usize;
            let cites = q
                .source
                .as_deref()
                .is_some_and(|s| score::cites_source(&text, &q.answer, &sources, s));
            cited_right += (good && cites) as usize;
            match (good, cites) {
                (true, true) => "right",
                (true, false) => "right, BAD CITATION",
                _ => "WRONG",
            }
        };
        let asked = match q.pad_before + q.pad_after {
            0 => q.question.clone(),
            n => format!("[+{n} chars of background] {}", q.question),
        };
        println!(
            "  {:<20} {:>5.1}s  {}  -> {}{}",
            verdict,
            secs,
            asked,
            text.chars()
                .take(160)
                .collect::<String>()
                .replace('\n', " "),
            if unsupported_here.is_empty() {
                String::new()
            } else {
                format!("  [unsupported: {unsupported_here:?}]")
            }
        );
        rows.push(json!({
            "question": q.question, "unanswerable": q.unanswerable, "answer": text,
            "verdict": verdict, "seconds": secs, "sources": sources, "grounding": grounding,
            "unsupported": unsupported_here,
        }));
    }
    let ratio = |a: usize, b: usize| {
        if b == 0 {
            Value::Null
        } else {
            json!((a as f64 / b as f64 * 1000.0).round() / 1000.0)
        }
    };
    let summary = json!({
        "questions": questions.len(),
        "answer_correctness": ratio(correct, answerable),
        "citation_correctness": ratio(cited_right, correct),
        "refusal": ratio(refused, unanswerable),
        "unsupported_sentences": ratio(unsupported, sentences),
        "sentences": sentences,
    });
    Ok(json!({"summary": summary, "cases": rows}))
}
