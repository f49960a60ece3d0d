//! Parse quality against the docling fixtures' reference Markdown
//! (`../shared/fixtures/docling/tests/data/<format>/`): word recall and precision,
//! heading recall and table-cell recall per file, per format and overall, and pages per
//! second for PDFs. Run through `scripts/parse_eval.sh [format ...]`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ragd::parse::{self, render, Format, ParseOptions};

#[derive(Default, Clone, Copy)]
struct Score {
    gt_words: usize,
    our_words: usize,
    common_words: usize,
    gt_headings: usize,
    found_headings: usize,
    gt_cells: usize,
    found_cells: usize,
    pages: u32,
    secs: f64,
    files: usize,
    failed: usize,
}

impl Score {
    fn add(&mut self, o: &Score) {
        self.gt_words += o.gt_words;
        self.our_words += o.our_words;
        self.common_words += o.common_words;
        self.gt_headings += o.gt_headings;
        self.found_headings += o.found_headings;
        self.gt_cells += o.gt_cells;
        self.found_cells += o.found_cells;
        self.pages += o.pages;
        self.secs += o.secs;
        self.files += o.files;
        self.failed += o.failed;
    }
    fn ratio(a: usize, b: usize) -> String {
        if b == 0 {
            "-".into()
        } else {
            format!("{:.3}", a as f64 / b as f64)
        }
    }
    fn row(&self, name: &str) -> String {
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            self.files,
            Self::ratio(self.common_words, self.gt_words),
            Self::ratio(self.common_words, self.our_words),
            Self::ratio(self.found_headings, self.gt_headings),
            Self::ratio(self.found_cells, self.gt_cells),
            if self.pages > 0 && self.secs > 0.0 {
                format!("{:.1}", self.pages as f64 / self.secs)
            } else {
                "-".into()
            },
        )
    }
}

/// Markdown link and image targets are not text: `[text](url)` counts as `text`.
fn strip_link_targets(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut rest = md;
    while let Some(i) = rest.find("](") {
        out.push_str(&rest[..i + 1]);
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) if !after[..j].contains(char::is_whitespace) || after[..j].starts_with('<') => {
                rest = &after[j + 1..]
            }
            _ => {
                out.push_str("](");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `<!-- image -->` and other placeholders of the reference are not text.
fn strip_comments(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut rest = md;
    while let Some(i) = rest.find("<!--") {
        out.push_str(&rest[..i]);
        match rest[i..].find("-->") {
            Some(j) => rest = &rest[i + j + 3..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

fn words(md: &str) -> HashMap<String, usize> {
    let cleaned = strip_comments(&strip_link_targets(md));
    let mut out = HashMap::new();
    for w in cleaned
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *out.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    out
}

fn norm(s: &str) -> String {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

fn headings(md: &str) -> Vec<String> {
    md.lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let hashes = t.chars().take_while(|c| *c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| norm(&t[hashes..]))
                .filter(|h| !h.is_empty())
        })
        .collect()
}

fn cells(md: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    let md = strip_link_targets(md);
    for line in md.lines().map(str::trim).filter(|l| l.starts_with('|')) {
        if line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) {
            continue;
        }
        for cell in line.replace("\\|", "\u{1}").split('|') {
            let c = norm(&cell.replace('\u{1}', "|"));
            if !c.is_empty() {
                *out.entry(c).or_insert(0) += 1;
            }
        }
    }
    out
}

fn overlap(gt: &HashMap<String, usize>, ours: &HashMap<String, usize>) -> usize {
    gt.iter()
        .map(|(k, n)| (*n).min(ours.get(k).copied().unwrap_or(0)))
        .sum()
}

fn score(ours: &str, gt: &str) -> Score {
    let (gw, ow) = (words(gt), words(ours));
    let gh = headings(gt);
    let oh = headings(ours);
    let found_headings = gh
        .iter()
        .filter(|h| {
            oh.iter().any(|o| {
                o == *h
                    || (o.len() > 3 && h.contains(o.as_str()))
                    || (h.len() > 3 && o.contains(h.as_str()))
            })
        })
        .count();
    let (gc, oc) = (cells(gt), cells(ours));
    Score {
        gt_words: gw.values().sum(),
        our_words: ow.values().sum(),
        common_words: overlap(&gw, &ow),
        gt_headings: gh.len(),
        found_headings,
        gt_cells: gc.values().sum(),
        found_cells: overlap(&gc, &oc),
        files: 1,
        ..Score::default()
    }
}

/// The reference Markdown for a source file, wherever the fixture keeps it.
fn groundtruth(dir: &Path, file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_string_lossy().into_owned();
    let stem = file.file_stem()?.to_string_lossy().into_owned();
    let gt = dir.join("groundtruth");
    [
        gt.join(format!("{name}.md")),
        gt.join(format!("{stem}.md")),
        gt.join(format!("tesseract/full_page/{stem}.tesseract.full_page.md")),
    ]
    .into_iter()
    .find(|p| p.exists())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/docling/tests/data");
    assert!(root.exists(), "{} is missing", root.display());
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    if wanted.is_empty() {
        wanted = ["csv", "docx", "html", "md", "pdf", "pptx", "xlsx", "ocr"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut overall = Score::default();
    let mut rows = Vec::new();
    for fmt in &wanted {
        let dir = root.join(fmt);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("sources"))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        let mut total = Score::default();
        for file in files {
            let Some(gt_path) = groundtruth(&dir, &file) else {
                continue;
            };
            let name = file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            // Macro-enabled workbooks are workbooks: score them as XLSX.
            let format = match Format::for_filename(&name.replace(".xlsm", ".xlsx")) {
                Ok(f) => f,
                Err(_) => continue,
            };
            let opts = ParseOptions {
                enable_ocr: fmt == "ocr",
                pdfium_library: models.join("pdfium/libpdfium.so"),
                ..ParseOptions::default()
            };
            let bytes = std::fs::read(&file).expect("read fixture");
            let gt = std::fs::read_to_string(&gt_path).expect("read groundtruth");
            let t = Instant::now();
            let s = match parse::parse(format, &bytes, &opts) {
                Ok(doc) => {
                    let secs = t.elapsed().as_secs_f64();
                    let mut s = score(&render::to_markdown(&doc), &gt);
                    if format.name == "pdf" {
                        s.pages = doc.pages;
                        s.secs = secs;
                    }
                    s
                }
                Err(e) => {
                    eprintln!("{fmt}/{name}: {e}");
                    Score {
                        failed: 1,
                        files: 1,
                        ..score("", &gt)
                    }
                }
            };
            println!("{}", s.row(&format!("{fmt}/{name}")));
            total.add(&s);
        }
        rows.push(total.row(fmt));
        overall.add(&total);
    }
    println!("\n| format | files | word recall | word precision | heading recall | table-cell recall | pages/s |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!("{}", overall.row("overall"));
    if overall.failed > 0 {
        println!("\n{} file(s) failed to parse", overall.failed);
    }
}
