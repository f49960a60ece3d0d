//! PDFs and images written by the tests themselves, through pdfium.
#![allow(dead_code)]

use pdfium_render::prelude::*;

/// One run of text: x and y (from the top) in points, size, bold.
pub struct Run(pub f32, pub f32, pub &'static str, pub f32, pub bool);

const A4_HEIGHT: f32 = 841.89;

/// pdfium, installed by the setup script.
pub fn pdfium() -> &'static Pdfium {
    ragd::parse::pdf::pdfium(&super::models_dir().join("pdfium/libpdfium.so"))
        .expect("pdfium (run scripts/setup.sh)")
}

/// A PDF with one page per entry of `pages`, each holding its runs of text.
pub fn text_pdf(pages: &[Vec<Run>]) -> Vec<u8> {
    let mut doc = pdfium().create_new_pdf().expect("new PDF");
    let regular = doc.fonts_mut().helvetica();
    let bold = doc.fonts_mut().helvetica_bold();
    for runs in pages {
        let mut page = doc
            .pages_mut()
            .create_page_at_end(PdfPagePaperSize::a4())
            .expect("page");
        for Run(x, y, text, size, b) in runs {
            page.objects_mut()
                .create_text_object(
                    PdfPoints::new(*x),
                    PdfPoints::new(A4_HEIGHT - y),
                    *text,
                    if *b { bold } else { regular },
                    PdfPoints::new(*size),
                )
                .expect("text");
        }
    }
    doc.save_to_bytes().expect("save")
}

/// The first page of a PDF rendered to an image `width` pixels wide.
pub fn render(pdf: &[u8], width: i32) -> image::DynamicImage {
    let doc = pdfium().load_pdf_from_byte_slice(pdf, None).expect("load");
    let page = doc.pages().get(0).expect("page");
    let img = page
        .render_with_config(&PdfRenderConfig::new().set_target_width(width))
        .expect("render")
        .as_image()
        .expect("image");
    img
}

/// A PDF whose only page is `img` (a scan: no text layer).
pub fn scanned_pdf(img: &image::DynamicImage) -> Vec<u8> {
    let mut doc = pdfium().create_new_pdf().expect("new PDF");
    let mut page = doc
        .pages_mut()
        .create_page_at_end(PdfPagePaperSize::a4())
        .expect("page");
    page.objects_mut()
        .create_image_object(
            PdfPoints::ZERO,
            PdfPoints::ZERO,
            img,
            Some(PdfPoints::new(595.28)),
            Some(PdfPoints::new(A4_HEIGHT)),
        )
        .expect("image");
    drop(page);
    doc.save_to_bytes().expect("save")
}

/// An image encoded in `format`.
pub fn encode(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.to_rgb8().write_to(&mut out, format).expect("encode");
    out.into_inner()
}
