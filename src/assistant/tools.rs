//! Tools the assistant (and `execute_tool`) can run: the registry (name, description,
//! category, risk, admin-only, JSON schema of the params), validation of params against
//! that schema, and running them. High-risk tools never run here directly: they become
//! pending actions (`assistant::actions`) that run only once confirmed.
//!
//! Entry points for the chat engine (all on [`Assistant`]):
//! [`tools.list`](ToolRegistry::list), [`tools.get`](ToolRegistry::get),
//! [`tools.validate`](ToolRegistry::validate), [`Assistant::run_tool`] (low/medium risk),
//! [`Assistant::execute_tool`] (any risk: runs or proposes) and
//! [`Assistant::propose_action`].

pub mod calc;
mod catalog;
pub mod kb_params;
mod kb_tools;
mod run;
pub mod schema;
pub mod service;
pub mod system_tools;

use serde::Serialize;
use serde_json::Value;

pub(crate) use run::public_error as run_public_error;
pub use run::{ExecuteResult, ToolOutcome};

use super::users::CurrentUser;
use super::AssistantError;

/// What a tool works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    KnowledgeBase,
    Conversations,
    System,
}

impl Category {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::KnowledgeBase => "knowledge_base",
            Category::Conversations => "conversations",
            Category::System => "system",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Self::KnowledgeBase, Self::Conversations, Self::System]
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// How much harm a mistaken call can do. High-risk tools need a confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
}

/// One registered tool.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub category: Category,
    pub risk: Risk,
    /// Only administrators may run (or propose) it.
    pub admin_only: bool,
    /// JSON schema (an object) of its params.
    pub schema: Value,
}

impl ToolSpec {
    /// Whether running it needs a confirmation.
    pub fn requires_confirmation(&self) -> bool {
        self.risk == Risk::High
    }
}

/// A tool as `get_available_tools` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    pub tool_name: &'static str,
    pub description: &'static str,
    pub category: Category,
    pub risk: Risk,
    pub admin_only: bool,
    pub requires_confirmation: bool,
    /// Present when asked for (`include_schema`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// Every tool, in a fixed order.
pub struct ToolRegistry {
    tools: Vec<ToolSpec>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRegistry {
    /// The registry of every tool of DECISIONS.md.
    pub fn new() -> Self {
        Self {
            tools: catalog::all(),
        }
    }

    /// One tool by name.
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// One tool by name, or 404.
    pub fn require(&self, name: &str) -> Result<&ToolSpec, AssistantError> {
        self.get(name.trim()).ok_or_else(|| {
            AssistantError::NotFound(format!(
                "tool '{name}' not found; get_available_tools lists them"
            ))
        })
    }

    /// The tools `user` may use, optionally of one category (400 for an unknown one);
    /// admin-only tools are listed for administrators only.
    pub fn list(
        &self,
        category: Option<&str>,
        include_schema: bool,
        user: &CurrentUser,
    ) -> Result<Vec<ToolInfo>, AssistantError> {
        let category = match category.map(str::trim).filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => Some(Category::parse(c).ok_or_else(|| {
                AssistantError::BadRequest(format!(
                    "category must be knowledge_base, conversations or system, got '{c}'"
                ))
            })?),
        };
        Ok(self
            .tools
            .iter()
            .filter(|t| category.is_none_or(|c| t.category == c))
            .filter(|t| user.is_admin || !t.admin_only)
            .map(|t| ToolInfo {
                tool_name: t.name,
                description: t.description,
                category: t.category,
                risk: t.risk,
                admin_only: t.admin_only,
                requires_confirmation: t.requires_confirmation(),
                schema: include_schema.then(|| t.schema.clone()),
            })
            .collect())
    }

    /// Checks `params` (absent or null means `{}`) against the tool's schema: 404 for an
    /// unknown tool, 400 naming the offending field. Returns the params as an object.
    pub fn validate(&self, name: &str, params: &Value) -> Result<Value, AssistantError> {
        let spec = self.require(name)?;
        let params = match params {
            Value::Null => Value::Object(Default::default()),
            other => other.clone(),
        };
        schema::validate(&spec.schema, &params, "params").map_err(AssistantError::BadRequest)?;
        Ok(params)
    }

    /// 403 unless `user` may use `spec`.
    pub fn check_allowed(spec: &ToolSpec, user: &CurrentUser) -> Result<(), AssistantError> {
        if spec.admin_only && !user.is_admin {
            return Err(AssistantError::Forbidden(format!(
                "tool '{}' is restricted to administrators",
                spec.name
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
