//! A conversation's history as its reader sees it now: a tool call that was held for
//! confirmation shows what became of its action (executed, failed, rejected with the
//! reason, expired), not the state it was stored in.

use serde_json::{json, Value};

use super::conversations::History;
use super::{Assistant, AssistantError};

impl Assistant {
    /// Messages of an active conversation of `user_id` (see
    /// [`Conversations::history`](super::conversations::Conversations::history)), their
    /// held tool calls brought up to date.
    pub async fn history(
        &self,
        user_id: &str,
        conversation_id: &str,
        limit: Option<i64>,
        offset: Option<i64>,
    ) -> Result<History, AssistantError> {
        let mut h = self
            .conversations
            .history(user_id, conversation_id, limit, offset)
            .await?;
        for m in &mut h.messages {
            let Some(Value::Array(calls)) = m.tool_calls.as_mut() else {
                continue;
            };
            for call in calls.iter_mut() {
                if call["status"] != "pending_confirmation" {
                    continue;
                }
                let Some(id) = call["action_id"].as_str().map(str::to_owned) else {
                    continue;
                };
                // An action that is gone (its user's data purged) stays as stored.
                let Ok(action) = self.actions.get(user_id, &id).await else {
                    continue;
                };
                if action.status == "pending" {
                    continue;
                }
                call["status"] = json!(action.status);
                call["result"] = action.result.unwrap_or(Value::Null);
                if let Some(error) = action.error {
                    call["error"] = json!(error);
                }
                if let Some(reason) = action.reason {
                    call["reason"] = json!(reason);
                }
            }
        }
        Ok(h)
    }
}
