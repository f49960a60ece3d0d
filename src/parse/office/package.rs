//! The Open Packaging Conventions layer shared by DOCX, PPTX and XLSX: parts read
//! through the guarded ZIP, relationships resolved to part names (pure string work,
//! never the file system), and the core properties (title, author).

use std::collections::HashMap;

use super::xml::{self, Element};
use crate::parse::archive::{GuardedZip, ZipLimits};
use crate::parse::ParseError;

/// Largest XML part turned into a tree (its tree takes a few times its size).
const MAX_XML_PART: usize = 64 << 20;

/// One relationship of a part.
#[derive(Debug, Clone)]
pub struct Rel {
    /// Last segment of the relationship type (`officeDocument`, `slide`, `image`...);
    /// the same for transitional and Strict URIs.
    pub kind: String,
    /// Target part name, resolved and normalised; the raw URL when external.
    pub target: String,
    pub external: bool,
}

/// An opened OOXML package.
pub struct Package<'a> {
    zip: GuardedZip<'a>,
}

impl<'a> Package<'a> {
    /// Opens an OOXML package with the default ZIP limits.
    pub fn open(bytes: &'a [u8]) -> Result<Self, ParseError> {
        Self::open_with(bytes, ZipLimits::default())
    }

    /// Opens an OOXML package within `limits`.
    pub fn open_with(bytes: &'a [u8], limits: ZipLimits) -> Result<Self, ParseError> {
        Ok(Self {
            zip: GuardedZip::open(bytes, limits)?,
        })
    }

    /// The guarded archive underneath.
    pub fn zip(&mut self) -> &mut GuardedZip<'a> {
        &mut self.zip
    }

    /// Parses a part as XML; `None` when absent.
    pub fn xml(&mut self, part: &str) -> Result<Option<Element>, ParseError> {
        match self.zip.read(part)? {
            Some(bytes) if bytes.len() > MAX_XML_PART => Err(ParseError::TooLarge(format!(
                "an XML part of the document is larger than {} MiB",
                MAX_XML_PART >> 20
            ))),
            Some(bytes) => xml::parse(&bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Parses a part that only refines the document (styles, headers, charts...):
    /// absent or damaged, it is skipped, and the damage logged.
    pub fn optional_xml(&mut self, part: &str) -> Option<Element> {
        match self.xml(part) {
            Ok(root) => root,
            Err(e) => {
                tracing::debug!(part, error = %e, "skipping an unreadable optional part");
                None
            }
        }
    }

    /// Relationships of `part` (the package's own for `""`), by id.
    pub fn rels(&mut self, part: &str) -> Result<HashMap<String, Rel>, ParseError> {
        let rels_part = rels_part_for(part);
        let Some(root) = self.xml(&rels_part)? else {
            return Ok(HashMap::new());
        };
        let mut out = HashMap::new();
        for r in root.children_named("Relationship") {
            let (Some(id), Some(target)) = (r.attr("Id"), r.attr("Target")) else {
                continue;
            };
            let kind = r
                .attr("Type")
                .and_then(|t| t.rsplit('/').next())
                .unwrap_or_default()
                .to_owned();
            let external = r
                .attr("TargetMode")
                .is_some_and(|m| m.eq_ignore_ascii_case("External"));
            let target = if external {
                target.to_owned()
            } else {
                resolve(part, target)
            };
            out.insert(
                id.to_owned(),
                Rel {
                    kind,
                    target,
                    external,
                },
            );
        }
        Ok(out)
    }

    /// The main part (`word/document.xml`, `ppt/presentation.xml`...).
    pub fn main_part(&mut self) -> Result<String, ParseError> {
        let rels = self.rels("")?;
        rels.values()
            .find(|r| r.kind == "officeDocument" && !r.external)
            .map(|r| r.target.clone())
            .ok_or_else(|| {
                ParseError::Invalid(
                    "not an Office Open XML document (no main part in the package)".into(),
                )
            })
    }

    /// Title and author from `docProps/core.xml`, when set.
    pub fn core_properties(&mut self) -> (Option<String>, Option<String>) {
        let part = self
            .rels("")
            .ok()
            .and_then(|rels| {
                rels.values()
                    .find(|r| r.kind == "core-properties" && !r.external)
                    .map(|r| r.target.clone())
            })
            .unwrap_or_else(|| "docProps/core.xml".into());
        // Metadata is a nicety: a damaged core.xml must not sink the document.
        let Some(root) = self.optional_xml(&part) else {
            return (None, None);
        };
        let field = |name: &str| {
            root.child(name)
                .map(|e| e.text().trim().to_owned())
                .filter(|t| !t.is_empty())
        };
        (field("title"), field("creator"))
    }
}

/// `word/document.xml` -> `word/_rels/document.xml.rels`; `""` -> `_rels/.rels`.
fn rels_part_for(part: &str) -> String {
    match part.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/_rels/{file}.rels"),
        None if part.is_empty() => "_rels/.rels".into(),
        None => format!("_rels/{part}.rels"),
    }
}

/// Resolves a relationship target against the part that holds it, as URI references
/// are resolved: absolute targets start at the package root, `..` climbs one folder
/// (never above the root), percent escapes are decoded.
pub fn resolve(base_part: &str, target: &str) -> String {
    let target = percent_decode(target.split(['#', '?']).next().unwrap_or_default());
    let mut segments: Vec<&str> = Vec::new();
    if !target.starts_with('/') {
        if let Some((dir, _)) = base_part.trim_start_matches('/').rsplit_once('/') {
            segments.extend(dir.split('/').filter(|s| !s.is_empty()));
        }
    }
    for seg in target.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    segments.join("/")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_targets_inside_the_package() {
        assert_eq!(
            resolve("word/document.xml", "media/a.png"),
            "word/media/a.png"
        );
        assert_eq!(
            resolve("ppt/slides/slide1.xml", "../media/i%201.png"),
            "ppt/media/i 1.png"
        );
        assert_eq!(resolve("", "word/document.xml"), "word/document.xml");
        assert_eq!(resolve("ppt/slides/s.xml", "/ppt/x.xml"), "ppt/x.xml");
        assert_eq!(resolve("a/b.xml", "../../../../etc/passwd"), "etc/passwd");
        assert_eq!(rels_part_for(""), "_rels/.rels");
        assert_eq!(
            rels_part_for("ppt/presentation.xml"),
            "ppt/_rels/presentation.xml.rels"
        );
    }
}
