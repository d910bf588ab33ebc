//! Versioned migrations, applied in order on open (DESIGN §2).
//!
//! `PRAGMA user_version` holds the schema version. Each migration runs inside one
//! `BEGIN IMMEDIATE` transaction with the version bump, so a crash leaves the file at a whole
//! version. A file whose version is newer than `SCHEMA_VERSION` is refused untouched.

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[MIGRATION_1, MIGRATION_AGENT];

const MIGRATION_1: &str = r#"
CREATE TABLE memories (
    id               INTEGER PRIMARY KEY,
    project          TEXT NOT NULL DEFAULT '',   -- '' = personal
    scope            TEXT NOT NULL DEFAULT 'global',
    type             TEXT NOT NULL,
    title            TEXT,
    title_norm       TEXT,
    body             TEXT NOT NULL,
    summary          TEXT,
    tags             TEXT NOT NULL DEFAULT '',   -- space-joined, indexed by FTS
    importance       INTEGER NOT NULL DEFAULT 3,
    confidence       TEXT NOT NULL,
    trust            TEXT NOT NULL,
    trust_zone       TEXT NOT NULL,
    sensitivity      TEXT NOT NULL,
    source           TEXT,
    commit_rev       TEXT,
    review_at        TEXT,
    expires_at       TEXT,
    pinned           INTEGER NOT NULL DEFAULT 0,
    status           TEXT NOT NULL DEFAULT 'active',
    supersedes       INTEGER,
    superseded_by    INTEGER,
    external_id      TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    last_accessed_at TEXT,
    valid_from       TEXT NOT NULL,
    use_count        INTEGER NOT NULL DEFAULT 0,
    content_hash     TEXT NOT NULL,
    minhash          BLOB,
    retired_at       TEXT
);
CREATE INDEX memories_identity ON memories(project, scope, title_norm) WHERE status = 'active';
CREATE INDEX memories_hash ON memories(content_hash);
CREATE INDEX memories_external ON memories(project, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX memories_status ON memories(status, type);

-- Locality-sensitive buckets of each record's MinHash signature: near-duplicate candidates
-- come from an index lookup instead of a scan of every record.
CREATE TABLE minhash_bands (
    bucket    INTEGER NOT NULL,
    memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE
);
CREATE INDEX minhash_bands_bucket ON minhash_bands(bucket);
CREATE INDEX minhash_bands_memory ON minhash_bands(memory_id);

CREATE VIRTUAL TABLE memories_fts USING fts5(
    title, summary, tags, body,
    content = 'memories', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, title, summary, tags, body)
    VALUES (new.id, new.title, new.summary, new.tags, new.body);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, summary, tags, body)
    VALUES ('delete', old.id, old.title, old.summary, old.tags, old.body);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, summary, tags, body ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, summary, tags, body)
    VALUES ('delete', old.id, old.title, old.summary, old.tags, old.body);
    INSERT INTO memories_fts(rowid, title, summary, tags, body)
    VALUES (new.id, new.title, new.summary, new.tags, new.body);
END;

-- Every previous version of a record, with who changed it, when and how.
CREATE TABLE history (
    id        INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    at        TEXT NOT NULL,
    op        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    snapshot  TEXT NOT NULL      -- the record as JSON before the change
);
CREATE INDEX history_memory ON history(memory_id, version);

-- The append-only activity log with operation receipts.
CREATE TABLE events (
    id        INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    op        TEXT NOT NULL,
    memory_id INTEGER,
    project   TEXT NOT NULL DEFAULT '',
    detail    TEXT NOT NULL,     -- canonical JSON of the operation
    receipt   TEXT NOT NULL      -- SHA-256 of detail
);
CREATE INDEX events_memory ON events(memory_id);

CREATE TABLE conflicts (
    id          INTEGER PRIMARY KEY,
    memory_id   INTEGER NOT NULL,
    other_id    INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    resolved_at TEXT
);
CREATE INDEX conflicts_open ON conflicts(memory_id, other_id) WHERE resolved_at IS NULL;

CREATE TABLE scopes (
    project     TEXT NOT NULL,
    scope       TEXT NOT NULL,
    description TEXT,
    declared_at TEXT NOT NULL,
    PRIMARY KEY (project, scope)
);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#;

/// Agent integration (DESIGN §9–§11): what is kept in the store but never ranked — tasks,
/// measures, the identity, awareness items — plus the inbox of captured candidate facts and the
/// per-session byte offsets of transcript capture.
const MIGRATION_AGENT: &str = r#"
CREATE TABLE tasks (
    id         INTEGER PRIMARY KEY,
    project    TEXT NOT NULL DEFAULT '',   -- '' = personal
    title      TEXT NOT NULL,
    detail     TEXT,
    status     TEXT NOT NULL DEFAULT 'open',   -- open | done
    due_at     TEXT,
    created_at TEXT NOT NULL,
    done_at    TEXT
);
CREATE INDEX tasks_project ON tasks(project, status);

-- Readings of a named value over time.
CREATE TABLE measures (
    id      INTEGER PRIMARY KEY,
    project TEXT NOT NULL DEFAULT '',
    name    TEXT NOT NULL,
    value   REAL NOT NULL,
    unit    TEXT,
    note    TEXT,
    at      TEXT NOT NULL
);
CREATE INDEX measures_name ON measures(project, name, at);

-- Who the agent is: one row.
CREATE TABLE identity (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    body       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Short-lived working items (at most 10 live per project, each with an expiry).
CREATE TABLE awareness (
    id         INTEGER PRIMARY KEY,
    project    TEXT NOT NULL DEFAULT '',
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX awareness_project ON awareness(project, expires_at);

-- The brief asks for due reviews and pinned records on every session start: partial indexes
-- keep those lookups from scanning every record (a full scan reads every body).
CREATE INDEX memories_review_due ON memories(review_at) WHERE review_at IS NOT NULL AND status = 'active';
CREATE INDEX memories_pinned ON memories(importance) WHERE pinned = 1 AND status = 'active';

-- How far each session's transcript has been captured (a byte offset into the file).
CREATE TABLE capture_offsets (
    session_id      TEXT PRIMARY KEY,
    transcript_path TEXT NOT NULL,
    byte_offset     INTEGER NOT NULL,
    turns           INTEGER NOT NULL DEFAULT 0,
    updated_at      TEXT NOT NULL
);

-- Candidate durable facts found in captured transcripts, awaiting a decision.
CREATE TABLE inbox (
    id             INTEGER PRIMARY KEY,
    project        TEXT NOT NULL DEFAULT '',
    kind           TEXT NOT NULL,     -- which heuristic fired
    suggested_type TEXT NOT NULL,
    body           TEXT NOT NULL,
    content_hash   TEXT NOT NULL,
    source         TEXT NOT NULL,
    trust          TEXT NOT NULL DEFAULT 'captured',
    created_at     TEXT NOT NULL,
    resolved_at    TEXT,
    resolution     TEXT,
    UNIQUE (project, content_hash)
);
"#;
