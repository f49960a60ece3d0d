//! `word/styles.xml`: which paragraph styles are headings (and at what level) and
//! which carry list numbering, following `basedOn` chains.

use std::collections::HashMap;

use crate::parse::office::xml::Element;

/// What a paragraph style means for the document structure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StyleInfo {
    /// 0 for the document title, 1-9 for headings.
    pub heading: Option<u8>,
    /// Numbering inherited from the style: (numId, ilvl).
    pub numbering: Option<(String, u8)>,
}

/// Paragraph styles by id, with inheritance resolved.
#[derive(Debug, Default)]
pub struct Styles {
    by_id: HashMap<String, StyleInfo>,
    default_id: Option<String>,
}

/// Heading style names across the languages Word localises them into (`w:name` is
/// usually the English built-in name, but not for documents from older or
/// third-party editors).
const HEADING_WORDS: &[&str] = &[
    "heading",
    "überschrift",
    "titre",
    "titolo",
    "título",
    "titulo",
    "kop",
    "rubrik",
    "otsikko",
    "nagłówek",
    "заголовок",
    "見出し",
    "标题",
    "標題",
    "제목",
    "overskrift",
    "başlık",
    "nadpis",
    "címsor",
    "cabeçalho",
    "encabezado",
    "عنوان",
    "כותרת",
];

const TITLE_NAMES: &[&str] = &[
    "title",
    "titel",
    "titre",
    "título",
    "titolo",
    "заголовок документа",
];

impl Styles {
    /// Reads the styles part (`None` when the package has none).
    pub fn parse(root: Option<&Element>) -> Self {
        let Some(root) = root else {
            return Self::default();
        };
        struct Raw {
            based_on: Option<String>,
            own: StyleInfo,
        }
        let mut raw: HashMap<String, Raw> = HashMap::new();
        let mut default_id = None;
        for s in root.children_named("style") {
            if s.attr("type").is_some_and(|t| t != "paragraph") {
                continue;
            }
            let Some(id) = s.attr("styleId") else {
                continue;
            };
            if s.attr("default").is_some_and(truthy) {
                default_id = Some(id.to_owned());
            }
            let name = s.child("name").and_then(|n| n.attr("val")).unwrap_or(id);
            let ppr = s.child("pPr");
            let outline = ppr
                .and_then(|p| p.child("outlineLvl"))
                .and_then(|o| o.attr("val"))
                .and_then(|v| v.parse::<u8>().ok())
                .filter(|l| *l < 9)
                .map(|l| l + 1);
            let heading = heading_from_name(name)
                .or_else(|| heading_from_name(id))
                .or(outline);
            let numbering = ppr.and_then(|p| p.child("numPr")).and_then(num_pr);
            raw.insert(
                id.to_owned(),
                Raw {
                    based_on: s
                        .child("basedOn")
                        .and_then(|b| b.attr("val"))
                        .map(str::to_owned),
                    own: StyleInfo { heading, numbering },
                },
            );
        }
        let mut by_id = HashMap::with_capacity(raw.len());
        for id in raw.keys() {
            let mut info = StyleInfo::default();
            let mut cur = Some(id.as_str());
            // basedOn chains are short; the cap guards against cycles.
            for _ in 0..16 {
                let Some(r) = cur.and_then(|c| raw.get(c)) else {
                    break;
                };
                if info.heading.is_none() {
                    info.heading = r.own.heading;
                }
                if info.numbering.is_none() {
                    info.numbering = r.own.numbering.clone();
                }
                cur = r.based_on.as_deref();
            }
            by_id.insert(id.clone(), info);
        }
        Self { by_id, default_id }
    }

    /// The style of a paragraph (`None` for the default style).
    pub fn get(&self, id: Option<&str>) -> Option<&StyleInfo> {
        self.by_id.get(id.or(self.default_id.as_deref())?)
    }
}

/// `(numId, ilvl)` of a `w:numPr`.
pub fn num_pr(el: &Element) -> Option<(String, u8)> {
    let id = el.child("numId")?.attr("val")?.to_owned();
    let lvl = el
        .child("ilvl")
        .and_then(|l| l.attr("val"))
        .and_then(|v| v.parse::<u8>().ok())
        .unwrap_or(0)
        .min(8);
    Some((id, lvl))
}

/// `heading 2` -> 2, `Title` -> 0, `Überschrift 3` -> 3.
fn heading_from_name(name: &str) -> Option<u8> {
    let lower = name.trim().to_lowercase();
    if TITLE_NAMES.contains(&lower.as_str()) {
        return Some(0);
    }
    let digits: String = lower.chars().filter(char::is_ascii_digit).collect();
    let words: String = lower
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .collect::<String>()
        .trim()
        .to_owned();
    let level: u8 = digits.parse().ok()?;
    let is_heading = HEADING_WORDS.iter().any(|w| words == *w);
    (is_heading && (1..=9).contains(&level)).then_some(level)
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "on")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_levels() {
        assert_eq!(heading_from_name("heading 1"), Some(1));
        assert_eq!(heading_from_name("Heading3"), Some(3));
        assert_eq!(heading_from_name("Überschrift 2"), Some(2));
        assert_eq!(heading_from_name("Title"), Some(0));
        assert_eq!(heading_from_name("Normal"), None);
        assert_eq!(heading_from_name("toc 1"), None);
    }
}
