//! What ragd's remote backends add on top of the engine they use, in one run, against
//! llama.cpp's `llama-server` on loopback (run through `scripts/bench_remote.sh`, which
//! starts the servers):
//!
//! - `llm URL [rounds]`: the same chat prompts (a system message and ~450 tokens of
//!   passages and a question; a unique first line each, so the server's prompt cache
//!   never helps either side) sent to the server directly and through ragd's
//!   `RemoteGenerator`, alternating, greedy, 128 tokens. ragd's side includes its prompt
//!   fitting (the token counts it asks the server for) as `/query` and the chat do.
//!   Prints the medians of time to first token and of decode tokens/s, and the ratios.
//! - `embed URL [passages] [rounds]`: the peers' passages (`../shared/tools/passages.py`)
//!   embedded by the server alone (`/v1/embeddings`, 32 a request, one in flight), and
//!   ingested by an in-process ragd with `embed_url` at the server (one `.txt` file each
//!   through `/upload/bulk`, 50 a request); rounds alternate. Prints passages/s and the
//!   ratio.

#[path = "../benches/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ragd::config::{Config, EmbedApi};
use ragd::ml::llm::remote::{RemoteGenerator, RemoteLlmOptions};
use ragd::ml::llm::{ChatMessage, GenerateRequest, Generator, LlmEvent, Role};
use serde_json::{json, Value};

const SYSTEM: &str = "You answer questions from the numbered sources the user gives. \
Answer in one or two sentences and cite the source number in brackets.";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn messages(round: usize, n: usize, passages: &[String]) -> Vec<ChatMessage> {
    let context: String = passages
        .iter()
        .enumerate()
        .map(|(i, p)| format!("[{}] {p}\n\n", i + 1))
        .collect();
    vec![
        ChatMessage::new(Role::System, format!("Request {round}-{n}. {SYSTEM}")),
        ChatMessage::new(
            Role::User,
            format!(
                "Sources:\n\n{context}Question: What do the sources say about the first topic?"
            ),
        ),
    ]
}

/// Time to first token and decode tokens/s of one generation read from `pieces`.
struct Timed {
    first: Duration,
    decode: f64,
}

fn timed(started: Instant, arrivals: &[Instant]) -> Timed {
    let first = arrivals[0] - started;
    let span = (*arrivals.last().unwrap() - arrivals[0]).as_secs_f64();
    Timed {
        first,
        decode: (arrivals.len() - 1) as f64 / span.max(1e-9),
    }
}

async fn direct(client: &reqwest::Client, url: &str, messages: &[ChatMessage]) -> Timed {
    let msgs: Vec<Value> = messages
        .iter()
        .map(|m| json!({"role": m.role.as_str(), "content": m.content}))
        .collect();
    let body = json!({"messages": msgs, "stream": true, "max_tokens": 128, "temperature": 0.0,
        "seed": 1, "ignore_eos": true, "repeat_penalty": 1.1, "repeat_last_n": 64, "stream_options": {"include_usage": true}});
    let started = Instant::now();
    let r = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut sse = ragd::ml::remote::SseReader::new(r);
    let mut arrivals = Vec::new();
    while let Some(data) = sse.next_data().await.unwrap() {
        if data == "[DONE]" {
            break;
        }
        let v: Value = serde_json::from_str(&data).unwrap();
        if v.pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
        {
            arrivals.push(Instant::now());
        }
    }
    timed(started, &arrivals)
}

async fn through_ragd(generator: &Arc<RemoteGenerator>, messages: &[ChatMessage]) -> Timed {
    let started = Instant::now();
    let g = generator.clone();
    let system = messages[0].content.clone();
    let rest = messages[1..].to_vec();
    let fitted = tokio::task::spawn_blocking(move || {
        ragd::ml::llm::completion::fit_prompt(g.as_ref(), &system, &[], &rest, &[], 128).unwrap()
    })
    .await
    .unwrap();
    let mut request = GenerateRequest::new(fitted.prompt);
    request.params.max_tokens = fitted.room.min(128);
    request.params.temperature = 0.0;
    request.params.seed = 1;
    request.params.ignore_eos = true;
    let mut rx = generator.generate(request).unwrap();
    let mut arrivals = Vec::new();
    while let Some(e) = rx.recv().await {
        match e {
            LlmEvent::Token { text } if !text.is_empty() => arrivals.push(Instant::now()),
            LlmEvent::Token { .. } => {}
            LlmEvent::Done { .. } => break,
            LlmEvent::Error(e) => panic!("{e}"),
        }
    }
    timed(started, &arrivals)
}

async fn bench_llm(url: &str, rounds: usize) {
    let passages = common::peer_passages(6);
    let u = url.to_owned();
    let generator = Arc::new(
        tokio::task::spawn_blocking(move || {
            RemoteGenerator::connect(RemoteLlmOptions {
                url: u,
                api_key: None,
                model: String::new(),
                context_length: None,
                kind: None,
                parallel: 1,
                timeout: Duration::from_secs(120),
                local_tokenizer: None,
            })
            .unwrap()
        })
        .await
        .unwrap(),
    );
    let client = reqwest::Client::new();
    // Warm both paths once.
    direct(&client, url, &messages(0, 0, &passages)).await;
    through_ragd(&generator, &messages(0, 1, &passages)).await;
    let (mut d_first, mut d_rate, mut r_first, mut r_rate) = (vec![], vec![], vec![], vec![]);
    for round in 1..=rounds {
        for n in 0..4 {
            let m = messages(round, n, &passages);
            let (d, r) = if (round + n) % 2 == 0 {
                let d = direct(&client, url, &m).await;
                (
                    d,
                    through_ragd(&generator, &messages(round, n + 100, &passages)).await,
                )
            } else {
                let r = through_ragd(&generator, &messages(round, n + 100, &passages)).await;
                (direct(&client, url, &m).await, r)
            };
            d_first.push(d.first.as_secs_f64() * 1000.0);
            d_rate.push(d.decode);
            r_first.push(r.first.as_secs_f64() * 1000.0);
            r_rate.push(r.decode);
        }
    }
    // Pairs run back to back: the median of their ratios is what drift moves least.
    let first_ratio = median(r_first.iter().zip(&d_first).map(|(r, d)| r / d).collect());
    let rate_ratio = median(r_rate.iter().zip(&d_rate).map(|(r, d)| r / d).collect());
    let (df, dr, rf, rr) = (
        median(d_first),
        median(d_rate),
        median(r_first),
        median(r_rate),
    );
    println!(
        "| LLM (SmolLM2, {} generations each) | time to first token (ms) | decode tokens/s |",
        rounds * 4
    );
    println!("|---|---|---|");
    println!("| llama-server alone | {df:.1} | {dr:.1} |");
    println!("| ragd `RemoteGenerator` on it | {rf:.1} | {rr:.1} |");
    println!(
        "| ragd adds (ratio of the medians) | {:+.1}% | {:+.1}% |",
        (rf / df - 1.0) * 100.0,
        (rr / dr - 1.0) * 100.0
    );
    println!(
        "| ragd adds (median of the pairs' ratios) | {:+.1}% (target <= +5%) | {:+.1}% (target >= -2%) |",
        (first_ratio - 1.0) * 100.0,
        (rate_ratio - 1.0) * 100.0
    );
}

async fn engine_alone(client: &reqwest::Client, url: &str, passages: &[String]) -> f64 {
    let started = Instant::now();
    for group in passages.chunks(32) {
        let r: Value = client
            .post(format!("{url}/v1/embeddings"))
            .json(&json!({"input": group, "encoding_format": "float"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["data"].as_array().map(Vec::len), Some(group.len()), "{r}");
    }
    passages.len() as f64 / started.elapsed().as_secs_f64()
}

async fn ingest(url: &str, passages: &[String], round: usize) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let config = Config {
        host: "127.0.0.1".into(),
        port: 0,
        data_dir: tmp.path().join("data"),
        models_dir: common::embedder_dir().parent().unwrap().to_owned(),
        llm_model: "none".into(),
        embed_url: url.to_owned(),
        embed_api: EmbedApi::Openai,
        ..Config::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ragd::run(config, listener, async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    while client
        .get(format!("{base}/api/v1/health"))
        .send()
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let mut chunks = 0u64;
    for (g, group) in passages.chunks(50).enumerate() {
        let mut form = reqwest::multipart::Form::new();
        for (i, p) in group.iter().enumerate() {
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(format!("r{round} {p}").into_bytes())
                    .file_name(format!("p{round}-{g}-{i}.txt")),
            );
        }
        let r: Value = client
            .post(format!("{base}/api/v1/upload/bulk"))
            .multipart(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        chunks += r["total_chunks_added"].as_u64().unwrap_or(0);
    }
    let rate = passages.len() as f64 / started.elapsed().as_secs_f64();
    assert!(
        chunks >= passages.len() as u64,
        "every passage stored: {chunks}"
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    rate
}

async fn bench_embed(url: &str, n: usize, rounds: usize) {
    let passages = common::peer_passages(n);
    let client = reqwest::Client::new();
    engine_alone(&client, url, &passages[..64.min(n)]).await;
    let (mut alone, mut ragd) = (vec![], vec![]);
    for round in 0..rounds {
        if round % 2 == 0 {
            alone.push(engine_alone(&client, url, &passages).await);
            ragd.push(ingest(url, &passages, round).await);
        } else {
            ragd.push(ingest(url, &passages, round).await);
            alone.push(engine_alone(&client, url, &passages).await);
        }
        println!(
            "round {round}: llama-server alone {:.1}, ragd ingestion {:.1} passages/s",
            alone[round], ragd[round]
        );
    }
    let (a, r) = (median(alone), median(ragd));
    println!("| embeddings ({n} passages, {rounds} rounds) | passages/s |");
    println!("|---|---|");
    println!("| llama-server alone (`/v1/embeddings`, 32 a request) | {a:.1} |");
    println!("| ragd ingestion with `embed_url` on it (`/upload/bulk`) | {r:.1} |");
    println!("| ratio | {:.2} (target >= 0.9) |", r / a);
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    match args.get(1).map(String::as_str) {
        Some("llm") => bench_llm(&args[2], arg(3, 5)).await,
        Some("embed") => bench_embed(&args[2], arg(3, 2000), arg(4, 3)).await,
        _ => eprintln!("usage: bench_remote llm URL [rounds] | embed URL [passages] [rounds]"),
    }
}
