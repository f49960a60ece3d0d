//! Folders kept in sync with a knowledge base: files, folders, globs and ZIPs walked,
//! only what changed since the last run sent (a state file records each file's size,
//! time and SHA-256), sources of deleted files deleted, and an interrupted run resumed.
//!
//! The same sync serves `ragd ingest` (through a running server or on a data directory)
//! and the server's own `watch_dirs`: each says where files go by implementing [`Sink`],
//! and how progress is shown by implementing [`Progress`].

pub mod state;
pub mod walk;
pub mod watch;

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::StreamExt as _;
use serde::Serialize;
use serde_json::Value;

use state::{IngestState, Seen};
use walk::{Filters, Found};

use super::KnowledgeBase;

/// Files per request (as `scripts/bench_ingest.sh` sends them to `/upload/bulk`).
const BATCH_FILES: usize = 50;
/// Bytes per request, at most (one larger file goes alone).
const BATCH_BYTES: usize = 32 << 20;
/// Requests in flight: one is parsed and embedded while the next is read and sent.
const IN_FLIGHT: usize = 2;

/// What one sync is asked to do.
#[derive(Debug, Clone)]
pub struct Request {
    pub paths: Vec<String>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub section: String,
    /// Where the state of earlier runs is kept.
    pub state_file: PathBuf,
    /// Names the knowledge base in the state file.
    pub target_id: String,
    /// Delete the sources of recorded files that no longer exist.
    pub delete_missing: bool,
    /// Folders whose files are never synced and whose changes start no sync (the
    /// server's own data directory, when it lies in a watched folder).
    pub ignore: Vec<PathBuf>,
}

impl Request {
    /// Whether `path` lies in an ignored folder.
    pub fn ignores(&self, path: &std::path::Path) -> bool {
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        self.ignore.iter().any(|i| abs.starts_with(i))
    }
}

/// The counts of a run.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub added: usize,
    pub updated: usize,
    pub duplicates: usize,
    pub unchanged: usize,
    /// Sources deleted because their file is gone.
    pub deleted: usize,
    pub refused: Vec<RefusedFile>,
    pub unsupported: usize,
    pub chunks: u64,
    pub seconds: f64,
    pub interrupted: bool,
    /// Files not sent because the run was interrupted.
    pub not_sent: usize,
}

impl Summary {
    /// Whether the run changed the knowledge base or refused something.
    pub fn changed_anything(&self) -> bool {
        self.added + self.updated + self.deleted + self.duplicates + self.refused.len() > 0
    }
}

/// A file that was not ingested, and why.
#[derive(Debug, Serialize)]
pub struct RefusedFile {
    pub path: String,
    pub reason: String,
}

/// What became of one file.
#[derive(Debug, Clone)]
pub enum Outcome {
    Added { chunks: u64 },
    Updated { chunks: u64 },
    Duplicate,
    Refused(String),
}

/// Where synced files go: a knowledge base in this process, or a server.
pub trait Sink: Sync {
    /// The source names stored now.
    fn sources(&self) -> impl Future<Output = anyhow::Result<HashSet<String>>> + Send;
    /// Ingests `files` (name, bytes) together; one outcome per file, in order.
    fn bulk(
        &self,
        files: Vec<(String, Vec<u8>)>,
        section: &str,
    ) -> impl Future<Output = anyhow::Result<Vec<Outcome>>> + Send;
    /// Ingests a ZIP archive of documents; one outcome per file inside (with its name).
    fn zip(
        &self,
        bytes: Vec<u8>,
        section: &str,
    ) -> impl Future<Output = anyhow::Result<Vec<(String, Outcome)>>> + Send;
    /// Deletes the source `name` (and its chunks); a source already gone is no error.
    fn delete_source(&self, name: &str) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// How a run shows its progress (a bar in a terminal, log lines in the server).
pub trait Progress: Sync {
    /// `files` are about to be sent.
    fn start(&self, _files: u64) {}
    /// `files` of them answered so far, `passages` stored.
    fn advance(&self, _files: u64, _passages: u64) {}
    /// Sending is over.
    fn finish(&self) {}
}

/// No progress shown.
pub struct Quiet;
impl Progress for Quiet {}

/// The bulk answer's results as outcomes (DECISIONS.md: `content_hash` duplicates wrote
/// nothing; `filepath` ones were updated in place). The same JSON whether it came from
/// `/upload/bulk` or from [`KnowledgeBase::ingest_many`].
pub fn outcomes(body: &Value) -> Vec<Outcome> {
    body["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let chunks =
                r["chunks_added"].as_u64().unwrap_or(0) + r["chunks_updated"].as_u64().unwrap_or(0);
            if r["success"] != true {
                Outcome::Refused(r["error"].as_str().unwrap_or("refused").to_owned())
            } else if r["is_duplicate"] == true && r["duplicate_type"] == "filepath" {
                Outcome::Updated { chunks }
            } else if r["is_duplicate"] == true {
                Outcome::Duplicate
            } else {
                Outcome::Added { chunks }
            }
        })
        .collect()
}

/// The ZIP answer's results with the name of each file inside.
pub fn zip_outcomes(body: &Value) -> Vec<(String, Outcome)> {
    let names = body["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["filename"].as_str().unwrap_or("?").to_owned());
    names.zip(outcomes(body)).collect()
}

impl Sink for KnowledgeBase {
    async fn sources(&self) -> anyhow::Result<HashSet<String>> {
        Ok(KnowledgeBase::sources(self).await?.into_iter().collect())
    }

    async fn bulk(
        &self,
        files: Vec<(String, Vec<u8>)>,
        section: &str,
    ) -> anyhow::Result<Vec<Outcome>> {
        let n = files.len();
        let body = serde_json::to_value(self.ingest_many(files, section.to_owned()).await)?;
        let out = outcomes(&body);
        anyhow::ensure!(
            out.len() == n,
            "the knowledge base answered for {} of {n} files",
            out.len()
        );
        Ok(out)
    }

    async fn zip(&self, bytes: Vec<u8>, section: &str) -> anyhow::Result<Vec<(String, Outcome)>> {
        let body = serde_json::to_value(self.ingest_zip(bytes, section.to_owned()).await?)?;
        Ok(zip_outcomes(&body))
    }

    async fn delete_source(&self, name: &str) -> anyhow::Result<()> {
        match KnowledgeBase::delete_source(self, name.to_owned()).await {
            Ok(_) | Err(crate::error::Error::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// One file read and ready to send.
struct Ready {
    found: Found,
    bytes: Vec<u8>,
    seen: Seen,
}

/// Runs the sync once; once `stop` is set, no new request is sent.
pub async fn run(
    req: &Request,
    sink: &impl Sink,
    progress: &impl Progress,
    stop: &AtomicBool,
) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let filters = Filters::new(&req.include, &req.exclude)?;
    let paths = req.paths.clone();
    let mut walked = tokio::task::spawn_blocking(move || walk::walk(&paths, &filters)).await?;
    walked.files.retain(|f| !req.ignores(&f.path));
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
    let mut saved = load_state(req).await?;
    if req.delete_missing {
        delete_missing(req, sink, &mut saved, &mut summary).await?;
    }
    let stored = sink.sources().await?;
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
    progress.start(to_send.len() as u64);
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
            let out = sink.bulk(files, &section).await;
            (batch, Some(out))
        }
    }))
    .buffered(IN_FLIGHT);
    let mut answered_files = 0u64;
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
                answered_files += batch.len() as u64;
                progress.advance(answered_files, summary.chunks);
                continue;
            }
        };
        answered_files += batch.len() as u64;
        for (r, outcome) in batch.into_iter().zip(outcomes) {
            record(&mut summary, &mut saved, r, outcome);
        }
        progress.advance(answered_files, summary.chunks);
        // Saved after every answer: a killed run resumes from here.
        save_state(&saved, req).await?;
    }
    drop(answered);
    progress.finish();
    for z in zips {
        if stop.load(Ordering::SeqCst) {
            summary.not_sent += 1;
            continue;
        }
        ingest_zip(sink, &z, &req.section, &mut summary).await;
    }
    save_state(&saved, req).await?;
    summary.interrupted = stop.load(Ordering::SeqCst);
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

async fn load_state(req: &Request) -> anyhow::Result<IngestState> {
    let (path, target) = (req.state_file.clone(), req.target_id.clone());
    tokio::task::spawn_blocking(move || IngestState::load(&path, &target)).await?
}

/// Saves the state (a file write and rename, off the runtime).
async fn save_state(saved: &IngestState, req: &Request) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec(saved)?;
    let path = req.state_file.clone();
    tokio::task::spawn_blocking(move || state::write_atomically(&path, &bytes)).await?
}

/// Deletes the sources of recorded files under the synced paths that are gone (before
/// anything is sent: a renamed file's content is then new again, not a duplicate).
async fn delete_missing(
    req: &Request,
    sink: &impl Sink,
    saved: &mut IngestState,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let roots: Vec<PathBuf> = req
        .paths
        .iter()
        .filter_map(|p| std::path::absolute(p).ok())
        .collect();
    let recorded: Vec<(PathBuf, Seen)> = saved
        .files
        .iter()
        .filter(|(p, _)| roots.iter().any(|r| p.starts_with(r)))
        .map(|(p, s)| (p.clone(), s.clone()))
        .collect();
    // One look at the disk per recorded file: off the runtime.
    let gone: Vec<(PathBuf, Seen)> = tokio::task::spawn_blocking(move || {
        recorded.into_iter().filter(|(p, _)| !p.exists()).collect()
    })
    .await?;
    if gone.is_empty() {
        return Ok(());
    }
    for (path, seen) in gone {
        if !seen.duplicate {
            sink.delete_source(&seen.name).await?;
            summary.deleted += 1;
        }
        saved.files.remove(&path);
    }
    // Saved once: a run stopped before this deletes the same sources again, and a
    // source already gone is no error.
    save_state(saved, req).await
}

impl Summary {
    /// Counts one file's outcome; a refused file is listed under `path`. Whether the file
    /// is stored (under its name or, a duplicate, under another).
    fn count(&mut self, outcome: Outcome, path: impl FnOnce() -> String) -> bool {
        match outcome {
            Outcome::Added { chunks } => {
                self.added += 1;
                self.chunks += chunks;
            }
            Outcome::Updated { chunks } => {
                self.updated += 1;
                self.chunks += chunks;
            }
            Outcome::Duplicate => self.duplicates += 1,
            Outcome::Refused(reason) => {
                self.refused.push(RefusedFile {
                    path: path(),
                    reason,
                });
                return false;
            }
        }
        true
    }
}

fn record(summary: &mut Summary, saved: &mut IngestState, r: Ready, outcome: Outcome) {
    let duplicate = matches!(outcome, Outcome::Duplicate);
    if summary.count(outcome, || r.found.path.display().to_string()) {
        let seen = Seen {
            duplicate,
            ..r.seen
        };
        saved.files.insert(r.found.path, seen);
    }
}

async fn ingest_zip(sink: &impl Sink, z: &Found, section: &str, summary: &mut Summary) {
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
    match sink.zip(bytes, section).await {
        Ok(items) => {
            for (name, outcome) in items {
                summary.count(outcome, || format!("{} ({name})", z.path.display()));
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
fn plan(files: Vec<Found>, known: &BTreeMap<PathBuf, Seen>, stored: &HashSet<String>) -> Plan {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: PathBuf) -> Found {
        Found {
            name: path.file_name().unwrap().to_string_lossy().into_owned(),
            path,
            is_zip: false,
        }
    }

    #[test]
    fn a_file_that_vanishes_after_the_walk_is_refused_and_the_rest_planned() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept.md");
        let gone = dir.path().join("gone.md");
        std::fs::write(&kept, "# Kept\n").unwrap();
        std::fs::write(&gone, "# Gone\n").unwrap();
        let files = vec![found(gone.clone()), found(kept.clone())];
        std::fs::remove_file(&gone).unwrap();
        let p = plan(files, &BTreeMap::new(), &HashSet::new());
        assert_eq!(p.ready.len(), 1);
        assert_eq!(p.ready[0].found.name, "kept.md");
        assert_eq!(p.refused.len(), 1);
        assert!(p.refused[0].path.ends_with("gone.md"));
        assert!(
            p.refused[0].reason.contains("vanished"),
            "{}",
            p.refused[0].reason
        );
    }

    #[test]
    fn an_unchanged_file_is_not_read_again_and_a_touched_one_is_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.md");
        std::fs::write(&f, "# A\n").unwrap();
        let first = plan(vec![found(f.clone())], &BTreeMap::new(), &HashSet::new());
        let seen = first.ready[0].seen.clone();
        let known = BTreeMap::from([(first.ready[0].found.path.clone(), seen.clone())]);
        let stored = HashSet::from(["a.md".to_owned()]);
        let again = plan(vec![found(f.clone())], &known, &stored);
        assert_eq!((again.ready.len(), again.unchanged.len()), (0, 1));
        // The same bytes under a new time: read, found equal, not sent.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let touched = plan(vec![found(f.clone())], &known, &stored);
        assert_eq!((touched.ready.len(), touched.unchanged.len()), (0, 1));
        // Its source deleted from the knowledge base meanwhile: sent again.
        let resent = plan(vec![found(f)], &known, &HashSet::new());
        assert_eq!(resent.ready.len(), 1);
    }

    #[test]
    fn batches_hold_at_most_fifty_files_or_32_mib() {
        let ready = |n: usize, size: usize| -> Vec<Ready> {
            (0..n)
                .map(|i| Ready {
                    found: found(PathBuf::from(format!("/x/{i}.txt"))),
                    bytes: vec![0; size],
                    seen: Seen {
                        name: format!("{i}.txt"),
                        size: size as u64,
                        modified_ns: 0,
                        sha256: String::new(),
                        duplicate: false,
                    },
                })
                .collect()
        };
        let sizes = |b: &[Vec<Ready>]| b.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(&batches(ready(120, 10))), [50, 50, 20]);
        assert_eq!(sizes(&batches(ready(3, 20 << 20))), [1, 1, 1]);
    }
}
