//! `/query`: retrieve, format the context, answer. With an LLM the answer is generated
//! from the passages that fit its window (see `answer`); with none it is extractive: the
//! passages' sentences closest to the question (by the embedder), each cited with its
//! source number. `answer_mode` says which.

use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use tokio::sync::mpsc;

use super::answer::GenerateAnswer;
use super::search::{searchable, Retrieved, SearchParams};
use super::{KnowledgeBase, SearchHit};
use crate::error::Result;

/// Validated `/query` parameters.
#[derive(Debug, Clone)]
pub struct QueryParams {
    pub question: String,
    pub top_k: usize,
    pub initial_k: usize,
    pub include_timing: bool,
    pub include_context: bool,
    pub temperature: Option<f64>,
}

/// A source of the answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuerySource {
    pub title: String,
    pub source: String,
    pub section: String,
    pub score: f32,
    pub doc_id: String,
}

impl From<&SearchHit> for QuerySource {
    fn from(h: &SearchHit) -> Self {
        Self {
            title: meta(h, "title"),
            source: h.source.clone(),
            section: meta(h, "section"),
            score: h.score,
            doc_id: h.doc_id.clone(),
        }
    }
}

/// Seconds spent in each step, measured.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Timing {
    pub embedding: f64,
    pub vector_search: f64,
    /// 0 when no reranker is loaded.
    pub reranking: f64,
    /// Embedding plus search plus reranking.
    pub retrieval_total: f64,
    pub context_formatting: f64,
    /// Producing the answer (the extractive selection when no LLM is loaded).
    pub llm_generation: f64,
    pub total: f64,
}

/// The answer to `/query`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueryResponse {
    pub question: String,
    pub answer: String,
    pub sources: Vec<QuerySource>,
    pub timing: Option<Timing>,
    pub context_used: Option<String>,
    /// `extractive` (no LLM: the passages' best sentences) or `generative`.
    pub answer_mode: String,
}

/// Most sentences an extractive answer quotes.
const ANSWER_SENTENCES: usize = 3;
/// Most sentences considered (from the best passages first).
const MAX_CANDIDATES: usize = 80;

fn meta(h: &SearchHit, key: &str) -> String {
    h.metadata
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The numbered context the answer is drawn from.
pub fn format_context(hits: &[SearchHit]) -> String {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let heading = meta(h, "heading");
            let title = meta(h, "title");
            let label = if heading.is_empty() || heading == title {
                title
            } else {
                format!("{title} — {heading}")
            };
            format!("[{}] {} ({})\n{}", i + 1, label, h.source, h.text.trim())
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Sentences of a passage of at least three words (line breaks end sentences too).
fn sentences(text: &str) -> Vec<String> {
    text.lines()
        .flat_map(crate::chunk::sentences)
        .filter(|s| s.split_whitespace().count() >= 3)
        .map(str::to_owned)
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl KnowledgeBase {
    /// Answers a question from the knowledge base.
    pub async fn query(&self, p: QueryParams) -> Result<QueryResponse> {
        self.query_streaming(p, None).await
    }

    /// Answers a question, sending each piece of a generated answer to `sink` as it comes
    /// (an extractive answer arrives as one piece). A closed sink stops the generation.
    #[tracing::instrument(skip_all, fields(top_k = p.top_k, initial_k = p.initial_k))]
    pub async fn query_streaming(
        &self,
        p: QueryParams,
        sink: Option<&mpsc::Sender<String>>,
    ) -> Result<QueryResponse> {
        let started = Instant::now();
        let Retrieved {
            hits,
            embedding,
            vector_search,
            reranking,
        } = self
            .retrieve(SearchParams {
                query: p.question.clone(),
                top_k: p.top_k,
                initial_k: p.initial_k,
                mode: Default::default(),
            })
            .await?;
        let generating = Instant::now();
        let generated = self
            .generate_answer(GenerateAnswer {
                question: &p.question,
                hits: &hits,
                temperature: p.temperature,
                sink,
            })
            .await?;
        let (answer, context, context_formatting, llm_generation, mode) = match generated {
            Some(g) => (
                g.generated.text,
                g.context,
                g.formatting,
                generating.elapsed().saturating_sub(g.formatting),
                "generative",
            ),
            None => {
                let formatting = Instant::now();
                let context = format_context(&hits);
                let context_formatting = formatting.elapsed();
                let generating = Instant::now();
                let answer = self.extractive_answer(&p.question, &hits).await?;
                if let Some(sink) = sink {
                    // The whole answer is one piece; a closed sink changes nothing now.
                    let _ = sink.send(answer.clone()).await;
                }
                (
                    answer,
                    context,
                    context_formatting,
                    generating.elapsed(),
                    "extractive",
                )
            }
        };
        let secs = |d: Duration| d.as_secs_f64();
        let timing = Timing {
            embedding: secs(embedding),
            vector_search: secs(vector_search),
            reranking: secs(reranking),
            retrieval_total: secs(embedding + vector_search + reranking),
            context_formatting: secs(context_formatting),
            llm_generation: secs(llm_generation),
            total: secs(started.elapsed()),
        };
        tracing::info!(
            sources = hits.len(),
            total_ms = started.elapsed().as_millis() as u64,
            mode,
            "answered"
        );
        Ok(QueryResponse {
            question: p.question,
            answer,
            sources: hits.iter().map(QuerySource::from).collect(),
            timing: p.include_timing.then_some(timing),
            context_used: p.include_context.then_some(context),
            answer_mode: mode.into(),
        })
    }

    /// The passages' sentences closest to the question, best passages first, each
    /// followed by its source number; in the order they appear in the sources.
    async fn extractive_answer(&self, question: &str, hits: &[SearchHit]) -> Result<String> {
        if hits.is_empty() {
            return Ok(
                "No relevant passages were found in the knowledge base for this question.".into(),
            );
        }
        let mut candidates: Vec<(usize, usize, String)> = Vec::new();
        for (i, h) in hits.iter().enumerate() {
            for (j, s) in sentences(&h.text).into_iter().enumerate() {
                candidates.push((i, j, s));
            }
        }
        candidates.truncate(MAX_CANDIDATES);
        if candidates.is_empty() {
            let first = hits[0].text.trim();
            return Ok(format!(
                "{} [1]",
                first.chars().take(400).collect::<String>()
            ));
        }
        let mut inputs = vec![searchable(question)];
        inputs.extend(candidates.iter().map(|(_, _, s)| searchable(s)));
        // Up to MAX_CANDIDATES sentences per answer: admitted a few at a time, so that the
        // embedder's queue never holds so many that a search's query waits behind them.
        let _turn = self.answer_gate.enter().await?;
        let vectors = self.embedder.embed(inputs).await?;
        let q = &vectors[0];
        let mut scored: Vec<(f32, usize)> = vectors[1..]
            .iter()
            .enumerate()
            .map(|(k, v)| (cosine(q, v), k))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut picked: Vec<usize> = Vec::new();
        for (_, k) in scored {
            let text = &candidates[k].2;
            if picked.iter().any(|&p| candidates[p].2 == *text) {
                continue;
            }
            picked.push(k);
            if picked.len() == ANSWER_SENTENCES {
                break;
            }
        }
        picked.sort_by_key(|&k| (candidates[k].0, candidates[k].1));
        Ok(picked
            .iter()
            .map(|&k| format!("{} [{}]", candidates[k].2, candidates[k].0 + 1))
            .collect::<Vec<_>>()
            .join(" "))
    }
}
