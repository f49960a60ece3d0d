//! Generative answers: the retrieved passages fitted to the LLM's window, a prompt that
//! makes the model answer from them and cite them by number (the fixed instructions
//! first, so the LLM's prompt cache keeps them; then the sources and the question), and
//! the generation itself, checked sentence by sentence against the passages
//! ([`super::grounding`]) and streamed to an optional sink as each sentence passes.
//!
//! The order of what is shown: when the passages are strong (see
//! [`Evidence::strong`]), their own sentences closest to the question, quoted with their
//! citations, go first, as soon as the evidence is known (milliseconds after retrieval,
//! before the model has read its prompt); the model's sentences that pass the check then
//! extend them, and nothing shown is ever taken back. A small model's sentences mostly
//! fail the check, so waiting for them left the answer empty for seconds only to show the
//! quotes in the end. With weaker passages nothing is quoted first: the model's checked
//! sentences are the answer, else the statement that the sources do not say.

use serde::Serialize;
use tokio::sync::mpsc;
use utoipa::ToSchema;

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

tokio::task_local! {
    /// When the request an answer is part of must be done (a chat turn's deadline).
    static ANSWER_BY: tokio::time::Instant;
}

/// Runs `f` with `by` as the time every answer generated inside it must be done by: the
/// model is only asked when a busy one would finish within what is left, and its
/// generation stops there (see [`KnowledgeBase::generate_answer`]). A chat turn calls its
/// tools inside it, so an answer from `ask_knowledge_base` keeps to the turn's deadline.
pub async fn answer_by<F: std::future::Future>(by: tokio::time::Instant, f: F) -> F::Output {
    ANSWER_BY.scope(by, f).await
}

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

/// Where a piece of an answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The sources' own sentences, quoted with their citations.
    Extractive,
    /// The model's sentences that passed the check, with their citations.
    Generated,
    /// The statement that the sources do not hold the answer.
    NotInSources,
}

impl Origin {
    /// The name used in events (`origin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Extractive => "extractive",
            Self::Generated => "generated",
            Self::NotInSources => "not_in_sources",
        }
    }
}

/// A piece of an answer as it is shown: pieces only ever extend what came before.
#[derive(Debug, Clone)]
pub struct AnswerPiece {
    pub text: String,
    pub origin: Origin,
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
    /// Receives each piece of the answer as it is ready (the quoted sentences first,
    /// then each checked sentence); when it is closed the generation stops.
    pub sink: Option<&'a mpsc::Sender<AnswerPiece>>,
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

/// Sentences quoted from strong passages before the model's own...
const LEAD_SENTENCES: usize = 2;
/// ...a further one only when it is about as close to the question as the best one.
const LEAD_MARGIN: f32 = 0.1;

impl KnowledgeBase {
    /// Answers from `hits` with the LLM, keeping only the sentences the passages support
    /// (see [`super::grounding`]); `Ok(None)` when no LLM is loaded, or when it is too busy
    /// and nothing was quoted yet. Passages too far from the question are not given to the
    /// model at all: the answer then says that the sources do not hold it. Strong passages
    /// are quoted first (see the module docs).
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
            send(a.sink, &answer, Origin::NotInSources).await?;
            return Ok(Some(GeneratedAnswer {
                grounding: outcome(a.evidence, Vec::new(), "not_in_sources"),
                answer,
                generated: Generated::nothing(),
                context: format_context(a.hits),
                passages_used: 0,
                formatting: started.elapsed(),
            }));
        }
        // Strong passages: their own sentences are shown at once, before the model reads
        // its prompt; the model's checked sentences can only add to them.
        let lead = a
            .evidence
            .strong()
            .then(|| extractive_sentences(a.evidence, LEAD_SENTENCES, LEAD_MARGIN))
            .filter(|(text, _)| !text.is_empty());
        if let Some((text, _)) = &lead {
            send(a.sink, text, Origin::Extractive).await?;
        }
        let quoted = lead.as_ref().map_or(0, |(_, n)| *n);
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
        // Inside a request with a deadline of its own (`answer_by`), what is left of it
        // bounds both the admission and the generation.
        let by = ANSWER_BY.try_with(|by| *by).ok();
        let left = by.map(|by| by.saturating_duration_since(tokio::time::Instant::now()));
        let within = left.map_or(defaults.target, |l| l.min(defaults.target));
        // A model too busy to be done within the target: the passages' own sentences
        // answer now (answer_mode "extractive") instead of a wait or a 429. An idle model
        // always generates.
        let mut generation = match Generation::start_within(llm.as_ref(), request, within) {
            Ok(g) => g,
            Err(MlError::Overloaded) => {
                tracing::info!(
                    target_secs = defaults.target.as_secs(),
                    "the LLM would not answer in time; answering from the passages' sentences"
                );
                let Some((answer, n)) = lead else {
                    return Ok(None);
                };
                return Ok(Some(GeneratedAnswer {
                    grounding: outcome(a.evidence, Vec::new(), "extractive").shown(0, n),
                    answer,
                    generated: Generated::nothing(),
                    context: fitted.context,
                    passages_used: fitted.passages_used,
                    formatting,
                }));
            }
            Err(e) => return Err(e.into()),
        };
        let mut text = String::new();
        let mut checked =
            CheckedText::new(self, a.evidence, lead.as_ref().map(|(t, _)| t.as_str()));
        let mut pieces = 0;
        let mut drifted = false;
        let own = tokio::time::Instant::now() + defaults.deadline;
        let deadline = by.map_or(own, |by| by.min(own));
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, generation.next_text()).await else {
                tracing::info!(
                    pieces,
                    deadline_secs = defaults.deadline.as_secs(),
                    turn_deadline = by.is_some_and(|by| by < own),
                    "the answer ran past its deadline; generation stopped"
                );
                drifted = true;
                break;
            };
            let Some(piece) = next? else { break };
            pieces += 1;
            text.push_str(&piece);
            for shown in checked.push(&piece).await? {
                send(a.sink, &shown, Origin::Generated).await?;
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
                send(a.sink, &shown, Origin::Generated).await?;
            }
        }
        let mut f = generation.finished();
        if drifted {
            // Stopped before its end: what it generated is known, the prompt's count is not.
            f.completion_tokens = pieces;
            f.finish_reason = crate::ml::llm::FinishReason::Stop;
        }
        drop(generation);
        let written = checked.generated();
        let repeated = checked.repeated();
        let (mut answer, checks) = checked.into_parts();
        let kind = if written > 0 {
            "answered"
        } else if quoted > 0 {
            // Passages this close to the question outweigh a small model's refusal or
            // its unsupported sentences: their own sentences, shown first, answer.
            "extractive"
        } else {
            answer = grounding::not_in_sources_reply(a.question);
            send(a.sink, &answer, Origin::NotInSources).await?;
            "not_in_sources"
        };
        let mut grounding = outcome(a.evidence, checks, kind).shown(written, quoted);
        grounding.repeated = repeated;
        tracing::info!(
            model = %llm.info().name,
            prompt_tokens = f.prompt_tokens,
            completion_tokens = f.completion_tokens,
            finish = f.finish_reason.as_str(),
            passages = fitted.passages_used,
            outcome = kind,
            quoted,
            written,
            repeated,
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

async fn send(sink: Option<&mpsc::Sender<AnswerPiece>>, text: &str, origin: Origin) -> Result<()> {
    if let Some(sink) = sink {
        let piece = AnswerPiece {
            text: text.to_owned(),
            origin,
        };
        if sink.send(piece).await.is_err() {
            tracing::info!("client went away; generation stopped");
            return Err(Error::Cancelled);
        }
    }
    Ok(())
}

/// The grounding record of an answer (no sentence shown yet: see [`Grounding::shown`]).
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
        generated_sentences: 0,
        extractive_sentences: 0,
        repeated: 0,
        method: grounding::METHOD.into(),
    }
}

/// Up to `n` of the sources' sentences closest to the question (within `margin` of the
/// best), in the order they appear in the sources, each cited with its passage number;
/// with how many they are.
pub fn extractive_sentences(evidence: &Evidence, n: usize, margin: f32) -> (String, usize) {
    let best = evidence.best_sentences(n, margin);
    let count = best.len();
    let text = best
        .into_iter()
        .map(|(passage, text)| grounding::cite(text, &[passage + 1]))
        .collect::<Vec<_>>()
        .join(" ");
    (text, count)
}

/// Failed sentences in a row after which a generated answer is stopped.
const DRIFT_SENTENCES: usize = 4;

/// An answer's text, checked sentence by sentence as it arrives: each complete sentence
/// is checked against the evidence and, when supported, released with its citations,
/// after the quoted lead when there is one (a sentence the lead already says word for
/// word is not repeated).
pub struct CheckedText<'a> {
    kb: &'a KnowledgeBase,
    evidence: &'a Evidence,
    lead: Option<&'a str>,
    pending: String,
    kept: Vec<String>,
    checks: Vec<SentenceCheck>,
    generated: usize,
    repeated: usize,
}

impl<'a> CheckedText<'a> {
    /// An empty text checked against `evidence`, following `lead` (already shown).
    pub fn new(kb: &'a KnowledgeBase, evidence: &'a Evidence, lead: Option<&'a str>) -> Self {
        Self {
            kb,
            evidence,
            lead,
            pending: String::new(),
            kept: lead.map(str::to_owned).into_iter().collect(),
            checks: Vec::new(),
            generated: 0,
            repeated: 0,
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
                if self.lead.is_some_and(|lead| says_again(lead, &c.text)) {
                    c.repeated = true;
                    self.repeated += 1;
                } else {
                    let sep = if self.kept.is_empty() { "" } else { " " };
                    shown.push(format!("{sep}{}", c.text));
                    self.kept.push(c.text.clone());
                    self.generated += 1;
                }
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

    /// The model's sentences shown (after the lead).
    pub fn generated(&self) -> usize {
        self.generated
    }

    /// The model's supported sentences not shown because the lead says them word for word.
    pub fn repeated(&self) -> usize {
        self.repeated
    }

    /// The shown text joined (the answer: the lead, then the kept sentences) and every
    /// check.
    pub fn into_parts(self) -> (String, Vec<SentenceCheck>) {
        (self.kept.join(" "), self.checks)
    }
}

/// Whether `lead` already holds `cited` (a sentence with its citations) word for word:
/// its text up to the citations, spacing aside.
fn says_again(lead: &str, cited: &str) -> bool {
    let claim = cited.split(" [").next().unwrap_or(cited).trim();
    let squash = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    !claim.is_empty() && squash(lead).contains(&squash(claim))
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

#[cfg(test)]
mod tests {
    use super::says_again;

    #[test]
    fn a_sentence_the_quotes_hold_word_for_word_is_not_repeated() {
        let lead = "Every full-time employee gets 25 days of paid annual leave per calendar \
                    year [1]. Up to 5 unused days can be carried over [1].";
        assert!(says_again(
            lead,
            "Every full-time employee gets 25 days of paid annual leave per calendar year [1]."
        ));
        assert!(says_again(
            lead,
            "Up to 5  unused days can be carried over [2]."
        ));
        assert!(!says_again(lead, "Employees get 25 days of leave [1]."));
        assert!(!says_again(lead, " [1]."));
    }
}
