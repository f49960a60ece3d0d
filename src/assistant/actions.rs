//! Pending actions: a high-risk tool call held until its user confirms or rejects it.
//!
//! States: `pending` -> `executed` | `failed` (by confirm) | `rejected` (with a reason) |
//! `expired` (after `action_ttl_secs` by the server's clock). While a confirmed tool runs
//! the action is `executing`, so a second confirmation cannot run it twice; one left
//! `executing` by a crash is marked `failed` at start-up. Expiry is applied lazily before
//! every read and decision (and by the sweeper), so it needs no timer. Confirming or
//! rejecting anything but a pending action is a 409; another user's action is a 404.

use serde::Serialize;
use serde_json::Value;

use super::tools::run_public_error;
use super::users::CurrentUser;
use super::{Assistant, AssistantError};
use crate::store::actions::{self as repo, ActionRow, NewAction};
use crate::store::Store;
use crate::time::{format_iso, Clock};

type Result<T> = std::result::Result<T, AssistantError>;

/// Longest rejection reason, in characters.
const MAX_REASON_CHARS: usize = 1000;

/// An action as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ActionView {
    pub action_id: String,
    pub tool_name: String,
    pub params: Value,
    pub status: String,
    pub reason: Option<String>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub expires_at: String,
    pub decided_at: Option<String>,
}

impl From<ActionRow> for ActionView {
    fn from(r: ActionRow) -> Self {
        Self {
            action_id: r.id,
            tool_name: r.tool_name,
            params: r.params,
            status: r.status,
            reason: r.reason,
            result: r.result,
            error: r.error,
            created_at: r.created_at,
            expires_at: r.expires_at,
            decided_at: r.decided_at,
        }
    }
}

/// What `confirm_action` answers.
#[derive(Debug, Clone, Serialize)]
pub struct ConfirmResult {
    pub action_id: String,
    pub tool_name: String,
    /// `executed` or `failed`.
    pub status: String,
    pub success: bool,
    pub result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub execution_time_ms: f64,
}

/// The caller's pending actions.
#[derive(Debug, Clone, Serialize)]
pub struct PendingList {
    pub actions: Vec<ActionView>,
    pub count: usize,
}

/// The pending-action store; cheap to clone.
#[derive(Clone)]
pub struct Actions {
    store: Store,
    clock: Clock,
    ttl: chrono::Duration,
}

fn not_found(id: &str) -> AssistantError {
    AssistantError::NotFound(format!("action '{id}' not found"))
}

impl Actions {
    /// The service; fails actions a previous process left executing. Blocking (start-up).
    pub fn open(store: Store, clock: Clock, ttl_secs: u64) -> crate::error::Result<Self> {
        let failed = store.write_sync(|tx| repo::fail_interrupted(tx))?;
        if failed > 0 {
            tracing::warn!(
                failed,
                "actions interrupted while executing were marked failed"
            );
        }
        Ok(Self {
            store,
            clock,
            ttl: chrono::Duration::seconds(ttl_secs as i64),
        })
    }

    /// Holds `tool_name(params)` for `user_id`'s decision; expires after the TTL.
    #[tracing::instrument(skip(self, params))]
    pub async fn propose(
        &self,
        user_id: &str,
        tool_name: &str,
        params: &Value,
    ) -> Result<ActionView> {
        let now = self.clock.now();
        let row = ActionRow {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.to_owned(),
            tool_name: tool_name.to_owned(),
            params: params.clone(),
            status: "pending".into(),
            reason: None,
            result: None,
            error: None,
            created_at: format_iso(now),
            expires_at: format_iso(now + self.ttl),
            decided_at: None,
        };
        let r = row.clone();
        self.store
            .write(move |tx| {
                repo::insert(
                    tx,
                    &NewAction {
                        id: &r.id,
                        user_id: &r.user_id,
                        tool_name: &r.tool_name,
                        params: &r.params,
                        created_at: &r.created_at,
                        expires_at: &r.expires_at,
                    },
                )
            })
            .await?;
        tracing::info!(action_id = %row.id, expires_at = %row.expires_at, "action proposed");
        Ok(row.into())
    }

    /// One of `user_id`'s actions (any state).
    pub async fn get(&self, user_id: &str, id: &str) -> Result<ActionView> {
        let now = self.clock.now_iso();
        let (uid, aid) = (user_id.to_owned(), id.to_owned());
        let row = self
            .store
            .write(move |tx| {
                repo::expire_due(tx, &now)?;
                repo::get(tx, &uid, &aid)
            })
            .await?;
        row.map(Into::into).ok_or_else(|| not_found(id))
    }

    /// `user_id`'s pending actions, oldest first (expired ones are not pending).
    pub async fn list_pending(&self, user_id: &str) -> Result<PendingList> {
        let now = self.clock.now_iso();
        let uid = user_id.to_owned();
        let rows = self
            .store
            .write(move |tx| {
                repo::expire_due(tx, &now)?;
                repo::list_pending(tx, &uid)
            })
            .await?;
        let actions: Vec<ActionView> = rows.into_iter().map(Into::into).collect();
        Ok(PendingList {
            count: actions.len(),
            actions,
        })
    }

    /// Moves a pending, unexpired action to `to` (`executing` or `rejected`): 404 if it is
    /// not `user_id`'s, 409 if it is no longer pending.
    async fn decide(
        &self,
        user_id: &str,
        id: &str,
        to: &'static str,
        reason: Option<String>,
    ) -> Result<ActionRow> {
        let now = self.clock.now_iso();
        let (uid, aid) = (user_id.to_owned(), id.to_owned());
        let outcome = self
            .store
            .write(move |tx| {
                repo::expire_due(tx, &now)?;
                let Some(row) = repo::get(tx, &uid, &aid)? else {
                    return Ok(Err(None));
                };
                if !repo::decide(tx, &aid, to, reason.as_deref(), &now)? {
                    return Ok(Err(Some(row.status)));
                }
                Ok(Ok(repo::get(tx, &uid, &aid)?.unwrap_or(row)))
            })
            .await?;
        match outcome {
            Ok(row) => Ok(row),
            Err(None) => Err(not_found(id)),
            Err(Some(status)) => Err(AssistantError::Conflict(format!(
                "action '{id}' is {status}; only a pending action can be confirmed or rejected"
            ))),
        }
    }

    /// Records the outcome of an executing action.
    async fn finish(&self, id: &str, outcome: std::result::Result<Value, String>) -> Result<()> {
        let aid = id.to_owned();
        self.store
            .write(move |tx| repo::finish(tx, &aid, outcome.as_ref().map_err(String::as_str)))
            .await?;
        Ok(())
    }

    /// Marks pending actions past their expiry as expired; returns how many.
    pub async fn expire_due(&self) -> Result<usize> {
        let now = self.clock.now_iso();
        Ok(self
            .store
            .write(move |tx| repo::expire_due(tx, &now))
            .await?)
    }
}

impl Assistant {
    /// Validates `tool(params)` for `user` (404 unknown tool, 403 admin-only, 400 invalid
    /// params) and holds it as a pending action awaiting [`confirm_action`](Self::confirm_action).
    pub async fn propose_action(
        &self,
        user: &CurrentUser,
        tool: &str,
        params: &Value,
    ) -> Result<ActionView> {
        let spec = self.tools.require(tool)?;
        super::tools::ToolRegistry::check_allowed(spec, user)?;
        let params = self.tools.validate(spec.name, params)?;
        self.actions.propose(&user.id, spec.name, &params).await
    }

    /// Runs a pending action of `user`: `executed` with the tool's result, or `failed`
    /// with its error. 404 if it is not the user's; 409 if it is not pending (already
    /// decided, or expired).
    #[tracing::instrument(skip_all, fields(user_id = %user.id, action_id = %action_id))]
    pub async fn confirm_action(
        &self,
        user: &CurrentUser,
        action_id: &str,
    ) -> Result<ConfirmResult> {
        let row = self
            .actions
            .decide(&user.id, action_id, "executing", None)
            .await?;
        let started = std::time::Instant::now();
        // Permissions and params are checked again: they may have changed since proposed.
        let ran = async {
            let spec = self.tools.require(&row.tool_name)?;
            super::tools::ToolRegistry::check_allowed(spec, user)?;
            let params = self.tools.validate(spec.name, &row.params)?;
            self.invoke(user, spec.name, params).await
        }
        .await;
        let execution_time_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        let outcome = ran.map_err(|e| run_public_error(&e));
        self.actions.finish(action_id, outcome.clone()).await?;
        tracing::info!(success = outcome.is_ok(), tool = %row.tool_name, execution_time_ms, "action confirmed");
        let (status, success, result, error) = match outcome {
            Ok(v) => ("executed", true, v, None),
            Err(e) => ("failed", false, Value::Null, Some(e)),
        };
        Ok(ConfirmResult {
            action_id: row.id,
            tool_name: row.tool_name,
            status: status.into(),
            success,
            result,
            error,
            execution_time_ms,
        })
    }

    /// Rejects a pending action of `user`, with an optional reason (404 / 409 as for confirm).
    #[tracing::instrument(skip_all, fields(user_id = %user.id, action_id = %action_id))]
    pub async fn reject_action(
        &self,
        user: &CurrentUser,
        action_id: &str,
        reason: Option<String>,
    ) -> Result<ActionView> {
        let reason = reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(AssistantError::BadRequest(format!(
                "reason must be at most {MAX_REASON_CHARS} characters"
            )));
        }
        let row = self
            .actions
            .decide(&user.id, action_id, "rejected", reason)
            .await?;
        tracing::info!(tool = %row.tool_name, "action rejected");
        Ok(row.into())
    }

    /// The pending actions of `user`.
    pub async fn list_pending_actions(&self, user: &CurrentUser) -> Result<PendingList> {
        self.actions.list_pending(&user.id).await
    }
}

#[cfg(test)]
mod tests;
