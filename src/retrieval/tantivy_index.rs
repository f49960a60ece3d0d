//! What both tantivy indexes share: the English analyzer, opening (or replacing an
//! unreadable index with an empty one), and commits that carry the store generation
//! as their payload, so a stale or damaged index is found at start-up and rebuilt.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tantivy::schema::Schema;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

use super::OnDisk;

/// How one index is laid out.
pub(super) struct Layout {
    /// Folder under the data directory.
    pub dir: &'static str,
    /// What the index is, for log lines.
    pub what: &'static str,
    pub schema: Schema,
    /// Name the text fields' analyzer is registered under.
    pub analyzer: &'static str,
    pub writer_heap: usize,
}

/// An open index: its folder, the index, one writer and a manually reloaded reader.
pub(super) struct Opened {
    pub dir: PathBuf,
    pub index: Index,
    pub writer: IndexWriter,
    pub reader: IndexReader,
}

/// Lower case, English stop words dropped, Porter stemming, tokens over 40 bytes dropped.
fn english() -> TextAnalyzer {
    let mut b = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .dynamic();
    if let Some(stop) = StopWordFilter::new(Language::English) {
        b = b.filter_dynamic(stop);
    }
    b.filter_dynamic(Stemmer::new(Language::English)).build()
}

/// Opens the index of `layout` under `data_dir`, or creates an empty one when it is
/// missing, unreadable or of another schema (the caller then rebuilds it from the store).
pub(super) fn open(data_dir: &Path, layout: &Layout) -> anyhow::Result<(Opened, OnDisk)> {
    let dir = data_dir.join(layout.dir);
    match open_existing(&dir, layout) {
        Ok(Some(found)) => return Ok(found),
        Ok(None) => {}
        Err(e) => tracing::warn!(
            error = %format!("{e:#}"),
            "{} unreadable; it will be rebuilt", layout.what
        ),
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    let index = Index::create_in_dir(&dir, layout.schema.clone())
        .with_context(|| format!("creating the {}", layout.what))?;
    let empty = OnDisk {
        generation: None,
        count: 0,
    };
    Ok((with_parts(dir, index, layout)?, empty))
}

fn open_existing(dir: &Path, layout: &Layout) -> anyhow::Result<Option<(Opened, OnDisk)>> {
    if !dir.join("meta.json").exists() {
        return Ok(None);
    }
    let index = Index::open_in_dir(dir)?;
    anyhow::ensure!(index.schema() == layout.schema, "schema differs");
    let generation = index.load_metas()?.payload.and_then(|p| p.parse().ok());
    let opened = with_parts(dir.to_owned(), index, layout)?;
    let count = opened.reader.searcher().num_docs();
    Ok(Some((opened, OnDisk { generation, count })))
}

fn with_parts(dir: PathBuf, index: Index, layout: &Layout) -> anyhow::Result<Opened> {
    index.tokenizers().register(layout.analyzer, english());
    let writer = index.writer_with_num_threads(1, layout.writer_heap)?;
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok(Opened {
        dir,
        index,
        writer,
        reader,
    })
}

/// Commits what `writer` holds with `generation` as the payload. Searches see it once
/// the caller reloads the reader (after letting go of the writer).
pub(super) fn commit(writer: &mut IndexWriter, generation: u64) -> anyhow::Result<()> {
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&generation.to_string());
    prepared.commit()?;
    Ok(())
}
