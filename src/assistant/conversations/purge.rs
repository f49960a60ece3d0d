//! Purging soft-deleted conversations after the retention period: on demand, lazily
//! before a list or a search, and from the sweeper task.

use std::sync::Arc;

use super::{repo, Conversations, IndexChange, Result, SWEEP_EVERY};
use crate::time::format_iso;

impl Conversations {
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

/// Runs [`Conversations::purge_expired`] now and then every [`SWEEP_EVERY`], until the
/// service is dropped.
pub fn spawn_sweeper(conversations: &Arc<Conversations>) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(conversations);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Holds the service only while sweeping, so a stopped server's index is released.
            let Some(c) = weak.upgrade() else { break };
            if let Err(e) = c.purge_expired().await {
                tracing::error!(error = %e, "purging deleted conversations failed; will retry");
            }
        }
    })
}
