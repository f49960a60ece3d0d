//! The chat's knowledge-base answers: the turn's passages and what they offer, an answer
//! grounded in them (streamed as `/query` streams it: the quoted sentences at once, then
//! each checked sentence of the model), the extractive answer without an LLM, and an
//! `ask_knowledge_base` call whose answer is streamed while it runs.

use serde_json::Value;
use tokio::sync::mpsc;

use super::{emit, ChatEvent, ChatReply, ChatRequest, Result, ToolChoice, TURN_PASSAGES};
use crate::assistant::users::CurrentUser;
use crate::assistant::{Assistant, AssistantError};
use crate::kb::answer::{AnswerPiece, GenerateAnswer, Origin};
use crate::kb::grounding::Evidence;
use crate::kb::query::{QueryParams, QuerySource};
use crate::kb::search::SearchParams;

impl Assistant {
    /// No LLM: the knowledge base's extractive answer, sent as one piece.
    pub(super) async fn extractive_turn(
        &self,
        message: &str,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<ChatReply> {
        let answer = self
            .kb
            .query(QueryParams {
                question: message.to_owned(),
                top_k: TURN_PASSAGES,
                initial_k: 20,
                include_timing: false,
                include_context: false,
                temperature: None,
            })
            .await?;
        let origin = if answer.grounding.extractive_sentences > 0 {
            Origin::Extractive
        } else {
            Origin::NotInSources
        };
        let piece = AnswerPiece {
            text: answer.answer.clone(),
            origin,
        };
        emit(sink, ChatEvent::Answer(piece)).await?;
        Ok(ChatReply {
            conversation_id: String::new(),
            message_id: String::new(),
            response: answer.answer,
            tool_calls: Vec::new(),
            requires_confirmation: false,
            sources: answer.sources,
            answer_mode: answer.answer_mode,
            grounding: serde_json::to_value(&answer.grounding).ok(),
            tokens_in: 0,
            tokens_out: 0,
        })
    }

    /// The turn's knowledge-base passages and what they offer for the message (none when
    /// the turn names its tools or retrieval fails: the chat then goes on without them).
    pub(super) async fn turn_evidence(
        &self,
        req: &ChatRequest,
        message: &str,
    ) -> (Vec<crate::kb::SearchHit>, Option<Evidence>) {
        if matches!(req.tool_choice, ToolChoice::Required(_)) {
            return (Vec::new(), None);
        }
        let hits = match self
            .kb
            .retrieve(SearchParams {
                query: message.to_owned(),
                top_k: TURN_PASSAGES,
                initial_k: 20,
                mode: Default::default(),
            })
            .await
        {
            Ok(r) => r.hits,
            Err(e) => {
                tracing::warn!(error = %e, "chat retrieval failed; answering without sources");
                return (Vec::new(), None);
            }
        };
        if hits.is_empty() {
            return (hits, None);
        }
        match self.kb.evidence(message, &hits).await {
            Ok(e) => (hits, Some(e)),
            Err(e) => {
                tracing::warn!(error = %e, "chat evidence failed; answering without sources");
                (hits, None)
            }
        }
    }

    /// A knowledge-base answer without a tool call: generated from `hits`, checked
    /// sentence by sentence, each sentence sent as it passes.
    pub(super) async fn grounded_turn(
        &self,
        message: &str,
        hits: &[crate::kb::SearchHit],
        evidence: &Evidence,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<ChatReply> {
        // Each piece is sent as content as soon as it is ready (the quoted sentences at
        // once, then each checked sentence), as `/query` streams them.
        let (tx, mut rx) = mpsc::channel::<AnswerPiece>(16);
        let generate = async move {
            let tx = tx;
            self.kb
                .generate_answer(GenerateAnswer {
                    question: message,
                    hits,
                    evidence,
                    temperature: None,
                    sink: Some(&tx),
                })
                .await
        };
        // Owns the receiver: a client that leaves closes it, which stops the generation.
        let forward = async move {
            while let Some(piece) = rx.recv().await {
                emit(sink, ChatEvent::Answer(piece)).await?;
            }
            Ok::<(), AssistantError>(())
        };
        let (generated, forwarded) = tokio::join!(generate, forward);
        forwarded?;
        let Some(g) = generated? else {
            return self.extractive_turn(message, sink).await;
        };
        Ok(ChatReply {
            conversation_id: String::new(),
            message_id: String::new(),
            response: g.answer,
            tool_calls: Vec::new(),
            requires_confirmation: false,
            sources: hits[..g.passages_used.min(hits.len())]
                .iter()
                .map(QuerySource::from)
                .collect(),
            answer_mode: g.grounding.answer_mode().into(),
            grounding: serde_json::to_value(&g.grounding).ok(),
            tokens_in: g.generated.prompt_tokens as u64,
            tokens_out: g.generated.completion_tokens as u64,
        })
    }

    /// Runs a tool; the pieces of an `ask_knowledge_base` answer go to `sink` as content
    /// while it runs.
    pub(super) async fn run_forwarding(
        &self,
        user: &CurrentUser,
        name: &str,
        params: &Value,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<crate::assistant::tools::ToolOutcome> {
        let Some(sink) = sink else {
            return self.run_tool(user, name, params).await;
        };
        let (tx, mut rx) = mpsc::channel::<AnswerPiece>(16);
        let run = async move {
            let tx = tx;
            self.run_tool_streaming(user, name, params, Some(&tx)).await
        };
        // Owns the receiver: a client that leaves closes it, which stops the generation.
        let forward = async move {
            while let Some(piece) = rx.recv().await {
                emit(Some(sink), ChatEvent::Answer(piece)).await?;
            }
            Ok::<(), AssistantError>(())
        };
        let (outcome, forwarded) = tokio::join!(run, forward);
        forwarded?;
        outcome
    }
}
