//! Start-up reconciliation of the derived indexes with SQLite: an index whose recorded
//! generation or size differs from the store is rebuilt from the stored chunks and
//! embeddings (no re-embedding), so deleting or damaging either loses nothing. The
//! vector index holds only the vectors of the running embedder: those another embedder
//! made (a knowledge base waiting to be re-embedded, perhaps of another dimension) are
//! never mixed in; the re-embedding task adds each chunk as it re-embeds it.

use super::search::searchable;
use crate::error::Result;
use crate::retrieval::fulltext::FtDoc;
use crate::retrieval::{FullTextIndex, OnDisk, VectorStore};
use crate::store::{chunks as repo, embedders, Store};

const BATCH: usize = 2048;

/// Brings both indexes in line with the store; the vector index with the vectors the
/// embedder `embedder` (`store::embedders`) made. Blocking; run at start-up.
pub fn reconcile(
    store: &Store,
    vectors: &dyn VectorStore,
    vdisk: OnDisk,
    fulltext: &FullTextIndex,
    fdisk: OnDisk,
    embedder: i64,
) -> Result<()> {
    let (generation, count, embedded) = store.read_sync(|c| {
        Ok((
            repo::generation(c)?,
            repo::count_chunks(c)?,
            embedders::count_by(c, embedder)?,
        ))
    })?;
    let current = |d: OnDisk, n: u64| d.generation == Some(generation) && d.count == n;
    let rebuild_vectors = !current(vdisk, embedded);
    let rebuild_fulltext = !current(fdisk, count);
    if !rebuild_vectors && !rebuild_fulltext {
        tracing::info!(generation, chunks = count, "indexes match the store");
        return Ok(());
    }
    let started = std::time::Instant::now();
    if count == 0 && generation == 0 {
        tracing::info!("new data directory: creating empty indexes");
    } else {
        tracing::warn!(
        generation,
        chunks = count,
        vectors = embedded,
        vectors_on_disk = ?vdisk,
        fulltext_on_disk = ?fdisk,
        rebuild_vectors,
        rebuild_fulltext,
            "rebuilding derived indexes from the store"
        );
    }
    if rebuild_vectors {
        vectors.clear()?;
    }
    if rebuild_fulltext {
        fulltext.clear(generation)?;
    }
    type Row = (u64, String, String, Option<Vec<f32>>);
    let mut batch: Vec<Row> = Vec::with_capacity(BATCH);
    let mut done = 0u64;
    let mut flush = |batch: &mut Vec<Row>| -> Result<()> {
        if rebuild_vectors {
            let items: Vec<(u64, &[f32])> = batch
                .iter()
                .filter_map(|(k, _, _, v)| Some((*k, v.as_deref()?)))
                .collect();
            vectors.apply(&[], &items, generation)?;
        }
        if rebuild_fulltext {
            let docs: Vec<FtDoc<'_>> = batch
                .iter()
                .map(|(k, id, t, _)| FtDoc {
                    key: *k,
                    chunk_id: id,
                    text: t,
                })
                .collect();
            fulltext.apply(&[], &docs, generation)?;
        }
        done += batch.len() as u64;
        tracing::info!(done, total = count, "rebuilding indexes");
        batch.clear();
        Ok(())
    };
    store.read_sync(|c| {
        repo::for_each_chunk(c, embedder, |ch| {
            // The full-text index holds the searchable (Arabic-normalised) form.
            batch.push((ch.key, ch.id.to_owned(), searchable(ch.text), ch.embedding));
            if batch.len() >= BATCH {
                flush(&mut batch)?;
            }
            Ok(())
        })
    })?;
    flush(&mut batch)?;
    if rebuild_vectors {
        // Records the generation even for an empty store.
        vectors.apply(&[], &[], generation)?;
        vectors.flush()?;
    }
    tracing::info!(
        chunks = count,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "indexes rebuilt"
    );
    Ok(())
}
