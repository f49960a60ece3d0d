//! `ragd ingest --watch`: the first run catches up with whatever changed while nothing
//! watched (new, changed and deleted files, from the state file), then every burst of
//! file-system events (create, change, rename, delete; debounced) runs the same sync
//! again, which sends only what changed. Until Ctrl-C.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher as _};

use super::{print, run, Request, Target};

/// Quiet time that ends a burst of events.
const QUIET: Duration = Duration::from_millis(250);
/// Longest a burst is waited for before syncing anyway.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Watches `req.paths` until `stop` is set.
pub async fn watch(req: &Request, target: &Target, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Watching starts before the first run, so nothing changed during it is missed.
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        let _ = tx.send(e);
    })?;
    for p in &req.paths {
        let path = Path::new(p);
        if path.exists() {
            watcher
                .watch(path, RecursiveMode::Recursive)
                .map_err(|e| anyhow::anyhow!("cannot watch {p}: {e}"))?;
        } else {
            eprintln!("not watching {p}: it does not exist (a glob is watched through its folder)");
        }
    }
    let first = run(req, target, stop).await?;
    print(&first, req.json)?;
    eprintln!("watching {} (Ctrl-C to stop)", req.paths.join(", "));
    while !stop.load(Ordering::SeqCst) {
        let Ok(Some(first_event)) =
            tokio::time::timeout(Duration::from_millis(200), rx.recv()).await
        else {
            continue;
        };
        if let Err(e) = first_event {
            tracing::warn!(error = %e, "a file-system watch error");
        }
        // A burst of events (an editor's save, a copied folder) becomes one sync.
        let started = Instant::now();
        while started.elapsed() < MAX_WAIT {
            match tokio::time::timeout(QUIET, rx.recv()).await {
                Ok(Some(_)) => continue,
                _ => break,
            }
        }
        let s = run(req, target, stop).await?;
        let changed = s.added + s.updated + s.deleted + s.duplicates + s.refused.len();
        if changed > 0 {
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
    }
    Ok(())
}
