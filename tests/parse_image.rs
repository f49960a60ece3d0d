//! Image files: OCR text as paragraphs plus an honest picture description, every page of
//! a multi-page TIFF, and decoding limits. The images are PDF pages the test renders.

use std::io::Cursor;
use std::path::PathBuf;

use pdfium_render::prelude::*;
use ragd::parse::{self, pdf, BlockKind, DescriptionSource, Format, ParseOptions};

fn opts() -> ParseOptions {
    ParseOptions {
        pdfium_library: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models/pdfium/libpdfium.so"),
        ..ParseOptions::default()
    }
}

/// A page with `lines` of 20-point text, rendered to a greyscale bitmap.
fn rendered(lines: &[&str]) -> image::GrayImage {
    let pdfium = pdf::pdfium(&opts().pdfium_library).expect("pdfium (run scripts/setup.sh)");
    let mut doc = pdfium.create_new_pdf().unwrap();
    let font = doc.fonts_mut().helvetica();
    let mut page = doc
        .pages_mut()
        .create_page_at_end(PdfPagePaperSize::from_points(
            PdfPoints::new(420.0),
            PdfPoints::new(595.0),
        ))
        .unwrap();
    for (i, line) in lines.iter().enumerate() {
        page.objects_mut()
            .create_text_object(
                PdfPoints::new(40.0),
                PdfPoints::new(520.0 - 30.0 * i as f32),
                *line,
                font,
                PdfPoints::new(20.0),
            )
            .unwrap();
    }
    let img = page
        .render_with_config(&PdfRenderConfig::new().set_target_width(1200))
        .unwrap()
        .as_image()
        .unwrap();
    img.to_luma8()
}

fn encode(img: &image::GrayImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageLuma8(img.clone())
        .write_to(&mut out, format)
        .unwrap();
    out.into_inner()
}

#[test]
fn png_and_jpeg_text_is_read_and_described() {
    let img = rendered(&["Quarterly sales grew", "in every region"]);
    for format in [
        image::ImageFormat::Png,
        image::ImageFormat::Jpeg,
        image::ImageFormat::Bmp,
    ] {
        let doc =
            parse::parse(Format::named("image"), &encode(&img, format), &opts()).expect("parse");
        assert_eq!(doc.pages, 1);
        let text = parse::render::to_plain_text(&doc);
        assert!(text.contains("Quarterly sales grew"), "{format:?}: {text}");
        let last = doc.blocks.last().expect("blocks");
        let BlockKind::Image(pic) = &last.kind else {
            panic!("no picture block: {last:?}")
        };
        assert_eq!((pic.width, pic.height), img.dimensions());
        assert_eq!(pic.description_source, DescriptionSource::Ocr);
        assert!(pic
            .description
            .contains(&format!("{}×{}", img.width(), img.height())));
        assert!(pic.description.contains("Quarterly"));
    }
}

#[test]
fn every_page_of_a_tiff_is_read() {
    let pages = [
        rendered(&["First page says hello"]),
        rendered(&["Second page says goodbye"]),
    ];
    let mut out = Cursor::new(Vec::new());
    let mut tiff = tiff::encoder::TiffEncoder::new(&mut out).unwrap();
    for p in &pages {
        tiff.write_image::<tiff::encoder::colortype::Gray8>(p.width(), p.height(), p.as_raw())
            .unwrap();
    }
    let doc = parse::parse(Format::named("image"), out.get_ref(), &opts()).expect("parse");
    assert_eq!(doc.pages, 2);
    let page_text = |n| {
        doc.blocks
            .iter()
            .filter(|b| b.page == n && b.kind == BlockKind::Paragraph)
            .map(|b| b.text.clone())
            .collect::<String>()
    };
    assert!(page_text(1).contains("hello"), "{}", page_text(1));
    assert!(page_text(2).contains("goodbye"), "{}", page_text(2));
}

#[test]
fn blank_image_has_a_size_description() {
    let img = image::GrayImage::from_pixel(300, 200, image::Luma([255]));
    let doc = parse::parse(
        Format::named("image"),
        &encode(&img, image::ImageFormat::Png),
        &opts(),
    )
    .expect("parse");
    let BlockKind::Image(pic) = &doc.blocks[0].kind else {
        panic!("{:?}", doc.blocks)
    };
    assert_eq!(pic.description_source, DescriptionSource::Size);
    assert!(pic.description.contains("300×200"));
}

#[test]
fn broken_and_oversized_images_are_errors() {
    let png = encode(
        &image::GrayImage::from_pixel(4, 4, image::Luma([0])),
        image::ImageFormat::Png,
    );
    assert!(parse::parse(Format::named("image"), &png[..png.len() / 2], &opts()).is_err());
    assert!(parse::parse(Format::named("image"), b"not an image at all", &opts()).is_err());
    // A header that claims 100000 x 100000 pixels (IHDR with a fixed-up CRC).
    let mut bomb = png.clone();
    bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&bomb[12..29]);
    bomb[29..33].copy_from_slice(&crc.to_be_bytes());
    let started = std::time::Instant::now();
    assert!(parse::parse(Format::named("image"), &bomb, &opts()).is_err());
    assert!(started.elapsed().as_secs() < 5);
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
