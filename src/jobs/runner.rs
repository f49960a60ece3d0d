//! The worker loop: claim the oldest pending task, run it with a cancellation token,
//! record the outcome. A panic in a task fails that task, never the worker.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{Inner, TaskKind};
use crate::error::{Error, Result};
use crate::kb::ingest::{IngestSource, Progress, SourceType};
use crate::kb::scrape::ScrapeRequest;
use crate::store::tasks::{self as repo, TaskRow};

/// Runs tasks until shutdown.
pub(crate) async fn worker(inner: Arc<Inner>, n: usize) {
    tracing::debug!(worker = n, "task worker started");
    loop {
        if inner.shutdown.is_cancelled() {
            break;
        }
        let claimed = inner
            .store
            .write(|tx| repo::claim_next(tx, &crate::time::now_iso()))
            .await;
        let task = match claimed {
            Ok(Some(t)) => t,
            Ok(None) => {
                tokio::select! {
                    _ = inner.wake.notified() => {}
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    _ = inner.shutdown.cancelled() => break,
                }
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "claiming a task failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        run_one(&inner, task).await;
    }
    tracing::debug!(worker = n, "task worker stopped");
}

async fn run_one(inner: &Arc<Inner>, task: TaskRow) {
    let id = task.id.clone();
    let span = tracing::info_span!("task", task_id = %id, kind = %task.kind);
    let token = CancellationToken::new();
    inner.running.lock().insert(id.clone(), token.clone());
    let started = std::time::Instant::now();
    // The task runs in its own tokio task so that a panic is contained.
    let work = tokio::spawn({
        let inner = inner.clone();
        let task = task.clone();
        let span = span.clone();
        async move { tracing::Instrument::instrument(execute_retrying(&inner, &task), span).await }
    });
    let abort = work.abort_handle();
    let outcome = tokio::select! {
        r = work => r.unwrap_or_else(|e| Err(Error::Internal(anyhow::anyhow!("the task failed unexpectedly: {e}")))),
        _ = token.cancelled() => { abort.abort(); Err(Error::Cancelled) }
        _ = inner.shutdown.cancelled() => { abort.abort(); inner.running.lock().remove(&id); return; }
    };
    inner.running.lock().remove(&id);
    let _g = span.enter();
    let (ok, result, error) = match outcome {
        Ok(v) => (true, Some(v), None),
        Err(Error::Cancelled) => {
            tracing::info!("task stopped: cancelled");
            remove_upload(inner, &task).await;
            return;
        }
        Err(Error::Internal(e)) => {
            tracing::error!(error = %format!("{e:#}"), "task failed");
            (
                false,
                None,
                Some("internal error; see the server log".to_owned()),
            )
        }
        Err(e) => (false, None, Some(e.to_string())),
    };
    let (tid, now) = (id.clone(), crate::time::now_iso());
    let saved = inner
        .store
        .write(move |tx| repo::finish(tx, &tid, ok, result.as_ref(), error.as_deref(), &now))
        .await;
    if let Err(e) = saved {
        tracing::error!(error = %e, "recording the task outcome failed");
    }
    tracing::info!(
        ok,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "task finished"
    );
    remove_upload(inner, &task).await;
}

/// An upload's file is removed however its task ends (completed, failed, cancelled);
/// only a shutdown keeps it, for the task to resume.
async fn remove_upload(inner: &Inner, task: &TaskRow) {
    if task.kind == "upload" {
        let path = inner.uploads.join(&task.id);
        let _ = tokio::task::spawn_blocking(move || super::remove_file(&path)).await;
    }
}

/// Writes progress to the task row, off the async threads.
fn progress_reporter(inner: &Arc<Inner>, id: &str, lo: f64, hi: f64) -> Progress {
    let (store, id) = (inner.store.clone(), id.to_owned());
    Arc::new(move |p: f64| {
        let (store, id) = (store.clone(), id.clone());
        let value = lo + (hi - lo) * p.clamp(0.0, 1.0);
        tokio::task::spawn_blocking(move || {
            if let Err(e) = store.write_sync(|tx| repo::set_progress(tx, &id, value)) {
                tracing::warn!(error = %e, "recording progress failed");
            }
        });
    })
}

/// Longest a task keeps retrying while a model it needs is unavailable (a remote
/// inference server that is down): the upload stays on disk and the task running.
const UNAVAILABLE_RETRY_FOR: Duration = Duration::from_secs(15 * 60);

/// [`execute`], run again with growing pauses while it fails because a model is
/// unavailable or overloaded: a source is written whole or not at all, so another run
/// starts clean, and nothing the client sent is lost while an embedding server is down.
async fn execute_retrying(inner: &Arc<Inner>, task: &TaskRow) -> Result<Value> {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_secs(2);
    loop {
        match execute(inner, task).await {
            Err(Error::Unavailable(m) | Error::Overloaded(m))
                if started.elapsed() + pause < UNAVAILABLE_RETRY_FOR =>
            {
                tracing::warn!(error = %m, retry_in_s = pause.as_secs(), "a model the task needs is unavailable; the task will run again");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = inner.shutdown.cancelled() => return Err(Error::Unavailable(m)),
                }
                pause = (pause * 2).min(Duration::from_secs(60));
            }
            other => return other,
        }
    }
}

async fn execute(inner: &Arc<Inner>, task: &TaskRow) -> Result<Value> {
    match TaskKind::from_row(&task.kind, &task.params)? {
        TaskKind::Upload { filename, section } => upload(inner, &task.id, filename, section).await,
        TaskKind::Scrape {
            urls,
            timeout,
            skip_duplicates,
        } => scrape(inner, &task.id, urls, timeout, skip_duplicates).await,
        TaskKind::Reindex(saved) => super::reindex::run(inner, task, saved).await,
    }
}

async fn upload(
    inner: &Arc<Inner>,
    task_id: &str,
    filename: String,
    section: String,
) -> Result<Value> {
    let path = inner.uploads.join(task_id);
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(path))
        .await?
        .map_err(|e| {
            Error::bad_request(format!(
                "the uploaded file is no longer available ({e}); upload it again"
            ))
        })?;
    let format = crate::parse::Format::for_filename(&filename)
        .map_err(|e| Error::bad_request(e.to_string()))?;
    let result = inner
        .kb
        .ingest(IngestSource {
            name: filename,
            source_type: SourceType::File,
            format,
            bytes,
            section,
            title_hint: None,
            check_duplicates: true,
            task: Some(task_id.to_owned()),
            progress: Some(progress_reporter(inner, task_id, 0.0, 1.0)),
        })
        .await?;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

async fn scrape(
    inner: &Arc<Inner>,
    task_id: &str,
    urls: Vec<String>,
    timeout: Duration,
    skip: bool,
) -> Result<Value> {
    let n = urls.len().max(1) as f64;
    let (mut ok, mut failed, mut chunks) = (0u64, 0u64, 0u64);
    let mut results = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let progress = progress_reporter(inner, task_id, i as f64 / n, (i + 1) as f64 / n);
        let req = ScrapeRequest {
            url: url.clone(),
            timeout,
            skip_duplicates: skip,
            task: Some(task_id.to_owned()),
            progress: Some(progress.clone()),
        };
        match inner.kb.scrape(req).await {
            Ok(r) => {
                ok += 1;
                chunks += r.chunks_added;
                results.push(serde_json::to_value(r).unwrap_or(Value::Null));
            }
            Err(Error::Cancelled) => return Err(Error::Cancelled),
            Err(e) => {
                failed += 1;
                tracing::warn!(%url, error = %e, "scrape failed");
                results.push(json!({ "success": false, "url": url, "error": e.to_string() }));
            }
        }
        progress(1.0);
    }
    Ok(json!({
        "urls_processed": urls.len(),
        "successful": ok,
        "failed": failed,
        "total_chunks_added": chunks,
        "results": results,
    }))
}
