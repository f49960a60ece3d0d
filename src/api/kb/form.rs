//! Multipart forms: files read with a size limit (413 past it), text fields typed and
//! checked, every failure a 400 in the contract's error body.

use std::collections::HashMap;

use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::Multipart;
use axum::http::StatusCode;

use crate::api::error::ApiError;

/// One uploaded file.
pub struct FilePart {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A read multipart form.
pub struct Form {
    pub files: Vec<(String, FilePart)>,
    fields: HashMap<String, String>,
}

/// Longest text field accepted.
const MAX_FIELD: usize = 64 * 1024;

impl Form {
    /// Reads the whole form; each file may be at most `limit` bytes, and at most
    /// `max_files` files are accepted.
    pub async fn read(
        multipart: Result<Multipart, MultipartRejection>,
        limit: u64,
        max_files: usize,
    ) -> Result<Self, ApiError> {
        let mut mp = multipart.map_err(|e| {
            ApiError::bad_request(format!(
                "expected a multipart/form-data body: {}",
                e.body_text()
            ))
        })?;
        let mut files = Vec::new();
        let mut fields = HashMap::new();
        while let Some(field) = mp.next_field().await.map_err(multipart_error)? {
            let key = field.name().unwrap_or_default().to_owned();
            if let Some(fname) = field.file_name().map(str::to_owned) {
                if files.len() >= max_files {
                    return Err(ApiError::bad_request(format!(
                        "at most {max_files} file(s) per request"
                    )));
                }
                match read_limited(field, limit).await? {
                    Some(bytes) => files.push((key, FilePart { name: fname, bytes })),
                    None => {
                        // Read (and drop) what the client is still sending, up to a cap,
                        // so it can read the 413 rather than a reset connection.
                        drain(&mut mp).await;
                        return Err(ApiError::new(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            format!("the upload exceeds the limit of {limit} bytes"),
                        ));
                    }
                }
            } else {
                let text = field.text().await.map_err(multipart_error)?;
                if text.len() > MAX_FIELD {
                    return Err(ApiError::bad_request(format!(
                        "form field '{key}' is too long"
                    )));
                }
                fields.insert(key, text);
            }
        }
        Ok(Self { files, fields })
    }

    /// The single file of field `key` (400 if missing, repeated or empty).
    pub fn one_file(&mut self, key: &str) -> Result<FilePart, ApiError> {
        let mut found: Vec<FilePart> = Vec::new();
        let mut rest = Vec::new();
        for (k, f) in self.files.drain(..) {
            if k == key {
                found.push(f);
            } else {
                rest.push((k, f));
            }
        }
        self.files = rest;
        let file = match found.len() {
            0 => {
                return Err(ApiError::bad_request(format!(
                    "missing form field '{key}' (a file)"
                )))
            }
            1 => found.remove(0),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "send exactly one '{key}' file"
                )))
            }
        };
        if file.bytes.is_empty() {
            return Err(ApiError::bad_request(format!("'{}' is empty", file.name)));
        }
        Ok(file)
    }

    /// A text field, or `default`.
    pub fn text(&self, key: &str, default: &str) -> String {
        self.fields
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    /// A boolean field (`true/false/1/0/yes/no/on/off`), or `default`.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, ApiError> {
        match self.fields.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v.is_empty() => Ok(default),
            Some(v) => match v.as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(ApiError::bad_request(format!(
                    "{key} must be true or false, got '{v}'"
                ))),
            },
        }
    }

    /// An integer field within `lo..=hi`, or `default`.
    pub fn int(&self, key: &str, default: i64, lo: i64, hi: i64) -> Result<i64, ApiError> {
        let v = match self.fields.get(key).map(|v| v.trim()) {
            None | Some("") => default,
            Some(v) => v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("{key} must be an integer, got '{v}'"))
            })?,
        };
        crate::api::extract::check_range(key, v, lo, hi)
    }

    /// A field that must be one of `choices`, or `default`.
    pub fn choice(&self, key: &str, default: &str, choices: &[&str]) -> Result<String, ApiError> {
        let v = self.text(key, default).trim().to_ascii_lowercase();
        let v = if v.is_empty() { default.to_owned() } else { v };
        if choices.contains(&v.as_str()) {
            Ok(v)
        } else {
            Err(ApiError::bad_request(format!(
                "{key} must be one of {}, got '{v}'",
                choices.join(", ")
            )))
        }
    }
}

/// Bytes read and discarded after a refusal; past this the connection is dropped.
pub const DRAIN_AFTER_REFUSAL: u64 = 16 * 1024 * 1024;

/// Reads a file field; `None` (and the rest of the field consumed, up to the drain cap)
/// as soon as it passes `limit` bytes.
async fn read_limited(mut field: Field<'_>, limit: u64) -> Result<Option<Vec<u8>>, ApiError> {
    let mut out = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if out.len() as u64 + chunk.len() as u64 > limit {
            let mut drained = 0u64;
            while let Ok(Some(c)) = field.chunk().await {
                drained += c.len() as u64;
                if drained > DRAIN_AFTER_REFUSAL {
                    break;
                }
            }
            return Ok(None);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Some(out))
}

/// Consumes the remaining fields of a refused form, up to the drain cap.
async fn drain(mp: &mut Multipart) {
    let mut drained = 0u64;
    while let Ok(Some(mut field)) = mp.next_field().await {
        while let Ok(Some(c)) = field.chunk().await {
            drained += c.len() as u64;
            if drained > DRAIN_AFTER_REFUSAL {
                return;
            }
        }
    }
}

fn multipart_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the upload exceeds the size limit",
        );
    }
    ApiError::bad_request(format!("malformed multipart body: {}", e.body_text()))
}
