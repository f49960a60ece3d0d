//! The knowledge base's figures for `/metrics`: queue depths, index sizes, bytes on
//! disk, and the embedder's and ingestion's running totals.

use std::path::Path;

use super::KnowledgeBase;
use crate::error::Result;
use crate::store::chunks as repo;
use crate::telemetry::{EmbedderTotals, IngestionTotals, Snapshot};

impl KnowledgeBase {
    /// A snapshot of the knowledge base's metrics (tasks are the task system's to add).
    pub async fn metrics(&self) -> Result<Snapshot> {
        let (chunks, sources) = self
            .store
            .read(|c| Ok((repo::count_chunks(c)?, repo::count_sources(c)?)))
            .await?;
        let db = self.store.path().to_owned();
        let vectors = std::path::PathBuf::from(self.vectors.location());
        let fulltext = self.fulltext.path().to_owned();
        let disk_bytes = tokio::task::spawn_blocking(move || {
            let wal = db.with_extension("sqlite-wal");
            vec![
                ("database", file_bytes(&db) + file_bytes(&wal)),
                ("vectors", file_bytes(&vectors)),
                ("fulltext", dir_bytes(&fulltext)),
            ]
        })
        .await?;
        let (interactive, bulk) = self.embedder.queue_depths();
        let embed = self.embedder.stats();
        let stages = self.stage_times();
        Ok(Snapshot {
            queue_depths: vec![
                ("searches", self.search_gate.waiting() as u64),
                ("answers", self.answer_gate.waiting() as u64),
                ("embedder_interactive", interactive as u64),
                ("embedder_bulk", bulk as u64),
                ("llm", self.llm().map_or(0, |g| g.in_flight() as u64)),
            ],
            tasks: Vec::new(),
            index_entries: vec![
                ("sources", sources),
                ("chunks", chunks),
                ("vectors", self.vectors.count()),
                ("fulltext_docs", self.fulltext.len()),
            ],
            disk_bytes,
            embedder: EmbedderTotals {
                tokens: embed.tokens,
                sequences: embed.sequences,
                busy_seconds: embed.busy_s,
                cache_hits: embed.cache_hits,
                cache_misses: embed.cache_misses,
            },
            ingestion: IngestionTotals {
                sources: stages.sources,
                chunks: stages.chunks,
                stage_seconds: vec![
                    ("parse", stages.parse_s),
                    ("embed", stages.embed_s),
                    ("store", stages.store_s),
                ],
            },
        })
    }
}

fn file_bytes(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Bytes of the files under `dir` (recursively); 0 when it cannot be read.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
