//! One process per data directory: `ragd serve` and `ragd mcp --data-dir` hold an
//! exclusive lock on `<data_dir>/ragd.lock` while they run, so a second one fails at
//! once with a clear message instead of opening indexes another process is writing
//! (tantivy would find its writer lock busy and rebuild the index under the server).
//! The operating system releases the lock when the process ends, however it ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use anyhow::Context as _;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "ragd.lock";

/// The held lock; released when dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock of `data_dir` (creating the directory), or fails naming the
    /// directory when another process holds it.
    pub fn acquire(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating data directory {}", data_dir.display()))?;
        let path = data_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(TryLockError::WouldBlock) => anyhow::bail!(
                "the data directory {} is in use by another ragd process (a running server?)",
                data_dir.display()
            ),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let e = DataDirLock::acquire(dir.path()).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
