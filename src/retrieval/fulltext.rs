//! The tantivy index over chunk text. Each commit carries the store generation as its
//! payload, so a stale or damaged index is detected at start-up and rebuilt.
//!
//! Ingestion stages its changes ([`FullTextIndex::stage`]) and commits them later, off
//! the path of its answer: the store is what makes a source durable, and this index is
//! rebuilt from it when a crash leaves it behind. Once a change has been acknowledged to
//! a client ([`FullTextIndex::require`]), a search that finds the last commit older than
//! it commits what is staged before it reads, so it sees every acknowledged change; the
//! sources of a bulk request still being ingested need no commit of their own.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value as _, FAST, INDEXED,
    STORED, STRING,
};
use tantivy::{doc, Index, IndexReader, IndexWriter, TantivyDocument, Term};

use super::tantivy_index::{self, Layout};
use super::OnDisk;

const DIR: &str = "fulltext";
const WRITER_HEAP: usize = 32 * 1024 * 1024;
/// Name of the text analyzer registered on the index.
const ANALYZER: &str = "ragd_en";

struct Fields {
    key: Field,
    chunk_id: Field,
    text: Field,
}

/// Full-text index of chunks keyed by chunk key.
pub struct FullTextIndex {
    dir: PathBuf,
    fields: Fields,
    reader: IndexReader,
    writer: Mutex<Staging>,
    /// Whether changes are staged but not committed (read without the lock).
    dirty: AtomicBool,
    /// Generation of the newest commit: what searches see.
    visible: AtomicU64,
    /// Newest generation acknowledged to a client: searches must see it.
    wanted: AtomicU64,
    index: Index,
}

/// The writer and what it holds beyond the last commit.
struct Staging {
    writer: IndexWriter,
    /// The newest generation staged and not yet committed.
    staged: Option<u64>,
}

/// A document to index.
pub struct FtDoc<'a> {
    pub key: u64,
    pub chunk_id: &'a str,
    pub text: &'a str,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let key = b.add_u64_field("key", INDEXED | STORED | FAST);
    let chunk_id = b.add_text_field("chunk_id", STRING | STORED);
    // Lower case, English stop words dropped, Porter stemming, long tokens dropped.
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(ANALYZER)
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let text = b.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(indexing),
    );
    (
        b.build(),
        Fields {
            key,
            chunk_id,
            text,
        },
    )
}

impl FullTextIndex {
    /// Opens the index under `data_dir`, or creates an empty one when it is missing or
    /// unreadable (the caller then rebuilds it from the store).
    pub fn open(data_dir: &Path) -> anyhow::Result<(Self, OnDisk)> {
        let (schema, fields) = schema();
        let layout = Layout {
            dir: DIR,
            what: "full-text index",
            schema,
            analyzer: ANALYZER,
            writer_heap: WRITER_HEAP,
        };
        let (o, on_disk) = tantivy_index::open(data_dir, &layout)?;
        let this = Self {
            dir: o.dir,
            fields,
            reader: o.reader,
            writer: Mutex::new(Staging {
                writer: o.writer,
                staged: None,
            }),
            dirty: AtomicBool::new(false),
            visible: AtomicU64::new(on_disk.generation.unwrap_or(0)),
            wanted: AtomicU64::new(0),
            index: o.index,
        };
        Ok((this, on_disk))
    }

    /// Directory of the index.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of indexed chunks.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes `remove` and replaces-or-adds `upsert`, then commits with `generation`.
    pub fn apply(
        &self,
        remove: &[u64],
        upsert: &[FtDoc<'_>],
        generation: u64,
    ) -> anyhow::Result<()> {
        self.stage(remove, upsert, generation)?;
        self.commit_staged()?;
        Ok(())
    }

    /// Removes `remove` and replaces-or-adds `upsert` without committing; the next
    /// [`commit_staged`](Self::commit_staged) (or search) commits them with the newest
    /// generation staged.
    pub fn stage(
        &self,
        remove: &[u64],
        upsert: &[FtDoc<'_>],
        generation: u64,
    ) -> anyhow::Result<()> {
        let mut s = self.writer.lock();
        for &k in remove.iter().chain(upsert.iter().map(|d| &d.key)) {
            s.writer
                .delete_term(Term::from_field_u64(self.fields.key, k));
        }
        for d in upsert {
            s.writer.add_document(doc!(
                self.fields.key => d.key,
                self.fields.chunk_id => d.chunk_id,
                self.fields.text => d.text,
            ))?;
        }
        s.staged = Some(s.staged.map_or(generation, |g| g.max(generation)));
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Marks the changes up to `generation` as acknowledged: searches from now on see
    /// them (committing what is staged first if need be).
    pub fn require(&self, generation: u64) {
        self.wanted.fetch_max(generation, Ordering::AcqRel);
    }

    /// Whether an acknowledged change is staged but not yet committed.
    pub fn behind(&self) -> bool {
        self.visible.load(Ordering::Acquire) < self.wanted.load(Ordering::Acquire)
            && self.dirty.load(Ordering::Acquire)
    }

    /// Commits what is staged, if anything, and makes it visible to searches. Returns
    /// whether there was anything to commit.
    pub fn commit_staged(&self) -> anyhow::Result<bool> {
        if !self.dirty.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut s = self.writer.lock();
        let Some(generation) = s.staged else {
            return Ok(false);
        };
        tantivy_index::commit(&mut s.writer, generation)?;
        s.staged = None;
        self.visible.fetch_max(generation, Ordering::AcqRel);
        // Reloaded before `dirty` is cleared: a search that finds it clear must find the
        // commit in the reader. Both under the lock, so a stage that follows sets it again.
        self.reader.reload()?;
        self.dirty.store(false, Ordering::Release);
        Ok(true)
    }

    /// Drops every document (before a rebuild) and commits.
    pub fn clear(&self, generation: u64) -> anyhow::Result<()> {
        let mut s = self.writer.lock();
        s.writer.delete_all_documents()?;
        s.staged = Some(generation);
        self.dirty.store(true, Ordering::Release);
        drop(s);
        self.commit_staged()?;
        Ok(())
    }

    /// BM25 search over chunk text: `(key, score)` best first.
    pub fn search(&self, query: &str, limit: usize) -> anyhow::Result<Vec<(u64, f32)>> {
        // Read your writes: an acknowledged change still staged is committed first. If
        // that fails (a full disk), the search still answers from the last commit.
        if self.behind() {
            if let Err(e) = self.commit_staged() {
                tracing::error!(error = %format!("{e:#}"), "committing the full-text index failed");
            }
        }
        let searcher = self.reader.searcher();
        // Any term may match (BM25 ranks documents with more and rarer terms first);
        // a term with inner punctuation, like a product code, is matched as a phrase.
        let parser = QueryParser::for_index(&self.index, vec![self.fields.text]);
        // Free text from users is not query syntax: parse leniently and keep what parses.
        let (q, _errors) = parser.parse_query_lenient(query);
        let top = searcher.search(&q, &TopDocs::with_limit(limit.max(1)))?;
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr)?;
            if let Some(k) = d.get_first(self.fields.key).and_then(|v| v.as_u64()) {
                out.push((k, score));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_searches_and_reopens_with_generation() {
        let dir = tempfile::tempdir().unwrap();
        let (ft, disk) = FullTextIndex::open(dir.path()).unwrap();
        assert_eq!(disk.generation, None);
        ft.apply(
            &[],
            &[
                FtDoc {
                    key: 1,
                    chunk_id: "a",
                    text: "torque wrench SKU-4471-B",
                },
                FtDoc {
                    key: 2,
                    chunk_id: "b",
                    text: "password reset steps",
                },
            ],
            3,
        )
        .unwrap();
        assert_eq!(ft.search("password", 5).unwrap()[0].0, 2);
        ft.apply(&[2], &[], 4).unwrap();
        assert!(ft.search("password", 5).unwrap().is_empty());
        drop(ft);
        let (ft, disk) = FullTextIndex::open(dir.path()).unwrap();
        assert_eq!(
            disk,
            OnDisk {
                generation: Some(4),
                count: 1
            }
        );
        assert_eq!(ft.search("wrench", 5).unwrap()[0].0, 1);
    }

    #[test]
    fn a_search_sees_what_was_acknowledged_before_it_and_commits_it() {
        let dir = tempfile::tempdir().unwrap();
        let (ft, _) = FullTextIndex::open(dir.path()).unwrap();
        let doc = |key, text| FtDoc {
            key,
            chunk_id: "c",
            text,
        };
        ft.apply(&[], &[doc(1, "torque wrench")], 1).unwrap();
        ft.stage(&[], &[doc(2, "password reset steps")], 2).unwrap();
        ft.stage(&[1], &[], 3).unwrap();
        ft.require(3);
        // Nothing of the two stages is committed yet: the reader still has key 1 only.
        assert_eq!(ft.len(), 1);
        assert_eq!(ft.search("password", 5).unwrap()[0].0, 2);
        assert!(ft.search("wrench", 5).unwrap().is_empty());
        assert!(!ft.commit_staged().unwrap(), "the search committed it");
        drop(ft);
        let (_, disk) = FullTextIndex::open(dir.path()).unwrap();
        assert_eq!(
            disk,
            OnDisk {
                generation: Some(3),
                count: 1
            }
        );
    }

    #[test]
    fn a_search_commits_only_what_was_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let (ft, _) = FullTextIndex::open(dir.path()).unwrap();
        let doc = |key, text| FtDoc {
            key,
            chunk_id: "c",
            text,
        };
        ft.apply(&[], &[doc(1, "torque wrench")], 1).unwrap();
        ft.stage(&[], &[doc(2, "password reset steps")], 2).unwrap();
        // Staged, but no client has been told of it: searches need not see it, and
        // do not pay for a commit.
        assert!(!ft.behind());
        assert!(ft.search("password", 5).unwrap().is_empty());
        assert_eq!(ft.len(), 1);
        // Once acknowledged, the next search commits it first.
        ft.require(2);
        assert!(ft.behind());
        assert_eq!(ft.search("password", 5).unwrap()[0].0, 2);
        assert!(!ft.behind());
        // A later staged change is not searched for by an older acknowledgement.
        ft.stage(&[2], &[], 3).unwrap();
        assert!(!ft.behind());
        assert_eq!(ft.search("password", 5).unwrap()[0].0, 2);
        ft.require(3);
        assert!(ft.search("password", 5).unwrap().is_empty());
    }

    #[test]
    fn staged_documents_never_committed_leave_the_older_generation_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (ft, _) = FullTextIndex::open(dir.path()).unwrap();
        let doc = FtDoc {
            key: 1,
            chunk_id: "a",
            text: "torque wrench",
        };
        ft.apply(&[], &[doc], 1).unwrap();
        let later = FtDoc {
            key: 2,
            chunk_id: "b",
            text: "password reset",
        };
        ft.stage(&[], &[later], 2).unwrap();
        // As after a crash: the store's generation (2) differs, so start-up rebuilds.
        drop(ft);
        let (_, disk) = FullTextIndex::open(dir.path()).unwrap();
        assert_eq!(
            disk,
            OnDisk {
                generation: Some(1),
                count: 1
            }
        );
    }

    #[test]
    fn garbage_directory_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(DIR)).unwrap();
        std::fs::write(dir.path().join(DIR).join("meta.json"), b"{not json").unwrap();
        let (ft, disk) = FullTextIndex::open(dir.path()).unwrap();
        assert_eq!(disk.generation, None);
        assert!(ft.is_empty());
    }
}
