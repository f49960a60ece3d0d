//! HTML: the main content (not navigation, scripts or page chrome) as headings,
//! paragraphs, list items, code and tables. Shared with the web scraper.

use scraper::{ElementRef, Html, Node, Selector};

use super::{Block, BlockKind, ParsedDocument, Table};

/// Elements whose content is never document text.
const SKIP: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "nav",
    "aside", "form", "button", "select", "input", "textarea", "head", "menu", "dialog",
];

/// Page chrome when outside the main content; inside `<main>` or `<article>` a header
/// holds the article's title and byline, and is kept.
const CHROME: &[&str] = &["header", "footer"];

/// Elements that start a new block.
const BLOCK: &[&str] = &[
    "html",
    "body",
    "main",
    "article",
    "section",
    "div",
    "blockquote",
    "figure",
    "figcaption",
    "dl",
    "dt",
    "dd",
    "address",
    "details",
    "summary",
    "center",
    "hr",
    "fieldset",
    "caption",
];

/// Parses an HTML page.
pub fn parse(html: &str) -> ParsedDocument {
    let doc = Html::parse_document(html);
    let title = select_first(&doc, "title")
        .map(|t| collapse(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let root = main_content(&doc);
    let mut w = Walker::default();
    if let Some(root) = root {
        if matches!(root.value().name(), "main" | "article")
            || root.value().attr("role") == Some("main")
        {
            w.in_content = 1;
        }
        w.walk(root);
    }
    w.flush();
    let title = title.or_else(|| {
        w.blocks
            .iter()
            .find(|b| matches!(b.kind, BlockKind::Heading(1)))
            .map(|b| b.text.clone())
    });
    ParsedDocument {
        title,
        author: meta_author(&doc),
        pages: 1,
        blocks: w.blocks,
    }
}

fn select_first<'a>(doc: &'a Html, css: &str) -> Option<ElementRef<'a>> {
    Selector::parse(css)
        .ok()
        .and_then(|s| doc.select(&s).next())
}

fn meta_author(doc: &Html) -> Option<String> {
    select_first(doc, "meta[name=author]")
        .and_then(|m| m.value().attr("content").map(collapse))
        .filter(|a| !a.is_empty())
}

/// `<main>`, else the single `<article>`, else `<body>` (else the whole document).
fn main_content(doc: &Html) -> Option<ElementRef<'_>> {
    let text_len = |e: &ElementRef<'_>| e.text().map(|t| t.trim().len()).sum::<usize>();
    let body = select_first(doc, "body");
    let body_len = body.as_ref().map(text_len).unwrap_or(0);
    for css in ["main", "[role=main]", "article"] {
        let Ok(sel) = Selector::parse(css) else {
            continue;
        };
        let found: Vec<ElementRef<'_>> = doc.select(&sel).collect();
        if found.len() == 1 && text_len(&found[0]) * 3 >= body_len {
            return Some(found[0]);
        }
    }
    body.or_else(|| Some(doc.root_element()))
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn text_of(e: ElementRef<'_>) -> String {
    let mut out = String::new();
    inline_text(e, &mut out);
    collapse(&out)
}

fn inline_text(e: ElementRef<'_>, out: &mut String) {
    for child in e.children() {
        match child.value() {
            Node::Text(t) => out.push_str(t),
            Node::Element(el) => {
                if SKIP.contains(&el.name()) {
                    continue;
                }
                if el.name() == "br" {
                    out.push(' ');
                }
                if let Some(c) = ElementRef::wrap(child) {
                    if BLOCK.contains(&el.name()) || el.name() == "p" || el.name() == "li" {
                        out.push(' ');
                    }
                    inline_text(c, out);
                }
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct Walker {
    blocks: Vec<Block>,
    buf: String,
    /// Depth inside `<main>`/`<article>`.
    in_content: usize,
}

impl Walker {
    fn push(&mut self, kind: BlockKind, text: String) {
        if !text.trim().is_empty() {
            self.blocks.push(Block {
                kind,
                text,
                page: 1,
            });
        }
    }

    fn flush(&mut self) {
        let t = collapse(&self.buf);
        self.buf.clear();
        self.push(BlockKind::Paragraph, t);
    }

    fn walk(&mut self, e: ElementRef<'_>) {
        for child in e.children() {
            match child.value() {
                Node::Text(t) => self.buf.push_str(t),
                Node::Element(el) => {
                    let Some(c) = ElementRef::wrap(child) else {
                        continue;
                    };
                    self.element(el.name(), c);
                }
                _ => {}
            }
        }
    }

    fn element(&mut self, name: &str, c: ElementRef<'_>) {
        if SKIP.contains(&name) || (CHROME.contains(&name) && self.in_content == 0) {
            return;
        }
        if matches!(name, "main" | "article") {
            self.flush();
            self.in_content += 1;
            self.walk(c);
            self.flush();
            self.in_content -= 1;
            return;
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.flush();
                let level = name[1..].parse::<u8>().unwrap_or(1);
                self.push(BlockKind::Heading(level), text_of(c));
            }
            "p" => {
                self.flush();
                self.walk(c);
                self.flush();
            }
            "ul" | "ol" => {
                self.flush();
                self.list(c);
            }
            "li" => {
                self.flush();
                self.push(BlockKind::ListItem, text_of(c));
            }
            "pre" => {
                self.flush();
                let code: String = c.text().collect();
                self.push(BlockKind::Code, code.trim_matches('\n').to_owned());
            }
            "table" => {
                self.flush();
                let t = table(c);
                if !t.rows.is_empty() {
                    self.blocks.push(Block {
                        text: t.to_text(),
                        kind: BlockKind::Table(t),
                        page: 1,
                    });
                }
            }
            "br" => self.buf.push('\n'),
            "img" => {
                if let Some(alt) = c
                    .value()
                    .attr("alt")
                    .map(collapse)
                    .filter(|a| !a.is_empty())
                {
                    self.buf.push(' ');
                    self.buf.push_str(&alt);
                    self.buf.push(' ');
                }
            }
            n if BLOCK.contains(&n) => {
                self.flush();
                self.walk(c);
                self.flush();
            }
            _ => self.walk(c),
        }
    }

    /// List items: an item's own text, then its nested lists as further items. Items
    /// of ordered lists keep their numbers.
    fn list(&mut self, list: ElementRef<'_>) {
        let ordered = list.value().name() == "ol";
        let mut number = list
            .value()
            .attr("start")
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(1);
        for li in list.children().filter_map(ElementRef::wrap) {
            if li.value().name() != "li" {
                self.element(li.value().name(), li);
                continue;
            }
            let mut own = String::new();
            let mut nested = Vec::new();
            for child in li.children() {
                match child.value() {
                    Node::Text(t) => own.push_str(t),
                    Node::Element(el) if matches!(el.name(), "ul" | "ol") => {
                        nested.extend(ElementRef::wrap(child));
                    }
                    Node::Element(el) if !SKIP.contains(&el.name()) => {
                        if let Some(e) = ElementRef::wrap(child) {
                            own.push(' ');
                            inline_text(e, &mut own);
                        }
                    }
                    _ => {}
                }
            }
            let text = collapse(&own);
            if ordered {
                self.push(BlockKind::ListItem, format!("{number}. {text}"));
                number += 1;
            } else {
                self.push(BlockKind::ListItem, text);
            }
            for n in nested {
                self.list(n);
            }
        }
    }
}

/// Rows of a table (not of tables nested in it). A cell spanning several columns or
/// rows is repeated in each, so every row has its full width.
fn table(t: ElementRef<'_>) -> Table {
    let mut rows = Vec::new();
    let mut carry: Vec<Option<(String, usize)>> = Vec::new();
    collect_rows(t, &mut rows, &mut carry);
    Table { rows }
}

/// Most columns or rows one cell may span (hostile input must not explode the table).
const MAX_SPAN: usize = 64;

fn span(cell: ElementRef<'_>, attr: &str) -> usize {
    cell.value()
        .attr(attr)
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, MAX_SPAN)
}

fn collect_rows(
    e: ElementRef<'_>,
    rows: &mut Vec<Vec<String>>,
    carry: &mut Vec<Option<(String, usize)>>,
) {
    for child in e.children().filter_map(ElementRef::wrap) {
        match child.value().name() {
            "tr" => {
                let mut row: Vec<String> = Vec::new();
                let take_carried =
                    |row: &mut Vec<String>, carry: &mut Vec<Option<(String, usize)>>| {
                        while let Some(Some((text, left))) = carry.get_mut(row.len()) {
                            row.push(text.clone());
                            *left -= 1;
                            if *left == 0 {
                                let i = row.len() - 1;
                                carry[i] = None;
                            }
                        }
                    };
                for cell in child.children().filter_map(ElementRef::wrap) {
                    if !matches!(cell.value().name(), "td" | "th") {
                        continue;
                    }
                    take_carried(&mut row, carry);
                    let text = text_of(cell);
                    let (cols, down) = (span(cell, "colspan"), span(cell, "rowspan"));
                    for _ in 0..cols {
                        if down > 1 {
                            if carry.len() <= row.len() {
                                carry.resize(row.len() + 1, None);
                            }
                            carry[row.len()] = Some((text.clone(), down - 1));
                        }
                        row.push(text.clone());
                    }
                }
                take_carried(&mut row, carry);
                if row.iter().any(|c| !c.is_empty()) {
                    rows.push(row);
                }
            }
            "thead" | "tbody" | "tfoot" => collect_rows(child, rows, carry),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_content_drops_chrome() {
        let d = parse(
            "<html><head><title>T</title><script>var x=1;</script></head><body>\
             <nav><a href='/'>Home</a></nav><main><h1>Big</h1><p>Hello <b>bold</b> world.</p>\
             <ul><li>one<ul><li>inner</li></ul></li><li>two</li></ul>\
             <table><tr><th>a</th><th>b</th></tr><tr><td colspan=2>wide</td></tr></table>\
             <pre>let x = 1;\nlet y = 2;</pre></main><footer>(c) corp</footer></body></html>",
        );
        assert_eq!(d.title.as_deref(), Some("T"));
        let texts: Vec<&str> = d.blocks.iter().map(|b| b.text.as_str()).collect();
        assert_eq!(
            texts[..5],
            ["Big", "Hello bold world.", "one", "inner", "two"]
        );
        let d2 = parse("<body><ol start='3'><li>c</li><li>d</li></ol><table><tr><td rowspan=2>y</td><td>a</td></tr><tr><td>b</td></tr></table></body>");
        assert_eq!(d2.blocks[0].text, "3. c");
        match &d2.blocks[2].kind {
            BlockKind::Table(t) => assert_eq!(t.rows, vec![vec!["y", "a"], vec!["y", "b"]]),
            k => panic!("{k:?}"),
        }
        assert!(!texts
            .iter()
            .any(|t| t.contains("Home") || t.contains("corp") || t.contains("var x")));
        match &d.blocks[5].kind {
            BlockKind::Table(t) => assert_eq!(t.rows, vec![vec!["a", "b"], vec!["wide", "wide"]]),
            k => panic!("{k:?}"),
        }
        assert_eq!(d.blocks[6].text, "let x = 1;\nlet y = 2;");
    }
}
