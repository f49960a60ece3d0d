//! ragd under load, from outside as users' load comes: starts `ragd serve` on a temp data
//! directory, seeds a corpus, then runs N clients for S seconds, each on its own
//! keep-alive connection, over a mix of `/search`, `/query`, uploads, listing, deletes by
//! source and the assistant's chat and conversation search (the assistant as one of a few
//! users), while a prober checks `/health`. Prints requests/s and p50/p95/p99 per
//! operation and every non-2xx answer by status, then verifies that every acknowledged
//! upload is listed and searchable and every acknowledged delete is gone.
//!
//! Exits non-zero on any 5xx, any request without an answer (connection error or
//! timeout), a failed health check, a lost or resurrected document, or, with
//! `--max-search-p99-ms`, a slower `/search`. `scripts/load_test.sh` builds and runs it.

mod mix;
mod server;
mod stats;
mod verify;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Parser;

use mix::{Client, Fate, Op, Rng};
use server::{Launch, Server};
use stats::Recorder;

#[derive(Parser)]
#[command(about = "Load test of a ragd server (see scripts/load_test.sh)")]
struct Args {
    /// Concurrent clients, each on its own keep-alive connection.
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// The ragd binary to start.
    #[arg(long, default_value = "target/release/ragd")]
    server: PathBuf,
    /// Models folder (the embedder must be there).
    #[arg(long, default_value = "models")]
    models_dir: PathBuf,
    /// Documents uploaded before the load starts (50 per bulk request).
    #[arg(long, default_value_t = 200)]
    corpus: usize,
    /// Assistant users the clients sign in as (round robin).
    #[arg(long, default_value_t = 10)]
    users: usize,
    /// Per-request timeout in seconds; a request past it counts as a connection error.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Fail when `/search`'s p99 (2xx answers) exceeds this many milliseconds.
    #[arg(long)]
    max_search_p99_ms: Option<f64>,
    /// Keep the data directory (and its server.log) and print where it is.
    #[arg(long)]
    keep: bool,
    /// Extra server settings as KEY=VALUE (environment, e.g. RAGD_SEARCH_THREADS=4).
    #[arg(long = "env", value_parser = parse_kv)]
    env: Vec<(String, String)>,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tmp = tempfile::Builder::new().prefix("ragd-load-").tempdir()?;
    let data = tmp.path().to_owned();
    let bin = std::fs::canonicalize(&args.server)
        .with_context(|| format!("no server binary at {}", args.server.display()))?;
    let models = std::fs::canonicalize(&args.models_dir)
        .with_context(|| format!("no models folder at {}", args.models_dir.display()))?;

    let users = server::create_users(&bin, &data, args.users.clamp(1, args.clients.max(1)))?;
    let srv = Server::start(&Launch {
        bin: &bin,
        data_dir: &data,
        models_dir: &models,
        env: &args.env,
    })?;
    let seeded = Instant::now();
    let mut acknowledged = seed(&srv.base, args.corpus).await?;
    println!(
        "ragd load test: {} clients x {} s against {} ({} seed documents uploaded in {:.1} s)",
        args.clients,
        args.seconds,
        bin.display(),
        acknowledged.len(),
        seeded.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let cpu_before = srv.cpu_seconds();
    let until = started + Duration::from_secs(args.seconds);
    let prober = tokio::spawn(mix::probe_health(
        srv.base.clone(),
        until,
        Duration::from_millis(250),
    ));
    let timeout = Duration::from_secs(args.timeout);
    let clients: Vec<_> = (0..args.clients)
        .map(|i| {
            let c = Client::new(i, &srv.base, users[i % users.len()].clone(), timeout);
            tokio::spawn(c.run(until))
        })
        .collect();
    let mut rec = Recorder::default();
    let mut anomalies = Vec::new();
    let mut ledgers = Vec::new();
    for c in clients {
        let c = c.await?;
        rec.merge(c.rec);
        anomalies.extend(c.anomalies);
        ledgers.push(c.ledger);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_used = srv.cpu_seconds().zip(cpu_before).map(|(a, b)| a - b);
    let health = prober.await?;
    rec.merge(health.clone());
    acknowledged.extend(mix::merge_ledgers(ledgers));

    println!("(latency percentiles over 2xx answers; non-2xx lists every other answer by status, and requests without one; \"rate limit\": 429s that were a user's rate limit, not the server shedding load)");
    stats::print_table(&rec, elapsed);
    let verdict = verify::check(&srv.base, &acknowledged).await?;
    let errors = srv.error_lines();
    println!(
        "documents: {} acknowledged uploads still stored, {} acknowledged deletes; lost {}, resurrected {}; indexes agree with the store: {}",
        verdict.stored,
        verdict.deleted,
        verdict.lost.len(),
        verdict.resurrected.len(),
        verdict.indexes_agree
    );
    println!(
        "5xx answers: {}; 429 answers: {}; requests without an answer: {}; server ERROR log lines: {}; server peak RSS: {}",
        rec.server_errors(),
        rec.with_status(429),
        rec.transport_failures(),
        errors.len(),
        srv.peak_rss_mib()
            .map_or_else(|| "?".into(), |m| format!("{m:.0} MiB"))
    );
    if let Some(cpu) = cpu_used {
        // On a shared machine the server may get less than every core: this says how much
        // it had, to read the latencies by.
        println!(
            "server CPU: {cpu:.1} s in {elapsed:.1} s of load ({:.2} of {} cores busy on average)",
            cpu / elapsed,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
    }
    for line in verdict
        .lost
        .iter()
        .map(|l| format!("lost: {l}"))
        .chain(
            verdict
                .resurrected
                .iter()
                .map(|r| format!("resurrected: {r}")),
        )
        .chain(anomalies.iter().map(|a| format!("anomaly: {a}")))
        .chain(errors.iter().take(10).map(|e| format!("server error: {e}")))
        .take(40)
    {
        println!("  {line}");
    }
    if args.keep {
        let kept = tmp.keep();
        println!("kept {} (server log: server.log)", kept.display());
    }

    let mut failed = Vec::new();
    if rec.server_errors() > 0 {
        failed.push("5xx answers".to_owned());
    }
    if rec.transport_failures() > 0 {
        failed.push("requests without an answer".to_owned());
    }
    if health.server_errors() + health.transport_failures() > 0
        || health
            .ops
            .get(&Op::Health)
            .is_none_or(|s| s.ok_latencies.is_empty())
    {
        failed.push("/health did not always answer".to_owned());
    }
    if !verdict.lost.is_empty() || !verdict.resurrected.is_empty() || !anomalies.is_empty() {
        failed.push("acknowledged writes not honoured".to_owned());
    }
    if !verdict.indexes_agree {
        failed.push("indexes disagree with the store".to_owned());
    }
    if let Some(max) = args.max_search_p99_ms {
        match rec.percentile_ms(Op::Search, 99.0) {
            Some(p99) if p99 <= max => {}
            p99 => failed.push(format!("/search p99 {p99:?} ms above {max} ms")),
        }
    }
    if failed.is_empty() {
        println!("PASS");
        Ok(())
    } else {
        bail!("FAIL: {}", failed.join("; "))
    }
}

/// Uploads `n` documents through `/upload/bulk`, 50 per request; returns them as
/// acknowledged and stored.
async fn seed(
    base: &str,
    n: usize,
) -> anyhow::Result<std::collections::BTreeMap<String, (String, Fate)>> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let mut rng = Rng::new(0x5eed);
    let mut out = std::collections::BTreeMap::new();
    let ids: Vec<usize> = (0..n).collect();
    for batch in ids.chunks(50) {
        let mut form = reqwest::multipart::Form::new();
        for &i in batch {
            let name = format!("seed-{i}.md");
            let marker = mix::marker(99_999, i);
            let text = mix::document(&mut rng, &format!("Seed note {i}"), &marker);
            form = form.part(
                "files",
                reqwest::multipart::Part::bytes(text.into_bytes()).file_name(name.clone()),
            );
            out.insert(name, (marker, Fate::Stored));
        }
        let r = http
            .post(format!("{base}/api/v1/upload/bulk"))
            .multipart(form)
            .send()
            .await?;
        let status = r.status();
        let body: serde_json::Value = r.json().await?;
        if !status.is_success() || body["errors"].as_array().is_some_and(|e| !e.is_empty()) {
            bail!("seeding failed ({status}): {body}");
        }
    }
    Ok(out)
}
