//! Many files at once (`/upload/bulk`, `/upload/bulk/zip`): every file goes through
//! ingestion's stages side by side with the others (parsing bounded by the parse
//! permits), so their chunks share the embedder's passes and their writes share group
//! commits, while each file stays atomic and has its own outcome. A ZIP of documents
//! is unpacked by `parse::archive` (one reader, one set of limits) and then ingested
//! the same way.

use futures::StreamExt as _;
use serde::Serialize;
use utoipa::ToSchema;

use super::ingest::{FileUpload, Ingested};
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

/// Files of one request in flight at once: enough that the embedder's queue never runs
/// dry while some files are being parsed or stored.
const FILES_IN_FLIGHT: usize = 64;

impl KnowledgeBase {
    /// Unpacks a ZIP of documents and ingests every file in it. The whole archive is
    /// checked and inflated (on a blocking thread) before anything is ingested, so a
    /// refused archive writes nothing.
    #[tracing::instrument(skip_all, fields(bytes = bytes.len()))]
    pub async fn ingest_zip(&self, bytes: Vec<u8>, section: String) -> Result<BulkResult> {
        let limits = self.zip_limits;
        let files =
            tokio::task::spawn_blocking(move || crate::parse::archive::files(&bytes, limits))
                .await?
                .map_err(|e| Error::bad_request(format!("the ZIP archive was refused: {e}")))?;
        if files.is_empty() {
            return Err(Error::bad_request("the ZIP archive holds no files"));
        }
        Ok(self.ingest_many(files, section).await)
    }

    /// Ingests each file; failures are reported per file, not as a whole, in the order
    /// the files were sent.
    #[tracing::instrument(skip_all, fields(files = files.len()))]
    pub async fn ingest_many(&self, files: Vec<(String, Vec<u8>)>, section: String) -> BulkResult {
        let started = std::time::Instant::now();
        let total_files = files.len();
        let ingested: Vec<(String, Result<Ingested>)> = futures::stream::iter(files)
            .map(|(filename, bytes)| {
                let section = section.clone();
                async move {
                    let r = self
                        .ingest_file_unacknowledged(FileUpload {
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
        // The files are answered together, so they become visible to searches together:
        // their groups share one commit of the full-text index.
        if let Some(g) = ingested
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok()?.generation)
            .max()
        {
            self.acknowledge(g);
        }
        let outcomes = ingested
            .into_iter()
            .map(|(name, r)| (name, r.map(|i| i.result)));
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
