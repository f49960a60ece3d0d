//! Decoding an image file into greyscale pages under memory limits: every page of a
//! TIFF, the single frame of anything else.

use std::io::Cursor;

use image::{GrayImage, ImageReader, Limits};
use tiff::decoder::{Decoder, DecodingResult};
use tiff::ColorType;

use super::{MAX_ALLOC, MAX_PAGES, MAX_SIDE};
use crate::parse::ParseError;

/// The pages of the image in `bytes`, in greyscale.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<GrayImage>, ParseError> {
    let is_tiff = bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*");
    if is_tiff {
        match tiff_pages(bytes) {
            Ok(pages) if !pages.is_empty() => return Ok(pages),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "multi-page TIFF decoding failed, trying single frame")
            }
        }
    }
    single(bytes).map(|p| vec![p])
}

fn single(bytes: &[u8]) -> Result<GrayImage, ParseError> {
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| ParseError::Invalid(format!("unreadable image: {e}")))?;
    if reader.format().is_none() {
        return Err(ParseError::Invalid("not a recognised image format".into()));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => ParseError::TooLarge(format!(
            "the image is too large to decode (limit {MAX_SIDE} pixels a side, {} MiB)",
            MAX_ALLOC >> 20
        )),
        other => ParseError::Invalid(format!("the image could not be decoded: {other}")),
    })?;
    Ok(img.to_luma8())
}

/// Every page of a TIFF; pages in pixel formats not handled here are skipped.
fn tiff_pages(bytes: &[u8]) -> Result<Vec<GrayImage>, String> {
    let mut limits = tiff::decoder::Limits::default();
    limits.decoding_buffer_size = MAX_ALLOC as usize;
    let mut dec = Decoder::new(Cursor::new(bytes))
        .map_err(|e| e.to_string())?
        .with_limits(limits);
    let mut pages = Vec::new();
    loop {
        let (w, h) = dec.dimensions().map_err(|e| e.to_string())?;
        if w > MAX_SIDE || h > MAX_SIDE {
            return Err(format!("TIFF page of {w}x{h} pixels is too large"));
        }
        let color = dec.colortype().map_err(|e| e.to_string())?;
        match dec.read_image() {
            Ok(DecodingResult::U8(data)) => {
                if let Some(p) = to_gray(w, h, color, data) {
                    pages.push(p);
                }
            }
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
        if !dec.more_images() || pages.len() >= MAX_PAGES {
            break;
        }
        dec.next_image().map_err(|e| e.to_string())?;
    }
    Ok(pages)
}

fn to_gray(w: u32, h: u32, color: ColorType, data: Vec<u8>) -> Option<GrayImage> {
    let n = (w as usize) * (h as usize);
    let channels = match color {
        ColorType::Gray(8) => 1,
        ColorType::GrayA(8) => 2,
        ColorType::RGB(8) => 3,
        ColorType::RGBA(8) => 4,
        _ => return None,
    };
    if data.len() < n * channels {
        return None;
    }
    let gray: Vec<u8> = match channels {
        1 => data,
        2 => data.chunks_exact(2).take(n).map(|p| p[0]).collect(),
        _ => data
            .chunks_exact(channels)
            .take(n)
            .map(|p| ((p[0] as u32 * 299 + p[1] as u32 * 587 + p[2] as u32 * 114) / 1000) as u8)
            .collect(),
    };
    GrayImage::from_raw(w, h, gray)
}
