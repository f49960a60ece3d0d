//! PPTX (PresentationML): slides in presentation order, one page each. Title
//! placeholders become headings, body placeholders list items (unless bullets are
//! switched off), other text boxes paragraphs (unless they carry bullets); tables,
//! pictures, charts, SmartArt text and grouped shapes in shape-tree order; speaker
//! notes and reviewer comments after each slide's content. Date, footer and
//! slide-number placeholders repeat on every slide and are left out.

use std::collections::HashMap;

use super::blocks::Blocks;
use super::numerals::{letters, roman};
use super::package::{Package, Rel};
use super::xml::Element;
use super::{chart, comment_line, drawing, expect_root, finish};
use crate::parse::{ParseError, ParsedDocument, Table};

/// Most slides read from one presentation.
const MAX_SLIDES: usize = 2_000;

/// Parses a PPTX file.
pub fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let mut pkg = Package::open(bytes)?;
    let main = pkg.main_part()?;
    let pres = pkg
        .xml(&main)?
        .ok_or_else(|| ParseError::Invalid("the presentation part is missing".into()))?;
    expect_root(&pres, "presentation")?;
    let rels = pkg.rels(&main)?;
    let slides = slide_parts(&pres, &rels);
    if slides.len() > MAX_SLIDES {
        return Err(ParseError::TooLarge(format!(
            "the presentation has {} slides; at most {MAX_SLIDES} are read",
            slides.len()
        )));
    }
    let authors = comment_authors(&mut pkg, &rels);
    let mut out = Blocks::new();
    for (i, part) in slides.iter().enumerate() {
        out.page = i as u32 + 1;
        let Some(slide) = pkg.xml(part)? else {
            continue;
        };
        let slide_rels = pkg.rels(part)?;
        let mut s = Slide {
            pkg: &mut pkg,
            rels: slide_rels.clone(),
        };
        if let Some(tree) = slide.path(&["cSld", "spTree"]) {
            s.shapes(tree, &mut out, false);
        }
        if let Some(notes) = slide_rels
            .values()
            .find(|r| r.kind == "notesSlide" && !r.external)
        {
            let notes_part = notes.target.clone();
            if let Some(root) = s.pkg.xml(&notes_part)? {
                s.rels = s.pkg.rels(&notes_part)?;
                if let Some(tree) = root.path(&["cSld", "spTree"]) {
                    s.shapes(tree, &mut out, true);
                }
            }
        }
        for rel in slide_rels
            .values()
            .filter(|r| r.kind == "comments" && !r.external)
        {
            if let Some(root) = pkg.optional_xml(&rel.target) {
                push_comments(&root, &authors, &mut out);
            }
        }
    }
    let (title, author) = pkg.core_properties();
    let pages = slides.len().max(1) as u32;
    Ok(finish(out.blocks, title, author, pages))
}

/// Slide parts in presentation order (`sldIdLst`); when the list is missing, every
/// slide relationship ordered by the number in its name.
fn slide_parts(pres: &Element, rels: &HashMap<String, Rel>) -> Vec<String> {
    let listed: Vec<String> = pres
        .child("sldIdLst")
        .map(|l| {
            l.children_named("sldId")
                .filter_map(|s| rels.get(s.rel_attr("id")?))
                .filter(|r| !r.external)
                .map(|r| r.target.clone())
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed;
    }
    let mut all: Vec<String> = rels
        .values()
        .filter(|r| r.kind == "slide" && !r.external)
        .map(|r| r.target.clone())
        .collect();
    all.sort_by_key(|t| {
        t.chars()
            .filter(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u64>()
            .unwrap_or(u64::MAX)
    });
    all
}

struct Slide<'p, 'a> {
    pkg: &'p mut Package<'a>,
    /// Relationships of the slide (or notes slide) being read.
    rels: HashMap<String, Rel>,
}

impl Slide<'_, '_> {
    /// A shape tree or group, in z-order (how PowerPoint lists them).
    fn shapes(&mut self, tree: &Element, out: &mut Blocks, notes: bool) {
        for e in tree.elements() {
            match e.name() {
                "sp" => self.shape(e, out, notes),
                "grpSp" => self.shapes(e, out, notes),
                "graphicFrame" if !notes => self.frame(e, out),
                "pic" if !notes => self.picture(e, out),
                "AlternateContent" => {
                    if let Some(branch) = e.child("Choice").or_else(|| e.child("Fallback")) {
                        self.shapes(branch, out, notes);
                    }
                }
                _ => {}
            }
        }
    }

    fn shape(&mut self, sp: &Element, out: &mut Blocks, notes: bool) {
        let ph = sp.path(&["nvSpPr", "nvPr", "ph"]);
        let ph_type = ph.map(|p| p.attr("type").unwrap_or("body"));
        if matches!(ph_type, Some("dt" | "sldNum" | "ftr" | "hdr" | "sldImg")) {
            return;
        }
        if notes && ph_type != Some("body") {
            return;
        }
        let Some(body) = sp.child("txBody") else {
            return;
        };
        if matches!(ph_type, Some("title" | "ctrTitle")) && !notes {
            let text: Vec<String> = body.children_named("p").map(paragraph_text).collect();
            out.heading(1, &text.join(" "));
            return;
        }
        let bulleted_placeholder = matches!(ph_type, Some("body" | "obj")) && !notes;
        let mut counters = [0u32; 9];
        for p in body.children_named("p") {
            let text = paragraph_text(p);
            let ppr = p.child("pPr");
            let lvl = ppr
                .and_then(|p| p.attr("lvl"))
                .and_then(|l| l.parse::<usize>().ok())
                .unwrap_or(0)
                .min(8);
            let auto = ppr.and_then(|p| p.child("buAutoNum"));
            let bullet = ppr.is_some_and(|p| p.child("buChar").is_some());
            let no_bullet = ppr.is_some_and(|p| p.child("buNone").is_some());
            for c in counters.iter_mut().skip(lvl + 1) {
                *c = 0;
            }
            if let Some(auto) = auto {
                if text.trim().is_empty() {
                    continue;
                }
                let start = auto
                    .attr("startAt")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1);
                counters[lvl] = if counters[lvl] == 0 {
                    start
                } else {
                    counters[lvl].saturating_add(1)
                };
                let label = auto_number(counters[lvl], auto.attr("type").unwrap_or("arabicPeriod"));
                out.list_item(&format!("{label} {text}"));
                continue;
            }
            counters[lvl] = 0;
            if bullet || (bulleted_placeholder && !no_bullet) {
                out.list_item(&text);
            } else {
                out.paragraph(&text);
            }
        }
    }

    /// A graphic frame: a table, a chart or a SmartArt diagram.
    fn frame(&mut self, frame: &Element, out: &mut Blocks) {
        let Some(data) = frame.path(&["graphic", "graphicData"]) else {
            return;
        };
        let (w, h) = frame
            .child("xfrm")
            .and_then(|x| x.child("ext"))
            .map(size_of)
            .unwrap_or((0, 0));
        if let Some(tbl) = data.child("tbl") {
            out.table(table(tbl));
        } else if let Some(c) = data.child("chart") {
            if let Some(root) = self.related_xml(c.rel_attr("id")) {
                chart::read(&root).push_to(out, w, h);
            }
        } else if let Some(ids) = data.child("relIds") {
            if let Some(root) = self.related_xml(ids.rel_attr("dm")) {
                for text in drawing::diagram_texts(&root) {
                    out.list_item(&text);
                }
            }
        }
    }

    /// A picture whose image the package really holds (dangling or broken
    /// references are left out).
    fn picture(&mut self, pic: &Element, out: &mut Blocks) {
        let Some(blip) = pic.path(&["blipFill", "blip"]) else {
            return;
        };
        let rel = blip
            .rel_attr("embed")
            .or_else(|| blip.rel_attr("link"))
            .and_then(|id| self.rels.get(id));
        let Some(rel) = rel else {
            return;
        };
        if !rel.external && !self.pkg.zip().contains(&rel.target) {
            return;
        }
        let (w, h) = pic
            .path(&["spPr", "xfrm", "ext"])
            .map(size_of)
            .unwrap_or((0, 0));
        let alt = drawing::alt_text(pic.path(&["nvPicPr", "cNvPr"]));
        out.image(drawing::picture(alt.as_deref(), w, h));
    }

    fn related_xml(&mut self, id: Option<&str>) -> Option<Element> {
        let rel = self.rels.get(id?)?;
        if rel.external {
            return None;
        }
        let target = rel.target.clone();
        self.pkg.optional_xml(&target)
    }
}

/// Comment authors by id, from the legacy (`commentAuthors.xml`) and modern
/// (`authors.xml`) lists: "Name (initials)".
fn comment_authors(pkg: &mut Package, rels: &HashMap<String, Rel>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let parts: Vec<String> = rels
        .values()
        .filter(|r| matches!(r.kind.as_str(), "commentAuthors" | "authors") && !r.external)
        .map(|r| r.target.clone())
        .collect();
    for part in parts {
        let Some(root) = pkg.optional_xml(&part) else {
            continue;
        };
        for a in root.elements() {
            let (Some(id), Some(name)) = (a.attr("id"), a.attr("name")) else {
                continue;
            };
            let label = match a.attr("initials").filter(|i| !i.is_empty()) {
                Some(i) => format!("{name} ({i})"),
                None => name.to_owned(),
            };
            out.insert(id.to_owned(), label);
        }
    }
    out
}

/// Reviewer comments of a slide, legacy (`p:cm` with `p:text`) or modern (`txBody`,
/// with replies).
fn push_comments(root: &Element, authors: &HashMap<String, String>, out: &mut Blocks) {
    for cm in root
        .find_all("cm")
        .into_iter()
        .chain(root.find_all("reply"))
    {
        let text = match cm.child("text") {
            Some(t) => t.text(),
            None => cm
                .child("txBody")
                .map(|b| {
                    b.children_named("p")
                        .map(paragraph_text)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        };
        if text.trim().is_empty() {
            continue;
        }
        let author = cm
            .attr("authorId")
            .and_then(|id| authors.get(id))
            .map(String::as_str);
        let time = cm.attr("dt").or_else(|| cm.attr("created"));
        out.paragraph(&comment_line(author, time, &text));
    }
}

/// The label of an auto-numbered paragraph: `arabicPeriod` 3 -> "3.", `alphaLcParenR`
/// 2 -> "b)".
fn auto_number(n: u32, scheme: &str) -> String {
    let body = if scheme.starts_with("alphaLc") {
        letters(n).to_lowercase()
    } else if scheme.starts_with("alphaUc") {
        letters(n)
    } else if scheme.starts_with("romanLc") {
        roman(n).to_lowercase()
    } else if scheme.starts_with("romanUc") {
        roman(n)
    } else {
        n.to_string()
    };
    if scheme.ends_with("ParenBoth") {
        format!("({body})")
    } else if scheme.ends_with("ParenR") {
        format!("{body})")
    } else if scheme.ends_with("Plain") {
        body
    } else {
        format!("{body}.")
    }
}

/// `a:tbl` -> a grid; merged cells (`hMerge`, `vMerge`) repeat the merged text.
fn table(tbl: &Element) -> Table {
    // Past this many copied bytes, covered cells stay empty (see the DOCX tables).
    let mut repeat_budget: usize = 8 << 20;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for tr in tbl.children_named("tr") {
        let mut row: Vec<String> = Vec::new();
        for tc in tr.children_named("tc") {
            let col = row.len();
            let copied = if tc.attr("hMerge").is_some_and(truthy) {
                row.last()
            } else if tc.attr("vMerge").is_some_and(truthy) {
                rows.last().and_then(|r| r.get(col))
            } else {
                None
            };
            let text = if let Some(c) = copied {
                if c.len() <= repeat_budget {
                    repeat_budget -= c.len();
                    c.clone()
                } else {
                    String::new()
                }
            } else {
                tc.child("txBody")
                    .map(|b| {
                        b.children_named("p")
                            .map(paragraph_text)
                            .filter(|t| !t.trim().is_empty())
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            };
            row.push(text);
        }
        rows.push(row);
    }
    Table { rows }
}

/// Text of an `a:p`: runs, fields and line breaks.
fn paragraph_text(p: &Element) -> String {
    let mut s = String::new();
    for e in p.elements() {
        match e.name() {
            "r" | "fld" => {
                if let Some(t) = e.child("t") {
                    s.push_str(&t.text());
                }
            }
            "br" => s.push('\n'),
            _ => {}
        }
    }
    s
}

fn size_of(ext: &Element) -> (u32, u32) {
    let px = |a: &str| ext.attr(a).and_then(drawing::length_px).unwrap_or(0);
    (px("cx"), px("cy"))
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true")
}
