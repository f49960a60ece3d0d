//! What a sync of `PATH...` means on disk: files, folders (recursively), glob
//! patterns and ZIP archives, filtered by `--include` / `--exclude`; every path that
//! cannot be ingested becomes a refusal with its reason, never a silent skip or a crash.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A file found by the walk.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    /// The source name the knowledge base will know it by (its file name).
    pub name: String,
    pub is_zip: bool,
}

/// A path that will not be ingested, and why.
#[derive(Debug, Clone)]
pub struct Refused {
    pub path: PathBuf,
    pub reason: String,
}

/// The walk's result.
#[derive(Debug, Default)]
pub struct Walk {
    pub files: Vec<Found>,
    pub refused: Vec<Refused>,
    /// Files of a type ragd does not read (reported as a count, not one by one).
    pub unsupported: usize,
}

/// `--include` / `--exclude` glob patterns, matched against the file name and the path.
pub struct Filters {
    include: Vec<glob::Pattern>,
    exclude: Vec<glob::Pattern>,
}

impl Filters {
    /// Compiles the patterns; a bad one is a clear error.
    pub fn new(include: &[String], exclude: &[String]) -> anyhow::Result<Self> {
        let compile = |ps: &[String]| -> anyhow::Result<Vec<glob::Pattern>> {
            ps.iter()
                .map(|p| {
                    glob::Pattern::new(p)
                        .map_err(|e| anyhow::anyhow!("the pattern {p:?} is not valid: {e}"))
                })
                .collect()
        };
        Ok(Self {
            include: compile(include)?,
            exclude: compile(exclude)?,
        })
    }

    fn matches(ps: &[glob::Pattern], path: &Path) -> bool {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        ps.iter()
            .any(|p| p.matches_path(path) || name.as_deref().is_some_and(|n| p.matches(n)))
    }

    /// Whether `path` is wanted.
    pub fn wants(&self, path: &Path) -> bool {
        (self.include.is_empty() || Self::matches(&self.include, path))
            && !Self::matches(&self.exclude, path)
    }
}

/// Walks `paths` (blocking).
pub fn walk(paths: &[String], filters: &Filters) -> Walk {
    let mut w = Walk::default();
    for arg in paths {
        let p = Path::new(arg);
        if !p.exists() && is_glob(arg) {
            match glob::glob(arg) {
                Ok(entries) => {
                    let mut any = false;
                    for e in entries {
                        any = true;
                        match e {
                            Ok(path) => visit(&path, filters, &mut w),
                            Err(e) => w.refused.push(Refused {
                                path: e.path().to_owned(),
                                reason: format!("cannot be read: {}", e.error()),
                            }),
                        }
                    }
                    if !any {
                        w.refused.push(Refused {
                            path: p.to_owned(),
                            reason: "the pattern matches nothing".into(),
                        });
                    }
                }
                Err(e) => w.refused.push(Refused {
                    path: p.to_owned(),
                    reason: format!("not a valid pattern: {e}"),
                }),
            }
            continue;
        }
        visit(p, filters, &mut w);
    }
    // Sources are known by file name: two files of one name in one run would replace
    // each other. The first is kept; the others are refused, saying why.
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    let mut kept = Vec::with_capacity(w.files.len());
    for f in std::mem::take(&mut w.files) {
        if f.is_zip {
            kept.push(f);
            continue;
        }
        match seen.get(&f.name) {
            Some(first) if first != &f.path => w.refused.push(Refused {
                reason: format!(
                    "another file of this name is in the run ({}); sources are known by file name",
                    first.display()
                ),
                path: f.path,
            }),
            Some(_) => {}
            None => {
                seen.insert(f.name.clone(), f.path.clone());
                kept.push(f);
            }
        }
    }
    w.files = kept;
    w
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn visit(p: &Path, filters: &Filters, w: &mut Walk) {
    let meta = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) => {
            w.refused.push(Refused {
                path: p.to_owned(),
                reason: not_readable(&e),
            });
            return;
        }
    };
    if meta.file_type().is_symlink() && std::fs::metadata(p).is_err() {
        w.refused.push(Refused {
            path: p.to_owned(),
            reason: "a broken symbolic link".into(),
        });
        return;
    }
    if p.is_dir() {
        for e in walkdir::WalkDir::new(p)
            .follow_links(true)
            .sort_by_file_name()
        {
            match e {
                Ok(e) if e.file_type().is_dir() => {}
                Ok(e) => file(e.path(), filters, w),
                Err(e) => {
                    let path = e.path().map(Path::to_owned).unwrap_or_else(|| p.to_owned());
                    // walkdir reports a dangling link as an error of its target.
                    let broken = std::fs::symlink_metadata(&path)
                        .is_ok_and(|m| m.file_type().is_symlink())
                        && std::fs::metadata(&path).is_err();
                    let reason = if broken {
                        "a broken symbolic link".to_owned()
                    } else {
                        match e.io_error() {
                            Some(io) => not_readable(io),
                            None => e.to_string(),
                        }
                    };
                    w.refused.push(Refused { path, reason });
                }
            }
        }
    } else {
        file(p, filters, w);
    }
}

fn file(path: &Path, filters: &Filters, w: &mut Walk) {
    if !filters.wants(path) {
        return;
    }
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let lower = name.to_ascii_lowercase();
    let is_zip = lower.ends_with(".zip");
    if !is_zip && crate::parse::Format::for_filename(&name).is_err() {
        w.unsupported += 1;
        return;
    }
    // A FIFO, socket or device of a document's name: reading it would block or never end.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        w.refused.push(Refused {
            path: path.to_owned(),
            reason: "not a regular file (a pipe, socket or device)".into(),
        });
        return;
    }
    w.files.push(Found {
        path: path.to_owned(),
        name,
        is_zip,
    });
}

/// Why a path cannot be read, in words.
pub fn not_readable(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist (or vanished during the walk)".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied (unreadable)".into(),
        _ => format!("cannot be read: {e}"),
    }
}
