//! What a sheet holds besides cells: drawings (charts, pictures, text boxes) and
//! reviewer comments, threaded (with their authors' display names) or legacy notes.

use std::collections::HashMap;

use crate::parse::office::blocks::Blocks;
use crate::parse::office::package::{Package, Rel};
use crate::parse::office::xml::Element;
use crate::parse::office::{chart, comment_line, drawing};

/// What a sheet has besides cells.
#[derive(Debug, Default)]
pub struct SheetExtras {
    /// Drawing parts (charts, pictures).
    pub drawings: Vec<String>,
    /// Reviewer comments, one line each.
    pub comments: Vec<String>,
}

/// Drawings and comments of each sheet (worksheets and chart sheets), by sheet name.
/// Best effort: a workbook whose extras cannot be followed still gives its cells.
pub fn sheet_extras(pkg: &mut Package) -> HashMap<String, SheetExtras> {
    let mut out = HashMap::new();
    let Ok(main) = pkg.main_part() else {
        return out;
    };
    let (Some(wb), Ok(rels)) = (pkg.optional_xml(&main), pkg.rels(&main)) else {
        return out;
    };
    let persons = persons(pkg, &rels);
    let Some(sheets) = wb.child("sheets") else {
        return out;
    };
    for s in sheets.children_named("sheet") {
        let (Some(name), Some(rel)) =
            (s.attr("name"), s.rel_attr("id").and_then(|id| rels.get(id)))
        else {
            continue;
        };
        let Ok(sheet_rels) = pkg.rels(&rel.target) else {
            continue;
        };
        let internal = |kind: &str| -> Vec<String> {
            let mut parts: Vec<String> = sheet_rels
                .values()
                .filter(|r| r.kind == kind && !r.external)
                .map(|r| r.target.clone())
                .collect();
            parts.sort();
            parts
        };
        let threaded = internal("threadedComment");
        // Excel also writes threaded comments as legacy notes saying "[Threaded
        // comment]"; those are skipped when the threaded originals are there.
        let mut comments = Vec::new();
        for part in &threaded {
            if let Some(root) = pkg.optional_xml(part) {
                for c in root.children_named("threadedComment") {
                    let author = c
                        .attr("personId")
                        .and_then(|p| persons.get(p))
                        .map(String::as_str);
                    let text = c.child("text").map(|t| t.text()).unwrap_or_default();
                    if !text.trim().is_empty() {
                        comments.push(comment_line(author, c.attr("dT"), &text));
                    }
                }
            }
        }
        for part in internal("comments") {
            let Some(root) = pkg.optional_xml(&part) else {
                continue;
            };
            let authors: Vec<String> = root
                .child("authors")
                .map(|a| a.children_named("author").map(|x| x.text()).collect())
                .unwrap_or_default();
            for c in root.find_all("comment") {
                let author = c
                    .attr("authorId")
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| authors.get(i));
                if !threaded.is_empty() && author.is_some_and(|a| a.starts_with("tc=")) {
                    continue;
                }
                let text: String = c.find_all("t").iter().map(|t| t.text()).collect();
                if !text.trim().is_empty() {
                    comments.push(comment_line(author.map(String::as_str), None, &text));
                }
            }
        }
        let extra = SheetExtras {
            drawings: internal("drawing"),
            comments,
        };
        if !extra.drawings.is_empty() || !extra.comments.is_empty() {
            out.insert(name.to_owned(), extra);
        }
    }
    out
}

/// Display names of threaded-comment authors, by person id.
fn persons(pkg: &mut Package, rels: &HashMap<String, Rel>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let parts: Vec<String> = rels
        .values()
        .filter(|r| r.kind == "person" && !r.external)
        .map(|r| r.target.clone())
        .collect();
    for part in parts {
        if let Some(root) = pkg.optional_xml(&part) {
            for p in root.children_named("person") {
                if let (Some(id), Some(name)) = (p.attr("id"), p.attr("displayName")) {
                    out.insert(id.to_owned(), name.to_owned());
                }
            }
        }
    }
    out
}

/// Charts, pictures and text boxes of a SpreadsheetML drawing, in anchor order.
pub fn push_drawing(pkg: &mut Package, part: &str, out: &mut Blocks) {
    let (Some(root), Ok(rels)) = (pkg.optional_xml(part), pkg.rels(part)) else {
        return;
    };
    for anchor in root.elements() {
        let ext = anchor.child("ext");
        let size = |e: Option<&Element>| {
            let px = |a: &str| {
                e.and_then(|e| e.attr(a))
                    .and_then(drawing::length_px)
                    .unwrap_or(0)
            };
            (px("cx"), px("cy"))
        };
        for shape in anchor.elements() {
            match shape.name() {
                "pic" => {
                    let (w, h) = match size(shape.path(&["spPr", "xfrm", "ext"])) {
                        (0, _) | (_, 0) => size(ext),
                        s => s,
                    };
                    let alt = drawing::alt_text(shape.path(&["nvPicPr", "cNvPr"]));
                    out.image(drawing::picture(alt.as_deref(), w, h));
                }
                "graphicFrame" => {
                    let id = shape
                        .path(&["graphic", "graphicData", "chart"])
                        .and_then(|c| c.rel_attr("id"));
                    let Some(rel) = id.and_then(|id| rels.get(id)) else {
                        continue;
                    };
                    if let Some(c) = pkg.optional_xml(&rel.target) {
                        let (w, h) = size(shape.path(&["xfrm", "ext"]));
                        chart::read(&c).push_to(out, w, h);
                    }
                }
                "sp" => {
                    if let Some(body) = shape.child("txBody") {
                        for p in body.children_named("p") {
                            let text: String = p.find_all("t").iter().map(|t| t.text()).collect();
                            out.paragraph(&text);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}
