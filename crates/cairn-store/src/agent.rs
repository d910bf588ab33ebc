//! What is kept but never ranked (docs/design.md §9) — tasks, measures, the identity, awareness items —
//! plus the inbox of captured candidate facts and transcript capture offsets. Plain reads and
//! writes; the rules (limits, expiry, what goes where) live in the engine.
//!
//! None of these tables is joined by the recall query (`search.rs` reads `memories` only), which
//! is how "never enters recall ranking" holds by construction.

use crate::{Reader, Result, StoreError, WriteTx};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskRow {
    pub id: i64,
    pub project: Option<String>,
    pub title: String,
    pub detail: Option<String>,
    pub status: String,
    pub due_at: Option<String>,
    pub created_at: String,
    pub done_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeasureRow {
    pub id: i64,
    pub project: Option<String>,
    pub name: String,
    pub value: f64,
    pub unit: Option<String>,
    pub note: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdentityRow {
    pub body: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AwarenessRow {
    pub id: i64,
    pub project: Option<String>,
    pub body: String,
    pub created_at: String,
    pub expires_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InboxRow {
    pub id: i64,
    pub project: Option<String>,
    pub kind: String,
    pub suggested_type: String,
    pub body: String,
    pub source: String,
    pub trust: String,
    pub created_at: String,
    pub resolved_at: Option<String>,
    pub resolution: Option<String>,
}

/// How far a session's transcript has been captured.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CaptureOffset {
    pub session_id: String,
    pub transcript_path: String,
    pub byte_offset: u64,
    pub turns: i64,
    pub updated_at: String,
}

/// A candidate fact for the inbox.
#[derive(Debug, Clone)]
pub struct NewInboxItem<'a> {
    pub project: Option<&'a str>,
    pub kind: &'a str,
    pub suggested_type: &'a str,
    pub body: &'a str,
    pub content_hash: &'a str,
    pub source: &'a str,
    pub at: &'a str,
}

fn project_of(stored: String) -> Option<String> {
    (!stored.is_empty()).then_some(stored)
}

fn in_list(projects: &[Option<String>], first: usize) -> (String, Vec<String>) {
    let marks: Vec<String> = (0..projects.len())
        .map(|i| format!("?{}", first + i))
        .collect();
    let values = projects
        .iter()
        .map(|p| p.clone().unwrap_or_default())
        .collect();
    (marks.join(", "), values)
}

impl WriteTx<'_> {
    fn agent_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    pub fn insert_task(
        &self,
        project: Option<&str>,
        title: &str,
        detail: Option<&str>,
        due_at: Option<&str>,
        at: &str,
    ) -> Result<i64> {
        self.tx
            .execute(
                "INSERT INTO tasks (project, title, detail, due_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![project.unwrap_or(""), title, detail, due_at, at],
            )
            .map_err(self.agent_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Marks a task done; `false` when it was already done.
    pub fn finish_task(&self, id: i64, at: &str) -> Result<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE tasks SET status = 'done', done_at = ?2 WHERE id = ?1 AND status != 'done'",
                params![id, at],
            )
            .map_err(self.agent_map())?;
        Ok(changed > 0)
    }

    pub fn insert_measure(
        &self,
        project: Option<&str>,
        name: &str,
        value: f64,
        unit: Option<&str>,
        note: Option<&str>,
        at: &str,
    ) -> Result<i64> {
        self.tx
            .execute(
                "INSERT INTO measures (project, name, value, unit, note, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![project.unwrap_or(""), name, value, unit, note, at],
            )
            .map_err(self.agent_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    pub fn set_identity(&self, body: &str, at: &str) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO identity (id, body, updated_at) VALUES (1, ?1, ?2) \
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
                params![body, at],
            )
            .map_err(self.agent_map())?;
        Ok(())
    }

    pub fn insert_awareness(
        &self,
        project: Option<&str>,
        body: &str,
        at: &str,
        expires_at: &str,
    ) -> Result<i64> {
        self.tx
            .execute(
                "INSERT INTO awareness (project, body, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
                params![project.unwrap_or(""), body, at, expires_at],
            )
            .map_err(self.agent_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Drops awareness items that expired by `now`; returns how many.
    pub fn expire_awareness(&self, now: &str) -> Result<usize> {
        self.tx
            .execute("DELETE FROM awareness WHERE expires_at <= ?1", [now])
            .map_err(self.agent_map())
    }

    pub fn delete_awareness(&self, id: i64) -> Result<bool> {
        let changed = self
            .tx
            .execute("DELETE FROM awareness WHERE id = ?1", [id])
            .map_err(self.agent_map())?;
        Ok(changed > 0)
    }

    pub fn set_capture_offset(&self, offset: &CaptureOffset) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO capture_offsets (session_id, transcript_path, byte_offset, turns, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (session_id) DO UPDATE SET \
                 transcript_path = excluded.transcript_path, byte_offset = excluded.byte_offset, \
                 turns = excluded.turns, updated_at = excluded.updated_at",
                params![
                    offset.session_id,
                    offset.transcript_path,
                    offset.byte_offset as i64,
                    offset.turns,
                    offset.updated_at
                ],
            )
            .map_err(self.agent_map())?;
        Ok(())
    }

    /// Adds a candidate to the inbox; `None` when the same text is already there.
    pub fn insert_inbox(&self, item: &NewInboxItem<'_>) -> Result<Option<i64>> {
        let changed = self
            .tx
            .execute(
                "INSERT INTO inbox (project, kind, suggested_type, body, content_hash, source, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (project, content_hash) DO NOTHING",
                params![
                    item.project.unwrap_or(""),
                    item.kind,
                    item.suggested_type,
                    item.body,
                    item.content_hash,
                    item.source,
                    item.at
                ],
            )
            .map_err(self.agent_map())?;
        Ok((changed > 0).then(|| self.tx.last_insert_rowid()))
    }

    /// Closes an open inbox item with a resolution (`accepted as #12`, `dismissed`).
    pub fn resolve_inbox(&self, id: i64, resolution: &str, at: &str) -> Result<bool> {
        let changed = self
            .tx
            .execute(
                "UPDATE inbox SET resolved_at = ?2, resolution = ?3 WHERE id = ?1 AND resolved_at IS NULL",
                params![id, at, resolution],
            )
            .map_err(self.agent_map())?;
        Ok(changed > 0)
    }
}

impl Reader<'_> {
    fn agent_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Tasks of these projects: open ones first (by due date, then id), then done ones.
    pub fn tasks(&self, projects: &[Option<String>], include_done: bool) -> Result<Vec<TaskRow>> {
        let (marks, values) = in_list(projects, 1);
        let done = if include_done {
            ""
        } else {
            " AND status = 'open'"
        };
        let sql = format!(
            "SELECT id, project, title, detail, status, due_at, created_at, done_at FROM tasks \
             WHERE project IN ({marks}){done} \
             ORDER BY status = 'done', due_at IS NULL, due_at, id"
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(TaskRow {
                    id: row.get(0)?,
                    project: project_of(row.get(1)?),
                    title: row.get(2)?,
                    detail: row.get(3)?,
                    status: row.get(4)?,
                    due_at: row.get(5)?,
                    created_at: row.get(6)?,
                    done_at: row.get(7)?,
                })
            })
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    pub fn task(&self, id: i64) -> Result<Option<TaskRow>> {
        self.conn
            .query_row(
                "SELECT id, project, title, detail, status, due_at, created_at, done_at FROM tasks WHERE id = ?1",
                [id],
                |row| {
                    Ok(TaskRow {
                        id: row.get(0)?,
                        project: project_of(row.get(1)?),
                        title: row.get(2)?,
                        detail: row.get(3)?,
                        status: row.get(4)?,
                        due_at: row.get(5)?,
                        created_at: row.get(6)?,
                        done_at: row.get(7)?,
                    })
                },
            )
            .optional()
            .map_err(self.agent_map())
    }

    /// Readings of these projects, oldest first; `name` narrows to one measure.
    pub fn measures(
        &self,
        projects: &[Option<String>],
        name: Option<&str>,
    ) -> Result<Vec<MeasureRow>> {
        let (marks, mut values) = in_list(projects, 2);
        values.insert(0, name.unwrap_or("").to_string());
        let sql = format!(
            "SELECT id, project, name, value, unit, note, at FROM measures \
             WHERE project IN ({marks}) AND (?1 = '' OR name = ?1) ORDER BY name, at, id"
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(MeasureRow {
                    id: row.get(0)?,
                    project: project_of(row.get(1)?),
                    name: row.get(2)?,
                    value: row.get(3)?,
                    unit: row.get(4)?,
                    note: row.get(5)?,
                    at: row.get(6)?,
                })
            })
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    pub fn identity(&self) -> Result<Option<IdentityRow>> {
        self.conn
            .query_row(
                "SELECT body, updated_at FROM identity WHERE id = 1",
                [],
                |row| {
                    Ok(IdentityRow {
                        body: row.get(0)?,
                        updated_at: row.get(1)?,
                    })
                },
            )
            .optional()
            .map_err(self.agent_map())
    }

    /// Live awareness items of these projects (not expired by `now`), oldest first.
    pub fn awareness(&self, projects: &[Option<String>], now: &str) -> Result<Vec<AwarenessRow>> {
        let (marks, mut values) = in_list(projects, 2);
        values.insert(0, now.to_string());
        let sql = format!(
            "SELECT id, project, body, created_at, expires_at FROM awareness \
             WHERE project IN ({marks}) AND expires_at > ?1 ORDER BY created_at, id"
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(AwarenessRow {
                    id: row.get(0)?,
                    project: project_of(row.get(1)?),
                    body: row.get(2)?,
                    created_at: row.get(3)?,
                    expires_at: row.get(4)?,
                })
            })
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    pub fn capture_offset(&self, session_id: &str) -> Result<Option<CaptureOffset>> {
        self.conn
            .prepare_cached(
                "SELECT session_id, transcript_path, byte_offset, turns, updated_at FROM capture_offsets WHERE session_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([session_id], |row| {
                    Ok(CaptureOffset {
                        session_id: row.get(0)?,
                        transcript_path: row.get(1)?,
                        byte_offset: row.get::<_, i64>(2)?.max(0) as u64,
                        turns: row.get(3)?,
                        updated_at: row.get(4)?,
                    })
                })
                .optional()
            })
            .map_err(self.agent_map())
    }

    /// Inbox items of these projects, oldest first; open ones only unless `all`.
    pub fn inbox(&self, projects: &[Option<String>], all: bool) -> Result<Vec<InboxRow>> {
        let (marks, values) = in_list(projects, 1);
        let open = if all { "" } else { " AND resolved_at IS NULL" };
        let sql = format!(
            "SELECT id, project, kind, suggested_type, body, source, trust, created_at, resolved_at, resolution \
             FROM inbox WHERE project IN ({marks}){open} ORDER BY id"
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(InboxRow {
                    id: row.get(0)?,
                    project: project_of(row.get(1)?),
                    kind: row.get(2)?,
                    suggested_type: row.get(3)?,
                    body: row.get(4)?,
                    source: row.get(5)?,
                    trust: row.get(6)?,
                    created_at: row.get(7)?,
                    resolved_at: row.get(8)?,
                    resolution: row.get(9)?,
                })
            })
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    /// Events of these projects, newest `limit` kept, returned oldest first; only events with
    /// an id of at least `from_id` when given.
    pub fn project_events(
        &self,
        projects: &[Option<String>],
        from_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<crate::EventRow>> {
        self.project_events_by(projects, from_id, None, limit)
    }

    /// [`Reader::project_events`] of one actor when `actor` is given (`""`: the events written
    /// before schema v16, whose actor was not recorded). The `events_actor` index walks one
    /// actor's events newest first, so a rare actor costs no scan of the log.
    pub fn project_events_by(
        &self,
        projects: &[Option<String>],
        from_id: Option<i64>,
        actor: Option<&str>,
        limit: usize,
    ) -> Result<Vec<crate::EventRow>> {
        let (marks, mut values) = in_list(projects, 3);
        values.insert(0, from_id.unwrap_or(0).to_string());
        let actor_clause = match actor {
            Some(actor) => {
                values.insert(1, actor.to_string());
                "actor = ?2 AND"
            }
            None => {
                values.insert(1, String::new());
                "?2 = ?2 AND"
            }
        };
        let sql = format!(
            "SELECT * FROM (SELECT {} FROM events \
             WHERE {actor_clause} project IN ({marks}) AND id >= CAST(?1 AS INTEGER) ORDER BY id DESC LIMIT {}) ORDER BY id",
            crate::records::EVENT_COLUMNS,
            limit.max(1)
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(
                rusqlite::params_from_iter(values),
                crate::records::event_from_row,
            )
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    /// The actors that wrote events of these projects, sorted; never `""` (the events written
    /// before schema v16, which recorded no actor). One index probe per distinct actor (a skip
    /// scan of `events_actor`), then one per actor for a visible event: never a scan of the log.
    pub fn event_actors(&self, projects: &[Option<String>]) -> Result<Vec<String>> {
        let (marks, values) = in_list(projects, 1);
        let sql = format!(
            "WITH RECURSIVE actors(actor) AS ( \
                 SELECT min(actor) FROM events \
                 UNION ALL \
                 SELECT (SELECT min(e.actor) FROM events e WHERE e.actor > actors.actor) FROM actors WHERE actors.actor IS NOT NULL) \
             SELECT actor FROM actors WHERE actor IS NOT NULL AND actor != '' \
             AND EXISTS (SELECT 1 FROM events v WHERE v.actor = actors.actor AND v.project IN ({marks})) ORDER BY actor"
        );
        let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| row.get(0))
            .map_err(self.agent_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.agent_map())
    }

    /// The id of the newest event with op `op` in these projects (e.g. the last `session_start`).
    pub fn last_event_id(&self, projects: &[Option<String>], op: &str) -> Result<Option<i64>> {
        let (marks, mut values) = in_list(projects, 2);
        values.insert(0, op.to_string());
        let sql = format!(
            "SELECT id FROM events WHERE op = ?1 AND project IN ({marks}) ORDER BY id DESC LIMIT 1"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_row(rusqlite::params_from_iter(values), |row| row.get(0))
                    .optional()
            })
            .map_err(self.agent_map())
    }

    /// Active records whose review date has passed by `now`, in these projects.
    pub fn review_due(
        &self,
        projects: &[Option<String>],
        now: &str,
    ) -> Result<Vec<cairn_core::memory::Memory>> {
        let (marks, mut values) = in_list(projects, 2);
        values.insert(0, now.to_string());
        let sql = format!(
            "SELECT id FROM memories INDEXED BY memories_review_due WHERE status = 'active' AND review_at IS NOT NULL AND review_at <= ?1 \
             AND project IN ({marks}) ORDER BY review_at, id"
        );
        let ids = {
            let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| {
                    row.get::<_, i64>(0)
                })
                .map_err(self.agent_map())?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(self.agent_map())?
        };
        self.get_many(&ids)
    }

    /// Active pinned records of these projects, most important first.
    pub fn pinned(&self, projects: &[Option<String>]) -> Result<Vec<cairn_core::memory::Memory>> {
        let (marks, values) = in_list(projects, 1);
        let sql = format!(
            "SELECT id FROM memories INDEXED BY memories_pinned WHERE pinned = 1 AND status = 'active' AND project IN ({marks}) \
             ORDER BY importance DESC, id"
        );
        let ids = {
            let mut statement = self.conn.prepare_cached(&sql).map_err(self.agent_map())?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| {
                    row.get::<_, i64>(0)
                })
                .map_err(self.agent_map())?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(self.agent_map())?
        };
        self.get_many(&ids)
    }
}

#[cfg(test)]
mod tests {
    use crate::{NewEvent, Store, StoreError};

    #[test]
    fn one_actors_events_are_read_newest_first_and_the_actors_present_listed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        store
            .write(|tx| {
                // (project, actor): `''` is an event from before v16, `other` another project's.
                let rows = [
                    ("p", ""),
                    ("p", "cli"),
                    ("p", "hook"),
                    ("p", "cli"),
                    ("q", "other"),
                    ("", "mcp"),
                ];
                for (n, (project, actor)) in rows.iter().enumerate() {
                    let detail = serde_json::json!({"n": n});
                    tx.append_event(
                        &NewEvent {
                            at: "2026-01-01T00:00:00Z",
                            op: "note",
                            memory_id: None,
                            project: Some(project),
                            detail: &detail,
                            actor,
                        },
                        "r",
                    )?;
                }
                // Many events of one actor after a rare one: the rare one is still found.
                for _ in 0..50 {
                    let detail = serde_json::json!({});
                    tx.append_event(
                        &NewEvent {
                            at: "2026-01-02T00:00:00Z",
                            op: "recall",
                            memory_id: None,
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
        let visible = [Some("p".to_string()), None];
        assert_eq!(
            reader.event_actors(&visible).unwrap(),
            vec!["cli", "hook", "mcp"],
            "sorted, without another project's nor the unrecorded one"
        );
        let hook = reader
            .project_events_by(&visible, None, Some("hook"), 10)
            .unwrap();
        assert_eq!(hook.len(), 1);
        assert_eq!(
            (hook[0].actor.as_str(), hook[0].detail["n"].clone()),
            ("hook", 2.into())
        );
        let cli = reader
            .project_events_by(&visible, None, Some("cli"), 5)
            .unwrap();
        assert_eq!(cli.len(), 5);
        assert!(cli.iter().all(|e| e.actor == "cli" && e.op == "recall"));
        assert!(cli.windows(2).all(|w| w[0].id < w[1].id), "oldest first");
        let every = reader.project_events_by(&visible, None, None, 100).unwrap();
        assert_eq!(
            every.len(),
            55,
            "every visible event, the unrecorded one too"
        );
        assert_eq!(every[0].actor, "");
        assert!(
            reader
                .project_events_by(&visible, None, Some("other"), 10)
                .unwrap()
                .is_empty(),
            "another project's actor sees nothing here"
        );
    }
}
