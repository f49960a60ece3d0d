//! Onboarding sessions: status plus the whole state as JSON, one row each.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::error::Result;

/// One session row.
#[derive(Debug, Clone)]
pub struct OnboardingRow {
    pub id: String,
    pub user_id: String,
    /// `in_progress`, `review`, `completed` or `failed`.
    pub status: String,
    /// The service's state record, JSON.
    pub state: String,
    pub created_at: String,
    pub updated_at: String,
}

/// Inserts a session.
pub fn insert(tx: &Transaction<'_>, r: &OnboardingRow) -> Result<()> {
    tx.execute(
        "INSERT INTO onboarding_sessions (id, user_id, status, state, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            r.id,
            r.user_id,
            r.status,
            r.state,
            r.created_at,
            r.updated_at
        ],
    )?;
    Ok(())
}

/// The session `id` if it belongs to `user_id`.
pub fn get(c: &Connection, id: &str, user_id: &str) -> Result<Option<OnboardingRow>> {
    Ok(c.query_row(
        "SELECT id, user_id, status, state, created_at, updated_at FROM onboarding_sessions \
             WHERE id = ?1 AND user_id = ?2",
        params![id, user_id],
        |r| {
            Ok(OnboardingRow {
                id: r.get(0)?,
                user_id: r.get(1)?,
                status: r.get(2)?,
                state: r.get(3)?,
                created_at: r.get(4)?,
                updated_at: r.get(5)?,
            })
        },
    )
    .optional()?)
}

/// Saves a session's status and state.
pub fn update(tx: &Transaction<'_>, id: &str, status: &str, state: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE onboarding_sessions SET status = ?2, state = ?3, updated_at = ?4 WHERE id = ?1",
        params![id, status, state, now],
    )?;
    Ok(())
}
