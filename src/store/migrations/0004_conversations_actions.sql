-- 4: conversations, their messages, and pending (high-risk) tool actions.
--
-- Conversations are soft-deleted (status 'Deleted', deleted_at) and purged, with their
-- messages, `conversation_retention_days` later. `conversation_index_state.generation`
-- is bumped by every write that changes what the conversation full-text index must
-- hold; the index records it on each commit, so a stale index is rebuilt at start-up.

CREATE TABLE conversations (
    id               TEXT PRIMARY KEY,
    user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    title            TEXT NOT NULL,
    -- 1 while the title is the placeholder; the first user message then names it.
    title_is_default INTEGER NOT NULL DEFAULT 0,
    status           TEXT NOT NULL CHECK (status IN ('Active', 'Deleted')),
    message_count    INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    deleted_at       TEXT
);
CREATE INDEX conversations_user_status_updated ON conversations(user_id, status, updated_at);
CREATE INDEX conversations_deleted ON conversations(status, deleted_at);

CREATE TABLE messages (
    key             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content         TEXT NOT NULL,
    tool_calls      TEXT,
    attachments     TEXT,
    tokens_in       INTEGER NOT NULL DEFAULT 0,
    tokens_out      INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL
);
CREATE INDEX messages_conversation ON messages(conversation_id, key);

CREATE TABLE conversation_index_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT INTO conversation_index_state (id, generation) VALUES (1, 0);

-- status: pending -> executing (transient, while the confirmed tool runs) -> executed | failed;
-- pending -> rejected | expired.
CREATE TABLE pending_actions (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    tool_name   TEXT NOT NULL,
    params      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'executing', 'executed', 'failed', 'rejected', 'expired')),
    reason      TEXT,
    result      TEXT,
    error       TEXT,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    decided_at  TEXT
);
CREATE INDEX pending_actions_user_status ON pending_actions(user_id, status, created_at);
CREATE INDEX pending_actions_status_expires ON pending_actions(status, expires_at);
