//! Consistent copies of the database while the server writes to it: SQLite's online
//! backup API, run as one step, so the copy is one read transaction's snapshot (in WAL
//! mode a reader never blocks the writer, and a one-step backup never restarts because
//! another connection wrote meanwhile).

use std::path::Path;

use rusqlite::backup::Backup;
use rusqlite::{Connection, OpenFlags};

use super::Store;
use crate::error::Result;

/// The schema version this build writes (the number of migrations).
pub fn schema_version() -> u32 {
    super::migrations::latest()
}

/// The schema version of the database file at `path` (read only; no migration runs).
pub fn schema_version_of(path: &Path) -> Result<u32> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    Ok(c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as u32)
}

impl Store {
    /// Writes a consistent copy of the whole database to `dest` (a new file), calling
    /// `progress(done_pages, total_pages)` once it is copied. Blocking.
    pub fn backup_to(&self, dest: &Path, progress: impl Fn(u64, u64)) -> Result<()> {
        let src = Connection::open_with_flags(
            self.path(),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        src.busy_timeout(std::time::Duration::from_secs(10))?;
        let mut out = Connection::open(dest)?;
        {
            let backup = Backup::new(&src, &mut out)?;
            // -1: every page in one step, under one read transaction.
            backup.step(-1)?;
            let p = backup.progress();
            let total = p.pagecount.max(0) as u64;
            progress(total - p.remaining.max(0) as u64, total);
        }
        // The copy is a plain database file (no WAL beside it), checked before use.
        out.pragma_update(None, "journal_mode", "DELETE")?;
        let ok: String = out.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        if ok != "ok" {
            return Err(anyhow::anyhow!("the copied database failed its check: {ok}").into());
        }
        Ok(())
    }
}

/// What a database file holds, for a backup's manifest (read only).
#[derive(Debug, Clone, Default)]
pub struct Contents {
    pub schema_version: u32,
    pub sources: u64,
    pub chunks: u64,
    pub users: u64,
    pub conversations: u64,
    /// Upload tasks not yet finished, whose held files a backup must carry.
    pub unfinished_uploads: Vec<String>,
}

/// Reads [`Contents`] from the database file at `path`.
pub fn contents_of(path: &Path) -> Result<Contents> {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let count = |table: &str| -> Result<u64> {
        Ok(
            c.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })? as u64,
        )
    };
    let unfinished = super::tasks::unfinished(&c)?
        .into_iter()
        .filter(|t| t.kind == "upload")
        .map(|t| t.id)
        .collect();
    Ok(Contents {
        schema_version: c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as u32,
        sources: count("sources")?,
        chunks: count("chunks")?,
        users: count("users")?,
        conversations: count("conversations")?,
        unfinished_uploads: unfinished,
    })
}
