//! Versioned migrations, applied in order on open (docs/design.md §2).
//!
//! `PRAGMA user_version` holds the schema version. Each migration runs inside one
//! `BEGIN IMMEDIATE` transaction with the version bump, so a crash leaves the file at a whole
//! version. A file whose version is newer than `SCHEMA_VERSION` is refused untouched.

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = 18;

/// Migration `i` takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2_GRAPH,
    MIGRATION_AGENT,
    MIGRATION_VECTORS,
    MIGRATION_LIFECYCLE,
    MIGRATION_SIGNATURES_OF_ACTIVE,
    MIGRATION_FTS_DIRECT_INSERT,
    MIGRATION_SIZE,
    MIGRATION_VECTORS_VERSION,
    MIGRATION_MERGED_AWAY,
    MIGRATION_SERVICE_TOKENS,
    MIGRATION_SURFACED,
    MIGRATION_CODEMAP,
    MIGRATION_CODEMAP_INDEX,
    MIGRATION_CODEMAP_FILES,
    MIGRATION_EVENT_ACTOR,
    MIGRATION_FTS_CHANGES,
    MIGRATION_FILTER_CHANGES,
];

const MIGRATION_1: &str = r#"
CREATE TABLE memories (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- a deleted id is never handed out again
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

/// The knowledge graph (docs/design.md §7): entities, declared relation types, the append-only edge log
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

/// Agent integration (docs/design.md §9–§11): what is kept in the store but never ranked — tasks,
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

/// The lifecycle (docs/design.md §8): dream proposal sets and their proposals (a set is written in one
/// transaction at the end of a dream, so an interrupted dream leaves nothing), and the member
/// hash that makes a generated summary or reflection idempotent.
const MIGRATION_LIFECYCLE: &str = r#"
CREATE TABLE dream_runs (
    id          TEXT PRIMARY KEY,            -- stable: a hash of the snapshot's proposals
    created_at  TEXT NOT NULL,
    snapshot_at TEXT NOT NULL,
    project     TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'proposed',   -- proposed | accepted | rejected
    unattended  INTEGER NOT NULL DEFAULT 0,
    report      TEXT NOT NULL,               -- JSON: what each phase found, LLM errors
    decided_at  TEXT,
    decision    TEXT                         -- JSON: per-proposal outcomes
);
CREATE TABLE dream_proposals (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    kind    TEXT NOT NULL,                   -- decay | merge | forget | summary | reflection
    targets TEXT NOT NULL,                   -- JSON [{id, updated_at, status}] as in the snapshot
    payload TEXT NOT NULL,                   -- JSON
    outcome TEXT,                            -- applied | skipped: reason
    PRIMARY KEY (run_id, seq)
);
ALTER TABLE generated_records ADD COLUMN member_hash TEXT;
CREATE INDEX generated_member_hash ON generated_records(generator, member_hash) WHERE member_hash IS NOT NULL;
"#;

/// Only active records keep a MinHash signature (512 bytes, more than a typical captured body):
/// near-duplicate checks only ever compare active records, and `restore` recomputes the
/// signature of a record it brings back. Self-contained: it only clears a derived column.
const MIGRATION_SIGNATURES_OF_ACTIVE: &str = r#"
UPDATE memories SET minhash = NULL WHERE status != 'active' AND minhash IS NOT NULL;
"#;

/// Bulk writes (issue 2): the write path inserts a new record's full-text row itself, in the
/// same statement sequence as the record (`WriteTx::insert_memory`), instead of through an
/// `AFTER INSERT` trigger (about twice as fast per FTS row measured alone; in the whole import
/// it is small next to the statement re-prepare that `SQLITE_DBCONFIG_ENABLE_QPSG` removed). Updates and
/// deletes keep their triggers (the external-content table needs the old values for FTS5's
/// 'delete' command, which the trigger has at hand); the update trigger now fires only when
/// an indexed column really changed (a link or status update rewrites every column with the
/// same text). Self-contained: it only replaces triggers.
const MIGRATION_FTS_DIRECT_INSERT: &str = r#"
DROP TRIGGER IF EXISTS memories_fts_insert;
DROP TRIGGER IF EXISTS memories_fts_update;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, summary, tags, body ON memories
WHEN old.title IS NOT new.title OR old.summary IS NOT new.summary OR old.tags IS NOT new.tags
    OR old.body IS NOT new.body
BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, summary, tags, body)
    VALUES ('delete', old.id, old.title, old.summary, old.tags, old.body);
    INSERT INTO memories_fts(rowid, title, summary, tags, body)
    VALUES (new.id, new.title, new.summary, new.tags, new.body);
END;
"#;

/// Lowercase hex SHA-256 values (content hashes, receipts) as their 32 bytes: the second half
/// of migration v8, also run on rows `recover_brain` copies from an older brain. Only
/// lowercase hex converts, so reading the bytes back as lowercase hex gives the same text.
macro_rules! hex_to_bytes {
    () => {
        "
UPDATE memories SET content_hash = unhex(content_hash)
    WHERE typeof(content_hash) = 'text' AND length(content_hash) = 64 AND content_hash NOT GLOB '*[^0-9a-f]*';
UPDATE events SET receipt = unhex(receipt)
    WHERE typeof(receipt) = 'text' AND length(receipt) = 64 AND receipt NOT GLOB '*[^0-9a-f]*';
"
    };
}

/// See [`hex_to_bytes!`].
pub const HEX_TO_BYTES: &str = hex_to_bytes!();

/// Size (issue 6): a month of daily captures made the file 20× the live text.
///
/// * MinHash signatures are no longer stored (512 bytes a row, more than a typical captured
///   body): the write path computes the few it compares from the candidates' bodies, a dream
///   computes them all from the snapshot's bodies (seconds at 100,000 records).
/// * A history version stores only the previous values of the fields its change changed
///   (`delta = 1`, a reverse delta against the record as that change wrote it) instead of the
///   whole record; readers still get full snapshots (`history.rs`). Rows written before v8
///   stay full snapshots (`delta = 0`).
/// * An event's detail is stored without the keys its columns already hold (`op`, `at`, the
///   record's `id`: bits 1, 2, 4 of `packed`), its `content_hash` moves to a column of 32
///   bytes (bit 8), and its receipt as the 32 bytes of the SHA-256
///   instead of 64 hex characters; readers get both back as they were. Existing receipts are
///   converted here (only lowercase hex, which converts back byte for byte); existing details
///   stay as they are (`packed = 0`).
/// * A record's content hash is stored as its 32 bytes too (in the row and in the
///   `memories_hash` index); readers get the hex back.
///
/// Self-contained and lossless: it drops a derived column, adds columns whose defaults say
/// "stored the old way", and rewrites hex as bytes that read back as the same hex. The space
/// it frees inside pages leaves the file with the next `VACUUM` (`vacuum_due` tells `doctor
/// --repair`).
const MIGRATION_SIZE: &str = concat!(
    r#"
INSERT INTO meta (key, value)
    SELECT 'vacuum_due', 'schema v8 dropped stored signatures and shortened hashes'
    WHERE EXISTS (SELECT 1 FROM memories WHERE minhash IS NOT NULL)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
ALTER TABLE memories DROP COLUMN minhash;
ALTER TABLE history ADD COLUMN delta INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN packed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN content_hash BLOB;
"#,
    hex_to_bytes!()
);

/// v9: `meta.vectors_version` counts every change to the `vectors` table (triggers), so a
/// long-lived reader that holds the vectors in memory learns with one lookup whether any
/// changed since it read them — most writes (a recall's access counts, a hook's captured
/// turns) change none.
const MIGRATION_VECTORS_VERSION: &str = r#"
INSERT INTO meta (key, value) VALUES ('vectors_version', '0')
    ON CONFLICT (key) DO NOTHING;
CREATE TRIGGER vectors_version_insert AFTER INSERT ON vectors BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_version';
END;
CREATE TRIGGER vectors_version_update AFTER UPDATE ON vectors BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_version';
END;
CREATE TRIGGER vectors_version_delete AFTER DELETE ON vectors BEGIN
    UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_version';
END;
"#;

/// v10: a dream's merged-away record leaves the full-text index and may store its body as a
/// delta against the record it was merged into (`merged_into`, set by `WriteTx::pack_merged`;
/// an active record never has one). The index's content is the view of the records it holds,
/// so `rebuild` and FTS5's `integrity-check` agree with what is indexed. Records merged by
/// earlier dreams stay as they are until `cairn doctor --repair` packs them.
const MIGRATION_MERGED_AWAY: &str = r#"
ALTER TABLE memories ADD COLUMN merged_into INTEGER;
CREATE INDEX memories_merged ON memories(merged_into) WHERE merged_into IS NOT NULL;
DROP TRIGGER IF EXISTS memories_fts_update;
DROP TRIGGER IF EXISTS memories_fts_delete;
DROP TABLE memories_fts;
CREATE VIEW memories_fts_source AS
    SELECT id, title, summary, tags, body FROM memories WHERE merged_into IS NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    title, summary, tags, body,
    content = 'memories_fts_source', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
INSERT INTO memories_fts(memories_fts) VALUES('rebuild');
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.merged_into IS NULL BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, summary, tags, body)
    VALUES ('delete', old.id, old.title, old.summary, old.tags, old.body);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF title, summary, tags, body, merged_into ON memories
WHEN (old.merged_into IS NULL) <> (new.merged_into IS NULL)
    OR (new.merged_into IS NULL AND (old.title IS NOT new.title OR old.summary IS NOT new.summary
        OR old.tags IS NOT new.tags OR old.body IS NOT new.body))
BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, title, summary, tags, body)
        SELECT 'delete', old.id, old.title, old.summary, old.tags, old.body WHERE old.merged_into IS NULL;
    INSERT INTO memories_fts(rowid, title, summary, tags, body)
        SELECT new.id, new.title, new.summary, new.tags, new.body WHERE new.merged_into IS NULL;
END;
"#;

/// The service's access tokens (`cairn token`, `cairn serve`): only the SHA-256 of each secret
/// is kept. `project` NULL is a token for every project. A name is unique among the tokens not
/// revoked, so a revoked name can be given again.
const MIGRATION_SERVICE_TOKENS: &str = r#"
CREATE TABLE service_tokens (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    project TEXT,
    role TEXT NOT NULL CHECK (role IN ('read', 'write', 'admin')),
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
);
CREATE UNIQUE INDEX service_tokens_live_name ON service_tokens(name) WHERE revoked_at IS NULL;
"#;

/// Passive use (issue 18): when the brief or the prompt hook last handed a record to an agent.
/// Apart from `memories`, so `use_count` and ranking never see it; decay does.
const MIGRATION_SURFACED: &str = r#"
CREATE TABLE surfacings (
    memory_id   INTEGER PRIMARY KEY,
    surfaced_at TEXT NOT NULL,
    times       INTEGER NOT NULL DEFAULT 1
);
"#;

/// v13 (codemap): the code map kept per project (`codemap.rs`). A file's row points at its parse
/// by content hash and language, so a refresh re-parses only changed content and a file that
/// returns to an earlier content (a branch switched back) is not parsed again. Derived data:
/// dropping these rows only costs a re-parse.
const MIGRATION_CODEMAP: &str = r#"
CREATE TABLE codemap_parses (
    content_hash TEXT NOT NULL,   -- SHA-256 of the file's content, hex
    lang         TEXT NOT NULL,
    parse        TEXT NOT NULL,   -- definitions and references (the codemap crate's JSON)
    PRIMARY KEY (content_hash, lang)
);
CREATE TABLE codemap_files (
    project      TEXT NOT NULL,
    path         TEXT NOT NULL,   -- relative to the project's root, '/'-separated
    lang         TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    PRIMARY KEY (project, path)
) WITHOUT ROWID;
CREATE INDEX codemap_files_content ON codemap_files(content_hash, lang);
CREATE TABLE codemap_state (
    project  TEXT PRIMARY KEY,
    root     TEXT NOT NULL,
    rev      TEXT,                -- HEAD when built; NULL outside git
    built_at TEXT NOT NULL,
    stale    INTEGER NOT NULL DEFAULT 0
);
"#;

/// v14 (codemap index): what a code-map call reads instead of every stored parse — the
/// project's parses with their identifiers interned, in the codemap crate's binary form — with
/// the key of the files it holds (their paths, languages and content hashes), so an index that
/// does not match `codemap_files` is never used; the files the content checks refused (so an
/// unchanged one is not read again); and the last map rendered, under the key of everything it
/// depends on (the index, the focus, the budget), so an up-to-date map asked again with the same
/// focus reads neither the index nor the graph. `links_seq` is the edge log's last entry when the
/// project's code links (memories' path and identifier entities tied to the files the map
/// knows) were last brought up to date. Derived data: a missing or mismatched row is rebuilt
/// from `codemap_parses`.
const MIGRATION_CODEMAP_INDEX: &str = r#"
CREATE TABLE codemap_index (
    project   TEXT PRIMARY KEY,
    key       TEXT NOT NULL,   -- the files' key (cairn_codemap::index_key), hex
    data      BLOB NOT NULL,   -- cairn_codemap::Index::encode
    skipped   BLOB NOT NULL,   -- cairn_codemap::Index::encode_skipped
    links_seq INTEGER,         -- edge_log.seq after the last code-link sync; NULL: never
    map_key   TEXT,            -- what the cached map was rendered from (hex); NULL: none
    map       TEXT             -- the cached map (cairn_codemap::Rendered as JSON)
);
"#;

/// v15 (codemap per file): the code map kept one file at a time, so that a refresh reads and
/// writes only what changed. Each stored parse is in two parts of the codemap crate's binary
/// form: `graph` (what ranking reads: definitions and references by name id) and `detail`
/// (names and signature lines, read only for the files a map shows). The v14 index (one blob
/// per project, rewritten whole on every change) goes, with the v13 parses (JSON) and the files
/// that pointed at them: derived data, so the next `cairn codemap` of a project parses its tree
/// again (once). `codemap_project` keeps what v14 kept beside the blob: the skipped files, the
/// code-link sync, the last map rendered.
const MIGRATION_CODEMAP_FILES: &str = r#"
DROP TABLE codemap_index;
DELETE FROM codemap_files;
DROP TABLE codemap_parses;
CREATE TABLE codemap_parses (
    content_hash TEXT NOT NULL,   -- SHA-256 of the file's content, hex
    lang         TEXT NOT NULL,
    graph        BLOB NOT NULL,   -- cairn_codemap::IndexFile::encode_graph
    detail       BLOB NOT NULL,   -- cairn_codemap::IndexFile::encode_detail
    PRIMARY KEY (content_hash, lang)
);
CREATE TABLE codemap_project (
    project   TEXT PRIMARY KEY,
    skipped   BLOB NOT NULL,   -- cairn_codemap::Index::encode_skipped
    links_seq INTEGER,         -- edge_log.seq after the last code-link sync; NULL: never
    map_key   TEXT,            -- what the cached map was rendered from (hex); NULL: none
    map       TEXT             -- the cached map (cairn_codemap::Rendered as JSON)
);
"#;

/// v16 (issue 16, the timeline's actor filter): who wrote each event — the same actor its
/// operation's history rows name (`cli`, `hook`, `mcp`, a token's name, `import`, …). Events
/// written before v16 keep `''`: who wrote them was not recorded, and it is never guessed. The
/// index answers "the events of this actor, newest first" and lists the actors present (one
/// probe per distinct actor) without a scan of the log.
const MIGRATION_EVENT_ACTOR: &str = r#"
ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT '';
CREATE INDEX events_actor ON events(actor);
"#;

/// v17 (issue 14, `cairn serve` throughput): `fts_changes` logs which record's full-text row
/// changed, in order (`seq`), so a long-lived process that keeps the index in memory
/// (`LexicalIndex`) brings it up to date by re-reading only those records — whichever process
/// wrote them. Its triggers fire exactly when the full-text row changes: an insert (the write
/// path inserts the row itself), the update trigger's condition, a delete of an indexed record.
/// Only the newest 10,000 entries are kept; a reader further behind rebuilds. Derived data:
/// never copied by `cairn migrate` (`postgres::brain_tables`). Self-contained: it only adds a
/// table and triggers.
const MIGRATION_FTS_CHANGES: &str = r#"
CREATE TABLE fts_changes (
    seq       INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL
);
INSERT INTO fts_changes (memory_id) VALUES (0);
CREATE TRIGGER fts_changes_insert AFTER INSERT ON memories WHEN new.merged_into IS NULL BEGIN
    INSERT INTO fts_changes (memory_id) VALUES (new.id);
END;
CREATE TRIGGER fts_changes_update AFTER UPDATE OF title, summary, tags, body, merged_into ON memories
WHEN (old.merged_into IS NULL) <> (new.merged_into IS NULL)
    OR (new.merged_into IS NULL AND (old.title IS NOT new.title OR old.summary IS NOT new.summary
        OR old.tags IS NOT new.tags OR old.body IS NOT new.body))
BEGIN
    INSERT INTO fts_changes (memory_id) VALUES (new.id);
END;
CREATE TRIGGER fts_changes_delete AFTER DELETE ON memories WHEN old.merged_into IS NULL BEGIN
    INSERT INTO fts_changes (memory_id) VALUES (old.id);
END;
CREATE TRIGGER fts_changes_trim AFTER INSERT ON fts_changes BEGIN
    DELETE FROM fts_changes WHERE seq <= new.seq - 10000;
END;
"#;

/// v18 (issue 14, `cairn serve` throughput): `fts_changes` also logs a change to the columns
/// recall filters on and orders conversations by — project, scope, type, status, created_at,
/// retired_at, sensitivity, trust_zone — of an indexed record, so the in-memory index can keep
/// them too and answer a search's filters and an episode's conversation neighbours without
/// reading `memories` (`LexicalIndex`). Such changes are rare (a supersession, a forget, an
/// edit), and each costs one log entry. Self-contained: it only replaces a trigger.
const MIGRATION_FILTER_CHANGES: &str = r#"
DROP TRIGGER fts_changes_update;
CREATE TRIGGER fts_changes_update AFTER UPDATE OF title, summary, tags, body, merged_into,
    project, scope, type, status, created_at, retired_at, sensitivity, trust_zone ON memories
WHEN (old.merged_into IS NULL) <> (new.merged_into IS NULL)
    OR (new.merged_into IS NULL AND (old.title IS NOT new.title OR old.summary IS NOT new.summary
        OR old.tags IS NOT new.tags OR old.body IS NOT new.body
        OR old.project IS NOT new.project OR old.scope IS NOT new.scope
        OR old.type IS NOT new.type OR old.status IS NOT new.status
        OR old.created_at IS NOT new.created_at OR old.retired_at IS NOT new.retired_at
        OR old.sensitivity IS NOT new.sensitivity OR old.trust_zone IS NOT new.trust_zone))
BEGIN
    INSERT INTO fts_changes (memory_id) VALUES (new.id);
END;
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn apply(conn: &Connection, from: usize, to: usize) {
        for (index, migration) in MIGRATIONS.iter().enumerate().take(to).skip(from) {
            conn.execute_batch(migration).unwrap();
            conn.execute_batch(&format!("PRAGMA user_version = {}", index + 1))
                .unwrap();
        }
    }

    fn dump(conn: &Connection, sql: &str) -> Vec<String> {
        let mut statement = conn.prepare(sql).unwrap();
        let columns = statement.column_count();
        statement
            .query_map([], |row| {
                let mut line = Vec::new();
                for column in 0..columns {
                    let value: rusqlite::types::Value = row.get(column)?;
                    line.push(format!("{value:?}"));
                }
                Ok(line.join("|"))
            })
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
    }

    #[test]
    fn migrating_a_v5_brain_keeps_everything_but_archived_signatures() {
        let conn = Connection::open_in_memory().unwrap();
        let before_v6 = 5; // migrations 1..=5 give schema v5
        apply(&conn, 0, before_v6);
        let signature = vec![7u8; 512];
        for (id, status) in [(1, "active"), (2, "archived"), (3, "superseded")] {
            conn.execute(
                "INSERT INTO memories (id, project, type, body, confidence, trust, trust_zone, sensitivity, status, \
                 created_at, updated_at, valid_from, content_hash, minhash) \
                 VALUES (?1, 'p', 'note', ?2, 'reported', 'stated', 'private_self', 'normal', ?3, \
                 '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?4, ?5)",
                rusqlite::params![id, format!("body {id}"), status, format!("hash{id}"), signature],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO history (memory_id, version, at, op, actor, snapshot) VALUES (?1, 1, 'x', 'update', 'a', '{}')",
                [id],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (at, op, memory_id, detail, receipt) VALUES ('x', 'remember', ?1, '{}', 'r')",
                [id],
            )
            .unwrap();
        }
        let everything_but_signatures = |conn: &Connection| {
            let mut all = dump(
                conn,
                "SELECT id, project, scope, type, title, body, status, content_hash, created_at, updated_at FROM memories ORDER BY id",
            );
            all.extend(dump(conn, "SELECT * FROM history ORDER BY id"));
            all.extend(dump(conn, "SELECT * FROM events ORDER BY id"));
            all.extend(dump(
                conn,
                "SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'body' ORDER BY rowid",
            ));
            all
        };
        let kept = everything_but_signatures(&conn);
        assert_eq!(kept.len(), 3 + 3 + 3 + 3);

        apply(&conn, before_v6, 7);
        assert_eq!(everything_but_signatures(&conn), kept);
        let signatures = dump(
            &conn,
            "SELECT id, length(minhash) FROM memories ORDER BY id",
        );
        assert_eq!(
            signatures,
            vec![
                "Integer(1)|Integer(512)",
                "Integer(2)|Null",
                "Integer(3)|Null"
            ]
        );
    }
}
