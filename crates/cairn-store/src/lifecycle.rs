//! The lifecycle's tables and reads (migration `MIGRATION_LIFECYCLE`): dream proposal sets and
//! their proposals, the member hash of generated records, the light per-record rows decay and
//! consolidation scan, the online backup a dream snapshots into, and the maintenance `doctor
//! --repair` runs (orphans, VACUUM, WAL checkpoint, recovery into a new file).

use crate::{Reader, Result, Store, StoreError, WriteTx};
use cairn_core::minhash::Signature;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// One stored dream proposal set.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DreamRunRow {
    pub id: String,
    pub created_at: String,
    pub snapshot_at: String,
    pub project: Option<String>,
    /// `proposed`, `accepted`, `rejected`.
    pub status: String,
    pub unattended: bool,
    pub report: serde_json::Value,
    pub decided_at: Option<String>,
    pub decision: Option<serde_json::Value>,
}

/// One proposal of a set.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProposalRow {
    pub seq: i64,
    /// `decay`, `merge`, `forget`, `summary`, `reflection`.
    pub kind: String,
    /// The records it acts on, as they were in the snapshot: `[{id, updated_at, status}]`.
    pub targets: serde_json::Value,
    pub payload: serde_json::Value,
    /// `applied`, or `skipped: reason`, once accepted.
    pub outcome: Option<String>,
}

/// A decided proposal set whose proposal rows a dream pruned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PrunedSet {
    pub id: String,
    /// How many proposal rows were deleted.
    pub proposals: i64,
}

/// What decay and consolidation read about every active record: no body.
#[derive(Debug, Clone)]
pub struct LifecycleRow {
    pub id: i64,
    pub project: Option<String>,
    pub scope: String,
    pub trust_zone: String,
    pub sensitivity: String,
    pub memory_type: String,
    pub title: Option<String>,
    /// How many earlier versions the record has (every change adds one): a change detector
    /// finer than `updated_at`, which has whole seconds.
    pub version: i64,
    /// The first 80 characters of the body, for labels.
    pub opening: String,
    pub pinned: bool,
    pub importance: u8,
    pub confidence: String,
    pub created_at: String,
    pub updated_at: String,
    pub last_accessed_at: Option<String>,
    /// When the brief or the prompt hook last handed it to an agent (`surfacings`).
    pub last_surfaced_at: Option<String>,
    pub expires_at: Option<String>,
    pub body_bytes: usize,
    /// The body's MinHash signature, when asked for (`lifecycle_rows(true)`).
    pub signature: Option<Signature>,
    pub generated: bool,
}

/// Page accounting of the file.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct PageStats {
    pub page_size: i64,
    pub page_count: i64,
    pub freelist_count: i64,
    /// Bytes freed inside pages since the last `VACUUM` (merged-away records stored as
    /// changes), which the free-page count does not see.
    pub reclaimable_bytes: i64,
}

impl PageStats {
    pub fn free_ratio(&self) -> f64 {
        if self.page_count == 0 {
            0.0
        } else {
            self.freelist_count as f64 / self.page_count as f64
        }
    }

    /// Free pages and the space freed inside pages, as a share of the file.
    pub fn reclaimable_ratio(&self) -> f64 {
        let file = self.page_count * self.page_size;
        if file == 0 {
            0.0
        } else {
            ((self.freelist_count * self.page_size + self.reclaimable_bytes) as f64 / file as f64)
                .min(1.0)
        }
    }
}

/// Orphaned rows `doctor --repair` drops: rows pointing at records or runs that do not exist.
#[derive(Debug, Clone, Copy, Default, Serialize, schemars::JsonSchema)]
pub struct Orphans {
    pub conflicts: i64,
    pub generated_marks: i64,
    pub proposals: i64,
}

impl Orphans {
    pub fn total(&self) -> i64 {
        self.conflicts + self.generated_marks + self.proposals
    }
}

/// One table's share of a recovery.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecoveredTable {
    pub table: String,
    pub rows: i64,
    /// Rows that could not be read (damaged pages).
    pub lost: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

const ORPHAN_CONFLICTS: &str = "FROM conflicts c WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = c.memory_id) \
     OR NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = c.other_id)";
const ORPHAN_MARKS: &str =
    "FROM generated_records g WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = g.memory_id)";
const ORPHAN_PROPOSALS: &str =
    "FROM dream_proposals p WHERE NOT EXISTS (SELECT 1 FROM dream_runs r WHERE r.id = p.run_id)";

fn json_column(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))
}

impl WriteTx<'_> {
    fn lifecycle_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Stores a proposal set and its proposals (`proposals`: kind, targets, payload).
    pub fn insert_dream_run(
        &self,
        run: &DreamRunRow,
        proposals: &[(String, serde_json::Value, serde_json::Value)],
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO dream_runs (id, created_at, snapshot_at, project, status, unattended, report) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run.id,
                    run.created_at,
                    run.snapshot_at,
                    run.project.as_deref().unwrap_or(""),
                    run.status,
                    run.unattended,
                    run.report.to_string()
                ],
            )
            .map_err(self.lifecycle_map())?;
        let mut statement = self
            .tx
            .prepare_cached(
                "INSERT INTO dream_proposals (run_id, seq, kind, targets, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(self.lifecycle_map())?;
        for (seq, (kind, targets, payload)) in proposals.iter().enumerate() {
            statement
                .execute(params![
                    run.id,
                    seq as i64 + 1,
                    kind,
                    targets.to_string(),
                    payload.to_string()
                ])
                .map_err(self.lifecycle_map())?;
        }
        Ok(())
    }

    /// Closes a proposal set: `accepted` or `rejected`, with the per-proposal outcomes.
    pub fn decide_dream_run(
        &self,
        id: &str,
        status: &str,
        at: &str,
        decision: &serde_json::Value,
    ) -> Result<()> {
        self.tx
            .execute(
                "UPDATE dream_runs SET status = ?2, decided_at = ?3, decision = ?4 WHERE id = ?1",
                params![id, status, at, decision.to_string()],
            )
            .map_err(self.lifecycle_map())?;
        Ok(())
    }

    /// Deletes the proposal rows of the sets decided (`accepted` or `rejected`) at or before
    /// `cutoff`, and marks each such set's decision with `pruned_at` (= `at`),
    /// `pruned_proposals` and `keep_decided_days`; the set's row (status, report, decision)
    /// stays. Proposed and partial sets are never touched, nor a set without proposal rows
    /// (already pruned, or empty). Returns the sets pruned, oldest decision first.
    pub fn prune_decided_proposals(
        &self,
        cutoff: &str,
        at: &str,
        keep_decided_days: u32,
    ) -> Result<Vec<PrunedSet>> {
        let candidates: Vec<(String, Option<String>)> = {
            let mut statement = self
                .tx
                .prepare(
                    "SELECT r.id, r.decision FROM dream_runs r \
                     WHERE r.status IN ('accepted', 'rejected') AND r.decided_at IS NOT NULL AND r.decided_at <= ?1 \
                     AND EXISTS (SELECT 1 FROM dream_proposals p WHERE p.run_id = r.id) \
                     ORDER BY r.decided_at, r.id",
                )
                .map_err(self.lifecycle_map())?;
            let rows = statement
                .query_map([cutoff], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(self.lifecycle_map())?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(self.lifecycle_map())?
        };
        let mut pruned = Vec::with_capacity(candidates.len());
        for (id, decision) in candidates {
            let deleted = self
                .tx
                .execute("DELETE FROM dream_proposals WHERE run_id = ?1", [&id])
                .map_err(self.lifecycle_map())? as i64;
            let mut decision = match decision.map(json_column) {
                Some(serde_json::Value::Object(fields)) => fields,
                Some(other) => {
                    let mut fields = serde_json::Map::new();
                    fields.insert("was".into(), other);
                    fields
                }
                None => serde_json::Map::new(),
            };
            decision.insert("pruned_at".into(), at.into());
            decision.insert("pruned_proposals".into(), deleted.into());
            decision.insert("keep_decided_days".into(), keep_decided_days.into());
            self.tx
                .execute(
                    "UPDATE dream_runs SET decision = ?2 WHERE id = ?1",
                    params![id, serde_json::Value::Object(decision).to_string()],
                )
                .map_err(self.lifecycle_map())?;
            pruned.push(PrunedSet {
                id,
                proposals: deleted,
            });
        }
        Ok(pruned)
    }

    pub fn set_proposal_outcome(&self, run_id: &str, seq: i64, outcome: &str) -> Result<()> {
        self.tx
            .execute(
                "UPDATE dream_proposals SET outcome = ?3 WHERE run_id = ?1 AND seq = ?2",
                params![run_id, seq, outcome],
            )
            .map_err(self.lifecycle_map())?;
        Ok(())
    }

    /// Marks a generated record with the member hash of what it was generated from.
    pub fn mark_generated_from(
        &self,
        memory_id: i64,
        generator: &str,
        member_hash: &str,
        at: &str,
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO generated_records (memory_id, generator, marked_at, member_hash) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (memory_id) DO UPDATE SET member_hash = excluded.member_hash",
                params![memory_id, generator, at, member_hash],
            )
            .map_err(self.lifecycle_map())?;
        Ok(())
    }

    pub fn delete_meta(&self, key: &str) -> Result<()> {
        self.tx
            .execute("DELETE FROM meta WHERE key = ?1", [key])
            .map_err(self.lifecycle_map())?;
        Ok(())
    }

    /// Drops rows that point at records or proposal sets that no longer exist.
    pub fn drop_orphans(&self) -> Result<Orphans> {
        let delete = |from: &str| -> Result<i64> {
            let table = from
                .split_whitespace()
                .nth(1)
                .expect("orphan queries name their table");
            self.tx
                .execute(
                    &format!("DELETE FROM {table} WHERE rowid IN (SELECT rowid {from})"),
                    [],
                )
                .map(|n| n as i64)
                .map_err(self.lifecycle_map())
        };
        Ok(Orphans {
            conflicts: delete(ORPHAN_CONFLICTS)?,
            generated_marks: delete(ORPHAN_MARKS)?,
            proposals: delete(ORPHAN_PROPOSALS)?,
        })
    }
}

impl Reader<'_> {
    fn lifecycle_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<DreamRunRow> {
        let project: String = row.get(3)?;
        Ok(DreamRunRow {
            id: row.get(0)?,
            created_at: row.get(1)?,
            snapshot_at: row.get(2)?,
            project: (!project.is_empty()).then_some(project),
            status: row.get(4)?,
            unattended: row.get(5)?,
            report: json_column(row.get(6)?),
            decided_at: row.get(7)?,
            decision: row.get::<_, Option<String>>(8)?.map(json_column),
        })
    }

    pub fn dream_run(&self, id: &str) -> Result<Option<DreamRunRow>> {
        self.conn
            .query_row(
                "SELECT id, created_at, snapshot_at, project, status, unattended, report, decided_at, decision \
                 FROM dream_runs WHERE id = ?1",
                [id],
                Self::run_from_row,
            )
            .optional()
            .map_err(self.lifecycle_map())
    }

    /// Proposal sets, newest first; `limit` 0 means all.
    pub fn dream_runs(&self, limit: usize) -> Result<Vec<DreamRunRow>> {
        let limit = if limit == 0 { -1 } else { limit as i64 };
        let mut statement = self
            .conn
            .prepare(
                "SELECT id, created_at, snapshot_at, project, status, unattended, report, decided_at, decision \
                 FROM dream_runs ORDER BY created_at DESC, rowid DESC LIMIT ?1",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([limit], Self::run_from_row)
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    pub fn dream_proposals(&self, run_id: &str) -> Result<Vec<ProposalRow>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT seq, kind, targets, payload, outcome FROM dream_proposals WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([run_id], |row| {
                Ok(ProposalRow {
                    seq: row.get(0)?,
                    kind: row.get(1)?,
                    targets: json_column(row.get(2)?),
                    payload: json_column(row.get(3)?),
                    outcome: row.get(4)?,
                })
            })
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    /// The records whose events say they were changed by `by` (`extra.by`, e.g. `dream d1a2…`),
    /// in id order: what an accepted dream applied, from the event log.
    pub fn records_changed_by(&self, by: &str) -> Result<Vec<i64>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT DISTINCT memory_id FROM events WHERE memory_id IS NOT NULL \
                 AND instr(detail, ?1) > 0 AND json_extract(detail, '$.extra.by') = ?1 ORDER BY memory_id",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([by], |row| row.get::<_, i64>(0))
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    /// The latest history version of a record (0: never changed).
    pub fn history_version(&self, memory_id: i64) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(version), 0) FROM history WHERE memory_id = ?1")
            .and_then(|mut s| s.query_row([memory_id], |row| row.get(0)))
            .map_err(self.lifecycle_map())
    }

    /// The record generated by `generator` from members with this hash, if any.
    pub fn generated_by_member_hash(
        &self,
        generator: &str,
        member_hash: &str,
    ) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT memory_id FROM generated_records WHERE generator = ?1 AND member_hash = ?2 ORDER BY memory_id LIMIT 1",
                params![generator, member_hash],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.lifecycle_map())
    }

    /// Every active record, light (no body), in id order; with `signatures`, each with the
    /// MinHash signature of its body (computed here: signatures are not stored since schema v8).
    pub fn lifecycle_rows(&self, signatures: bool) -> Result<Vec<LifecycleRow>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT m.id, m.project, m.scope, m.trust_zone, m.sensitivity, m.type, m.title, m.pinned, m.importance, \
                 m.confidence, m.created_at, m.updated_at, m.last_accessed_at, m.expires_at, length(CAST(m.body AS BLOB)), \
                 CASE WHEN ?1 THEN m.body END, EXISTS (SELECT 1 FROM generated_records g WHERE g.memory_id = m.id), substr(m.body, 1, 80), \
                 (SELECT COALESCE(MAX(h.version), 0) FROM history h WHERE h.memory_id = m.id), \
                 (SELECT s.surfaced_at FROM surfacings s WHERE s.memory_id = m.id) \
                 FROM memories m WHERE m.status = 'active' ORDER BY m.id",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([signatures], |row| {
                let project: String = row.get(1)?;
                let body: Option<String> = row.get(15)?;
                Ok(LifecycleRow {
                    id: row.get(0)?,
                    project: (!project.is_empty()).then_some(project),
                    scope: row.get(2)?,
                    trust_zone: row.get(3)?,
                    sensitivity: row.get(4)?,
                    memory_type: row.get(5)?,
                    title: row.get(6)?,
                    pinned: row.get(7)?,
                    importance: row.get(8)?,
                    confidence: row.get(9)?,
                    created_at: row.get(10)?,
                    updated_at: row.get(11)?,
                    last_accessed_at: row.get(12)?,
                    last_surfaced_at: row.get(19)?,
                    expires_at: row.get(13)?,
                    body_bytes: row.get::<_, i64>(14)?.max(0) as usize,
                    signature: body.as_deref().map(cairn_core::minhash::signature),
                    generated: row.get(16)?,
                    opening: row.get(17)?,
                    version: row.get(18)?,
                })
            })
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    /// Active tier A/B records of `projects` (`None` = personal) nobody re-checked since
    /// `cutoff`: their last `verify` event (else their creation) is older. Oldest first.
    pub fn stale_unverified(
        &self,
        projects: &[Option<String>],
        types: &[&str],
        cutoff: &str,
        limit: usize,
    ) -> Result<Vec<i64>> {
        let mut values: Vec<rusqlite::types::Value> = vec![cutoff.to_string().into()];
        let project_marks: Vec<String> = projects
            .iter()
            .map(|p| {
                values.push(p.clone().unwrap_or_default().into());
                format!("?{}", values.len())
            })
            .collect();
        let type_marks: Vec<String> = types
            .iter()
            .map(|t| {
                values.push(t.to_string().into());
                format!("?{}", values.len())
            })
            .collect();
        let sql = format!(
            "SELECT id FROM (SELECT m.id, COALESCE((SELECT max(e.at) FROM events e WHERE e.memory_id = m.id AND e.op = 'verify'), m.created_at) AS checked \
             FROM memories m WHERE m.status = 'active' AND m.project IN ({}) AND m.type IN ({})) WHERE checked <= ?1 \
             ORDER BY checked, id LIMIT {}",
            project_marks.join(", "),
            type_marks.join(", "),
            if limit == 0 { -1 } else { limit as i64 }
        );
        let mut statement = self.conn.prepare(&sql).map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                row.get::<_, i64>(0)
            })
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    /// Open links pointing at each record (graph edges from anything else), by record id.
    pub fn inbound_link_counts(&self) -> Result<HashMap<i64, u32>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT dst_id, count(*) FROM edges WHERE dst_kind = 'record' AND invalidate_seq IS NULL \
                 AND NOT (src_kind = 'record' AND src_id = dst_id) GROUP BY dst_id",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))
            .map_err(self.lifecycle_map())?;
        let mut counts = HashMap::new();
        for row in rows {
            let (id, count) = row.map_err(self.lifecycle_map())?;
            counts.insert(id, count.clamp(0, i64::from(u32::MAX)) as u32);
        }
        Ok(counts)
    }

    /// Archived records a dream merged away that are still stored whole and indexed (merged
    /// before schema v10), each with the record it was merged into (which still exists):
    /// what `WriteTx::pack_merged` would store against it.
    pub fn merged_away_unpacked(&self) -> Result<Vec<(i64, i64)>> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT m.id, json_extract(e.detail, '$.extra.merged_into') AS survivor FROM memories m \
                 JOIN events e ON e.id = (SELECT max(x.id) FROM events x WHERE x.memory_id = m.id AND x.op != 'recall') \
                 WHERE m.status = 'archived' AND m.merged_into IS NULL AND e.op = 'merge' \
                 AND EXISTS (SELECT 1 FROM memories s WHERE s.id = survivor AND s.id != m.id) ORDER BY m.id",
            )
            .map_err(self.lifecycle_map())?;
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(self.lifecycle_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.lifecycle_map())
    }

    /// Orphaned rows, counted (what `drop_orphans` would delete).
    pub fn orphans(&self) -> Result<Orphans> {
        let count = |from: &str| -> Result<i64> {
            self.conn
                .query_row(&format!("SELECT count(*) {from}"), [], |row| row.get(0))
                .map_err(self.lifecycle_map())
        };
        Ok(Orphans {
            conflicts: count(ORPHAN_CONFLICTS)?,
            generated_marks: count(ORPHAN_MARKS)?,
            proposals: count(ORPHAN_PROPOSALS)?,
        })
    }

    pub fn page_stats(&self) -> Result<PageStats> {
        let pragma = |name: &str| -> Result<i64> {
            self.conn
                .query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
                .map_err(self.lifecycle_map())
        };
        let reclaimable_bytes = self
            .meta("reclaimable_bytes")?
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
            .max(0);
        Ok(PageStats {
            page_size: pragma("page_size")?,
            page_count: pragma("page_count")?,
            freelist_count: pragma("freelist_count")?,
            reclaimable_bytes,
        })
    }
}

/// Tables a recovery copies, in dependency-free order; tables the damaged file lacks are
/// skipped, and derived ones (the full-text index) are rebuilt instead of copied.
const RECOVERABLE_TABLES: &[&str] = &[
    "memories",
    "history",
    "events",
    "conflicts",
    "scopes",
    "meta",
    "entities",
    "entity_aliases",
    "relation_types",
    "edge_log",
    "edges",
    "edge_quarantine",
    "generated_records",
    "tasks",
    "measures",
    "identity",
    "awareness",
    "capture_offsets",
    "inbox",
    "vectors",
    "dream_runs",
    "dream_proposals",
];

impl Store {
    /// Copies the live brain into a new file at `target` with SQLite's online backup, in one
    /// read transaction: a consistent snapshot while other processes keep writing.
    pub fn backup_to(&self, target: &Path) -> Result<()> {
        let map = |e| StoreError::from_sqlite(e, target);
        let mut destination = Connection::open(target).map_err(map)?;
        let backup = rusqlite::backup::Backup::new(&self.conn, &mut destination).map_err(map)?;
        backup
            .step(-1)
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        Ok(())
    }

    /// `VACUUM`: rewrites the file without its free pages or the space freed inside pages
    /// (`meta.reclaimable_bytes`, which it resets). The copy it builds goes to a temporary
    /// file, not memory (`temp_store = MEMORY` otherwise): a brain of several GB must not
    /// need as much RAM to be compacted.
    pub fn vacuum(&mut self) -> Result<()> {
        let result = self
            .conn
            .execute_batch(
                "PRAGMA temp_store = FILE; VACUUM; DELETE FROM meta WHERE key = 'reclaimable_bytes';",
            )
            .map_err(|e| StoreError::from_sqlite(e, &self.path));
        let restored = self
            .conn
            .execute_batch("PRAGMA temp_store = MEMORY;")
            .map_err(|e| StoreError::from_sqlite(e, &self.path));
        result.and(restored)
    }

    /// Checkpoints the WAL into the file and truncates it to zero bytes (when no reader holds
    /// it); returns (busy, wal frames, checkpointed frames).
    pub fn checkpoint_truncate(&mut self) -> Result<(i64, i64, i64)> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .map_err(|e| StoreError::from_sqlite(e, &self.path))
    }

    /// The `-wal` file's size in bytes (0 when there is none); metadata only, the file is
    /// never opened (opening it would break SQLite's locks).
    pub fn wal_bytes(&self) -> u64 {
        crate::wal_bytes_of(&self.path)
    }

    /// Reads what can be read from the (damaged) brain at `damaged` into a new brain at
    /// `target`, table by table and, where a table's pages are damaged, row by row. The
    /// damaged file is opened read-only and never changed; `target` must not exist.
    pub fn recover_into(damaged: &Path, target: &Path) -> Result<Vec<RecoveredTable>> {
        if target.exists() {
            return Err(StoreError::Io {
                path: target.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "the recovery target already exists; pick a new file name (nothing was written)",
                ),
            });
        }
        let source = Connection::open_with_flags(
            damaged,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::from_sqlite(e, damaged))?;
        let mut fresh = Store::open(target)?;
        let mut report = Vec::new();
        let conn = &mut fresh.conn;
        for table in RECOVERABLE_TABLES {
            let exists: bool = source
                .query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                    [table],
                    |row| row.get::<_, i64>(0),
                )
                .map(|n| n > 0)
                .unwrap_or(false);
            if !exists {
                continue;
            }
            report.push(recover_table(&source, conn, table));
        }
        // A merged-away body is a delta against its base record (schema v10): without the
        // base it cannot be read, so it says so instead of failing every read of the brain.
        let orphaned = conn
            .execute(
                "UPDATE memories SET merged_into = NULL, body = '[cairn recovery: this body was stored as changes to record #' \
                 || merged_into || ', which could not be recovered]' \
                 WHERE typeof(body) = 'blob' AND NOT EXISTS \
                 (SELECT 1 FROM memories base WHERE base.id = memories.merged_into AND typeof(base.body) = 'text')",
                [],
            )
            .map_err(|e| StoreError::from_sqlite(e, target))?;
        conn.execute(
            "UPDATE memories SET merged_into = NULL WHERE merged_into IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM memories base WHERE base.id = memories.merged_into)",
            [],
        )
        .map_err(|e| StoreError::from_sqlite(e, target))?;
        if orphaned > 0 {
            report.push(RecoveredTable {
                table: "memories (merged-away bodies)".into(),
                rows: 0,
                lost: orphaned as i64,
                error: Some(format!(
                    "{orphaned} merged-away records were stored as changes to records that could not be read; their bodies say so"
                )),
            });
        }
        conn.execute(
            "INSERT INTO memories_fts(memories_fts) VALUES('rebuild')",
            [],
        )
        .map_err(|e| StoreError::from_sqlite(e, target))?;
        // Rows copied from an older brain carry hex hashes and receipts: store them as the
        // current schema does, so the content-hash lookups (exact duplicates) find them.
        conn.execute_batch(crate::schema::HEX_TO_BYTES)
            .map_err(|e| StoreError::from_sqlite(e, target))?;
        Ok(report)
    }
}

/// Copies one table: the columns both files have, every readable row.
fn recover_table(source: &Connection, target: &mut Connection, table: &str) -> RecoveredTable {
    let mut result = RecoveredTable {
        table: table.to_string(),
        rows: 0,
        lost: 0,
        error: None,
    };
    let columns = |conn: &Connection| -> Vec<String> {
        conn.prepare(&format!("PRAGMA table_info({table})"))
            .and_then(|mut s| {
                s.query_map([], |row| row.get::<_, String>(1))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            })
            .unwrap_or_default()
    };
    let theirs = columns(source);
    let shared: Vec<String> = columns(target)
        .into_iter()
        .filter(|c| theirs.contains(c))
        .collect();
    if shared.is_empty() {
        result.error = Some("no readable columns".into());
        return result;
    }
    let list = shared.join(", ");
    let marks: Vec<String> = (1..=shared.len()).map(|i| format!("?{i}")).collect();
    let insert = format!(
        "INSERT OR IGNORE INTO {table} ({list}) VALUES ({})",
        marks.join(", ")
    );
    let rowids: Vec<i64> = match source
        .prepare(&format!("SELECT rowid FROM {table} ORDER BY rowid"))
        .and_then(|mut s| {
            s.query_map([], |row| row.get::<_, i64>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        }) {
        Ok(ids) => ids,
        Err(error) => {
            result.error = Some(format!("cannot list rows: {error}"));
            return result;
        }
    };
    let Ok(tx) = target.transaction() else {
        result.error = Some("cannot write the new file".into());
        return result;
    };
    {
        let read = source.prepare(&format!("SELECT {list} FROM {table} WHERE rowid = ?1"));
        let write = tx.prepare(&insert);
        let (Ok(mut read), Ok(mut write)) = (read, write) else {
            result.error = Some("cannot prepare the copy".into());
            return result;
        };
        for rowid in rowids {
            let values: rusqlite::Result<Vec<rusqlite::types::Value>> = read
                .query_row([rowid], |row| {
                    (0..shared.len()).map(|i| row.get(i)).collect()
                });
            match values {
                Ok(values) => match write.execute(rusqlite::params_from_iter(values)) {
                    Ok(_) => result.rows += 1,
                    Err(_) => result.lost += 1,
                },
                Err(_) => result.lost += 1,
            }
        }
    }
    if let Err(error) = tx.commit() {
        result.error = Some(format!("cannot commit: {error}"));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(id: &str) -> DreamRunRow {
        DreamRunRow {
            id: id.into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            snapshot_at: "2026-01-01T00:00:00Z".into(),
            project: Some("p".into()),
            status: "proposed".into(),
            unattended: false,
            report: json!({"proposals": {"merge": 2}}),
            decided_at: None,
            decision: None,
        }
    }

    fn proposals(n: usize) -> Vec<(String, serde_json::Value, serde_json::Value)> {
        (0..n)
            .map(|i| {
                (
                    "merge".to_string(),
                    json!([{"id": i}]),
                    json!({"survivor": i}),
                )
            })
            .collect()
    }

    /// Sets: accepted on the 1st, rejected on the 3rd, accepted on the 10th, one partial
    /// (decided on the 1st), one proposed; each with proposals.
    fn store_with_sets(dir: &Path) -> Store {
        let mut store = Store::open(&dir.join("brain.db")).unwrap();
        store
            .write(|tx| {
                for (id, n) in [("da", 2), ("dr", 3), ("dl", 1), ("dp", 2), ("dq", 4)] {
                    tx.insert_dream_run(&run(id), &proposals(n))?;
                }
                tx.decide_dream_run(
                    "da",
                    "accepted",
                    "2026-01-01T09:00:00Z",
                    &json!({"applied": 2, "skipped": 0, "only": []}),
                )?;
                tx.decide_dream_run(
                    "dr",
                    "rejected",
                    "2026-01-03T09:00:00Z",
                    &json!({"rejected": true}),
                )?;
                tx.decide_dream_run(
                    "dl",
                    "accepted",
                    "2026-01-10T09:00:00Z",
                    &json!({"applied": 1, "skipped": 0, "only": []}),
                )?;
                tx.decide_dream_run(
                    "dp",
                    "partial",
                    "2026-01-01T09:00:00Z",
                    &json!({"applied": 1, "skipped": 0, "only": ["merge"]}),
                )?;
                Ok::<_, StoreError>(())
            })
            .unwrap();
        store
    }

    fn rows(store: &Store, id: &str) -> usize {
        store.reader().dream_proposals(id).unwrap().len()
    }

    #[test]
    fn pruning_deletes_only_the_proposals_of_sets_decided_by_the_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_sets(dir.path());
        let pruned = store
            .write(|tx| {
                tx.prune_decided_proposals("2026-01-03T09:00:00Z", "2026-01-10T09:00:00Z", 7)
            })
            .unwrap();
        assert_eq!(
            pruned,
            vec![
                PrunedSet {
                    id: "da".into(),
                    proposals: 2
                },
                PrunedSet {
                    id: "dr".into(),
                    proposals: 3
                },
            ],
            "decided at the cutoff counts; later, partial and proposed sets do not"
        );
        assert_eq!(
            (
                rows(&store, "da"),
                rows(&store, "dr"),
                rows(&store, "dl"),
                rows(&store, "dp"),
                rows(&store, "dq")
            ),
            (0, 0, 1, 2, 4)
        );
        // The set's row stays, its decision keeps what it said and gains the marker.
        let accepted = store.reader().dream_run("da").unwrap().unwrap();
        assert_eq!(accepted.status, "accepted");
        assert_eq!(accepted.report, json!({"proposals": {"merge": 2}}));
        let decision = accepted.decision.unwrap();
        assert_eq!(decision["applied"], 2);
        assert_eq!(decision["pruned_at"], "2026-01-10T09:00:00Z");
        assert_eq!(decision["pruned_proposals"], 2);
        assert_eq!(decision["keep_decided_days"], 7);
        let rejected = store.reader().dream_run("dr").unwrap().unwrap();
        assert_eq!(rejected.decision.unwrap()["rejected"], true);
        assert!(
            store
                .reader()
                .dream_run("dl")
                .unwrap()
                .unwrap()
                .decision
                .unwrap()
                .get("pruned_at")
                .is_none()
        );
    }

    #[test]
    fn pruning_again_touches_nothing_and_a_later_cutoff_takes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_with_sets(dir.path());
        let cutoff = "2026-01-05T00:00:00Z";
        let first = store
            .write(|tx| tx.prune_decided_proposals(cutoff, "2026-01-12T00:00:00Z", 7))
            .unwrap();
        assert_eq!(first.len(), 2);
        let again = store
            .write(|tx| tx.prune_decided_proposals(cutoff, "2026-01-13T00:00:00Z", 7))
            .unwrap();
        assert!(again.is_empty(), "{again:?}");
        // The first marker is kept (no rows left, so the set is not touched again).
        let decision = store.reader().dream_run("da").unwrap().unwrap().decision;
        assert_eq!(decision.unwrap()["pruned_at"], "2026-01-12T00:00:00Z");
        let later = store
            .write(|tx| {
                tx.prune_decided_proposals("2026-12-31T00:00:00Z", "2026-12-31T00:00:00Z", 0)
            })
            .unwrap();
        assert_eq!(
            later,
            vec![PrunedSet {
                id: "dl".into(),
                proposals: 1
            }]
        );
        // Never the proposed or partial sets, however old.
        assert_eq!((rows(&store, "dp"), rows(&store, "dq")), (2, 4));
        assert_eq!(store.reader().orphans().unwrap().proposals, 0);
    }

    #[test]
    fn the_records_a_dream_changed_are_read_from_the_event_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        store
            .write(|tx| {
                for (at, op, id, by) in [
                    ("2026-01-01T00:00:00Z", "merge", 7, "dream dabc"),
                    ("2026-01-01T00:00:00Z", "merge", 3, "dream dabc"),
                    ("2026-01-01T00:00:00Z", "decay", 3, "dream dabc"),
                    ("2026-01-01T00:00:00Z", "decay", 9, "dream dother"),
                    ("2026-01-01T00:00:00Z", "update", 5, "cli"),
                ] {
                    let detail = json!({"op": op, "id": id, "at": at, "extra": {"by": by}});
                    tx.append_event(
                        &crate::NewEvent {
                            at,
                            op,
                            memory_id: Some(id),
                            project: Some("p"),
                            detail: &detail,
                            actor: "cli",
                        },
                        "r",
                    )?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let reader = store.reader();
        assert_eq!(reader.records_changed_by("dream dabc").unwrap(), vec![3, 7]);
        assert_eq!(reader.records_changed_by("dream dother").unwrap(), vec![9]);
        assert!(reader.records_changed_by("dream dnone").unwrap().is_empty());
    }
}
