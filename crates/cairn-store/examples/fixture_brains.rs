//! Writes the fixture brains `brain-vN.db`, one per schema version, that
//! `crates/cairn-cli/tests/fixtures.rs` opens with the current binary (old data must still open).
//!
//! Run through `scripts/fixture-brains.sh`. A brain of version N is built the way a real one
//! grew: migration 1, then the rows a v1 binary wrote (in v1's shape), migration 2, the rows a
//! v2 binary added, … up to migration N. Later migrations convert the earlier rows exactly as
//! they convert a user's brain. `SEEDS[k]` are the rows written at version k + 1, in that
//! version's shape: every table the version added gets representative rows.
//!
//! Existing files are never rewritten (a fixture is a frozen sample of its version; v1 and v2
//! were written by the binary of their day). To add `brain-v19.db` at the next migration:
//! append its seed to `SEEDS` (rows for whatever v19 adds or changes, written the way the
//! v19 code writes them; `|_| Ok(())` when nothing), run `scripts/fixture-brains.sh`, commit
//! the new file, and add its test in `fixtures.rs`.

use cairn_core::memory::Memory;
use cairn_core::minhash::signature;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, Trust, TrustZone};
use cairn_core::text::{content_hash, normalize_title};
use cairn_store::{META_EMBED_DIM, META_EMBED_MODEL, MIGRATIONS, SCHEMA_VERSION, vector_to_blob};
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const PROJECT: &str = "fixture-project";
const T0: &str = "2026-01-05T10:00:00Z";
const T1: &str = "2026-01-06T10:00:00Z";
const T2: &str = "2026-01-07T10:00:00Z";
const COMMIT: &str = "abcdef1234567890abcdef1234567890abcdef12";
/// The content hash of v13's mapped file.
const CODEMAP_HASH: &str = "5f1d0c0e8d8cc1b0bd2d0b0e7c4f3a2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c";

type Seed = fn(&Connection) -> rusqlite::Result<()>;

/// `SEEDS[k]`: the rows written at schema version k + 1.
const SEEDS: &[Seed] = &[
    seed_v1,
    seed_v2,
    seed_v3,
    seed_v4,
    seed_v5,
    seed_v6,
    seed_v7,
    seed_v8,
    seed_v9,
    seed_v10,
    seed_service_tokens,
    seed_surfaced,
    seed_codemap,
    seed_codemap_index,
    seed_codemap_files,
    seed_event_actor,
    seed_fts_changes,
    seed_filter_changes,
];

/// v17, `MIGRATION_FTS_CHANGES` (the full-text change log): its triggers log the rows v17 writes;
/// nothing else is new.
fn seed_fts_changes(_conn: &Connection) -> rusqlite::Result<()> {
    Ok(())
}

/// v18, `MIGRATION_FILTER_CHANGES` (the change log also records the filter columns' changes):
/// a new trigger only; nothing else is new.
fn seed_filter_changes(_conn: &Connection) -> rusqlite::Result<()> {
    Ok(())
}

/// v14, `MIGRATION_CODEMAP_INDEX` (the code map kept between calls): the index of v13's one
/// mapped file, as the v14 engine stored it (the v14 codemap crate's binary form, one blob per
/// project, keyed by that file; the bytes are those it wrote, kept here since the crate no
/// longer writes that form).
fn seed_codemap_index(conn: &Connection) -> rusqlite::Result<()> {
    const V14_KEY: &str = "c284e8853e53dd566ca4c89417697d96674f43d9850e2d5d9297972ac1373d9e";
    const V14_INDEX: &str = "434D495801000000020004636F6E65000466697265010B7372632F6B696C6E2E727300015F1D0C0E8D8CC1B0BD2D0B0E7C4F3A2A1F0E9D8C7B6A5F4E3D2C1B0A9F8E7D6C2A8080E2A6C3D8E687310001010201011E70756220666E206669726528636F6E653A20753829202D3E20753332207B01000100";
    let data = hex::decode(V14_INDEX).expect("hex");
    conn.execute(
        "INSERT INTO codemap_index (project, key, data, skipped) VALUES (?1, ?2, ?3, x'00')",
        params![PROJECT, V14_KEY, data],
    )?;
    Ok(())
}

/// v15, `MIGRATION_CODEMAP_FILES` (the code map kept one file at a time): v13's mapped file
/// again (the migration let it go with the v14 index) with its parse in the codemap crate's two
/// parts, the project's bookkeeping row, as the v15 engine stores them.
fn seed_codemap_files(conn: &Connection) -> rusqlite::Result<()> {
    use cairn_codemap::{Def, FileParse, Index, IndexFile, Kind, Lang, Parsed};
    let parse = FileParse {
        defs: vec![Def {
            name: "fire".into(),
            kind: Kind::Function,
            line: 1,
            signature: "pub fn fire(cone: u8) -> u32 {".into(),
            top_level: true,
        }],
        refs: [("cone".to_string(), 1)].into_iter().collect(),
        errors: false,
    };
    let file = IndexFile::from_parsed(Parsed {
        path: "src/kiln.rs".into(),
        lang: Lang::Rust,
        hash: CODEMAP_HASH.into(),
        size: 42,
        mtime_ns: 1_767_607_200_000_000_000,
        parse,
    });
    conn.execute(
        "INSERT INTO codemap_parses (content_hash, lang, graph, detail) VALUES (?1, 'rust', ?2, ?3)",
        params![CODEMAP_HASH, file.encode_graph(), file.encode_detail()],
    )?;
    conn.execute(
        "INSERT INTO codemap_files (project, path, lang, content_hash, size, mtime_ns) \
         VALUES (?1, 'src/kiln.rs', 'rust', ?2, 42, 1767607200000000000)",
        params![PROJECT, CODEMAP_HASH],
    )?;
    conn.execute(
        "INSERT INTO codemap_project (project, skipped) VALUES (?1, ?2)",
        params![PROJECT, Index::default().encode_skipped()],
    )?;
    Ok(())
}

/// v16, `MIGRATION_EVENT_ACTOR` (who wrote each event): a session start as the v16 hook writes
/// it — the detail without the `op` and `at` its columns hold (`packed` 3), the receipt as its
/// 32 bytes, and the actor, `hook`. The events of earlier versions keep `''`.
fn seed_event_actor(conn: &Connection) -> rusqlite::Result<()> {
    let full = json!({"op": "session_start", "at": T2, "session": "fixture-session",
        "source": "startup", "client": "claude"});
    let stored = json!({"session": "fixture-session", "source": "startup", "client": "claude"});
    conn.execute(
        "INSERT INTO events (at, op, memory_id, project, detail, receipt, packed, actor) \
         VALUES (?1, 'session_start', NULL, ?2, ?3, unhex(?4), 3, 'hook')",
        params![
            T2,
            PROJECT,
            cairn_core::receipt::canonical_json(&stored),
            cairn_core::receipt::receipt(&full),
        ],
    )?;
    Ok(())
}

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("crates/cairn-cli/tests/fixtures"));
    assert_eq!(
        SEEDS.len() as i64,
        SCHEMA_VERSION,
        "one seed per schema version: add the seed of the new version to SEEDS"
    );
    for version in 1..=SCHEMA_VERSION as usize {
        let path = dir.join(format!("brain-v{version}.db"));
        if path.exists() {
            println!("kept    {} (fixtures are never rewritten)", path.display());
            continue;
        }
        write_brain(&path, version).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("written {}", path.display());
    }
}

fn write_brain(path: &Path, version: usize) -> rusqlite::Result<()> {
    let conn = Connection::open(path)?;
    // As cairn opens a brain; no WAL left behind in the fixture (DELETE mode at the end).
    conn.execute_batch("PRAGMA journal_mode = WAL;")?;
    for (index, (migration, seed)) in MIGRATIONS.iter().zip(SEEDS).take(version).enumerate() {
        conn.execute_batch("BEGIN IMMEDIATE;")?;
        conn.execute_batch(migration)?;
        conn.execute_batch(&format!("PRAGMA user_version = {};", index + 1))?;
        seed(&conn)?;
        conn.execute_batch("COMMIT;")?;
    }
    // Small pages: a fixture is dozens of tables and indexes holding a few rows each.
    conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA page_size = 1024; VACUUM;")?;
    Ok(())
}

fn record(id: i64, memory_type: MemoryType, title: Option<&str>, body: &str) -> Memory {
    Memory {
        id,
        project: Some(PROJECT.into()),
        scope: "global".into(),
        memory_type,
        title: title.map(str::to_string),
        body: body.into(),
        summary: None,
        tags: Vec::new(),
        importance: 3,
        confidence: Confidence::Reported,
        trust: Trust::Stated,
        trust_zone: TrustZone::PrivateSelf,
        sensitivity: Sensitivity::Normal,
        source: None,
        commit: None,
        review_at: None,
        expires_at: None,
        pinned: false,
        status: Status::Active,
        supersedes: None,
        superseded_by: None,
        external_id: None,
        created_at: T0.into(),
        updated_at: T0.into(),
        last_accessed_at: None,
        valid_from: T0.into(),
        use_count: 0,
        content_hash: content_hash(body),
        retired_at: None,
    }
}

/// Inserts a record in the shape of versions 1–7 (hex content hash, a MinHash column; the
/// full-text row comes from the insert trigger up to v6, and is written here from v7 on).
fn insert_v1(conn: &Connection, m: &Memory, with_fts_row: bool) -> rusqlite::Result<()> {
    let signature = (m.status == Status::Active).then(|| signature(&m.body).to_bytes());
    conn.execute(
        "INSERT INTO memories (id, project, scope, type, title, title_norm, body, summary, tags, \
         importance, confidence, trust, trust_zone, sensitivity, source, commit_rev, pinned, status, \
         supersedes, superseded_by, created_at, updated_at, valid_from, use_count, content_hash, \
         minhash, retired_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9, ?10, ?11, ?12, ?13, NULL, ?14, 0, ?15, \
         ?16, ?17, ?18, ?19, ?20, 0, ?21, ?22, ?23)",
        params![
            m.id,
            m.project.clone().unwrap_or_default(),
            m.scope,
            m.memory_type.as_str(),
            m.title,
            m.title.as_deref().map(normalize_title),
            m.body,
            m.tags.join(" "),
            m.importance,
            m.confidence.as_str(),
            m.trust.as_str(),
            m.trust_zone.as_str(),
            m.sensitivity.as_str(),
            m.commit,
            m.status.as_str(),
            m.supersedes,
            m.superseded_by,
            m.created_at,
            m.updated_at,
            m.valid_from,
            m.content_hash,
            signature,
            m.retired_at,
        ],
    )?;
    if with_fts_row {
        fts_row(conn, m)?;
    }
    Ok(())
}

fn fts_row(conn: &Connection, m: &Memory) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO memories_fts (rowid, title, summary, tags, body) VALUES (?1, ?2, NULL, ?3, ?4)",
        params![m.id, m.title, m.tags.join(" "), m.body],
    )?;
    Ok(())
}

/// An event as versions 1–7 stored it: the whole detail, the receipt as hex text.
fn event_v1(conn: &Connection, op: &str, m: &Memory, at: &str) -> rusqlite::Result<()> {
    let detail = json!({
        "at": at, "op": op, "id": m.id, "content_hash": m.content_hash,
        "status": m.status.as_str(), "extra": {"conflicts": []},
    });
    conn.execute(
        "INSERT INTO events (at, op, memory_id, project, detail, receipt) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            at,
            op,
            m.id,
            m.project.clone().unwrap_or_default(),
            cairn_core::receipt::canonical_json(&detail),
            cairn_core::receipt::receipt(&detail),
        ],
    )?;
    Ok(())
}

/// A full-snapshot history row (every version before v8 wrote these).
fn history_full(
    conn: &Connection,
    before: &Memory,
    version: i64,
    op: &str,
    at: &str,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO history (memory_id, version, at, op, actor, snapshot) VALUES (?1, ?2, ?3, ?4, 'cli', ?5)",
        params![
            before.id,
            version,
            at,
            op,
            cairn_core::receipt::canonical_json(&serde_json::to_value(before).expect("serializes")),
        ],
    )?;
    Ok(())
}

/// An 8-dimensional unit vector, as the store writes it (`vector_to_blob`).
fn vector(seed: f32) -> Vec<u8> {
    let raw: Vec<f32> = (0..8).map(|i| ((i as f32 + 1.0) * seed).sin()).collect();
    let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
    let unit: Vec<f32> = raw.iter().map(|x| x / norm).collect();
    vector_to_blob(&unit)
}

/// v1: records (one superseded, with its history), a personal commit-stamped gotcha, events,
/// an open conflict, a declared scope.
fn seed_v1(conn: &Connection) -> rusqlite::Result<()> {
    let mut old = record(1, MemoryType::Decision, None, "Use SQLite for the brain.");
    let mut fact = record(
        2,
        MemoryType::Fact,
        None,
        "The lighthouse keeper logs the tides every morning.",
    );
    fact.tags = vec!["fixture".into()];
    let mut current = record(
        3,
        MemoryType::Decision,
        None,
        "Use SQLite in WAL mode for the brain.",
    );
    current.supersedes = Some(1);
    current.created_at = T1.into();
    current.updated_at = T1.into();
    current.valid_from = T1.into();
    let mut personal = record(
        4,
        MemoryType::Gotcha,
        None,
        "Torque the flange bolts in a star pattern.",
    );
    personal.project = None;
    personal.commit = Some(COMMIT.into());
    insert_v1(conn, &fact, false)?;
    event_v1(conn, "remember", &fact, T0)?;
    insert_v1(conn, &personal, false)?;
    event_v1(conn, "remember", &personal, T0)?;
    // #1 as it was, then superseded by #3.
    history_full(conn, &old, 1, "supersede", T1)?;
    old.status = Status::Superseded;
    old.superseded_by = Some(3);
    old.updated_at = T1.into();
    old.retired_at = Some(T1.into());
    insert_v1(conn, &old, false)?;
    insert_v1(conn, &current, false)?;
    event_v1(conn, "supersede", &current, T1)?;
    conn.execute(
        "INSERT INTO conflicts (memory_id, other_id, reason, created_at) VALUES (2, 3, 'fixture: flagged as contradicting', ?1)",
        [T1],
    )?;
    conn.execute(
        "INSERT INTO scopes (project, scope, description, declared_at) VALUES (?1, 'ops', 'operations notes', ?2)",
        [PROJECT, T0],
    )?;
    Ok(())
}

/// v2: the knowledge graph — an entity with an alias, a mention edge, a user edge asserted
/// then invalidated, a quarantined dangling edge, a generated record.
fn seed_v2(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "INSERT INTO entities (id, name, type, key, created_at) VALUES (1, 'SQLite', 'name', 'sqlite', '{T0}');
         INSERT INTO entity_aliases (alias_key, alias, entity_id) VALUES ('sqlite3', 'sqlite3', 1);
         INSERT INTO edge_log (seq, op, src_kind, src_id, relation, dst_kind, dst_id, valid_from, recorded_at, confidence, origin, actor)
             VALUES (1, 'assert', 'record', 3, 'mentions', 'entity', 1, '{T1}', '{T1}', 1.0, 'extraction', 'cli');
         INSERT INTO edge_log (seq, op, src_kind, src_id, relation, dst_kind, dst_id, valid_from, recorded_at, confidence, origin, actor)
             VALUES (2, 'assert', 'record', 2, 'relates', 'record', 3, '{T1}', '{T1}', 1.0, 'user', 'cli');
         INSERT INTO edge_log (seq, op, src_kind, src_id, relation, dst_kind, dst_id, valid_to, recorded_at, confidence, origin, actor)
             VALUES (3, 'invalidate', 'record', 2, 'relates', 'record', 3, '{T2}', '{T2}', 1.0, 'user', 'cli');
         INSERT INTO edges (src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence, assert_seq, invalidate_seq)
             VALUES ('record', 3, 'mentions', 'entity', 1, '{T1}', NULL, 1.0, 1, NULL);
         INSERT INTO edges (src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence, assert_seq, invalidate_seq)
             VALUES ('record', 2, 'relates', 'record', 3, '{T1}', '{T2}', 1.0, 2, 3);
         INSERT INTO edge_quarantine (src, relation, dst, valid_from, confidence, recorded_at, reason)
             VALUES ('#2', 'requires', 'entity:nowhere', '{T1}', 1.0, '{T1}', 'fixture: no such entity');"
    ))?;
    let summary = record(
        5,
        MemoryType::Note,
        None,
        "Summary of the fixture decisions about storage.",
    );
    insert_v1(conn, &summary, false)?;
    event_v1(conn, "remember", &summary, T1)?;
    conn.execute(
        "INSERT INTO generated_records (memory_id, generator, marked_at) VALUES (5, 'summary', ?1)",
        [T1],
    )?;
    Ok(())
}

/// v3: the agent tables — a task, a measure, the identity, an awareness item, a capture
/// offset, an inbox item — and a captured episode.
fn seed_v3(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "INSERT INTO tasks (project, title, detail, status, created_at) VALUES ('{PROJECT}', 'Rotate the backup keys', 'quarterly', 'open', '{T1}');
         INSERT INTO measures (project, name, value, unit, note, at) VALUES ('{PROJECT}', 'recall_p95_ms', 42.5, 'ms', 'fixture', '{T1}');
         INSERT INTO identity (id, body, updated_at) VALUES (1, 'I am the fixture agent.', '{T1}');
         INSERT INTO awareness (project, body, created_at, expires_at) VALUES ('{PROJECT}', 'Reviewing the fixture brains', '{T1}', '2099-01-01T00:00:00Z');
         INSERT INTO capture_offsets (session_id, transcript_path, byte_offset, turns, updated_at) VALUES ('session-1', '/tmp/session-1.jsonl', 2048, 2, '{T1}');
         INSERT INTO inbox (project, kind, suggested_type, body, content_hash, source, created_at)
             VALUES ('{PROJECT}', 'decision', 'decision', 'We decided to keep fixtures small.', '{}', 'session-1', '{T1}');",
        content_hash("We decided to keep fixtures small.")
    ))?;
    let mut episode = record(
        6,
        MemoryType::Episode,
        None,
        "User: where are the tides logged? Assistant: in the lighthouse logbook.",
    );
    episode.trust = Trust::Captured;
    episode.created_at = T1.into();
    episode.updated_at = T1.into();
    episode.valid_from = T1.into();
    insert_v1(conn, &episode, false)?;
    event_v1(conn, "remember", &episode, T1)
}

/// v4: the semantic index — vectors of two records (texts without a title, so the text hash is
/// the body's) and the model they come from.
fn seed_v4(conn: &Connection) -> rusqlite::Result<()> {
    for (key, value) in [(META_EMBED_MODEL, "hash-8"), (META_EMBED_DIM, "8")] {
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)",
            [key, value],
        )?;
    }
    for (id, body, seed) in [
        (
            2,
            "The lighthouse keeper logs the tides every morning.",
            0.3,
        ),
        (4, "Torque the flange bolts in a star pattern.", 0.7),
    ] {
        conn.execute(
            "INSERT INTO vectors (memory_id, text_hash, vector) VALUES (?1, ?2, ?3)",
            params![id, content_hash(body), vector(seed)],
        )?;
    }
    Ok(())
}

/// v5: the lifecycle — a rejected dream with a proposal, and a generated record's member hash.
fn seed_v5(conn: &Connection) -> rusqlite::Result<()> {
    let targets = json!([{"id": 2, "updated_at": T0, "status": "active"}]).to_string();
    let payload = json!({"id": 2, "action": "demote", "importance": 2}).to_string();
    conn.execute(
        "INSERT INTO dream_runs (id, created_at, snapshot_at, project, status, unattended, report, decided_at, decision) \
         VALUES ('fixture-dream-1', ?1, ?1, ?2, 'rejected', 0, '{}', ?1, '{\"rejected\":true}')",
        [T2, PROJECT],
    )?;
    conn.execute(
        "INSERT INTO dream_proposals (run_id, seq, kind, targets, payload, outcome) VALUES ('fixture-dream-1', 1, 'decay', ?1, ?2, NULL)",
        [targets, payload],
    )?;
    conn.execute(
        "UPDATE generated_records SET member_hash = 'fixture-member-hash' WHERE memory_id = 5",
        [],
    )?;
    Ok(())
}

/// v6 only clears the signatures of records that are not active: nothing new to write.
fn seed_v6(_conn: &Connection) -> rusqlite::Result<()> {
    Ok(())
}

/// v7: the write path inserts full-text rows itself (no insert trigger any more).
fn seed_v7(conn: &Connection) -> rusqlite::Result<()> {
    let mut kiln = record(
        7,
        MemoryType::Note,
        None,
        "Kiln firing takes nine hours at cone six.",
    );
    kiln.created_at = T2.into();
    kiln.updated_at = T2.into();
    kiln.valid_from = T2.into();
    insert_v1(conn, &kiln, true)?;
    event_v1(conn, "remember", &kiln, T2)
}

/// v8: hashes as 32 bytes, history as reverse deltas, packed events — an update of #2 as the
/// v8 code writes it, and a new record.
fn seed_v8(conn: &Connection) -> rusqlite::Result<()> {
    let old_body = "The lighthouse keeper logs the tides every morning.";
    let new_body = "The lighthouse keeper logs the tides every morning and every evening.";
    let delta = json!({"changed": {
        "body": old_body,
        "content_hash": content_hash(old_body),
        "updated_at": T0,
        "use_count": 0,
        "last_accessed_at": null,
    }});
    conn.execute(
        "INSERT INTO history (memory_id, version, at, op, actor, snapshot, delta) VALUES (2, 1, ?1, 'update', 'cli', ?2, 1)",
        params![T2, cairn_core::receipt::canonical_json(&delta)],
    )?;
    conn.execute(
        "UPDATE memories SET body = ?1, content_hash = unhex(?2), updated_at = ?3 WHERE id = 2",
        params![new_body, content_hash(new_body), T2],
    )?;
    let full = json!({"at": T2, "op": "update", "id": 2, "content_hash": content_hash(new_body),
        "previous_hash": content_hash(old_body)});
    let stored = json!({"previous_hash": content_hash(old_body)});
    conn.execute(
        "INSERT INTO events (at, op, memory_id, project, detail, receipt, packed, content_hash) \
         VALUES (?1, 'update', 2, ?2, ?3, unhex(?4), 15, unhex(?5))",
        params![
            T2,
            PROJECT,
            cairn_core::receipt::canonical_json(&stored),
            cairn_core::receipt::receipt(&full),
            content_hash(new_body),
        ],
    )?;
    let gate = record(
        8,
        MemoryType::Fact,
        None,
        "The harbour gate closes at high tide.",
    );
    conn.execute(
        "INSERT INTO memories (id, project, scope, type, body, tags, importance, confidence, trust, trust_zone, \
         sensitivity, status, created_at, updated_at, valid_from, content_hash) \
         VALUES (8, ?1, 'global', 'fact', ?2, '', 3, 'reported', 'stated', 'private_self', 'normal', 'active', ?3, ?3, ?3, unhex(?4))",
        params![PROJECT, gate.body, T2, gate.content_hash],
    )?;
    fts_row(conn, &gate)
}

/// v9: `meta.vectors_version` counts vector changes (a trigger bumps it here).
fn seed_v9(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO vectors (memory_id, text_hash, vector) VALUES (8, ?1, ?2)",
        params![
            content_hash("The harbour gate closes at high tide."),
            vector(1.1)
        ],
    )?;
    Ok(())
}

/// v10: a record a dream merged away — archived, out of the full-text index, its body a delta
/// against the record it went into — with the accepted dream that did it.
fn seed_v10(conn: &Connection) -> rusqlite::Result<()> {
    let base = "Kiln firing takes nine hours at cone six.";
    let body = "Kiln firing takes nine hours at cone six, ten when the kiln is full.";
    let mut twin = record(9, MemoryType::Note, None, body);
    twin.created_at = T2.into();
    twin.updated_at = T2.into();
    twin.valid_from = T2.into();
    history_full(conn, &twin, 1, "merge", T2)?;
    conn.execute(
        "INSERT INTO memories (id, project, scope, type, body, tags, importance, confidence, trust, trust_zone, \
         sensitivity, status, created_at, updated_at, valid_from, content_hash, retired_at, merged_into) \
         VALUES (9, ?1, 'global', 'note', ?2, '', 3, 'reported', 'stated', 'private_self', 'normal', 'archived', ?3, ?3, ?3, unhex(?4), ?3, 7)",
        params![PROJECT, cairn_core::delta::encode(base, body), T2, twin.content_hash],
    )?;
    let targets = json!([{"id": 9, "updated_at": T2, "status": "active"}]).to_string();
    let payload: Value =
        json!({"survivor": 7, "merged": [{"id": 9, "label": "#9", "similarity": 0.8}]});
    conn.execute(
        "INSERT INTO dream_runs (id, created_at, snapshot_at, project, status, unattended, report, decided_at, decision) \
         VALUES ('fixture-dream-2', ?1, ?1, ?2, 'accepted', 0, '{}', ?1, '{\"applied\":1,\"skipped\":0}')",
        [T2, PROJECT],
    )?;
    conn.execute(
        "INSERT INTO dream_proposals (run_id, seq, kind, targets, payload, outcome) VALUES ('fixture-dream-2', 1, 'merge', ?1, ?2, 'applied')",
        params![targets, payload.to_string()],
    )?;
    Ok(())
}

/// v11, `MIGRATION_SERVICE_TOKENS` (`cairn token`, issue 14): a live project token, a revoked
/// one and an expired token for every project. The hashes are SHA-256 of made-up secrets; a
/// fixture never holds a usable token.
fn seed_service_tokens(conn: &Connection) -> rusqlite::Result<()> {
    use sha2::{Digest, Sha256};
    for (name, project, role, expires_at, revoked_at) in [
        ("fixture-ci", Some(PROJECT), "write", None, None),
        ("fixture-old-laptop", Some(PROJECT), "read", None, Some(T1)),
        ("fixture-admin", None, "admin", Some(T1), None),
    ] {
        let hash = Sha256::digest(format!("cairn_fixture_{name}").as_bytes()).to_vec();
        conn.execute(
            "INSERT INTO service_tokens (name, secret_hash, project, role, created_at, expires_at, revoked_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![name, hash, project, role, T0, expires_at, revoked_at],
        )?;
    }
    Ok(())
}

/// v12, `MIGRATION_SURFACED` (passive use, issue 18): record 1 was handed to an agent twice,
/// the last time at `T2`.
fn seed_surfaced(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO surfacings (memory_id, surfaced_at, times) VALUES (1, ?1, 2)",
        [T2],
    )?;
    Ok(())
}

/// v13, `MIGRATION_CODEMAP` (the code map, issue 17): one mapped file, its parse and the
/// project's build state.
fn seed_codemap(conn: &Connection) -> rusqlite::Result<()> {
    let parse = json!({
        "defs": [{"name": "fire", "kind": "function", "line": 1,
                  "signature": "pub fn fire(cone: u8) -> u32 {", "top_level": true}],
        "refs": {"cone": 1},
        "errors": false
    });
    let hash = CODEMAP_HASH;
    conn.execute(
        "INSERT INTO codemap_parses (content_hash, lang, parse) VALUES (?1, 'rust', ?2)",
        params![hash, parse.to_string()],
    )?;
    conn.execute(
        "INSERT INTO codemap_files (project, path, lang, content_hash, size, mtime_ns) \
         VALUES (?1, 'src/kiln.rs', 'rust', ?2, 42, 1767607200000000000)",
        params![PROJECT, hash],
    )?;
    conn.execute(
        "INSERT INTO codemap_state (project, root, rev, built_at, stale) VALUES (?1, '/src/fixture', ?2, ?3, 0)",
        params![PROJECT, COMMIT, T2],
    )?;
    Ok(())
}
