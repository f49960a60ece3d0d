//! Tesseract OCR of a greyscale bitmap into paragraphs. Engines are expensive to start
//! (they load the language models), so a few idle ones are kept in a small pool.

use image::GrayImage;
use parking_lot::Mutex;
use tesseract::{PageSegMode, Tesseract};

/// Idle engines kept for reuse; more may exist while many OCR jobs run at once.
const POOL_SIZE: usize = 2;

static POOL: Mutex<Vec<(String, Tesseract)>> = Mutex::new(Vec::new());

/// Text read from a bitmap.
#[derive(Debug, Clone, Default)]
pub(crate) struct OcrText {
    /// Paragraphs in reading order, lines joined and hyphenation repaired.
    pub paragraphs: Vec<String>,
}

impl OcrText {
    pub fn words(&self) -> usize {
        self.paragraphs
            .iter()
            .map(|p| p.split_whitespace().count())
            .sum()
    }

    pub fn joined(&self) -> String {
        self.paragraphs.join("\n\n")
    }
}

/// Why OCR produced nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OcrError {
    #[error("OCR is unavailable: tesseract could not start with languages '{0}'")]
    Unavailable(String),
    #[error("OCR failed: {0}")]
    Failed(String),
}

fn engine(languages: &str) -> Result<(String, Tesseract), OcrError> {
    {
        let mut pool = POOL.lock();
        if let Some(pos) = pool.iter().position(|(l, _)| l == languages) {
            return Ok(pool.swap_remove(pos));
        }
    }
    let start = |langs: &str| -> Result<Tesseract, String> {
        let mut t = Tesseract::new(None, Some(langs)).map_err(|e| e.to_string())?;
        // Automatic segmentation with orientation detection: scans come rotated.
        t.set_page_seg_mode(PageSegMode::PsmAutoOsd);
        // Tesseract's diagnostics ("OSD: Weak margin ...") would go to stderr.
        t.set_variable("debug_file", "/dev/null")
            .map_err(|e| e.to_string())
    };
    match start(languages) {
        Ok(t) => Ok((languages.to_owned(), t)),
        Err(e) => {
            tracing::warn!(languages, error = %e, "tesseract languages unavailable, trying eng");
            start("eng")
                .map(|t| (languages.to_owned(), t))
                .map_err(|_| OcrError::Unavailable(languages.to_owned()))
        }
    }
}

fn give_back(entry: (String, Tesseract)) {
    let mut pool = POOL.lock();
    if pool.len() < POOL_SIZE {
        pool.push(entry);
    }
}

/// Mean word confidence (0-100) below which a page is read again turned upside down:
/// orientation detection tells 90 degrees from 270 but not upright from 180.
const RETRY_UPSIDE_DOWN_BELOW: i32 = 55;

/// Reads the text of `img`, scanned at `dpi`, in `languages` (e.g. `eng+ara`).
pub(crate) fn recognize(img: &GrayImage, dpi: u32, languages: &str) -> Result<OcrText, OcrError> {
    let (w, h) = img.dimensions();
    if w < 8 || h < 8 {
        return Ok(OcrText::default());
    }
    let (text, conf) = read(img, dpi, languages)?;
    if conf >= RETRY_UPSIDE_DOWN_BELOW || text.trim().is_empty() {
        return Ok(OcrText {
            paragraphs: paragraphs(&text),
        });
    }
    let turned = image::imageops::rotate180(img);
    let (text2, conf2) = read(&turned, dpi, languages)?;
    let best = if conf2 > conf { text2 } else { text };
    Ok(OcrText {
        paragraphs: paragraphs(&best),
    })
}

/// One tesseract pass: the text and its mean word confidence.
fn read(img: &GrayImage, dpi: u32, languages: &str) -> Result<(String, i32), OcrError> {
    let (w, h) = img.dimensions();
    let (langs, tess) = engine(languages)?;
    let w_i = i32::try_from(w).map_err(|_| OcrError::Failed("image too wide".into()))?;
    let h_i = i32::try_from(h).map_err(|_| OcrError::Failed("image too tall".into()))?;
    let mut tess = tess
        .set_frame(img.as_raw(), w_i, h_i, 1, w_i)
        .map_err(|e| OcrError::Failed(e.to_string()))?
        .set_source_resolution(dpi.clamp(70, 1200) as i32)
        .recognize()
        .map_err(|e| OcrError::Failed(e.to_string()))?;
    let text = tess
        .get_text()
        .map_err(|e| OcrError::Failed(e.to_string()))?;
    let conf = tess.mean_text_conf();
    give_back((langs, tess));
    Ok((text, conf))
}

/// Tesseract's text (blank lines between blocks) as paragraphs.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let hyphen =
            cur.ends_with('-') && cur.chars().rev().nth(1).is_some_and(char::is_alphabetic);
        if hyphen && line.chars().next().is_some_and(char::is_lowercase) {
            cur.pop();
        } else if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    // Speckles read as text: paragraphs with no letter or digit at all.
    out.retain(|p| p.chars().any(char::is_alphanumeric));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_paragraphs_and_repairs_hyphens() {
        let p = paragraphs("Hello infor-\nmation here\n\n\n  ~~ \n\nSecond para\n");
        assert_eq!(p, vec!["Hello information here", "Second para"]);
    }
}
