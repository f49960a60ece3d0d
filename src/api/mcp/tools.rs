//! `tools/list` and `tools/call` over the assistant's tools: the same schemas (as
//! `inputSchema`), validation, admin-only rule, risk gate and per-user `Tools` rate limit
//! as `execute_tool`, through the same service methods. A high-risk tool is never run by
//! a call: the result says it is held and names the pending action a person confirms.
//! A refused or failed call is a result with `isError: true` (the model can read it and
//! try again); an unknown tool or malformed params are JSON-RPC errors.

use serde_json::{json, Value};

use super::confirm;
use super::jsonrpc::RpcError;
use super::protocol::Ctx;
use crate::api::v1::caller::Caller;
use crate::assistant::ratelimit::Scope;
use crate::assistant::tools::{ToolInfo, ToolRegistry};
use crate::assistant::AssistantError;
use crate::state::AppState;

/// The rate-limit key of the service identity (a user's is their id).
const SERVICE_LIMIT_KEY: &str = "service";

fn tool_entry(t: &ToolInfo) -> Value {
    let risk = match t.requires_confirmation {
        true => " High risk: a call is held until a person confirms it in ragd.",
        false => "",
    };
    json!({
        "name": t.tool_name,
        "title": t.tool_name.replace('_', " "),
        "description": format!("{}{risk}", t.description),
        "inputSchema": t.schema.clone().unwrap_or_else(|| json!({"type": "object"})),
        "annotations": {
            "readOnlyHint": t.risk == crate::assistant::tools::Risk::Low,
            "destructiveHint": t.requires_confirmation,
            "openWorldHint": t.tool_name == "scrape_url",
        },
        "_meta": {"ragd/risk": t.risk, "ragd/category": t.category},
    })
}

/// `tools/list`: the tools the caller may use (all of them for a user, the administrator
/// ones for an administrator only; the read-only knowledge tools for a server key).
pub fn list(state: &AppState, ctx: &Ctx, _params: &Value) -> Result<Value, RpcError> {
    let tools = match &ctx.caller {
        Caller::User(u) => state
            .assistant
            .tools
            .list(None, true, u)
            .map_err(RpcError::internal)?,
        Caller::Service => state.assistant.service_tools(),
    };
    Ok(json!({"tools": tools.iter().map(tool_entry).collect::<Vec<_>>()}))
}

/// A tool result with one text block (and the structured value when it is an object).
fn result(text: String, structured: Option<Value>, is_error: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": text}], "isError": is_error});
    if let Some(s @ Value::Object(_)) = structured {
        r["structuredContent"] = s;
    }
    r
}

fn tool_error(e: &AssistantError) -> Value {
    result(crate::assistant::tools::run_public_error(e), None, true)
}

/// `tools/call`.
pub async fn call(state: &AppState, ctx: &Ctx, params: &Value) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params("tools/call needs params.name, a string"))?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err(RpcError::params("params.arguments must be an object")),
    };
    let assistant = &state.assistant;
    let Some(spec) = assistant.tools.get(name) else {
        return Err(RpcError::params(format!(
            "unknown tool '{name}'; tools/list lists them"
        )));
    };
    let limit_key = ctx
        .caller
        .user()
        .map_or(SERVICE_LIMIT_KEY, |u| u.id.as_str());
    if let Err((_, e)) = assistant.limits.check(limit_key, Scope::Tools) {
        return Ok(tool_error(&e));
    }
    let user = match &ctx.caller {
        Caller::Service => {
            return Ok(
                match assistant.run_service_tool(spec.name, &arguments).await {
                    Ok(out) if out.success => result(pretty(&out.result), Some(out.result), false),
                    Ok(out) => result(out.error.unwrap_or_default(), None, true),
                    Err(e) => tool_error(&e),
                },
            );
        }
        Caller::User(u) => u,
    };
    if let Err(e) = ToolRegistry::check_allowed(spec, user) {
        return Ok(tool_error(&e));
    }
    if spec.requires_confirmation() && ctx.modern() {
        if let Some(done) = confirm::answer(state, user, spec.name, &arguments, params).await? {
            return Ok(done);
        }
    }
    match assistant.execute_tool(user, spec.name, &arguments).await {
        Ok(r) if r.requires_confirmation => {
            let action_id = r.action_id.unwrap_or_default();
            let expires = r.expires_at.unwrap_or_default();
            tracing::info!(tool = %r.tool_name, %action_id, "MCP tool call held for confirmation");
            if ctx.modern() && confirm::client_elicits(params) {
                return Ok(confirm::ask(&action_id, spec.name, &arguments));
            }
            Ok(result(
                format!(
                    "Held for a person's confirmation: '{}' is a high-risk tool and was not run. \
                     Pending action {action_id} (expires {expires}) runs only once a person confirms it \
                     in ragd (the web page, or confirm_action).",
                    r.tool_name
                ),
                Some(json!({
                    "status": "pending_confirmation",
                    "action_id": action_id,
                    "expires_at": expires,
                    "tool_name": r.tool_name,
                })),
                false,
            ))
        }
        Ok(r) => Ok(result(pretty(&r.result), Some(r.result), false)),
        Err(e) => Ok(tool_error(&e)),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}
