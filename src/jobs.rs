//! Durable background tasks (async uploads, scrapes and re-embedding). The protocol: the upload is
//! written to the data directory and renamed into place, the task row is committed,
//! the workers are woken, and only then is the task id returned. Workers claim tasks
//! from SQLite, report progress there, and a task left unfinished by a crash is
//! resumed at start-up. Cancellation is atomic: a source is committed only while its
//! task is still running.

mod reindex;
pub mod runner;
pub mod task;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::error::{Error, Result};
use crate::kb::KnowledgeBase;
use crate::store::{tasks as repo, Store};

pub use task::{TaskKind, TaskStatus};

/// A task as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskView {
    pub task_id: String,
    pub status: TaskStatus,
    /// Fraction done: 1.0 when completed.
    pub progress: f64,
    #[schema(value_type = Object)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    /// `upload`, `scrape` or `reindex`.
    pub kind: String,
}

/// Answer to a task submission.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskAck {
    pub task_id: String,
    pub status: TaskStatus,
    pub message: String,
    pub created_at: String,
}

/// Tasks listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskList {
    pub tasks: Vec<TaskView>,
    pub total: u64,
}

/// Answer to a cancellation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CancelResult {
    pub task_id: String,
    pub status: TaskStatus,
    pub message: String,
}

impl From<repo::TaskRow> for TaskView {
    fn from(r: repo::TaskRow) -> Self {
        TaskView {
            task_id: r.id,
            // Rows are written by this module only; an unknown state cannot occur but
            // would read as failed rather than hide the task.
            status: TaskStatus::parse(&r.status).unwrap_or(TaskStatus::Failed),
            progress: r.progress,
            result: r.result,
            error: r.error,
            created_at: r.created_at,
            started_at: r.started_at,
            completed_at: r.completed_at,
            kind: r.kind,
        }
    }
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) kb: Arc<KnowledgeBase>,
    pub(crate) uploads: PathBuf,
    pub(crate) wake: Notify,
    /// Cancellation handles of the tasks being run now.
    pub(crate) running: Mutex<HashMap<String, CancellationToken>>,
    pub(crate) shutdown: CancellationToken,
}

/// The task system: submission, queries, cancellation; workers run in the background.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

fn now() -> String {
    crate::time::now_iso()
}

/// Writes `bytes` durably at `path` (temp file, fsync, rename, fsync of the folder).
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("part");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Removes a file that may already be gone.
fn remove_file(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "removing an upload failed"),
    }
}

/// Re-queues tasks a previous process left running, then removes every file of the
/// uploads folder that no unfinished upload task will read (half-written `.part`
/// files, files of tasks that ended or were never recorded). Returns the number of
/// unfinished tasks. Blocking.
fn recover(store: &Store, uploads: &Path) -> Result<usize> {
    std::fs::create_dir_all(uploads).map_err(|e| Error::Internal(e.into()))?;
    let requeued = store.write_sync(|tx| repo::requeue_interrupted(tx))?;
    let unfinished = store.read_sync(repo::unfinished)?;
    let keep: std::collections::HashSet<&str> = unfinished
        .iter()
        .filter(|t| t.kind == "upload")
        .map(|t| t.id.as_str())
        .collect();
    let mut swept = 0usize;
    let entries = std::fs::read_dir(uploads).map_err(|e| Error::Internal(e.into()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !keep.contains(name.to_string_lossy().as_ref()) {
            remove_file(&entry.path());
            swept += 1;
        }
    }
    if swept > 0 {
        tracing::info!(swept, "removed stray upload files");
    }
    if !unfinished.is_empty() {
        tracing::info!(
            requeued,
            pending = unfinished.len(),
            "resuming unfinished tasks"
        );
    }
    Ok(unfinished.len())
}

impl Jobs {
    /// Re-queues tasks a previous process left running, sweeps stray upload files (on a
    /// blocking thread) and starts `workers` workers.
    pub async fn start(
        store: Store,
        kb: Arc<KnowledgeBase>,
        data_dir: &Path,
        workers: usize,
    ) -> Result<Self> {
        let uploads = data_dir.join("uploads");
        let (s, u) = (store.clone(), uploads.clone());
        tokio::task::spawn_blocking(move || recover(&s, &u)).await??;
        let inner = Arc::new(Inner {
            store,
            kb,
            uploads,
            wake: Notify::new(),
            running: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
        });
        for n in 0..workers.max(1) {
            tokio::spawn(runner::worker(inner.clone(), n));
        }
        Ok(Self { inner })
    }

    /// Stops the workers; tasks they were running stay `running` and resume at the next start.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Saves an upload and queues its ingestion.
    pub async fn submit_upload(
        &self,
        filename: String,
        bytes: Vec<u8>,
        section: String,
    ) -> Result<TaskAck> {
        let filename = crate::kb::ingest::clean_filename(&filename)?;
        crate::kb::ingest::upload_format(&filename)?;
        let id = uuid::Uuid::new_v4().to_string();
        let path = self.inner.uploads.join(&id);
        let kind = TaskKind::Upload {
            filename: filename.clone(),
            section,
        };
        let store = self.inner.store.clone();
        let (tid, created) = (id.clone(), now());
        let created_at = created.clone();
        tokio::task::spawn_blocking(move || -> Result<()> {
            write_durably(&path, &bytes)
                .map_err(|e| Error::Internal(anyhow::Error::new(e).context("saving the upload")))?;
            let inserted = store
                .write_sync(|tx| repo::insert(tx, &tid, kind.name(), &kind.params(), &created));
            if inserted.is_err() {
                // No task row: nothing would ever read or remove the file.
                let _ = std::fs::remove_file(&path);
            }
            inserted
        })
        .await??;
        self.inner.wake.notify_one();
        tracing::info!(task_id = %id, %filename, "upload task queued");
        Ok(TaskAck {
            task_id: id,
            status: TaskStatus::Pending,
            message: format!("'{filename}' queued for ingestion"),
            created_at,
        })
    }

    /// Queues a scrape of `urls`.
    pub async fn submit_scrape(
        &self,
        urls: Vec<String>,
        timeout_s: u64,
        skip_duplicates: bool,
    ) -> Result<TaskAck> {
        for u in &urls {
            crate::kb::scrape::canonical_url(u)?;
        }
        let id = uuid::Uuid::new_v4().to_string();
        let count = urls.len();
        let kind = TaskKind::Scrape {
            urls,
            timeout: std::time::Duration::from_secs(timeout_s),
            skip_duplicates,
        };
        let created_at = now();
        let (tid, created) = (id.clone(), created_at.clone());
        self.inner
            .store
            .write(move |tx| repo::insert(tx, &tid, kind.name(), &kind.params(), &created))
            .await?;
        self.inner.wake.notify_one();
        tracing::info!(task_id = %id, urls = count, "scrape task queued");
        Ok(TaskAck {
            task_id: id,
            status: TaskStatus::Pending,
            message: format!("{count} URL(s) queued for scraping"),
            created_at,
        })
    }

    /// One task.
    pub async fn get(&self, id: String) -> Result<TaskView> {
        let msg = format!("task '{id}' not found");
        self.inner
            .store
            .read(move |c| repo::get(c, &id))
            .await?
            .map(TaskView::from)
            .ok_or(Error::NotFound(msg))
    }

    /// Newest tasks first, optionally of one status.
    pub async fn list(&self, status: Option<TaskStatus>, limit: u64) -> Result<TaskList> {
        let (rows, total) = self
            .inner
            .store
            .read(move |c| repo::list(c, status.map(TaskStatus::as_str), limit))
            .await?;
        Ok(TaskList {
            tasks: rows.into_iter().map(TaskView::from).collect(),
            total,
        })
    }

    /// Tasks per state, every state listed (zeros included).
    pub async fn count_by_state(&self) -> Result<Vec<(String, u64)>> {
        let found = self.inner.store.read(repo::count_by_status).await?;
        Ok(TaskStatus::ALL
            .iter()
            .map(|s| {
                let n = found
                    .iter()
                    .find(|(name, _)| name == s.as_str())
                    .map_or(0, |(_, n)| *n);
                (s.as_str().to_owned(), n)
            })
            .collect())
    }

    /// Cancels a pending or running task; a running one stops within moments and
    /// commits nothing further.
    pub async fn cancel(&self, id: String) -> Result<CancelResult> {
        let tid = id.clone();
        let done = self.inner.store.write(move |tx| {
            let existed = repo::get(tx, &tid)?;
            Ok((existed, repo::cancel(tx, &tid, &now())?))
        });
        let (existed, cancelled) = done.await?;
        let Some(row) = existed else {
            return Err(Error::NotFound(format!("task '{id}' not found")));
        };
        if !cancelled {
            return Err(Error::bad_request(format!(
                "task '{id}' has already finished; only pending or running tasks can be cancelled"
            )));
        }
        if let Some(token) = self.inner.running.lock().get(&id) {
            token.cancel();
        }
        // A pending upload is never claimed now: its file goes here. (A running one's
        // worker also removes it when it stops; removing twice is harmless.)
        if row.kind == "upload" {
            let path = self.inner.uploads.join(&id);
            tokio::task::spawn_blocking(move || remove_file(&path)).await?;
        }
        tracing::info!(task_id = %id, "task cancelled");
        Ok(CancelResult {
            task_id: id,
            status: TaskStatus::Cancelled,
            message: "the task was cancelled".into(),
        })
    }
}
