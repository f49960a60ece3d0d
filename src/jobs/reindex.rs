//! The reindex task: re-embeds, batch after batch, every chunk whose vector another
//! embedder made (`kb::reembed`), saving a checkpoint (the last key done, the progress)
//! after each batch. A task interrupted by a crash is resumed at start-up like any other
//! and goes on from its checkpoint; what a batch committed is never redone, since each
//! chunk records whose vector it holds. When none is left, the knowledge base adopts
//! the running embedder and serves searches again.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::task::ReindexCheckpoint;
use super::{now, Inner, Jobs, TaskAck, TaskKind, TaskStatus};
use crate::error::{Error, Result};
use crate::store::tasks::{self as repo, TaskRow};

/// Chunks re-embedded and committed together (one transaction, one checkpoint).
const BATCH: usize = 128;

/// Passes over the chunks before giving up; a second is needed only when chunks behind
/// the cursor took another embedder's vector meanwhile, which ingestion never does.
const MAX_PASSES: u32 = 3;

impl Jobs {
    /// Queues re-embedding every chunk whose vector another embedder made; a `Conflict`
    /// when a reindex task is already pending or running.
    pub async fn submit_reindex(&self) -> Result<TaskAck> {
        let kb = &self.inner.kb;
        let counts = kb.reembed_counts().await?;
        let id = uuid::Uuid::new_v4().to_string();
        let kind = TaskKind::Reindex(ReindexCheckpoint {
            embedder_id: Some(kb.searchable().embedder_id()),
            cursor: 0,
        });
        let created_at = now();
        let (tid, created) = (id.clone(), created_at.clone());
        self.inner
            .store
            .write(move |tx| {
                if let Some(t) = repo::unfinished_of_kind(tx, kind.name())? {
                    return Err(Error::Conflict(format!(
                        "a reindex task is already {} (task '{}'); follow it at /api/v1/tasks/{}",
                        t.status, t.id, t.id
                    )));
                }
                repo::insert(tx, &tid, kind.name(), &kind.params(), &created)
            })
            .await?;
        self.inner.wake.notify_one();
        tracing::info!(task_id = %id, remaining = counts.remaining, total = counts.total, "reindex task queued");
        Ok(TaskAck {
            task_id: id,
            status: TaskStatus::Pending,
            message: format!(
                "re-embedding {} of {} chunks with '{}'",
                counts.remaining,
                counts.total,
                kb.embedder().name()
            ),
            created_at,
        })
    }
}

/// Clears the knowledge base's record of a running reindex when dropped.
struct ClearProgress<'a>(&'a crate::kb::KnowledgeBase);

impl Drop for ClearProgress<'_> {
    fn drop(&mut self) {
        self.0.searchable().clear_progress();
    }
}

/// Runs a reindex task from its checkpoint.
pub(super) async fn run(
    inner: &Arc<Inner>,
    task: &TaskRow,
    saved: ReindexCheckpoint,
) -> Result<Value> {
    let kb = &inner.kb;
    let embedder_id = kb.searchable().embedder_id();
    let name = kb.embedder().name().to_owned();
    // A cursor saved while another embedder ran does not say what this one has done.
    let mut cursor = match saved.embedder_id {
        Some(id) if id == embedder_id => saved.cursor,
        _ => 0,
    };
    let start = kb.reembed_counts().await?;
    let already = start.total.saturating_sub(start.remaining);
    tracing::info!(
        embedder = %name,
        remaining = start.remaining,
        total = start.total,
        cursor,
        "re-embedding chunks"
    );
    kb.searchable().report_progress(already, start.total);
    // However the run ends (finished, failed, cancelled, stopped), it is not under way.
    let _progress = ClearProgress(kb);
    let started = Instant::now();
    let (mut reembedded, mut passes) = (0u64, 1u32);
    loop {
        let batch = kb.reembed_batch(cursor, BATCH, Some(&task.id)).await?;
        let Some(last) = batch.last_key else {
            if kb.finish_reembed().await? {
                break;
            }
            if passes >= MAX_PASSES {
                return Err(Error::Internal(anyhow::anyhow!(
                    "chunks still hold another embedder's vectors after {passes} passes"
                )));
            }
            passes += 1;
            cursor = 0;
            continue;
        };
        cursor = last;
        reembedded += batch.reembedded;
        let done = (already + reembedded).min(start.total);
        let params = TaskKind::Reindex(ReindexCheckpoint {
            embedder_id: Some(embedder_id),
            cursor,
        })
        .params();
        kb.searchable().report_progress(done, start.total);
        let progress = done as f64 / start.total.max(1) as f64;
        let so_far = json!({ "embedder": name, "chunks_done": done, "chunks_total": start.total });
        let id = task.id.clone();
        inner
            .store
            .write(move |tx| repo::checkpoint(tx, &id, &params, progress, &so_far))
            .await?;
        tracing::debug!(cursor, done, total = start.total, "reindex batch committed");
    }
    let end = kb.reembed_counts().await?;
    tracing::info!(
        embedder = %name,
        reembedded,
        total = end.total,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "re-embedding finished"
    );
    Ok(json!({
        "embedder": name,
        "dimension": kb.embedder().dim(),
        "chunks_done": end.total.saturating_sub(end.remaining),
        "chunks_total": end.total,
        "chunks_reembedded": reembedded,
    }))
}
