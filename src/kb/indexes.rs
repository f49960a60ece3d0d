//! Start-up reconciliation of the derived indexes with SQLite: an index whose recorded
//! generation or size differs from the store is rebuilt from the stored chunks and
//! embeddings (no re-embedding), so deleting or damaging either loses nothing.

use super::search::searchable;
use crate::error::Result;
use crate::retrieval::fulltext::FtDoc;
use crate::retrieval::{FullTextIndex, OnDisk, VectorStore};
use crate::store::{chunks as repo, Store};

const BATCH: usize = 2048;

/// Brings both indexes in line with the store. Blocking; run at start-up.
pub fn reconcile(
    store: &Store,
    vectors: &dyn VectorStore,
    vdisk: OnDisk,
    fulltext: &FullTextIndex,
    fdisk: OnDisk,
) -> Result<()> {
    let (generation, count) =
        store.read_sync(|c| Ok((repo::generation(c)?, repo::count_chunks(c)?)))?;
    let current = |d: OnDisk| d.generation == Some(generation) && d.count == count;
    let rebuild_vectors = !current(vdisk);
    let rebuild_fulltext = !current(fdisk);
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
    let mut batch: Vec<(u64, String, String, Vec<f32>)> = Vec::with_capacity(BATCH);
    let mut done = 0u64;
    let mut flush = |batch: &mut Vec<(u64, String, String, Vec<f32>)>| -> Result<()> {
        if rebuild_vectors {
            let items: Vec<(u64, &[f32])> = batch
                .iter()
                .map(|(k, _, _, v)| (*k, v.as_slice()))
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
        repo::for_each_chunk(c, |key, id, text, v| {
            // The full-text index holds the searchable (Arabic-normalised) form.
            batch.push((key, id.to_owned(), searchable(text), v));
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
