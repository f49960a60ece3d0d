//! A small, bounded element tree over quick-xml, enough for OOXML parts. Elements keep
//! their local names only, so transitional and Strict OOXML (same local names,
//! different namespace URIs) read alike; attributes remember whether they belong to
//! the relationships namespace, where `r:id` and a plain `id` can sit side by side.

use std::collections::HashMap;
use std::sync::Arc;

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

use crate::parse::ParseError;

/// Deepest nesting accepted; walkers recurse over the tree, so this bounds their stack.
pub const MAX_DEPTH: usize = 200;
/// Most nodes one part may hold.
const MAX_NODES: usize = 3_000_000;

/// One XML element.
#[derive(Debug, Clone)]
pub struct Element {
    /// Local name (`p` for `w:p`), shared by every element of that name: parts hold
    /// millions of `w:p`, `w:r` and `w:t`.
    name: Arc<str>,
    attrs: Vec<Attr>,
    pub children: Vec<Node>,
}

/// One attribute.
#[derive(Debug, Clone)]
struct Attr {
    local: Arc<str>,
    /// In the (transitional or Strict) relationships namespace, like `r:id`.
    rel: bool,
    value: String,
}

/// A child of an element.
#[derive(Debug, Clone)]
pub enum Node {
    Element(Element),
    Text(String),
}

impl Element {
    /// Local name (`p` for `w:p`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A non-relationship attribute by local name.
    pub fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| !a.rel && &*a.local == local)
            .map(|a| a.value.as_str())
    }

    /// A relationships-namespace attribute (`r:id`, `r:embed`) by local name.
    pub fn rel_attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| a.rel && &*a.local == local)
            .map(|a| a.value.as_str())
    }

    /// Child elements in order.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|c| match c {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    /// First child element with this local name.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|e| &*e.name == name)
    }

    /// Child elements with this local name.
    pub fn children_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Element> {
        self.elements().filter(move |e| &*e.name == name)
    }

    /// Follows a path of child names (`["spPr", "xfrm", "ext"]`).
    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, n| e.child(n))
    }

    /// Every descendant element with this local name, in document order (not
    /// descending into matches).
    pub fn find_all<'s>(&'s self, name: &str) -> Vec<&'s Element> {
        let mut out = Vec::new();
        self.collect(name, &mut out);
        out
    }

    fn collect<'s>(&'s self, name: &str, out: &mut Vec<&'s Element>) {
        for e in self.elements() {
            if &*e.name == name {
                out.push(e);
            } else {
                e.collect(name, out);
            }
        }
    }

    /// First descendant element with this local name.
    pub fn find(&self, name: &str) -> Option<&Element> {
        for e in self.elements() {
            if &*e.name == name {
                return Some(e);
            }
            if let Some(found) = e.find(name) {
                return Some(found);
            }
        }
        None
    }

    /// All text below this element, concatenated.
    pub fn text(&self) -> String {
        let mut s = String::new();
        self.push_text(&mut s);
        s
    }

    fn push_text(&self, s: &mut String) {
        for c in &self.children {
            match c {
                Node::Text(t) => s.push_str(t),
                Node::Element(e) => e.push_text(s),
            }
        }
    }
}

/// Parses one XML part into its root element.
pub fn parse(bytes: &[u8]) -> Result<Element, ParseError> {
    let text = decode(bytes);
    let mut reader = NsReader::from_str(&text);
    reader.config_mut().expand_empty_elements = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut nodes = 0usize;
    let mut names = Names::default();
    loop {
        let event = reader.read_event().map_err(|e| invalid(&e))?;
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(ParseError::TooLarge(
                "an XML part has too many elements".into(),
            ));
        }
        match event {
            Event::Start(start) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(ParseError::Invalid(
                        "an XML part is nested too deeply".into(),
                    ));
                }
                let el = element(&reader, &start, &mut names)?;
                stack.push(el);
            }
            Event::End(_) => {
                let Some(mut done) = stack.pop() else {
                    return Err(ParseError::Invalid("unbalanced XML in a part".into()));
                };
                // Growth slack of finished elements would outweigh the tree itself.
                done.children.shrink_to_fit();
                match stack.last_mut() {
                    Some(parent) => parent.children.push(Node::Element(done)),
                    None => {
                        root = Some(done);
                        break;
                    }
                }
            }
            Event::Text(t) => {
                let s = t.xml_content().map_err(|e| invalid(&e))?;
                push_text(&mut stack, &s);
            }
            Event::CData(t) => {
                let s = t.decode().map_err(|e| invalid(&e))?;
                push_text(&mut stack, &s);
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => {
                        let name = r.decode().map_err(|e| invalid(&e))?;
                        resolve_predefined_entity(&name)
                            .unwrap_or_default()
                            .to_owned()
                    }
                };
                push_text(&mut stack, &resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    root.ok_or_else(|| {
        ParseError::Invalid("an XML part ends before its root element closes".into())
    })
}

/// Interned element and attribute names.
#[derive(Default)]
struct Names(HashMap<Vec<u8>, Arc<str>>);

impl Names {
    fn get(&mut self, raw: &[u8]) -> Arc<str> {
        if let Some(n) = self.0.get(raw) {
            return n.clone();
        }
        let n: Arc<str> = String::from_utf8_lossy(raw).into();
        self.0.insert(raw.to_vec(), n.clone());
        n
    }
}

fn element(
    reader: &NsReader<&[u8]>,
    start: &BytesStart<'_>,
    names: &mut Names,
) -> Result<Element, ParseError> {
    let name = names.get(start.local_name().as_ref());
    let mut attrs = Vec::new();
    for a in start.attributes().with_checks(false) {
        let a = a.map_err(|e| invalid(&e))?;
        let key = a.key;
        if key.as_ref().starts_with(b"xmlns") {
            continue;
        }
        let (ns, local) = reader.resolve_attribute(key);
        let rel = matches!(ns, ResolveResult::Bound(n) if n.as_ref().ends_with(b"relationships"));
        let value = a.unescape_value().map_err(|e| invalid(&e))?.into_owned();
        attrs.push(Attr {
            local: names.get(local.as_ref()),
            rel,
            value,
        });
    }
    Ok(Element {
        name,
        attrs,
        children: Vec::new(),
    })
}

fn push_text(stack: &mut [Element], s: &str) {
    let Some(top) = stack.last_mut() else {
        return;
    };
    if let Some(Node::Text(prev)) = top.children.last_mut() {
        prev.push_str(s);
    } else {
        top.children.push(Node::Text(s.to_owned()));
    }
}

/// XML parts are UTF-8 in practice; UTF-16 (by BOM) is transcoded, anything else is
/// read lossily rather than refused.
fn decode(bytes: &[u8]) -> String {
    if bytes.starts_with(&[0xFF, 0xFE]) {
        return encoding_rs::UTF_16LE.decode(&bytes[2..]).0.into_owned();
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        return encoding_rs::UTF_16BE.decode(&bytes[2..]).0.into_owned();
    }
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

fn invalid(e: &dyn std::fmt::Display) -> ParseError {
    ParseError::Invalid(format!("malformed XML in the document: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_attributes_and_entities() {
        let x = br#"<?xml version="1.0"?><p:sld xmlns:p="urn:p" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><p:sldId id="256" r:id="rId2"/><a:t xmlns:a="urn:a">A &amp; B&#x21;</a:t></p:sld>"#;
        let root = parse(x).unwrap();
        assert_eq!(root.name(), "sld");
        let id = root.child("sldId").unwrap();
        assert_eq!(id.attr("id"), Some("256"));
        assert_eq!(id.rel_attr("id"), Some("rId2"));
        assert_eq!(root.child("t").unwrap().text(), "A & B!");
    }

    #[test]
    fn refuses_broken_and_deep_xml() {
        assert!(parse(b"<a><b></a>").is_err());
        assert!(parse(b"<a><b>").is_err());
        let deep = "<a>".repeat(MAX_DEPTH + 5);
        assert!(parse(deep.as_bytes()).is_err());
    }
}
