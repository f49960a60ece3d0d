//! Pending (high-risk) tool actions awaiting a user's decision (SQL only).

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

use crate::error::Result;

/// One action row.
#[derive(Debug, Clone)]
pub struct ActionRow {
    pub id: String,
    pub user_id: String,
    pub tool_name: String,
    pub params: Value,
    /// `pending`, `executing`, `executed`, `failed`, `rejected` or `expired`.
    pub status: String,
    pub reason: Option<String>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub expires_at: String,
    pub decided_at: Option<String>,
}

const COLS: &str =
    "id, user_id, tool_name, params, status, reason, result, error, created_at, expires_at, decided_at";

fn row(r: &Row<'_>) -> rusqlite::Result<ActionRow> {
    let params: String = r.get(3)?;
    let result: Option<String> = r.get(6)?;
    Ok(ActionRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        tool_name: r.get(2)?,
        params: serde_json::from_str(&params).unwrap_or(Value::Null),
        status: r.get(4)?,
        reason: r.get(5)?,
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
        error: r.get(7)?,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        decided_at: r.get(10)?,
    })
}

/// A new action awaiting confirmation.
pub struct NewAction<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub tool_name: &'a str,
    pub params: &'a Value,
    pub created_at: &'a str,
    pub expires_at: &'a str,
}

/// Inserts a pending action.
pub fn insert(c: &Connection, a: &NewAction<'_>) -> Result<()> {
    c.execute(
        "INSERT INTO pending_actions (id, user_id, tool_name, params, status, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6)",
        params![a.id, a.user_id, a.tool_name, a.params.to_string(), a.created_at, a.expires_at],
    )?;
    Ok(())
}

/// Marks every pending action whose expiry is at or before `now` as expired; returns how many.
pub fn expire_due(c: &Connection, now: &str) -> Result<usize> {
    Ok(c.execute(
        "UPDATE pending_actions SET status = 'expired', decided_at = expires_at
         WHERE status = 'pending' AND expires_at <= ?1",
        [now],
    )?)
}

/// One action of `user_id`, or `None`.
pub fn get(c: &Connection, user_id: &str, id: &str) -> Result<Option<ActionRow>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM pending_actions WHERE id = ?1 AND user_id = ?2"),
        params![id, user_id],
        row,
    )
    .optional()?)
}

/// `user_id`'s pending actions, oldest first.
pub fn list_pending(c: &Connection, user_id: &str) -> Result<Vec<ActionRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM pending_actions WHERE user_id = ?1 AND status = 'pending'
         ORDER BY created_at, id"
    ))?;
    let rows = st.query_map([user_id], row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Moves a pending action to `to` (`executing` or `rejected`) if it is still pending and
/// unexpired at `now`; false otherwise.
pub fn decide(c: &Connection, id: &str, to: &str, reason: Option<&str>, now: &str) -> Result<bool> {
    Ok(c.execute(
        "UPDATE pending_actions SET status = ?2, reason = ?3, decided_at = ?4
         WHERE id = ?1 AND status = 'pending' AND expires_at > ?4",
        params![id, to, reason, now],
    )? == 1)
}

/// Records the outcome of an executing action: `executed` with a result or `failed`
/// with an error.
pub fn finish(c: &Connection, id: &str, result: std::result::Result<&Value, &str>) -> Result<()> {
    let (status, result, error) = match result {
        Ok(v) => ("executed", Some(v.to_string()), None),
        Err(e) => ("failed", None, Some(e)),
    };
    c.execute(
        "UPDATE pending_actions SET status = ?2, result = ?3, error = ?4
         WHERE id = ?1 AND status = 'executing'",
        params![id, status, result, error],
    )?;
    Ok(())
}

/// Fails actions a previous process left executing (their outcome is unknown).
pub fn fail_interrupted(c: &Connection) -> Result<usize> {
    Ok(c.execute(
        "UPDATE pending_actions SET status = 'failed',
             error = 'interrupted by a restart while executing; check its effect before retrying'
         WHERE status = 'executing'",
        [],
    )?)
}
