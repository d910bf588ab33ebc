//! Versioned migrations, applied in order on open (DESIGN §2).
//!
//! `PRAGMA user_version` holds the schema version. Each migration runs inside one
//! `BEGIN IMMEDIATE` transaction with the version bump, so a crash leaves the file at a whole
//! version. A file whose version is newer than `SCHEMA_VERSION` is refused untouched.

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[MIGRATION_1, MIGRATION_VECTORS];

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

/// Semantic index (issue 3): one embedding per record, derived data like the FTS rows.
///
/// * `vectors` holds the L2-normalized f32 vector (little-endian) of the text a record was
///   embedded from; `text_hash` is the SHA-256 of that text (the record's words plus any
///   context the engine adds), so identical texts reuse a vector (the cache by content hash)
///   and a stale vector is recognisable.
/// * Which model made the vectors lives in `meta` (`embed_model`, `embed_dim`): one brain, one
///   vector space; a model switch re-embeds everything.
/// * A record without a row is *pending*: the queue that `cairn reindex` and the background
///   pass complete. Changing a record's text drops its row (it becomes pending again), and
///   deleting a record drops it, so a row is never stale and never orphaned.
const MIGRATION_VECTORS: &str = r#"
CREATE TABLE vectors (
    memory_id INTEGER PRIMARY KEY,
    text_hash TEXT NOT NULL,
    vector    BLOB NOT NULL
);
CREATE INDEX vectors_text_hash ON vectors(text_hash);
-- The turns before an episode (its conversational context) by one index lookup.
CREATE INDEX memories_conversation ON memories(project, scope, created_at) WHERE type = 'episode';
CREATE TRIGGER vectors_forget_deleted AFTER DELETE ON memories BEGIN
    DELETE FROM vectors WHERE memory_id = old.id;
END;
CREATE TRIGGER vectors_forget_changed AFTER UPDATE OF title, summary, body ON memories
WHEN old.body IS NOT new.body OR old.title IS NOT new.title OR old.summary IS NOT new.summary
BEGIN
    DELETE FROM vectors WHERE memory_id = new.id;
END;
"#;
