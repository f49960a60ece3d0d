//! SQLite, the source of truth. Only this module speaks SQL. Every call runs on a
//! blocking thread; writes go through one connection, reads through a small pool.

pub mod actions;
pub mod backup;
pub mod chunks;
pub mod conversations;
pub mod embedders;
pub mod migrations;
pub mod onboarding;
pub mod settings;
pub mod tasks;
pub mod users;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

pub use chunks::{ChunkRow, NewChunk, SourceRow};
/// A write transaction, as the services above see it (they pass it to this module's
/// functions, never run SQL on it).
pub use rusqlite::Transaction;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Self::Internal(anyhow::Error::new(e).context("sqlite"))
    }
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    /// Admits [`Store::read`]s, so at most [`READERS`] run at once on their connections
    /// (kept open) instead of a burst opening and closing connections of its own.
    read_permits: tokio::sync::Semaphore,
}

/// Read connections kept open, and async reads run at once. A bulk upload reads twice
/// per file before parsing it: 50 files at once opened (and closed) dozens of
/// connections, each a file open, a WAL map and fresh statements.
const READERS: usize = 8;

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database at `path`, switches it to WAL and runs
    /// any pending migrations.
    pub fn open(path: &Path) -> Result<Self> {
        let mut writer = Connection::open(path)?;
        writer.pragma_update(None, "journal_mode", "WAL")?;
        configure(&writer)?;
        migrations::run(&mut writer)?;
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
                read_permits: tokio::sync::Semaphore::new(READERS),
            }),
        })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn reader(&self) -> Result<Connection> {
        if let Some(c) = self.inner.readers.lock().pop() {
            return Ok(c);
        }
        let c = Connection::open_with_flags(
            &self.inner.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        configure(&c)?;
        Ok(c)
    }

    /// Runs `f` with a read connection on the calling thread (which must be allowed to block).
    pub fn read_sync<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.reader()?;
        let out = f(&conn);
        let mut pool = self.inner.readers.lock();
        if pool.len() < READERS {
            pool.push(conn);
        }
        out
    }

    /// Runs `f` inside one write transaction on the calling thread; commits if it returns Ok.
    pub fn write_sync<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.inner.writer.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// [`read_sync`](Self::read_sync) on a blocking thread.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let _permit = self
            .inner
            .read_permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("the store is closed".into()))?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read_sync(f)).await?
    }

    /// [`write_sync`](Self::write_sync) on a blocking thread.
    pub async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.write_sync(f)).await?
    }

    /// A cheap liveness check for `/health/ready`.
    pub async fn ping(&self) -> Result<()> {
        self.read(|c| {
            c.query_row("SELECT 1", [], |_| Ok(()))?;
            Ok(())
        })
        .await
    }
}

/// Runs `f` inside a savepoint of `tx`: if it fails, its changes alone are undone and
/// the enclosing transaction goes on (a group commit keeps each source atomic this way).
pub fn savepoint<T>(
    tx: &rusqlite::Transaction<'_>,
    f: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T>,
) -> Result<T> {
    tx.execute_batch("SAVEPOINT ragd_item")?;
    match f(tx) {
        Ok(v) => {
            tx.execute_batch("RELEASE ragd_item")?;
            Ok(v)
        }
        Err(e) => {
            tx.execute_batch("ROLLBACK TO ragd_item; RELEASE ragd_item")?;
            Err(e)
        }
    }
}

/// Maps "no row" to `NotFound(what)`.
pub(crate) fn not_found(e: rusqlite::Error, what: impl FnOnce() -> String) -> Error {
    match e {
        rusqlite::Error::QueryReturnedNoRows => Error::NotFound(what()),
        other => other.into(),
    }
}
