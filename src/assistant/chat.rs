//! The chat engine: one user turn. It stores the message, retrieves knowledge-base
//! passages, and runs the LLM in a bounded tool loop: the model's tool calls (constrained
//! by the tools' schemas while they are written) are validated, then executed, proposed or
//! held for confirmation by risk and `auto_execute_tools`, and their results fed back.
//! Each round is one call of the stateless completion core (`ml::llm::completion`).
//! Without an LLM the answer is the knowledge base's extractive one. Progress goes to an
//! optional event sink (the SSE stream); a closed sink stops the generation.

pub mod attachments;
mod knowledge;
pub mod prompt;
mod results;
pub mod router;
pub mod slots;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::conversations::{NewMessage, Role as StoredRole};
use super::tools::ToolInfo;
use super::users::CurrentUser;
use super::{Assistant, AssistantError};
use crate::kb::answer::AnswerPiece;
use crate::kb::query::QuerySource;
use crate::ml::llm::completion::{Completion, CompletionEvent, CompletionRequest};
use crate::ml::llm::tool_grammar::{CallMode, ParsedCall, ToolGrammar};
use crate::ml::llm::{ChatMessage, GenerationParams, Role, SharedGenerator, ToolCall};
use results::{fed_back_result, summary_of};
use router::Decision;

type Result<T> = std::result::Result<T, AssistantError>;

/// Most model rounds in one turn (each may call tools).
pub const MAX_ROUNDS: usize = 4;
/// Passages retrieved for a turn: as many as `/query` answers from by default, so the
/// chat's knowledge-base answers are the answers `/query` gives.
const TURN_PASSAGES: usize = 5;
/// Messages of history read for the prompt (the window decides how many are used).
const HISTORY_MESSAGES: u64 = 40;
/// Longest answer a request may ask for.
pub const MAX_TOKENS_LIMIT: usize = 4096;
/// Past its deadline, how often a turn's round checks whether others now wait on the
/// model.
const LATE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// One model round's outcome.
struct Round {
    /// Its text, trimmed, calls removed.
    text: String,
    calls: Vec<std::result::Result<ParsedCall, String>>,
}

/// Which tools the model may call this turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tools are offered.
    None,
    /// The first round must be a call of this tool.
    Required(String),
}

/// A file attached to the message, already turned into text.
#[derive(Debug, Clone, Serialize)]
pub struct Attachment {
    pub filename: String,
    pub size: u64,
    /// `document` or `image`.
    pub kind: String,
    /// Characters of text taken from it.
    pub chars: usize,
    #[serde(skip)]
    pub text: String,
}

/// One user turn.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub user_message: String,
    pub conversation_id: Option<String>,
    pub auto_execute_tools: bool,
    pub system_prompt: Option<String>,
    pub max_tokens: Option<usize>,
    pub tool_choice: ToolChoice,
    pub attachments: Vec<Attachment>,
}

/// A tool call of the turn, as the response lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallRecord {
    pub tool_name: String,
    pub params: Value,
    /// `executed`, `failed`, `proposed` or `pending_confirmation`.
    pub status: String,
    pub result: Value,
    pub execution_time_ms: f64,
    pub action_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Progress of a turn, for streaming.
#[derive(Debug, Clone)]
pub enum ChatEvent {
    /// Text of the answer.
    Content(String),
    /// A piece of a knowledge-base answer (text, with where it comes from: quoted from
    /// the sources, or a checked sentence of the model).
    Answer(AnswerPiece),
    /// A tool is about to run (or be held).
    ToolStart { tool_name: String, params: Value },
    /// A tool's outcome.
    ToolResult(ToolCallRecord),
}

/// The turn's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ChatReply {
    pub conversation_id: String,
    pub message_id: String,
    pub response: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub requires_confirmation: bool,
    pub sources: Vec<QuerySource>,
    /// Where the reply's text comes from: `generative` (the LLM; for a knowledge-base
    /// answer, only its checked sentences), `mixed` (sentences quoted from the sources,
    /// then the LLM's), or `extractive` (no sentence of the LLM: the sources' own, or the
    /// statement that they do not hold the answer). See `grounding` for the counts.
    pub answer_mode: String,
    /// What was checked of a knowledge-base answer against its sources (the `grounding`
    /// of `/query`); absent when the reply is not one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grounding: Option<Value>,
    #[serde(skip)]
    pub tokens_in: u64,
    #[serde(skip)]
    pub tokens_out: u64,
}

async fn emit(sink: Option<&mpsc::Sender<ChatEvent>>, event: ChatEvent) -> Result<()> {
    if let Some(s) = sink {
        if s.send(event).await.is_err() {
            tracing::info!("client went away; chat stopped");
            return Err(AssistantError::from(crate::error::Error::Cancelled));
        }
    }
    Ok(())
}

impl Assistant {
    /// Runs one user turn (see the module docs).
    #[tracing::instrument(skip_all, fields(user_id = %user.id))]
    pub async fn chat(
        &self,
        user: &CurrentUser,
        req: ChatRequest,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<ChatReply> {
        let message = req.user_message.trim().to_owned();
        if message.is_empty() {
            return Err(AssistantError::BadRequest(
                "user_message must not be empty".into(),
            ));
        }
        if let Some(n) = req.max_tokens {
            if n == 0 || n > MAX_TOKENS_LIMIT {
                return Err(AssistantError::BadRequest(format!(
                    "max_tokens must be between 1 and {MAX_TOKENS_LIMIT}, got {n}"
                )));
            }
        }
        if let ToolChoice::Required(name) = &req.tool_choice {
            let spec = self.tools.require(name)?;
            super::tools::ToolRegistry::check_allowed(spec, user)?;
        }
        // A turn retrieves from the knowledge base unless it names its tool (without an
        // LLM it always does): refused, before anything is stored, while the stored
        // vectors are another embedder's.
        if self.models.llm.is_none() || !matches!(req.tool_choice, ToolChoice::Required(_)) {
            self.kb.ensure_searchable()?;
        }
        let started = std::time::Instant::now();
        let conversation_id = match &req.conversation_id {
            Some(id) => self.conversations.get(&user.id, id).await?.conversation_id,
            // Untitled: the service names it after the first user message.
            None => {
                self.conversations
                    .create(&user.id, None)
                    .await?
                    .conversation_id
            }
        };
        // Earlier messages, read before this one is stored.
        let history = self.history_for_prompt(user, &conversation_id).await?;
        let attachments_meta = (!req.attachments.is_empty())
            .then(|| serde_json::to_value(&req.attachments).unwrap_or_default());
        let mut user_msg = NewMessage::text(StoredRole::User, message.clone());
        user_msg.attachments = attachments_meta;
        self.conversations
            .append(&user.id, &conversation_id, user_msg)
            .await?;

        // The turn's deadline: as long as a generated `/query` answer may take. The answers
        // its tools generate keep to it as well (`answer_by`).
        let by = tokio::time::Instant::now() + self.kb.llm_defaults().deadline;
        let mut reply = match self.models.llm.current() {
            None => self.extractive_turn(&message, sink).await?,
            Some(llm) => {
                let turn = self.generative_turn(user, &req, &message, history, llm, sink, by);
                crate::kb::answer::answer_by(by, turn).await?
            }
        };
        let mut stored = NewMessage::text(StoredRole::Assistant, reply.response.clone());
        stored.tool_calls = (!reply.tool_calls.is_empty())
            .then(|| serde_json::to_value(&reply.tool_calls).unwrap_or_default());
        // Kept with the message, so that a reopened conversation shows its citations.
        stored.answer = Some(json!({
            "answer_mode": reply.answer_mode,
            "sources": reply.sources,
            "grounding": reply.grounding,
        }));
        stored.tokens_in = reply.tokens_in;
        stored.tokens_out = reply.tokens_out;
        let saved = self
            .conversations
            .append(&user.id, &conversation_id, stored)
            .await?;
        reply.conversation_id = conversation_id;
        reply.message_id = saved.message_id;
        tracing::info!(
            conversation_id = %reply.conversation_id,
            mode = %reply.answer_mode,
            tool_calls = reply.tool_calls.len(),
            tokens_in = reply.tokens_in,
            tokens_out = reply.tokens_out,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "chat turn"
        );
        Ok(reply)
    }

    async fn history_for_prompt(
        &self,
        user: &CurrentUser,
        conversation_id: &str,
    ) -> Result<Vec<ChatMessage>> {
        let recent = self
            .conversations
            .recent(&user.id, conversation_id, HISTORY_MESSAGES)
            .await?;
        Ok(recent
            .into_iter()
            .filter_map(|m| {
                let role = match m.role.as_str() {
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    _ => return None,
                };
                Some(ChatMessage::new(role, m.content))
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    async fn generative_turn(
        &self,
        user: &CurrentUser,
        req: &ChatRequest,
        message: &str,
        history: Vec<ChatMessage>,
        llm: SharedGenerator,
        sink: Option<&mpsc::Sender<ChatEvent>>,
        by: tokio::time::Instant,
    ) -> Result<ChatReply> {
        // A long message is routed and answered by its question part (see
        // `crate::kb::question`); the model still reads it whole where it writes freely.
        let asked = crate::kb::question::question_part(message);
        let (hits, evidence) = self.turn_evidence(req, &asked).await;
        let kb_answers = evidence.as_ref().is_some_and(|e| e.answerable());
        let kb = router::KbSignal {
            answerable: kb_answers,
            relevance: evidence.as_ref().map_or(0.0, |e| e.relevance),
        };
        let mut kb_question = kb_answers;
        let mut question = false;
        let (tools, first_mode): (Vec<ToolInfo>, CallMode) = match &req.tool_choice {
            ToolChoice::None => (Vec::new(), CallMode::Auto),
            ToolChoice::Required(name) => (
                self.tools
                    .list(None, true, user)?
                    .into_iter()
                    .filter(|t| t.tool_name == name)
                    .collect(),
                CallMode::Required,
            ),
            ToolChoice::Auto => {
                let all = self.tools.list(None, true, user)?;
                let route = self
                    .router
                    .route(self.kb.embedder(), &asked, &all, kb)
                    .await
                    .map_err(|e| AssistantError::from(crate::error::Error::from(e)))?;
                kb_question = route.kb_question;
                question = route.question;
                let (names, mode) = match route.decision {
                    // A question for the knowledge base that no tool clearly fits.
                    Decision::Offer(_) | Decision::NoTool if route.kb_question => {
                        (Vec::new(), CallMode::Auto)
                    }
                    Decision::Call(names) => (names, CallMode::Required),
                    Decision::Offer(names) => (names, CallMode::Auto),
                    Decision::NoTool => (Vec::new(), CallMode::Auto),
                };
                let offered = names
                    .iter()
                    .filter_map(|n| all.iter().find(|t| t.tool_name == n).cloned())
                    .collect();
                (offered, mode)
            }
        };
        // No tool, and a question the knowledge base holds or is near: a grounded answer
        // from it, or the statement that its sources do not hold one.
        if tools.is_empty() && kb_question && req.attachments.is_empty() {
            if let Some(evidence) = &evidence {
                return self.grounded_turn(&asked, &hits, evidence, sink).await;
            }
        }
        let attachments: String = req
            .attachments
            .iter()
            .map(|a| format!("--- {} ---\n{}", a.filename, a.text))
            .collect::<Vec<_>>()
            .join("\n\n");
        let system = prompt::system_message(req.system_prompt.as_deref());
        // Routed turns pin the arguments the message states (see `slots`).
        let top_source = hits.first().map(|h| h.source.as_str());
        let schemas: Vec<Value> = tools
            .iter()
            .map(|t| {
                let schema = t.schema.clone().unwrap_or(Value::Null);
                if req.tool_choice != ToolChoice::Auto {
                    return schema;
                }
                let pinned = slots::read(t.tool_name, message, top_source);
                if !pinned.is_empty() {
                    let shown = serde_json::to_string(&pinned).unwrap_or_default();
                    tracing::info!(tool = t.tool_name, pinned = %shown, "arguments read from the message");
                }
                slots::pin(&schema, &pinned)
            })
            .collect();
        let grammar = (!tools.is_empty())
            .then(|| ToolGrammar::new(tools.iter().zip(&schemas).map(|(t, s)| (t.tool_name, s))));
        // When the router chose one tool and the message states every argument it needs,
        // a call the model starts but fails to write (cut off, or text its tokenizer
        // cannot spell under the grammar) is replaced by that reading.
        let fallback = match (&req.tool_choice, first_mode, tools.as_slice()) {
            (ToolChoice::Auto, CallMode::Required, [only]) => {
                let arguments = Value::Object(slots::read(only.tool_name, message, top_source));
                self.tools
                    .validate(only.tool_name, &arguments)
                    .ok()
                    .map(|_| ParsedCall {
                        name: only.tool_name.to_owned(),
                        arguments,
                    })
            }
            _ => None,
        };
        // For `ask_knowledge_base` that reading is the call: its one argument is the
        // question, which the model, held to that value by the grammar, would only copy
        // out token by token (~0.6 s with SmolLM2). Its optional `top_k` keeps its default.
        let direct = fallback.clone().filter(|c| c.name == "ask_knowledge_base");
        let max_tokens = req.max_tokens.unwrap_or(self.config.llm_max_tokens);
        // A model whose template shows tool definitions gets them there, in its own
        // format; for the others the turn's message describes them.
        let (tool_specs, described): (Vec<Value>, &[ToolInfo]) = if llm.info().template_tools {
            let specs = tools
                .iter()
                .zip(&schemas)
                .map(|(t, schema)| {
                    json!({"type": "function", "function": {
                        "name": t.tool_name,
                        "description": t.description,
                        "parameters": schema,
                    }})
                })
                .collect();
            (specs, &[])
        } else {
            (Vec::new(), &tools)
        };
        let mut turn = vec![ChatMessage::new(
            Role::User,
            prompt::turn_message(message, described, &attachments),
        )];
        let mut records: Vec<ToolCallRecord> = Vec::new();
        let (mut tokens_in, mut tokens_out) = (0u64, 0u64);
        let mut response = String::new();
        let mut kb_answer: Option<Value> = None;
        // A question with tools merely offered: if the model answers it without calling
        // one, that answer comes from the small model's own "knowledge". Its first round
        // is therefore held back, and a reply without a call is replaced by one grounded
        // in the knowledge base (or the statement that its sources do not hold it).
        let ground_if_no_call = question
            && first_mode == CallMode::Auto
            && !tools.is_empty()
            && evidence.is_some()
            && req.attachments.is_empty();
        for round in 0..MAX_ROUNDS {
            let request = CompletionRequest {
                system: system.clone(),
                history: history.clone(),
                messages: turn.clone(),
                tools: grammar.clone(),
                tool_specs: tool_specs.clone(),
                call_mode: if round == 0 {
                    first_mode
                } else {
                    CallMode::Auto
                },
                params: GenerationParams {
                    max_tokens,
                    temperature: self.config.llm_temperature,
                    ..Default::default()
                },
            };
            let held = round == 0 && ground_if_no_call;
            let Round { text, calls } = if let (0, Some(call)) = (round, &direct) {
                tracing::info!(tool = %call.name, "the question is the call's argument: called without generating");
                Round {
                    text: String::new(),
                    calls: vec![Ok(call.clone())],
                }
            } else {
                // The first round is the request itself (a busy model refuses it with a
                // 429, as any request); a later one comes after tools have run, so a busy
                // model that would not be done by the deadline ends the turn with what
                // it has instead.
                let within =
                    (round > 0).then(|| by.saturating_duration_since(tokio::time::Instant::now()));
                let tokens = (&mut tokens_in, &mut tokens_out);
                match self
                    .generate_round(llm.clone(), request, sink, held, tokens, within, by)
                    .await?
                {
                    Some(r) => r,
                    None => {
                        tracing::info!(
                            round,
                            "the model would not be done by the turn's deadline; the turn ends with its tool results"
                        );
                        response.clear();
                        break;
                    }
                }
            };
            if held {
                if let (true, Some(evidence)) = (calls.is_empty(), &evidence) {
                    tracing::info!(
                        "a question answered without the offered tools: answered from the knowledge base"
                    );
                    let mut reply = self.grounded_turn(message, &hits, evidence, sink).await?;
                    reply.tokens_in += tokens_in;
                    reply.tokens_out += tokens_out;
                    return Ok(reply);
                }
                if !text.is_empty() {
                    emit(sink, ChatEvent::Content(text.clone())).await?;
                }
            }
            let mut calls = calls;
            if let (0, Some(f)) = (round, &fallback) {
                for c in calls.iter_mut().filter(|c| c.is_err()) {
                    tracing::info!(error = ?c, tool = %f.name, "the model's call did not parse; the arguments read from the message stand in");
                    *c = Ok(f.clone());
                }
            }
            response = text.clone();
            if calls.is_empty() {
                break;
            }
            let mut fed_back = Vec::new();
            let mut must_stop = false;
            for call in calls {
                // A small model may ask again for what it was just given: the turn ends
                // with what it has rather than looping.
                if let Ok(c) = &call {
                    if records
                        .iter()
                        .any(|r| r.tool_name == c.name && r.params == c.arguments)
                    {
                        tracing::info!(tool = %c.name, "the model repeated a call; the turn ends");
                        must_stop = true;
                        continue;
                    }
                }
                let record = self
                    .handle_call(user, call, req.auto_execute_tools, sink)
                    .await?;
                must_stop |= matches!(record.status.as_str(), "proposed" | "pending_confirmation");
                if record.tool_name == "ask_knowledge_base" && record.status == "executed" {
                    kb_answer = Some(record.result.clone());
                }
                fed_back.push(json!({
                    "tool_name": record.tool_name,
                    "success": record.status == "executed",
                    "result": fed_back_result(&record.result),
                    "error": record.error,
                }));
                records.push(record);
            }
            // A knowledge-base answer is already written and checked against its sources:
            // it is the reply, not material for the model to retell.
            if kb_answer.is_some() || must_stop || round + 1 == MAX_ROUNDS {
                break;
            }
            // The calls and their results as the template expects them: structured calls
            // on the assistant's message, one tool message per result.
            let calls: Vec<ToolCall> = records[records.len() - fed_back.len()..]
                .iter()
                .enumerate()
                .map(|(i, r)| ToolCall {
                    id: ToolCall::id_for(records.len() - fed_back.len() + i + 1),
                    name: r.tool_name.clone(),
                    arguments: r.params.clone(),
                })
                .collect();
            turn.push(ChatMessage::assistant_calls(text.clone(), calls.clone()));
            for (call, result) in calls.iter().zip(fed_back) {
                turn.push(ChatMessage::tool_result(call, result.to_string()));
            }
        }
        let (mut sources, mut grounding) = (Vec::new(), None);
        let mut answer_mode = "generative".to_owned();
        if let Some(r) = kb_answer {
            let answer = r["answer"].as_str().unwrap_or_default().to_owned();
            let kb_mode = r["answer_mode"].as_str().unwrap_or("extractive");
            answer_mode = match (response.is_empty(), kb_mode) {
                (true, mode) => mode.to_owned(),
                // The model's own words before the call, then quoted sentences.
                (false, "extractive" | "mixed") => "mixed".to_owned(),
                (false, _) => "generative".to_owned(),
            };
            response = if response.is_empty() {
                answer
            } else {
                format!("{response} {answer}")
            };
            // With a sink the answer's pieces were streamed as the tool ran.
            if sink.is_none() {
                emit(sink, ChatEvent::Content(response.clone())).await?;
            }
            sources = serde_json::from_value(r["sources"].clone()).unwrap_or_default();
            grounding = Some(r["grounding"].clone());
        } else if response.is_empty() && !records.is_empty() {
            response = summary_of(&records);
            emit(sink, ChatEvent::Content(response.clone())).await?;
        }
        Ok(ChatReply {
            conversation_id: String::new(),
            message_id: String::new(),
            requires_confirmation: records.iter().any(|r| r.status == "pending_confirmation"),
            response,
            tool_calls: records,
            sources,
            answer_mode,
            grounding,
            tokens_in,
            tokens_out,
        })
    }

    /// One round through the completion core; returns the text (trimmed, calls removed)
    /// and the calls. Its text is streamed as content as it comes, unless the round is
    /// `held`: then only whether the model opens with a tool call matters. Its first
    /// words of text answer that (a model that calls a tool writes the call first), so
    /// the generation stops there, its text not shown; only a call is read to its end.
    ///
    /// With `within`, `None` when a busy model would not be done within it (nothing was
    /// generated). Past `by`, the turn's deadline, the round stops as soon as others wait
    /// on the model: its text so far stands, and a call it had begun is dropped. A model
    /// that serves this turn alone finishes it.
    #[allow(clippy::too_many_arguments)]
    async fn generate_round(
        &self,
        llm: SharedGenerator,
        request: CompletionRequest,
        sink: Option<&mpsc::Sender<ChatEvent>>,
        held: bool,
        tokens: (&mut u64, &mut u64),
        within: Option<std::time::Duration>,
        by: tokio::time::Instant,
    ) -> Result<Option<Round>> {
        let ml = |e: crate::ml::MlError| AssistantError::from(crate::error::Error::from(e));
        let started = match within {
            None => Completion::start(llm.clone(), request).await,
            Some(within) => Completion::start_within(llm.clone(), request, within).await,
        };
        let mut completion = match started {
            Ok(c) => c,
            Err(crate::ml::MlError::Overloaded) if within.is_some() => return Ok(None),
            Err(e) => return Err(ml(e)),
        };
        let mut calls = Vec::new();
        loop {
            let now = tokio::time::Instant::now();
            if now >= by && llm.in_flight() > 1 {
                let text = completion.cut().to_owned();
                *tokens.0 += completion.prompt_tokens() as u64;
                *tokens.1 += completion.pieces() as u64;
                tracing::info!(
                    in_flight = llm.in_flight(),
                    "the chat turn ran past its deadline while others wait on the model; its generation stopped"
                );
                return Ok(Some(Round {
                    text,
                    calls: Vec::new(),
                }));
            }
            let until = if now < by { by } else { now + LATE_POLL };
            let Ok(event) = tokio::time::timeout_at(until, completion.next()).await else {
                continue;
            };
            let Some(event) = event.map_err(ml)? else {
                break;
            };
            match event {
                CompletionEvent::Text(t) if held && t.trim().is_empty() => {}
                CompletionEvent::Text(t) if held => {
                    tracing::debug!(text = %t, "the model answered without a call");
                    return Ok(Some(Round {
                        text: t,
                        calls: Vec::new(),
                    }));
                }
                CompletionEvent::Text(t) => emit(sink, ChatEvent::Content(t)).await?,
                CompletionEvent::Call(c) => calls.push(c),
            }
        }
        let f = completion.finished();
        *tokens.0 += f.prompt_tokens as u64;
        *tokens.1 += f.completion_tokens as u64;
        Ok(Some(Round {
            text: completion.text().to_owned(),
            calls,
        }))
    }

    /// Validates a parsed call, then runs, proposes or holds it.
    async fn handle_call(
        &self,
        user: &CurrentUser,
        call: std::result::Result<crate::ml::llm::tool_grammar::ParsedCall, String>,
        auto_execute: bool,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<ToolCallRecord> {
        let failed = |name: String, params: Value, error: String| ToolCallRecord {
            tool_name: name,
            params,
            status: "failed".into(),
            result: Value::Null,
            execution_time_ms: 0.0,
            action_id: None,
            error: Some(error),
        };
        let call = match call {
            Ok(c) => c,
            Err(e) => {
                let r = failed(String::new(), Value::Null, e);
                emit(sink, ChatEvent::ToolResult(r.clone())).await?;
                return Ok(r);
            }
        };
        emit(
            sink,
            ChatEvent::ToolStart {
                tool_name: call.name.clone(),
                params: call.arguments.clone(),
            },
        )
        .await?;
        let checked = self.tools.require(&call.name).and_then(|spec| {
            super::tools::ToolRegistry::check_allowed(spec, user)?;
            Ok((
                spec.requires_confirmation(),
                self.tools.validate(spec.name, &call.arguments)?,
            ))
        });
        let record = match checked {
            Err(e) => failed(call.name, call.arguments, e.to_string()),
            Ok((true, params)) => {
                let action = self.actions.propose(&user.id, &call.name, &params).await?;
                ToolCallRecord {
                    tool_name: call.name,
                    params,
                    status: "pending_confirmation".into(),
                    result: Value::Null,
                    execution_time_ms: 0.0,
                    action_id: Some(action.action_id),
                    error: None,
                }
            }
            Ok((false, params)) if !auto_execute => ToolCallRecord {
                tool_name: call.name,
                params,
                status: "proposed".into(),
                result: Value::Null,
                execution_time_ms: 0.0,
                action_id: None,
                error: None,
            },
            Ok((false, params)) => match self.run_forwarding(user, &call.name, &params, sink).await
            {
                Ok(out) => ToolCallRecord {
                    tool_name: call.name,
                    params,
                    status: if out.success { "executed" } else { "failed" }.into(),
                    result: out.result,
                    execution_time_ms: out.execution_time_ms,
                    action_id: None,
                    error: out.error,
                },
                Err(e) => failed(call.name, params, e.to_string()),
            },
        };
        tracing::info!(tool = %record.tool_name, status = %record.status, "tool call");
        emit(sink, ChatEvent::ToolResult(record.clone())).await?;
        Ok(record)
    }
}
