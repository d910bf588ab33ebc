//! Versioned migrations, applied in order on open (DESIGN §2).
//!
//! `PRAGMA user_version` holds the schema version. Each migration runs inside one
//! `BEGIN IMMEDIATE` transaction with the version bump, so a crash leaves the file at a whole
//! version. A file whose version is newer than `SCHEMA_VERSION` is refused untouched.

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[MIGRATION_1, MIGRATION_2_GRAPH];

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

/// The knowledge graph (DESIGN §7): entities, declared relation types, the append-only edge log
/// (the source of truth), the validity intervals folded from it (derived, rebuilt by `doctor
/// --repair`), edges waiting for an endpoint (`--allow-dangling`), and which records were
/// generated by consolidation (never clustering input). Self-contained: it only adds tables.
const MIGRATION_2_GRAPH: &str = r#"
CREATE TABLE entities (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    type       TEXT NOT NULL,
    key        TEXT NOT NULL UNIQUE,    -- normalized name: the entity's identity
    created_at TEXT NOT NULL
);
CREATE INDEX entities_type ON entities(type, key);

CREATE TABLE entity_aliases (
    alias_key  TEXT PRIMARY KEY,        -- normalized like entities.key
    alias      TEXT NOT NULL,
    entity_id  INTEGER NOT NULL
);
CREATE INDEX entity_aliases_entity ON entity_aliases(entity_id);

CREATE TABLE relation_types (
    name        TEXT PRIMARY KEY,
    weight      REAL NOT NULL,          -- in the blast radius
    symmetric   INTEGER NOT NULL DEFAULT 0,
    builtin     INTEGER NOT NULL DEFAULT 0,
    description TEXT,
    declared_at TEXT NOT NULL
);
INSERT INTO relation_types (name, weight, symmetric, builtin, description, declared_at) VALUES
    ('requires',   1.0, 0, 1, 'A needs B to work', '1970-01-01T00:00:00Z'),
    ('affects',    1.0, 0, 1, 'a change to A changes B', '1970-01-01T00:00:00Z'),
    ('part_of',    0.8, 0, 1, 'A is a part of B', '1970-01-01T00:00:00Z'),
    ('supersedes', 0.6, 0, 1, 'A replaces B (written when a record supersedes another)', '1970-01-01T00:00:00Z'),
    ('relates',    0.5, 1, 1, 'A and B are related (co-occurring entities get a low-confidence one)', '1970-01-01T00:00:00Z'),
    ('mentions',   0.3, 0, 1, 'record A talks about entity B (written by extraction)', '1970-01-01T00:00:00Z');

-- The append-only edge log: never updated, never deleted. An assert opens an interval at
-- valid_from, an invalidate closes the open one at valid_to; the fold in recorded_at order
-- (seq breaking ties) is the graph. recorded_at never goes backwards.
CREATE TABLE edge_log (
    seq         INTEGER PRIMARY KEY,
    op          TEXT NOT NULL CHECK (op IN ('assert', 'invalidate')),
    src_kind    TEXT NOT NULL CHECK (src_kind IN ('record', 'entity')),
    src_id      INTEGER NOT NULL,
    relation    TEXT NOT NULL,
    dst_kind    TEXT NOT NULL CHECK (dst_kind IN ('record', 'entity')),
    dst_id      INTEGER NOT NULL,
    valid_from  TEXT,                   -- assert
    valid_to    TEXT,                   -- invalidate
    recorded_at TEXT NOT NULL,
    confidence  REAL NOT NULL DEFAULT 1.0,
    origin      TEXT NOT NULL,          -- user, extraction, cooccurrence, supersede, import
    actor       TEXT NOT NULL DEFAULT ''
);
-- No secondary index: every entry opened or closed an interval of `edges`, whose assert_seq /
-- invalidate_seq find it (a node's history goes through the interval indexes).

-- Derived: the validity intervals the fold of edge_log gives, one row per interval, written in
-- the same transaction as the log entry. invalidate_seq IS NULL = still open.
CREATE TABLE edges (
    id             INTEGER PRIMARY KEY,
    src_kind       TEXT NOT NULL,
    src_id         INTEGER NOT NULL,
    relation       TEXT NOT NULL,
    dst_kind       TEXT NOT NULL,
    dst_id         INTEGER NOT NULL,
    valid_from     TEXT NOT NULL,
    valid_to       TEXT,
    confidence     REAL NOT NULL,
    assert_seq     INTEGER NOT NULL,
    invalidate_seq INTEGER
);
-- Covering indexes: walks and `--as-of` scans read validity and confidence from the index
-- alone, in edge-key order.
CREATE INDEX edges_src ON edges(src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence);
CREATE INDEX edges_dst ON edges(dst_kind, dst_id, relation, src_kind, src_id, valid_from, valid_to, confidence);

-- Edges whose endpoint did not resolve, kept with `--allow-dangling` until it does.
CREATE TABLE edge_quarantine (
    id           INTEGER PRIMARY KEY,
    src          TEXT NOT NULL,
    relation     TEXT NOT NULL,
    dst          TEXT NOT NULL,
    valid_from   TEXT NOT NULL,
    valid_to     TEXT,
    confidence   REAL NOT NULL,
    recorded_at  TEXT NOT NULL,
    reason       TEXT NOT NULL,
    resolved_seq INTEGER                -- the log entry it became once both ends resolved
);
CREATE INDEX edge_quarantine_open ON edge_quarantine(resolved_seq);

-- Records written by consolidation (summaries, reflections): never clustering input, so a
-- generated record cannot feed its own generator.
CREATE TABLE generated_records (
    memory_id INTEGER PRIMARY KEY,
    generator TEXT NOT NULL,
    marked_at TEXT NOT NULL
);
"#;
