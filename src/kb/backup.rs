//! Backups of a data directory as one portable archive (tar), and their restore.
//!
//! An archive holds `manifest.json` (what made it and what it holds, with each file's
//! size and SHA-256), `ragd.sqlite` (a consistent snapshot taken with SQLite's online
//! backup API: sources, chunks with their vectors, tasks, users, conversations,
//! settings) and `uploads/<task id>` for upload tasks not finished at that moment. The
//! derived indexes (usearch, tantivy) are not carried: a server started on the restored
//! directory rebuilds them from the database, as it does whenever they disagree with it.
//! Blocking functions: call them on a blocking thread.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::store::{backup as repo, Store};

/// The archive format's name and version in the manifest.
pub const FORMAT: &str = "ragd-backup";
pub const FORMAT_VERSION: u32 = 1;
const MANIFEST: &str = "manifest.json";
const DATABASE: &str = "ragd.sqlite";
const UPLOADS: &str = "uploads";

/// What an archive holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    /// The ragd version that wrote it.
    pub ragd_version: String,
    /// The database schema version (the number of migrations applied).
    pub schema_version: u32,
    pub created_at: String,
    pub sources: u64,
    pub chunks: u64,
    pub users: u64,
    pub conversations: u64,
    pub files: Vec<FileEntry>,
}

/// One file of an archive.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

/// Where a backup reads from.
pub struct Source<'a> {
    pub store: &'a Store,
    pub data_dir: &'a Path,
}

impl crate::kb::KnowledgeBase {
    /// [`create`] on a blocking thread, from this knowledge base's store: a consistent
    /// archive while the server keeps working.
    pub async fn backup(&self, data_dir: PathBuf, dest: PathBuf) -> Result<Manifest> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            let src = Source {
                store: &store,
                data_dir: &data_dir,
            };
            create(&src, &dest, &|step| tracing::info!(step, "backup"))
        })
        .await?
    }
}

/// Writes a backup archive of `src` to `dest` (written beside it first, then renamed
/// into place, so `dest` is never half a backup). `progress` hears each step.
pub fn create(src: &Source<'_>, dest: &Path, progress: &dyn Fn(&str)) -> Result<Manifest> {
    let work = src
        .data_dir
        .join(format!(".backup-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(work.join(UPLOADS)).map_err(io("creating a work folder"))?;
    let out = (|| {
        progress("copying the database (online backup)");
        let db = work.join(DATABASE);
        src.store.backup_to(&db, |done, total| {
            tracing::debug!(done, total, "database pages copied")
        })?;
        let contents = repo::contents_of(&db)?;
        let mut files = vec![entry(&db, DATABASE)?];
        for id in &contents.unfinished_uploads {
            let held = src.data_dir.join(UPLOADS).join(id);
            let copy = work.join(UPLOADS).join(id);
            match std::fs::copy(&held, &copy) {
                Ok(_) => files.push(entry(&copy, &format!("{UPLOADS}/{id}"))?),
                // The task finished (and removed its file) since the snapshot: a restored
                // server marks it failed with the reason, as after any lost file.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::warn!(task_id = %id, "an upload task's file went away during the backup")
                }
                Err(e) => return Err(io("copying an upload task's file")(e)),
            }
        }
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            ragd_version: env!("CARGO_PKG_VERSION").into(),
            schema_version: contents.schema_version,
            created_at: crate::time::now_iso(),
            sources: contents.sources,
            chunks: contents.chunks,
            users: contents.users,
            conversations: contents.conversations,
            files,
        };
        progress("writing the archive");
        write_archive(&work, &manifest, dest)?;
        Ok(manifest)
    })();
    if let Err(e) = std::fs::remove_dir_all(&work) {
        tracing::warn!(path = %work.display(), error = %e, "removing the backup work folder failed");
    }
    out
}

fn write_archive(work: &Path, manifest: &Manifest, dest: &Path) -> Result<()> {
    let part = part_path(dest);
    let written = (|| -> std::io::Result<()> {
        let mut tar = tar::Builder::new(BufWriter::new(File::create(&part)?));
        let json = serde_json::to_vec_pretty(manifest).map_err(std::io::Error::other)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(json.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
        header.set_cksum();
        tar.append_data(&mut header, MANIFEST, json.as_slice())?;
        for f in &manifest.files {
            tar.append_path_with_name(work.join(&f.name), &f.name)?;
        }
        let file = tar.into_inner()?.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&part, dest)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&part);
        Error::Internal(anyhow::Error::new(e).context(format!("writing {}", dest.display())))
    })
}

/// Reads an archive's manifest, checking it is one this ragd can restore.
pub fn read_manifest(archive: &Path) -> Result<Manifest> {
    let file = File::open(archive)
        .map_err(|e| Error::bad_request(format!("cannot read {}: {e}", archive.display())))?;
    let mut tar = tar::Archive::new(BufReader::new(file));
    let not_backup = || {
        Error::bad_request(format!(
            "{} is not a ragd backup (no manifest.json at its start)",
            archive.display()
        ))
    };
    let mut entries = tar.entries().map_err(|_| not_backup())?;
    let mut first = entries
        .next()
        .ok_or_else(not_backup)?
        .map_err(|_| not_backup())?;
    if first.path().ok().as_deref() != Some(Path::new(MANIFEST)) {
        return Err(not_backup());
    }
    let mut json = String::new();
    first.read_to_string(&mut json).map_err(|_| not_backup())?;
    let m: Manifest = serde_json::from_str(&json).map_err(|_| not_backup())?;
    check_version(&m)?;
    Ok(m)
}

fn check_version(m: &Manifest) -> Result<()> {
    if m.format != FORMAT || m.format_version != FORMAT_VERSION {
        return Err(Error::bad_request(format!(
            "this backup's format is {} version {}; this ragd ({}) reads {FORMAT} version {FORMAT_VERSION}",
            m.format,
            m.format_version,
            env!("CARGO_PKG_VERSION")
        )));
    }
    let ours = repo::schema_version();
    if m.schema_version != ours {
        return Err(Error::bad_request(format!(
            "this backup was made by ragd {} with database schema {}; this ragd ({}) uses schema {ours}: \
             restore it with ragd {} (a newer ragd then upgrades the restored directory when it starts)",
            m.ragd_version,
            m.schema_version,
            env!("CARGO_PKG_VERSION"),
            m.ragd_version
        )));
    }
    Ok(())
}

/// Restores the archive `src` into `data_dir`, which must be empty or not exist yet.
/// Every file is checked against the manifest before anything is put in place; on any
/// failure `data_dir` is left as empty as it was.
pub fn restore(src: &Path, data_dir: &Path, progress: &dyn Fn(&str)) -> Result<Manifest> {
    let manifest = read_manifest(src)?;
    if let Ok(mut entries) = std::fs::read_dir(data_dir) {
        // The data-dir lock file of the caller's own lock is the one thing allowed.
        if entries.any(|e| e.map(|e| e.file_name() != LOCK_FILE).unwrap_or(true)) {
            return Err(Error::Conflict(format!(
                "{} is not empty: restore into a new or empty data directory (nothing was changed)",
                data_dir.display()
            )));
        }
    }
    std::fs::create_dir_all(data_dir).map_err(io("creating the data directory"))?;
    let work = data_dir.join(format!(".restore-{}", uuid::Uuid::new_v4()));
    let out = (|| {
        progress("unpacking and checking the archive");
        unpack(src, &work, &manifest)?;
        let contents = repo::contents_of(&work.join(DATABASE))?;
        if contents.sources != manifest.sources || contents.chunks != manifest.chunks {
            return Err(Error::bad_request(
                "the archive's database does not hold what its manifest says",
            ));
        }
        progress("putting the files in place");
        std::fs::create_dir_all(data_dir.join(UPLOADS)).map_err(io("creating uploads"))?;
        for f in &manifest.files {
            std::fs::rename(work.join(&f.name), data_dir.join(&f.name))
                .map_err(io("moving a restored file into place"))?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&work);
    if out.is_err() {
        // Leave the directory as empty as it was found.
        let _ = std::fs::remove_file(data_dir.join(DATABASE));
        let _ = std::fs::remove_dir_all(data_dir.join(UPLOADS));
    }
    out.map(|()| manifest)
}

/// The lock file a data directory's holder keeps (allowed in a restore target).
pub const LOCK_FILE: &str = "ragd.lock";

fn unpack(src: &Path, work: &Path, manifest: &Manifest) -> Result<()> {
    std::fs::create_dir_all(work.join(UPLOADS)).map_err(io("creating a work folder"))?;
    let file = File::open(src).map_err(io("opening the archive"))?;
    let mut tar = tar::Archive::new(BufReader::new(file));
    let corrupt = |why: String| Error::bad_request(format!("the backup is damaged: {why}"));
    let mut seen = 0usize;
    for e in tar.entries().map_err(|e| corrupt(e.to_string()))? {
        let mut e = e.map_err(|e| corrupt(e.to_string()))?;
        let name = e
            .path()
            .map_err(|e| corrupt(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        if name == MANIFEST {
            continue;
        }
        // Names are checked against the manifest, never used as paths as they come.
        let Some(expected) = manifest.files.iter().find(|f| f.name == name) else {
            return Err(corrupt(format!("unexpected entry {name:?}")));
        };
        if !is_safe_name(&name) {
            return Err(corrupt(format!("unsafe entry name {name:?}")));
        }
        let path = work.join(&name);
        let mut out = BufWriter::new(File::create(&path).map_err(io("writing a restored file"))?);
        let mut hasher = Sha256::default();
        let mut buf = vec![0u8; 1 << 16];
        let mut bytes = 0u64;
        loop {
            let n = e.read(&mut buf).map_err(|e| corrupt(e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(io("writing a restored file"))?;
            bytes += n as u64;
        }
        let file = out
            .into_inner()
            .map_err(|e| io("writing a restored file")(e.into_error()))?;
        file.sync_all().map_err(io("syncing a restored file"))?;
        if bytes != expected.bytes || hex::encode(hasher.finalize()) != expected.sha256 {
            return Err(corrupt(format!("{name} does not match its checksum")));
        }
        seen += 1;
    }
    if seen != manifest.files.len() {
        return Err(corrupt(format!(
            "{} of {} files are missing",
            manifest.files.len() - seen,
            manifest.files.len()
        )));
    }
    let schema = repo::schema_version_of(&work.join(DATABASE))?;
    if schema != manifest.schema_version {
        return Err(corrupt(
            "its database's schema is not the manifest's".into(),
        ));
    }
    Ok(())
}

/// `ragd.sqlite` or `uploads/<task id>`.
fn is_safe_name(name: &str) -> bool {
    name == DATABASE
        || name.strip_prefix("uploads/").is_some_and(|id| {
            !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn entry(path: &Path, name: &str) -> Result<FileEntry> {
    let mut f = File::open(path).map_err(io("reading a file to back up"))?;
    let mut hasher = Sha256::default();
    let bytes = std::io::copy(&mut f, &mut hasher).map_err(io("reading a file to back up"))?;
    Ok(FileEntry {
        name: name.to_owned(),
        bytes,
        sha256: hex::encode(hasher.finalize()),
    })
}

fn part_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".part");
    PathBuf::from(s)
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::Internal(anyhow::Error::new(e).context(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_names_are_unpacked() {
        assert!(is_safe_name("ragd.sqlite"));
        assert!(is_safe_name("uploads/0b7c-11aa"));
        assert!(!is_safe_name("uploads/../../etc/passwd"));
        assert!(!is_safe_name("/etc/passwd"));
        assert!(!is_safe_name("uploads/"));
    }
}
