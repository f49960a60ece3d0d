//! What a GGUF file holds, read from its header alone (no weights): architecture,
//! parameter count, quantization, context window, size, and whether ragd can run it.
//!
//! "Runnable" is decided by the checks the loader itself makes, called here in the same
//! order: the architecture ([`Arch`]), the shape read from the metadata
//! ([`cpu::config::Config::from_metadata`]), the kernels' type of every tensor
//! ([`crate::ml::quant::gguf::tensor_type`]) and the tokenizer. A family or tensor type added to
//! those is listed as runnable with no change here.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use serde::Serialize;

use super::cpu::config::Config;
use super::model::{md_str, md_u64, Arch};
use super::tokenizer::LlmTokenizer;
use super::MlError;
use crate::ml::quant::gguf;

/// One GGUF file as `ragd models list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct GgufSummary {
    /// The file.
    pub path: PathBuf,
    /// The file's name.
    pub file: String,
    /// `general.name`, when the file has one.
    pub name: Option<String>,
    /// `general.architecture` (empty for a file that is not a readable GGUF).
    pub architecture: String,
    /// Weights, counted from the tensors' shapes.
    pub parameters: u64,
    /// The quantization as llama.cpp names the file type (`Q4_K_M`), from
    /// `general.file_type`, else the type most of the weights have.
    pub quantization: String,
    /// `<arch>.context_length`, when present.
    pub context_length: Option<u64>,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// Whether ragd's engine can load it.
    pub runnable: bool,
    /// Why not, when it cannot.
    pub reason: Option<String>,
}

/// Reads the header of the GGUF at `path` and says what it is and whether ragd runs it.
/// Only a file that cannot be opened at all is an error; an unreadable or unsupported
/// GGUF is a summary with `runnable: false` and the reason.
pub fn inspect(path: &Path) -> Result<GgufSummary, MlError> {
    let size_bytes = std::fs::metadata(path)
        .map_err(|e| MlError::Load(format!("cannot read {}: {e}", path.display())))?
        .len();
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut summary = GgufSummary {
        path: path.to_path_buf(),
        file,
        name: None,
        architecture: String::new(),
        parameters: 0,
        quantization: String::new(),
        context_length: None,
        size_bytes,
        runnable: false,
        reason: None,
    };
    let mut reader = BufReader::new(
        File::open(path)
            .map_err(|e| MlError::Load(format!("cannot open {}: {e}", path.display())))?,
    );
    let content = match gguf::read_content(&mut reader) {
        Ok(c) => c,
        Err(e) => {
            // candle's message may carry a backtrace after its first line.
            let e = e.to_string();
            let first = e.lines().next().unwrap_or_default();
            summary.reason = Some(format!("not a readable GGUF: {first}"));
            return Ok(summary);
        }
    };
    let md = &content.metadata;
    summary.name = md_str(md, "general.name").map(str::to_owned);
    summary.architecture = md_str(md, "general.architecture")
        .unwrap_or_default()
        .to_owned();
    summary.context_length = md_u64(md, &format!("{}.context_length", summary.architecture));
    summary.parameters = content
        .tensor_infos
        .values()
        .map(|t| t.shape.elem_count() as u64)
        .sum();
    summary.quantization = quantization(&content);
    summary.reason = runnable(path, &content)
        .err()
        .map(|e| super::slot::load_reason(&e));
    summary.runnable = summary.reason.is_none();
    Ok(summary)
}

/// One file of [`installed`]: its summary, its `llm_model` name and whether it runs now.
#[derive(Debug, Clone, Serialize)]
pub struct InstalledModel {
    /// The path relative to the models folder: the value of the `llm_model` setting.
    pub llm_model: String,
    /// Whether it is the LLM in use.
    pub active: bool,
    /// What the header says.
    #[serde(flatten)]
    pub summary: GgufSummary,
}

/// Every GGUF under `models_dir`, inspected, with `active` marking the file in use. A
/// file that cannot even be opened is logged and left out.
pub fn installed(models_dir: &Path, active: Option<&Path>) -> Vec<InstalledModel> {
    // Absolute but not resolved: two links to one file are two choices.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let active = active.map(absolute);
    find_ggufs(models_dir)
        .into_iter()
        .filter_map(|p| match inspect(&p) {
            Ok(summary) => {
                let here = absolute(&p);
                Some(InstalledModel {
                    llm_model: p
                        .strip_prefix(models_dir)
                        .unwrap_or(&p)
                        .display()
                        .to_string(),
                    active: active.as_ref().is_some_and(|a| *a == here),
                    summary,
                })
            }
            Err(e) => {
                tracing::warn!(file = %p.display(), error = %e, "cannot inspect a GGUF");
                None
            }
        })
        .collect()
}

/// Every `*.gguf` under `dir` (and its subfolders, links followed), sorted by path.
/// A missing folder has none.
pub fn find_ggufs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    // Depth and count limits keep a link loop from running forever.
    let mut visited = 0usize;
    while let Some(d) = stack.pop() {
        visited += 1;
        if visited > 10_000 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                if p.components().count() < dir.components().count() + 6 {
                    stack.push(p);
                }
            } else if p
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
                && p.is_file()
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// The loader's checks, minus reading the weights.
fn runnable(path: &Path, content: &Content) -> Result<(), MlError> {
    let md = &content.metadata;
    let arch_name = md_str(md, "general.architecture")
        .ok_or_else(|| MlError::Load("the file has no general.architecture".into()))?;
    let arch = Arch::parse(arch_name).ok_or_else(|| {
        MlError::Load(format!(
            "architecture {arch_name:?} is not supported by ragd's engine"
        ))
    })?;
    Config::from_metadata(arch, md)?;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let info = &content.tensor_infos[name];
        if gguf::tensor_type(content, name, info.ggml_dtype).is_none() {
            return Err(MlError::Load(format!(
                "tensor {name} has type {}, which ragd cannot run",
                gguf::type_name(content, name, info.ggml_dtype)
            )));
        }
    }
    if !content.tensor_infos.contains_key("token_embd.weight") {
        return Err(MlError::Load("the file has no token_embd.weight".into()));
    }
    LlmTokenizer::load(path, md, arch)?;
    Ok(())
}

/// llama.cpp's name of the file type, else the type of most weights.
fn quantization(content: &Content) -> String {
    if let Some(name) = md_u64(&content.metadata, "general.file_type").and_then(file_type_name) {
        return name.to_owned();
    }
    let mut counts: Vec<(String, u64)> = Vec::new();
    for (tensor, t) in &content.tensor_infos {
        let name = gguf::type_name(content, tensor, t.ggml_dtype);
        let n = t.shape.elem_count() as u64;
        match counts.iter_mut().find(|(k, _)| *k == name) {
            Some((_, c)) => *c += n,
            None => counts.push((name, n)),
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(k, _)| k)
        .unwrap_or_default()
}

/// llama.cpp's `llama_ftype` names (`llama.h`), for `general.file_type`.
fn file_type_name(v: u64) -> Option<&'static str> {
    Some(match v {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_types_as_llama_cpp_does() {
        use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};
        use candle_core::quantized::GgmlDType;
        let mut content = Content {
            magic: VersionedMagic::GgufV3,
            metadata: Default::default(),
            tensor_infos: Default::default(),
            tensor_data_offset: 0,
        };
        content
            .metadata
            .insert(format!("{}a", gguf::TYPE_KEY), Value::U32(16));
        assert_eq!(gguf::type_name(&content, "b", GgmlDType::Q4K), "Q4_K");
        assert_eq!(gguf::type_name(&content, "b", GgmlDType::Q8_0), "Q8_0");
        assert_eq!(gguf::type_name(&content, "b", GgmlDType::BF16), "BF16");
        assert_eq!(gguf::type_name(&content, "a", gguf::STAND_IN), "IQ2_XXS");
        assert_eq!(file_type_name(15), Some("Q4_K_M"));
        assert_eq!(file_type_name(99), None);
    }

    #[test]
    fn tiny_files_are_runnable_or_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("a.gguf");
        super::super::tiny::write_tiny_gguf(&ok, Arch::Llama).unwrap();
        let s = inspect(&ok).unwrap();
        assert!(s.runnable, "{s:?}");
        assert_eq!(s.architecture, "llama");
        assert!(s.parameters > 0);
        let junk = dir.path().join("sub/b.gguf");
        std::fs::create_dir_all(junk.parent().unwrap()).unwrap();
        std::fs::write(&junk, b"not a gguf").unwrap();
        let s = inspect(&junk).unwrap();
        assert!(!s.runnable);
        assert!(s.reason.unwrap().contains("not a readable GGUF"));
        assert_eq!(find_ggufs(dir.path()), vec![ok, junk]);
    }
}
