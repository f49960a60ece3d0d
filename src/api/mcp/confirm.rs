//! Confirming a held tool call through MCP elicitation (2026-07-28's `input_required`
//! round trip), for clients that declared the `elicitation` capability. The call that is
//! held answers `resultType: "input_required"` with an `elicitation/create` form asking the
//! person to confirm, and the pending action's id as `requestState`. The client shows the
//! form to its user and calls again with the answer: accepted with `confirm: true`, the
//! action is confirmed through the assistant's actions service (`confirm_action`, which
//! checks permissions and params again); declined or cancelled, it is rejected. The
//! retried call must be the same tool with the same arguments as the held action, and the
//! action must be the caller's (the state comes back from the client, so it is checked,
//! not trusted).

use serde_json::{json, Value};

use super::jsonrpc::RpcError;
use super::protocol::META_CLIENT_CAPABILITIES;
use crate::assistant::users::CurrentUser;
use crate::state::AppState;

/// The key of the one input request.
const KEY: &str = "confirm";

/// Whether a 2026-07-28 request's client declared form elicitation (an empty
/// `elicitation` object means form, as in earlier revisions).
pub fn client_elicits(params: &Value) -> bool {
    let caps = params
        .pointer("/_meta")
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("elicitation"));
    match caps {
        Some(Value::Object(o)) => o.is_empty() || o.contains_key("form"),
        _ => false,
    }
}

/// The `input_required` result asking the person to confirm `action_id`.
pub fn ask(action_id: &str, tool: &str, arguments: &Value) -> Value {
    let message =
        format!("An assistant wants to run the high-risk tool '{tool}' with {arguments}. Run it?");
    json!({
        "resultType": "input_required",
        "inputRequests": {KEY: {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"confirm": {
                        "type": "boolean",
                        "title": format!("Run {tool}"),
                        "description": "Check to run it now; otherwise it is rejected.",
                    }},
                    "required": ["confirm"],
                },
            },
        }},
        "requestState": action_id,
    })
}

/// The retried call: decides the held action named by `params.requestState` with the
/// person's answer in `params.inputResponses`. `Ok(None)` when the call carries no answer
/// (a first call).
pub async fn answer(
    state: &AppState,
    user: &CurrentUser,
    tool: &str,
    arguments: &Value,
    params: &Value,
) -> Result<Option<Value>, RpcError> {
    let (Some(action_id), Some(responses)) = (
        params.get("requestState").and_then(Value::as_str),
        params.get("inputResponses"),
    ) else {
        return Ok(None);
    };
    let assistant = &state.assistant;
    let action = match assistant.actions.get(&user.id, action_id).await {
        Ok(a) => a,
        Err(_) => {
            return Err(RpcError::params(
                "requestState names no pending action of yours",
            ))
        }
    };
    let validated = assistant
        .tools
        .validate(tool, arguments)
        .map_err(|e| RpcError::params(e.to_string()))?;
    if action.tool_name != tool || action.params != validated {
        return Err(RpcError::params(
            "requestState belongs to another call: retry with the same tool and arguments",
        ));
    }
    let reply = responses.get(KEY);
    let accepted = reply.and_then(|r| r.get("action")).and_then(Value::as_str) == Some("accept")
        && reply.and_then(|r| r.pointer("/content/confirm")) == Some(&Value::Bool(true));
    if !accepted {
        let why = "declined in the MCP client".to_owned();
        let outcome = assistant.reject_action(user, action_id, Some(why)).await;
        tracing::info!(%action_id, ok = outcome.is_ok(), "held MCP call declined");
        return Ok(Some(match outcome {
            Ok(_) => tool_text(
                format!("Not run: the person declined '{tool}' (action {action_id} rejected)."),
                false,
            ),
            Err(e) => tool_text(crate::assistant::tools::run_public_error(&e), true),
        }));
    }
    tracing::info!(%action_id, tool, "held MCP call confirmed by elicitation");
    Ok(Some(
        match assistant.confirm_action(user, action_id).await {
            Ok(done) => {
                let structured = serde_json::to_value(&done).unwrap_or(Value::Null);
                let mut r = tool_text(
                    serde_json::to_string_pretty(&done.result).unwrap_or_default(),
                    !done.success,
                );
                if let Some(e) = &done.error {
                    r = tool_text(e.clone(), true);
                }
                r["structuredContent"] = structured;
                r
            }
            Err(e) => tool_text(crate::assistant::tools::run_public_error(&e), true),
        },
    ))
}

fn tool_text(text: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicitation_is_declared_by_the_envelope() {
        let with = |caps: Value| json!({"_meta": {META_CLIENT_CAPABILITIES: caps}});
        assert!(client_elicits(&with(json!({"elicitation": {}}))));
        assert!(client_elicits(&with(json!({"elicitation": {"form": {}}}))));
        assert!(!client_elicits(&with(json!({"elicitation": {"url": {}}}))));
        assert!(!client_elicits(&with(json!({}))));
        assert!(!client_elicits(&json!({})));
        let a = ask("act-1", "delete_document", &json!({"document_id": "d"}));
        assert_eq!(a["requestState"], "act-1");
        assert_eq!(
            a["inputRequests"]["confirm"]["method"],
            "elicitation/create"
        );
    }
}
