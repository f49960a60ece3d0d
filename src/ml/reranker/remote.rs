//! The reranker on an inference server: the `POST /v1/rerank` shape that llama.cpp's
//! server, Jina and Cohere share (`query`, `documents`; `results[].relevance_score`), or
//! text-embeddings-inference's `POST /rerank` (`query`, `texts`; `[{index, score}]`).
//!
//! Scores are reported 0-1 like the local cross-encoder's: servers that return
//! probabilities (TEI, Jina, Cohere) are passed through; an answer with any score
//! outside [0, 1] is taken as logits (llama.cpp's server) and put through the sigmoid,
//! all of it, so the order within an answer is kept. Passages are cut to
//! `MAX_PASSAGE_CHARS` first, as the local model cuts pairs at 512 tokens.

use std::time::Duration;

use serde_json::{json, Value};

use super::Reranker;
use crate::config::RerankApi;
use crate::ml::remote::{Remote, RemoteOptions};
use crate::ml::MlError;

/// Longest passage sent, in characters (~512 tokens of English).
const MAX_PASSAGE_CHARS: usize = 2048;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct RemoteRerankerOptions {
    /// Base URL.
    pub url: String,
    /// `/v1/rerank` or `/rerank`.
    pub api: RerankApi,
    /// Bearer key.
    pub api_key: Option<String>,
    /// Model name sent with `/v1/rerank` (empty: none is sent).
    pub model: String,
    /// Longest a request may take.
    pub timeout: Duration,
}

/// A reranker behind an inference server.
pub struct RemoteReranker {
    remote: Remote,
    api: RerankApi,
    model: String,
}

impl RemoteReranker {
    /// A client for the server; nothing is sent until the first search.
    pub fn new(opts: RemoteRerankerOptions) -> Result<Self, MlError> {
        let remote = Remote::new(RemoteOptions {
            component: "reranker",
            url: opts.url,
            api_key: opts.api_key,
            timeout: opts.timeout,
            retries: 2,
        })?;
        tracing::info!(url = %remote.base(), api = ?opts.api, model = %opts.model, "remote reranker");
        Ok(Self {
            remote,
            api: opts.api,
            model: opts.model,
        })
    }

    /// A name for stats and health: the model (if named) and the server.
    pub fn name(&self) -> String {
        if self.model.is_empty() {
            format!("reranker at {}", self.remote.base())
        } else {
            format!("{} at {}", self.model, self.remote.base())
        }
    }

    fn malformed(&self, what: &str) -> MlError {
        self.remote
            .fail(&format!("malformed answer: {what}"), false)
    }
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_PASSAGE_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// `(index, score)` pairs of an answer, whichever shape it has.
fn pairs(v: &Value, api: RerankApi) -> Option<Vec<(usize, f64)>> {
    let (list, key) = match api {
        RerankApi::Jina => (v.get("results")?.as_array()?, "relevance_score"),
        RerankApi::Tei => (v.as_array()?, "score"),
    };
    list.iter()
        .map(|r| {
            Some((
                r.get("index")?.as_u64()? as usize,
                r.get(key)?.as_f64().filter(|s| s.is_finite())?,
            ))
        })
        .collect()
}

/// Scores in input order, 0-1 (see the module doc).
fn in_order(pairs: &[(usize, f64)], n: usize) -> Option<Vec<f32>> {
    let logits = pairs.iter().any(|&(_, s)| !(0.0..=1.0).contains(&s));
    let mut out = vec![None; n];
    for &(i, s) in pairs {
        let s = if logits { 1.0 / (1.0 + (-s).exp()) } else { s };
        *out.get_mut(i)? = Some(s as f32);
    }
    out.into_iter().collect()
}

impl Reranker for RemoteReranker {
    fn score(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, MlError> {
        if passages.is_empty() {
            return Ok(Vec::new());
        }
        let texts: Vec<&str> = passages.iter().map(|p| cut(p)).collect();
        let answer = match self.api {
            RerankApi::Jina => {
                let mut body = json!({"query": query, "documents": texts, "top_n": texts.len()});
                if !self.model.is_empty() {
                    body["model"] = json!(self.model);
                }
                self.remote.post_json("/v1/rerank", &body)?
            }
            RerankApi::Tei => self.remote.post_json(
                "/rerank",
                &json!({"query": query, "texts": texts, "truncate": true, "raw_scores": false}),
            )?,
        };
        let pairs = pairs(&answer, self.api)
            .ok_or_else(|| self.malformed("no list of scores with their indexes"))?;
        in_order(&pairs, passages.len())
            .ok_or_else(|| self.malformed("scores missing or out of range of the passages"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_give_scores_in_input_order() {
        let jina = json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]});
        let p = pairs(&jina, RerankApi::Jina).unwrap();
        assert_eq!(in_order(&p, 2).unwrap(), vec![0.2, 0.9]);
        let tei = json!([{"index": 0, "score": 0.7}, {"index": 1, "score": 0.1}]);
        let p = pairs(&tei, RerankApi::Tei).unwrap();
        assert_eq!(in_order(&p, 2).unwrap(), vec![0.7, 0.1]);
    }

    #[test]
    fn logits_are_squashed_and_keep_their_order() {
        let p = vec![(0, -3.0), (1, 0.5), (2, 4.0)];
        let s = in_order(&p, 3).unwrap();
        assert!(s[0] < s[1] && s[1] < s[2]);
        assert!(s.iter().all(|x| (0.0..=1.0).contains(x)));
    }

    #[test]
    fn a_missing_or_stray_index_is_malformed() {
        assert!(in_order(&[(0, 0.5)], 2).is_none());
        assert!(in_order(&[(0, 0.5), (5, 0.5)], 2).is_none());
        assert!(pairs(&json!({"results": [{"index": 0}]}), RerankApi::Jina).is_none());
    }
}
