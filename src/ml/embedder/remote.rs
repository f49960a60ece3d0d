//! The embedder on an inference server: OpenAI's `POST /v1/embeddings` (llama.cpp's
//! server, vLLM, Ollama, text-embeddings-inference) or text-embeddings-inference's own
//! `POST /embed`. Batching stays ragd's ([`EmbedHandle`](crate::ml::EmbedHandle) packs
//! passes by token budget); each pass is split into requests of at most
//! `max_batch_texts` texts, a bounded number of them in flight at once.
//!
//! Chunking and batching need token counts, so the model's `tokenizer.json` stays local
//! (only the vocabulary: a folder with `tokenizer.json`, and optionally
//! `sentence_bert_config.json` for the window). The server is sent text: the ids are
//! decoded back, which for WordPiece models tokenizes to the same ids. Vectors are
//! L2-normalised here whatever the server does.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::TokenCounter;
use crate::config::EmbedApi;
use crate::ml::remote::{Remote, RemoteOptions};
use crate::ml::{Embedder, MlError};

/// Most texts in one request.
const REQUEST_TEXTS: usize = 32;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct RemoteEmbedderOptions {
    /// Base URL.
    pub url: String,
    /// `/v1/embeddings` or `/embed`.
    pub api: EmbedApi,
    /// Bearer key.
    pub api_key: Option<String>,
    /// Model name sent with OpenAI-style requests (empty: none is sent).
    pub model: String,
    /// Folder with the model's `tokenizer.json`.
    pub tokenizer_dir: std::path::PathBuf,
    /// Longest a request may take.
    pub timeout: Duration,
    /// Requests in flight at once.
    pub parallel: usize,
}

/// An embedder behind an inference server.
pub struct RemoteEmbedder {
    remote: Remote,
    api: EmbedApi,
    model: String,
    counter: TokenCounter,
    max_tokens: usize,
    dim: usize,
    name: String,
    parallel: usize,
}

impl RemoteEmbedder {
    /// Loads the tokenizer and asks the server for one vector to learn the dimension;
    /// a server that does not answer (after retries) is a start-up error.
    pub fn connect(opts: RemoteEmbedderOptions) -> Result<Self, MlError> {
        let (counter, max_tokens) = TokenCounter::load(&opts.tokenizer_dir).map_err(|e| {
            MlError::Load(format!(
                "the remote embedder needs the model's tokenizer.json locally: {e}"
            ))
        })?;
        let remote = Remote::new(RemoteOptions {
            component: "embedder",
            url: opts.url.clone(),
            api_key: opts.api_key.clone(),
            timeout: opts.timeout,
            retries: 3,
        })?;
        let name = if opts.model.is_empty() {
            folder_name(&opts.tokenizer_dir)
        } else {
            opts.model.clone()
        };
        let mut embedder = Self {
            remote,
            api: opts.api,
            model: opts.model,
            counter,
            max_tokens,
            dim: 0,
            name,
            parallel: opts.parallel.max(1),
        };
        let probe = embedder.request(&["dimension probe".to_owned()])?;
        embedder.dim = probe.first().map_or(0, Vec::len);
        if embedder.dim == 0 {
            return Err(MlError::Load(
                embedder.remote.describe("answered an empty vector"),
            ));
        }
        tracing::info!(url = %embedder.remote.base(), api = ?embedder.api, model = %embedder.name, dim = embedder.dim, max_tokens, "remote embedder");
        Ok(embedder)
    }

    /// One request: the vectors of `texts`, normalised, in order.
    fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, MlError> {
        let vectors = match self.api {
            EmbedApi::Openai => {
                let mut body = json!({"input": texts, "encoding_format": "float"});
                if !self.model.is_empty() {
                    body["model"] = json!(self.model);
                }
                let v = self.remote.post_json("/v1/embeddings", &body)?;
                let data = v
                    .get("data")
                    .and_then(Value::as_array)
                    .ok_or_else(|| self.malformed("/v1/embeddings answered without `data`"))?;
                let mut out = vec![None; texts.len()];
                for (n, item) in data.iter().enumerate() {
                    let i = item
                        .get("index")
                        .and_then(Value::as_u64)
                        .map_or(n, |i| i as usize);
                    let vector = item.get("embedding").and_then(floats);
                    match (out.get_mut(i), vector) {
                        (Some(slot), Some(v)) => *slot = Some(v),
                        _ => return Err(self.malformed("an embedding is missing or malformed")),
                    }
                }
                out.into_iter()
                    .map(|v| v.ok_or_else(|| self.malformed("fewer embeddings than inputs")))
                    .collect::<Result<Vec<_>, _>>()?
            }
            EmbedApi::Tei => {
                let body = json!({"inputs": texts, "normalize": true, "truncate": true});
                let v = self.remote.post_json("/embed", &body)?;
                let rows = v
                    .as_array()
                    .ok_or_else(|| self.malformed("/embed answered without a list"))?;
                rows.iter()
                    .map(|r| floats(r).ok_or_else(|| self.malformed("an embedding is malformed")))
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        if vectors.len() != texts.len() {
            return Err(self.malformed("a different number of embeddings than inputs"));
        }
        let dim = vectors.first().map_or(0, Vec::len);
        if vectors.iter().any(|v| v.len() != dim) || (self.dim != 0 && dim != self.dim) {
            return Err(self.malformed(&format!(
                "vectors of {dim} dimensions; the embedder's are {}",
                self.dim
            )));
        }
        Ok(vectors.into_iter().map(normalized).collect())
    }

    fn malformed(&self, what: &str) -> MlError {
        self.remote
            .fail(&format!("malformed answer: {what}"), false)
    }
}

fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "remote".into())
}

fn floats(v: &Value) -> Option<Vec<f32>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_f64().map(|f| f as f32))
        .collect()
}

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

impl Embedder for RemoteEmbedder {
    fn embed_tokens(
        &self,
        seqs: &[&[u32]],
        _pause: &mut dyn FnMut(),
    ) -> Result<Vec<Vec<f32>>, MlError> {
        let texts: Vec<String> = seqs
            .iter()
            .map(|ids| self.counter.decode(ids))
            .collect::<Result<_, _>>()?;
        let groups: Vec<&[String]> = texts.chunks(REQUEST_TEXTS).collect();
        if groups.len() <= 1 || self.parallel == 1 {
            let mut out = Vec::with_capacity(texts.len());
            for g in groups {
                out.extend(self.request(g)?);
            }
            return Ok(out);
        }
        // Several requests at once, at most `parallel` in flight, results in order.
        let mut out = Vec::with_capacity(texts.len());
        for wave in groups.chunks(self.parallel) {
            let results: Vec<Result<Vec<Vec<f32>>, MlError>> = std::thread::scope(|s| {
                let handles: Vec<_> = wave
                    .iter()
                    .map(|g| s.spawn(move || self.request(g)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(MlError::Inference("an embedding request panicked".into()))
                        })
                    })
                    .collect()
            });
            for r in results {
                out.extend(r?);
            }
        }
        Ok(out)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    fn token_counter(&self) -> TokenCounter {
        self.counter.clone()
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn served_by(&self) -> Option<String> {
        Some(self.remote.base().to_owned())
    }
}
