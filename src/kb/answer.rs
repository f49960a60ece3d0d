//! Generative answers: the retrieved passages fitted to the LLM's window, a prompt that
//! makes the model answer from them and cite them by number (the fixed instructions
//! first, so the LLM's prompt cache keeps them; then the sources and the question), and
//! the generation itself, checked sentence by sentence against the passages
//! ([`super::grounding`]) and streamed to an optional sink as each sentence passes.

use tokio::sync::mpsc;

use super::grounding::{self, Evidence, Grounding, SentenceCheck};
use super::query::format_context;
use super::{KnowledgeBase, SearchHit};
use crate::error::{Error, Result};
use crate::ml::llm::{
    ChatMessage, GenerateRequest, Generated, Generation, Generator, Prompt, Role,
};
use crate::ml::MlError;

/// The instructions every generative answer is given.
pub const SYSTEM_PROMPT: &str = "You answer questions using only the numbered sources \
the user gives you. Cite the sources you use with their numbers in square brackets, \
like [1] or [2][3], right after the statement they support. If the sources do not hold \
the answer, say that the knowledge base does not contain it. Answer in the language of \
the question, briefly and precisely.";

/// Tokens kept free beside the prompt's own count (template tokens counted apart).
const SAFETY_TOKENS: usize = 16;
/// A passage is cut rather than dropped when at least this many tokens still fit.
const MIN_PARTIAL_TOKENS: usize = 48;

/// A prompt with the passages that fit in it.
#[derive(Debug, Clone)]
pub struct FittedPrompt {
    /// What the model continues.
    pub prompt: Prompt,
    /// The numbered context as the model sees it.
    pub context: String,
    /// Passages used (whole or cut), a prefix of the retrieved ones.
    pub passages_used: usize,
    /// Most tokens the answer may have.
    pub max_tokens: usize,
}

fn user_message(question: &str, context: &str) -> String {
    if context.is_empty() {
        format!("Sources: none were found.\n\nQuestion: {question}")
    } else {
        format!("Sources:\n\n{context}\n\nQuestion: {question}")
    }
}

fn chat(question: &str, context: &str) -> Prompt {
    Prompt::Chat(vec![
        ChatMessage::new(Role::System, SYSTEM_PROMPT),
        ChatMessage::new(Role::User, user_message(question, context)),
    ])
}

/// Fits as many passages (best first) as the window holds beside the question, the
/// instructions and `max_tokens` of answer; the last one that does not fit whole is cut
/// at a token boundary when enough room is left. The answer's room shrinks to half the
/// window when the question alone would not leave it.
pub fn fit_prompt(
    llm: &dyn Generator,
    question: &str,
    hits: &[SearchHit],
    max_tokens: usize,
) -> Result<FittedPrompt> {
    let window = llm.info().context_length;
    let overhead = llm.count_prompt_tokens(&chat(question, ""))? + SAFETY_TOKENS;
    if overhead >= window {
        return Err(Error::bad_request(format!(
            "the question is {overhead} tokens with the instructions; the model's window is {window}"
        )));
    }
    let max_tokens = max_tokens.min((window - overhead) / 2).max(1);
    let mut budget = window - overhead - max_tokens;
    let mut used: Vec<SearchHit> = Vec::new();
    for hit in hits {
        // The passage as it appears in the context, with its number and label.
        let numbered = format_context(std::slice::from_ref(hit));
        let cost = llm.count_tokens(&numbered) + 2;
        if cost <= budget {
            budget -= cost;
            used.push(hit.clone());
            continue;
        }
        if budget >= MIN_PARTIAL_TOKENS {
            let label_cost = cost.saturating_sub(llm.count_tokens(&hit.text));
            let keep = budget.saturating_sub(label_cost + 2);
            if keep >= MIN_PARTIAL_TOKENS / 2 {
                let mut cut = hit.clone();
                cut.text = truncate_tokens(llm, &hit.text, keep);
                used.push(cut);
            }
        }
        break;
    }
    let context = format_context(&used);
    Ok(FittedPrompt {
        prompt: chat(question, &context),
        context,
        passages_used: used.len(),
        max_tokens,
    })
}

/// The longest prefix of `text` (cut at a word boundary) of at most `tokens` tokens.
fn truncate_tokens(llm: &dyn Generator, text: &str, tokens: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (mut lo, mut hi) = (0usize, words.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if llm.count_tokens(&words[..mid].join(" ")) < tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    format!("{} …", words[..lo].join(" "))
}

/// How one generative answer runs.
pub struct GenerateAnswer<'a> {
    /// The question.
    pub question: &'a str,
    /// Retrieved passages, best first.
    pub hits: &'a [SearchHit],
    /// What the passages offer (from [`KnowledgeBase::evidence`] over `hits`).
    pub evidence: &'a Evidence,
    /// Temperature override.
    pub temperature: Option<f64>,
    /// Receives each checked sentence of the answer as it is ready; when it is closed the
    /// generation stops.
    pub sink: Option<&'a mpsc::Sender<String>>,
}

/// A grounded answer with the context it was drawn from.
pub struct GeneratedAnswer {
    /// The answer as presented: supported sentences with their citations, else the
    /// sources' own sentences or a statement that the sources do not say.
    pub answer: String,
    /// The model's output as generated (empty when the model was not asked).
    pub generated: Generated,
    /// What was checked.
    pub grounding: Grounding,
    /// The context given to the model.
    pub context: String,
    /// Passages that fit.
    pub passages_used: usize,
    /// Time spent fitting the passages and building the prompt.
    pub formatting: std::time::Duration,
}

/// Sentences taken from the sources when the model's own are all unsupported...
const FALLBACK_SENTENCES: usize = 2;
/// ...a further one only when it is about as close to the question as the best one.
const FALLBACK_MARGIN: f32 = 0.1;

impl KnowledgeBase {
    /// Answers from `hits` with the LLM, keeping only the sentences the passages support
    /// (see [`super::grounding`]); `Ok(None)` when no LLM is loaded. Passages too far from
    /// the question are not given to the model at all: the answer then says that the
    /// sources do not hold it.
    pub async fn generate_answer(&self, a: GenerateAnswer<'_>) -> Result<Option<GeneratedAnswer>> {
        let Some(llm) = self.llm.current() else {
            return Ok(None);
        };
        let started = std::time::Instant::now();
        if !a.evidence.answerable() {
            tracing::info!(
                relevance = a.evidence.relevance,
                coverage = a.evidence.coverage,
                "passages do not hold the answer; not generating"
            );
            let answer = grounding::not_in_sources_reply(a.question);
            send(a.sink, &answer).await?;
            return Ok(Some(GeneratedAnswer {
                grounding: outcome(a.evidence, Vec::new(), "not_in_sources"),
                answer,
                generated: Generated {
                    text: String::new(),
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    finish_reason: crate::ml::llm::FinishReason::Stop,
                },
                context: format_context(a.hits),
                passages_used: 0,
                formatting: started.elapsed(),
            }));
        }
        let defaults = self.llm_defaults;
        let (question, hits) = (a.question.to_owned(), a.hits.to_vec());
        let llm2 = llm.clone();
        let fitted = tokio::task::spawn_blocking(move || {
            fit_prompt(llm2.as_ref(), &question, &hits, defaults.max_tokens)
        })
        .await??;
        let formatting = started.elapsed();
        let mut request = GenerateRequest::new(fitted.prompt);
        request.params.max_tokens = fitted.max_tokens;
        request.params.temperature = a.temperature.unwrap_or(defaults.temperature);
        let mut generation = match Generation::start(llm.as_ref(), request) {
            Ok(g) => g,
            Err(MlError::Overloaded) => {
                // Every generation slot and queue place is taken: the passages' own
                // sentences answer now (answer_mode "extractive") instead of a 429.
                tracing::info!("the LLM's queue is full; answering from the passages' sentences");
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let mut text = String::new();
        let mut checked = CheckedText::new(self, a.evidence);
        let mut pieces = 0;
        let mut drifted = false;
        let deadline = tokio::time::Instant::now() + defaults.deadline;
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, generation.next_text()).await else {
                tracing::info!(
                    pieces,
                    deadline_secs = defaults.deadline.as_secs(),
                    "the answer ran past its deadline; generation stopped"
                );
                drifted = true;
                break;
            };
            let Some(piece) = next? else { break };
            pieces += 1;
            text.push_str(&piece);
            for shown in checked.push(&piece).await? {
                send(a.sink, &shown).await?;
            }
            if checked.drifted() {
                tracing::info!(
                    sentences = DRIFT_SENTENCES,
                    "the answer left its sources; generation stopped"
                );
                drifted = true;
                break;
            }
        }
        if !drifted {
            for shown in checked.finish().await? {
                send(a.sink, &shown).await?;
            }
        }
        let mut f = generation.finished();
        if drifted {
            // Stopped before its end: what it generated is known, the prompt's count is not.
            f.completion_tokens = pieces;
            f.finish_reason = crate::ml::llm::FinishReason::Stop;
        }
        drop(generation);
        let (mut answer, checks) = checked.into_parts();
        let kind = if !answer.is_empty() {
            "answered"
        } else if !a.evidence.strong() {
            answer = grounding::not_in_sources_reply(a.question);
            "not_in_sources"
        } else {
            // Passages this close to the question outweigh a small model's refusal or
            // its unsupported sentences: their own sentences answer.
            answer = extractive_sentences(a.evidence, FALLBACK_SENTENCES, FALLBACK_MARGIN);
            "extractive"
        };
        if kind != "answered" {
            send(a.sink, &answer).await?;
        }
        let grounding = outcome(a.evidence, checks, kind);
        tracing::info!(
            model = %llm.info().name,
            prompt_tokens = f.prompt_tokens,
            completion_tokens = f.completion_tokens,
            finish = f.finish_reason.as_str(),
            passages = fitted.passages_used,
            outcome = kind,
            supported = grounding.supported,
            unsupported = grounding.unsupported,
            "generated answer"
        );
        Ok(Some(GeneratedAnswer {
            answer,
            generated: Generated {
                text: text.trim().to_owned(),
                prompt_tokens: f.prompt_tokens,
                completion_tokens: f.completion_tokens,
                finish_reason: f.finish_reason,
            },
            grounding,
            context: fitted.context,
            passages_used: fitted.passages_used,
            formatting,
        }))
    }
}

async fn send(sink: Option<&mpsc::Sender<String>>, text: &str) -> Result<()> {
    if let Some(sink) = sink {
        if sink.send(text.to_owned()).await.is_err() {
            tracing::info!("client went away; generation stopped");
            return Err(Error::Cancelled);
        }
    }
    Ok(())
}

/// The grounding record of an answer.
pub fn outcome(evidence: &Evidence, sentences: Vec<SentenceCheck>, kind: &str) -> Grounding {
    Grounding {
        outcome: kind.into(),
        answerable: evidence.answerable(),
        relevance: evidence.relevance,
        coverage: evidence.coverage,
        supported: sentences
            .iter()
            .filter(|s| s.supported && s.on_topic)
            .count(),
        unsupported: sentences
            .iter()
            .filter(|s| !s.supported && !s.refusal)
            .count(),
        off_topic: sentences
            .iter()
            .filter(|s| s.supported && !s.on_topic)
            .count(),
        sentences,
        method: grounding::METHOD.into(),
    }
}

/// Up to `n` of the sources' sentences closest to the question (within `margin` of the
/// best), in the order they appear in the sources, each cited with its passage number.
pub fn extractive_sentences(evidence: &Evidence, n: usize, margin: f32) -> String {
    evidence
        .best_sentences(n, margin)
        .into_iter()
        .map(|(passage, text)| grounding::cite(text, &[passage + 1]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Failed sentences in a row after which a generated answer is stopped.
const DRIFT_SENTENCES: usize = 4;

/// An answer's text, checked sentence by sentence as it arrives: each complete sentence
/// is checked against the evidence and, when supported, released with its citations.
pub struct CheckedText<'a> {
    kb: &'a KnowledgeBase,
    evidence: &'a Evidence,
    pending: String,
    kept: Vec<String>,
    checks: Vec<SentenceCheck>,
}

impl<'a> CheckedText<'a> {
    /// An empty text checked against `evidence`.
    pub fn new(kb: &'a KnowledgeBase, evidence: &'a Evidence) -> Self {
        Self {
            kb,
            evidence,
            pending: String::new(),
            kept: Vec::new(),
            checks: Vec::new(),
        }
    }

    /// Adds a piece; returns what may be shown now.
    pub async fn push(&mut self, piece: &str) -> Result<Vec<String>> {
        self.pending.push_str(piece);
        let mut sentences = grounding::text::answer_sentences(&self.pending);
        // The last sentence may still grow, unless the text ends after a full stop and a
        // space or line break.
        let closed = self.pending.ends_with(char::is_whitespace)
            && self
                .pending
                .trim_end()
                .ends_with(['.', '!', '?', '؟', '。', ']']);
        if !closed {
            let Some(last) = sentences.pop() else {
                return Ok(Vec::new());
            };
            let Some(at) = self.pending.rfind(last.as_str()) else {
                return Ok(Vec::new());
            };
            self.pending.drain(..at);
        } else {
            self.pending.clear();
        }
        self.check(sentences).await
    }

    /// Checks what is left; returns what may be shown.
    pub async fn finish(&mut self) -> Result<Vec<String>> {
        let rest = grounding::text::answer_sentences(&std::mem::take(&mut self.pending));
        self.check(rest).await
    }

    async fn check(&mut self, sentences: Vec<String>) -> Result<Vec<String>> {
        if sentences.is_empty() {
            return Ok(Vec::new());
        }
        let checks = self.kb.check_sentences(&sentences, self.evidence).await?;
        let mut shown = Vec::new();
        for mut c in checks {
            if c.supported && c.on_topic {
                c.text = grounding::cite(&c.text, &c.sources);
                let sep = if self.kept.is_empty() { "" } else { " " };
                shown.push(format!("{sep}{}", c.text));
                self.kept.push(c.text.clone());
            }
            self.checks.push(c);
        }
        Ok(shown)
    }

    /// Whether the last [`DRIFT_SENTENCES`] sentences all failed the check: the model has
    /// left its sources, and what it writes next would be dropped too.
    pub fn drifted(&self) -> bool {
        self.checks.len() >= DRIFT_SENTENCES
            && self.checks[self.checks.len() - DRIFT_SENTENCES..]
                .iter()
                .all(|c| !(c.supported && c.on_topic))
    }

    /// The kept sentences joined (the answer) and every check.
    pub fn into_parts(self) -> (String, Vec<SentenceCheck>) {
        (self.kept.join(" "), self.checks)
    }
}

/// Above this file size `/parse` does not summarise (the contract's 5 MB).
pub const SUMMARY_MAX_FILE_BYTES: usize = 5 * 1024 * 1024;
/// Above this many characters of content `/parse` does not summarise (the contract's 50,000).
pub const SUMMARY_MAX_CHARS: usize = 50_000;

const SUMMARY_PROMPT: &str = "Summarise the document the user gives you for use as \
context by another language model: first a short paragraph on what it is, then its key \
facts, figures, names and conclusions as a Markdown list. Keep the document's language. \
Do not add anything that is not in the document.";

impl KnowledgeBase {
    /// The LLM's summary of a document's Markdown (cut to what the window holds);
    /// `Ok(None)` when no LLM is loaded.
    pub async fn summarize_markdown(&self, markdown: &str) -> Result<Option<String>> {
        let Some(llm) = self.llm.current() else {
            return Ok(None);
        };
        let max_tokens = self.llm_defaults.max_tokens;
        let text = markdown.to_owned();
        let llm2 = llm.clone();
        let prompt = tokio::task::spawn_blocking(move || -> Result<(Prompt, usize)> {
            let window = llm2.info().context_length;
            let build = |doc: &str| {
                Prompt::Chat(vec![
                    ChatMessage::new(Role::System, SUMMARY_PROMPT),
                    ChatMessage::new(Role::User, doc.to_owned()),
                ])
            };
            let overhead = llm2.count_prompt_tokens(&build(""))? + SAFETY_TOKENS;
            if overhead + 2 >= window {
                return Err(Error::bad_request(
                    "the LLM's window is too small to summarise",
                ));
            }
            let max_tokens = max_tokens.min((window - overhead) / 2).max(1);
            let budget = window - overhead - max_tokens;
            let doc = if llm2.count_tokens(&text) <= budget {
                text
            } else {
                truncate_tokens(llm2.as_ref(), &text, budget)
            };
            Ok((build(&doc), max_tokens))
        })
        .await??;
        let mut request = GenerateRequest::new(prompt.0);
        request.params.max_tokens = prompt.1;
        request.params.temperature = 0.0;
        let started = std::time::Instant::now();
        let g = crate::ml::llm::collect(llm.as_ref(), request, |_| {}).await?;
        tracing::info!(
            model = %llm.info().name,
            prompt_tokens = g.prompt_tokens,
            completion_tokens = g.completion_tokens,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "summarised document"
        );
        Ok(Some(g.text.trim().to_owned()))
    }
}
