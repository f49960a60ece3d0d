//! Tools for a caller with no user: a server key (`API_KEYS`, or development mode) on
//! `/mcp`. Such a caller is the knowledge base's service identity, as on `/api/v1`: it may
//! run the low-risk tools that read nothing of a user's (the knowledge-base readers, the
//! clock, the calculator). Every other tool acts as a user (conversations), changes what
//! is stored, or would be held for a person's confirmation under a user's name: those
//! need a user's credential.

use serde_json::Value;

use super::{Category, Risk, ToolInfo, ToolOutcome, ToolSpec};
use crate::assistant::users::CurrentUser;
use crate::assistant::{Assistant, AssistantError};

/// Whether the service identity may run `spec`.
pub fn service_may_run(spec: &ToolSpec) -> bool {
    spec.category != Category::Conversations && spec.risk == Risk::Low && !spec.admin_only
}

impl Assistant {
    /// The tools the service identity may run, with their schemas.
    pub fn service_tools(&self) -> Vec<ToolInfo> {
        let nobody = service_identity();
        self.tools
            .list(None, true, &nobody)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| self.tools.get(t.tool_name).is_some_and(service_may_run))
            .collect()
    }

    /// Runs a tool for the service identity: 404 for an unknown tool, 403 for one that
    /// needs a user (see the module docs), 400 for invalid params; a tool that ran and
    /// failed is `success: false`, as [`run_tool`](Self::run_tool) answers.
    #[tracing::instrument(skip_all, fields(caller = "service", tool = %name))]
    pub async fn run_service_tool(
        &self,
        name: &str,
        params: &Value,
    ) -> Result<ToolOutcome, AssistantError> {
        let spec = self.tools.require(name)?;
        if !service_may_run(spec) {
            return Err(AssistantError::Forbidden(format!(
                "tool '{}' acts as a user or changes the knowledge base: call it with a user's credential (Authorization: Bearer <api_key>:<api_secret>), not a server key",
                spec.name
            )));
        }
        // These tools read nothing of the user they run for.
        self.run_tool(&service_identity(), spec.name, params).await
    }
}

/// A stand-in user for [`Assistant::run_tool`]: no id any stored record has, no rights.
fn service_identity() -> CurrentUser {
    CurrentUser {
        id: "service".into(),
        email: String::new(),
        is_admin: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assistant::tools::ToolRegistry;

    #[test]
    fn the_service_runs_only_low_risk_tools_that_read_nothing_of_a_user() {
        let r = ToolRegistry::new();
        let allowed = |n: &str| service_may_run(r.get(n).unwrap());
        for n in [
            "search_knowledge_base",
            "ask_knowledge_base",
            "list_sources",
            "calculate",
        ] {
            assert!(allowed(n), "{n}");
        }
        for n in [
            "delete_document",
            "update_setting",
            "upload_text",
            "scrape_url",
            "list_conversations",
            "search_conversations",
        ] {
            assert!(!allowed(n), "{n}");
        }
    }
}
