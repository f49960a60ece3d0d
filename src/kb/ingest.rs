//! Ingestion of one source, as a pipeline of stages that many sources go through at
//! once: parse -> chunk -> detect language -> tokenize (on a blocking thread), embed (the
//! embedder's bulk queue, whose passes mix the chunks of every source waiting), store
//! (the group writer: SQLite, then both derived indexes). Duplicate and update-in-place
//! rules follow DECISIONS.md.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::{json, Map};
use sha2::{Digest, Sha256};

use super::search::searchable;
use super::timings::Stage;
use super::writer::{SourceWrite, Written};
use super::{IngestionResult, KnowledgeBase};
use crate::chunk::{self, RetrievalChunk};
use crate::error::{Error, Result};
use crate::parse::{self, language, Format};
use crate::store::{chunks as repo, NewChunk, SourceRow};

/// A file to ingest.
pub struct FileUpload {
    /// The client's file name; only its last path component is used.
    pub filename: String,
    pub bytes: Vec<u8>,
    pub section: String,
}

/// Namespace for chunk ids: uuid v5 of `source \0 position`.
const CHUNK_NS: uuid::Uuid = uuid::Uuid::from_u128(0x6c1d_5a52_8d0e_4b53_9a6e_7267_6421_0001);

fn chunk_id(source: &str, position: usize) -> String {
    uuid::Uuid::new_v5(&CHUNK_NS, format!("{source}\0{position}").as_bytes()).to_string()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The format of an uploaded file. A refusal lists the types `/upload` reads and says
/// that ZIP archives of them are read too, by `/upload/bulk/zip`.
pub fn upload_format(filename: &str) -> Result<&'static Format> {
    Format::for_filename(filename).map_err(|e| {
        if crate::parse::formats::extension_of(filename) == ".zip" {
            return Error::bad_request(
                "a .zip archive is uploaded to /api/v1/upload/bulk/zip, which ingests each file in it",
            );
        }
        let why = e.to_string();
        if why.contains("; supported:") {
            Error::bad_request(format!("{why}, and .zip archives of these (at /api/v1/upload/bulk/zip)"))
        } else {
            Error::bad_request(why)
        }
    })
}

/// The last path component of a client-supplied name, never a path.
pub fn clean_filename(name: &str) -> Result<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() || base == "." || base == ".." {
        return Err(Error::bad_request("the uploaded file has no name"));
    }
    if base.chars().count() > 255 || base.chars().any(char::is_control) {
        return Err(Error::bad_request(
            "the file name is too long or contains control characters",
        ));
    }
    Ok(base.to_owned())
}

/// A source parsed and chunked: everything but its vectors (which went to the embedder
/// as the chunks were made).
pub(super) struct Prepared {
    pub title: String,
    pub chunks: Vec<RetrievalChunk>,
    pub languages: Vec<String>,
    /// Hash of each chunk's embedding input.
    pub hashes: Vec<String>,
}

/// Where a source came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceType {
    File,
    Url,
}

impl SourceType {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            SourceType::File => "file",
            SourceType::Url => "url",
        }
    }
}

/// Reports a task's progress (0.0-1.0) as ingestion moves through its stages.
pub type Progress = std::sync::Arc<dyn Fn(f64) + Send + Sync>;

/// One source to ingest.
pub struct IngestSource {
    /// The source's identity: a file name or a URL.
    pub name: String,
    pub source_type: SourceType,
    pub format: &'static Format,
    pub bytes: Vec<u8>,
    pub section: String,
    /// Title to use when the document has none of its own (e.g. an HTML `<title>`).
    pub title_hint: Option<String>,
    /// Refuse content already stored under another source (`content_hash`).
    pub check_duplicates: bool,
    /// Commit only while this task is still running (cancellation is atomic).
    pub task: Option<String>,
    pub progress: Option<Progress>,
}

/// A source stored by [`KnowledgeBase::ingest_unacknowledged`], not yet reported to
/// its client.
pub(super) struct Ingested {
    pub result: IngestionResult,
    /// The store generation that holds it, when anything was written.
    pub generation: Option<u64>,
}

impl FileUpload {
    /// The upload as a source to ingest.
    fn into_source(self) -> Result<IngestSource> {
        let filename = clean_filename(&self.filename)?;
        let format = upload_format(&filename)?;
        Ok(IngestSource {
            name: filename,
            source_type: SourceType::File,
            format,
            bytes: self.bytes,
            section: self.section,
            title_hint: None,
            check_duplicates: true,
            task: None,
            progress: None,
        })
    }
}

impl KnowledgeBase {
    /// Ingests one uploaded file synchronously and reports what changed.
    pub async fn ingest_file(&self, up: FileUpload) -> Result<IngestionResult> {
        self.ingest(up.into_source()?).await
    }

    /// [`ingest_file`](Self::ingest_file) for one file of many answered together: its
    /// client is told later, so the caller passes the generation to
    /// [`acknowledge`](Self::acknowledge) when it answers.
    pub(super) async fn ingest_file_unacknowledged(&self, up: FileUpload) -> Result<Ingested> {
        self.ingest_unacknowledged(up.into_source()?).await
    }

    /// Parses, chunks, embeds and stores one source; a source is either written whole
    /// (SQLite, then both indexes) or not at all, and the answer comes once it is durable.
    pub async fn ingest(&self, src: IngestSource) -> Result<IngestionResult> {
        let done = self.ingest_unacknowledged(src).await?;
        if let Some(g) = done.generation {
            self.acknowledge(g);
        }
        Ok(done.result)
    }

    /// Makes what the store holds up to `generation` visible to every search from now
    /// on: call it when a client is told that its sources are stored.
    pub(super) fn acknowledge(&self, generation: u64) {
        self.writer.acknowledge(generation);
    }

    /// [`ingest`](Self::ingest) without telling the full-text index that a client knows
    /// of the source yet.
    #[tracing::instrument(skip_all, fields(source = %src.name, bytes = src.bytes.len(), task = ?src.task))]
    pub(super) async fn ingest_unacknowledged(&self, src: IngestSource) -> Result<Ingested> {
        let started = std::time::Instant::now();
        let name = src.name.clone();
        let content_hash = sha256_hex(&src.bytes);
        let section = if src.section.trim().is_empty() {
            "uploaded".to_owned()
        } else {
            src.section.trim().to_owned()
        };
        let base = match src.source_type {
            SourceType::File => IngestionResult {
                success: true,
                filename: Some(name.clone()),
                ..Default::default()
            },
            SourceType::Url => IngestionResult {
                success: true,
                url: Some(name.clone()),
                ..Default::default()
            },
        };
        let report = |p: f64| {
            if let Some(f) = &src.progress {
                f(p)
            }
        };
        // This source's chunks are on their way to the embedder until it is parsed: a
        // pass that would not be full waits a little for them (and for the other files
        // of the same upload) rather than running nearly empty.
        let expected = self.embedder.expect_bulk();
        // An early duplicate check saves parsing and embedding (the writer checks again),
        // and what the stored version already has is not embedded again.
        let mut vectors = match self
            .stored_state(&name, src.check_duplicates.then(|| content_hash.clone()))
            .await?
        {
            Stored::Duplicate(dup) => {
                tracing::info!(existing = %dup.0.source, "duplicate content; nothing written");
                return Ok(Ingested {
                    result: duplicate_result(base, dup),
                    generation: None,
                });
            }
            Stored::Vectors(v) => v,
        };

        // Parsing and embedding overlap: the chunks of each page go to the embedder as
        // soon as the page is read (a whole file at once for formats without pages), so
        // a long PDF's first passes run while its later pages are still being parsed.
        let t_parse = std::time::Instant::now();
        let (to_embed, batches) = tokio::sync::mpsc::unbounded_channel::<Vec<(String, Vec<u32>)>>();
        let parse = async {
            let _permit = self
                .parse_permits
                .acquire()
                .await
                .map_err(|_| Error::Unavailable("shutting down".into()))?;
            let counter = self.embedder.token_counter().clone();
            let window = self.embedder.max_tokens();
            let opts = self.parse_defaults.clone();
            let known: HashSet<String> = vectors.keys().cloned().collect();
            let (n, format, bytes, hint) =
                (name.clone(), src.format, src.bytes, src.title_hint.clone());
            let progress = src.progress.clone();
            let prepared = tokio::task::spawn_blocking(move || {
                let input = PrepareInput {
                    name: &n,
                    format,
                    bytes: &bytes,
                    opts: &opts,
                    counter: &counter,
                    window,
                    title_hint: hint,
                };
                let mut sink = |batch| {
                    // The receiver is gone only when ingestion has failed already.
                    let _ = to_embed.send(batch);
                };
                let mut pages = |done: u32, of: u32| {
                    if let Some(p) = &progress {
                        p(0.4 * f64::from(done) / f64::from(of.max(done).max(1)))
                    }
                };
                prepare(input, &known, &mut sink, &mut pages)
            })
            .await??;
            drop(expected);
            let parse_time = t_parse.elapsed();
            self.timings.add(Stage::Parse, parse_time);
            tracing::debug!(chunks = prepared.chunks.len(), "parsed and chunked");
            report(0.4);
            Ok::<_, Error>((prepared, parse_time))
        };
        let embedder = &self.embedder;
        let embed = tokio_stream::wrappers::UnboundedReceiverStream::new(batches)
            .map(|batch| async move {
                let (hashes, seqs): (Vec<String>, Vec<Vec<u32>>) = batch.into_iter().unzip();
                let fresh = embedder.embed_bulk(seqs).await?;
                Ok::<_, Error>(hashes.into_iter().zip(fresh).collect::<Vec<_>>())
            })
            .buffered(EMBED_REQUESTS_IN_FLIGHT)
            .try_collect::<Vec<_>>();
        let (parsed, embedded) = tokio::join!(parse, embed);
        let (prepared, parse_time) = parsed?;
        vectors.extend(embedded?.into_iter().flatten());
        let embed_time = t_parse.elapsed().saturating_sub(parse_time);
        report(0.8);

        let t_store = std::time::Instant::now();
        let chunks = prepared.chunks.len();
        let title = prepared.title.clone();
        let written = self
            .writer
            .write(SourceWrite {
                name: name.clone(),
                source_type: src.source_type,
                file_type: file_type(src.format, &name),
                section,
                content_hash,
                check_duplicates: src.check_duplicates,
                task: src.task.clone(),
                prepared,
                vectors,
            })
            .await?;
        let store_time = t_store.elapsed();
        report(1.0);

        let (generation, previous, added, updated, skipped, removed, first_chunk_id) = match written
        {
            Written::Duplicate(existing, first) => {
                tracing::info!(existing = %existing.source, "duplicate content; nothing written");
                return Ok(Ingested {
                    result: duplicate_result(base, (existing, first)),
                    generation: None,
                });
            }
            Written::Stored {
                generation,
                previous,
                added,
                updated,
                skipped,
                removed,
                first_chunk_id,
            } => (
                generation,
                previous,
                added,
                updated,
                skipped,
                removed,
                first_chunk_id,
            ),
        };
        let mut out = IngestionResult {
            title,
            chunks_added: added as u64,
            chunks_updated: updated as u64,
            chunks_skipped: skipped as u64,
            ..base
        };
        if let Some(prev) = previous {
            out.is_duplicate = true;
            out.duplicate_type = Some(match src.source_type {
                SourceType::File => "filepath".into(),
                SourceType::Url => "url".into(),
            });
            out.existing_doc_id = first_chunk_id;
            out.existing_doc_title = Some(prev.title);
            out.duplicate_message = Some(format!(
                "'{name}' was already stored; updated in place \
                 ({added} added, {updated} updated, {skipped} unchanged, {removed} removed)"
            ));
        }
        tracing::info!(
            chunks,
            chunks_added = out.chunks_added,
            chunks_updated = out.chunks_updated,
            chunks_skipped = out.chunks_skipped,
            parse_ms = parse_time.as_millis() as u64,
            embed_wait_ms = embed_time.as_millis() as u64,
            store_wait_ms = store_time.as_millis() as u64,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "source ingested"
        );
        Ok(Ingested {
            result: out,
            generation: Some(generation),
        })
    }

    /// The stored source named `name`, if any (for URL duplicate checks).
    pub async fn source_exists(&self, name: &str) -> Result<Option<(SourceRow, Option<String>)>> {
        let name = name.to_owned();
        self.store
            .read(move |c| {
                Ok(match repo::source_by_name(c, &name)? {
                    Some(s) => {
                        let first = repo::first_chunk_id(c, &s.id)?;
                        Some((s, first))
                    }
                    None => None,
                })
            })
            .await
    }

    /// In one read: the source holding content `hash` if one does (when asked), else the
    /// vectors of the source stored as `name`, by text hash (none when it is new).
    async fn stored_state(&self, name: &str, hash: Option<String>) -> Result<Stored> {
        let name = name.to_owned();
        let embedder = self.searchable.embedder_id();
        self.store
            .read(move |c| {
                if let Some(dup) = hash
                    .map(|h| repo::source_by_hash(c, &h))
                    .transpose()?
                    .flatten()
                {
                    let first = repo::first_chunk_id(c, &dup.id)?;
                    return Ok(Stored::Duplicate((dup, first)));
                }
                Ok(Stored::Vectors(match repo::source_by_name(c, &name)? {
                    Some(s) => repo::vectors_by_hash(c, &s.id, embedder)?,
                    None => HashMap::new(),
                }))
            })
            .await
    }
}

/// What the store already holds of a source about to be ingested.
enum Stored {
    /// Another source holds the same content, and its first chunk.
    Duplicate((SourceRow, Option<String>)),
    /// The vectors of the stored version, by text hash.
    Vectors(HashMap<String, Vec<f32>>),
}

/// Rows of a source's chunks, each with its vector from `vectors` (by text hash).
pub(super) fn build_rows(
    source: &SourceRow,
    p: &Prepared,
    vectors: &HashMap<String, Vec<f32>>,
    now: &str,
) -> Result<Vec<NewChunk>> {
    let total = p.chunks.len();
    p.chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let hash = &p.hashes[i];
            let mut meta = Map::new();
            meta.insert("title".into(), json!(source.title));
            meta.insert("source".into(), json!(source.source));
            meta.insert("section".into(), json!(source.section));
            meta.insert("language".into(), json!(p.languages[i]));
            meta.insert("source_type".into(), json!(source.source_type));
            meta.insert("file_type".into(), json!(source.file_type));
            meta.insert("chunk_index".into(), json!(i));
            meta.insert("total_chunks".into(), json!(total));
            meta.insert("heading".into(), json!(c.heading));
            meta.insert("section_path".into(), json!(c.section_path));
            meta.insert("page_start".into(), json!(c.page_start));
            meta.insert("page_end".into(), json!(c.page_end));
            meta.insert("content_hash".into(), json!(source.content_hash));
            meta.insert("ingested_at".into(), json!(now));
            let embedding = vectors
                .get(hash)
                .cloned()
                .ok_or_else(|| Error::Internal(anyhow::anyhow!("no vector for chunk {i}")))?;
            Ok(NewChunk {
                id: chunk_id(&source.source, i),
                position: i as i64,
                text: c.text.clone(),
                text_hash: hash.clone(),
                language: p.languages[i].clone(),
                metadata: meta,
                embedding,
            })
        })
        .collect()
}

fn duplicate_result(
    base: IngestionResult,
    (existing, first): (SourceRow, Option<String>),
) -> IngestionResult {
    IngestionResult {
        title: existing.title.clone(),
        is_duplicate: true,
        duplicate_type: Some("content_hash".into()),
        existing_doc_id: first,
        existing_doc_title: Some(existing.title),
        duplicate_message: Some(format!(
            "identical content is already stored as '{}'; nothing was written",
            existing.source
        )),
        ..base
    }
}

/// The texts ingestion embeds for a file (its chunks' embedding inputs, in order), for
/// benchmarks that run the embedder alone on the same chunks as ingestion.
pub fn embedding_inputs(
    name: &str,
    bytes: &[u8],
    opts: &parse::ParseOptions,
    counter: &crate::ml::TokenCounter,
    window: usize,
) -> Result<Vec<String>> {
    let format = Format::for_filename(name).map_err(|e| Error::bad_request(e.to_string()))?;
    let input = PrepareInput {
        name,
        format,
        bytes,
        opts,
        counter,
        window,
        title_hint: None,
    };
    let p = prepare(input, &HashSet::new(), &mut |_| {}, &mut |_, _| {})?;
    Ok(p.chunks
        .iter()
        .map(|c| searchable(&c.embed_input()))
        .collect())
}

/// What [`prepare`] works from.
struct PrepareInput<'a> {
    name: &'a str,
    format: &'static Format,
    bytes: &'a [u8],
    opts: &'a parse::ParseOptions,
    counter: &'a crate::ml::TokenCounter,
    window: usize,
    title_hint: Option<String>,
}

/// Most embedding requests of one source in flight at once (one per page read).
const EMBED_REQUESTS_IN_FLIGHT: usize = 64;

/// Parses, chunks and tokenizes on a blocking thread: everything ingestion needs besides
/// the vectors. The document is read page by page (formats without pages come whole):
/// each page is cleaned and chunked as it comes, and the chunks it completes go to `sink`
/// at once as `(hash, token ids)`, every distinct embedding input that `known` (the
/// stored version's) lacks, so embedding overlaps parsing. `pages(done, of)` follows the
/// pages read. Stored text stays true to the source: only whitespace and hyphenation are
/// repaired.
fn prepare(
    input: PrepareInput<'_>,
    known: &HashSet<String>,
    sink: &mut dyn FnMut(Vec<(String, Vec<u32>)>),
    pages: &mut dyn FnMut(u32, u32),
) -> Result<Prepared> {
    let (name, counter) = (input.name, input.counter);
    let clean = parse::clean::CleanOptions {
        remove_urls: false,
        normalize_arabic: false,
    };
    let paged = input.format.pages.is_some();
    let mut chunker = chunk::Chunker::new(counter, input.window);
    let mut chunks: Vec<RetrievalChunk> = Vec::new();
    let mut hashes: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    // Hashes the chunks not hashed yet and sends those to embed.
    let mut send = |chunks: &[RetrievalChunk], hashes: &mut Vec<String>| -> Result<()> {
        let mut batch = Vec::new();
        for c in &chunks[hashes.len()..] {
            let raw = c.embed_input();
            let text = searchable(&raw);
            let hash = sha256_hex(text.as_bytes());
            if !known.contains(&hash) && seen.insert(hash.clone()) {
                // The chunker's ids stand where the searchable form is the input itself.
                let ids = if text == raw && !c.tokens.is_empty() {
                    debug_assert_eq!(c.tokens, counter.encode(&text)?, "chunker ids differ");
                    c.tokens.clone()
                } else {
                    counter.encode(&text)?
                };
                batch.push((hash.clone(), ids));
            }
            hashes.push(hash);
        }
        if !batch.is_empty() {
            sink(batch);
        }
        Ok(())
    };
    let (mut title, mut total, mut any_text) = (None, 0, false);
    let mut failed = None;
    parse::for_each_page(input.format, input.bytes, input.opts, &mut |event| {
        match event {
            parse::PageEvent::Opened(info) => {
                title = info.title;
                total = info.pages;
            }
            parse::PageEvent::Page { number, mut blocks } => {
                // A paged reader gives the metadata title only; the whole-file parse
                // falls back to the first heading of page 1 (before cleaning).
                if paged && number == 1 && title.is_none() {
                    title = parse::pdf::heading_title(&blocks);
                }
                for b in &mut blocks {
                    any_text |= !b.text.trim().is_empty();
                    parse::clean::clean_block(b, clean);
                    if parse::clean::keeps(b) {
                        chunker.push(b, &mut chunks);
                    }
                }
                if let Err(e) = send(&chunks, &mut hashes) {
                    failed = Some(e);
                    return std::ops::ControlFlow::Break(());
                }
                pages(number, total);
            }
        }
        std::ops::ControlFlow::Continue(())
    })
    .map_err(|e| Error::bad_request(format!("{name}: {e}")))?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !any_text {
        return Err(Error::bad_request(format!(
            "{name}: {}",
            parse::ParseError::Empty
        )));
    }
    chunker.finish(&mut chunks);
    if chunks.is_empty() {
        return Err(Error::bad_request(format!("{name}: no text to index")));
    }
    send(&chunks, &mut hashes)?;
    let languages = languages(&chunks);
    let title = title
        .map(|t| parse::clean::clean(&t, clean))
        .or(input.title_hint)
        .unwrap_or_else(|| file_stem(name));
    Ok(Prepared {
        title,
        chunks,
        languages,
        hashes,
    })
}

/// Each chunk's language; a chunk too short to tell takes the document's (detected on
/// its first 20 chunks, only when needed).
fn languages(chunks: &[RetrievalChunk]) -> Vec<String> {
    let doc_lang = std::cell::OnceCell::new();
    chunks
        .iter()
        .map(|c| {
            language::detect(&c.text, language::CHUNK_CONFIDENCE).unwrap_or_else(|| {
                doc_lang
                    .get_or_init(|| {
                        let sample: String = chunks
                            .iter()
                            .take(20)
                            .map(|c| c.text.as_str())
                            .collect::<Vec<_>>()
                            .join("\n");
                        language::detect(&sample, language::DOCUMENT_CONFIDENCE)
                            .unwrap_or_else(|| language::UNDETERMINED.into())
                    })
                    .clone()
            })
        })
        .collect()
}

/// `file_type` metadata: the extension without its dot (`html` for scraped pages).
fn file_type(format: &Format, name: &str) -> String {
    let ext = parse::extension_of(name);
    if format.extensions.contains(&ext.as_str()) {
        ext.trim_start_matches('.').to_owned()
    } else {
        format.name.to_owned()
    }
}

fn file_stem(name: &str) -> String {
    Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_are_never_paths() {
        assert_eq!(clean_filename("../../etc/passwd.md").unwrap(), "passwd.md");
        assert_eq!(clean_filename("C:\\docs\\a.txt").unwrap(), "a.txt");
        assert!(clean_filename("..").is_err());
        assert!(clean_filename("dir/").is_err());
    }

    #[test]
    fn chunk_ids_are_stable_per_source_and_position() {
        assert_eq!(chunk_id("a.md", 0), chunk_id("a.md", 0));
        assert_ne!(chunk_id("a.md", 0), chunk_id("a.md", 1));
        assert_ne!(chunk_id("a.md", 0), chunk_id("b.md", 0));
    }
}
