//! `/query`: retrieve, weigh the evidence, answer. With an LLM the answer is generated
//! from the passages that fit its window and checked sentence by sentence (see `answer`
//! and `grounding`); with none it is extractive: the passages' sentences closest to the
//! question (by the embedder), each cited with its source number. Either way, passages
//! too far from the question give "the sources do not say" rather than an answer.
//! `answer_mode` says where the answer's text comes from (`generative`, `mixed` or
//! `extractive`); `grounding` what was checked, with the counts.

use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use tokio::sync::mpsc;

use super::answer::{extractive_sentences, outcome, AnswerPiece, GenerateAnswer, Origin};
use super::grounding::{not_in_sources_reply, Evidence, Grounding};
use super::search::{Retrieved, SearchParams};
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
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
pub struct QuerySource {
    pub title: String,
    pub source: String,
    pub section: String,
    /// Relevance to the question in [0, 1] (see [`SearchHit::score`]).
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
    /// Where the answer's text comes from: `generative` (only the LLM's checked
    /// sentences), `mixed` (sentences quoted from the passages, then the LLM's checked
    /// ones), or `extractive` (no sentence of the LLM: the passages' best sentences, or
    /// the statement that they do not hold the answer). `grounding` has the counts.
    pub answer_mode: String,
    /// What was checked of the answer against the sources (not in the contract): whether
    /// the passages hold an answer, and each generated sentence's support.
    pub grounding: Grounding,
}

/// Most sentences an extractive answer quotes...
const ANSWER_SENTENCES: usize = 3;
/// ...each within this cosine of the best one.
const ANSWER_MARGIN: f32 = 0.2;

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

impl KnowledgeBase {
    /// Answers a question from the knowledge base.
    pub async fn query(&self, p: QueryParams) -> Result<QueryResponse> {
        self.query_streaming(p, None).await
    }

    /// Answers a question, sending each piece of the answer to `sink` as it is ready:
    /// sentences quoted from strong passages at once, then each checked sentence of the
    /// LLM (see [`super::answer`]); without an LLM the extractive answer is one piece. A
    /// closed sink stops the generation.
    #[tracing::instrument(skip_all, fields(top_k = p.top_k, initial_k = p.initial_k))]
    pub async fn query_streaming(
        &self,
        p: QueryParams,
        sink: Option<&mpsc::Sender<AnswerPiece>>,
    ) -> Result<QueryResponse> {
        let started = Instant::now();
        // A long message is answered by its question part (see `super::question`).
        let asked = super::question::question_part(&p.question).into_owned();
        if asked.len() != p.question.len() {
            tracing::info!(
                chars = p.question.chars().count(),
                question = %asked,
                "long question reduced to its question part"
            );
        }
        let Retrieved {
            hits,
            embedding,
            vector_search,
            reranking,
        } = self
            .retrieve(SearchParams {
                query: asked.clone(),
                top_k: p.top_k,
                initial_k: p.initial_k,
                mode: Default::default(),
            })
            .await?;
        let checking = Instant::now();
        let evidence = if hits.is_empty() {
            Evidence::empty()
        } else {
            self.evidence(&asked, &hits).await?
        };
        let checking = checking.elapsed();
        let generating = Instant::now();
        let generated = self
            .generate_answer(GenerateAnswer {
                question: &asked,
                hits: &hits,
                evidence: &evidence,
                temperature: p.temperature,
                sink,
            })
            .await?;
        let (answer, context, context_formatting, llm_generation, grounding) = match generated {
            Some(g) => (
                g.answer,
                g.context,
                checking + g.formatting,
                generating.elapsed().saturating_sub(g.formatting),
                g.grounding,
            ),
            None => {
                let formatting = Instant::now();
                let context = format_context(&hits);
                let context_formatting = checking + formatting.elapsed();
                let generating = Instant::now();
                let (answer, grounding) = extractive(&asked, &evidence);
                if let Some(sink) = sink {
                    // The whole answer is one piece; a closed sink changes nothing now.
                    let origin = if grounding.extractive_sentences > 0 {
                        Origin::Extractive
                    } else {
                        Origin::NotInSources
                    };
                    let piece = AnswerPiece {
                        text: answer.clone(),
                        origin,
                    };
                    let _ = sink.send(piece).await;
                }
                (
                    answer,
                    context,
                    context_formatting,
                    generating.elapsed(),
                    grounding,
                )
            }
        };
        let mode = grounding.answer_mode();
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
            outcome = %grounding.outcome,
            relevance = evidence.relevance,
            coverage = evidence.coverage,
            "answered"
        );
        Ok(QueryResponse {
            question: p.question,
            answer,
            sources: hits.iter().map(QuerySource::from).collect(),
            timing: p.include_timing.then_some(timing),
            context_used: p.include_context.then_some(context),
            answer_mode: mode.into(),
            grounding,
        })
    }
}

/// No LLM: the passages' sentences closest to the question, each cited with its source
/// number, in the order they appear in the sources; or, when the passages are too far
/// from the question, a statement that the sources do not say.
fn extractive(question: &str, evidence: &Evidence) -> (String, Grounding) {
    if !evidence.answerable() {
        return (
            not_in_sources_reply(question),
            outcome(evidence, Vec::new(), "not_in_sources"),
        );
    }
    let (answer, n) = extractive_sentences(evidence, ANSWER_SENTENCES, ANSWER_MARGIN);
    (
        answer,
        outcome(evidence, Vec::new(), "extractive").shown(0, n),
    )
}
