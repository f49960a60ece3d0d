//! Assistant users and their cookie login sessions.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use crate::error::Result;

/// One user row.
#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    /// argon2 PHC string.
    pub password_hash: String,
    pub is_admin: bool,
    pub api_key: String,
    /// SHA-256 of the API secret, hex.
    pub api_secret_hash: String,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str =
    "id, email, name, password_hash, is_admin, api_key, api_secret_hash, created_at, updated_at";

fn row(r: &Row<'_>) -> rusqlite::Result<UserRow> {
    Ok(UserRow {
        id: r.get(0)?,
        email: r.get(1)?,
        name: r.get(2)?,
        password_hash: r.get(3)?,
        is_admin: r.get(4)?,
        api_key: r.get(5)?,
        api_secret_hash: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

/// Inserts a user; the caller has checked that the email is free.
pub fn insert(tx: &Transaction<'_>, u: &UserRow) -> Result<()> {
    tx.execute(
        &format!("INSERT INTO users ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
        params![
            u.id,
            u.email,
            u.name,
            u.password_hash,
            u.is_admin,
            u.api_key,
            u.api_secret_hash,
            u.created_at,
            u.updated_at
        ],
    )?;
    Ok(())
}

/// How many users exist.
pub fn count(c: &Connection) -> Result<u64> {
    let n: i64 = c.query_row("SELECT COUNT(*) FROM users", [], |r| r.get(0))?;
    Ok(n as u64)
}

/// The user with this email (case-insensitive).
pub fn by_email(c: &Connection, email: &str) -> Result<Option<UserRow>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM users WHERE email = ?1"),
        [email],
        row,
    )
    .optional()?)
}

/// The user owning this API key.
pub fn by_api_key(c: &Connection, key: &str) -> Result<Option<UserRow>> {
    Ok(c.query_row(
        &format!("SELECT {COLS} FROM users WHERE api_key = ?1"),
        [key],
        row,
    )
    .optional()?)
}

/// Every user, oldest first.
pub fn list(c: &Connection) -> Result<Vec<UserRow>> {
    let mut st = c.prepare(&format!(
        "SELECT {COLS} FROM users ORDER BY created_at, email"
    ))?;
    let rows = st.query_map([], row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Deletes the user with this email (and, by cascade, its sessions); whether it existed.
pub fn delete(tx: &Transaction<'_>, email: &str) -> Result<bool> {
    Ok(tx.execute("DELETE FROM users WHERE email = ?1", [email])? > 0)
}

/// Replaces a user's API key and secret hash; whether the user exists.
pub fn set_api_credentials(
    tx: &Transaction<'_>,
    email: &str,
    api_key: &str,
    api_secret_hash: &str,
    now: &str,
) -> Result<bool> {
    Ok(tx.execute(
        "UPDATE users SET api_key = ?2, api_secret_hash = ?3, updated_at = ?4 WHERE email = ?1",
        params![email, api_key, api_secret_hash, now],
    )? > 0)
}

/// Records a login session (the cookie value hashed).
pub fn insert_session(
    tx: &Transaction<'_>,
    sid_hash: &str,
    user_id: &str,
    created_at: &str,
    expires_at: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO login_sessions (sid_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
        params![sid_hash, user_id, created_at, expires_at],
    )?;
    Ok(())
}

/// The user of an unexpired session.
pub fn session_user(c: &Connection, sid_hash: &str, now_unix: i64) -> Result<Option<UserRow>> {
    let cols = COLS
        .split(", ")
        .map(|col| format!("u.{col}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(c.query_row(
        &format!(
            "SELECT {cols} FROM login_sessions s JOIN users u ON u.id = s.user_id \
                 WHERE s.sid_hash = ?1 AND s.expires_at > ?2"
        ),
        params![sid_hash, now_unix],
        row,
    )
    .optional()?)
}

/// Ends a session; also drops every expired one. Whether the session existed.
pub fn delete_session(tx: &Transaction<'_>, sid_hash: &str, now_unix: i64) -> Result<bool> {
    let n = tx.execute("DELETE FROM login_sessions WHERE sid_hash = ?1", [sid_hash])?;
    tx.execute(
        "DELETE FROM login_sessions WHERE expires_at <= ?1",
        [now_unix],
    )?;
    Ok(n > 0)
}
