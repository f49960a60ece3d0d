//! The one ZIP reader: it treats the archive as hostile, with caps on the number of
//! entries, on each entry's and the whole archive's uncompressed size and on the
//! compression ratio, all enforced on the bytes actually inflated (declared sizes can
//! lie). Entry names are only ever used as map keys or reduced to file names, never as
//! file-system paths. Office packages and archives of documents both read through it.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use zip::result::ZipError;
use zip::ZipArchive;

use crate::parse::ParseError;

/// Bounds on what one archive may make us inflate.
#[derive(Debug, Clone, Copy)]
pub struct ZipLimits {
    /// Most entries (files and folders) an archive may list.
    pub max_entries: usize,
    /// Most bytes one entry may inflate to.
    pub max_entry_bytes: u64,
    /// Most bytes all entries read together may inflate to.
    pub max_total_bytes: u64,
    /// Largest inflated/compressed ratio allowed for an entry past `ratio_floor_bytes`.
    pub max_ratio: u64,
    /// Entries smaller than this are exempt from the ratio check (tiny XML parts
    /// legitimately compress very well).
    pub ratio_floor_bytes: u64,
}

impl Default for ZipLimits {
    fn default() -> Self {
        Self {
            max_entries: 5_000,
            max_entry_bytes: 128 << 20,
            max_total_bytes: 512 << 20,
            max_ratio: 250,
            ratio_floor_bytes: 4 << 20,
        }
    }
}

/// An opened archive with its entries indexed by normalised part name.
pub struct GuardedZip<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    /// Lower-case part name (no leading `/`) -> entry index. OPC part names compare
    /// case-insensitively.
    index: HashMap<String, usize>,
    limits: ZipLimits,
    /// Bytes inflated so far, each entry counted once however often it is read.
    inflated: u64,
    counted: Vec<bool>,
}

impl<'a> GuardedZip<'a> {
    /// Opens `bytes` as a ZIP archive within `limits`.
    pub fn open(bytes: &'a [u8], limits: ZipLimits) -> Result<Self, ParseError> {
        if let Some(n) = declared_entry_count(bytes) {
            if n > limits.max_entries {
                return Err(too_many(n, limits));
            }
        }
        let archive = ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)?;
        if archive.len() > limits.max_entries {
            return Err(too_many(archive.len(), limits));
        }
        let mut index = HashMap::with_capacity(archive.len());
        for (i, name) in archive.file_names().enumerate() {
            index.insert(normalise(name), i);
        }
        let counted = vec![false; archive.len()];
        let mut me = Self {
            archive,
            index,
            limits,
            inflated: 0,
            counted,
        };
        // Declared sizes are only a first, cheap filter; reads enforce the real ones.
        let mut declared: u64 = 0;
        for i in 0..me.archive.len() {
            let entry = me.archive.by_index_raw(i).map_err(zip_error)?;
            if entry.size() > limits.max_entry_bytes {
                return Err(entry_too_large(entry.name(), limits));
            }
            declared = declared.saturating_add(entry.size());
        }
        if declared > limits.max_total_bytes {
            return Err(total_too_large(limits));
        }
        Ok(me)
    }

    /// Whether the archive has a part of this name.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(&normalise(name))
    }

    /// Part names in archive order (normalised, lower case).
    pub fn names(&self) -> Vec<String> {
        let mut named: Vec<(&String, &usize)> = self.index.iter().collect();
        named.sort_by_key(|(_, i)| **i);
        named.into_iter().map(|(n, _)| n.clone()).collect()
    }

    /// Inflates one part; `None` when the archive has no such part.
    pub fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ParseError> {
        let Some(&i) = self.index.get(&normalise(name)) else {
            return Ok(None);
        };
        self.read_index(i).map(Some)
    }

    /// Number of entries (files and folders).
    pub fn len(&self) -> usize {
        self.archive.len()
    }

    /// Whether the archive lists no entry.
    pub fn is_empty(&self) -> bool {
        self.archive.len() == 0
    }

    /// Entry `i`'s name as stored in the archive, and whether it is a folder.
    fn entry(&mut self, i: usize) -> Result<(String, bool), ParseError> {
        let e = self.archive.by_index_raw(i).map_err(zip_error)?;
        Ok((e.name().to_owned(), e.is_dir()))
    }

    /// Inflates every entry once, discarding the bytes: proves the whole archive is
    /// within the limits before it is handed to a reader we do not control.
    pub fn verify_all(&mut self) -> Result<(), ParseError> {
        for i in 0..self.archive.len() {
            let mut sink = std::io::sink();
            self.inflate_into(i, &mut sink)?;
        }
        Ok(())
    }

    fn read_index(&mut self, i: usize) -> Result<Vec<u8>, ParseError> {
        let mut out = Vec::new();
        self.inflate_into(i, &mut out)?;
        Ok(out)
    }

    fn inflate_into(&mut self, i: usize, out: &mut impl std::io::Write) -> Result<(), ParseError> {
        let limits = self.limits;
        let entry = self.archive.by_index(i).map_err(zip_error)?;
        if entry.is_dir() {
            return Ok(());
        }
        let name = entry.name().to_owned();
        let compressed = entry.compressed_size().max(1);
        let first_read = !self.counted.get(i).copied().unwrap_or(true);
        let left_total = if first_read {
            limits.max_total_bytes.saturating_sub(self.inflated)
        } else {
            u64::MAX
        };
        let cap = limits.max_entry_bytes.min(left_total);
        // One byte past the cap tells "exactly at the cap" from "over it".
        let mut limited = entry.take(cap.saturating_add(1));
        let mut buf = [0u8; 64 * 1024];
        let mut n: u64 = 0;
        loop {
            let got = limited.read(&mut buf).map_err(|e| read_error(&name, e))?;
            if got == 0 {
                break;
            }
            n += got as u64;
            if n > cap {
                return Err(if cap == limits.max_entry_bytes {
                    entry_too_large(&name, limits)
                } else {
                    total_too_large(limits)
                });
            }
            if n > limits.ratio_floor_bytes && n / compressed > limits.max_ratio {
                return Err(ParseError::TooLarge(format!(
                    "the archive entry '{}' inflates more than {}:1 (a ZIP bomb?)",
                    printable(&name),
                    limits.max_ratio
                )));
            }
            out.write_all(&buf[..got])
                .map_err(|e| read_error(&name, e))?;
        }
        if first_read {
            self.inflated += n;
            if let Some(c) = self.counted.get_mut(i) {
                *c = true;
            }
        }
        Ok(())
    }
}

/// Lower-case, forward slashes, no leading slash: how parts are looked up.
pub fn normalise(name: &str) -> String {
    name.trim_start_matches(['/', '\\'])
        .replace('\\', "/")
        .to_lowercase()
}

/// Entry count from the end-of-central-directory record, when it can be found cheaply
/// (ZIP64 archives report 0xFFFF and are checked after opening).
fn declared_entry_count(bytes: &[u8]) -> Option<usize> {
    const EOCD: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    let start = bytes.len().saturating_sub(22 + 0xFFFF);
    let tail = &bytes[start..];
    let pos = tail.windows(4).rposition(|w| w == EOCD)?;
    let rec = tail.get(pos..pos + 22)?;
    let total = u16::from_le_bytes([rec[10], rec[11]]);
    (total != 0xFFFF).then_some(total as usize)
}

fn too_many(n: usize, limits: ZipLimits) -> ParseError {
    ParseError::TooLarge(format!(
        "the archive lists {n} entries; at most {} are accepted",
        limits.max_entries
    ))
}

fn entry_too_large(name: &str, limits: ZipLimits) -> ParseError {
    ParseError::TooLarge(format!(
        "the archive entry '{}' inflates past {} MiB",
        printable(name),
        limits.max_entry_bytes >> 20
    ))
}

fn total_too_large(limits: ZipLimits) -> ParseError {
    ParseError::TooLarge(format!(
        "the archive inflates past {} MiB in total",
        limits.max_total_bytes >> 20
    ))
}

fn read_error(name: &str, e: std::io::Error) -> ParseError {
    ParseError::Invalid(format!(
        "the archive entry '{}' is damaged: {e}",
        printable(name)
    ))
}

fn zip_error(e: ZipError) -> ParseError {
    match e {
        ZipError::UnsupportedArchive(m) if m == ZipError::PASSWORD_REQUIRED => {
            ParseError::Encrypted
        }
        ZipError::InvalidPassword => ParseError::Encrypted,
        other => ParseError::Invalid(format!("not a valid ZIP container: {other}")),
    }
}

/// Entry names come from the file: keep them short and printable in messages.
fn printable(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(120).collect()
}

/// The files of an archive of documents, reduced to their file names, in archive
/// order: every entry is checked (count, names, declared and real sizes, ratio) and
/// inflated before anything is returned, so a bad archive yields nothing. Folders,
/// macOS resource forks (`__MACOSX/`, `._name`) are skipped; an entry whose path is
/// absolute, climbs with `..`, names a drive or holds control characters refuses the
/// whole archive.
pub fn files(bytes: &[u8], limits: ZipLimits) -> Result<Vec<(String, Vec<u8>)>, ParseError> {
    let mut zip = GuardedZip::open(bytes, limits)?;
    let mut entries = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let (path, is_dir) = zip.entry(i)?;
        let unsafe_path = path.starts_with(['/', '\\'])
            || path.split(['/', '\\']).any(|p| p == "..")
            || path.chars().nth(1) == Some(':')
            || path.chars().any(char::is_control);
        if unsafe_path {
            return Err(ParseError::Invalid(format!(
                "entry '{}' has an unsafe path",
                path.escape_debug()
            )));
        }
        if !is_dir {
            entries.push((i, path));
        }
    }
    let mut out = Vec::with_capacity(entries.len());
    for (i, path) in entries {
        let bytes = zip.read_index(i)?;
        let name = path.rsplit(['/', '\\']).next().unwrap_or_default();
        if path.starts_with("__MACOSX/") || name.starts_with("._") || name.is_empty() {
            continue;
        }
        out.push((name.to_owned(), bytes));
    }
    Ok(out)
}
