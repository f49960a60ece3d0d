//! What earlier syncs sent to one knowledge base: per file its size,
//! modification time and SHA-256, saved after every batch the knowledge base answered.
//! A file whose size and time (or, failing those, content) are unchanged, and whose
//! source the knowledge base still has, is not sent again; an interrupted or killed run
//! resumes from the last saved batch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The saved state of one knowledge base's ingests.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct IngestState {
    /// Which knowledge base (`server:<url>` or `dir:<path>`).
    pub target: String,
    /// By absolute path.
    pub files: BTreeMap<PathBuf, Seen>,
}

/// A file as it was when the knowledge base last answered for it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Seen {
    /// The source name it is stored under.
    pub name: String,
    pub size: u64,
    pub modified_ns: u128,
    pub sha256: String,
    /// Its content is stored under another source (a duplicate): it was never stored
    /// under `name`.
    #[serde(default)]
    pub duplicate: bool,
}

/// Size and modification time of a file.
pub fn stamp(meta: &std::fs::Metadata) -> (u64, u128) {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    (meta.len(), modified)
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl IngestState {
    /// Loads the state at `path` for `target` (a missing file, or another target's, is
    /// an empty state).
    pub fn load(path: &Path, target: &str) -> anyhow::Result<Self> {
        let fresh = || Self {
            target: target.to_owned(),
            files: BTreeMap::new(),
        };
        match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<Self>(&bytes) {
                Ok(s) if s.target == target => Ok(s),
                Ok(_) => Ok(fresh()),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "ignoring an unreadable ingest state");
                    Ok(fresh())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(fresh()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// Writes `bytes` to `path` atomically (a temporary file renamed over the old one).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Where the state of `target` is kept by default: under `$XDG_STATE_HOME/ragd/ingest`
/// (or `~/.local/state/ragd/ingest`), one file per knowledge base.
pub fn default_path(target: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ragd/ingest")
        .join(format!("{}.json", &sha256_hex(target.as_bytes())[..16]))
}
