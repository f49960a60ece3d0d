//! Timestamps in the contract's format: UTC, ISO 8601, microseconds, no timezone.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};

/// Now, as `2026-11-21T07:35:00.123456`.
pub fn now_iso() -> String {
    Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// The server's clock: the system time plus an offset that tests can move forward, so
/// expiries (pending actions, purges, rate-limit windows) are testable without waiting.
/// Clones share the offset.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Now, by this clock.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Now as Unix seconds.
    pub fn unix(&self) -> i64 {
        self.now().timestamp()
    }

    /// Now in the contract's format (see [`now_iso`]).
    pub fn now_iso(&self) -> String {
        format_iso(self.now())
    }

    /// Moves this clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        self.offset_ms
            .fetch_add(by.as_millis() as i64, Ordering::Relaxed);
    }
}

/// `t` as `2026-11-21T07:35:00.123456`.
pub fn format_iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}
