//! Development aid: prints the characters pdfium reports around a search string
//! (`RAGD_CHARS=path RAGD_FIND=text cargo test --test parse_pdf_chars -- --nocapture`).

use pdfium_render::prelude::*;

#[test]
fn chars() {
    let (Ok(path), Ok(find)) = (std::env::var("RAGD_CHARS"), std::env::var("RAGD_FIND")) else {
        return;
    };
    let pdfium = Pdfium::new(Pdfium::bind_to_library("models/pdfium/libpdfium.so").unwrap());
    let doc = pdfium.load_pdf_from_file(&path, None).unwrap();
    for page in doc.pages().iter() {
        let text = page.text().unwrap();
        let all = text.chars();
        let chars: Vec<_> = all.iter().collect();
        let s: Vec<char> = chars
            .iter()
            .map(|c| c.unicode_char().unwrap_or('?'))
            .collect();
        let f: Vec<char> = find.chars().collect();
        if let Some(pos) = s.windows(f.len()).position(|w| w == f.as_slice()) {
            for c in &chars[pos.saturating_sub(3)..(pos + f.len() + 6).min(chars.len())] {
                let b = c.loose_bounds().unwrap();
                println!("{:?} U+{:04X} gen={:?} x0={:.2} x1={:.2} top={:.2} bot={:.2} size={:.1} font={} w={:?}",
                    c.unicode_char(), c.unicode_value(), c.is_generated(), b.left().value, b.right().value,
                    b.top().value, b.bottom().value, c.scaled_font_size().value, c.font_name(), c.font_weight());
            }
            return;
        }
    }
}

#[test]
fn render_page() {
    let (Ok(path), Ok(out)) = (std::env::var("RAGD_RENDER"), std::env::var("RAGD_OUT")) else {
        return;
    };
    let n: i32 = std::env::var("RAGD_PAGE")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let pdfium = Pdfium::new(Pdfium::bind_to_library("models/pdfium/libpdfium.so").unwrap());
    let doc = pdfium.load_pdf_from_file(&path, None).unwrap();
    let page = doc.pages().get(n).unwrap();
    let img = page
        .render_with_config(&PdfRenderConfig::new().set_target_width(900))
        .unwrap()
        .as_image()
        .unwrap();
    img.to_rgb8().save(out).unwrap();
}
