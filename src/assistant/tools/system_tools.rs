//! The conversation tools (over the caller's own conversations) and the system tools
//! (date and time, calculator, settings), with their parameter types and schemas.

use chrono::{Datelike, FixedOffset};
use serde::Deserialize;
use serde_json::{json, Value};

use super::calc;
use super::schema::{object, Prop, ToolParams};
use crate::assistant::conversations::ListQuery;
use crate::assistant::users::CurrentUser;
use crate::assistant::{Assistant, AssistantError};

type Result<T> = std::result::Result<T, AssistantError>;

fn to_value<T: serde::Serialize>(v: T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| AssistantError::Internal(e.into()))
}

/// `search_conversations`.
#[derive(Debug, Deserialize)]
pub struct SearchConversations {
    pub query: String,
    pub page: Option<i64>,
    pub page_size: Option<i64>,
}

impl ToolParams for SearchConversations {
    fn schema() -> Value {
        object(vec![
            (
                "query",
                Prop::string("Words to find in your conversations")
                    .min(1)
                    .max(1000),
                true,
            ),
            (
                "page",
                Prop::integer("Page, from 1")
                    .min(1)
                    .max(10_000)
                    .default(json!(1)),
                false,
            ),
            (
                "page_size",
                Prop::integer("Results per page")
                    .min(1)
                    .max(100)
                    .default(json!(20)),
                false,
            ),
        ])
    }
}

/// `list_conversations`.
#[derive(Debug, Deserialize)]
pub struct ListConversations {
    pub page: Option<i64>,
    pub page_size: Option<i64>,
    pub status: Option<String>,
}

impl ToolParams for ListConversations {
    fn schema() -> Value {
        object(vec![
            (
                "page",
                Prop::integer("Page, from 1")
                    .min(1)
                    .max(1_000_000)
                    .default(json!(1)),
                false,
            ),
            (
                "page_size",
                Prop::integer("Conversations per page")
                    .min(1)
                    .max(100)
                    .default(json!(20)),
                false,
            ),
            (
                "status",
                Prop::string("Active or Deleted")
                    .one_of(&["Active", "Deleted"])
                    .default(json!("Active")),
                false,
            ),
        ])
    }
}

/// `get_current_datetime`.
#[derive(Debug, Deserialize)]
pub struct CurrentDatetime {
    #[serde(default)]
    pub utc_offset_minutes: i32,
}

impl ToolParams for CurrentDatetime {
    fn schema() -> Value {
        object(vec![(
            "utc_offset_minutes",
            Prop::integer("Offset of the wanted local time from UTC, in minutes")
                .min(-720)
                .max(840)
                .default(json!(0)),
            false,
        )])
    }
}

/// `calculate`.
#[derive(Debug, Deserialize)]
pub struct Calculate {
    pub expression: String,
}

impl ToolParams for Calculate {
    fn schema() -> Value {
        object(vec![(
            "expression",
            Prop::string("Arithmetic: numbers, + - * / % ^, parentheses, sqrt abs round floor ceil ln log10 sin cos tan min max, pi, e")
                .min(1)
                .max(calc::MAX_LEN as i64),
            true,
        )])
    }
}

/// `update_setting`.
#[derive(Debug, Deserialize)]
pub struct UpdateSetting {
    pub key: String,
    pub value: Value,
}

impl ToolParams for UpdateSetting {
    fn schema() -> Value {
        object(vec![
            (
                "key",
                Prop::string("The setting").one_of(crate::assistant::settings::KEYS),
                true,
            ),
            (
                "value",
                Prop::any("Its new value (checked per setting)"),
                true,
            ),
        ])
    }
}

impl Assistant {
    pub(super) async fn tool_search_conversations(
        &self,
        user: &CurrentUser,
        p: SearchConversations,
    ) -> Result<Value> {
        to_value(
            self.conversations
                .search(&user.id, &p.query, p.page, p.page_size)
                .await?,
        )
    }

    pub(super) async fn tool_list_conversations(
        &self,
        user: &CurrentUser,
        p: ListConversations,
    ) -> Result<Value> {
        let q = ListQuery {
            page: p.page,
            page_size: p.page_size,
            status: p.status,
        };
        to_value(self.conversations.list(&user.id, q).await?)
    }

    pub(super) fn tool_current_datetime(&self, p: CurrentDatetime) -> Result<Value> {
        let now = self.clock.now();
        let offset = FixedOffset::east_opt(p.utc_offset_minutes * 60).ok_or_else(|| {
            AssistantError::BadRequest("params.utc_offset_minutes is out of range".into())
        })?;
        let local = now.with_timezone(&offset);
        Ok(json!({
            "utc": crate::time::format_iso(now),
            "local": local.format("%Y-%m-%dT%H:%M:%S%:z").to_string(),
            "date": local.format("%Y-%m-%d").to_string(),
            "time": local.format("%H:%M:%S").to_string(),
            "weekday": local.weekday().to_string(),
            "utc_offset_minutes": p.utc_offset_minutes,
            "unix": now.timestamp(),
        }))
    }

    pub(super) fn tool_calculate(&self, p: Calculate) -> Result<Value> {
        let v = calc::evaluate(&p.expression).map_err(|e| {
            AssistantError::BadRequest(format!("cannot calculate '{}': {e}", p.expression))
        })?;
        // Whole results print as integers (2, not 2.0) when they fit exactly.
        let result = if v.fract() == 0.0 && v.abs() < 9.0e15 {
            json!(v as i64)
        } else {
            json!(v)
        };
        Ok(json!({ "expression": p.expression, "result": result }))
    }

    pub(super) async fn tool_update_setting(&self, p: UpdateSetting) -> Result<Value> {
        let settings = self.settings.update(&p.key, p.value).await?;
        let value = to_value(&settings)?
            .get(&p.key)
            .cloned()
            .unwrap_or(Value::Null);
        Ok(json!({ "key": p.key, "value": value, "updated": true }))
    }
}
