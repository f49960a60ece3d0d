//! Timestamps in the contract's format: UTC, ISO 8601, microseconds, no timezone.

use chrono::Utc;

/// Now, as `2026-11-21T07:35:00.123456`.
pub fn now_iso() -> String {
    Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}
