-- 3: assistant users, login sessions, the settings record and onboarding sessions.

-- One row per user. The API secret is stored only as its SHA-256 (hex); the password
-- only as an argon2 PHC string.
CREATE TABLE users (
    id              TEXT PRIMARY KEY,
    email           TEXT NOT NULL UNIQUE COLLATE NOCASE,
    name            TEXT NOT NULL,
    password_hash   TEXT NOT NULL,
    is_admin        INTEGER NOT NULL DEFAULT 0,
    api_key         TEXT NOT NULL UNIQUE,
    api_secret_hash TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

-- Cookie sessions of `POST /api/method/login`; the cookie value is stored hashed.
CREATE TABLE login_sessions (
    sid_hash   TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    expires_at INTEGER NOT NULL -- Unix seconds
);
CREATE INDEX login_sessions_user ON login_sessions(user_id);

-- The one settings record, as JSON.
CREATE TABLE settings (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Onboarding sessions: the whole state (answers, generated configuration, result) as JSON.
CREATE TABLE onboarding_sessions (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    status     TEXT NOT NULL CHECK (status IN ('in_progress', 'review', 'completed', 'failed')),
    state      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX onboarding_sessions_user ON onboarding_sessions(user_id, created_at);
