//! Group commits. Sources ready to store wait for one writer thread, which takes all that
//! are waiting and writes them together: one SQLite transaction (each source inside its
//! own savepoint, so it is stored whole or not at all), then one update of the vector
//! index, and the group's documents staged in the full-text index. Each caller is
//! answered once the transaction is committed, so nothing is acknowledged before it is
//! durable; the chunks of a bulk request, a ZIP, a burst of uploads and background tasks
//! share the commits. The full-text index is derived from the store (and rebuilt from it
//! when a crash leaves it behind), so it is committed off the answers' path: once a
//! client has been told of a change ([`GroupWriter::acknowledge`]), or every
//! [`MAX_STAGED`] while changes keep coming. A bulk request is acknowledged when all its
//! files are stored, so its groups share one commit instead of one each; a search that
//! comes before that commit makes it itself (see `retrieval::fulltext`).

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tokio::sync::oneshot;

use super::ingest::{build_rows, Prepared, SourceType};
use super::search::searchable;
use super::timings::{Stage, StageTimes};
use crate::error::{Error, Result};
use crate::retrieval::fulltext::FtDoc;
use crate::retrieval::{FullTextIndex, VectorStore};
use crate::store::{self, chunks as repo, NewChunk, SourceRow, Store};

/// Most sources in one group.
const MAX_GROUP_SOURCES: usize = 256;
/// Most chunks in one group (a group is one SQLite transaction held in memory).
const MAX_GROUP_CHUNKS: usize = 16_384;
/// How long the writer waits for more sources once one has arrived: the sources of one
/// embedding pass finish together and arrive within moments of each other.
const LINGER: Duration = Duration::from_micros(500);
/// Longest the full-text index holds staged documents that nobody has been told of.
const MAX_STAGED: Duration = Duration::from_secs(1);

/// One parsed and embedded source, ready to store.
pub(super) struct SourceWrite {
    pub name: String,
    pub source_type: SourceType,
    pub file_type: String,
    pub section: String,
    pub content_hash: String,
    /// Refuse it if another source already holds the same content.
    pub check_duplicates: bool,
    /// Store it only while this task is still running.
    pub task: Option<String>,
    pub prepared: Prepared,
    /// A vector for every chunk's text hash.
    pub vectors: HashMap<String, Vec<f32>>,
}

/// What storing a source did.
pub(super) enum Written {
    /// Stored (new, or updated in place when `previous` is set) as of store generation
    /// `generation`.
    Stored {
        generation: u64,
        previous: Option<SourceRow>,
        added: usize,
        updated: usize,
        skipped: usize,
        removed: usize,
        first_chunk_id: Option<String>,
    },
    /// Another source holds the same content; nothing was written.
    Duplicate(SourceRow, Option<String>),
}

struct Pending {
    write: SourceWrite,
    reply: oneshot::Sender<Result<Written>>,
    span: tracing::Span,
}

/// What the writer thread is asked to do.
enum Msg {
    /// Boxed: a write is large (its parsed source and vectors' metadata), `Show` is not.
    Write(Box<Pending>),
    /// A client was told of changes: make them visible to full-text searches.
    Show,
}

/// Everything a group is written to.
pub(super) struct Targets {
    pub store: Store,
    pub vectors: Arc<dyn VectorStore>,
    pub fulltext: Arc<FullTextIndex>,
    /// Shared with deletions, so SQLite and both indexes change in the same order.
    pub write_lock: Arc<tokio::sync::Mutex<()>>,
    pub timings: Arc<StageTimes>,
    /// Identity of the running embedder, recorded with every vector written
    /// (`store::embedders`).
    pub embedder_id: i64,
}

/// The handle to the writer thread; the thread ends when the handle is dropped.
pub(super) struct GroupWriter {
    tx: Sender<Msg>,
    fulltext: Arc<FullTextIndex>,
}

impl GroupWriter {
    /// Starts the writer thread.
    pub(super) fn start(targets: Targets) -> std::io::Result<Self> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let fulltext = targets.fulltext.clone();
        std::thread::Builder::new()
            .name("ragd-writer".into())
            .spawn(move || run(rx, targets))?;
        Ok(Self { tx, fulltext })
    }

    /// Records that a client has been told of the changes up to `generation`: searches
    /// see them from now on, and the writer commits them to the full-text index soon.
    pub(super) fn acknowledge(&self, generation: u64) {
        self.fulltext.require(generation);
        if self.fulltext.behind() {
            let _ = self.tx.send(Msg::Show);
        }
    }

    /// Stores `write` with whatever else is waiting; answers once it is durable.
    pub(super) async fn write(&self, write: SourceWrite) -> Result<Written> {
        let (reply, rx) = oneshot::channel();
        let pending = Pending {
            write,
            reply,
            span: tracing::Span::current(),
        };
        self.tx
            .send(Msg::Write(Box::new(pending)))
            .map_err(|_| Error::Unavailable("the writer has stopped".into()))?;
        rx.await
            .map_err(|_| Error::Internal(anyhow::anyhow!("the writer stopped mid-write")))?
    }
}

fn run(rx: Receiver<Msg>, t: Targets) {
    // When the full-text index first held changes not yet committed.
    let mut staged_since: Option<Instant> = None;
    loop {
        let msg = match staged_since {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(since) => rx.recv_deadline(since + MAX_STAGED),
        };
        let first = match msg {
            Ok(Msg::Write(p)) => *p,
            Ok(Msg::Show) => {
                if t.fulltext.behind() {
                    commit_fulltext(&t);
                    staged_since = None;
                }
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {
                commit_fulltext(&t);
                staged_since = None;
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut chunks = first.write.prepared.chunks.len();
        let mut group = vec![first];
        while group.len() < MAX_GROUP_SOURCES && chunks < MAX_GROUP_CHUNKS {
            match rx.recv_timeout(LINGER) {
                Ok(Msg::Write(p)) => {
                    chunks += p.write.prepared.chunks.len();
                    group.push(*p);
                }
                // Looked at after the group (`behind`).
                Ok(Msg::Show) => {}
                Err(_) => break,
            }
        }
        let span = tracing::info_span!(parent: &group[0].span, "write_group", sources = group.len(), chunks);
        let entered = span.enter();
        let started = Instant::now();
        let lock = t.write_lock.blocking_lock();
        let (writes, replies): (Vec<SourceWrite>, Vec<_>) =
            group.into_iter().map(|p| (p.write, p.reply)).unzip();
        let results = catch_unwind(AssertUnwindSafe(|| write_group(&t, &writes)))
            .unwrap_or_else(|_| Err(Error::Internal(anyhow::anyhow!("the writer panicked"))));
        let elapsed = started.elapsed();
        t.timings.add(Stage::Store, elapsed);
        match results {
            Ok(results) => {
                let stored = results
                    .iter()
                    .filter(|r| matches!(r, Ok(Written::Stored { .. })))
                    .count();
                tracing::info!(
                    sources = writes.len(),
                    stored,
                    elapsed_ms = elapsed.as_millis() as u64,
                    "group committed"
                );
                for ((w, r), reply) in writes.iter().zip(results).zip(replies) {
                    if matches!(r, Ok(Written::Stored { .. })) {
                        t.timings.count(w.prepared.chunks.len() as u64);
                    }
                    let _ = reply.send(r);
                }
            }
            Err(e) => {
                let msg = format!("{e:#}");
                tracing::error!(error = %msg, sources = writes.len(), "group write failed");
                for reply in replies {
                    let _ = reply.send(Err(Error::Internal(anyhow::anyhow!("{msg}"))));
                }
            }
        }
        drop(lock);
        drop(entered);
        let since = *staged_since.get_or_insert(started);
        if t.fulltext.behind() || since.elapsed() >= MAX_STAGED {
            commit_fulltext(&t);
            staged_since = None;
        }
    }
    commit_fulltext(&t);
}

/// Commits the documents staged in the full-text index, off the answers' path. A failure
/// leaves them staged for the next try (a search or the periodic flush).
fn commit_fulltext(t: &Targets) {
    let started = Instant::now();
    match t.fulltext.commit_staged() {
        Ok(true) => tracing::debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "full-text index committed"
        ),
        Ok(false) => {}
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "committing the full-text index failed")
        }
    }
}

/// A stored source's rows and what changed, kept until the indexes are updated.
struct Done {
    rows: Vec<NewChunk>,
    diff: repo::ChunkDiff,
}

/// Writes the group: SQLite first (one transaction), then both indexes. Returns each
/// source's outcome; an `Err` of the whole means nothing of the group was committed.
fn write_group(t: &Targets, writes: &[SourceWrite]) -> Result<Vec<Result<Written>>> {
    let now = crate::time::now_iso();
    let started = Instant::now();
    let (outcomes, generation) = t.store.write_sync(|tx| {
        let outcomes: Vec<Result<(Written, Option<Done>)>> = writes
            .iter()
            .map(|w| store::savepoint(tx, |tx| write_source(tx, w, &now, t.embedder_id)))
            .collect();
        let changed = outcomes
            .iter()
            .any(|o| matches!(o, Ok((_, Some(d))) if !d.diff.upserted.is_empty() || !d.diff.removed.is_empty()));
        let generation = if changed {
            repo::bump_generation(tx)?
        } else {
            repo::generation(tx)?
        };
        Ok((outcomes, generation))
    })?;

    // Later sources of the group win over earlier ones (the same name twice): the last
    // change of each key is what the indexes get.
    let mut last: BTreeMap<u64, Option<(usize, usize)>> = BTreeMap::new();
    for (s, o) in outcomes.iter().enumerate() {
        if let Ok((_, Some(d))) = o {
            for &k in &d.diff.removed {
                last.insert(k, None);
            }
            for &(k, i) in &d.diff.upserted {
                last.insert(k, Some((s, i)));
            }
        }
    }
    if !last.is_empty() {
        let row = |s: usize, i: usize| -> &NewChunk {
            match &outcomes[s] {
                Ok((_, Some(d))) => &d.rows[i],
                _ => unreachable!("only stored sources have changes"),
            }
        };
        let removed: Vec<u64> = last
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| *k)
            .collect();
        let upserts: Vec<(u64, &NewChunk)> = last
            .iter()
            .filter_map(|(k, v)| v.map(|(s, i)| (*k, row(s, i))))
            .collect();
        let vecs: Vec<(u64, &[f32])> = upserts
            .iter()
            .map(|(k, r)| (*k, r.embedding.as_slice()))
            .collect();
        let sqlite_ms = started.elapsed().as_millis() as u64;
        t.vectors.apply(&removed, &vecs, generation)?;
        let vectors_ms = started.elapsed().as_millis() as u64 - sqlite_ms;
        let texts: Vec<String> = upserts.iter().map(|(_, r)| searchable(&r.text)).collect();
        let docs: Vec<FtDoc<'_>> = upserts
            .iter()
            .zip(&texts)
            .map(|((key, r), text)| FtDoc {
                key: *key,
                chunk_id: &r.id,
                text,
            })
            .collect();
        t.fulltext.stage(&removed, &docs, generation)?;
        tracing::debug!(
            sqlite_ms,
            vectors_ms,
            fulltext_ms = started.elapsed().as_millis() as u64 - sqlite_ms - vectors_ms,
            chunks = upserts.len(),
            "group written"
        );
    }
    Ok(outcomes
        .into_iter()
        .map(|o| {
            o.map(|(mut w, _)| {
                if let Written::Stored { generation: g, .. } = &mut w {
                    *g = generation;
                }
                w
            })
        })
        .collect())
}

/// One source inside the group's transaction.
fn write_source(
    tx: &crate::store::Transaction<'_>,
    w: &SourceWrite,
    now: &str,
    embedder_id: i64,
) -> Result<(Written, Option<Done>)> {
    if let Some(task) = &w.task {
        if !store::tasks::is_running(tx, task)? {
            return Err(Error::Cancelled);
        }
    }
    if w.check_duplicates {
        if let Some(dup) = repo::source_by_hash(tx, &w.content_hash)? {
            let first = repo::first_chunk_id(tx, &dup.id)?;
            return Ok((Written::Duplicate(dup, first), None));
        }
    }
    let previous = repo::source_by_name(tx, &w.name)?;
    let p = &w.prepared;
    let source = SourceRow {
        id: previous
            .as_ref()
            .map(|p| p.id.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        source: w.name.clone(),
        source_type: w.source_type.as_str().into(),
        title: p.title.clone(),
        file_type: w.file_type.clone(),
        section: w.section.clone(),
        content_hash: w.content_hash.clone(),
        chunk_count: p.chunks.len() as i64,
        created_at: previous
            .as_ref()
            .map(|p| p.created_at.clone())
            .unwrap_or_else(|| now.to_owned()),
        updated_at: now.to_owned(),
    };
    let rows = build_rows(&source, p, &w.vectors, now)?;
    repo::upsert_source(tx, &source)?;
    let diff = repo::replace_chunks(tx, &source.id, &rows, Some(embedder_id))?;
    let written = Written::Stored {
        // Set once the group's transaction has its generation.
        generation: 0,
        previous,
        added: diff.added,
        updated: diff.updated,
        skipped: diff.skipped,
        removed: diff.removed.len(),
        first_chunk_id: rows.first().map(|r| r.id.clone()),
    };
    Ok((written, Some(Done { rows, diff })))
}
