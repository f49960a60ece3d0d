//! Sources (one uploaded file or scraped URL) and their chunks, with embeddings.
//! Every write bumps the generation that the derived indexes record.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use serde_json::{Map, Value};

use crate::error::Result;

/// One stored source.
#[derive(Debug, Clone)]
pub struct SourceRow {
    pub id: String,
    pub source: String,
    pub source_type: String,
    pub title: String,
    pub file_type: String,
    pub section: String,
    pub content_hash: String,
    pub chunk_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// One stored chunk (without its embedding).
#[derive(Debug, Clone)]
pub struct ChunkRow {
    /// Key in the vector and full-text indexes.
    pub key: u64,
    pub id: String,
    pub source_id: String,
    pub position: i64,
    pub text: String,
    pub language: String,
    pub metadata: Map<String, Value>,
}

/// A chunk to store at a position of a source.
#[derive(Debug, Clone)]
pub struct NewChunk {
    pub id: String,
    pub position: i64,
    pub text: String,
    pub text_hash: String,
    pub language: String,
    pub metadata: Map<String, Value>,
    pub embedding: Vec<f32>,
}

/// What [`replace_chunks`] changed, for the derived indexes and the ingestion counts.
#[derive(Debug, Default)]
pub struct ChunkDiff {
    /// Keys whose text or vector is new: inserted positions, changed ones, and unchanged
    /// ones given the running embedder's vector in place of another's.
    pub upserted: Vec<(u64, usize)>,
    /// Positions that were new.
    pub added: usize,
    /// Positions whose text changed.
    pub updated: usize,
    /// Positions whose text was unchanged.
    pub skipped: usize,
    /// Keys of positions that no longer exist.
    pub removed: Vec<u64>,
}

const SOURCE_COLS: &str =
    "id, source, source_type, title, file_type, section, content_hash, chunk_count, created_at, updated_at";
const CHUNK_COLS: &str = "key, id, source_id, position, text, language, metadata";

fn source_row(r: &Row<'_>) -> rusqlite::Result<SourceRow> {
    Ok(SourceRow {
        id: r.get(0)?,
        source: r.get(1)?,
        source_type: r.get(2)?,
        title: r.get(3)?,
        file_type: r.get(4)?,
        section: r.get(5)?,
        content_hash: r.get(6)?,
        chunk_count: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
    })
}

fn chunk_row(r: &Row<'_>) -> rusqlite::Result<ChunkRow> {
    let meta: String = r.get(6)?;
    Ok(ChunkRow {
        key: r.get::<_, i64>(0)? as u64,
        id: r.get(1)?,
        source_id: r.get(2)?,
        position: r.get(3)?,
        text: r.get(4)?,
        language: r.get(5)?,
        metadata: serde_json::from_str(&meta).unwrap_or_default(),
    })
}

/// Encodes a vector as little-endian f32 bytes.
pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Decodes [`encode_vector`]'s bytes.
pub fn decode_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The source with this content hash, if any.
pub fn source_by_hash(c: &Connection, hash: &str) -> Result<Option<SourceRow>> {
    let sql = format!("SELECT {SOURCE_COLS} FROM sources WHERE content_hash = ?1 LIMIT 1");
    Ok(c.query_row(&sql, [hash], source_row).optional()?)
}

/// The source with this name (file name or URL), if any.
pub fn source_by_name(c: &Connection, source: &str) -> Result<Option<SourceRow>> {
    let sql = format!("SELECT {SOURCE_COLS} FROM sources WHERE source = ?1");
    Ok(c.query_row(&sql, [source], source_row).optional()?)
}

/// Id of a source's first chunk.
pub fn first_chunk_id(c: &Connection, source_id: &str) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT id FROM chunks WHERE source_id = ?1 ORDER BY position LIMIT 1",
        [source_id],
        |r| r.get(0),
    )
    .optional()?)
}

/// Stored vectors of a source's chunks by text hash, so re-ingestion embeds only new
/// text; only the vectors the embedder `embedder` made (another's are never reused).
pub fn vectors_by_hash(
    c: &Connection,
    source_id: &str,
    embedder: i64,
) -> Result<std::collections::HashMap<String, Vec<f32>>> {
    let mut st = c.prepare_cached(
        "SELECT text_hash, embedding FROM chunks WHERE source_id = ?1 AND embedder_id = ?2",
    )?;
    let rows = st.query_map(params![source_id, embedder], |r| {
        Ok((
            r.get::<_, String>(0)?,
            decode_vector(&r.get::<_, Vec<u8>>(1)?),
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Inserts or updates a source row.
pub fn upsert_source(tx: &Transaction<'_>, s: &SourceRow) -> Result<()> {
    tx.execute(
        "INSERT INTO sources (id, source, source_type, title, file_type, section, content_hash,
                              chunk_count, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(id) DO UPDATE SET title = excluded.title, file_type = excluded.file_type,
             section = excluded.section, content_hash = excluded.content_hash,
             chunk_count = excluded.chunk_count, updated_at = excluded.updated_at",
        params![
            s.id,
            s.source,
            s.source_type,
            s.title,
            s.file_type,
            s.section,
            s.content_hash,
            s.chunk_count,
            s.created_at,
            s.updated_at
        ],
    )?;
    Ok(())
}

/// Makes a source's chunks exactly `chunks` (positions 0..n): unchanged positions keep
/// their key and vector, changed ones are rewritten in place, extra ones are deleted.
/// The vectors written are recorded as made by `embedder` (`store::embedders`; `None`
/// only for stores seeded outside a server: the next start assigns them the adopted
/// identity).
pub fn replace_chunks(
    tx: &Transaction<'_>,
    source_id: &str,
    chunks: &[NewChunk],
    embedder: Option<i64>,
) -> Result<ChunkDiff> {
    let mut existing = std::collections::HashMap::new();
    {
        let mut st = tx.prepare_cached(
            "SELECT position, key, text_hash, embedder_id FROM chunks WHERE source_id = ?1",
        )?;
        let rows = st.query_map([source_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                (
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                ),
            ))
        })?;
        for row in rows {
            let (pos, v) = row?;
            existing.insert(pos, v);
        }
    }
    let mut diff = ChunkDiff::default();
    for (i, ch) in chunks.iter().enumerate() {
        let meta = Value::Object(ch.metadata.clone()).to_string();
        match existing.remove(&ch.position) {
            // Unchanged text whose vector another embedder made (a knowledge base being
            // re-embedded): the new vector replaces it, and the indexes take it.
            Some((key, hash, by))
                if hash == ch.text_hash && embedder.is_some() && by != embedder =>
            {
                tx.prepare_cached(
                    "UPDATE chunks SET metadata = ?2, language = ?3, embedding = ?4, embedder_id = ?5
                     WHERE key = ?1",
                )?
                .execute(params![key as i64, meta, ch.language, encode_vector(&ch.embedding), embedder])?;
                diff.skipped += 1;
                diff.upserted.push((key, i));
            }
            Some((key, hash, _)) if hash == ch.text_hash => {
                tx.prepare_cached("UPDATE chunks SET metadata = ?2, language = ?3 WHERE key = ?1")?
                    .execute(params![key as i64, meta, ch.language])?;
                diff.skipped += 1;
            }
            Some((key, _, _)) => {
                tx.prepare_cached(
                    "UPDATE chunks SET text = ?2, text_hash = ?3, language = ?4, metadata = ?5,
                         embedding = ?6, id = ?7, embedder_id = ?8 WHERE key = ?1",
                )?
                .execute(params![
                    key as i64,
                    ch.text,
                    ch.text_hash,
                    ch.language,
                    meta,
                    encode_vector(&ch.embedding),
                    ch.id,
                    embedder
                ])?;
                diff.updated += 1;
                diff.upserted.push((key, i));
            }
            None => {
                tx.prepare_cached(
                    "INSERT INTO chunks (id, source_id, position, text, text_hash, language, metadata, embedding, embedder_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?
                .execute(params![
                        ch.id,
                        source_id,
                        ch.position,
                        ch.text,
                        ch.text_hash,
                        ch.language,
                        meta,
                        encode_vector(&ch.embedding),
                        embedder
                    ],
                )?;
                diff.added += 1;
                diff.upserted.push((tx.last_insert_rowid() as u64, i));
            }
        }
    }
    for (_, (key, _, _)) in existing {
        tx.execute("DELETE FROM chunks WHERE key = ?1", [key as i64])?;
        diff.removed.push(key);
    }
    Ok(diff)
}

/// Increments and returns the write generation; call in every transaction that
/// changes chunks.
pub fn bump_generation(tx: &Transaction<'_>) -> Result<u64> {
    Ok(tx.query_row(
        "UPDATE index_state SET generation = generation + 1 WHERE id = 1 RETURNING generation",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// The current write generation.
pub fn generation(c: &Connection) -> Result<u64> {
    Ok(
        c.query_row("SELECT generation FROM index_state WHERE id = 1", [], |r| {
            r.get::<_, i64>(0)
        })? as u64,
    )
}

/// Number of stored chunks.
pub fn count_chunks(c: &Connection) -> Result<u64> {
    Ok(c.query_row("SELECT COUNT(*) FROM chunks", [], |r| r.get::<_, i64>(0))? as u64)
}

/// Number of stored sources.
pub fn count_sources(c: &Connection) -> Result<u64> {
    Ok(c.query_row("SELECT COUNT(*) FROM sources", [], |r| r.get::<_, i64>(0))? as u64)
}

/// One chunk by id.
pub fn chunk_by_id(c: &Connection, id: &str) -> Result<ChunkRow> {
    let sql = format!("SELECT {CHUNK_COLS} FROM chunks WHERE id = ?1");
    c.query_row(&sql, [id], chunk_row)
        .map_err(|e| super::not_found(e, || format!("document '{id}' not found")))
}

/// A page of chunks in ingestion order.
pub fn list_chunks(c: &Connection, offset: u64, limit: u64) -> Result<Vec<ChunkRow>> {
    let sql = format!("SELECT {CHUNK_COLS} FROM chunks ORDER BY key LIMIT ?1 OFFSET ?2");
    let mut st = c.prepare_cached(&sql)?;
    let rows = st.query_map(params![limit as i64, offset as i64], chunk_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The chunks with these keys (missing keys are skipped), in no particular order.
pub fn chunks_by_keys(c: &Connection, keys: &[u64]) -> Result<Vec<ChunkRow>> {
    let sql = format!("SELECT {CHUNK_COLS} FROM chunks WHERE key = ?1");
    let mut st = c.prepare_cached(&sql)?;
    let mut out = Vec::with_capacity(keys.len());
    for &k in keys {
        if let Some(row) = st.query_row([k as i64], chunk_row).optional()? {
            out.push(row);
        }
    }
    Ok(out)
}

/// One chunk as [`for_each_chunk`] gives it.
pub struct IndexedChunk<'a> {
    pub key: u64,
    pub id: &'a str,
    pub text: &'a str,
    /// Its vector, when the embedder asked for made it (else `None`: not decoded).
    pub embedding: Option<Vec<f32>>,
}

/// Calls `f` for every chunk, in key order, for rebuilding derived indexes; the vector
/// only of the chunks whose vector `embedder` made.
pub fn for_each_chunk(
    c: &Connection,
    embedder: i64,
    mut f: impl FnMut(IndexedChunk<'_>) -> Result<()>,
) -> Result<()> {
    let mut st =
        c.prepare("SELECT key, id, text, embedder_id, embedding FROM chunks ORDER BY key")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let key = r.get::<_, i64>(0)? as u64;
        let id: String = r.get(1)?;
        let text: String = r.get(2)?;
        let embedding = if r.get::<_, Option<i64>>(3)? == Some(embedder) {
            Some(decode_vector(&r.get::<_, Vec<u8>>(4)?))
        } else {
            None
        };
        f(IndexedChunk {
            key,
            id: &id,
            text: &text,
            embedding,
        })?;
    }
    Ok(())
}

/// Keys of the chunks matching `where_sql` (a condition over `chunks` joined with
/// `sources`), then deletes those chunks and any source left without chunks. Returns
/// the deleted keys.
fn delete_where(
    tx: &Transaction<'_>,
    where_sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<u64>> {
    let keys: Vec<u64> = {
        let mut st = tx.prepare(&format!("SELECT key FROM chunks WHERE {where_sql}"))?;
        let rows = st.query_map(args, |r| r.get::<_, i64>(0))?;
        rows.map(|k| k.map(|k| k as u64))
            .collect::<rusqlite::Result<_>>()?
    };
    if keys.is_empty() {
        return Ok(keys);
    }
    tx.execute(&format!("DELETE FROM chunks WHERE {where_sql}"), args)?;
    tx.execute("DELETE FROM sources WHERE NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.source_id = sources.id)", [])?;
    tx.execute(
        "UPDATE sources SET chunk_count = (SELECT COUNT(*) FROM chunks WHERE chunks.source_id = sources.id)",
        [],
    )?;
    Ok(keys)
}

/// Deletes one chunk by id; `None` when there is no such chunk.
pub fn delete_chunk(tx: &Transaction<'_>, id: &str) -> Result<Option<u64>> {
    Ok(delete_where(tx, "id = ?1", &[&id])?.pop())
}

/// Deletes every chunk of the source named `source` (and the source).
pub fn delete_source(tx: &Transaction<'_>, source: &str) -> Result<Vec<u64>> {
    delete_where(
        tx,
        "source_id IN (SELECT id FROM sources WHERE source = ?1)",
        &[&source],
    )
}

/// A metadata condition: a key (letters, digits, `_`) and what its value must satisfy.
#[derive(Debug, Clone)]
pub enum MetaCond {
    Eq(String, Value),
    In(String, Vec<Value>),
    Ne(String, Value),
}

fn sql_value(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        Value::Bool(b) => V::Integer(*b as i64),
        Value::Number(n) => n
            .as_i64()
            .map(V::Integer)
            .unwrap_or_else(|| V::Real(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => V::Text(s.clone()),
        _ => V::Null,
    }
}

/// Deletes the chunks whose metadata satisfies every condition. Keys must already be
/// validated as plain identifiers (they become JSON paths).
pub fn delete_by_metadata(tx: &Transaction<'_>, conds: &[MetaCond]) -> Result<Vec<u64>> {
    let mut clauses = Vec::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    for c in conds {
        let key = match c {
            MetaCond::Eq(k, _) | MetaCond::In(k, _) | MetaCond::Ne(k, _) => k,
        };
        debug_assert!(key
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_'));
        let path = format!("json_extract(metadata, '$.{key}')");
        match c {
            MetaCond::Eq(_, v) => {
                args.push(sql_value(v));
                clauses.push(format!("{path} = ?{}", args.len()));
            }
            MetaCond::Ne(_, v) => {
                args.push(sql_value(v));
                clauses.push(format!("({path} IS NULL OR {path} != ?{})", args.len()));
            }
            MetaCond::In(_, vs) => {
                let mut marks = Vec::new();
                for v in vs {
                    args.push(sql_value(v));
                    marks.push(format!("?{}", args.len()));
                }
                clauses.push(if marks.is_empty() {
                    "0".into()
                } else {
                    format!("{path} IN ({})", marks.join(", "))
                });
            }
        }
    }
    let refs: Vec<&dyn rusqlite::ToSql> = args.iter().map(|a| a as &dyn rusqlite::ToSql).collect();
    delete_where(tx, &clauses.join(" AND "), &refs)
}

/// Every source name, sorted.
pub fn source_names(c: &Connection) -> Result<Vec<String>> {
    let mut st = c.prepare("SELECT source FROM sources ORDER BY source")?;
    let rows = st.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Chunk counts grouped by a metadata key (`source`, `language`, ...).
pub fn count_by(c: &Connection, key: &str) -> Result<Vec<(String, u64)>> {
    let sql = format!(
        "SELECT COALESCE(json_extract(metadata, '$.{key}'), ''), COUNT(*) FROM chunks GROUP BY 1 ORDER BY 1"
    );
    let mut st = c.prepare(&sql)?;
    let rows = st.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Up to `limit` sources whose id sorts after `after` (all from the first when `None`),
/// by id: a stable order to page through with the last id as the cursor.
pub fn sources_after(c: &Connection, after: Option<&str>, limit: u64) -> Result<Vec<SourceRow>> {
    let sql = format!("SELECT {SOURCE_COLS} FROM sources WHERE id > ?1 ORDER BY id LIMIT ?2");
    let mut st = c.prepare_cached(&sql)?;
    let rows = st.query_map(params![after.unwrap_or(""), limit as i64], source_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The source with this id, if any.
pub fn source_by_id(c: &Connection, id: &str) -> Result<Option<SourceRow>> {
    let sql = format!("SELECT {SOURCE_COLS} FROM sources WHERE id = ?1");
    Ok(c.query_row(&sql, [id], source_row).optional()?)
}

/// The texts of a source's chunks, in position order.
pub fn source_texts(c: &Connection, source_id: &str) -> Result<Vec<String>> {
    let mut st =
        c.prepare_cached("SELECT text FROM chunks WHERE source_id = ?1 ORDER BY position")?;
    let rows = st.query_map([source_id], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
