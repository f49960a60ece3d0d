//! `word/numbering.xml`: list definitions (bullet or numbered, per level) and the
//! running counters that turn `%1.%2` level texts into "1.2" for numbered headings.

use std::collections::HashMap;

use crate::parse::office::numerals::{letters, roman};
use crate::parse::office::xml::Element;

#[derive(Debug, Clone, Default)]
struct Level {
    format: String,
    text: String,
    start: u32,
}

/// Numbering definitions plus the counters of the current walk.
#[derive(Debug, Default)]
pub struct Numbering {
    /// numId -> abstractNumId.
    nums: HashMap<String, String>,
    /// numId -> per-level start overrides.
    overrides: HashMap<String, HashMap<u8, u32>>,
    abstracts: HashMap<String, HashMap<u8, Level>>,
    /// abstractNumId -> counters per level (`None`: not started).
    counters: HashMap<String, [Option<u32>; 9]>,
}

impl Numbering {
    /// Reads the numbering part (`None` when the package has none).
    pub fn parse(root: Option<&Element>) -> Self {
        let mut me = Self::default();
        let Some(root) = root else {
            return me;
        };
        let mut defines: HashMap<String, String> = HashMap::new();
        let mut uses: Vec<(String, String)> = Vec::new();
        for a in root.children_named("abstractNum") {
            let Some(id) = a.attr("abstractNumId") else {
                continue;
            };
            let mut levels = HashMap::new();
            for l in a.children_named("lvl") {
                let Some(ilvl) = l.attr("ilvl").and_then(|v| v.parse::<u8>().ok()) else {
                    continue;
                };
                let val = |name: &str| l.child(name).and_then(|e| e.attr("val")).map(str::to_owned);
                levels.insert(
                    ilvl,
                    Level {
                        format: val("numFmt").unwrap_or_else(|| "decimal".into()),
                        text: val("lvlText").unwrap_or_default(),
                        start: val("start").and_then(|s| s.parse().ok()).unwrap_or(1),
                    },
                );
            }
            let link = |name: &str| a.child(name).and_then(|l| l.attr("val")).map(str::to_owned);
            if let Some(style) = link("styleLink") {
                defines.insert(style, id.to_owned());
            }
            if let Some(style) = link("numStyleLink") {
                uses.push((id.to_owned(), style));
            }
            me.abstracts.insert(id.to_owned(), levels);
        }
        // A list can borrow its levels from a numbering style (`numStyleLink`), whose
        // definition is the abstract list naming that style in `styleLink`.
        for (id, style) in uses {
            let borrowed = defines
                .get(&style)
                .and_then(|source| me.abstracts.get(source))
                .cloned();
            if let (Some(levels), Some(own)) = (borrowed, me.abstracts.get_mut(&id)) {
                if own.is_empty() {
                    *own = levels;
                }
            }
        }
        for n in root.children_named("num") {
            let (Some(id), Some(abs)) = (
                n.attr("numId"),
                n.child("abstractNumId").and_then(|a| a.attr("val")),
            ) else {
                continue;
            };
            me.nums.insert(id.to_owned(), abs.to_owned());
            let mut ov = HashMap::new();
            for o in n.children_named("lvlOverride") {
                let lvl = o.attr("ilvl").and_then(|v| v.parse::<u8>().ok());
                let start = o
                    .child("startOverride")
                    .and_then(|s| s.attr("val"))
                    .and_then(|v| v.parse::<u32>().ok());
                if let (Some(l), Some(s)) = (lvl, start) {
                    ov.insert(l, s);
                }
            }
            me.overrides.insert(id.to_owned(), ov);
        }
        me
    }

    /// Whether `(numId, ilvl)` really numbers the paragraph (numId 0 and the `none`
    /// format switch numbering off).
    pub fn is_list(&self, num_id: &str, ilvl: u8) -> bool {
        if num_id == "0" {
            return false;
        }
        match self.level(num_id, ilvl) {
            Some(l) => l.format != "none" || !l.text.is_empty(),
            // A dangling numId still marks the paragraph as a list item in Word.
            None => self.nums.contains_key(num_id),
        }
    }

    /// Advances the counters for one numbered paragraph and returns its label
    /// ("1.2.", "a)"); empty for bullets.
    pub fn next_label(&mut self, num_id: &str, ilvl: u8) -> String {
        let Some(abs) = self.nums.get(num_id).cloned() else {
            return String::new();
        };
        let start_of = |me: &Self, lvl: u8| -> u32 {
            me.overrides
                .get(num_id)
                .and_then(|o| o.get(&lvl))
                .copied()
                .or_else(|| me.level(num_id, lvl).map(|l| l.start))
                .unwrap_or(1)
        };
        let starts: Vec<u32> = (0..9).map(|l| start_of(self, l)).collect();
        let counters = self.counters.entry(abs).or_insert([None; 9]);
        let i = usize::from(ilvl).min(8);
        counters[i] = Some(match counters[i] {
            None => starts[i],
            Some(n) => n.saturating_add(1),
        });
        for c in counters.iter_mut().skip(i + 1) {
            *c = None;
        }
        // A level used before its parents counts them as started: "2.1.1" under "2"
        // makes the next second-level item "2.2".
        for (c, start) in counters.iter_mut().zip(&starts).take(i) {
            c.get_or_insert(*start);
        }
        let counters = *counters;
        let Some(level) = self.level(num_id, ilvl) else {
            return String::new();
        };
        if level.format == "bullet" {
            return String::new();
        }
        let mut out = String::new();
        let mut chars = level.text.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, chars.peek().and_then(|d| d.to_digit(10))) {
                ('%', Some(d)) if (1..=9).contains(&d) => {
                    chars.next();
                    let lvl = (d - 1) as u8;
                    let n = counters[lvl as usize].unwrap_or(starts[lvl as usize]);
                    let fmt = self
                        .level(num_id, lvl)
                        .map(|l| l.format.as_str())
                        .unwrap_or("decimal");
                    out.push_str(&format_number(n, fmt));
                }
                _ => out.push(c),
            }
        }
        out
    }

    fn level(&self, num_id: &str, ilvl: u8) -> Option<&Level> {
        self.abstracts.get(self.nums.get(num_id)?)?.get(&ilvl)
    }
}

fn format_number(n: u32, fmt: &str) -> String {
    match fmt {
        "lowerLetter" => letters(n).to_lowercase(),
        "upperLetter" => letters(n),
        "lowerRoman" => roman(n).to_lowercase(),
        "upperRoman" => roman(n),
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_levels_and_follows_style_links() {
        let x = br#"<w:numbering xmlns:w="w">
<w:abstractNum w:abstractNumId="0"><w:styleLink w:val="Outline"/><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/></w:lvl><w:lvl w:ilvl="2"><w:numFmt w:val="lowerRoman"/><w:lvlText w:val="(%3)"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:numStyleLink w:val="Outline"/></w:abstractNum>
<w:num w:numId="7"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>"#;
        let mut n = Numbering::parse(Some(&crate::parse::office::xml::parse(x).unwrap()));
        assert!(n.is_list("7", 0));
        assert!(!n.is_list("0", 0));
        let labels: Vec<String> = [0, 2, 1, 1, 0]
            .iter()
            .map(|l| n.next_label("7", *l))
            .collect();
        // As in Word, a skipped level counts as started: after "(i)" under "1.",
        // the next second-level item is "1.2".
        assert_eq!(labels, ["1.", "(i)", "1.2", "1.3", "2."]);
    }

    #[test]
    fn hostile_starts_do_not_overflow() {
        let x = br#"<w:numbering xmlns:w="w"><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="4294967295"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num></w:numbering>"#;
        let mut n = Numbering::parse(Some(&crate::parse::office::xml::parse(x).unwrap()));
        for _ in 0..3 {
            assert!(!n.next_label("1", 0).is_empty());
        }
        assert_eq!(n.next_label("1", 200), "");
    }

    #[test]
    fn formats_numbers() {
        assert_eq!(format_number(4, "lowerRoman"), "iv");
        assert_eq!(format_number(28, "upperLetter"), "BB");
        assert_eq!(format_number(7, "decimal"), "7");
    }
}
