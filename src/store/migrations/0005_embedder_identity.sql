-- 5: which embedder made the stored vectors, so that a start with a different one
-- never mixes its vectors with theirs, and the `reindex` task kind that re-embeds them.
--
-- An embedder's identity is its name, its dimension and its fingerprint: its vectors of
-- a few fixed probe texts (little-endian f32, one after the other). Every chunk records
-- the identity its vector came from; `index_state.embedder_id` is the identity the
-- knowledge base has adopted (its searches are served only when every chunk's vector
-- comes from the running embedder). Chunks stored before this migration have no
-- identity yet: the next start assigns them the adopted one (or adopts the running
-- embedder's when none is stored).

CREATE TABLE embedders (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    fingerprint BLOB NOT NULL,
    created_at  TEXT NOT NULL
);

ALTER TABLE chunks ADD COLUMN embedder_id INTEGER REFERENCES embedders(id);
CREATE INDEX chunks_embedder ON chunks(embedder_id);
ALTER TABLE index_state ADD COLUMN embedder_id INTEGER REFERENCES embedders(id);

-- A CHECK constraint cannot be altered in SQLite: the tasks table is rebuilt with the
-- new kind allowed (nothing references it).
CREATE TABLE tasks_new (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('upload', 'scrape', 'reindex')),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
    progress     REAL NOT NULL DEFAULT 0,
    params       TEXT NOT NULL,
    result       TEXT,
    error        TEXT,
    created_at   TEXT NOT NULL,
    started_at   TEXT,
    completed_at TEXT
);
INSERT INTO tasks_new (id, kind, status, progress, params, result, error, created_at, started_at, completed_at)
    SELECT id, kind, status, progress, params, result, error, created_at, started_at, completed_at FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX tasks_status_created ON tasks(status, created_at);
CREATE INDEX tasks_created ON tasks(created_at);
