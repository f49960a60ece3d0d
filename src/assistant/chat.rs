//! The chat engine: one user turn. It stores the message, retrieves knowledge-base
//! passages, and runs the LLM in a bounded tool loop: the model's tool calls (constrained
//! by the tools' schemas while they are written) are validated, then executed, proposed or
//! held for confirmation by risk and `auto_execute_tools`, and their results fed back.
//! Without an LLM the answer is the knowledge base's extractive one. Progress goes to an
//! optional event sink (the SSE stream); a closed sink stops the generation.

pub mod attachments;
pub mod prompt;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::conversations::{NewMessage, Role as StoredRole};
use super::tools::ToolInfo;
use super::users::CurrentUser;
use super::{Assistant, AssistantError};
use crate::kb::query::{QueryParams, QuerySource};
use crate::kb::search::SearchParams;
use crate::ml::llm::tool_grammar::{parse_calls, CallMode, ToolCallFilter, ToolGrammar, OPEN};
use crate::ml::llm::{ChatMessage, GenerateRequest, Generation, Role, SharedGenerator};

type Result<T> = std::result::Result<T, AssistantError>;

/// Most model rounds in one turn (each may call tools).
pub const MAX_ROUNDS: usize = 4;
/// Passages retrieved for a turn.
const TURN_PASSAGES: usize = 3;
/// Messages of history read for the prompt (the window decides how many are used).
const HISTORY_MESSAGES: u64 = 40;
/// Longest answer a request may ask for.
pub const MAX_TOKENS_LIMIT: usize = 4096;

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
    /// `generative` (the LLM) or `extractive` (no LLM).
    pub answer_mode: String,
    #[serde(skip)]
    pub tokens_in: u64,
    #[serde(skip)]
    pub tokens_out: u64,
}

/// Emits text until a tool call opens, holding back what might be the opener's start.
#[derive(Default)]
struct ContentGate {
    pending: String,
    closed: bool,
}

impl ContentGate {
    fn push(&mut self, piece: &str) -> String {
        if self.closed {
            return String::new();
        }
        self.pending.push_str(piece);
        if let Some(p) = self.pending.find(OPEN) {
            self.closed = true;
            let out = self.pending[..p].to_owned();
            self.pending.clear();
            return out;
        }
        let keep = (1..OPEN.len())
            .rev()
            .find(|&n| self.pending.ends_with(&OPEN[..n]))
            .unwrap_or(0);
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_owned();
        self.pending.drain(..cut);
        out
    }

    fn finish(&mut self) -> String {
        if self.closed {
            String::new()
        } else {
            std::mem::take(&mut self.pending)
        }
    }
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

        let mut reply = match self.models.llm.clone() {
            None => self.extractive_turn(&message, sink).await?,
            Some(llm) => {
                self.generative_turn(user, &req, &message, history, llm, sink)
                    .await?
            }
        };
        let mut stored = NewMessage::text(StoredRole::Assistant, reply.response.clone());
        stored.tool_calls = (!reply.tool_calls.is_empty())
            .then(|| serde_json::to_value(&reply.tool_calls).unwrap_or_default());
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

    /// No LLM: the knowledge base's extractive answer, sent as one piece.
    async fn extractive_turn(
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
        emit(sink, ChatEvent::Content(answer.answer.clone())).await?;
        Ok(ChatReply {
            conversation_id: String::new(),
            message_id: String::new(),
            response: answer.answer,
            tool_calls: Vec::new(),
            requires_confirmation: false,
            sources: answer.sources,
            answer_mode: "extractive".into(),
            tokens_in: 0,
            tokens_out: 0,
        })
    }

    async fn generative_turn(
        &self,
        user: &CurrentUser,
        req: &ChatRequest,
        message: &str,
        history: Vec<ChatMessage>,
        llm: SharedGenerator,
        sink: Option<&mpsc::Sender<ChatEvent>>,
    ) -> Result<ChatReply> {
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
                Vec::new()
            }
        };
        let tools: Vec<ToolInfo> = match &req.tool_choice {
            ToolChoice::None => Vec::new(),
            ToolChoice::Auto => self.tools.list(None, true, user)?,
            ToolChoice::Required(name) => self
                .tools
                .list(None, true, user)?
                .into_iter()
                .filter(|t| t.tool_name == name)
                .collect(),
        };
        let attachments: String = req
            .attachments
            .iter()
            .map(|a| format!("--- {} ---\n{}", a.filename, a.text))
            .collect::<Vec<_>>()
            .join("\n\n");
        let system =
            prompt::system_message(req.system_prompt.as_deref(), &tools, &hits, &attachments);
        let grammar = (!tools.is_empty()).then(|| {
            ToolGrammar::new(
                tools
                    .iter()
                    .map(|t| (t.tool_name, t.schema.as_ref().unwrap_or(&Value::Null))),
            )
        });
        let max_tokens = req.max_tokens.unwrap_or(self.config.llm_max_tokens);
        let mut turn = vec![ChatMessage::new(Role::User, message)];
        let mut records: Vec<ToolCallRecord> = Vec::new();
        let (mut tokens_in, mut tokens_out) = (0u64, 0u64);
        let mut response = String::new();
        for round in 0..MAX_ROUNDS {
            let (prompt, room) = {
                let llm = llm.clone();
                let (system, history, turn) = (system.clone(), history.clone(), turn.clone());
                tokio::task::spawn_blocking(move || {
                    prompt::build(llm.as_ref(), &system, &history, &turn, max_tokens)
                })
                .await
                .map_err(|e| AssistantError::Internal(e.into()))?
                .map_err(AssistantError::BadRequest)?
            };
            let mut request = GenerateRequest::new(prompt);
            request.params.max_tokens = room;
            request.params.temperature = self.config.llm_temperature;
            if let Some(g) = &grammar {
                let mode = match (&req.tool_choice, round) {
                    (ToolChoice::Required(_), 0) => CallMode::Required,
                    _ => CallMode::Auto,
                };
                request.filter = Some(Box::new(ToolCallFilter::new(g.clone(), mode)));
            }
            let output = self
                .generate_round(llm.as_ref(), request, sink, &mut tokens_in, &mut tokens_out)
                .await?;
            let (text, calls) = if grammar.is_some() {
                parse_calls(&output)
            } else {
                (output.trim().to_owned(), Vec::new())
            };
            response = text.clone();
            if calls.is_empty() {
                break;
            }
            let mut fed_back = Vec::new();
            let mut must_stop = false;
            for call in calls {
                let record = self
                    .handle_call(user, call, req.auto_execute_tools, sink)
                    .await?;
                must_stop |= matches!(record.status.as_str(), "proposed" | "pending_confirmation");
                fed_back.push(json!({
                    "tool_name": record.tool_name,
                    "success": record.status == "executed",
                    "result": record.result,
                    "error": record.error,
                }));
                records.push(record);
            }
            if must_stop || round + 1 == MAX_ROUNDS {
                break;
            }
            turn.push(ChatMessage::new(
                Role::Assistant,
                format!(
                    "{text}{}",
                    call_texts(&records[records.len() - fed_back.len()..])
                ),
            ));
            turn.push(ChatMessage::new(
                Role::Tool,
                Value::Array(fed_back).to_string(),
            ));
        }
        if response.is_empty() && !records.is_empty() {
            response = summary_of(&records);
            emit(sink, ChatEvent::Content(response.clone())).await?;
        }
        Ok(ChatReply {
            conversation_id: String::new(),
            message_id: String::new(),
            requires_confirmation: records.iter().any(|r| r.status == "pending_confirmation"),
            response,
            tool_calls: records,
            sources: hits.iter().map(QuerySource::from).collect(),
            answer_mode: "generative".into(),
            tokens_in,
            tokens_out,
        })
    }

    /// One generation; its text before any tool call is streamed as content.
    async fn generate_round(
        &self,
        llm: &dyn crate::ml::llm::Generator,
        request: GenerateRequest,
        sink: Option<&mpsc::Sender<ChatEvent>>,
        tokens_in: &mut u64,
        tokens_out: &mut u64,
    ) -> Result<String> {
        let ml = |e: crate::ml::MlError| AssistantError::from(crate::error::Error::from(e));
        let mut generation = Generation::start(llm, request).map_err(ml)?;
        let mut gate = ContentGate::default();
        let mut output = String::new();
        while let Some(piece) = generation.next_text().await.map_err(ml)? {
            output.push_str(&piece);
            let shown = gate.push(&piece);
            if !shown.is_empty() {
                emit(sink, ChatEvent::Content(shown)).await?;
            }
        }
        let f = generation.finished();
        *tokens_in += f.prompt_tokens as u64;
        *tokens_out += f.completion_tokens as u64;
        let rest = gate.finish();
        if !rest.is_empty() {
            emit(sink, ChatEvent::Content(rest)).await?;
        }
        Ok(output)
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
            Ok((false, params)) => match self.run_tool(user, &call.name, &params).await {
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

/// The calls of a round as the model wrote them (fed back as its own turn).
fn call_texts(records: &[ToolCallRecord]) -> String {
    records
        .iter()
        .map(|r| {
            format!(
                "{OPEN}{}{}",
                json!({"name": r.tool_name, "arguments": r.params}),
                crate::ml::llm::tool_grammar::CLOSE
            )
        })
        .collect()
}

/// What the turn did, when the model wrote no text of its own.
fn summary_of(records: &[ToolCallRecord]) -> String {
    records
        .iter()
        .map(|r| match r.status.as_str() {
            "pending_confirmation" => format!(
                "{} needs your confirmation (action {}).",
                r.tool_name,
                r.action_id.as_deref().unwrap_or("")
            ),
            "proposed" => format!("Proposed: {} with {}.", r.tool_name, r.params),
            "executed" => format!("{} ran: {}", r.tool_name, r.result),
            _ => format!(
                "{} failed: {}",
                r.tool_name,
                r.error.as_deref().unwrap_or("unknown error")
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_streams_text_and_hides_the_call() {
        let mut g = ContentGate::default();
        let mut shown = String::new();
        for piece in ["Let me ", "check <to", "ol_call>{\"name\"", ": \"x\"}"] {
            shown.push_str(&g.push(piece));
        }
        shown.push_str(&g.finish());
        assert_eq!(shown, "Let me check ");
        let mut g = ContentGate::default();
        assert_eq!(g.push("a <b"), "a <b");
        assert_eq!(g.push(" <"), " ");
        assert_eq!(g.finish(), "<");
    }
}
