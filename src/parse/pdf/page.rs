//! One page with a text layer -> blocks: glyphs, fragments, tables and pictures, then
//! reading order, then paragraphs and headings.

use pdfium_render::prelude::PdfPage;

use super::blocks::{self, Body, Line, Piece};
use super::fragments::{fragments, Fragment, Walls};
use super::glyphs::page_glyphs;
use super::layout::{lines_of, reading_order, Atom, Rect};
use super::objects::drawing;
use super::tables::{self, Found};
use crate::parse::image::describe;
use crate::parse::{Block, BlockKind, Image, Table, TableMode};

/// What the text layer of a page holds.
pub(crate) struct TextPage {
    pub blocks: Vec<Block>,
    /// Characters that draw ink.
    pub ink: usize,
    /// Share of the page area covered by pictures (0-1).
    pub picture_cover: f32,
    /// Picture regions in the order of their blocks, for OCR of their contents.
    pub pictures: Vec<(Rect, u32, u32)>,
}

/// The body typography of a page: the most common font size, weighted by characters.
fn body_of(frags: &[Fragment]) -> Body {
    let mut sizes: Vec<(i32, usize)> = Vec::new();
    let (mut bold, mut italic, mut all) = (0, 0, 0);
    for f in frags {
        let key = (f.size * 2.0).round() as i32;
        match sizes.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 += f.ink,
            None => sizes.push((key, f.ink)),
        }
        all += f.ink;
        if f.bold {
            bold += f.ink;
        }
        if f.italic {
            italic += f.ink;
        }
    }
    let size = sizes
        .iter()
        .max_by_key(|(_, n)| *n)
        .map_or(10.0, |(k, _)| *k as f32 / 2.0);
    Body {
        size,
        bold: bold * 2 > all,
        italic: italic * 2 > all,
        line_gap: 0.0,
    }
}

/// Usual white between consecutive lines of the body size.
fn line_gap(lines: &[&Line], body: &Body) -> f32 {
    let mut gaps: Vec<f32> = lines
        .windows(2)
        .filter(|w| w[0].column == w[1].column)
        .filter(|w| {
            (w[0].size - body.size).abs() < 0.1 * body.size
                && (w[1].size - body.size).abs() < 0.1 * body.size
        })
        .map(|w| w[1].top - w[0].bottom)
        .filter(|g| *g > -0.5 * body.size && *g < 2.0 * body.size)
        .collect();
    if gaps.is_empty() {
        return 0.3 * body.size;
    }
    gaps.sort_by(f32::total_cmp);
    gaps[gaps.len() / 2].max(0.0)
}

fn line_of(frags: &[&Fragment], ids: &[usize], column: usize) -> Line {
    let text = ids
        .iter()
        .map(|&i| frags[i].text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let ink: usize = ids.iter().map(|&i| frags[i].ink).sum::<usize>().max(1);
    let size = ids
        .iter()
        .map(|&i| frags[i].size * frags[i].ink as f32)
        .sum::<f32>()
        / ink as f32;
    let bold_ink: usize = ids
        .iter()
        .filter(|&&i| frags[i].bold)
        .map(|&i| frags[i].ink)
        .sum();
    let italic_ink: usize = ids
        .iter()
        .filter(|&&i| frags[i].italic)
        .map(|&i| frags[i].ink)
        .sum();
    // Leading styled fragments followed by plain ones.
    let styled = |i: usize| frags[i].bold || frags[i].italic;
    let k = ids.iter().take_while(|&&i| styled(i)).count();
    let lead = (k > 0 && k < ids.len() && ids[k..].iter().all(|&i| !styled(i))).then(|| {
        ids[..k]
            .iter()
            .map(|&i| frags[i].text.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    });
    Line {
        text,
        x0: ids.iter().map(|&i| frags[i].x0).fold(f32::MAX, f32::min),
        x1: ids.iter().map(|&i| frags[i].x1).fold(f32::MIN, f32::max),
        top: ids.iter().map(|&i| frags[i].top).fold(f32::MAX, f32::min),
        bottom: ids
            .iter()
            .map(|&i| frags[i].bottom)
            .fold(f32::MIN, f32::max),
        size,
        bold: bold_ink * 2 > ink,
        italic: italic_ink * 2 > ink,
        lead,
        column,
    }
}

/// Reads the text layer of `page` (number `page_no`, 1-based).
pub(crate) fn read(page: &PdfPage, page_no: u32, mode: TableMode) -> TextPage {
    let drawing = drawing(page);
    let glyphs = page_glyphs(page);
    let frags = fragments(&glyphs, &Walls::new(&drawing.rules));
    drop(glyphs);
    let ink = frags.iter().map(|f| f.ink).sum();
    let mut body = body_of(&frags);
    let area = (page.width().value * page.height().value).max(1.0);
    let picture_cover = drawing
        .pictures
        .iter()
        .map(|(r, _, _)| r.width() * r.height())
        .sum::<f32>()
        / area;

    // Reading order first, then tables inside each column: a table in one column must
    // not swallow the lines of the column beside it.
    let atoms: Vec<Atom> = frags
        .iter()
        .map(|f| Atom {
            rect: Rect::of(f),
            words: f.words(),
            rtl: f.rtl,
        })
        .collect();
    let leaves = reading_order(&atoms, body.size);
    let mut columns: Vec<usize> = Vec::new();
    for leaf in &leaves {
        if !columns.contains(&leaf.column) {
            columns.push(leaf.column);
        }
    }
    let mut found: Vec<Found> = Vec::new();
    let mut table_of: Vec<Option<usize>> = vec![None; frags.len()];
    // Grids of rules first, over the whole page: reading order may have cut a grid's
    // rows into different columns.
    let all: Vec<usize> = (0..frags.len()).collect();
    for t in tables::page_grids(&frags, &all, &drawing.rules, body.size) {
        t.frags
            .iter()
            .for_each(|&i| table_of[i] = Some(found.len()));
        found.push(t);
    }
    for col in columns {
        let ids: Vec<usize> = leaves
            .iter()
            .filter(|l| l.column == col)
            .flat_map(|l| l.atoms.iter().copied())
            .filter(|&i| table_of[i].is_none())
            .collect();
        let tables = match mode {
            TableMode::Fast => tables::grids(&frags, &ids, &drawing.rules, body.size),
            TableMode::Accurate => tables::accurate(&frags, &ids, &drawing.rules, body.size),
        };
        for t in tables {
            t.frags
                .iter()
                .for_each(|&i| table_of[i] = Some(found.len()));
            found.push(t);
        }
    }

    // Pieces in reading order, each with its box (for placing the pictures); a table
    // goes where its first fragment would have been.
    let mut pieces: Vec<(Piece, Rect)> = Vec::new();
    let mut emitted = vec![false; found.len()];
    for leaf in &leaves {
        for &i in &leaf.atoms {
            if let Some(t) = table_of[i] {
                if !std::mem::replace(&mut emitted[t], true) {
                    let table = Table {
                        rows: found[t].rows.clone(),
                    };
                    let block = Block {
                        text: table.to_text(),
                        kind: BlockKind::Table(table),
                        page: page_no,
                    };
                    pieces.push((Piece::Block(block), found[t].rect));
                }
            }
        }
        let leaf_frags: Vec<&Fragment> = leaf
            .atoms
            .iter()
            .filter(|&&i| table_of[i].is_none())
            .map(|&i| &frags[i])
            .collect();
        for ids in lines_of(&leaf_frags) {
            let line = line_of(&leaf_frags, &ids, leaf.column);
            let rect = Rect {
                x0: line.x0,
                x1: line.x1,
                top: line.top,
                bottom: line.bottom,
            };
            pieces.push((Piece::Line(line), rect));
        }
    }
    // Pictures (their bounds ignore clipping, so they stay out of the cut) go before the
    // first piece below their top edge that shares their horizontal extent.
    let pictures = merge_pictures(&drawing.pictures);
    for (r, w, h) in pictures.iter().copied() {
        let at = pieces
            .iter()
            .position(|(_, p)| p.top >= r.top && p.x0 < r.x1 && p.x1 > r.x0)
            .unwrap_or(pieces.len());
        let (description, source) = describe(w, h, None);
        let block = Block {
            text: description.clone(),
            kind: BlockKind::Image(Image {
                width: w,
                height: h,
                description,
                description_source: source,
            }),
            page: page_no,
        };
        pieces.insert(at, (Piece::Block(block), r));
    }
    let pictures: Vec<(Rect, u32, u32)> = pieces
        .iter()
        .filter_map(|(p, r)| match p {
            Piece::Block(Block {
                kind: BlockKind::Image(i),
                ..
            }) => Some((*r, i.width, i.height)),
            _ => None,
        })
        .collect();
    let pieces: Vec<Piece> = pieces.into_iter().map(|(p, _)| p).collect();
    let lines: Vec<&Line> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Line(l) => Some(l),
            Piece::Block(_) => None,
        })
        .collect();
    body.line_gap = line_gap(&lines, &body);
    TextPage {
        blocks: blocks::blocks(pieces, &body, page_no),
        ink,
        picture_cover,
        pictures,
    }
}

/// Pictures that overlap (tiles of one figure) merged into one, with the pixel size of
/// the largest tile.
fn merge_pictures(pictures: &[(Rect, u32, u32)]) -> Vec<(Rect, u32, u32)> {
    let mut out: Vec<(Rect, u32, u32)> = Vec::new();
    for &(r, w, h) in pictures.iter().take(500) {
        let mut cur = (r, w, h);
        loop {
            let hit = out.iter().position(|(o, _, _)| {
                o.x0 < cur.0.x1 + 2.0
                    && cur.0.x0 < o.x1 + 2.0
                    && o.top < cur.0.bottom + 2.0
                    && cur.0.top < o.bottom + 2.0
            });
            let Some(k) = hit else { break };
            let (o, ow, oh) = out.swap_remove(k);
            let rect = Rect {
                x0: o.x0.min(cur.0.x0),
                x1: o.x1.max(cur.0.x1),
                top: o.top.min(cur.0.top),
                bottom: o.bottom.max(cur.0.bottom),
            };
            let (bw, bh) = if u64::from(ow) * u64::from(oh) >= u64::from(cur.1) * u64::from(cur.2) {
                (ow, oh)
            } else {
                (cur.1, cur.2)
            };
            cur = (rect, bw, bh);
        }
        out.push(cur);
    }
    out.sort_by(|a, b| a.0.top.total_cmp(&b.0.top));
    out
}
