//! Running tools: typed dispatch by name, timing, and the risk gate of `execute_tool`
//! (low and medium run at once; high becomes a pending action).

use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::kb_params::NoParams;
use super::ToolRegistry;
use crate::assistant::users::CurrentUser;
use crate::assistant::{Assistant, AssistantError};
use crate::kb::answer::AnswerPiece;

type Result<T> = std::result::Result<T, AssistantError>;

/// The outcome of running one tool (what the chat engine records as a tool call).
#[derive(Debug, Clone, Serialize)]
pub struct ToolOutcome {
    pub success: bool,
    /// The tool's result; `null` when it failed.
    pub result: Value,
    /// Why it failed (absent on success).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub execution_time_ms: f64,
}

/// What `execute_tool` answers: a result, or a pending confirmation.
#[derive(Debug, Clone, Serialize)]
pub struct ExecuteResult {
    pub tool_name: String,
    pub success: bool,
    pub result: Value,
    pub execution_time_ms: f64,
    pub requires_confirmation: bool,
    /// Set when `requires_confirmation`.
    pub action_id: Option<String>,
    /// When the pending action expires (set when `requires_confirmation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

fn params<P: DeserializeOwned>(v: Value) -> Result<P> {
    serde_json::from_value(v).map_err(|e| AssistantError::BadRequest(format!("params: {e}")))
}

fn millis(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

impl Assistant {
    /// Runs a low- or medium-risk tool for `user` after validating its params. Refusals
    /// (unknown tool 404, invalid params 400, admin-only 403, high risk 403: propose it
    /// with [`propose_action`](Self::propose_action)) are errors; a tool that ran and
    /// failed is `success: false` with the reason.
    #[tracing::instrument(skip_all, fields(user_id = %user.id, tool = %name))]
    pub async fn run_tool(
        &self,
        user: &CurrentUser,
        name: &str,
        params: &Value,
    ) -> Result<ToolOutcome> {
        self.run_tool_streaming(user, name, params, None).await
    }

    /// [`run_tool`](Self::run_tool), with the pieces of an `ask_knowledge_base` answer
    /// sent to `answers` as they are ready (as `/query` streams them); other tools ignore
    /// it.
    pub async fn run_tool_streaming(
        &self,
        user: &CurrentUser,
        name: &str,
        params: &Value,
        answers: Option<&mpsc::Sender<AnswerPiece>>,
    ) -> Result<ToolOutcome> {
        let spec = self.tools.require(name)?;
        ToolRegistry::check_allowed(spec, user)?;
        if spec.requires_confirmation() {
            return Err(AssistantError::Forbidden(format!(
                "tool '{}' is high-risk and runs only after confirmation",
                spec.name
            )));
        }
        let params = self.tools.validate(spec.name, params)?;
        let started = Instant::now();
        Ok(
            match self.invoke_with(user, spec.name, params, answers).await {
                Ok(result) => ToolOutcome {
                    success: true,
                    result,
                    error: None,
                    execution_time_ms: millis(started),
                },
                Err(e) => ToolOutcome {
                    success: false,
                    result: Value::Null,
                    error: Some(public_error(&e)),
                    execution_time_ms: millis(started),
                },
            },
        )
    }

    /// `execute_tool`: validates, then runs a low- or medium-risk tool at once, or holds a
    /// high-risk one as a pending action (never running it). A run that fails is the
    /// tool's error (e.g. 404 for an unknown document).
    #[tracing::instrument(skip_all, fields(user_id = %user.id, tool = %name))]
    pub async fn execute_tool(
        &self,
        user: &CurrentUser,
        name: &str,
        params: &Value,
    ) -> Result<ExecuteResult> {
        let spec = self.tools.require(name)?;
        ToolRegistry::check_allowed(spec, user)?;
        let params = self.tools.validate(spec.name, params)?;
        if spec.requires_confirmation() {
            let action = self.actions.propose(&user.id, spec.name, &params).await?;
            return Ok(ExecuteResult {
                tool_name: spec.name.to_owned(),
                success: true,
                result: Value::Null,
                execution_time_ms: 0.0,
                requires_confirmation: true,
                action_id: Some(action.action_id),
                expires_at: Some(action.expires_at),
            });
        }
        let started = Instant::now();
        let result = self.invoke(user, spec.name, params).await;
        let execution_time_ms = millis(started);
        tracing::info!(success = result.is_ok(), execution_time_ms, "tool executed");
        Ok(ExecuteResult {
            tool_name: spec.name.to_owned(),
            success: true,
            result: result?,
            execution_time_ms,
            requires_confirmation: false,
            action_id: None,
            expires_at: None,
        })
    }

    /// Runs a tool whose params are already validated and whose risk is already cleared
    /// (by the gate above or by a confirmation).
    pub(crate) async fn invoke(&self, user: &CurrentUser, name: &str, p: Value) -> Result<Value> {
        self.invoke_with(user, name, p, None).await
    }

    async fn invoke_with(
        &self,
        user: &CurrentUser,
        name: &str,
        p: Value,
        answers: Option<&mpsc::Sender<AnswerPiece>>,
    ) -> Result<Value> {
        match name {
            "search_knowledge_base" => self.tool_search_kb(params(p)?).await,
            "ask_knowledge_base" => self.tool_ask_kb(params(p)?, answers).await,
            "list_documents" => self.tool_list_documents(params(p)?).await,
            "get_document" => self.tool_get_document(params(p)?).await,
            "get_document_stats" => {
                params::<NoParams>(p)?;
                self.tool_document_stats().await
            }
            "list_sources" => {
                params::<NoParams>(p)?;
                self.tool_list_sources().await
            }
            "list_tasks" => self.tool_list_tasks(params(p)?).await,
            "get_task" => self.tool_get_task(params(p)?).await,
            "scrape_url" => self.tool_scrape_url(params(p)?).await,
            "upload_text" => self.tool_upload_text(params(p)?).await,
            "delete_document" => self.tool_delete_document(params(p)?).await,
            "delete_source" => self.tool_delete_source(params(p)?).await,
            "delete_by_filter" => self.tool_delete_by_filter(params(p)?).await,
            "search_conversations" => self.tool_search_conversations(user, params(p)?).await,
            "list_conversations" => self.tool_list_conversations(user, params(p)?).await,
            "get_current_datetime" => self.tool_current_datetime(params(p)?),
            "calculate" => self.tool_calculate(params(p)?),
            "update_setting" => self.tool_update_setting(params(p)?).await,
            other => Err(AssistantError::NotFound(format!(
                "tool '{other}' not found"
            ))),
        }
    }
}

/// What may be shown of an error: its message, except for internal errors (logged).
pub(crate) fn public_error(e: &AssistantError) -> String {
    match e {
        AssistantError::Internal(inner) => {
            tracing::error!(error = %format!("{inner:#}"), "tool failed");
            "internal error; see the server log".into()
        }
        other => other.to_string(),
    }
}
