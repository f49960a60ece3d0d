//! The one assistant settings record, stored as JSON.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::error::Result;

/// The stored JSON, if settings were ever saved.
pub fn get(c: &Connection) -> Result<Option<String>> {
    Ok(
        c.query_row("SELECT value FROM settings WHERE id = 1", [], |r| r.get(0))
            .optional()?,
    )
}

/// Replaces the record.
pub fn put(tx: &Transaction<'_>, json: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO settings (id, value, updated_at) VALUES (1, ?1, ?2) \
         ON CONFLICT(id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        params![json, now],
    )?;
    Ok(())
}
