//! How a cell reads on screen: integers without a decimal point, floats to ten
//! significant places, dates as ISO 8601 (with the time of day when the cell's number
//! format shows one), durations as h:mm:ss, errors as Excel shows them.

use std::collections::HashMap;

use calamine::DataRef;

use crate::parse::office::package::Package;
use crate::parse::office::xml::Element;

/// Built-in number formats that show a time of day (ECMA-376 18.8.30).
const BUILTIN_TIME_FORMATS: &[u32] = &[18, 19, 20, 21, 22, 45, 46, 47];

/// Which cell formats (indexes into `cellXfs`, the cells' `s` attribute) show a time
/// of day. Best effort: without a readable styles part, none do.
#[derive(Debug, Default)]
pub struct TimeFormats(Vec<bool>);

impl TimeFormats {
    /// Reads the workbook's styles part.
    pub fn read(pkg: &mut Package) -> Self {
        let styles = pkg.main_part().ok().and_then(|main| {
            let rels = pkg.rels(&main).ok()?;
            let rel = rels.values().find(|r| r.kind == "styles" && !r.external)?;
            pkg.optional_xml(&rel.target)
        });
        styles.map(|s| Self::from_styles(&s)).unwrap_or_default()
    }

    fn from_styles(styles: &Element) -> Self {
        let custom: HashMap<u32, bool> = styles
            .child("numFmts")
            .map(|f| {
                f.children_named("numFmt")
                    .filter_map(|n| {
                        let id = n.attr("numFmtId")?.parse().ok()?;
                        Some((id, shows_time(n.attr("formatCode")?)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let xfs = styles
            .child("cellXfs")
            .map(|x| {
                x.children_named("xf")
                    .map(|xf| {
                        let id: u32 = xf
                            .attr("numFmtId")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        custom
                            .get(&id)
                            .copied()
                            .unwrap_or(BUILTIN_TIME_FORMATS.contains(&id))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self(xfs)
    }

    /// Whether cells of this style show a time of day.
    pub fn shows_time(&self, style: usize) -> bool {
        self.0.get(style).copied().unwrap_or(false)
    }
}

/// Whether a format code (`yyyy-mm-dd h:mm`) shows hours or seconds; quoted text,
/// escaped characters and `[...]` sections (colours, elapsed time) do not count.
fn shows_time(code: &str) -> bool {
    let mut chars = code.chars();
    let mut in_quotes = false;
    let mut in_brackets = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quotes = !in_quotes,
            _ if in_quotes => {}
            '\\' | '_' | '*' => {
                chars.next();
            }
            '[' => in_brackets = true,
            ']' => in_brackets = false,
            _ if in_brackets => {}
            'h' | 'H' | 's' | 'S' => return true,
            _ => {}
        }
    }
    false
}

/// The text of one cell; `shows_time` says whether its format shows a time of day.
pub fn cell_text(v: &DataRef<'_>, shows_time: bool) -> String {
    match v {
        DataRef::Int(i) => i.to_string(),
        DataRef::Float(f) => number(*f),
        DataRef::String(s) => s.clone(),
        DataRef::SharedString(s) => (*s).to_owned(),
        DataRef::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        DataRef::DateTime(dt) if dt.is_duration() => {
            let secs = (dt.as_f64() * 86_400.0).round() as i64;
            let sign = if secs < 0 { "-" } else { "" };
            let secs = secs.unsigned_abs();
            format!(
                "{sign}{}:{:02}:{:02}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            )
        }
        DataRef::DateTime(dt) => {
            let (y, mo, d, h, mi, s, _) = dt.to_ymd_hms_milli();
            let value = dt.as_f64();
            if (0.0..1.0).contains(&value) {
                format!("{h:02}:{mi:02}:{s:02}")
            } else if shows_time || (h, mi, s) != (0, 0, 0) {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02}")
            }
        }
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => e.to_string(),
        DataRef::Empty => String::new(),
    }
}

/// A float as Excel's General format would show it, near enough.
pub fn number(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return format!("{}", f as i64);
    }
    let s = format!("{f:.10}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "0" || s == "-0" {
        // Tiny values keep their magnitude rather than rounding to zero.
        return format!("{f:e}");
    }
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_displayed() {
        assert_eq!(number(5.0), "5");
        assert_eq!(number(-3.0), "-3");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(1.5e-12), "1.5e-12");
    }

    #[test]
    fn time_in_format_codes() {
        assert!(shows_time(r"yyyy\-mm\-dd\ h:mm:ss"));
        assert!(shows_time("hh:mm AM/PM"));
        assert!(!shows_time("yyyy-mm-dd"));
        assert!(!shows_time(r#"d "hours" mmm"#));
        assert!(!shows_time("[Red]dd/mm/yyyy"));
    }
}
