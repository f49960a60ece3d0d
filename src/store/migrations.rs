//! Numbered schema migrations, applied in order at start-up and tracked in
//! `PRAGMA user_version`. Never edit a released migration; add a new one.

use rusqlite::Connection;

use crate::error::Result;

/// Migration `i` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: sources and their chunks (with embeddings), and the write generation that the
    // derived indexes (usearch, tantivy) record to detect staleness.
    r#"
    CREATE TABLE sources (
        id           TEXT PRIMARY KEY,
        source       TEXT NOT NULL UNIQUE,
        source_type  TEXT NOT NULL CHECK (source_type IN ('file', 'url')),
        title        TEXT NOT NULL,
        file_type    TEXT NOT NULL,
        section      TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        chunk_count  INTEGER NOT NULL,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL
    );
    CREATE INDEX sources_content_hash ON sources(content_hash);

    CREATE TABLE chunks (
        key        INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT NOT NULL UNIQUE,
        source_id  TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
        position   INTEGER NOT NULL,
        text       TEXT NOT NULL,
        text_hash  TEXT NOT NULL,
        language   TEXT NOT NULL,
        metadata   TEXT NOT NULL,
        embedding  BLOB NOT NULL,
        UNIQUE (source_id, position)
    );

    CREATE TABLE index_state (
        id         INTEGER PRIMARY KEY CHECK (id = 1),
        generation INTEGER NOT NULL
    );
    INSERT INTO index_state (id, generation) VALUES (1, 0);
    "#,
    // 2: durable background tasks.
    r#"
    CREATE TABLE tasks (
        id           TEXT PRIMARY KEY,
        kind         TEXT NOT NULL CHECK (kind IN ('upload', 'scrape')),
        status       TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
        progress     REAL NOT NULL DEFAULT 0,
        params       TEXT NOT NULL,
        result       TEXT,
        error        TEXT,
        created_at   TEXT NOT NULL,
        started_at   TEXT,
        completed_at TEXT
    );
    CREATE INDEX tasks_status_created ON tasks(status, created_at);
    CREATE INDEX tasks_created ON tasks(created_at);
    "#,
    // 3: assistant users, login sessions, settings and onboarding sessions.
    include_str!("migrations/0003_users_settings.sql"),
    // 4: conversations, messages and pending actions.
    include_str!("migrations/0004_conversations_actions.sql"),
    // 5: the identity of the embedder behind the stored vectors; the `reindex` task kind.
    include_str!("migrations/0005_embedder_identity.sql"),
    // 6: the sources, mode and grounding of an assistant message's answer.
    include_str!("migrations/0006_message_answer.sql"),
];

/// The schema version the migrations lead to.
pub fn latest() -> u32 {
    MIGRATIONS.len() as u32
}

/// Applies every migration newer than the database's `user_version`, each in its own
/// transaction.
pub fn run(conn: &mut Connection) -> Result<()> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if current > MIGRATIONS.len() {
        return Err(anyhow::anyhow!(
            "database schema version {current} is newer than this ragd ({}); upgrade ragd",
            MIGRATIONS.len()
        )
        .into());
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
        tracing::info!(version = i + 1, "applied database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_are_idempotent() {
        let mut c = Connection::open_in_memory().unwrap();
        run(&mut c).unwrap();
        run(&mut c).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v as usize, MIGRATIONS.len());
    }
}
