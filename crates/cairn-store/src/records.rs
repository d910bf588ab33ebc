//! Records, history, events, conflicts and declared scopes: plain reads and writes, no policy.
//! The write path's rules (dedup, supersession, stamping) live in the engine.

use crate::{Reader, Result, StoreError, WriteTx, history};
use cairn_core::memory::Memory;
use cairn_core::minhash::Signature;
use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

const MEMORY_COLUMNS: &str = "id, project, scope, type, title, body, summary, tags, importance, confidence, trust, \
     trust_zone, sensitivity, source, commit_rev, review_at, expires_at, pinned, status, supersedes, \
     superseded_by, external_id, created_at, updated_at, last_accessed_at, valid_from, use_count, \
     CASE WHEN typeof(content_hash) = 'blob' THEN lower(hex(content_hash)) ELSE content_hash END, retired_at, \
     (SELECT base.body FROM memories base WHERE base.id = memories.merged_into)";

/// The body as stored: text, or (a dream's merged-away record, schema v10) a
/// [`cairn_core::delta`] against the body of the record in `merged_into` — which is always
/// stored whole, so one step reads any body.
pub(crate) fn body_from(row: &Row<'_>, body: usize, base: usize) -> rusqlite::Result<String> {
    match row.get_ref(body)? {
        rusqlite::types::ValueRef::Blob(delta) => {
            let base: Option<String> = row.get(base)?;
            let base = base.ok_or_else(|| {
                rusqlite::Error::FromSqlConversionFailure(
                    body,
                    rusqlite::types::Type::Blob,
                    "a merged-away body whose base record is missing".into(),
                )
            })?;
            cairn_core::delta::apply(&base, delta).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    body,
                    rusqlite::types::Type::Blob,
                    Box::new(e),
                )
            })
        }
        _ => row.get(body),
    }
}

fn parse_column<T: std::str::FromStr>(row: &Row<'_>, index: usize) -> rusqlite::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let failed = |e: T::Err| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    };
    // Parsed where SQLite holds it (recall reads a record's six such columns for each of
    // its ~150 candidates); anything but UTF-8 text fails as `row.get` fails.
    if let rusqlite::types::ValueRef::Text(bytes) = row.get_ref(index)?
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        return text.parse::<T>().map_err(failed);
    }
    let text: String = row.get(index)?;
    text.parse::<T>().map_err(failed)
}

/// `packed` bits: which of the event's own columns were left out of its stored detail.
const PACKED_OP: i64 = 1;
const PACKED_AT: i64 = 2;
const PACKED_ID: i64 = 4;
/// The detail's `content_hash` (lowercase hex SHA-256) is in the `content_hash` column, as bytes.
const PACKED_HASH: i64 = 8;

/// The event columns `event_from_row` reads; the receipt as hex whichever way it is stored.
pub(crate) const EVENT_COLUMNS: &str = "id, at, op, memory_id, project, detail, \
     CASE WHEN typeof(receipt) = 'blob' THEN lower(hex(receipt)) ELSE receipt END, packed, lower(hex(content_hash)), actor";

/// The detail without the keys equal to the event's columns, which were left out, and the
/// content hash moved to its column.
fn pack_detail(event: &NewEvent<'_>) -> (serde_json::Value, i64, Option<Vec<u8>>) {
    let mut detail = event.detail.clone();
    let mut packed = 0;
    let mut content_hash = None;
    if let Some(fields) = detail.as_object_mut() {
        if let Some(serde_json::Value::String(hash)) = fields.get("content_hash")
            && let rusqlite::types::Value::Blob(bytes) = sha256_value(hash)
        {
            content_hash = Some(bytes);
            fields.remove("content_hash");
            packed |= PACKED_HASH;
        }
        let mut strip = |key: &str, column: serde_json::Value, bit: i64| {
            if fields.get(key) == Some(&column) {
                fields.remove(key);
                packed |= bit;
            }
        };
        strip("op", event.op.into(), PACKED_OP);
        strip("at", event.at.into(), PACKED_AT);
        if let Some(id) = event.memory_id {
            strip("id", id.into(), PACKED_ID);
        }
    }
    (detail, packed, content_hash)
}

/// A SHA-256 (a receipt, a content hash) as stored since schema v8: the 32 bytes of a
/// lowercase hex digest, anything else (an imported value of another form) as its text.
/// Readers turn a blob back into lowercase hex, so the round trip is exact.
pub(crate) fn sha256_value(hash: &str) -> rusqlite::types::Value {
    let is_lower_hex = hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match hex::decode(hash) {
        Ok(bytes) if is_lower_hex => rusqlite::types::Value::Blob(bytes),
        _ => rusqlite::types::Value::Text(hash.to_string()),
    }
}

/// An event row read with [`EVENT_COLUMNS`], its detail whole again.
pub(crate) fn event_from_row(row: &Row<'_>) -> rusqlite::Result<EventRow> {
    let project: String = row.get(4)?;
    let detail: String = row.get(5)?;
    let packed: i64 = row.get(7)?;
    let content_hash: Option<String> = row.get(8)?;
    let at: String = row.get(1)?;
    let op: String = row.get(2)?;
    let memory_id: Option<i64> = row.get(3)?;
    let mut detail = serde_json::from_str(&detail).unwrap_or(serde_json::Value::String(detail));
    if let Some(fields) = detail.as_object_mut() {
        if packed & PACKED_OP != 0 {
            fields.insert("op".into(), op.clone().into());
        }
        if packed & PACKED_AT != 0 {
            fields.insert("at".into(), at.clone().into());
        }
        if packed & PACKED_ID != 0
            && let Some(id) = memory_id
        {
            fields.insert("id".into(), id.into());
        }
        if packed & PACKED_HASH != 0
            && let Some(hash) = content_hash
        {
            fields.insert("content_hash".into(), hash.into());
        }
    }
    Ok(EventRow {
        id: row.get(0)?,
        at,
        op,
        memory_id,
        project: (!project.is_empty()).then_some(project),
        detail,
        receipt: row.get(6)?,
        actor: row.get(9)?,
    })
}

/// A record as the JSON object history stores and hands out.
fn record_json(memory: &Memory) -> serde_json::Value {
    serde_json::to_value(memory).expect("a record always serializes")
}

/// Most ids one statement of [`Reader::get_many`] asks for.
const ID_CHUNK: usize = 500;

/// The length of the id list a statement is prepared for: `count` rounded up to a power of two
/// (at least 8, at most [`ID_CHUNK`]).
fn id_list_width(count: usize) -> usize {
    count.next_power_of_two().clamp(8, ID_CHUNK).max(count)
}

fn memory_from_row(row: &Row<'_>) -> rusqlite::Result<Memory> {
    let project: String = row.get(1)?;
    let tags: String = row.get(7)?;
    Ok(Memory {
        id: row.get(0)?,
        project: (!project.is_empty()).then_some(project),
        scope: row.get(2)?,
        memory_type: parse_column(row, 3)?,
        title: row.get(4)?,
        body: body_from(row, 5, 29)?,
        summary: row.get(6)?,
        tags: tags.split_whitespace().map(str::to_string).collect(),
        importance: row.get(8)?,
        confidence: parse_column(row, 9)?,
        trust: parse_column(row, 10)?,
        trust_zone: parse_column(row, 11)?,
        sensitivity: parse_column(row, 12)?,
        source: row.get(13)?,
        commit: row.get(14)?,
        review_at: row.get(15)?,
        expires_at: row.get(16)?,
        pinned: row.get(17)?,
        status: parse_column(row, 18)?,
        supersedes: row.get(19)?,
        superseded_by: row.get(20)?,
        external_id: row.get(21)?,
        created_at: row.get(22)?,
        updated_at: row.get(23)?,
        last_accessed_at: row.get(24)?,
        valid_from: row.get(25)?,
        use_count: row.get(26)?,
        content_hash: row.get(27)?,
        retired_at: row.get(28)?,
    })
}

/// One earlier version of a record.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryRow {
    pub version: i64,
    pub at: String,
    pub op: String,
    pub actor: String,
    pub snapshot: serde_json::Value,
}

/// One entry of the activity log.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventRow {
    pub id: i64,
    pub at: String,
    pub op: String,
    pub memory_id: Option<i64>,
    pub project: Option<String>,
    pub detail: serde_json::Value,
    pub receipt: String,
    /// Who wrote it: the actor its operation's history names (`cli`, `hook`, `mcp`, a token's
    /// name, `import`, …). Empty for an event written before schema v16, which did not record
    /// it (never guessed).
    #[serde(default)]
    pub actor: String,
}

/// An event to append.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub at: &'a str,
    pub op: &'a str,
    pub memory_id: Option<i64>,
    pub project: Option<&'a str>,
    pub detail: &'a serde_json::Value,
    /// Who is writing it (see [`EventRow::actor`]).
    pub actor: &'a str,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConflictRow {
    pub id: i64,
    pub memory_id: i64,
    pub other_id: i64,
    pub reason: String,
    pub created_at: String,
    pub resolved_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScopeRow {
    pub project: Option<String>,
    pub scope: String,
    pub description: Option<String>,
    pub declared_at: Option<String>,
    pub records: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub records: i64,
    pub by_status: Vec<(String, i64)>,
    pub by_type: Vec<(String, i64)>,
    pub projects: i64,
    pub events: i64,
    pub history_versions: i64,
    pub open_conflicts: i64,
    pub file_bytes: u64,
    pub body_bytes: i64,
    /// Turns capture did not store, by reason (kept in `meta` as `capture.skipped.REASON`).
    pub capture_skipped: Vec<(String, i64)>,
}

impl WriteTx<'_> {
    fn map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Inserts a record (its `id` is used when positive and free, else a new one is assigned)
    /// and returns the id.
    pub fn insert_memory(&self, memory: &Memory, title_norm: Option<&str>) -> Result<i64> {
        let explicit_id = (memory.id > 0).then_some(memory.id);
        let tags = memory.tags.join(" ");
        self.tx
            .prepare_cached(
                "INSERT INTO memories (id, project, scope, type, title, title_norm, body, summary, tags, importance, \
                 confidence, trust, trust_zone, sensitivity, source, commit_rev, review_at, expires_at, pinned, \
                 status, supersedes, superseded_by, external_id, created_at, updated_at, last_accessed_at, \
                 valid_from, use_count, content_hash, retired_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
                 ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    explicit_id,
                    memory.project.as_deref().unwrap_or(""),
                    memory.scope,
                    memory.memory_type.as_str(),
                    memory.title,
                    title_norm,
                    memory.body,
                    memory.summary,
                    tags,
                    memory.importance,
                    memory.confidence.as_str(),
                    memory.trust.as_str(),
                    memory.trust_zone.as_str(),
                    memory.sensitivity.as_str(),
                    memory.source,
                    memory.commit,
                    memory.review_at,
                    memory.expires_at,
                    memory.pinned,
                    memory.status.as_str(),
                    memory.supersedes,
                    memory.superseded_by,
                    memory.external_id,
                    memory.created_at,
                    memory.updated_at,
                    memory.last_accessed_at,
                    memory.valid_from,
                    memory.use_count,
                    sha256_value(&memory.content_hash),
                    memory.retired_at,
                ])
            })
            .map_err(self.map())?;
        let id = self.tx.last_insert_rowid();
        // The full-text row, written here rather than by a trigger (schema migration 5):
        // same transaction, same values as the record's columns.
        self.tx
            .prepare_cached(
                "INSERT INTO memories_fts (rowid, title, summary, tags, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut statement| {
                statement.execute(params![id, memory.title, memory.summary, &tags, memory.body])
            })
            .map_err(self.map())?;
        Ok(id)
    }

    /// Replaces every stored field of `memory` (matched by id), keeping `previous` in history.
    pub fn update_memory(
        &self,
        memory: &Memory,
        title_norm: Option<&str>,
        previous: &Memory,
        op: &str,
        actor: &str,
    ) -> Result<()> {
        // Records stored as deltas against this body, read whole while it is still the body
        // they were made against.
        let dependents = if previous.body != memory.body {
            self.merged_dependents(memory.id)?
        } else {
            Vec::new()
        };
        // An active record is never merged away (restore ends it: the record is whole and in
        // the full-text index again); any other change keeps the record's base.
        self.tx
            .prepare_cached(
                "UPDATE memories SET project = ?2, scope = ?3, type = ?4, title = ?5, title_norm = ?6, body = ?7, \
                 summary = ?8, tags = ?9, importance = ?10, confidence = ?11, trust = ?12, trust_zone = ?13, \
                 sensitivity = ?14, source = ?15, commit_rev = ?16, review_at = ?17, expires_at = ?18, pinned = ?19, \
                 status = ?20, supersedes = ?21, superseded_by = ?22, external_id = ?23, created_at = ?24, \
                 updated_at = ?25, last_accessed_at = ?26, valid_from = ?27, use_count = ?28, content_hash = ?29, \
                 retired_at = ?30, merged_into = CASE WHEN ?20 = 'active' THEN NULL ELSE merged_into END WHERE id = ?1",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    memory.id,
                    memory.project.as_deref().unwrap_or(""),
                    memory.scope,
                    memory.memory_type.as_str(),
                    memory.title,
                    title_norm,
                    memory.body,
                    memory.summary,
                    memory.tags.join(" "),
                    memory.importance,
                    memory.confidence.as_str(),
                    memory.trust.as_str(),
                    memory.trust_zone.as_str(),
                    memory.sensitivity.as_str(),
                    memory.source,
                    memory.commit,
                    memory.review_at,
                    memory.expires_at,
                    memory.pinned,
                    memory.status.as_str(),
                    memory.supersedes,
                    memory.superseded_by,
                    memory.external_id,
                    memory.created_at,
                    memory.updated_at,
                    memory.last_accessed_at,
                    memory.valid_from,
                    memory.use_count,
                    sha256_value(&memory.content_hash),
                    memory.retired_at,
                ])
            })
            .map_err(self.map())?;
        if let Some(base) = self.merged_base(memory.id)? {
            self.store_against(memory.id, &memory.body, base)?;
        }
        for (id, body) in dependents {
            self.store_against(id, &body, memory.id)?;
        }
        // The version is the reverse delta against the row as stored now (read back, so the
        // walk in `Reader::history` starts from exactly what a later read sees).
        match self.reader().get(memory.id)? {
            Some(written) => {
                let delta = history::reverse_delta(&record_json(previous), &record_json(&written));
                self.append_history(previous.id, &delta, true, &memory.updated_at, op, actor)
            }
            None => self.append_history(
                previous.id,
                &record_json(previous),
                false,
                &memory.updated_at,
                op,
                actor,
            ),
        }
    }

    /// Marks `id` as merged away into `survivor` by a dream (schema v10): it leaves the
    /// full-text index (a search finds its survivor, which shares most of its words) and its
    /// body is stored as a [`cairn_core::delta`] against the survivor's when that is smaller.
    /// The record reads back exactly as before. A survivor that was itself merged away since
    /// is followed to the record it was merged into, so every base is stored whole; records
    /// stored against `id` move to the same base. Returns false (nothing changed) when the
    /// survivor no longer exists. The bytes the record's row shrank by are added to
    /// `meta.reclaimable_bytes`: space freed inside pages, which only a `VACUUM` returns.
    pub fn pack_merged(&self, id: i64, survivor: i64) -> Result<bool> {
        let base = self.merged_base(survivor)?.unwrap_or(survivor);
        let base_exists: bool = self
            .tx
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM memories WHERE id = ?1)")
            .and_then(|mut s| s.query_row([base], |row| row.get(0)))
            .map_err(self.map())?;
        if base == id || !base_exists {
            return Ok(false);
        }
        let Some(member) = self.reader().get(id)? else {
            return Ok(false);
        };
        for (dependent, body) in self.merged_dependents(id)? {
            self.store_against(dependent, &body, base)?;
        }
        let stored_length = |id: i64| -> Result<i64> {
            self.tx
                .prepare_cached("SELECT length(CAST(body AS BLOB)) FROM memories WHERE id = ?1")
                .and_then(|mut s| s.query_row([id], |row| row.get(0)))
                .map_err(self.map())
        };
        let before = stored_length(id)?;
        self.store_against(id, &member.body, base)?;
        let freed = before - stored_length(id)?;
        if freed > 0 {
            self.tx
                .prepare_cached(
                    "INSERT INTO meta (key, value) VALUES ('reclaimable_bytes', ?1) \
                     ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + ?1",
                )
                .and_then(|mut s| s.execute([freed]))
                .map_err(self.map())?;
        }
        Ok(true)
    }

    /// The record `id` was merged into, if it is merged away.
    fn merged_base(&self, id: i64) -> Result<Option<i64>> {
        self.tx
            .prepare_cached("SELECT merged_into FROM memories WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
            .map(Option::flatten)
            .map_err(self.map())
    }

    /// The records merged into `id`, with their bodies read whole.
    fn merged_dependents(&self, id: i64) -> Result<Vec<(i64, String)>> {
        let ids: Vec<i64> = self
            .tx
            .prepare_cached("SELECT id FROM memories WHERE merged_into = ?1 ORDER BY id")
            .and_then(|mut s| {
                s.query_map([id], |row| row.get(0))?
                    .collect::<rusqlite::Result<Vec<i64>>>()
            })
            .map_err(self.map())?;
        let reader = self.reader();
        let mut out = Vec::with_capacity(ids.len());
        for dependent in ids {
            if let Some(memory) = reader.get(dependent)? {
                out.push((dependent, memory.body));
            }
        }
        Ok(out)
    }

    /// Stores `body` for `id` as merged into `base`: a delta when it is smaller than the text.
    fn store_against(&self, id: i64, body: &str, base: i64) -> Result<()> {
        let base_body: String = self
            .tx
            .prepare_cached("SELECT body FROM memories WHERE id = ?1 AND typeof(body) = 'text'")
            .and_then(|mut s| s.query_row([base], |row| row.get(0)))
            .map_err(self.map())?;
        let delta = cairn_core::delta::encode(&base_body, body);
        let stored = if delta.len() < body.len() {
            rusqlite::types::Value::Blob(delta)
        } else {
            rusqlite::types::Value::Text(body.to_string())
        };
        self.tx
            .prepare_cached("UPDATE memories SET merged_into = ?2, body = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, base, stored]))
            .map_err(self.map())?;
        // Out of the semantic index too (a changed body already dropped it; an unchanged one
        // did not).
        self.tx
            .prepare_cached("DELETE FROM vectors WHERE memory_id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map_err(self.map())?;
        Ok(())
    }

    fn append_history(
        &self,
        memory_id: i64,
        snapshot: &serde_json::Value,
        is_delta: bool,
        at: &str,
        op: &str,
        actor: &str,
    ) -> Result<()> {
        let snapshot = cairn_core::receipt::canonical_json(snapshot);
        self.tx
            .prepare_cached(
                "INSERT INTO history (memory_id, version, at, op, actor, snapshot, delta) \
                 VALUES (?1, (SELECT COALESCE(MAX(version), 0) + 1 FROM history WHERE memory_id = ?1), ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| s.execute(params![memory_id, at, op, actor, snapshot, is_delta]))
            .map_err(self.map())?;
        Ok(())
    }

    /// Records an access: bumps `use_count` and `last_accessed_at` without a history version.
    pub fn touch(&self, ids: &[i64], at: &str) -> Result<()> {
        let mut statement = self
            .tx
            .prepare_cached("UPDATE memories SET use_count = use_count + 1, last_accessed_at = ?2 WHERE id = ?1")
            .map_err(self.map())?;
        for id in ids {
            statement.execute(params![id, at]).map_err(self.map())?;
        }
        Ok(())
    }

    /// Several accesses at once, in one statement: each `(id, uses, at)` adds `uses` to the
    /// record's use count and makes `at` its last access (a record named more than once takes
    /// the sum of their uses and the latest of their times). What [`WriteTx::touch`] does once per access, for a batch of them.
    pub fn touch_counted(&self, touches: &[(i64, u32, &str)]) -> Result<()> {
        if touches.is_empty() {
            return Ok(());
        }
        let list = serde_json::Value::Array(
            touches
                .iter()
                .map(|(id, uses, at)| serde_json::json!([id, uses, at]))
                .collect(),
        )
        .to_string();
        self.tx
            .prepare_cached(
                "UPDATE memories SET use_count = use_count + t.uses, last_accessed_at = t.at \
                 FROM (SELECT value ->> 0 AS id, sum(value ->> 1) AS uses, \
                              max(value ->> 2) AS at \
                       FROM json_each(?1) GROUP BY value ->> 0) AS t \
                 WHERE memories.id = t.id",
            )
            .and_then(|mut s| s.execute([list]))
            .map_err(self.map())?;
        Ok(())
    }

    /// Deletes a record for good, with its history kept as the last word (`forget --hard`).
    pub fn delete_memory(&self, previous: &Memory, at: &str, actor: &str) -> Result<()> {
        // Records stored against this one are stored whole again, and so are back in the
        // full-text index: what represented them is gone.
        for (id, body) in self.merged_dependents(previous.id)? {
            self.tx
                .prepare_cached("UPDATE memories SET body = ?2, merged_into = NULL WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, body]))
                .map_err(self.map())?;
        }
        // A full snapshot: with no row left, the deltas before it walk back from this one.
        self.append_history(
            previous.id,
            &record_json(previous),
            false,
            at,
            "delete",
            actor,
        )?;
        self.tx
            .execute("DELETE FROM memories WHERE id = ?1", [previous.id])
            .map_err(self.map())?;
        Ok(())
    }

    /// Appends an event and returns its id. The detail is stored without the keys its own
    /// columns already hold (`op`, `at`, and `id` when it is the record's id: `packed` says
    /// which), its `content_hash` in a column as 32 bytes, and a hex SHA-256 receipt as its 32 bytes; `EventRow` gives both back as they
    /// were, so the receipt still checks against the canonical JSON of the detail.
    pub fn append_event(&self, event: &NewEvent<'_>, receipt: &str) -> Result<i64> {
        let (detail, packed, content_hash) = pack_detail(event);
        let detail = cairn_core::receipt::canonical_json(&detail);
        let receipt = sha256_value(receipt);
        self.tx
            .prepare_cached(
                "INSERT INTO events (at, op, memory_id, project, detail, receipt, packed, content_hash, actor) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    event.at,
                    event.op,
                    event.memory_id,
                    event.project.unwrap_or(""),
                    detail,
                    receipt,
                    packed,
                    content_hash,
                    event.actor
                ])
            })
            .map_err(self.map())?;
        Ok(self.tx.last_insert_rowid())
    }

    pub fn add_conflict(
        &self,
        memory_id: i64,
        other_id: i64,
        reason: &str,
        at: &str,
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO conflicts (memory_id, other_id, reason, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![memory_id, other_id, reason, at],
            )
            .map_err(self.map())?;
        Ok(())
    }

    /// Closes every open conflict that involves `id`.
    pub fn resolve_conflicts(&self, id: i64, at: &str) -> Result<usize> {
        self.tx
            .execute(
                "UPDATE conflicts SET resolved_at = ?2 WHERE resolved_at IS NULL AND (memory_id = ?1 OR other_id = ?1)",
                params![id, at],
            )
            .map_err(self.map())
    }

    pub fn declare_scope(
        &self,
        project: Option<&str>,
        scope: &str,
        description: Option<&str>,
        at: &str,
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO scopes (project, scope, description, declared_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (project, scope) DO UPDATE SET description = COALESCE(excluded.description, scopes.description)",
                params![project.unwrap_or(""), scope, description, at],
            )
            .map_err(self.map())?;
        Ok(())
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )
            .map_err(self.map())?;
        Ok(())
    }

    /// Restores a history row verbatim (used by lossless import).
    pub fn insert_history_row(&self, memory_id: i64, row: &HistoryRow) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO history (memory_id, version, at, op, actor, snapshot, delta) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                params![memory_id, row.version, row.at, row.op, row.actor, row.snapshot.to_string()],
            )
            .map_err(self.map())?;
        Ok(())
    }
}

impl Reader<'_> {
    fn map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    pub fn get(&self, id: i64) -> Result<Option<Memory>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?1"
            ))
            .and_then(|mut s| s.query_row([id], memory_from_row).optional())
            .map_err(self.map())
    }

    pub fn get_many(&self, ids: &[i64]) -> Result<Vec<Memory>> {
        // One statement per chunk of ids, so one read transaction: a statement per id began and
        // ended a read transaction each (the WAL's shared-memory locks are system calls), which
        // was most of the cost of reading a recall's candidates. The list's length is rounded
        // up (the last id repeated) so that few distinct statements are prepared.
        let mut by_id: std::collections::HashMap<i64, Memory> =
            std::collections::HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(ID_CHUNK) {
            let width = id_list_width(chunk.len());
            let marks = (1..=width)
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut statement = self
                .conn
                .prepare_cached(&format!(
                    "SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})"
                ))
                .map_err(self.map())?;
            let last = chunk[chunk.len() - 1];
            let values = (0..width).map(|i| chunk.get(i).copied().unwrap_or(last));
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), memory_from_row)
                .map_err(self.map())?;
            for row in rows {
                let memory = row.map_err(self.map())?;
                by_id.insert(memory.id, memory);
            }
        }
        let mut found: Vec<Memory> = Vec::with_capacity(ids.len());
        for id in ids {
            match by_id.remove(id) {
                Some(memory) => found.push(memory),
                // Asked twice: the same record again (missing ones are left out).
                None => {
                    if let Some(again) = found.iter().find(|m| m.id == *id).cloned() {
                        found.push(again);
                    }
                }
            }
        }
        Ok(found)
    }

    /// The active record with this scope and normalized title (docs/design.md §4 step 2).
    pub fn find_by_identity(
        &self,
        project: Option<&str>,
        scope: &str,
        title_norm: &str,
    ) -> Result<Option<Memory>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE project = ?1 AND scope = ?2 AND title_norm = ?3 \
                 AND status = 'active' ORDER BY id LIMIT 1"
            ))
            .and_then(|mut s| s.query_row(params![project.unwrap_or(""), scope, title_norm], memory_from_row).optional())
            .map_err(self.map())
    }

    /// The record carrying this caller-supplied id in a project.
    pub fn find_by_external_id(
        &self,
        project: Option<&str>,
        external_id: &str,
    ) -> Result<Option<Memory>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE project = ?1 AND external_id = ?2 ORDER BY id LIMIT 1"
            ))
            .and_then(|mut s| s.query_row(params![project.unwrap_or(""), external_id], memory_from_row).optional())
            .map_err(self.map())
    }

    /// Active records with this content hash (the caller filters by partition).
    pub fn find_by_hash(&self, content_hash: &str) -> Result<Vec<Memory>> {
        let mut statement = self
            .conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE content_hash = ?1 AND status = 'active' ORDER BY id"
            ))
            .map_err(self.map())?;
        let rows = statement
            .query_map([sha256_value(content_hash)], memory_from_row)
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    /// Records of any status with this content hash.
    pub fn find_by_hash_any_status(&self, content_hash: &str) -> Result<Vec<Memory>> {
        let mut statement = self
            .conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE content_hash = ?1 ORDER BY id"
            ))
            .map_err(self.map())?;
        let rows = statement
            .query_map([sha256_value(content_hash)], memory_from_row)
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    /// Every record stored against another since a dream merged it away (schema v10's
    /// `merged_into` column): merged-away id → the id its body is stored against.
    pub fn merged_bases(&self) -> Result<std::collections::BTreeMap<i64, i64>> {
        self.conn
            .prepare_cached("SELECT id, merged_into FROM memories WHERE merged_into IS NOT NULL")
            .and_then(|mut s| {
                s.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()
            })
            .map_err(self.map())
    }

    /// The record `id`'s body is stored against, when a dream merged it away.
    pub fn merged_base(&self, id: i64) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT merged_into FROM memories WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
            .map(Option::flatten)
            .map_err(self.map())
    }

    /// The record a dream merged `id` into (its latest `merge` event's `merged_into`), if any.
    pub fn merged_into(&self, id: i64) -> Result<Option<i64>> {
        self.conn
            .prepare_cached(
                "SELECT json_extract(detail, '$.extra.merged_into') FROM events \
                 WHERE memory_id = ?1 AND op = 'merge' ORDER BY id DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([id], |row| row.get::<_, Option<i64>>(0))
                    .optional()
            })
            .map(Option::flatten)
            .map_err(self.map())
    }

    /// Active records among `ids`, each with its MinHash signature, computed from the body
    /// (signatures are not stored since schema v8: 512 bytes a row, more than a typical
    /// captured body, against tens of microseconds to compute one).
    pub fn with_signatures(&self, ids: &[i64]) -> Result<Vec<(Memory, Signature)>> {
        let mut active = self
            .conn
            .prepare_cached(&format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?1 AND status = 'active'"
            ))
            .map_err(self.map())?;
        let mut found = Vec::new();
        for id in ids {
            if let Some(memory) = active
                .query_row([id], memory_from_row)
                .optional()
                .map_err(self.map())?
            {
                let signature = cairn_core::minhash::signature(&memory.body);
                found.push((memory, signature));
            }
        }
        Ok(found)
    }

    /// Records in id order, filtered; `limit` 0 means all.
    pub fn list(&self, filter: &ListFilter<'_>) -> Result<Vec<Memory>> {
        let mut sql = format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE 1 = 1");
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(projects) = filter.projects {
            let marks: Vec<String> = projects
                .iter()
                .map(|p| {
                    values.push(p.clone().unwrap_or_default().into());
                    format!("?{}", values.len())
                })
                .collect();
            sql.push_str(&format!(" AND project IN ({})", marks.join(", ")));
        }
        if let Some(types) = filter.types {
            let marks: Vec<String> = types
                .iter()
                .map(|t| {
                    values.push(t.to_string().into());
                    format!("?{}", values.len())
                })
                .collect();
            sql.push_str(&format!(" AND type IN ({})", marks.join(", ")));
        }
        if let Some(scopes) = filter.scopes {
            let marks: Vec<String> = scopes
                .iter()
                .map(|s| {
                    values.push(s.clone().into());
                    format!("?{}", values.len())
                })
                .collect();
            sql.push_str(&format!(" AND scope IN ({})", marks.join(", ")));
        }
        if let Some(status) = filter.status {
            values.push(status.to_string().into());
            sql.push_str(&format!(" AND status = ?{}", values.len()));
        }
        if let Some(after) = filter.after_id {
            values.push(after.into());
            sql.push_str(&format!(" AND id > ?{}", values.len()));
        }
        sql.push_str(if filter.newest_first {
            " ORDER BY id DESC"
        } else {
            " ORDER BY id"
        });
        if filter.limit > 0 {
            sql.push_str(&format!(" LIMIT {}", filter.limit));
        }
        let mut statement = self.conn.prepare(&sql).map_err(self.map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), memory_from_row)
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    /// Every earlier version of a record, oldest first, each a full snapshot (versions stored
    /// as reverse deltas are walked back from the current record, see `history.rs`).
    pub fn history(&self, id: i64) -> Result<Vec<HistoryRow>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT version, at, op, actor, snapshot, delta FROM history WHERE memory_id = ?1 ORDER BY version",
            )
            .map_err(self.map())?;
        let rows = statement
            .query_map([id], |row| {
                let snapshot: String = row.get(4)?;
                let is_delta: bool = row.get(5)?;
                Ok((
                    HistoryRow {
                        version: row.get(0)?,
                        at: row.get(1)?,
                        op: row.get(2)?,
                        actor: row.get(3)?,
                        snapshot: serde_json::Value::Null,
                    },
                    history::StoredVersion {
                        snapshot: serde_json::from_str(&snapshot)
                            .unwrap_or(serde_json::Value::String(snapshot)),
                        is_delta,
                    },
                ))
            })
            .map_err(self.map())?;
        let (mut rows, stored): (Vec<HistoryRow>, Vec<history::StoredVersion>) = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())?
            .into_iter()
            .unzip();
        if stored.iter().any(|version| version.is_delta) {
            let current = self.get(id)?.map(|memory| record_json(&memory));
            for (row, snapshot) in rows.iter_mut().zip(history::snapshots(stored, current)) {
                row.snapshot = snapshot;
            }
        } else {
            for (row, version) in rows.iter_mut().zip(stored) {
                row.snapshot = version.snapshot;
            }
        }
        Ok(rows)
    }

    /// Events, oldest first; `memory_id` narrows to one record; `limit` 0 means all (newest kept).
    pub fn events(&self, memory_id: Option<i64>, limit: usize) -> Result<Vec<EventRow>> {
        let limit_sql = if limit > 0 {
            format!("LIMIT {limit}")
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT * FROM (SELECT {EVENT_COLUMNS} FROM events \
             WHERE (?1 IS NULL OR memory_id = ?1) ORDER BY id DESC {limit_sql}) ORDER BY id"
        );
        let mut statement = self.conn.prepare(&sql).map_err(self.map())?;
        let rows = statement
            .query_map([memory_id], event_from_row)
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    pub fn open_conflicts(&self, id: Option<i64>) -> Result<Vec<ConflictRow>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT id, memory_id, other_id, reason, created_at, resolved_at FROM conflicts \
                 WHERE resolved_at IS NULL AND (?1 IS NULL OR memory_id = ?1 OR other_id = ?1) ORDER BY id",
            )
            .map_err(self.map())?;
        let rows = statement
            .query_map([id], |row| {
                Ok(ConflictRow {
                    id: row.get(0)?,
                    memory_id: row.get(1)?,
                    other_id: row.get(2)?,
                    reason: row.get(3)?,
                    created_at: row.get(4)?,
                    resolved_at: row.get(5)?,
                })
            })
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    /// Declared scopes and scopes that hold records, with record counts, for one project.
    pub fn scopes(&self, project: Option<&str>) -> Result<Vec<ScopeRow>> {
        let mut statement = self
            .conn
            .prepare(
                "WITH used AS (SELECT scope, count(*) AS n FROM memories WHERE project = ?1 AND status != 'archived' GROUP BY scope) \
                 SELECT s.scope, s.description, s.declared_at, COALESCE(u.n, 0) FROM scopes s LEFT JOIN used u ON u.scope = s.scope WHERE s.project = ?1 \
                 UNION ALL \
                 SELECT u.scope, NULL, NULL, u.n FROM used u WHERE NOT EXISTS (SELECT 1 FROM scopes s WHERE s.project = ?1 AND s.scope = u.scope) \
                 ORDER BY 1",
            )
            .map_err(self.map())?;
        let rows = statement
            .query_map([project.unwrap_or("")], |row| {
                Ok(ScopeRow {
                    project: project.map(str::to_string),
                    scope: row.get(0)?,
                    description: row.get(1)?,
                    declared_at: row.get(2)?,
                    records: row.get(3)?,
                })
            })
            .map_err(self.map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.map())
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .optional()
            .map_err(self.map())
    }

    pub fn max_id(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM memories", [], |row| {
                row.get(0)
            })
            .map_err(self.map())
    }

    pub fn stats(&self) -> Result<Stats> {
        let count = |sql: &str| -> Result<i64> {
            self.conn
                .query_row(sql, [], |row| row.get(0))
                .map_err(self.map())
        };
        let grouped = |sql: &str| -> Result<Vec<(String, i64)>> {
            let mut statement = self.conn.prepare(sql).map_err(self.map())?;
            let rows = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(self.map())?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(self.map())
        };
        let page_count = count("PRAGMA page_count")?;
        let page_size = count("PRAGMA page_size")?;
        Ok(Stats {
            records: count("SELECT count(*) FROM memories")?,
            by_status: grouped(
                "SELECT status, count(*) FROM memories GROUP BY status ORDER BY status",
            )?,
            by_type: grouped("SELECT type, count(*) FROM memories GROUP BY type ORDER BY type")?,
            projects: count("SELECT count(DISTINCT project) FROM memories WHERE project != ''")?,
            events: count("SELECT count(*) FROM events")?,
            history_versions: count("SELECT count(*) FROM history")?,
            open_conflicts: count("SELECT count(*) FROM conflicts WHERE resolved_at IS NULL")?,
            file_bytes: (page_count * page_size) as u64,
            body_bytes: count("SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0) FROM memories")?,
            capture_skipped: grouped(
                "SELECT substr(key, length('capture.skipped.') + 1), CAST(value AS INTEGER) FROM meta \
                 WHERE key LIKE 'capture.skipped.%' ORDER BY key",
            )?,
        })
    }

    /// Records against their derived data: FTS rows, supersession links.
    pub fn index_gaps(&self) -> Result<IndexGaps> {
        let count = |sql: &str| -> Result<i64> {
            self.conn
                .query_row(sql, [], |row| row.get(0))
                .map_err(self.map())
        };
        Ok(IndexGaps {
            // Merged-away records are not indexed (schema v10).
            records: count(
                "SELECT (SELECT count(*) FROM memories) - (SELECT count(*) FROM memories WHERE merged_into IS NOT NULL)",
            )?,
            fts_rows: count("SELECT count(*) FROM memories_fts_docsize")?,
            dangling_links: count(
                "SELECT count(*) FROM memories m WHERE (m.supersedes IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories o WHERE o.id = m.supersedes)) \
                 OR (m.superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories o WHERE o.id = m.superseded_by))",
            )?,
        })
    }
}

/// What `doctor` compares: records against their index rows.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IndexGaps {
    pub records: i64,
    pub fts_rows: i64,
    pub dangling_links: i64,
}

/// Filters for `list` and export.
#[derive(Debug, Clone, Default)]
pub struct ListFilter<'a> {
    pub projects: Option<&'a [Option<String>]>,
    pub types: Option<&'a [cairn_core::record::MemoryType]>,
    pub scopes: Option<&'a [String]>,
    pub status: Option<cairn_core::record::Status>,
    pub after_id: Option<i64>,
    pub newest_first: bool,
    pub limit: usize,
}
