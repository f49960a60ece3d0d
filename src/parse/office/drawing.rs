//! DrawingML pieces shared by DOCX and PPTX: picture sizes from extents (EMU or, in
//! Strict documents, measures with units) and honest image descriptions. ragd runs
//! no vision model over embedded pictures, so a description is the author's alt text
//! (when there is one) and the displayed size, and says so.

use crate::parse::{DescriptionSource, Image};

/// English Metric Units per CSS pixel (96 dpi).
const EMU_PER_PX: f64 = 9525.0;

/// A length attribute in pixels: plain numbers are EMU; Strict OOXML may write
/// `12.5pt`, `2in`, `3cm`, `20mm`, `100px`.
pub fn length_px(v: &str) -> Option<u32> {
    let v = v.trim();
    let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    let px = match unit {
        "" => n / EMU_PER_PX,
        "pt" => n * 96.0 / 72.0,
        "in" => n * 96.0,
        "cm" => n * 96.0 / 2.54,
        "mm" => n * 96.0 / 25.4,
        "pc" => n * 16.0,
        "px" => n,
        _ => return None,
    };
    (px.is_finite() && px >= 0.0).then(|| px.round().min(u32::MAX as f64) as u32)
}

/// What Office appends to alt text it wrote itself.
const GENERATED_ALT_SUFFIXES: &[&str] = &[
    "AI-generated content may be incorrect.",
    "Description automatically generated",
];

const IMAGE_EXTENSIONS: &[&str] = &[
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".emf", ".wmf", ".svg", ".webp",
];

/// An embedded picture: alt text (if any) plus its displayed size.
pub fn picture(alt: Option<&str>, width: u32, height: u32) -> Image {
    let alt = alt.map(str::trim).filter(|a| !a.is_empty());
    let size = if width > 0 && height > 0 {
        format!("{width}×{height} px")
    } else {
        "size unknown".to_owned()
    };
    let description = match alt {
        Some(a) => format!("{a} (picture, {size})"),
        None => format!("Picture, {size}"),
    };
    Image {
        width,
        height,
        description,
        description_source: DescriptionSource::Size,
    }
}

/// Alt text of a drawing from its non-visual properties (`descr`, then `title`);
/// names like "Picture 3" that Office generates are not descriptions.
pub fn alt_text(doc_pr: Option<&super::xml::Element>) -> Option<String> {
    let pr = doc_pr?;
    let text = pr.attr("descr").or_else(|| pr.attr("title"))?;
    // Office appends boilerplate to alt text it generated itself.
    let mut text = text.trim();
    for boilerplate in GENERATED_ALT_SUFFIXES {
        text = text.trim_end_matches(boilerplate).trim_end();
    }
    // Office fills in the picture's file name when there is no alt text; a file name
    // describes nothing.
    let lower = text.to_lowercase();
    let file_name =
        !text.contains(char::is_whitespace) && IMAGE_EXTENSIONS.iter().any(|e| lower.ends_with(e));
    (!text.is_empty() && !file_name).then(|| text.to_owned())
}

/// Text of a SmartArt diagram's data part (`dgm:dataModel`): one entry per text
/// paragraph of its points, in the order the data model lists them.
pub fn diagram_texts(data_model: &super::xml::Element) -> Vec<String> {
    let mut out = Vec::new();
    for pt in data_model.find_all("pt") {
        let Some(t) = pt.child("t") else {
            continue;
        };
        for p in t.children_named("p") {
            let text: String = p.find_all("t").iter().map(|t| t.text()).collect();
            if !text.trim().is_empty() {
                out.push(text);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_descriptions() {
        assert_eq!(length_px("952500"), Some(100));
        assert_eq!(length_px("72pt"), Some(96));
        assert_eq!(length_px("1in"), Some(96));
        assert_eq!(length_px("abc"), None);
        assert_eq!(picture(None, 10, 20).description, "Picture, 10×20 px");
        assert_eq!(
            picture(Some("A duck"), 1, 2).description,
            "A duck (picture, 1×2 px)"
        );
    }
}
