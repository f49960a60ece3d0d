//! Language detection (whatlang) reported as ISO 639-1 codes.

/// Code used when the language cannot be determined (ISO 639-2 "undetermined").
pub const UNDETERMINED: &str = "und";

/// Confidence needed to label one chunk on its own; below it, the chunk takes the
/// document's language (detected on more text, with [`DOCUMENT_CONFIDENCE`]).
pub const CHUNK_CONFIDENCE: f64 = 0.5;
/// Confidence needed for a document-level guess.
pub const DOCUMENT_CONFIDENCE: f64 = 0.25;

/// The ISO 639-1 code of `text`'s language, if whatlang is at least `min_confidence` sure.
pub fn detect(text: &str, min_confidence: f64) -> Option<String> {
    let info = whatlang::detect(text)?;
    // Short texts are often mis-detected; accept a confident guess only.
    if !info.is_reliable() && info.confidence() < min_confidence {
        return None;
    }
    let code3 = info.lang().code();
    Some(
        isolang::Language::from_639_3(code3)
            .and_then(|l| l.to_639_1())
            .map(str::to_owned)
            .unwrap_or_else(|| code3.to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_english_and_arabic() {
        assert_eq!(
            detect(
                "The quick brown fox jumps over the lazy dog near the river bank.",
                DOCUMENT_CONFIDENCE
            )
            .as_deref(),
            Some("en")
        );
        assert_eq!(
            detect(
                "مرحبا بكم في قاعدة المعرفة الخاصة بالشركة",
                CHUNK_CONFIDENCE
            )
            .as_deref(),
            Some("ar")
        );
    }
}
