//! `ragd models pull`: copies a model from the Hugging Face Hub into `models/` on a
//! connected machine that prepares an offline install. Nothing else in ragd reaches the
//! network for models; the server only ever reads `models/`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Repo, RepoType};

/// What to fetch and where to put it.
#[derive(Debug, Clone)]
pub struct PullRequest {
    /// `owner/name` on the Hub.
    pub repo: String,
    /// Branch, tag or commit.
    pub revision: String,
    /// Files to fetch (exact names in the repo); empty picks the files ragd reads.
    pub files: Vec<String>,
    /// Folder the files are copied into (created if needed).
    pub dest: PathBuf,
    /// Hub token for gated repos (`HF_TOKEN`).
    pub token: Option<String>,
}

/// Files ragd reads from a sentence-embedding, cross-encoder or tokenizer folder.
const MODEL_FILES: &[&str] = &[
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "model.safetensors",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
];

/// The files to fetch from a repo holding `available`: the requested ones (each must
/// exist), else the model files ragd reads; a repo of GGUF files needs an explicit choice
/// because each file is a whole model at one quantization.
pub fn select_files(available: &[String], requested: &[String]) -> anyhow::Result<Vec<String>> {
    if !requested.is_empty() {
        for f in requested {
            if !available.contains(f) {
                bail!("the repo has no file {f:?}");
            }
        }
        let mut files = requested.to_vec();
        // A GGUF works best with the tokenizer.json beside it when the repo has one.
        if requested.iter().any(|f| f.ends_with(".gguf"))
            && available.iter().any(|f| f == "tokenizer.json")
            && !files.iter().any(|f| f == "tokenizer.json")
        {
            files.push("tokenizer.json".into());
        }
        return Ok(files);
    }
    let ggufs: Vec<&String> = available.iter().filter(|f| f.ends_with(".gguf")).collect();
    let picked: Vec<String> = MODEL_FILES
        .iter()
        .filter(|f| available.iter().any(|a| a == *f))
        .map(|f| f.to_string())
        .collect();
    if !picked.iter().any(|f| f == "model.safetensors") {
        if !ggufs.is_empty() {
            bail!(
                "the repo holds GGUF files; choose one with --file: {}",
                ggufs
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        bail!("the repo has no model.safetensors or GGUF file that ragd can load");
    }
    Ok(picked)
}

/// Fetches the files of `req` (through the Hub's cache) and copies them into `req.dest`.
/// Returns the paths written.
pub fn pull(req: &PullRequest, progress: bool) -> anyhow::Result<Vec<PathBuf>> {
    let cache = req.dest.join(".hf-cache");
    let api = ApiBuilder::new()
        .with_progress(progress)
        .with_cache_dir(cache.clone())
        .with_token(req.token.clone())
        .build()
        .context("setting up the Hub client")?;
    let repo = api.repo(Repo::with_revision(
        req.repo.clone(),
        RepoType::Model,
        req.revision.clone(),
    ));
    let info = repo
        .info()
        .with_context(|| format!("reading {} at {} from the Hub", req.repo, req.revision))?;
    let available: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
    let files = select_files(&available, &req.files)?;
    std::fs::create_dir_all(&req.dest)
        .with_context(|| format!("creating {}", req.dest.display()))?;
    let mut written = Vec::new();
    for f in &files {
        let cached = repo
            .get(f)
            .with_context(|| format!("downloading {f} from {}", req.repo))?;
        let target = req.dest.join(f);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        copy_atomically(&cached, &target)?;
        tracing::info!(repo = %req.repo, file = %f, to = %target.display(), "pulled");
        written.push(target);
    }
    std::fs::remove_dir_all(&cache).ok();
    Ok(written)
}

/// Copies through a temporary name so a half-written model is never left in `models/`.
fn copy_atomically(from: &Path, to: &Path) -> anyhow::Result<()> {
    let tmp = to.with_extension("part");
    std::fs::copy(from, &tmp)
        .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
    std::fs::rename(&tmp, to).with_context(|| format!("renaming into {}", to.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn picks_the_files_ragd_reads() {
        let avail = names(&[
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "pytorch_model.bin",
            "onnx/model.onnx",
            "README.md",
        ]);
        assert_eq!(
            select_files(&avail, &[]).unwrap(),
            names(&["config.json", "tokenizer.json", "model.safetensors"])
        );
    }

    #[test]
    fn gguf_repos_need_a_choice_and_bring_their_tokenizer() {
        let avail = names(&["a-q4_0.gguf", "a-q8_0.gguf", "tokenizer.json"]);
        let err = select_files(&avail, &[]).unwrap_err().to_string();
        assert!(
            err.contains("a-q4_0.gguf") && err.contains("--file"),
            "{err}"
        );
        assert_eq!(
            select_files(&avail, &names(&["a-q8_0.gguf"])).unwrap(),
            names(&["a-q8_0.gguf", "tokenizer.json"])
        );
        let err = select_files(&avail, &names(&["missing.gguf"])).unwrap_err();
        assert!(err.to_string().contains("missing.gguf"));
    }
}
