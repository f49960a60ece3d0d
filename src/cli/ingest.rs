//! `ragd ingest PATH...`: files, folders, globs and ZIPs into the knowledge base, through
//! a running server or on a data directory, with a progress bar and a summary; only what
//! changed since the last run is sent, and an interrupted run resumes. The sync itself is
//! the library's (`ragd::kb::sync`), shared with the server's `watch_dirs`.

mod target;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ragd::kb::sync::{self, Progress, Request, Summary};

pub use ragd::kb::sync::state::default_path as default_state_path;
pub use target::Target;

/// Runs the sync once with a progress bar (none with `json`).
pub async fn run(
    req: &Request,
    target: &Target,
    json: bool,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    sync::run(req, target, &Bar::new(json), stop).await
}

/// Watches `req.paths` (`ragd ingest --watch`): the first run's summary as a table, then
/// one line per sync that changed something.
pub async fn watch(
    req: &Request,
    target: &Target,
    json: bool,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut first = true;
    let mut printed = Ok(());
    sync::watch::watch(req, target, &Bar::new(json), stop, |s| {
        if std::mem::take(&mut first) {
            printed = print(s, json);
            eprintln!("watching {} (Ctrl-C to stop)", req.paths.join(", "));
        } else if s.changed_anything() {
            println!(
                "{}: added {}, updated {}, deleted {}, duplicates {}, refused {}",
                chrono::Local::now().format("%H:%M:%S"),
                s.added,
                s.updated,
                s.deleted,
                s.duplicates,
                s.refused.len()
            );
            for r in &s.refused {
                println!("refused: {}: {}", r.path, r.reason);
            }
        }
    })
    .await?;
    printed
}

/// The terminal's progress bar (files, passages, rate, ETA), drawn only on a terminal.
struct Bar {
    bar: std::sync::Mutex<indicatif::ProgressBar>,
    hidden: bool,
}

impl Bar {
    fn new(hidden: bool) -> Self {
        Self {
            bar: std::sync::Mutex::new(indicatif::ProgressBar::hidden()),
            hidden,
        }
    }

    fn with(&self, f: impl FnOnce(&mut indicatif::ProgressBar)) {
        if let Ok(mut b) = self.bar.lock() {
            f(&mut b);
        }
    }
}

impl Progress for Bar {
    fn start(&self, files: u64) {
        let hidden = self.hidden;
        self.with(|b| *b = progress_bar(files, hidden));
    }
    fn advance(&self, files: u64, passages: u64) {
        self.with(|b| {
            b.set_message(format!("{passages} passages"));
            b.set_position(files);
        });
    }
    fn finish(&self) {
        self.with(|b| b.finish_and_clear());
    }
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
