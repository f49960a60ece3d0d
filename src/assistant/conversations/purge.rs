//! Purging soft-deleted conversations after the retention period: on demand, lazily
//! before a list or a search, and from the sweeper task.

use std::sync::Arc;
use std::time::Duration;

use super::{repo, Conversations, IndexChange, Result, SWEEP_EVERY};
use crate::time::format_iso;

impl Conversations {
    /// Commits staged index changes (on a blocking thread); failures are logged (the
    /// index is then rebuilt at the next start-up).
    pub async fn commit_staged(&self) {
        let index = self.index.clone();
        match tokio::task::spawn_blocking(move || index.commit_staged()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "committing the conversation index failed")
            }
            Err(e) => tracing::error!(error = %e, "committing the conversation index panicked"),
        }
    }

    /// Removes, rows and index entries, every conversation deleted more than the retention
    /// period ago by the server's clock; returns how many.
    #[tracing::instrument(skip_all)]
    pub async fn purge_expired(&self) -> Result<u64> {
        let now = self.clock.now();
        *self.last_sweep.lock() = Some(now);
        let cutoff = format_iso(now - self.retention);
        let purged = self
            .write(move |tx| {
                let ids = repo::purge_deleted_before(tx, &cutoff)?;
                if ids.is_empty() {
                    return Ok((0, IndexChange::none()));
                }
                let generation = repo::bump_generation(tx)?;
                Ok((ids.len() as u64, IndexChange::remove(generation, ids)))
            })
            .await?;
        if purged > 0 {
            tracing::info!(purged, "deleted conversations purged");
        }
        Ok(purged)
    }

    /// Purges when the last sweep is older than [`SWEEP_EVERY`] by the server's clock.
    pub(super) async fn purge_if_due(&self) {
        let due = match *self.last_sweep.lock() {
            None => true,
            Some(t) => {
                self.clock.now() - t >= chrono::Duration::from_std(SWEEP_EVERY).unwrap_or_default()
            }
        };
        if due {
            if let Err(e) = self.purge_expired().await {
                tracing::error!(error = %e, "purging deleted conversations failed");
            }
        }
    }
}

/// How often staged index changes are committed (searches commit them first anyway).
const COMMIT_EVERY: Duration = Duration::from_secs(1);

/// The service's upkeep until it is dropped: commits staged index changes every
/// [`COMMIT_EVERY`], and runs [`Conversations::purge_expired`] at once and then every
/// [`SWEEP_EVERY`].
pub fn spawn_sweeper(conversations: &Arc<Conversations>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(conversations);
    tokio::spawn(async move {
        let mut commit = tokio::time::interval(COMMIT_EVERY);
        commit.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let purge = tokio::select! {
                _ = commit.tick() => false,
                _ = sweep.tick() => true,
            };
            // Holds the service only while working, so a stopped server's index is released.
            let Some(c) = weak.upgrade() else { break };
            if purge {
                if let Err(e) = c.purge_expired().await {
                    tracing::error!(error = %e, "purging deleted conversations failed; will retry");
                }
            } else {
                c.commit_staged().await;
            }
        }
    })
}
