//! Grounding: whether retrieved passages can answer a question, and which sentences of an
//! answer they support.
//!
//! [`KnowledgeBase::evidence`] embeds the question and the passages' sentences once. Its
//! `relevance` (the best cosine between the question and a source sentence) and
//! `coverage` (the share of the question's content terms found in the passages) decide
//! whether the passages are worth answering from at all.
//!
//! [`KnowledgeBase::check_sentences`] then judges each sentence of an answer against the
//! passages: every number or code it states must appear in a passage, and its content
//! terms must overlap a passage's (lexical support) or its embedding must be close to a
//! source sentence's (semantic support). A supported sentence gets the numbers of the
//! passages that support it as its citations (the model's own `[n]` are replaced); an
//! unsupported one is not presented as a fact. A sentence saying that the sources do not
//! hold the answer is a refusal, not a claim. What was checked is returned as
//! [`Grounding`], the `grounding` field of `/query` and chat replies.

pub mod text;

use std::collections::HashSet;

use serde::Serialize;
use utoipa::ToSchema;

use super::{KnowledgeBase, SearchHit};
use crate::error::Result;

/// Share of a sentence's content terms a passage must hold for lexical support: at most
/// a quarter of what it says may be words of its own.
const MIN_OVERLAP: f32 = 0.75;
/// With this much overlap (most of what it says), a close embedding is enough. At 0.6 a
/// sentence of six terms could add two of its own to a close source sentence ("a
/// cartoon duck with a paper cutout of a chicken" from "a cartoon duck holding a
/// paper").
const MIN_OVERLAP_WITH_SIMILARITY: f32 = 0.7;
/// Cosine between a sentence and a source sentence that counts as close.
const CLOSE_SIMILARITY: f32 = 0.75;
/// Cosine that counts as support with less overlap (a paraphrase).
const PARAPHRASE_SIMILARITY: f32 = 0.9;
/// Overlap a paraphrase still needs.
const PARAPHRASE_OVERLAP: f32 = 0.3;
/// A kept sentence must be at least this close to the question (else it is true but
/// beside the point)...
const MIN_ON_TOPIC: f32 = 0.3;
/// ...and at most this much less close than the best source sentence.
const ON_TOPIC_MARGIN: f32 = 0.3;
/// Most source sentences embedded per question.
const MAX_SOURCE_SENTENCES: usize = 80;
/// Relevance at which passages are taken to hold an answer whatever the term coverage.
const RELEVANT: f32 = 0.5;
/// Relevance below which passages never hold an answer.
const MIN_RELEVANCE: f32 = 0.25;
/// Share of the question's content terms the passages must hold between the two.
const MIN_COVERAGE: f32 = 0.5;
/// Share of the question's content terms the passages must hold for the cosine alone
/// to make them answerable when the question is not in the Latin script: the default
/// embedder (all-MiniLM-L6-v2) was trained on English and places any two texts of
/// another script close together (Arabic questions and sentences on unrelated topics
/// score 0.6-0.7), so there a close embedding with almost none of the question's words
/// is no evidence.
const MIN_COVERAGE_CLOSE: f32 = 0.4;
/// Relevance at which the sources' own sentences are quoted as the answer (see
/// [`Evidence::strong`]).
const STRONG: f32 = 0.55;
/// Share of the question's terms one sentence (with its section's headings) must hold
/// for a cosine between [`RELEVANT`] and [`STRONG`] to make it quotable.
const STRONG_SENTENCE_COVERAGE: f32 = 0.75;

/// A source sentence with its passage and embedding.
struct SourceSentence {
    passage: usize,
    text: String,
    vector: Vec<f32>,
    /// Cosine to the question.
    relevance: f32,
    /// Share of the question's content terms the sentence and its section's headings
    /// hold.
    coverage: f32,
}

/// What the passages offer for one question (see the module docs).
pub struct Evidence {
    question_vector: Vec<f32>,
    sentences: Vec<SourceSentence>,
    passage_terms: Vec<HashSet<String>>,
    passage_numbers: Vec<HashSet<String>>,
    /// Per passage: whether it is beside the question (see [`beside_the_question`]).
    beside: Vec<bool>,
    /// Whether the question is written in the Latin script (see [`MIN_COVERAGE_CLOSE`]).
    latin: bool,
    /// Best cosine between the question and a source sentence (of a passage not beside
    /// the question).
    pub relevance: f32,
    /// Share of the question's content terms found in the passages.
    pub coverage: f32,
}

impl Evidence {
    /// Evidence of no passages.
    pub fn empty() -> Self {
        Self {
            question_vector: Vec::new(),
            sentences: Vec::new(),
            passage_terms: Vec::new(),
            passage_numbers: Vec::new(),
            beside: Vec::new(),
            latin: true,
            relevance: 0.0,
            coverage: 0.0,
        }
    }

    /// Whether the passages are close enough to the question to answer from: a close
    /// sentence ([`RELEVANT`]; in another script than Latin, in passages that hold some
    /// of the question's words, [`MIN_COVERAGE_CLOSE`]), or a less close one in passages
    /// that hold most of them.
    pub fn answerable(&self) -> bool {
        let close =
            self.relevance >= RELEVANT && (self.latin || self.coverage >= MIN_COVERAGE_CLOSE);
        !self.sentences.is_empty()
            && (close || (self.relevance >= MIN_RELEVANCE && self.coverage >= MIN_COVERAGE))
    }

    /// Whether the passages are strong enough for their own sentences to be quoted as the
    /// answer: answerable, with a sentence of a passage not beside the question that is
    /// close to it ([`STRONG`]), or at the answerable bound ([`RELEVANT`]) and itself
    /// holding most of the question's terms (then a near miss of the cosine bound, which
    /// moves with the embedder's rounding, does not turn an answer the sources hold into
    /// "the sources do not say").
    pub fn strong(&self) -> bool {
        self.answerable() && self.sentences.iter().any(|s| self.quotable(s))
    }

    fn quotable(&self, s: &SourceSentence) -> bool {
        !self.beside[s.passage]
            && (s.relevance >= STRONG
                || (s.relevance >= RELEVANT && s.coverage >= STRONG_SENTENCE_COVERAGE))
    }

    /// Up to `n` source sentences closest to the question (those within `margin` of the
    /// best), in the order they appear in the sources: (passage index, text). Sentences
    /// of passages beside the question are never chosen.
    pub fn best_sentences(&self, n: usize, margin: f32) -> Vec<(usize, &str)> {
        let mut scored: Vec<(usize, f32)> = self
            .sentences
            .iter()
            .enumerate()
            .filter(|(_, s)| !self.beside[s.passage])
            .map(|(i, s)| (i, s.relevance))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut seen = HashSet::new();
        scored.retain(|&(i, _)| seen.insert(self.sentences[i].text.as_str()));
        let best = scored.first().map_or(0.0, |s| s.1);
        scored.retain(|s| s.1 >= best - margin);
        scored.truncate(n);
        scored.sort_by_key(|&(i, _)| i);
        scored
            .into_iter()
            .map(|(i, _)| (self.sentences[i].passage, self.sentences[i].text.as_str()))
            .collect()
    }
}

/// One sentence of an answer, as checked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SentenceCheck {
    /// The sentence (with the citations it is presented with, when kept).
    pub text: String,
    /// Whether the sources support it; unsupported sentences are left out of the answer.
    pub supported: bool,
    /// Whether it bears on the question (close enough to it); supported sentences that
    /// do not are left out too.
    pub on_topic: bool,
    /// A refusal ("the sources do not say ..."): neither claim nor support.
    pub refusal: bool,
    /// Best share of its content terms found in one passage (0-1).
    pub overlap: f32,
    /// Best cosine to a source sentence (-1 to 1).
    pub similarity: f32,
    /// Numbers and codes it states that no passage holds.
    pub missing_numbers: Vec<String>,
    /// Numbers (from 1) of the passages that support it.
    pub sources: Vec<usize>,
    /// Supported, but not shown: the sentences quoted from the sources before it already
    /// say it word for word.
    pub repeated: bool,
}

/// What was checked of an answer: the `grounding` field.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Grounding {
    /// `answered` (the model's supported sentences are in the answer, after the sources'
    /// own when those were quoted first), `extractive` (only the sources' own
    /// sentences), or `not_in_sources` (the sources do not hold the answer).
    pub outcome: String,
    /// Whether the passages were judged close enough to the question to answer from.
    pub answerable: bool,
    /// Best cosine between the question and a source sentence.
    pub relevance: f32,
    /// Share of the question's content terms found in the passages.
    pub coverage: f32,
    /// Each sentence the model wrote, in order, as checked.
    pub sentences: Vec<SentenceCheck>,
    /// Sentences kept as supported claims.
    pub supported: usize,
    /// Sentences left out because no source supports them.
    pub unsupported: usize,
    /// Supported sentences left out because they do not bear on the question.
    pub off_topic: usize,
    /// Sentences of the answer written by the model (each one checked and kept).
    pub generated_sentences: usize,
    /// Sentences of the answer quoted from the sources.
    pub extractive_sentences: usize,
    /// Supported sentences of the model left out because the quoted ones say them already.
    pub repeated: usize,
    /// How support was judged.
    pub method: String,
}

impl Grounding {
    /// Records how many sentences of the answer the model wrote and how many were quoted.
    pub fn shown(mut self, generated: usize, extractive: usize) -> Self {
        self.generated_sentences = generated;
        self.extractive_sentences = extractive;
        self
    }

    /// Where the answer's text comes from, for `answer_mode`: `generative` (only the
    /// model's checked sentences), `mixed` (sentences quoted from the sources, then the
    /// model's), or `extractive` (no sentence of the model: the sources' own sentences,
    /// or the statement that they do not hold the answer).
    pub fn answer_mode(&self) -> &'static str {
        match (self.generated_sentences, self.extractive_sentences) {
            (0, _) => "extractive",
            (_, 0) => "generative",
            _ => "mixed",
        }
    }
}

/// How support is judged, for the `method` field.
pub const METHOD: &str = "numbers must appear in a source; content-term overlap with a \
passage, or embedding similarity (all-MiniLM) to a source sentence";

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Whether most letters of `text` are Latin.
fn latin_script(text: &str) -> bool {
    let letters = text.chars().filter(|c| c.is_alphabetic());
    let (mut latin, mut all) = (0usize, 0usize);
    for c in letters {
        all += 1;
        latin += (c.is_ascii_alphabetic() || ('\u{00C0}'..='\u{024F}').contains(&c)) as usize;
    }
    latin * 2 >= all
}

/// Where a passage sits in its document.
struct Section {
    source: String,
    path: String,
    /// Terms of the headings from the document's title down to the passage's section.
    path_terms: HashSet<String>,
    /// Terms of the innermost heading.
    heading_terms: HashSet<String>,
}

impl Section {
    fn of(hit: &SearchHit) -> Self {
        let field = |k: &str| {
            hit.metadata
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let mut path = field("section_path");
        if path.is_empty() {
            path = field("title");
        }
        Section {
            source: hit.source.clone(),
            path_terms: text::terms(&path),
            heading_terms: text::terms(&field("heading")),
            path,
        }
    }
}

/// Per passage, whether it is beside the question: the question names a term that is the
/// heading of another section of the same document (its sibling: "sick" in the section
/// path `Leave policy > Sick leave`), while this passage and its headings never use it. The document itself
/// then tells the two topics apart, and this passage is about the other one: "How many
/// days of paid sick leave do I get?" is not answered by the annual leave section's "25
/// days of paid annual leave", however close the two sentences' embeddings are.
fn beside_the_question(
    asked: &HashSet<String>,
    sections: &[Section],
    passage_terms: &[HashSet<String>],
) -> Vec<bool> {
    (0..sections.len())
        .map(|p| {
            let own = &sections[p];
            asked.iter().any(|t| {
                !passage_terms[p].contains(t)
                    && !own.path_terms.contains(t)
                    && sections.iter().any(|other| {
                        other.source == own.source
                            && other.path != own.path
                            && other.heading_terms.contains(t)
                    })
            })
        })
        .collect()
}

impl KnowledgeBase {
    /// Embeds `question` and the sentences of `hits` (see the module docs).
    pub async fn evidence(&self, question: &str, hits: &[SearchHit]) -> Result<Evidence> {
        let mut sentences: Vec<(usize, String)> = Vec::new();
        for (i, h) in hits.iter().enumerate() {
            for s in h.text.lines().flat_map(crate::chunk::sentences) {
                let s = s.trim().trim_start_matches('#').trim();
                if s.split_whitespace().count() >= 2 && sentences.len() < MAX_SOURCE_SENTENCES {
                    sentences.push((i, s.to_owned()));
                }
            }
        }
        let mut inputs = vec![super::search::searchable(question)];
        inputs.extend(sentences.iter().map(|(_, s)| super::search::searchable(s)));
        let mut vectors = {
            let _turn = self.answer_gate.enter().await?;
            self.embedder.embed(inputs).await?
        };
        let qv = vectors.remove(0);
        let asked = text::terms(question);
        let sections: Vec<Section> = hits.iter().map(Section::of).collect();
        let share = |held: &dyn Fn(&String) -> bool| {
            if asked.is_empty() {
                0.0
            } else {
                asked.iter().filter(|t| held(t)).count() as f32 / asked.len() as f32
            }
        };
        let sentences: Vec<SourceSentence> = sentences
            .into_iter()
            .zip(vectors)
            .map(|((passage, text), vector)| {
                let own = text::terms(&text);
                let path = &sections[passage].path_terms;
                SourceSentence {
                    passage,
                    relevance: cosine(&qv, &vector),
                    coverage: share(&|t| own.contains(t) || path.contains(t)),
                    text,
                    vector,
                }
            })
            .collect();
        let passage_terms: Vec<HashSet<String>> =
            hits.iter().map(|h| text::terms(&h.text)).collect();
        let passage_numbers: Vec<HashSet<String>> =
            hits.iter().map(|h| text::numbers(&h.text)).collect();
        let beside = beside_the_question(&asked, &sections, &passage_terms);
        let relevance = sentences
            .iter()
            .filter(|s| !beside[s.passage])
            .map(|s| s.relevance)
            .fold(0.0f32, f32::max);
        let all: HashSet<&String> = passage_terms.iter().flatten().collect();
        let coverage = share(&|t| all.contains(t));
        Ok(Evidence {
            question_vector: qv,
            sentences,
            passage_terms,
            passage_numbers,
            beside,
            latin: latin_script(question),
            relevance,
            coverage,
        })
    }

    /// Checks each of `sentences` against `evidence` (see the module docs).
    pub async fn check_sentences(
        &self,
        sentences: &[String],
        evidence: &Evidence,
    ) -> Result<Vec<SentenceCheck>> {
        if sentences.is_empty() {
            return Ok(Vec::new());
        }
        let bare: Vec<String> = sentences
            .iter()
            .map(|s| text::strip_citations(s).0)
            .collect();
        let vectors = if evidence.sentences.is_empty() {
            vec![Vec::new(); bare.len()]
        } else {
            let _turn = self.answer_gate.enter().await?;
            self.embedder
                .embed(bare.iter().map(|s| super::search::searchable(s)).collect())
                .await?
        };
        Ok(bare
            .iter()
            .zip(vectors)
            .map(|(s, v)| check_one(s, &v, evidence))
            .collect())
    }
}

/// Judges one sentence (citations already stripped) with its embedding.
fn check_one(sentence: &str, vector: &[f32], ev: &Evidence) -> SentenceCheck {
    let refusal = text::says_not_in_sources(sentence);
    let terms = text::terms(sentence);
    let numbers = text::numbers(sentence);
    let missing_numbers: Vec<String> = numbers
        .iter()
        .filter(|n| !ev.passage_numbers.iter().any(|p| p.contains(*n)))
        .cloned()
        .collect();
    // Per passage: share of the sentence's terms it holds, and its closest sentence.
    let n = ev.passage_terms.len();
    let mut overlap = vec![0.0f32; n];
    let mut similarity = vec![-1.0f32; n];
    for (p, pt) in ev.passage_terms.iter().enumerate() {
        if !terms.is_empty() {
            overlap[p] =
                terms.iter().filter(|t| pt.contains(*t)).count() as f32 / terms.len() as f32;
        }
    }
    // The source sentence closest to this one, and how close that is to the question.
    let mut closest: Option<(f32, &SourceSentence)> = None;
    if !vector.is_empty() {
        for s in &ev.sentences {
            let c = cosine(vector, &s.vector);
            if c > similarity[s.passage] {
                similarity[s.passage] = c;
            }
            if closest.is_none_or(|(best, _)| c > best) {
                closest = Some((c, s));
            }
        }
    }
    let supports = |p: usize| {
        let numbers_there = numbers.iter().all(|x| ev.passage_numbers[p].contains(x));
        let (o, s) = (overlap[p], similarity[p]);
        numbers_there
            && (o >= MIN_OVERLAP
                || (o >= MIN_OVERLAP_WITH_SIMILARITY && s >= CLOSE_SIMILARITY)
                || (o >= PARAPHRASE_OVERLAP && s >= PARAPHRASE_SIMILARITY))
    };
    let mut sources: Vec<usize> = (0..n).filter(|&p| supports(p)).collect();
    // Best supporting passage first.
    sources.sort_by(|&a, &b| (overlap[b] + similarity[b]).total_cmp(&(overlap[a] + similarity[a])));
    sources.truncate(2);
    // Numbers may be spread over the supporting passages; each must be in one of them.
    // A question ("When should carried-over days be taken?") or a lone word ("Berries")
    // states nothing, whatever a source holds.
    let claim =
        !sentence.trim_end().ends_with(['?', '؟']) && sentence.split_whitespace().count() >= 2;
    let supported = claim && !refusal && !sources.is_empty() && missing_numbers.is_empty();
    // On topic: the sentence bears on the question, and so does the source sentence it
    // restates (a true fact from beside the point, with words of the question added to
    // it, is not an answer).
    let near = MIN_ON_TOPIC.max(ev.relevance - ON_TOPIC_MARGIN);
    let close = vector.is_empty()
        || ev.question_vector.is_empty()
        || (cosine(vector, &ev.question_vector) >= near
            && closest.is_none_or(|(_, s)| s.relevance >= near));
    // A sentence drawn from passages beside the question (see [`beside_the_question`])
    // answers another one.
    let beside = !sources.is_empty() && sources.iter().all(|&p| ev.beside[p])
        || closest.is_some_and(|(_, s)| ev.beside[s.passage]);
    let on_topic = close && !beside;
    SentenceCheck {
        text: sentence.to_owned(),
        supported,
        on_topic,
        refusal,
        overlap: overlap.iter().copied().fold(0.0, f32::max),
        similarity: similarity.iter().copied().fold(-1.0, f32::max),
        missing_numbers,
        sources: sources.into_iter().map(|p| p + 1).collect(),
        repeated: false,
    }
}

/// `sentence` (citations stripped) with `sources` cited before its final punctuation.
pub fn cite(sentence: &str, sources: &[usize]) -> String {
    if sources.is_empty() {
        return sentence.to_owned();
    }
    let marks: String = sources.iter().map(|n| format!("[{n}]")).collect();
    let trimmed = sentence.trim_end();
    let end = trimmed
        .char_indices()
        .rev()
        .take_while(|(_, c)| matches!(c, '.' | '!' | '?' | '؟' | '。'))
        .last()
        .map_or(trimmed.len(), |(i, _)| i);
    format!("{} {marks}{}", trimmed[..end].trim_end(), &trimmed[end..])
}

/// Says that the sources do not hold the answer, in the question's language when it is
/// Arabic (the only other language the assistant's texts are written in).
pub fn not_in_sources_reply(question: &str) -> String {
    let arabic = question
        .chars()
        .filter(|c| c.is_alphabetic())
        .filter(|c| ('\u{0600}'..='\u{06FF}').contains(c))
        .count()
        * 2
        > question.chars().filter(|c| c.is_alphabetic()).count();
    if arabic {
        "لا تذكر المصادر ذلك: لم أجد الإجابة في قاعدة المعرفة.".into()
    } else {
        "The sources do not say: I found no answer to this in the knowledge base.".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(passages: &[&str]) -> Evidence {
        Evidence {
            question_vector: Vec::new(),
            sentences: Vec::new(),
            passage_terms: passages.iter().map(|p| text::terms(p)).collect(),
            passage_numbers: passages.iter().map(|p| text::numbers(p)).collect(),
            beside: vec![false; passages.len()],
            latin: true,
            relevance: 0.0,
            coverage: 0.0,
        }
    }

    #[test]
    fn numbers_and_terms_decide_lexical_support() {
        let ev = evidence(&[
            "Every full-time employee gets 25 days of paid annual leave per calendar year.",
            "Passwords must be at least 12 characters long.",
        ]);
        let ok = check_one(
            "Employees get 25 days of paid annual leave each year.",
            &[],
            &ev,
        );
        assert!(ok.supported, "{ok:?}");
        assert_eq!(ok.sources, vec![1]);
        let wrong_number = check_one("Employees get 30 days of paid annual leave.", &[], &ev);
        assert!(!wrong_number.supported);
        assert_eq!(wrong_number.missing_numbers, vec!["30"]);
        let invented = check_one("The travel budget is set by the finance team.", &[], &ev);
        assert!(!invented.supported, "{invented:?}");
        let refusal = check_one("The sources do not say how long sick leave is.", &[], &ev);
        assert!(refusal.refusal && !refusal.supported);
        // Questions and lone words state nothing.
        let asked = check_one("Do employees get 25 days of paid annual leave?", &[], &ev);
        assert!(!asked.supported && asked.overlap >= 0.75, "{asked:?}");
        assert!(!check_one("Passwords", &[], &ev).supported);
    }

    #[test]
    fn a_fact_from_beside_the_point_is_off_topic_even_in_the_question_words() {
        let unit = |v: [f32; 3]| {
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / n).collect::<Vec<f32>>()
        };
        let passages = [
            "The core hours from 10:00 to 15:00 apply at home.",
            "Passwords must be at least 12 characters long.",
        ];
        let mut ev = evidence(&passages);
        ev.question_vector = unit([1.0, 0.0, 0.0]);
        ev.sentences = vec![
            SourceSentence {
                passage: 0,
                text: passages[0].into(),
                vector: unit([0.6, 0.0, 0.8]),
                relevance: 0.6,
                coverage: 0.0,
            },
            SourceSentence {
                passage: 1,
                text: passages[1].into(),
                vector: unit([0.0, 1.0, 0.0]),
                relevance: 0.0,
                coverage: 0.0,
            },
        ];
        ev.relevance = 0.6;
        // Close enough to the question itself (0.4), but a restatement of the password
        // rule, which is nowhere near it.
        let beside = check_one(
            "Passwords must be at least 12 characters long for people working at home.",
            &unit([0.4, 0.9165, 0.0]),
            &ev,
        );
        assert!(beside.supported && !beside.on_topic, "{beside:?}");
        let answer = check_one(
            "The core hours from 10:00 to 15:00 apply at home.",
            &unit([0.6, 0.0, 0.8]),
            &ev,
        );
        assert!(answer.supported && answer.on_topic, "{answer:?}");
    }

    fn hit(source: &str, path: &str, text: &str) -> SearchHit {
        let heading = path.rsplit(" > ").next().unwrap_or_default();
        let metadata = serde_json::json!({"section_path": path, "heading": heading});
        SearchHit {
            text: text.into(),
            source: source.into(),
            metadata: metadata.as_object().unwrap().clone(),
            score: 1.0,
            doc_id: String::new(),
        }
    }

    #[test]
    fn a_section_whose_sibling_the_question_names_is_beside_it() {
        let hits = [
            hit(
                "leave.md",
                "Leave policy > Annual leave",
                "Every employee gets 25 days of paid annual leave per year.",
            ),
            hit(
                "leave.md",
                "Leave policy > Sick leave",
                "A doctor's note is required from the fourth day of sickness.",
            ),
            hit(
                "leave.md",
                "Leave policy > Requesting leave",
                "Sick days are reported to HR; leave is requested two weeks ahead.",
            ),
            // Another document's heading tells nothing about this one's sections.
            hit(
                "travel.md",
                "Travel",
                "Hotels are paid up to 120 euros a night.",
            ),
        ];
        let sections: Vec<Section> = hits.iter().map(Section::of).collect();
        let terms: Vec<HashSet<String>> = hits.iter().map(|h| text::terms(&h.text)).collect();
        let asked = text::terms("How many days of paid sick leave do I get per year?");
        assert_eq!(
            beside_the_question(&asked, &sections, &terms),
            // Annual leave never says "sick"; the third passage does, in its text.
            vec![true, false, false, false]
        );
        let asked = text::terms("How many days of leave do I get?");
        assert_eq!(
            beside_the_question(&asked, &sections, &terms),
            vec![false; 4]
        );
        // "travel" is another document's heading: not a sibling of the leave sections.
        let asked = text::terms("How many days of leave do I get for travel?");
        assert_eq!(
            beside_the_question(&asked, &sections, &terms),
            vec![false; 4]
        );
    }

    #[test]
    fn quoting_needs_a_close_sentence_and_most_of_the_question_words() {
        let mut ev = evidence(&["Der Laden öffnet um acht Uhr."]);
        ev.question_vector = vec![1.0];
        let sentence = |relevance, coverage| SourceSentence {
            passage: 0,
            text: "Der Laden öffnet um acht Uhr.".into(),
            vector: vec![1.0],
            relevance,
            coverage,
        };
        ev.sentences = vec![sentence(0.7, 0.25)];
        ev.relevance = 0.7;
        ev.coverage = 0.33;
        // A close embedding in the Latin script: answerable (a paraphrase).
        assert!(ev.answerable());
        // In another script the passages must hold some of what was asked: the embedder
        // places any two texts of a script it does not know close together.
        ev.latin = false;
        assert!(!ev.answerable() && !ev.strong());
        ev.latin = true;
        ev.sentences = vec![sentence(0.7, 0.5)];
        assert!(ev.answerable() && ev.strong());
        ev.latin = false;
        assert!(!latin_script("هل يوجد نادٍ رياضي في المكتب؟"));
        assert!(latin_script("Où est le café? P-104"));
        ev.coverage = 0.4;
        assert!(ev.answerable() && ev.strong());
        // Just under the strong cosine: quotable only when the sentence itself holds
        // most of the question's terms.
        ev.sentences = vec![sentence(0.54, 0.5)];
        ev.relevance = 0.54;
        assert!(ev.answerable() && !ev.strong());
        ev.sentences = vec![sentence(0.54, 0.8)];
        assert!(ev.strong());
        ev.beside = vec![true];
        assert!(!ev.strong() && ev.best_sentences(2, 0.1).is_empty());
    }

    #[test]
    fn the_answer_mode_says_whose_sentences_the_answer_holds() {
        let g = |generated, quoted| outcome_for_test().shown(generated, quoted).answer_mode();
        assert_eq!(
            g(0, 0),
            "extractive",
            "a refusal is no sentence of the model"
        );
        assert_eq!(g(0, 2), "extractive");
        assert_eq!(g(3, 0), "generative");
        assert_eq!(g(1, 2), "mixed");
    }

    fn outcome_for_test() -> Grounding {
        Grounding {
            outcome: "answered".into(),
            answerable: true,
            relevance: 0.7,
            coverage: 1.0,
            sentences: Vec::new(),
            supported: 0,
            unsupported: 0,
            off_topic: 0,
            generated_sentences: 0,
            extractive_sentences: 0,
            repeated: 0,
            method: METHOD.into(),
        }
    }

    #[test]
    fn citations_go_before_the_final_stop() {
        assert_eq!(cite("You get 25 days.", &[1, 2]), "You get 25 days [1][2].");
        assert_eq!(cite("No stop", &[3]), "No stop [3]");
        assert_eq!(cite("Same", &[]), "Same");
        assert!(not_in_sources_reply("متى يفتح المكتب؟").starts_with("لا"));
        assert!(not_in_sources_reply("When?").starts_with("The sources do not say"));
    }
}
