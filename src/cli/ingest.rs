//! `ragd ingest PATH...`: files, folders, globs and ZIPs into the knowledge base, through
//! a running server or on a data directory, with a progress bar and a summary; only what
//! changed since the last run is sent, and an interrupted run resumes.

mod state;
mod target;
mod walk;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt as _;
use serde::Serialize;

pub use state::default_path as default_state_path;
use state::{IngestState, Seen};
use target::Outcome;
pub use target::Target;

pub mod watch;
use walk::{Filters, Found};

/// Files per request (as `scripts/bench_ingest.sh` sends them to `/upload/bulk`).
const BATCH_FILES: usize = 50;
/// Bytes per request, at most (one larger file goes alone).
const BATCH_BYTES: usize = 32 << 20;
/// Requests in flight: one is parsed and embedded while the next is read and sent.
const IN_FLIGHT: usize = 2;

/// What `ragd ingest` was asked to do.
pub struct Request {
    pub paths: Vec<String>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub section: String,
    /// Where the state of earlier runs is kept.
    pub state_file: PathBuf,
    /// Names the knowledge base in the state file.
    pub target_id: String,
    pub json: bool,
    /// Delete the sources of recorded files that no longer exist (watch mode).
    pub delete_missing: bool,
}

/// The counts of a run.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub added: usize,
    pub updated: usize,
    pub duplicates: usize,
    pub unchanged: usize,
    /// Sources deleted because their file is gone (watch mode).
    pub deleted: usize,
    pub refused: Vec<RefusedFile>,
    pub unsupported: usize,
    pub chunks: u64,
    pub seconds: f64,
    pub interrupted: bool,
    /// Files not sent because the run was interrupted.
    pub not_sent: usize,
}

/// A file that was not ingested, and why.
#[derive(Debug, Serialize)]
pub struct RefusedFile {
    pub path: String,
    pub reason: String,
}

/// One file read and ready to send.
struct Ready {
    found: Found,
    bytes: Vec<u8>,
    seen: Seen,
}

/// A flag set by the first Ctrl-C (a second one exits at once).
pub fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ninterrupted: finishing the requests in flight (Ctrl-C again to quit now)");
            flag.store(true, Ordering::SeqCst);
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    stop
}

/// Runs the ingest once; once `stop` is set, no new request is sent.
pub async fn run(
    req: &Request,
    target: &Target,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let filters = Filters::new(&req.include, &req.exclude)?;
    let paths = req.paths.clone();
    let walked = tokio::task::spawn_blocking(move || walk::walk(&paths, &filters)).await?;
    let mut summary = Summary {
        unsupported: walked.unsupported,
        refused: walked
            .refused
            .into_iter()
            .map(|r| RefusedFile {
                path: r.path.display().to_string(),
                reason: r.reason,
            })
            .collect(),
        ..Summary::default()
    };
    let mut saved = IngestState::load(&req.state_file, &req.target_id)?;
    if req.delete_missing {
        delete_missing(req, target, &mut saved, &mut summary).await?;
    }
    let stored = target.sources().await?;
    let (zips, files): (Vec<Found>, Vec<Found>) = walked.files.into_iter().partition(|f| f.is_zip);

    // Read each file and decide what to send (blocking reads, off the runtime).
    let plan = {
        let known = saved.files.clone();
        tokio::task::spawn_blocking(move || plan(files, &known, &stored)).await?
    };
    summary.unchanged = plan.unchanged.len();
    for (path, seen) in plan.unchanged {
        saved.files.insert(path, seen);
    }
    summary.refused.extend(plan.refused);
    let to_send = plan.ready;
    let bar = progress_bar(to_send.len() as u64, req.json);
    let batches = batches(to_send);
    let mut answered = futures::stream::iter(batches.into_iter().map(|batch| {
        let section = req.section.clone();
        async move {
            if stop.load(Ordering::SeqCst) {
                return (batch, None);
            }
            let files = batch
                .iter()
                .map(|r| (r.found.name.clone(), r.bytes.clone()))
                .collect();
            let out = target.bulk(files, &section).await;
            (batch, Some(out))
        }
    }))
    .buffered(IN_FLIGHT);
    while let Some((batch, out)) = answered.next().await {
        let outcomes = match out {
            None => {
                summary.not_sent += batch.len();
                continue;
            }
            Some(Ok(o)) => o,
            Some(Err(e)) => {
                // The knowledge base did not answer for this batch: nothing is recorded,
                // so the next run sends these files again.
                for r in &batch {
                    summary.refused.push(RefusedFile {
                        path: r.found.path.display().to_string(),
                        reason: format!("not sent: {e:#}"),
                    });
                }
                bar.inc(batch.len() as u64);
                continue;
            }
        };
        for (r, outcome) in batch.into_iter().zip(outcomes) {
            record(&mut summary, &mut saved, r, outcome);
        }
        bar.set_message(format!("{} passages", summary.chunks));
        bar.set_position((summary.added + summary.updated + summary.duplicates) as u64);
        // Saved after every answer: a killed run resumes from here.
        saved.save(&req.state_file)?;
    }
    drop(answered);
    bar.finish_and_clear();
    for z in zips {
        if stop.load(Ordering::SeqCst) {
            summary.not_sent += 1;
            continue;
        }
        ingest_zip(target, &z, &req.section, &mut summary).await;
    }
    saved.save(&req.state_file)?;
    summary.interrupted = stop.load(Ordering::SeqCst);
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Deletes the sources of recorded files under the ingested paths that are gone (before
/// anything is sent: a renamed file's content is then new again, not a duplicate).
async fn delete_missing(
    req: &Request,
    target: &Target,
    saved: &mut IngestState,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let roots: Vec<PathBuf> = req
        .paths
        .iter()
        .filter_map(|p| std::path::absolute(p).ok())
        .collect();
    let gone: Vec<(PathBuf, Seen)> = saved
        .files
        .iter()
        .filter(|(p, _)| roots.iter().any(|r| p.starts_with(r)) && !p.exists())
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect();
    for (path, seen) in gone {
        if !seen.duplicate {
            target.delete_source(&seen.name).await?;
            summary.deleted += 1;
        }
        saved.files.remove(&path);
        saved.save(&req.state_file)?;
    }
    Ok(())
}

fn record(summary: &mut Summary, saved: &mut IngestState, r: Ready, outcome: Outcome) {
    let mut seen = r.seen;
    match outcome {
        Outcome::Added { chunks } => {
            summary.added += 1;
            summary.chunks += chunks;
        }
        Outcome::Updated { chunks } => {
            summary.updated += 1;
            summary.chunks += chunks;
        }
        Outcome::Duplicate => {
            summary.duplicates += 1;
            seen.duplicate = true;
        }
        Outcome::Refused(reason) => {
            summary.refused.push(RefusedFile {
                path: r.found.path.display().to_string(),
                reason,
            });
            return;
        }
    }
    saved.files.insert(r.found.path, seen);
}

async fn ingest_zip(target: &Target, z: &Found, section: &str, summary: &mut Summary) {
    let refuse = |summary: &mut Summary, reason: String| {
        summary.refused.push(RefusedFile {
            path: z.path.display().to_string(),
            reason,
        })
    };
    let bytes = match tokio::fs::read(&z.path).await {
        Ok(b) => b,
        Err(e) => return refuse(summary, walk::not_readable(&e)),
    };
    match target.zip(bytes, section).await {
        Ok(items) => {
            for (name, outcome) in items {
                match outcome {
                    Outcome::Added { chunks } => {
                        summary.added += 1;
                        summary.chunks += chunks;
                    }
                    Outcome::Updated { chunks } => {
                        summary.updated += 1;
                        summary.chunks += chunks;
                    }
                    Outcome::Duplicate => summary.duplicates += 1,
                    Outcome::Refused(reason) => summary.refused.push(RefusedFile {
                        path: format!("{} ({name})", z.path.display()),
                        reason,
                    }),
                }
            }
        }
        Err(e) => refuse(summary, format!("{e:#}")),
    }
}

struct Plan {
    ready: Vec<Ready>,
    unchanged: Vec<(PathBuf, Seen)>,
    refused: Vec<RefusedFile>,
}

/// Reads the files that may have changed; keeps aside those that have not.
fn plan(
    files: Vec<Found>,
    known: &std::collections::BTreeMap<PathBuf, Seen>,
    stored: &std::collections::HashSet<String>,
) -> Plan {
    let mut p = Plan {
        ready: Vec::new(),
        unchanged: Vec::new(),
        refused: Vec::new(),
    };
    for found in files {
        let path = std::path::absolute(&found.path).unwrap_or_else(|_| found.path.clone());
        let refuse = |e: std::io::Error| RefusedFile {
            path: found.path.display().to_string(),
            reason: walk::not_readable(&e),
        };
        let meta = match std::fs::metadata(&found.path) {
            Ok(m) => m,
            Err(e) => {
                p.refused.push(refuse(e));
                continue;
            }
        };
        let (size, modified_ns) = state::stamp(&meta);
        let before = known.get(&path);
        let still_stored = |s: &Seen| s.duplicate || stored.contains(&s.name);
        if let Some(s) = before {
            if s.size == size
                && s.modified_ns == modified_ns
                && s.name == found.name
                && still_stored(s)
            {
                p.unchanged.push((path, s.clone()));
                continue;
            }
        }
        let bytes = match std::fs::read(&found.path) {
            Ok(b) => b,
            Err(e) => {
                p.refused.push(refuse(e));
                continue;
            }
        };
        let sha256 = state::sha256_hex(&bytes);
        let seen = Seen {
            name: found.name.clone(),
            size,
            modified_ns,
            sha256,
            duplicate: false,
        };
        // Touched but not changed: nothing to send.
        if let Some(s) =
            before.filter(|s| s.sha256 == seen.sha256 && s.name == seen.name && still_stored(s))
        {
            p.unchanged.push((
                path,
                Seen {
                    duplicate: s.duplicate,
                    ..seen
                },
            ));
            continue;
        }
        p.ready.push(Ready {
            found: Found { path, ..found },
            bytes,
            seen,
        });
    }
    p
}

fn batches(files: Vec<Ready>) -> Vec<Vec<Ready>> {
    let mut out: Vec<Vec<Ready>> = Vec::new();
    let mut bytes = 0usize;
    for f in files {
        let full = out
            .last()
            .is_none_or(|b| b.len() >= BATCH_FILES || bytes + f.bytes.len() > BATCH_BYTES);
        if full {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += f.bytes.len();
        if let Some(b) = out.last_mut() {
            b.push(f);
        }
    }
    out
}

fn progress_bar(total: u64, hidden: bool) -> indicatif::ProgressBar {
    if hidden || total == 0 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} files, {msg} ({per_sec}, ETA {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Prints the summary table (or JSON).
pub fn print(summary: &Summary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    let rows = [
        ("added", summary.added),
        ("updated in place", summary.updated),
        ("duplicates (content already stored)", summary.duplicates),
        ("unchanged since the last run", summary.unchanged),
        ("deleted (file gone)", summary.deleted),
        ("refused", summary.refused.len()),
        ("not a supported type (skipped)", summary.unsupported),
    ];
    println!("{:<38} {:>7}", "FILES", "COUNT");
    for (what, n) in rows {
        println!("{what:<38} {n:>7}");
    }
    let sent = summary.added + summary.updated + summary.duplicates;
    println!(
        "{} passages stored in {:.1}s ({:.1} files/s)",
        summary.chunks,
        summary.seconds,
        sent as f64 / summary.seconds.max(1e-9)
    );
    for r in &summary.refused {
        println!("refused: {}: {}", r.path, r.reason);
    }
    if summary.interrupted {
        println!(
            "interrupted: {} files were not sent; run the same command again to resume",
            summary.not_sent
        );
    } else if summary.added + summary.updated + summary.deleted == 0 {
        println!("nothing changed: the knowledge base already holds these files");
    }
    Ok(())
}
