//! Watching synced folders: the first run catches up with whatever changed while nothing
//! watched (new, changed and deleted files, from the state file), then every burst of
//! file-system events (create, change, rename, delete; debounced) runs the same sync
//! again, which sends only what changed. Until `stop` is set.
//!
//! `ragd ingest --watch` and the server's `watch_dirs` both run this loop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher as _};

use super::{run, Progress, Request, Sink, Summary};
use crate::kb::KnowledgeBase;

/// Quiet time that ends a burst of events.
const QUIET: Duration = Duration::from_millis(250);
/// Longest a burst is waited for before syncing anyway.
const MAX_WAIT: Duration = Duration::from_secs(1);
/// How often `stop` is looked at while nothing happens.
const POLL: Duration = Duration::from_millis(200);
/// A sync that failed (the knowledge base did not answer) is tried again after this.
const RETRY: Duration = Duration::from_secs(5);

/// Watches `req.paths` until `stop` is set; `synced` is told each run's summary (the
/// first run's included; a path that does not exist is refused there, and not watched).
pub async fn watch(
    req: &Request,
    sink: &impl Sink,
    progress: &impl Progress,
    stop: &AtomicBool,
    mut synced: impl FnMut(&Summary),
) -> anyhow::Result<()> {
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
            tracing::warn!(path = %p, "not watching a path that does not exist");
        }
    }
    // A first run that fails (no server there, a state file that cannot be written) is
    // the caller's error; later ones are tried again.
    let first = run(req, sink, progress, stop).await?;
    synced(&first);
    let mut pending = false;
    while !stop.load(Ordering::SeqCst) {
        let wait = if pending { RETRY } else { POLL };
        let event = match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(Ok(e))) if ignored(req, &e) => continue,
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(_) if pending => {
                pending = !sync(req, sink, progress, stop, &mut synced).await;
                continue;
            }
            Err(_) => continue,
        };
        if let Err(e) = event {
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
        pending = !sync(req, sink, progress, stop, &mut synced).await;
    }
    Ok(())
}

/// An event only about paths in ignored folders.
fn ignored(req: &Request, e: &notify::Event) -> bool {
    !req.ignore.is_empty() && !e.paths.is_empty() && e.paths.iter().all(|p| req.ignores(p))
}

/// One sync; false when it failed as a whole (to be tried again).
async fn sync(
    req: &Request,
    sink: &impl Sink,
    progress: &impl Progress,
    stop: &AtomicBool,
    synced: &mut impl FnMut(&Summary),
) -> bool {
    match run(req, sink, progress, stop).await {
        Ok(s) => {
            synced(&s);
            true
        }
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), paths = ?req.paths, "a folder sync failed; trying again");
            false
        }
    }
}

/// The server's `watch_dirs`: one task watching them all, syncing into the knowledge
/// base of this process, its state kept in the data directory.
pub struct Folders {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Folders {
    /// Starts watching `dirs` (none: nothing is started). A folder that does not exist
    /// is an error naming it.
    pub fn start(
        kb: Arc<KnowledgeBase>,
        dirs: &[PathBuf],
        data_dir: &Path,
        keep_deleted: bool,
    ) -> anyhow::Result<Option<Self>> {
        if dirs.is_empty() {
            return Ok(None);
        }
        let mut paths = Vec::with_capacity(dirs.len());
        for d in dirs {
            let abs = std::path::absolute(d).unwrap_or_else(|_| d.clone());
            anyhow::ensure!(
                abs.is_dir(),
                "watch_dirs: {} is not a folder (or does not exist)",
                abs.display()
            );
            paths.push(abs.display().to_string());
        }
        let req = Request {
            paths,
            include: Vec::new(),
            exclude: Vec::new(),
            section: SECTION.to_owned(),
            state_file: data_dir.join("watch").join("state.json"),
            target_id: "watch_dirs".to_owned(),
            delete_missing: !keep_deleted,
            ignore: vec![std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_owned())],
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            tracing::info!(dirs = ?req.paths, delete_missing = req.delete_missing, "watching folders");
            let logged = |s: &Summary| log_sync(s);
            if let Err(e) = watch(&req, &*kb, &Logged, &flag, logged).await {
                tracing::error!(error = %format!("{e:#}"), dirs = ?req.paths, "watching folders stopped");
            }
        });
        Ok(Some(Self { stop, task }))
    }

    /// Stops watching after the requests in flight are answered.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the folder watch task failed");
        }
    }
}

/// The section of files synced from `watch_dirs`.
pub const SECTION: &str = "watched";

fn log_sync(s: &Summary) {
    if s.changed_anything() {
        tracing::info!(
            added = s.added,
            updated = s.updated,
            deleted = s.deleted,
            duplicates = s.duplicates,
            unchanged = s.unchanged,
            refused = s.refused.len(),
            passages = s.chunks,
            seconds = s.seconds,
            "folders synced"
        );
    }
    for r in &s.refused {
        tracing::warn!(path = %r.path, reason = %r.reason, "a watched file was not ingested");
    }
}

/// Progress of a sync as log lines.
struct Logged;

impl Progress for Logged {
    fn start(&self, files: u64) {
        if files > 0 {
            tracing::info!(files, "folder sync: sending changed files");
        }
    }
    fn advance(&self, files: u64, passages: u64) {
        tracing::info!(files, passages, "folder sync: progress");
    }
}
