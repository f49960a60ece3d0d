//! Which embedder made the stored vectors: the `embedders` table (name, dimension,
//! fingerprint), each chunk's `embedder_id`, and the identity the knowledge base has
//! adopted (`index_state.embedder_id`). Also the reads and writes of re-embedding.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::chunks::{decode_vector, encode_vector};
use crate::error::Result;

/// One stored embedder identity.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedderRow {
    pub id: i64,
    pub name: String,
    pub dim: usize,
    /// The vectors of the probe texts, one after the other (`dim` values each).
    pub fingerprint: Vec<f32>,
}

/// An embedder other than the running one whose vectors some chunks still hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub name: String,
    pub dim: usize,
    /// Chunks whose vector it made.
    pub chunks: u64,
}

/// A chunk waiting to be re-embedded: what its embedding input is rebuilt from.
#[derive(Debug, Clone)]
pub struct StaleChunk {
    pub key: u64,
    pub text: String,
    /// Hash of the embedding input ingestion used; the new vector is written only while
    /// the chunk still has it (an upload meanwhile has written its own vector).
    pub text_hash: String,
    /// `metadata.section_path` (empty when absent).
    pub section_path: String,
}

/// Every stored identity, oldest first.
pub fn all(c: &Connection) -> Result<Vec<EmbedderRow>> {
    let mut st = c.prepare("SELECT id, name, dim, fingerprint FROM embedders ORDER BY id")?;
    let rows = st.query_map([], |r| {
        Ok(EmbedderRow {
            id: r.get(0)?,
            name: r.get(1)?,
            dim: r.get::<_, i64>(2)? as usize,
            fingerprint: decode_vector(&r.get::<_, Vec<u8>>(3)?),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Stores a new identity; returns its id.
pub fn insert(
    tx: &Transaction<'_>,
    name: &str,
    dim: usize,
    fingerprint: &[f32],
    now: &str,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO embedders (name, dim, fingerprint, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![name, dim as i64, encode_vector(fingerprint), now],
    )?;
    Ok(tx.last_insert_rowid())
}

/// The identity the knowledge base has adopted, if any yet.
pub fn adopted(c: &Connection) -> Result<Option<i64>> {
    Ok(c.query_row(
        "SELECT embedder_id FROM index_state WHERE id = 1",
        [],
        |r| r.get::<_, Option<i64>>(0),
    )
    .optional()?
    .flatten())
}

/// Records `id` as the adopted identity.
pub fn set_adopted(tx: &Transaction<'_>, id: i64) -> Result<()> {
    tx.execute("UPDATE index_state SET embedder_id = ?1 WHERE id = 1", [id])?;
    Ok(())
}

/// Gives chunks stored without an identity (before identities were recorded) the
/// identity `id`; returns how many.
pub fn assign_unowned(tx: &Transaction<'_>, id: i64) -> Result<usize> {
    Ok(tx.execute(
        "UPDATE chunks SET embedder_id = ?1 WHERE embedder_id IS NULL",
        [id],
    )?)
}

/// Chunks whose vector `id` made.
pub fn count_by(c: &Connection, id: i64) -> Result<u64> {
    Ok(c.query_row(
        "SELECT COUNT(*) FROM chunks WHERE embedder_id = ?1",
        [id],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// Chunks whose vector another embedder than `id` made (or an unknown one).
pub fn count_not_by(c: &Connection, id: i64) -> Result<u64> {
    Ok(c.query_row(
        "SELECT COUNT(*) FROM chunks WHERE embedder_id IS NOT ?1",
        [id],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// The other embedders whose vectors chunks still hold, most chunks first.
pub fn holders_other_than(c: &Connection, id: i64) -> Result<Vec<Holder>> {
    let mut st = c.prepare(
        "SELECT COALESCE(e.name, 'an unrecorded embedder'), COALESCE(e.dim, 0), COUNT(*)
         FROM chunks c LEFT JOIN embedders e ON e.id = c.embedder_id
         WHERE c.embedder_id IS NOT ?1
         GROUP BY c.embedder_id ORDER BY 3 DESC",
    )?;
    let rows = st.query_map([id], |r| {
        Ok(Holder {
            name: r.get(0)?,
            dim: r.get::<_, i64>(1)? as usize,
            chunks: r.get::<_, i64>(2)? as u64,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Up to `limit` chunks with keys above `after`, in key order, whose vector another
/// embedder than `id` made.
pub fn stale_after(c: &Connection, id: i64, after: u64, limit: usize) -> Result<Vec<StaleChunk>> {
    let mut st = c.prepare_cached(
        "SELECT key, text, text_hash, COALESCE(json_extract(metadata, '$.section_path'), '')
         FROM chunks WHERE key > ?2 AND embedder_id IS NOT ?1 ORDER BY key LIMIT ?3",
    )?;
    let rows = st.query_map(params![id, after as i64, limit as i64], |r| {
        Ok(StaleChunk {
            key: r.get::<_, i64>(0)? as u64,
            text: r.get(1)?,
            text_hash: r.get(2)?,
            section_path: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Replaces a chunk's vector with `embedding` made by `id`, if the chunk still has the
/// embedding input hashed `text_hash` and another embedder's vector. Returns whether it did.
pub fn set_vector(
    tx: &Transaction<'_>,
    key: u64,
    text_hash: &str,
    id: i64,
    embedding: &[f32],
) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "UPDATE chunks SET embedding = ?4, embedder_id = ?3
             WHERE key = ?1 AND text_hash = ?2 AND embedder_id IS NOT ?3",
        )?
        .execute(params![key as i64, text_hash, id, encode_vector(embedding)])?
        == 1)
}
