//! Many files at once (`/upload/bulk`, `/upload/bulk/zip`): every file goes through
//! ingestion's stages side by side with the others (parsing bounded by the parse
//! permits), so their chunks share the embedder's passes and their writes share group
//! commits, while each file stays atomic and has its own outcome; and the hostile-ZIP
//! rules for archives.

use std::io::Read as _;

use futures::StreamExt as _;
use serde::Serialize;
use utoipa::ToSchema;

use super::ingest::FileUpload;
use super::{IngestionResult, KnowledgeBase};
use crate::error::{Error, Result};

/// An error for one file of a bulk upload.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileError {
    pub filename: String,
    pub error: String,
}

/// Outcome of a bulk upload.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BulkResult {
    pub total_files: usize,
    pub successful: usize,
    pub failed: usize,
    pub duplicates: usize,
    pub total_chunks_added: u64,
    pub results: Vec<IngestionResult>,
    pub errors: Vec<FileError>,
}

/// Limits on one uploaded ZIP.
#[derive(Debug, Clone, Copy)]
pub struct ZipLimits {
    pub max_entries: usize,
    pub max_entry_bytes: u64,
    pub max_total_bytes: u64,
    /// Largest inflated/compressed ratio of an entry over 1 MiB.
    pub max_ratio: u64,
}

/// Files inside a ZIP: every entry is checked (count, names, declared and real sizes,
/// ratio) and inflated before anything is ingested, so a bad archive writes nothing.
/// Entry names are reduced to file names; they are never used as paths.
pub fn unzip(bytes: &[u8], limits: ZipLimits) -> Result<Vec<(String, Vec<u8>)>> {
    let bad = |m: String| Error::bad_request(format!("the ZIP archive was refused: {m}"));
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| bad(format!("not a readable ZIP ({e})")))?;
    if zip.len() > limits.max_entries {
        return Err(bad(format!(
            "{} entries; the limit is {}",
            zip.len(),
            limits.max_entries
        )));
    }
    let mut declared = 0u64;
    for i in 0..zip.len() {
        let e = zip.by_index_raw(i).map_err(|e| bad(e.to_string()))?;
        let name = e.name().to_owned();
        let traversal = name.starts_with(['/', '\\'])
            || name.split(['/', '\\']).any(|p| p == "..")
            || name.chars().nth(1) == Some(':')
            || name.chars().any(char::is_control);
        if traversal {
            return Err(bad(format!(
                "entry '{}' has an unsafe path",
                name.escape_debug()
            )));
        }
        if e.is_dir() {
            continue;
        }
        if e.size() > limits.max_entry_bytes {
            return Err(bad(format!(
                "entry '{name}' expands to {} bytes; the limit is {}",
                e.size(),
                limits.max_entry_bytes
            )));
        }
        declared = declared.saturating_add(e.size());
        if e.size() > 1 << 20 && e.size() / e.compressed_size().max(1) > limits.max_ratio {
            return Err(bad(format!(
                "entry '{name}' has a compression ratio typical of a ZIP bomb"
            )));
        }
    }
    if declared > limits.max_total_bytes {
        return Err(bad(format!(
            "it expands to {declared} bytes; the limit is {}",
            limits.max_total_bytes
        )));
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    for i in 0..zip.len() {
        let e = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        if e.is_dir() {
            continue;
        }
        let name = e
            .name()
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or_default()
            .to_owned();
        let compressed = e.compressed_size().max(1);
        let path = e.name().to_owned();
        let mut buf = Vec::new();
        // Declared sizes can lie: the real inflated size is capped while reading.
        let read = e
            .take(limits.max_entry_bytes + 1)
            .read_to_end(&mut buf)
            .map_err(|err| bad(format!("entry '{path}': {err}")))?;
        total += read as u64;
        if read as u64 > limits.max_entry_bytes || total > limits.max_total_bytes {
            return Err(bad(format!("entry '{path}' expands past the size limits")));
        }
        if read as u64 > 1 << 20 && read as u64 / compressed > limits.max_ratio {
            return Err(bad(format!(
                "entry '{path}' has a compression ratio typical of a ZIP bomb"
            )));
        }
        if path.starts_with("__MACOSX/") || name.starts_with("._") || name.is_empty() {
            continue;
        }
        out.push((name, buf));
    }
    Ok(out)
}

/// Files of one request in flight at once: enough that the embedder's queue never runs
/// dry while some files are being parsed or stored.
const FILES_IN_FLIGHT: usize = 64;

impl KnowledgeBase {
    /// Ingests each file; failures are reported per file, not as a whole, in the order
    /// the files were sent.
    #[tracing::instrument(skip_all, fields(files = files.len()))]
    pub async fn ingest_many(&self, files: Vec<(String, Vec<u8>)>, section: String) -> BulkResult {
        let started = std::time::Instant::now();
        let total_files = files.len();
        let outcomes: Vec<(String, Result<IngestionResult>)> = futures::stream::iter(files)
            .map(|(filename, bytes)| {
                let section = section.clone();
                async move {
                    let r = self
                        .ingest_file(FileUpload {
                            filename: filename.clone(),
                            bytes,
                            section,
                        })
                        .await;
                    (filename, r)
                }
            })
            .buffered(FILES_IN_FLIGHT)
            .collect()
            .await;
        let mut out = BulkResult {
            total_files,
            successful: 0,
            failed: 0,
            duplicates: 0,
            total_chunks_added: 0,
            results: Vec::new(),
            errors: Vec::new(),
        };
        for (filename, r) in outcomes {
            match r {
                Ok(res) => {
                    out.successful += 1;
                    out.duplicates += usize::from(res.is_duplicate);
                    out.total_chunks_added += res.chunks_added;
                    out.results.push(res);
                }
                Err(e) => {
                    let error = match e {
                        Error::Internal(err) => {
                            tracing::error!(%filename, error = %format!("{err:#}"), "bulk item failed");
                            "internal error; see the server log".to_owned()
                        }
                        other => other.to_string(),
                    };
                    out.failed += 1;
                    out.results.push(IngestionResult {
                        success: false,
                        filename: Some(filename.clone()),
                        error: Some(error.clone()),
                        ..Default::default()
                    });
                    out.errors.push(FileError { filename, error });
                }
            }
        }
        tracing::info!(
            successful = out.successful,
            failed = out.failed,
            duplicates = out.duplicates,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "bulk upload done"
        );
        out
    }
}
