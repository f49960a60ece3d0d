//! Chunks for `/parse/sections`: `semantic` (one chunk per heading section, continued
//! when a section passes `max_chunk_words`), `page`, `paragraph`, `disabled` (the whole
//! document) and `auto` (chooses from the document's structure). The semantic chunker
//! also runs incrementally, page by page, for the streaming endpoint.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::parse::render::{self, ImageInfo, TableInfo};
use crate::parse::{language, Block, BlockKind, ParsedDocument};

/// How to chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkMode {
    Auto,
    Semantic,
    Page,
    Paragraph,
    Disabled,
}

impl ChunkMode {
    /// Parses the API's name for a mode.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => Self::Auto,
            "semantic" => Self::Semantic,
            "page" => Self::Page,
            "paragraph" => Self::Paragraph,
            "disabled" => Self::Disabled,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Semantic => "semantic",
            Self::Page => "page",
            Self::Paragraph => "paragraph",
            Self::Disabled => "disabled",
        }
    }
}

/// Sizes, in words.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub target_words: usize,
    pub max_words: usize,
}

/// One chunk as the API reports it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SectionChunk {
    pub chunk_id: String,
    /// Markdown of the chunk's blocks.
    pub content: String,
    /// Headings from the top down to this chunk's section, joined by " > ".
    pub section_path: String,
    pub heading: String,
    /// 0 before the first heading.
    pub heading_level: u8,
    pub page_start: u32,
    pub page_end: u32,
    pub tables: Vec<TableInfo>,
    pub images: Vec<ImageInfo>,
    pub chunk_index: usize,
    /// Chunks in the document (0 on incremental `chunk` events: the total is in `stats`).
    pub total_chunks: usize,
    pub word_count: usize,
    /// Section id of the enclosing section (the nearest heading of a lower level).
    pub parent_section_id: Option<String>,
    /// Id of this chunk's own section.
    pub section_id: String,
    pub language: String,
    pub is_continuation: bool,
}

/// Statistics of one chunking run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChunkingStats {
    pub strategy_used: String,
    pub total_chunks: usize,
    pub sections_found: usize,
    /// Heading level ("1".."6") to count.
    pub heading_distribution: BTreeMap<String, usize>,
    pub avg_chunk_words: f64,
    pub pages_processed: u32,
    pub total_words: usize,
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// The mode `auto` picks: headings -> semantic, several pages -> page, else paragraph.
pub fn resolve_auto(doc: &ParsedDocument) -> ChunkMode {
    let headings = doc
        .blocks
        .iter()
        .filter(|b| matches!(b.kind, BlockKind::Heading(_)))
        .count();
    if headings >= 2 {
        ChunkMode::Semantic
    } else if doc.pages > 1 {
        ChunkMode::Page
    } else {
        ChunkMode::Paragraph
    }
}

/// Chunks a whole document.
pub fn chunk_document(
    doc: &ParsedDocument,
    mode: ChunkMode,
    sizes: Sizes,
) -> (Vec<SectionChunk>, ChunkingStats) {
    let used = if mode == ChunkMode::Auto {
        resolve_auto(doc)
    } else {
        mode
    };
    let doc_lang = doc_language(&doc.blocks);
    let mut b = Builder::new(sizes, doc_lang);
    match used {
        ChunkMode::Semantic | ChunkMode::Auto => {
            for block in &doc.blocks {
                b.push(block.clone());
            }
            b.close_section();
        }
        ChunkMode::Page => {
            let mut page = None;
            for block in &doc.blocks {
                if page.is_some_and(|p| p != block.page) {
                    b.flush_group();
                }
                page = Some(block.page);
                b.track_heading(block);
                b.add_sized(block.clone());
            }
            b.flush_group();
        }
        ChunkMode::Paragraph => {
            for block in &doc.blocks {
                b.track_heading(block);
                b.add_sized(block.clone());
            }
            b.flush_group();
        }
        ChunkMode::Disabled => {
            b.group = doc.blocks.clone();
            b.flush_group();
        }
    }
    let mut chunks = b.chunks;
    let total = chunks.len();
    for c in &mut chunks {
        c.total_chunks = total;
    }
    let label = if mode == ChunkMode::Auto {
        used.name().to_owned()
    } else {
        mode.name().to_owned()
    };
    let stats = stats(doc, &chunks, label);
    (chunks, stats)
}

/// Statistics for `chunks` of `doc`.
pub fn stats(doc: &ParsedDocument, chunks: &[SectionChunk], strategy: String) -> ChunkingStats {
    let mut dist = BTreeMap::new();
    for b in &doc.blocks {
        if let BlockKind::Heading(l) = b.kind {
            *dist.entry(l.to_string()).or_insert(0) += 1;
        }
    }
    let chunk_words: usize = chunks.iter().map(|c| c.word_count).sum();
    ChunkingStats {
        strategy_used: strategy,
        total_chunks: chunks.len(),
        sections_found: dist.values().sum(),
        heading_distribution: dist,
        avg_chunk_words: if chunks.is_empty() {
            0.0
        } else {
            chunk_words as f64 / chunks.len() as f64
        },
        pages_processed: doc.pages,
        total_words: doc.blocks.iter().map(|b| words(&b.text)).sum(),
    }
}

/// The language of a document from its first blocks.
pub fn doc_language(blocks: &[Block]) -> String {
    let sample: String = blocks
        .iter()
        .take(40)
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    language::detect(&sample, language::DOCUMENT_CONFIDENCE)
        .unwrap_or_else(|| language::UNDETERMINED.into())
}

/// An open heading on the stack: level, text, section id.
#[derive(Clone)]
struct Heading {
    level: u8,
    text: String,
    id: String,
}

/// Accumulates blocks into chunks; also the incremental semantic chunker.
pub struct Builder {
    sizes: Sizes,
    doc_lang: String,
    stack: Vec<Heading>,
    sections: usize,
    /// Id of the current section ("s0" before any heading).
    section: String,
    /// Whether the current section already produced a chunk.
    continued: bool,
    group: Vec<Block>,
    group_words: usize,
    tables_seen: usize,
    images_seen: usize,
    /// Chunks produced so far.
    pub chunks: Vec<SectionChunk>,
}

impl Builder {
    /// A chunker with these sizes; `doc_lang` labels chunks too short to detect.
    pub fn new(sizes: Sizes, doc_lang: String) -> Self {
        Self {
            sizes: Sizes {
                target_words: sizes.target_words.max(1),
                max_words: sizes.max_words.max(sizes.target_words).max(1),
            },
            doc_lang,
            stack: Vec::new(),
            sections: 0,
            section: "s0".into(),
            continued: false,
            group: Vec::new(),
            group_words: 0,
            tables_seen: 0,
            images_seen: 0,
            chunks: Vec::new(),
        }
    }

    /// Semantic mode: a heading closes the open section and opens its own.
    pub fn push(&mut self, block: Block) {
        if matches!(block.kind, BlockKind::Heading(_)) {
            self.close_section();
            self.track_heading(&block);
        }
        self.group_words += words(&block.text);
        self.group.push(block);
    }

    /// Semantic mode: emits the open section (split if it passes the maximum).
    pub fn close_section(&mut self) {
        if self.group_words > self.sizes.max_words {
            let blocks = std::mem::take(&mut self.group);
            self.group_words = 0;
            for b in blocks {
                self.add_sized(b);
            }
        }
        self.flush_group();
    }

    /// Incremental mode: at a page end, emits what the open section holds so far; the
    /// rest of the section, on later pages, comes as continuations.
    pub fn end_page(&mut self) {
        self.close_section();
    }

    fn track_heading(&mut self, block: &Block) {
        if let BlockKind::Heading(level) = block.kind {
            self.sections += 1;
            let id = format!("s{}", self.sections);
            self.stack.retain(|h| h.level < level);
            self.stack.push(Heading {
                level,
                text: block.text.split_whitespace().collect::<Vec<_>>().join(" "),
                id: id.clone(),
            });
            self.section = id;
            self.continued = false;
        }
    }

    /// Adds a block, cutting before it when the group would pass the target size, and
    /// splitting a block larger than the maximum by sentences.
    fn add_sized(&mut self, block: Block) {
        let n = words(&block.text);
        if self.group_words > 0 && self.group_words + n > self.sizes.target_words {
            self.flush_group();
        }
        if n > self.sizes.max_words && !matches!(block.kind, BlockKind::Table(_)) {
            self.flush_group();
            for piece in split_words(&block.text, self.sizes.target_words) {
                let part = Block {
                    kind: block.kind.clone(),
                    text: piece,
                    page: block.page,
                };
                self.emit(vec![part]);
            }
            return;
        }
        self.group_words += n;
        self.group.push(block);
    }

    fn flush_group(&mut self) {
        if self.group.is_empty() {
            return;
        }
        let group = std::mem::take(&mut self.group);
        self.group_words = 0;
        self.emit(group);
    }

    fn emit(&mut self, group: Vec<Block>) {
        let (page_start, page_end) = group
            .iter()
            .fold((u32::MAX, 0), |(s, e), b| (s.min(b.page), e.max(b.page)));
        let content = render::blocks_markdown(&group);
        if content.trim().is_empty() {
            return;
        }
        let tables = render::tables_of(&group, self.tables_seen);
        let images = render::images_of(&group, self.images_seen);
        self.tables_seen += tables.len();
        self.images_seen += images.len();
        let plain: String = group
            .iter()
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let language = language::detect(&plain, language::CHUNK_CONFIDENCE)
            .unwrap_or_else(|| self.doc_lang.clone());
        let top = self.stack.last();
        let parent = self
            .stack
            .len()
            .checked_sub(2)
            .and_then(|i| self.stack.get(i))
            .map(|h| h.id.clone());
        let index = self.chunks.len();
        self.chunks.push(SectionChunk {
            chunk_id: format!("chunk-{index:04}"),
            word_count: words(&content),
            content,
            section_path: self
                .stack
                .iter()
                .map(|h| h.text.as_str())
                .collect::<Vec<_>>()
                .join(" > "),
            heading: top.map(|h| h.text.clone()).unwrap_or_default(),
            heading_level: top.map(|h| h.level).unwrap_or(0),
            page_start,
            page_end,
            tables,
            images,
            chunk_index: index,
            total_chunks: 0,
            parent_section_id: parent,
            section_id: self.section.clone(),
            language,
            is_continuation: self.continued,
        });
        self.continued = true;
    }
}

/// Splits text into pieces of about `target` words at sentence ends where possible.
fn split_words(text: &str, target: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for w in text.split_whitespace() {
        cur.push(w);
        let sentence_end = w.ends_with(['.', '!', '?', '؟', '。']);
        if cur.len() >= target && (sentence_end || cur.len() >= target + target / 4) {
            out.push(cur.join(" "));
            cur.clear();
        }
    }
    if !cur.is_empty() {
        out.push(cur.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::markdown;

    fn sizes(t: usize, m: usize) -> Sizes {
        Sizes {
            target_words: t,
            max_words: m,
        }
    }

    #[test]
    fn semantic_sections_paths_parents_and_continuations() {
        let long: String = (0..60).map(|i| format!("Sentence {i} is here. ")).collect();
        let md = format!("Preamble text.\n\n# A\n\nIntro of A.\n\n## B\n\n{long}\n\n## C\n\nShort.\n\n# D\n\nEnd.");
        let doc = markdown::parse(&md);
        let (chunks, stats) = chunk_document(&doc, ChunkMode::Auto, sizes(50, 100));
        assert_eq!(stats.strategy_used, "semantic");
        assert_eq!(stats.sections_found, 4);
        assert_eq!(stats.heading_distribution.get("2"), Some(&2));
        assert_eq!(chunks[0].heading_level, 0);
        assert_eq!(chunks[0].section_path, "");
        let b: Vec<&SectionChunk> = chunks.iter().filter(|c| c.heading == "B").collect();
        assert!(b.len() >= 3, "B has 240 words, max 100: {}", b.len());
        assert!(!b[0].is_continuation && b[1].is_continuation);
        assert!(b
            .iter()
            .all(|c| c.section_path == "A > B" && c.word_count <= 100));
        let a = chunks.iter().find(|c| c.heading == "A").unwrap();
        assert_eq!(
            b[0].parent_section_id.as_deref(),
            Some(a.section_id.as_str())
        );
        assert_eq!(a.parent_section_id, None);
        let d = chunks.iter().find(|c| c.heading == "D").unwrap();
        assert_eq!(d.section_path, "D");
        assert!(chunks
            .iter()
            .enumerate()
            .all(|(i, c)| c.chunk_index == i && c.total_chunks == chunks.len()));
        assert_eq!(stats.total_chunks, chunks.len());
    }

    #[test]
    fn paragraph_page_and_disabled() {
        let doc = ParsedDocument {
            pages: 2,
            blocks: (0..6)
                .map(|i| Block {
                    kind: BlockKind::Paragraph,
                    text: format!("para {i} has five words"),
                    page: 1 + i / 3,
                })
                .collect(),
            ..Default::default()
        };
        let (c, s) = chunk_document(&doc, ChunkMode::Paragraph, sizes(10, 20));
        assert_eq!(s.strategy_used, "paragraph");
        assert_eq!(c.len(), 3);
        let (c, _) = chunk_document(&doc, ChunkMode::Page, sizes(100, 200));
        assert_eq!(
            c.iter()
                .map(|c| (c.page_start, c.page_end))
                .collect::<Vec<_>>(),
            [(1, 1), (2, 2)]
        );
        let (c, s) = chunk_document(&doc, ChunkMode::Disabled, sizes(1, 1));
        assert_eq!((c.len(), c[0].word_count, s.total_words), (1, 30, 30));
        assert_eq!(resolve_auto(&doc), ChunkMode::Page);
    }
}
