//! DOCX (WordprocessingML, transitional or Strict): body paragraphs with heading levels
//! from styles and outline levels, list items from numbering, tables with merged cells,
//! text boxes, equations (as LaTeX), pictures, charts and SmartArt text; page headers
//! before the body and footers after it (each text once), then footnotes and endnotes.
//! Comments are left out. Pages follow the breaks Word recorded at its last layout
//! (`lastRenderedPageBreak`), or the explicit page breaks when there are none.

mod math;
mod numbering;
mod styles;
mod table;

use std::collections::HashMap;

use self::numbering::Numbering;
use self::styles::{num_pr, Styles};
use super::blocks::Blocks;
use super::package::{Package, Rel};
use super::xml::{Element, Node};
use super::{chart, drawing, expect_root, finish};
use crate::parse::{BlockKind, ParseError, ParsedDocument};

/// Parses a DOCX file.
pub fn parse(bytes: &[u8]) -> Result<ParsedDocument, ParseError> {
    let mut pkg = Package::open(bytes)?;
    // Some writers leave out the package relationship; Word itself still opens those.
    let main = match pkg.main_part() {
        Ok(main) => main,
        Err(_) if pkg.zip().contains("word/document.xml") => "word/document.xml".to_owned(),
        Err(e) => return Err(e),
    };
    let doc = pkg
        .xml(&main)?
        .ok_or_else(|| ParseError::Invalid("the document part is missing".into()))?;
    expect_root(&doc, "document")?;
    let body = doc
        .child("body")
        .ok_or_else(|| ParseError::Invalid("the document has no body".into()))?;
    let rels = pkg.rels(&main)?;
    // Styles and numbering only refine the structure: damaged ones are ignored.
    let part_xml = |pkg: &mut Package, kind: &str| -> Option<Element> {
        let target = rels.values().find(|r| r.kind == kind && !r.external)?;
        pkg.optional_xml(&target.target)
    };
    let styles = Styles::parse(part_xml(&mut pkg, "styles").as_ref());
    let numbering = Numbering::parse(part_xml(&mut pkg, "numbering").as_ref());
    let footnotes = part_xml(&mut pkg, "footnotes");
    let endnotes = part_xml(&mut pkg, "endnotes");
    let rendered_breaks = body.find("lastRenderedPageBreak").is_some();

    let mut w = Walker {
        pkg: &mut pkg,
        rels: rels.clone(),
        styles,
        numbering,
        rendered_breaks,
        pages: 1,
        text_page: None,
    };
    let mut out = Blocks::new();
    w.walk_blocks(body, &mut out);
    let last_page = w.pages;

    let mut headers = Blocks::new();
    let mut footers = Blocks::new();
    for (kind, sink, page) in [
        ("headerReference", &mut headers, 1),
        ("footerReference", &mut footers, last_page),
    ] {
        w.pages = page;
        for part in furniture_parts(body, kind, &rels) {
            w.walk_part(&part, sink);
        }
    }
    w.pages = last_page;
    let mut notes = Blocks::new();
    for root in [footnotes.as_ref(), endnotes.as_ref()]
        .into_iter()
        .flatten()
    {
        for note in root.elements() {
            if note.attr("type").is_some_and(|t| t != "normal") {
                continue;
            }
            w.walk_blocks(note, &mut notes);
        }
    }

    // Headers were read on page 1, footers and notes on the last page.
    let mut blocks = dedup_furniture(headers);
    blocks.extend(out);
    blocks.extend(dedup_furniture(footers));
    blocks.extend(notes);
    let (title, author) = pkg.core_properties();
    Ok(finish(blocks.blocks, title, author, last_page))
}

/// Header or footer parts referenced by the sections, each once, in order.
fn furniture_parts(body: &Element, kind: &str, rels: &HashMap<String, Rel>) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for sect in body.find_all("sectPr") {
        for r in sect.children_named(kind) {
            let Some(rel) = r.rel_attr("id").and_then(|id| rels.get(id)) else {
                continue;
            };
            if !rel.external && !parts.contains(&rel.target) {
                parts.push(rel.target.clone());
            }
        }
    }
    parts
}

/// Headers and footers become plain paragraphs (they open no sections), and text
/// repeated by several of them is kept once.
fn dedup_furniture(b: Blocks) -> Blocks {
    let mut out = Blocks::new();
    let mut seen: Vec<String> = Vec::new();
    for mut block in b.blocks {
        if seen.contains(&block.text) {
            continue;
        }
        seen.push(block.text.clone());
        if matches!(block.kind, BlockKind::Heading(_)) {
            block.kind = BlockKind::Paragraph;
        }
        out.blocks.push(block);
    }
    out
}

/// Inline things found while reading a paragraph's runs, emitted after its text.
enum Extra<'d> {
    /// A DrawingML `inline`/`anchor`.
    Drawing(&'d Element),
    /// A VML `pict` or `object`.
    Vml(&'d Element),
}

struct Walker<'p, 'a> {
    pkg: &'p mut Package<'a>,
    /// Relationships of the part being walked.
    rels: HashMap<String, Rel>,
    styles: Styles,
    numbering: Numbering,
    rendered_breaks: bool,
    pages: u32,
    /// Page on which the current paragraph's text starts (a page break can follow it).
    text_page: Option<u32>,
}

impl Walker<'_, '_> {
    /// Block-level content: paragraphs, tables and their wrappers.
    fn walk_blocks(&mut self, parent: &Element, out: &mut Blocks) {
        for el in parent.elements() {
            match el.name() {
                "p" => self.paragraph(el, out),
                "tbl" => {
                    let table = table::grid(el, |tc| self.cell_text(tc));
                    out.page = self.pages;
                    out.table(table);
                }
                "sdt" | "customXml" | "sdtContent" | "ins" | "moveTo" | "txbxContent"
                | "smartTag" => self.walk_blocks(el, out),
                "AlternateContent" => {
                    if let Some(branch) = alternate(el) {
                        self.walk_blocks(branch, out);
                    }
                }
                _ => {}
            }
        }
    }

    /// Another part (header, footer) walked with its own relationships.
    fn walk_part(&mut self, part: &str, out: &mut Blocks) {
        let Some(root) = self.pkg.optional_xml(part) else {
            return;
        };
        let rels = self.pkg.rels(part).unwrap_or_default();
        let saved = std::mem::replace(&mut self.rels, rels);
        let pages = self.pages;
        self.walk_blocks(&root, out);
        self.pages = pages;
        self.rels = saved;
    }

    fn cell_text(&mut self, tc: &Element) -> String {
        let mut inner = Blocks::new();
        self.walk_blocks(tc, &mut inner);
        inner
            .blocks
            .iter()
            .filter(|b| !matches!(b.kind, BlockKind::Image(_)))
            .map(|b| b.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn paragraph(&mut self, p: &Element, out: &mut Blocks) {
        let ppr = p.child("pPr");
        if !self.rendered_breaks && ppr.and_then(|p| p.child("pageBreakBefore")).is_some() {
            self.pages += 1;
        }
        let mut text = String::new();
        let mut extras = Vec::new();
        self.text_page = None;
        self.inline(p, &mut text, &mut extras);
        let text_page = self.text_page.unwrap_or(self.pages);

        let style_id = ppr
            .and_then(|p| p.child("pStyle"))
            .and_then(|s| s.attr("val"));
        let style = self.styles.get(style_id).cloned().unwrap_or_default();
        let outline = ppr
            .and_then(|p| p.child("outlineLvl"))
            .and_then(|o| o.attr("val"))
            .and_then(|v| v.parse::<u8>().ok())
            .filter(|l| *l < 9)
            .map(|l| l + 1);
        let heading = style.heading.or(outline);
        let num = ppr
            .and_then(|p| p.child("numPr"))
            .and_then(num_pr)
            .or(style.numbering);
        let listed = num
            .as_ref()
            .filter(|(id, lvl)| self.numbering.is_list(id, *lvl));
        let has_text = !text.trim().is_empty();

        out.page = text_page;
        match (heading, listed) {
            (Some(level), Some((id, lvl))) if has_text => {
                let label = self.numbering.next_label(id, *lvl);
                let label = label.trim_end_matches('.');
                out.heading(level, &format!("{label} {text}"));
            }
            (Some(level), _) => out.heading(level, &text),
            (None, Some((id, lvl))) if has_text => {
                // Numbers are part of what the reader sees ("2.1.", "b)"); bullets are not.
                let label = self.numbering.next_label(id, *lvl);
                out.list_item(format!("{label} {text}").trim_start());
            }
            _ => out.paragraph(&text),
        }
        out.page = self.pages;
        for extra in extras {
            match extra {
                Extra::Drawing(d) => self.drawing(d, out),
                Extra::Vml(v) => self.vml(v, out),
            }
        }
    }

    /// Text of runs and inline containers, in order; drawings are set aside.
    fn inline<'d>(&mut self, el: &'d Element, text: &mut String, extras: &mut Vec<Extra<'d>>) {
        for c in &el.children {
            let Node::Element(e) = c else {
                continue;
            };
            match e.name() {
                "r" => self.run(e, text, extras),
                "hyperlink" | "ins" | "moveTo" | "smartTag" | "customXml" | "sdtContent"
                | "fldSimple" | "dir" | "bdo" | "sdt" => self.inline(e, text, extras),
                "AlternateContent" => {
                    if let Some(branch) = alternate(e) {
                        self.inline(branch, text, extras);
                    }
                }
                "oMathPara" => {
                    let eqs: Vec<String> = e.children_named("oMath").map(math::to_latex).collect();
                    text.push_str(&format!("\n$${}$$\n", eqs.join(" ")));
                }
                "oMath" => text.push_str(&format!(" ${}$ ", math::to_latex(e))),
                _ => {}
            }
        }
    }

    fn run<'d>(&mut self, r: &'d Element, text: &mut String, extras: &mut Vec<Extra<'d>>) {
        for e in r.elements() {
            match e.name() {
                "t" => {
                    let t = e.text();
                    if self.text_page.is_none() && !t.trim().is_empty() {
                        self.text_page = Some(self.pages);
                    }
                    text.push_str(&t);
                }
                "tab" | "ptab" => text.push('\t'),
                "br" if e.attr("type") == Some("page") => {
                    if !self.rendered_breaks {
                        self.pages += 1;
                    }
                    text.push('\n');
                }
                "br" | "cr" => text.push('\n'),
                "noBreakHyphen" => text.push('-'),
                "sym" => {
                    let c = e
                        .attr("char")
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        // Symbol-font characters live in the private use area.
                        .filter(|c| !(0xE000..0xF900).contains(c))
                        .and_then(char::from_u32);
                    if let Some(c) = c {
                        text.push(c);
                    }
                }
                "lastRenderedPageBreak" if self.rendered_breaks => self.pages += 1,
                "drawing" => extras.extend(
                    e.elements()
                        .filter(|d| d.name() == "inline" || d.name() == "anchor")
                        .map(Extra::Drawing),
                ),
                "pict" | "object" => extras.push(Extra::Vml(e)),
                // Inside a run, a branch holds run content (drawings, pictures).
                "AlternateContent" => {
                    if let Some(branch) = alternate(e) {
                        self.run(branch, text, extras);
                    }
                }
                "ruby" => {
                    if let Some(base) = e.child("rubyBase") {
                        self.inline(base, text, extras);
                    }
                }
                _ => {}
            }
        }
    }

    /// A DrawingML drawing: pictures, text boxes, charts, groups, in order.
    fn drawing(&mut self, d: &Element, out: &mut Blocks) {
        let ext = d.child("extent");
        let size = |attr: &str| {
            ext.and_then(|e| e.attr(attr))
                .and_then(drawing::length_px)
                .unwrap_or(0)
        };
        let (w, h) = (size("cx"), size("cy"));
        let alt = drawing::alt_text(d.child("docPr"));
        self.drawing_content(d, alt.as_deref(), (w, h), out);
    }

    fn drawing_content(
        &mut self,
        el: &Element,
        alt: Option<&str>,
        size: (u32, u32),
        out: &mut Blocks,
    ) {
        for e in el.elements() {
            match e.name() {
                "pic" => {
                    let own = e.path(&["spPr", "xfrm", "ext"]).and_then(|x| {
                        Some((
                            drawing::length_px(x.attr("cx")?)?,
                            drawing::length_px(x.attr("cy")?)?,
                        ))
                    });
                    let (w, h) = match own {
                        Some((w, h)) if w > 0 && h > 0 => (w, h),
                        _ => size,
                    };
                    let own_alt = drawing::alt_text(e.path(&["nvPicPr", "cNvPr"]));
                    out.page = self.pages;
                    out.image(drawing::picture(own_alt.as_deref().or(alt), w, h));
                }
                "txbxContent" => self.walk_blocks(e, out),
                "chart" => {
                    let Some(rel) = e.rel_attr("id").and_then(|id| self.rels.get(id)).cloned()
                    else {
                        continue;
                    };
                    if let Some(root) = self.pkg.optional_xml(&rel.target) {
                        out.page = self.pages;
                        chart::read(&root).push_to(out, size.0, size.1);
                    }
                }
                "relIds" => {
                    let Some(rel) = e.rel_attr("dm").and_then(|id| self.rels.get(id)).cloned()
                    else {
                        continue;
                    };
                    if let Some(root) = self.pkg.optional_xml(&rel.target) {
                        out.page = self.pages;
                        for text in drawing::diagram_texts(&root) {
                            out.list_item(&text);
                        }
                    }
                }
                "AlternateContent" => {
                    if let Some(branch) = alternate(e) {
                        self.drawing_content(branch, alt, size, out);
                    }
                }
                n if n.ends_with("Pr") => {}
                _ => self.drawing_content(e, alt, size, out),
            }
        }
    }

    /// Legacy VML: text boxes and image data.
    fn vml(&mut self, v: &Element, out: &mut Blocks) {
        for tb in v.find_all("txbxContent") {
            self.walk_blocks(tb, out);
        }
        for shape in v.find_all("shape") {
            if shape.find("imagedata").is_none() {
                continue;
            }
            let style = shape.attr("style").unwrap_or_default();
            let dim = |key: &str| {
                style
                    .split(';')
                    .filter_map(|kv| kv.split_once(':'))
                    .find(|(k, _)| k.trim() == key)
                    .and_then(|(_, v)| drawing::length_px(v))
                    .unwrap_or(0)
            };
            let alt = shape.attr("alt").map(str::to_owned);
            out.page = self.pages;
            out.image(drawing::picture(
                alt.as_deref(),
                dim("width"),
                dim("height"),
            ));
        }
    }
}

/// The branch of `mc:AlternateContent` to read: the first `Choice` (what current Office
/// writes), else the `Fallback`. Reading both would duplicate text boxes.
fn alternate(el: &Element) -> Option<&Element> {
    el.child("Choice").or_else(|| el.child("Fallback"))
}
