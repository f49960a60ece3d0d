//! Parsing without storing: `/parse`, `/parse/sections` and their streaming variants.
//! Parsing runs on blocking threads, a bounded number at a time.

use super::answer::{SUMMARY_MAX_CHARS, SUMMARY_MAX_FILE_BYTES};
use std::ops::ControlFlow;

use serde::Serialize;
use tokio::sync::mpsc;
use utoipa::ToSchema;

use super::KnowledgeBase;
use crate::chunk::sections::{self, Builder, ChunkMode, ChunkingStats, SectionChunk, Sizes};
use crate::error::{Error, Result};
use crate::parse::clean::{self, CleanOptions};
use crate::parse::render::{self, ImageInfo, TableInfo};
use crate::parse::{self, BlockKind, Format, PageEvent, ParseError, ParsedDocument, TableMode};

/// What to parse and how.
#[derive(Debug, Clone)]
pub struct ParseJob {
    pub filename: String,
    pub bytes: Vec<u8>,
    pub enable_ocr: bool,
    pub table_mode: TableMode,
    pub clean: CleanOptions,
    /// Describe images (with a vision model when one is configured, else from OCR and size).
    pub describe_images: bool,
}

/// `metadata` of a parse result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocMetadata {
    pub num_pages: u32,
    pub title: String,
    pub author: Option<String>,
}

/// `content` of a parse result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocContent {
    pub cleaned_text: String,
    pub char_count: usize,
}

/// The result of `/parse`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ParseResult {
    pub success: bool,
    pub source_file: String,
    /// Extension with the dot, e.g. `.pdf`.
    pub format: String,
    pub metadata: DocMetadata,
    pub content: DocContent,
    pub tables: Vec<TableInfo>,
    pub tables_count: usize,
    pub images: Vec<ImageInfo>,
    pub images_count: usize,
    pub full_text: String,
    pub llm_ready: String,
    /// `markdown` (the clean Markdown of the document) or `llm_summary`.
    pub llm_ready_mode: String,
}

/// The result of `/parse/sections`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SectionsResult {
    pub success: bool,
    pub source_file: String,
    pub format: String,
    pub metadata: DocMetadata,
    pub chunks: Vec<SectionChunk>,
    pub chunking_stats: ChunkingStats,
    pub full_text: Option<String>,
}

/// One event of a streaming parse.
#[derive(Debug)]
pub enum ParseEvent {
    Status(&'static str),
    Metadata {
        source_file: String,
        format: String,
        metadata: DocMetadata,
    },
    Progress {
        page: u32,
        total_pages: u32,
    },
    Section(SectionChunk),
    Chunk(SectionChunk),
    Stats(ChunkingStats),
    Error(Error),
    Done,
}

fn metadata(
    doc_title: Option<&str>,
    author: Option<String>,
    pages: u32,
    filename: &str,
) -> DocMetadata {
    let stem = std::path::Path::new(filename)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    DocMetadata {
        num_pages: pages,
        title: doc_title.map(str::to_owned).or(stem).unwrap_or_default(),
        author,
    }
}

fn to_error(name: &str, e: ParseError) -> Error {
    Error::bad_request(format!("{name}: {e}"))
}

impl ParseJob {
    fn format(&self) -> Result<(String, &'static Format)> {
        let name = super::ingest::clean_filename(&self.filename)?;
        let format = Format::for_filename(&name).map_err(|e| Error::bad_request(e.to_string()))?;
        Ok((name, format))
    }

    fn options(&self, defaults: &parse::ParseOptions) -> parse::ParseOptions {
        parse::ParseOptions {
            enable_ocr: self.enable_ocr,
            table_mode: self.table_mode,
            ..defaults.clone()
        }
    }
}

/// Drops image descriptions when they were not asked for.
fn strip_descriptions(doc: &mut ParsedDocument) {
    for b in &mut doc.blocks {
        if matches!(b.kind, BlockKind::Image(_)) {
            b.text.clear();
        }
    }
}

impl KnowledgeBase {
    /// Parses and cleans one file on a blocking thread.
    async fn parse_clean(
        &self,
        job: &ParseJob,
    ) -> Result<(String, &'static Format, ParsedDocument)> {
        let (name, format) = job.format()?;
        let _permit = self
            .parse_permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("shutting down".into()))?;
        let opts = job.options(&self.parse_defaults);
        let (bytes, clean_opts, describe) = (job.bytes.clone(), job.clean, job.describe_images);
        let n = name.clone();
        let started = std::time::Instant::now();
        let doc = tokio::task::spawn_blocking(move || -> Result<ParsedDocument> {
            let mut doc = parse::parse(format, &bytes, &opts).map_err(|e| to_error(&n, e))?;
            clean::clean_document(&mut doc, clean_opts);
            if !describe {
                strip_descriptions(&mut doc);
            }
            Ok(doc)
        })
        .await??;
        tracing::info!(file = %name, pages = doc.pages, blocks = doc.blocks.len(),
            elapsed_ms = started.elapsed().as_millis() as u64, "parsed");
        Ok((name, format, doc))
    }

    /// `/parse`: the cleaned text, tables, images, full text and LLM-ready text (the
    /// LLM's summary when `summarize` and an LLM is loaded and the file is small enough,
    /// else the clean Markdown).
    pub async fn parse_file(
        &self,
        job: ParseJob,
        include_tables: bool,
        include_images: bool,
        summarize: bool,
    ) -> Result<ParseResult> {
        let file_bytes = job.bytes.len();
        let (name, _, doc) = self.parse_clean(&job).await?;
        let cleaned_text = doc
            .blocks
            .iter()
            .filter(|b| !matches!(b.kind, BlockKind::Table(_) | BlockKind::Image(_)))
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        let full_text = render::blocks_markdown(doc.blocks.iter().filter(|b| match b.kind {
            BlockKind::Table(_) => include_tables,
            BlockKind::Image(_) => include_images,
            _ => true,
        }));
        let tables = render::tables_of(&doc.blocks, 0);
        let images = render::images_of(&doc.blocks, 0);
        let markdown = render::to_markdown(&doc);
        let summary = if summarize
            && file_bytes <= SUMMARY_MAX_FILE_BYTES
            && cleaned_text.chars().count() <= SUMMARY_MAX_CHARS
        {
            self.summarize_markdown(&markdown).await?
        } else {
            None
        };
        let (llm_ready, llm_ready_mode) = match summary {
            Some(s) => (s, "llm_summary"),
            None => (markdown, "markdown"),
        };
        Ok(ParseResult {
            success: true,
            format: parse::extension_of(&name),
            metadata: metadata(doc.title.as_deref(), doc.author.clone(), doc.pages, &name),
            source_file: name,
            content: DocContent {
                char_count: cleaned_text.chars().count(),
                cleaned_text,
            },
            tables_count: tables.len(),
            tables,
            images_count: images.len(),
            images,
            llm_ready,
            llm_ready_mode: llm_ready_mode.into(),
            full_text,
        })
    }

    /// `/parse/sections`: the document chunked by `mode`.
    pub async fn parse_sections(
        &self,
        job: ParseJob,
        mode: ChunkMode,
        sizes: Sizes,
        include_full_text: bool,
    ) -> Result<SectionsResult> {
        let (name, _, doc) = self.parse_clean(&job).await?;
        let (chunks, chunking_stats) = sections::chunk_document(&doc, mode, sizes);
        Ok(SectionsResult {
            success: true,
            format: parse::extension_of(&name),
            metadata: metadata(doc.title.as_deref(), doc.author.clone(), doc.pages, &name),
            source_file: name,
            chunks,
            chunking_stats,
            full_text: include_full_text.then(|| render::to_markdown(&doc)),
        })
    }

    /// `/parse/sections/stream`: parse everything, then stream the sections.
    pub fn parse_sections_stream(
        self: &std::sync::Arc<Self>,
        job: ParseJob,
        sizes: Sizes,
    ) -> mpsc::Receiver<ParseEvent> {
        let (tx, rx) = mpsc::channel(64);
        let kb = self.clone();
        tokio::spawn(async move {
            let _ = tx.send(ParseEvent::Status("parsing")).await;
            let (name, _, doc) = match kb.parse_clean(&job).await {
                Ok(v) => v,
                Err(e) => {
                    let _ = tx.send(ParseEvent::Error(e)).await;
                    let _ = tx.send(ParseEvent::Done).await;
                    return;
                }
            };
            let meta = metadata(doc.title.as_deref(), doc.author.clone(), doc.pages, &name);
            let _ = tx
                .send(ParseEvent::Metadata {
                    format: parse::extension_of(&name),
                    source_file: name,
                    metadata: meta,
                })
                .await;
            let _ = tx.send(ParseEvent::Status("processing")).await;
            let (chunks, stats) = sections::chunk_document(&doc, ChunkMode::Auto, sizes);
            for c in chunks {
                if tx.send(ParseEvent::Section(c)).await.is_err() {
                    return;
                }
            }
            let _ = tx.send(ParseEvent::Stats(stats)).await;
            let _ = tx.send(ParseEvent::Done).await;
        });
        rx
    }

    /// `/parse/sections/incremental`: parse page by page and send each chunk as soon as
    /// its page is done, with a progress event per page. Stops when the client leaves.
    pub fn parse_sections_incremental(
        self: &std::sync::Arc<Self>,
        job: ParseJob,
        sizes: Sizes,
    ) -> mpsc::Receiver<ParseEvent> {
        let (tx, rx) = mpsc::channel(64);
        let kb = self.clone();
        tokio::spawn(async move {
            if let Err(e) = kb.run_incremental(job, sizes, tx.clone()).await {
                let _ = tx.send(ParseEvent::Error(e)).await;
            }
            let _ = tx.send(ParseEvent::Done).await;
        });
        rx
    }

    async fn run_incremental(
        &self,
        job: ParseJob,
        sizes: Sizes,
        tx: mpsc::Sender<ParseEvent>,
    ) -> Result<()> {
        let (name, format) = job.format()?;
        if !format.incremental {
            return Err(Error::bad_request(format!(
                "'{name}': incremental parsing supports {}",
                Format::incremental_extensions()
            )));
        }
        let _permit = self
            .parse_permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("shutting down".into()))?;
        let opts = job.options(&self.parse_defaults);
        let (clean_opts, describe) = (job.clean, job.describe_images);
        tokio::task::spawn_blocking(move || -> Result<()> {
            let ext = parse::extension_of(&name);
            // Everything seen so far, for the final statistics.
            let mut all = ParsedDocument::default();
            let mut builder: Option<Builder> = None;
            let mut sent = 0usize;
            let started = std::time::Instant::now();
            let send = |ev: ParseEvent| -> ControlFlow<()> {
                // The client has gone away: stop parsing.
                match tx.blocking_send(ev) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(_) => ControlFlow::Break(()),
                }
            };
            parse::for_each_page(format, &job.bytes, &opts, &mut |ev| match ev {
                PageEvent::Opened(info) => {
                    all.title = info.title.clone();
                    all.author = info.author.clone();
                    all.pages = info.pages;
                    let meta = metadata(info.title.as_deref(), info.author, info.pages, &name);
                    send(ParseEvent::Metadata {
                        source_file: name.clone(),
                        format: ext.clone(),
                        metadata: meta,
                    })
                }
                PageEvent::Page { number, blocks } => {
                    let mut page = ParsedDocument {
                        blocks,
                        ..Default::default()
                    };
                    clean::clean_document(&mut page, clean_opts);
                    if !describe {
                        strip_descriptions(&mut page);
                    }
                    let b = builder.get_or_insert_with(|| {
                        Builder::new(sizes, sections::doc_language(&page.blocks))
                    });
                    for block in &page.blocks {
                        b.push(block.clone());
                    }
                    b.end_page();
                    all.blocks.extend(page.blocks);
                    send(ParseEvent::Progress {
                        page: number,
                        total_pages: all.pages,
                    })?;
                    for c in &b.chunks[sent..] {
                        send(ParseEvent::Chunk(c.clone()))?;
                    }
                    sent = b.chunks.len();
                    tracing::debug!(page = number, chunks = sent, "incremental page done");
                    ControlFlow::Continue(())
                }
            })
            .map_err(|e| to_error(&name, e))?;
            let chunks = builder.map(|b| b.chunks).unwrap_or_default();
            let stats = sections::stats(&all, &chunks, "semantic".into());
            tracing::info!(file = %name, pages = all.pages, chunks = chunks.len(),
                elapsed_ms = started.elapsed().as_millis() as u64, "incremental parse done");
            let _ = send(ParseEvent::Stats(stats));
            Ok(())
        })
        .await?
    }
}
