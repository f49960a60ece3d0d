//! The conversation tools (over the caller's own conversations) and the system tools
//! (date and time, calculator, settings), with their parameter types (whose schemas
//! [`tool_params!`] generates).

use chrono::{Datelike, FixedOffset};
use serde_json::{json, Value};

use super::calc;
use super::schema::tool_params;
use crate::assistant::conversations::ListQuery;
use crate::assistant::users::CurrentUser;
use crate::assistant::{Assistant, AssistantError};

type Result<T> = std::result::Result<T, AssistantError>;

fn to_value<T: serde::Serialize>(v: T) -> Result<Value> {
    serde_json::to_value(v).map_err(|e| AssistantError::Internal(e.into()))
}

tool_params! {
    /// `search_conversations`.
    pub struct SearchConversations {
        /// Words to find in your conversations
        pub query: String => [min 1, max 1000],
        /// Page, from 1
        pub page: Option<i64> => [min 1, max 10_000, default 1],
        /// Results per page
        pub page_size: Option<i64> => [min 1, max 100, default 20],
    }

    /// `list_conversations`.
    pub struct ListConversations {
        /// Page, from 1
        pub page: Option<i64> => [min 1, max 1_000_000, default 1],
        /// Conversations per page
        pub page_size: Option<i64> => [min 1, max 100, default 20],
        /// Active or Deleted
        pub status: Option<String> => [enum &["Active", "Deleted"], default "Active"],
    }

    /// `get_current_datetime`.
    pub struct CurrentDatetime {
        /// Offset of the wanted local time from UTC, in minutes
        pub utc_offset_minutes: i32 = 0 => [min -720, max 840],
    }

    /// `calculate`.
    pub struct Calculate {
        /// Arithmetic: numbers, + - * / % ^, parentheses, sqrt abs round floor ceil ln log10 sin cos tan min max, pi, e
        pub expression: String => [min 1, max calc::MAX_LEN as i64],
    }

    /// `update_setting`.
    pub struct UpdateSetting {
        /// The setting
        pub key: String => [enum crate::assistant::settings::KEYS],
        /// Its new value (checked per setting)
        pub value: Value,
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
        // The model is switched before the choice is saved: a file that cannot be loaded
        // keeps the running model and is not remembered.
        let model = if p.key == "llm_model" {
            let name = crate::assistant::settings::validate(&p.key, p.value.clone())?;
            Some(self.switch_llm(name.as_str().unwrap_or_default()).await?)
        } else {
            None
        };
        let settings = self.settings.update(&p.key, p.value).await?;
        let value = to_value(&settings)?
            .get(&p.key)
            .cloned()
            .unwrap_or(Value::Null);
        let mut out = json!({ "key": p.key, "value": value, "updated": true });
        if let (Some(m), Value::Object(o)) = (model, &mut out) {
            o.insert("model".into(), m);
        }
        Ok(out)
    }
}
