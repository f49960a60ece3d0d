//! Background tasks: one row each, the only record of a task's state.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};
use serde_json::Value;

use crate::error::Result;

/// One task row.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub progress: f64,
    pub params: Value,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
}

const COLS: &str =
    "id, kind, status, progress, params, result, error, created_at, started_at, completed_at";

fn row(r: &Row<'_>) -> rusqlite::Result<TaskRow> {
    let params: String = r.get(4)?;
    let result: Option<String> = r.get(5)?;
    Ok(TaskRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        status: r.get(2)?,
        progress: r.get(3)?,
        params: serde_json::from_str(&params).unwrap_or(Value::Null),
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
        error: r.get(6)?,
        created_at: r.get(7)?,
        started_at: r.get(8)?,
        completed_at: r.get(9)?,
    })
}

/// Inserts a new pending task.
pub fn insert(tx: &Transaction<'_>, id: &str, kind: &str, params: &Value, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO tasks (id, kind, status, progress, params, created_at) VALUES (?1, ?2, 'pending', 0, ?3, ?4)",
        params![id, kind, params.to_string(), now],
    )?;
    Ok(())
}

/// One task.
pub fn get(c: &Connection, id: &str) -> Result<Option<TaskRow>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM tasks WHERE id = ?1"),
        [id],
        row,
    )
    .optional()?)
}

/// Newest first, optionally of one status; and the total matching.
pub fn list(c: &Connection, status: Option<&str>, limit: u64) -> Result<(Vec<TaskRow>, u64)> {
    let (filter, args): (&str, Vec<&dyn rusqlite::ToSql>) = match &status {
        Some(s) => ("WHERE status = ?1", vec![s as &dyn rusqlite::ToSql]),
        None => ("", vec![]),
    };
    let total: i64 = c.query_row(
        &format!("SELECT COUNT(*) FROM tasks {filter}"),
        args.as_slice(),
        |r| r.get(0),
    )?;
    let sql =
        format!("SELECT {COLS} FROM tasks {filter} ORDER BY created_at DESC, id LIMIT {limit}");
    let mut st = c.prepare(&sql)?;
    let rows = st.query_map(args.as_slice(), row)?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total as u64))
}

/// Tasks per status (only the statuses that have any).
pub fn count_by_status(c: &Connection) -> Result<Vec<(String, u64)>> {
    let mut st = c.prepare("SELECT status, COUNT(*) FROM tasks GROUP BY status")?;
    let rows = st.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Ids of tasks left pending or running (by a previous process), oldest first.
pub fn unfinished(c: &Connection) -> Result<Vec<TaskRow>> {
    let sql = format!(
        "SELECT {COLS} FROM tasks WHERE status IN ('pending', 'running') ORDER BY created_at, id"
    );
    let mut st = c.prepare(&sql)?;
    let rows = st.query_map([], row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Moves a pending task to running; false if it is no longer pending (e.g. cancelled).
pub fn start(c: &Connection, id: &str, now: &str) -> Result<bool> {
    Ok(c.execute(
        "UPDATE tasks SET status = 'running', started_at = ?2, progress = 0 WHERE id = ?1 AND status IN ('pending', 'running')",
        params![id, now],
    )? == 1)
}

/// Records progress of a running task.
pub fn set_progress(c: &Connection, id: &str, progress: f64) -> Result<()> {
    c.execute(
        "UPDATE tasks SET progress = ?2 WHERE id = ?1 AND status = 'running'",
        params![id, progress.clamp(0.0, 1.0)],
    )?;
    Ok(())
}

/// Whether the task is still running (checked inside the transaction that commits its work).
pub fn is_running(c: &Connection, id: &str) -> Result<bool> {
    Ok(
        c.query_row("SELECT status FROM tasks WHERE id = ?1", [id], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
        .is_some_and(|s| s == "running"),
    )
}

/// Ends a running task: `completed` with a result, or `failed` with an error. A task
/// cancelled meanwhile keeps its `cancelled` state.
pub fn finish(
    c: &Connection,
    id: &str,
    ok: bool,
    result: Option<&Value>,
    error: Option<&str>,
    now: &str,
) -> Result<()> {
    c.execute(
        "UPDATE tasks SET status = ?2, progress = CASE WHEN ?2 = 'completed' THEN 1.0 ELSE progress END,
             result = ?3, error = ?4, completed_at = ?5
         WHERE id = ?1 AND status IN ('pending', 'running')",
        params![id, if ok { "completed" } else { "failed" }, result.map(|r| r.to_string()), error, now],
    )?;
    Ok(())
}

/// Cancels a pending or running task; false if it was already finished.
pub fn cancel(c: &Connection, id: &str, now: &str) -> Result<bool> {
    Ok(c.execute(
        "UPDATE tasks SET status = 'cancelled', completed_at = ?2, error = 'cancelled by request'
         WHERE id = ?1 AND status IN ('pending', 'running')",
        params![id, now],
    )? == 1)
}

/// Claims the oldest pending task: marks it running and returns it.
pub fn claim_next(c: &Connection, now: &str) -> Result<Option<TaskRow>> {
    let sql = format!(
        "UPDATE tasks SET status = 'running', started_at = ?1, progress = 0
         WHERE id = (SELECT id FROM tasks WHERE status = 'pending' ORDER BY created_at, id LIMIT 1)
         RETURNING {COLS}"
    );
    Ok(c.query_row(&sql, [now], row).optional()?)
}

/// Puts tasks a previous process left running back in the queue; returns how many.
pub fn requeue_interrupted(c: &Connection) -> Result<usize> {
    Ok(c.execute(
        "UPDATE tasks SET status = 'pending' WHERE status = 'running'",
        [],
    )?)
}

/// Records a running task's checkpoint: its params (where to resume), progress and the
/// result so far.
pub fn checkpoint(
    c: &Connection,
    id: &str,
    params: &Value,
    progress: f64,
    result: &Value,
) -> Result<()> {
    c.execute(
        "UPDATE tasks SET params = ?2, progress = ?3, result = ?4 WHERE id = ?1 AND status = 'running'",
        params![id, params.to_string(), progress.clamp(0.0, 1.0), result.to_string()],
    )?;
    Ok(())
}

/// The oldest pending or running task of `kind`, if any.
pub fn unfinished_of_kind(c: &Connection, kind: &str) -> Result<Option<TaskRow>> {
    let sql = format!(
        "SELECT {COLS} FROM tasks WHERE kind = ?1 AND status IN ('pending', 'running')
         ORDER BY created_at, id LIMIT 1"
    );
    Ok(c.query_row(&sql, [kind], row).optional()?)
}
