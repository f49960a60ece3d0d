//! The tantivy index over conversation titles and messages, searched per user. Like the
//! chunk index, each commit carries the store's conversation generation as its payload,
//! so a stale or damaged index is detected at start-up and rebuilt from SQLite.
//! A soft-deleted conversation is removed from it at once.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value as _, STORED, STRING,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{doc, Index, IndexReader, IndexWriter, TantivyDocument, Term};

use super::tantivy_index::{self, Layout};
use super::OnDisk;

const DIR: &str = "conversations_fulltext";
const WRITER_HEAP: usize = 16 * 1024 * 1024;
const ANALYZER: &str = "ragd_conv_en";
/// Longest snippet, in characters.
const SNIPPET_CHARS: usize = 160;

struct Fields {
    /// `c:<conversation id>` for a title, `m:<message id>` for a message.
    doc_key: Field,
    user_id: Field,
    conversation_id: Field,
    /// Empty for a title document.
    message_id: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let doc_key = b.add_text_field("doc_key", STRING);
    let user_id = b.add_text_field("user_id", STRING);
    let conversation_id = b.add_text_field("conversation_id", STRING | STORED);
    let message_id = b.add_text_field("message_id", STRING | STORED);
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(ANALYZER)
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    // Stored: snippets are cut from it.
    let text = b.add_text_field(
        "text",
        TextOptions::default()
            .set_indexing_options(indexing)
            .set_stored(),
    );
    (
        b.build(),
        Fields {
            doc_key,
            user_id,
            conversation_id,
            message_id,
            text,
        },
    )
}

/// A document to index: a conversation's title (`message_id: None`) or one message.
#[derive(Debug, Clone)]
pub struct ConvDoc {
    pub user_id: String,
    pub conversation_id: String,
    pub message_id: Option<String>,
    pub text: String,
}

impl ConvDoc {
    fn key(&self) -> String {
        match &self.message_id {
            Some(m) => format!("m:{m}"),
            None => format!("c:{}", self.conversation_id),
        }
    }
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvHit {
    pub conversation_id: String,
    /// `None` when the title matched.
    pub message_id: Option<String>,
    /// Plain-text excerpt around the matched terms.
    pub snippet: String,
    /// The excerpt with matches in `<b>..</b>`, HTML-escaped.
    pub snippet_html: String,
    pub score: f32,
}

/// Full-text index of conversations.
pub struct ConversationIndex {
    dir: PathBuf,
    fields: Fields,
    reader: IndexReader,
    writer: Mutex<Writer>,
    index: Index,
}

/// The writer and the generation of changes staged on it but not yet committed.
struct Writer {
    w: IndexWriter,
    staged: Option<u64>,
}

impl ConversationIndex {
    /// Opens the index under `data_dir`, or creates an empty one when it is missing or
    /// unreadable (the caller then rebuilds it from the store).
    pub fn open(data_dir: &Path) -> anyhow::Result<(Self, OnDisk)> {
        let (schema, fields) = schema();
        let layout = Layout {
            dir: DIR,
            what: "conversation index",
            schema,
            analyzer: ANALYZER,
            writer_heap: WRITER_HEAP,
        };
        let (o, on_disk) = tantivy_index::open(data_dir, &layout)?;
        let this = Self {
            dir: o.dir,
            fields,
            reader: o.reader,
            writer: Mutex::new(Writer {
                w: o.writer,
                staged: None,
            }),
            index: o.index,
        };
        Ok((this, on_disk))
    }

    /// Directory of the index.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Number of indexed documents (titles and messages).
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every document of the conversations `remove` and replaces-or-adds
    /// `upsert`, without committing: a commit costs tens of milliseconds (fsyncs), so staged
    /// changes are committed together by [`commit_staged`](Self::commit_staged), which a
    /// search runs first (searches always see every staged change) and the service's
    /// upkeep task runs every second. `generation` is what the next commit records.
    pub fn stage(
        &self,
        remove: &[String],
        upsert: &[ConvDoc],
        generation: u64,
    ) -> anyhow::Result<()> {
        let mut w = self.writer.lock();
        for c in remove {
            w.w.delete_term(Term::from_field_text(self.fields.conversation_id, c));
        }
        for d in upsert {
            w.w.delete_term(Term::from_field_text(self.fields.doc_key, &d.key()));
            w.w.add_document(doc!(
                self.fields.doc_key => d.key(),
                self.fields.user_id => d.user_id.as_str(),
                self.fields.conversation_id => d.conversation_id.as_str(),
                self.fields.message_id => d.message_id.as_deref().unwrap_or(""),
                self.fields.text => d.text.as_str(),
            ))?;
        }
        w.staged = Some(w.staged.map_or(generation, |g| g.max(generation)));
        Ok(())
    }

    /// Commits staged changes, if any, and makes them visible; returns whether it did.
    pub fn commit_staged(&self) -> anyhow::Result<bool> {
        let mut w = self.writer.lock();
        let Some(generation) = w.staged else {
            return Ok(false);
        };
        tantivy_index::commit(&mut w.w, generation)?;
        w.staged = None;
        drop(w);
        self.reader.reload()?;
        Ok(true)
    }

    /// [`stage`](Self::stage) and commit at once.
    pub fn apply(
        &self,
        remove: &[String],
        upsert: &[ConvDoc],
        generation: u64,
    ) -> anyhow::Result<()> {
        self.stage(remove, upsert, generation)?;
        self.commit_staged()?;
        Ok(())
    }

    /// Drops every document (before a rebuild) and commits.
    pub fn clear(&self, generation: u64) -> anyhow::Result<()> {
        let mut w = self.writer.lock();
        w.w.delete_all_documents()?;
        tantivy_index::commit(&mut w.w, generation)?;
        w.staged = None;
        drop(w);
        self.reader.reload()?;
        Ok(())
    }

    /// BM25 search over `user_id`'s titles and messages: page `offset..offset+limit` of the
    /// hits, best first, and the total number of hits.
    pub fn search(
        &self,
        user_id: &str,
        query: &str,
        offset: usize,
        limit: usize,
    ) -> anyhow::Result<(Vec<ConvHit>, usize)> {
        self.commit_staged()?;
        let searcher = self.reader.searcher();
        let parser = QueryParser::for_index(&self.index, vec![self.fields.text]);
        // Free text from users is not query syntax: parse leniently and keep what parses.
        let (text_q, _errors) = parser.parse_query_lenient(query);
        let owner: Box<dyn Query> = Box::new(TermQuery::new(
            Term::from_field_text(self.fields.user_id, user_id),
            IndexRecordOption::Basic,
        ));
        let q = BooleanQuery::new(vec![
            (Occur::Must, text_q.box_clone()),
            (Occur::Must, owner),
        ]);
        let (top, total) = searcher.search(
            &q,
            &(TopDocs::with_limit(limit.max(1)).and_offset(offset), Count),
        )?;
        let mut snippets = SnippetGenerator::create(&searcher, &*text_q, self.fields.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr)?;
            let text = |f: Field| {
                d.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            let message_id = text(self.fields.message_id);
            let snippet = snippets.snippet_from_doc(&d);
            let mut plain = snippet.fragment().to_owned();
            if plain.is_empty() {
                // No highlight (e.g. the match was a stemmed form): show the start.
                plain = text(self.fields.text).chars().take(SNIPPET_CHARS).collect();
            }
            out.push(ConvHit {
                conversation_id: text(self.fields.conversation_id),
                message_id: (!message_id.is_empty()).then_some(message_id),
                snippet: plain,
                snippet_html: snippet.to_html(),
                score,
            });
        }
        Ok((out, total))
    }
}

impl Drop for ConversationIndex {
    /// Commits what is staged, so a clean shutdown needs no rebuild at the next start.
    fn drop(&mut self) {
        if let Err(e) = self.commit_staged() {
            tracing::warn!(error = %format!("{e:#}"), "committing the conversation index at close failed; it will be rebuilt");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(user: &str, conv: &str, id: &str, text: &str) -> ConvDoc {
        ConvDoc {
            user_id: user.into(),
            conversation_id: conv.into(),
            message_id: Some(id.into()),
            text: text.into(),
        }
    }

    #[test]
    fn searches_per_user_removes_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let (ix, disk) = ConversationIndex::open(dir.path()).unwrap();
        assert_eq!(disk.generation, None);
        ix.apply(
            &[],
            &[
                ConvDoc {
                    user_id: "u1".into(),
                    conversation_id: "c1".into(),
                    message_id: None,
                    text: "Quarterly planning".into(),
                },
                msg("u1", "c1", "m1", "How do I reset the router password?"),
                msg("u2", "c2", "m2", "router firmware upgrade"),
            ],
            1,
        )
        .unwrap();
        let (hits, total) = ix.search("u1", "router", 0, 10).unwrap();
        assert_eq!(total, 1);
        assert_eq!(hits[0].message_id.as_deref(), Some("m1"));
        assert!(hits[0].snippet.contains("router"), "{:?}", hits[0]);
        assert!(hits[0].snippet_html.contains("<b>router</b>"));
        let (hits, _) = ix.search("u1", "planning", 0, 10).unwrap();
        assert_eq!(hits[0].message_id, None);
        assert_eq!(ix.search("u2", "password", 0, 10).unwrap().1, 0);

        ix.apply(&["c1".into()], &[], 2).unwrap();
        assert_eq!(ix.search("u1", "router", 0, 10).unwrap().1, 0);
        drop(ix);
        let (ix, disk) = ConversationIndex::open(dir.path()).unwrap();
        assert_eq!(
            disk,
            OnDisk {
                generation: Some(2),
                count: 1
            }
        );
        assert_eq!(ix.search("u2", "routers", 0, 10).unwrap().1, 1);
    }

    #[test]
    fn query_syntax_in_user_text_does_not_fail() {
        let dir = tempfile::tempdir().unwrap();
        let (ix, _) = ConversationIndex::open(dir.path()).unwrap();
        ix.apply(&[], &[msg("u", "c", "m", "price (USD) AND tax")], 1)
            .unwrap();
        assert_eq!(ix.search("u", "price (USD", 0, 5).unwrap().1, 1);
        assert_eq!(ix.search("u", "\"unclosed", 0, 5).unwrap().1, 0);
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    #[test]
    #[ignore = "timing probe"]
    fn commit_cost() {
        let dir = tempfile::tempdir().unwrap();
        let (ix, _) = ConversationIndex::open(dir.path()).unwrap();
        let t = std::time::Instant::now();
        for i in 0..200u64 {
            ix.apply(
                &[],
                &[ConvDoc {
                    user_id: "u".into(),
                    conversation_id: format!("c{}", i / 10),
                    message_id: Some(format!("m{i}")),
                    text: format!("message {i} about routers and invoices"),
                }],
                i + 1,
            )
            .unwrap();
        }
        eprintln!("200 single-doc commits: {:?} per commit", t.elapsed() / 200);
        let t = std::time::Instant::now();
        for i in 200..10_200u64 {
            let doc = ConvDoc {
                user_id: "u".into(),
                conversation_id: format!("c{}", i / 100),
                message_id: Some(format!("m{i}")),
                text: format!("message {i} about routers and invoices"),
            };
            ix.stage(&[], &[doc], i + 1).unwrap();
        }
        ix.commit_staged().unwrap();
        eprintln!("10,000 staged docs and one commit: {:?}", t.elapsed());
    }
}
