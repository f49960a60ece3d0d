//! Conversations and their messages (SQL only). Every write that changes what the
//! conversation full-text index must hold bumps `conversation_index_state.generation`
//! in the same transaction.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;

use crate::error::Result;

/// One conversation row.
#[derive(Debug, Clone)]
pub struct ConversationRow {
    pub id: String,
    pub user_id: String,
    pub title: String,
    pub title_is_default: bool,
    pub status: String,
    pub message_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub deleted_at: Option<String>,
}

/// One message row.
#[derive(Debug, Clone)]
pub struct MessageRow {
    /// Row key: stable, increasing; used as the index key.
    pub key: u64,
    pub id: String,
    pub conversation_id: String,
    pub role: String,
    pub content: String,
    pub tool_calls: Option<Value>,
    pub attachments: Option<Value>,
    /// An assistant answer's `{answer_mode, sources, grounding}`.
    pub answer: Option<Value>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub created_at: String,
}

/// A message to insert.
#[derive(Debug, Clone)]
pub struct NewMessageRow<'a> {
    pub id: &'a str,
    pub conversation_id: &'a str,
    pub role: &'a str,
    pub content: &'a str,
    pub tool_calls: Option<&'a Value>,
    pub attachments: Option<&'a Value>,
    pub answer: Option<&'a Value>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub created_at: &'a str,
}

const CONV_COLS: &str =
    "id, user_id, title, title_is_default, status, message_count, created_at, updated_at, deleted_at";
const MSG_COLS: &str =
    "key, id, conversation_id, role, content, tool_calls, attachments, tokens_in, tokens_out, created_at, answer";

fn conv_row(r: &Row<'_>) -> rusqlite::Result<ConversationRow> {
    Ok(ConversationRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        title: r.get(2)?,
        title_is_default: r.get::<_, i64>(3)? != 0,
        status: r.get(4)?,
        message_count: r.get::<_, i64>(5)? as u64,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        deleted_at: r.get(8)?,
    })
}

fn json_col(s: Option<String>) -> Option<Value> {
    s.and_then(|s| serde_json::from_str(&s).ok())
}

fn msg_row(r: &Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        key: r.get::<_, i64>(0)? as u64,
        id: r.get(1)?,
        conversation_id: r.get(2)?,
        role: r.get(3)?,
        content: r.get(4)?,
        tool_calls: json_col(r.get(5)?),
        attachments: json_col(r.get(6)?),
        tokens_in: r.get::<_, i64>(7)? as u64,
        tokens_out: r.get::<_, i64>(8)? as u64,
        created_at: r.get(9)?,
        answer: json_col(r.get(10)?),
    })
}

/// The generation the conversation index must record to be current.
pub fn generation(c: &Connection) -> Result<u64> {
    Ok(c.query_row(
        "SELECT generation FROM conversation_index_state WHERE id = 1",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// Bumps and returns the index generation.
pub fn bump_generation(c: &Connection) -> Result<u64> {
    Ok(c.query_row(
        "UPDATE conversation_index_state SET generation = generation + 1 WHERE id = 1 RETURNING generation",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// Inserts a new active conversation.
pub fn insert(
    c: &Connection,
    id: &str,
    user_id: &str,
    title: &str,
    title_is_default: bool,
    now: &str,
) -> Result<()> {
    c.execute(
        "INSERT INTO conversations (id, user_id, title, title_is_default, status, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'Active', ?5, ?5)",
        params![id, user_id, title, title_is_default as i64, now],
    )?;
    Ok(())
}

/// One conversation of `user_id` (any status), or `None`.
pub fn get(c: &Connection, user_id: &str, id: &str) -> Result<Option<ConversationRow>> {
    Ok(c.query_row(
        &format!("SELECT {CONV_COLS} FROM conversations WHERE id = ?1 AND user_id = ?2"),
        params![id, user_id],
        conv_row,
    )
    .optional()?)
}

/// A page of `user_id`'s conversations of `status`, most recently updated first, and the
/// total of that status.
pub fn list(
    c: &Connection,
    user_id: &str,
    status: &str,
    offset: u64,
    limit: u64,
) -> Result<(Vec<ConversationRow>, u64)> {
    let total: i64 = c.query_row(
        "SELECT COUNT(*) FROM conversations WHERE user_id = ?1 AND status = ?2",
        params![user_id, status],
        |r| r.get(0),
    )?;
    let mut st = c.prepare(&format!(
        "SELECT {CONV_COLS} FROM conversations WHERE user_id = ?1 AND status = ?2
         ORDER BY updated_at DESC, id LIMIT ?3 OFFSET ?4"
    ))?;
    let rows = st.query_map(
        params![user_id, status, limit as i64, offset as i64],
        conv_row,
    )?;
    Ok((rows.collect::<rusqlite::Result<_>>()?, total as u64))
}

/// Active conversations among `ids` owned by `user_id`: `(id, title)`.
pub fn active_titles(
    c: &Connection,
    user_id: &str,
    ids: &[String],
) -> Result<Vec<(String, String)>> {
    let mut st = c.prepare_cached(
        "SELECT id, title FROM conversations WHERE id = ?1 AND user_id = ?2 AND status = 'Active'",
    )?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(t) = st
            .query_row(params![id, user_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
        {
            out.push(t);
        }
    }
    Ok(out)
}

/// The text of each message among `ids`: `(id, content)`.
pub fn message_texts(c: &Connection, ids: &[String]) -> Result<Vec<(String, String)>> {
    let mut st = c.prepare_cached("SELECT id, content FROM messages WHERE id = ?1")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(t) = st
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
        {
            out.push(t);
        }
    }
    Ok(out)
}

/// Inserts a message and touches its conversation (`updated_at`, count).
pub fn insert_message(c: &Connection, m: &NewMessageRow<'_>) -> Result<u64> {
    let key = c.query_row(
        "INSERT INTO messages (id, conversation_id, role, content, tool_calls, attachments, tokens_in, tokens_out, created_at, answer)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING key",
        params![
            m.id,
            m.conversation_id,
            m.role,
            m.content,
            m.tool_calls.map(|v| v.to_string()),
            m.attachments.map(|v| v.to_string()),
            m.tokens_in as i64,
            m.tokens_out as i64,
            m.created_at,
            m.answer.map(|v| v.to_string())
        ],
        |r| r.get::<_, i64>(0),
    )?;
    c.execute(
        "UPDATE conversations SET updated_at = ?2, message_count = message_count + 1 WHERE id = ?1",
        params![m.conversation_id, m.created_at],
    )?;
    Ok(key as u64)
}

/// Replaces a placeholder title.
pub fn set_title(c: &Connection, id: &str, title: &str) -> Result<()> {
    c.execute(
        "UPDATE conversations SET title = ?2, title_is_default = 0 WHERE id = ?1",
        params![id, title],
    )?;
    Ok(())
}

/// Messages of a conversation in order, from `offset`, at most `limit`.
pub fn messages(
    c: &Connection,
    conversation_id: &str,
    offset: u64,
    limit: u64,
) -> Result<Vec<MessageRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {MSG_COLS} FROM messages WHERE conversation_id = ?1 ORDER BY key LIMIT ?2 OFFSET ?3"
    ))?;
    let rows = st.query_map(
        params![conversation_id, limit as i64, offset as i64],
        msg_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The last `n` messages of a conversation, oldest first.
pub fn recent_messages(c: &Connection, conversation_id: &str, n: u64) -> Result<Vec<MessageRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {MSG_COLS} FROM (SELECT * FROM messages WHERE conversation_id = ?1 ORDER BY key DESC LIMIT ?2)
         ORDER BY key"
    ))?;
    let rows = st.query_map(params![conversation_id, n as i64], msg_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Soft-deletes an active conversation; false if it was not active.
pub fn soft_delete(c: &Connection, user_id: &str, id: &str, now: &str) -> Result<bool> {
    Ok(c.execute(
        "UPDATE conversations SET status = 'Deleted', deleted_at = ?3, updated_at = ?3
         WHERE id = ?1 AND user_id = ?2 AND status = 'Active'",
        params![id, user_id, now],
    )? == 1)
}

/// Removes conversations (and, by cascade, their messages) deleted before `cutoff`;
/// returns their ids.
pub fn purge_deleted_before(c: &Connection, cutoff: &str) -> Result<Vec<String>> {
    let mut st = c.prepare(
        "DELETE FROM conversations WHERE status = 'Deleted' AND deleted_at < ?1 RETURNING id",
    )?;
    let ids = st.query_map([cutoff], |r| r.get::<_, String>(0))?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
}

/// How many documents the index must hold: one per active conversation (its title) and
/// one per user or assistant message of an active conversation (system prompts and tool
/// outputs are not searched).
pub fn count_indexable(c: &Connection) -> Result<u64> {
    Ok(c.query_row(
        "SELECT (SELECT COUNT(*) FROM conversations WHERE status = 'Active')
              + (SELECT COUNT(*) FROM messages m JOIN conversations v ON v.id = m.conversation_id
                 WHERE v.status = 'Active' AND m.role IN ('user', 'assistant'))",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

/// Calls `conv` on every active conversation, then `msg` on every user or assistant
/// message of one, with its owner.
pub fn for_each_indexable(
    c: &Connection,
    mut conv: impl FnMut(&ConversationRow) -> Result<()>,
    mut msg: impl FnMut(&str, &MessageRow) -> Result<()>,
) -> Result<()> {
    let mut st = c.prepare(&format!(
        "SELECT {CONV_COLS} FROM conversations WHERE status = 'Active' ORDER BY id"
    ))?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        conv(&conv_row(r)?)?;
    }
    let cols = MSG_COLS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut st = c.prepare(&format!(
        "SELECT {cols}, v.user_id FROM messages m JOIN conversations v ON v.id = m.conversation_id
         WHERE v.status = 'Active' AND m.role IN ('user', 'assistant') ORDER BY m.key"
    ))?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let user: String = r.get(11)?;
        msg(&user, &msg_row(r)?)?;
    }
    Ok(())
}
