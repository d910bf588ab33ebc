//! The knowledge graph's tables: entities and aliases, relation types, the append-only edge log,
//! the validity intervals derived from it, quarantined edges and generated-record marks. Plain
//! reads and writes; the fold rules live in `cairn-core::graph::fold`, the policy in the engine.

use crate::{Reader, Result, StoreError, WriteTx};
use cairn_core::graph::fold::{EdgeOp, Interval};
use cairn_core::graph::{Node, NodeKind};
use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

/// An edge's identity: source, relation, destination.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct EdgeKey {
    pub src: Node,
    pub relation: String,
    pub dst: Node,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntityRow {
    pub id: i64,
    pub name: String,
    #[serde(rename = "type")]
    pub entity_type: String,
    pub key: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelationTypeRow {
    pub name: String,
    pub weight: f64,
    pub symmetric: bool,
    pub builtin: bool,
    pub description: Option<String>,
    pub declared_at: String,
}

/// One entry of the edge log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogRow {
    pub seq: i64,
    pub op: String,
    pub key: EdgeKey,
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    pub recorded_at: String,
    pub confidence: f64,
    pub origin: String,
    pub actor: String,
}

/// One validity interval of an edge (a row of the derived `edges` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalRow {
    pub id: i64,
    pub key: EdgeKey,
    pub valid_from: String,
    pub valid_to: Option<String>,
    pub confidence: f64,
    pub assert_seq: i64,
    pub invalidate_seq: Option<i64>,
}

/// An edge seen from one endpoint during a walk.
#[derive(Debug, Clone, PartialEq)]
pub struct AdjacentRow {
    pub relation: String,
    pub other: Node,
    pub confidence: f64,
    /// True when the stored edge goes from the asked node to `other`.
    pub outgoing: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuarantineRow {
    pub id: i64,
    pub src: String,
    pub relation: String,
    pub dst: String,
    pub valid_from: String,
    pub valid_to: Option<String>,
    pub confidence: f64,
    pub recorded_at: String,
    pub reason: String,
    pub resolved_seq: Option<i64>,
}

/// A log entry to append.
#[derive(Debug, Clone)]
pub struct NewLogEntry<'a> {
    pub op: EdgeOp,
    pub key: &'a EdgeKey,
    /// valid_from of an assert, valid_to of an invalidate.
    pub at: &'a str,
    pub recorded_at: &'a str,
    pub confidence: f64,
    pub origin: &'a str,
    pub actor: &'a str,
}

fn node(row: &Row<'_>, kind: usize, id: usize) -> rusqlite::Result<Node> {
    let text: String = row.get(kind)?;
    let kind_value = NodeKind::parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            kind,
            rusqlite::types::Type::Text,
            format!("unknown endpoint kind {text:?}").into(),
        )
    })?;
    Ok(Node {
        kind: kind_value,
        id: row.get(id)?,
    })
}

fn key_from(row: &Row<'_>, start: usize) -> rusqlite::Result<EdgeKey> {
    Ok(EdgeKey {
        src: node(row, start, start + 1)?,
        relation: row.get(start + 2)?,
        dst: node(row, start + 3, start + 4)?,
    })
}

fn entity_from(row: &Row<'_>) -> rusqlite::Result<EntityRow> {
    Ok(EntityRow {
        id: row.get(0)?,
        name: row.get(1)?,
        entity_type: row.get(2)?,
        key: row.get(3)?,
        created_at: row.get(4)?,
    })
}

const INTERVAL_COLUMNS: &str = "id, src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence, assert_seq, invalidate_seq";

fn interval_from(row: &Row<'_>) -> rusqlite::Result<IntervalRow> {
    Ok(IntervalRow {
        id: row.get(0)?,
        key: key_from(row, 1)?,
        valid_from: row.get(6)?,
        valid_to: row.get(7)?,
        confidence: row.get(8)?,
        assert_seq: row.get(9)?,
        invalidate_seq: row.get(10)?,
    })
}

const LOG_COLUMNS: &str = "seq, op, src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, recorded_at, confidence, origin, actor";

fn log_from(row: &Row<'_>) -> rusqlite::Result<LogRow> {
    Ok(LogRow {
        seq: row.get(0)?,
        op: row.get(1)?,
        key: key_from(row, 2)?,
        valid_from: row.get(7)?,
        valid_to: row.get(8)?,
        recorded_at: row.get(9)?,
        confidence: row.get(10)?,
        origin: row.get(11)?,
        actor: row.get(12)?,
    })
}

fn quarantine_from(row: &Row<'_>) -> rusqlite::Result<QuarantineRow> {
    Ok(QuarantineRow {
        id: row.get(0)?,
        src: row.get(1)?,
        relation: row.get(2)?,
        dst: row.get(3)?,
        valid_from: row.get(4)?,
        valid_to: row.get(5)?,
        confidence: row.get(6)?,
        recorded_at: row.get(7)?,
        reason: row.get(8)?,
        resolved_seq: row.get(9)?,
    })
}

impl IntervalRow {
    /// The interval as the fold sees it.
    pub fn to_interval(&self) -> Interval<String> {
        Interval {
            from: self.valid_from.clone(),
            to: self.valid_to.clone(),
            confidence: self.confidence,
            assert_seq: self.assert_seq,
            invalidate_seq: self.invalidate_seq,
        }
    }
}

impl WriteTx<'_> {
    fn graph_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    pub fn insert_entity(&self, name: &str, entity_type: &str, key: &str, at: &str) -> Result<i64> {
        self.tx
            .prepare_cached(
                "INSERT INTO entities (name, type, key, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![name, entity_type, key, at]))
            .map_err(self.graph_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    pub fn set_entity_type(&self, id: i64, entity_type: &str) -> Result<()> {
        self.tx
            .execute(
                "UPDATE entities SET type = ?2 WHERE id = ?1",
                params![id, entity_type],
            )
            .map_err(self.graph_map())?;
        Ok(())
    }

    /// Adds an alias; false when the alias already names an entity.
    pub fn add_alias(&self, entity_id: i64, alias: &str, alias_key: &str) -> Result<bool> {
        let added = self
            .tx
            .execute(
                "INSERT INTO entity_aliases (alias_key, alias, entity_id) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                params![alias_key, alias, entity_id],
            )
            .map_err(self.graph_map())?;
        Ok(added > 0)
    }

    pub fn declare_relation_type(
        &self,
        name: &str,
        weight: f64,
        symmetric: bool,
        description: Option<&str>,
        at: &str,
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO relation_types (name, weight, symmetric, builtin, description, declared_at) VALUES (?1, ?2, ?3, 0, ?4, ?5) \
                 ON CONFLICT (name) DO UPDATE SET weight = excluded.weight, symmetric = excluded.symmetric, \
                 description = COALESCE(excluded.description, relation_types.description) WHERE relation_types.builtin = 0",
                params![name, weight, symmetric, description, at],
            )
            .map_err(self.graph_map())?;
        Ok(())
    }

    /// Appends one entry to the edge log and returns its sequence number.
    pub fn append_edge_log(&self, entry: &NewLogEntry<'_>) -> Result<i64> {
        let (valid_from, valid_to) = match entry.op {
            EdgeOp::Assert => (Some(entry.at), None),
            EdgeOp::Invalidate => (None, Some(entry.at)),
        };
        self.tx
            .prepare_cached(
                "INSERT INTO edge_log (op, src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, recorded_at, confidence, origin, actor) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    entry.op.as_str(),
                    entry.key.src.kind.as_str(),
                    entry.key.src.id,
                    entry.key.relation,
                    entry.key.dst.kind.as_str(),
                    entry.key.dst.id,
                    valid_from,
                    valid_to,
                    entry.recorded_at,
                    entry.confidence,
                    entry.origin,
                    entry.actor,
                ])
            })
            .map_err(self.graph_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Opens an interval (derived row) for an assert.
    pub fn open_interval(
        &self,
        key: &EdgeKey,
        from: &str,
        confidence: f64,
        assert_seq: i64,
    ) -> Result<i64> {
        self.tx
            .prepare_cached(
                "INSERT INTO edges (src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence, assert_seq, invalidate_seq) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, NULL)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    key.src.kind.as_str(),
                    key.src.id,
                    key.relation,
                    key.dst.kind.as_str(),
                    key.dst.id,
                    from,
                    confidence,
                    assert_seq
                ])
            })
            .map_err(self.graph_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Closes an interval (derived row) for an invalidate.
    pub fn close_interval(&self, interval_id: i64, to: &str, invalidate_seq: i64) -> Result<()> {
        self.tx
            .prepare_cached("UPDATE edges SET valid_to = ?2, invalidate_seq = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![interval_id, to, invalidate_seq]))
            .map_err(self.graph_map())?;
        Ok(())
    }

    /// Replaces every derived interval (`doctor --repair` after a fold of the log).
    pub fn replace_intervals(&self, intervals: &[(EdgeKey, Interval<String>)]) -> Result<()> {
        self.tx
            .execute("DELETE FROM edges", [])
            .map_err(self.graph_map())?;
        let mut insert = self
            .tx
            .prepare_cached(
                "INSERT INTO edges (src_kind, src_id, relation, dst_kind, dst_id, valid_from, valid_to, confidence, assert_seq, invalidate_seq) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(self.graph_map())?;
        for (key, interval) in intervals {
            insert
                .execute(params![
                    key.src.kind.as_str(),
                    key.src.id,
                    key.relation,
                    key.dst.kind.as_str(),
                    key.dst.id,
                    interval.from,
                    interval.to,
                    interval.confidence,
                    interval.assert_seq,
                    interval.invalidate_seq
                ])
                .map_err(self.graph_map())?;
        }
        Ok(())
    }

    pub fn quarantine_edge(&self, row: &QuarantineRow) -> Result<i64> {
        self.tx
            .execute(
                "INSERT INTO edge_quarantine (src, relation, dst, valid_from, valid_to, confidence, recorded_at, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![row.src, row.relation, row.dst, row.valid_from, row.valid_to, row.confidence, row.recorded_at, row.reason],
            )
            .map_err(self.graph_map())?;
        Ok(self.tx.last_insert_rowid())
    }

    pub fn resolve_quarantined(&self, id: i64, seq: i64) -> Result<()> {
        self.tx
            .execute(
                "UPDATE edge_quarantine SET resolved_seq = ?2 WHERE id = ?1",
                params![id, seq],
            )
            .map_err(self.graph_map())?;
        Ok(())
    }

    pub fn mark_generated(&self, memory_id: i64, generator: &str, at: &str) -> Result<()> {
        self.tx
            .execute(
                "INSERT INTO generated_records (memory_id, generator, marked_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                params![memory_id, generator, at],
            )
            .map_err(self.graph_map())?;
        Ok(())
    }
}

impl Reader<'_> {
    fn graph_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    fn collect<T>(
        &self,
        sql: &str,
        values: impl rusqlite::Params,
        map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut statement = self.conn.prepare_cached(sql).map_err(self.graph_map())?;
        let rows = statement.query_map(values, map).map_err(self.graph_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.graph_map())
    }

    /// The entity with this normalized key, or whose alias has it.
    pub fn entity_by_key(&self, key: &str) -> Result<Option<EntityRow>> {
        let direct = self
            .conn
            .prepare_cached("SELECT id, name, type, key, created_at FROM entities WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], entity_from).optional())
            .map_err(self.graph_map())?;
        if direct.is_some() {
            return Ok(direct);
        }
        self.conn
            .prepare_cached(
                "SELECT e.id, e.name, e.type, e.key, e.created_at FROM entity_aliases a JOIN entities e ON e.id = a.entity_id WHERE a.alias_key = ?1",
            )
            .and_then(|mut s| s.query_row([key], entity_from).optional())
            .map_err(self.graph_map())
    }

    pub fn entity(&self, id: i64) -> Result<Option<EntityRow>> {
        self.conn
            .prepare_cached("SELECT id, name, type, key, created_at FROM entities WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], entity_from).optional())
            .map_err(self.graph_map())
    }

    pub fn aliases(&self, entity_id: i64) -> Result<Vec<String>> {
        self.collect(
            "SELECT alias FROM entity_aliases WHERE entity_id = ?1 ORDER BY alias_key",
            [entity_id],
            |row| row.get(0),
        )
    }

    /// Entities in key order, optionally of one type; `limit` 0 means all.
    pub fn entities(&self, entity_type: Option<&str>, limit: usize) -> Result<Vec<EntityRow>> {
        let limit = if limit == 0 { -1 } else { limit as i64 };
        self.collect(
            "SELECT id, name, type, key, created_at FROM entities WHERE (?1 IS NULL OR type = ?1) ORDER BY key LIMIT ?2",
            params![entity_type, limit],
            entity_from,
        )
    }

    /// Keys and ids of every entity of one type (the brief matches file paths against them).
    pub fn entity_keys_of_type(&self, entity_type: &str) -> Result<Vec<(i64, String)>> {
        self.collect(
            "SELECT id, key FROM entities WHERE type = ?1 ORDER BY key",
            [entity_type],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    /// The `path` and `code` entities that open `mentions` edges from `project`'s active records
    /// point at: (id, type, name, key), by id. What the code map links to the files it knows.
    pub fn code_entities_mentioned(
        &self,
        project: &str,
    ) -> Result<Vec<(i64, String, String, String)>> {
        self.collect(
            "SELECT DISTINCT n.id, n.type, n.name, n.key FROM edges e \
             JOIN memories m ON m.id = e.src_id \
             JOIN entities n ON n.id = e.dst_id \
             WHERE e.src_kind = 'record' AND e.relation = 'mentions' AND e.dst_kind = 'entity' \
               AND e.invalidate_seq IS NULL AND m.project = ?1 AND m.status = 'active' \
               AND n.type IN ('path', 'code') \
             ORDER BY n.id",
            [project],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
    }

    /// The edge log's newest entry (`None` before the first).
    pub fn last_edge_seq(&self) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT max(seq) FROM edge_log")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(self.graph_map())
    }

    /// How many open edges of `relation` point at the entity.
    pub fn open_in_degree(&self, node: Node, relation: &str) -> Result<i64> {
        self.conn
            .prepare_cached(
                "SELECT count(*) FROM edges WHERE dst_kind = ?1 AND dst_id = ?2 AND relation = ?3 AND invalidate_seq IS NULL",
            )
            .and_then(|mut s| s.query_row(params![node.kind.as_str(), node.id, relation], |row| row.get(0)))
            .map_err(self.graph_map())
    }

    pub fn relation_type(&self, name: &str) -> Result<Option<RelationTypeRow>> {
        Ok(self.relation_types()?.into_iter().find(|r| r.name == name))
    }

    pub fn relation_types(&self) -> Result<Vec<RelationTypeRow>> {
        self.collect(
            "SELECT name, weight, symmetric, builtin, description, declared_at FROM relation_types ORDER BY builtin DESC, name",
            [],
            |row| {
                Ok(RelationTypeRow {
                    name: row.get(0)?,
                    weight: row.get(1)?,
                    symmetric: row.get(2)?,
                    builtin: row.get(3)?,
                    description: row.get(4)?,
                    declared_at: row.get(5)?,
                })
            },
        )
    }

    /// The `recorded_at` of the newest log entry.
    pub fn last_recorded_at(&self) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT recorded_at FROM edge_log ORDER BY seq DESC LIMIT 1")
            .and_then(|mut s| s.query_row([], |row| row.get(0)).optional())
            .map_err(self.graph_map())
    }

    /// Every interval of one edge, oldest first.
    pub fn intervals_of_key(&self, key: &EdgeKey) -> Result<Vec<IntervalRow>> {
        self.collect(
            &format!(
                "SELECT {INTERVAL_COLUMNS} FROM edges WHERE src_kind = ?1 AND src_id = ?2 AND relation = ?3 AND dst_kind = ?4 AND dst_id = ?5 ORDER BY assert_seq"
            ),
            params![key.src.kind.as_str(), key.src.id, key.relation, key.dst.kind.as_str(), key.dst.id],
            interval_from,
        )
    }

    /// Open (not invalidated) edges of `relation` leaving `src`.
    pub fn open_targets(&self, src: Node, relation: &str) -> Result<Vec<(Node, i64)>> {
        self.collect(
            "SELECT dst_kind, dst_id, id FROM edges WHERE src_kind = ?1 AND src_id = ?2 AND relation = ?3 AND invalidate_seq IS NULL ORDER BY dst_kind, dst_id",
            params![src.kind.as_str(), src.id, relation],
            |row| Ok((node(row, 0, 1)?, row.get(2)?)),
        )
    }

    /// [`Reader::open_targets`] of many records at once, in one statement (one read
    /// transaction): for each of `records` with any, its open `relation` edges' targets as
    /// `open_targets` orders them.
    pub fn open_targets_of_records(
        &self,
        records: &[i64],
        relation: &str,
    ) -> Result<std::collections::HashMap<i64, Vec<(Node, i64)>>> {
        let mut found: std::collections::HashMap<i64, Vec<(Node, i64)>> =
            std::collections::HashMap::new();
        for chunk in records.chunks(500) {
            let marks = (3..chunk.len() + 3)
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut values: Vec<rusqlite::types::Value> = vec![
                NodeKind::Record.as_str().to_string().into(),
                relation.to_string().into(),
            ];
            values.extend(chunk.iter().map(|id| rusqlite::types::Value::Integer(*id)));
            let rows = self.collect(
                &format!(
                    "SELECT src_id, dst_kind, dst_id, id FROM edges WHERE src_kind = ?1 \
                     AND src_id IN ({marks}) AND relation = ?2 AND invalidate_seq IS NULL \
                     ORDER BY src_id, dst_kind, dst_id"
                ),
                rusqlite::params_from_iter(values),
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        node(row, 1, 2)?,
                        row.get::<_, i64>(3)?,
                    ))
                },
            )?;
            for (source, target, edge) in rows {
                found.entry(source).or_default().push((target, edge));
            }
        }
        Ok(found)
    }

    /// Every interval touching `node` (either end), in key order then oldest first.
    pub fn intervals_touching(&self, node: Node) -> Result<Vec<IntervalRow>> {
        let mut rows = self.collect(
            &format!("SELECT {INTERVAL_COLUMNS} FROM edges WHERE src_kind = ?1 AND src_id = ?2"),
            params![node.kind.as_str(), node.id],
            interval_from,
        )?;
        rows.extend(self.collect(
            &format!(
                "SELECT {INTERVAL_COLUMNS} FROM edges WHERE dst_kind = ?1 AND dst_id = ?2 AND NOT (src_kind = ?1 AND src_id = ?2)"
            ),
            params![node.kind.as_str(), node.id],
            interval_from,
        )?);
        rows.sort_by(|a, b| a.key.cmp(&b.key).then(a.assert_seq.cmp(&b.assert_seq)));
        Ok(rows)
    }

    /// Edges valid at `at` with `node` at one end: outgoing ones when `outgoing`, else incoming;
    /// only of `relation` when given; at most `limit` rows (in index order).
    pub fn adjacent(
        &self,
        node: Node,
        at: &str,
        outgoing: bool,
        relation: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AdjacentRow>> {
        let (this, other) = if outgoing {
            ("src", "dst")
        } else {
            ("dst", "src")
        };
        // Separate statements with and without the relation, so both seek on the index.
        let relation_test = if relation.is_some() {
            "AND relation = ?4"
        } else {
            "AND ?4 IS NULL"
        };
        let sql = format!(
            "SELECT relation, {other}_kind, {other}_id, confidence FROM edges \
             WHERE {this}_kind = ?1 AND {this}_id = ?2 {relation_test} \
             AND valid_from <= ?3 AND (valid_to IS NULL OR valid_to > ?3) LIMIT ?5"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.collect(
            &sql,
            params![node.kind.as_str(), node.id, at, relation, limit],
            |row| {
                Ok(AdjacentRow {
                    relation: row.get(0)?,
                    other: node_at(row, 1, 2)?,
                    confidence: row.get(3)?,
                    outgoing,
                })
            },
        )
    }

    /// Every interval valid at `at`: the graph as it was then.
    pub fn intervals_valid_at(&self, at: &str) -> Result<Vec<IntervalRow>> {
        self.collect(
            &format!(
                "SELECT {INTERVAL_COLUMNS} FROM edges WHERE valid_from <= ?1 AND (valid_to IS NULL OR valid_to > ?1)"
            ),
            [at],
            interval_from,
        )
    }

    /// Calls `visit(src, relation, dst, interval id)` for every interval valid at `at`, in
    /// edge-key order of the stored text (so the intervals of one edge come together). Reads
    /// the covering index only and allocates nothing per row.
    pub fn for_each_valid_edge(
        &self,
        at: &str,
        mut visit: impl FnMut(Node, &str, Node, i64),
    ) -> Result<()> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT src_kind, src_id, relation, dst_kind, dst_id, id FROM edges \
                 WHERE valid_from <= ?1 AND (valid_to IS NULL OR valid_to > ?1) \
                 ORDER BY src_kind, src_id, relation, dst_kind, dst_id",
            )
            .map_err(self.graph_map())?;
        let mut rows = statement.query([at]).map_err(self.graph_map())?;
        let map = self.graph_map();
        let kind = |row: &Row<'_>, index: usize| -> rusqlite::Result<NodeKind> {
            let text = row
                .get_ref(index)?
                .as_str()
                .map_err(rusqlite::Error::from)?;
            Ok(if text == "entity" {
                NodeKind::Entity
            } else {
                NodeKind::Record
            })
        };
        while let Some(row) = rows.next().map_err(&map)? {
            let src = Node {
                kind: kind(row, 0).map_err(&map)?,
                id: row.get(1).map_err(&map)?,
            };
            let dst = Node {
                kind: kind(row, 3).map_err(&map)?,
                id: row.get(4).map_err(&map)?,
            };
            let relation = row
                .get_ref(2)
                .and_then(|v| v.as_str().map_err(Into::into))
                .map_err(&map)?;
            visit(src, relation, dst, row.get(5).map_err(&map)?);
        }
        Ok(())
    }

    /// Whether a record is visible from `project` (its own or personal). A record that no
    /// longer exists counts as visible: it shows as deleted.
    pub fn record_visible(&self, id: i64, project: &str) -> Result<bool> {
        let hidden: Option<bool> = self
            .conn
            .prepare_cached("SELECT project != ?2 AND project != '' FROM memories WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row(params![id, project], |row| row.get(0))
                    .optional()
            })
            .map_err(self.graph_map())?;
        Ok(hidden != Some(true))
    }

    /// Which of `ids` are records of another project than `project` (personal ones are
    /// visible everywhere). One statement per chunk of ids instead of one per id.
    pub fn hidden_among(&self, ids: &[i64], project: &str) -> Result<Vec<i64>> {
        let mut hidden = Vec::new();
        for chunk in ids.chunks(256) {
            // Statement sizes are rounded up (the last id repeated) so a few shapes are cached.
            let size = [8, 32, 128, 256]
                .into_iter()
                .find(|n| *n >= chunk.len())
                .unwrap_or(256);
            let marks: Vec<String> = (0..size).map(|i| format!("?{}", i + 2)).collect();
            let sql = format!(
                "SELECT id FROM memories WHERE id IN ({}) AND project != ?1 AND project != ''",
                marks.join(", ")
            );
            let mut values: Vec<rusqlite::types::Value> = vec![project.to_string().into()];
            values.extend((0..size).map(|i| chunk[i.min(chunk.len() - 1)].into()));
            let mut statement = self.conn.prepare_cached(&sql).map_err(self.graph_map())?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| {
                    row.get::<_, i64>(0)
                })
                .map_err(self.graph_map())?;
            for id in rows {
                hidden.push(id.map_err(self.graph_map())?);
            }
        }
        Ok(hidden)
    }

    pub fn interval(&self, id: i64) -> Result<Option<IntervalRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {INTERVAL_COLUMNS} FROM edges WHERE id = ?1"
            ))
            .and_then(|mut s| s.query_row([id], interval_from).optional())
            .map_err(self.graph_map())
    }

    /// Entity id → how many open `mentions` edges point at it.
    pub fn mention_counts(&self) -> Result<std::collections::HashMap<i64, i64>> {
        Ok(self
            .collect(
                "SELECT dst_id, count(*) FROM edges WHERE dst_kind = 'entity' AND relation = 'mentions' AND invalidate_seq IS NULL GROUP BY dst_id",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
            .into_iter()
            .collect())
    }

    /// Log entries touching `node`, in fold order. Every appended entry opened or closed an
    /// interval, so the node's intervals name all of them.
    pub fn log_touching(&self, node: Node) -> Result<Vec<LogRow>> {
        let mut seqs: Vec<i64> = Vec::new();
        for interval in self.intervals_touching(node)? {
            seqs.push(interval.assert_seq);
            seqs.extend(interval.invalidate_seq);
        }
        seqs.sort_unstable();
        seqs.dedup();
        let mut statement = self
            .conn
            .prepare_cached(&format!(
                "SELECT {LOG_COLUMNS} FROM edge_log WHERE seq = ?1"
            ))
            .map_err(self.graph_map())?;
        let mut rows = Vec::with_capacity(seqs.len());
        for seq in seqs {
            if let Some(row) = statement
                .query_row([seq], log_from)
                .optional()
                .map_err(self.graph_map())?
            {
                rows.push(row);
            }
        }
        rows.sort_by(|a, b| a.recorded_at.cmp(&b.recorded_at).then(a.seq.cmp(&b.seq)));
        Ok(rows)
    }

    /// The whole log in fold order (`recorded_at`, then seq).
    pub fn edge_log(&self) -> Result<Vec<LogRow>> {
        self.collect(
            &format!("SELECT {LOG_COLUMNS} FROM edge_log ORDER BY recorded_at, seq"),
            [],
            log_from,
        )
    }

    /// Every derived interval, in key order then oldest first.
    pub fn all_intervals(&self) -> Result<Vec<IntervalRow>> {
        self.collect(
            &format!(
                "SELECT {INTERVAL_COLUMNS} FROM edges ORDER BY src_kind, src_id, relation, dst_kind, dst_id, assert_seq"
            ),
            [],
            interval_from,
        )
    }

    /// The earliest `valid_from` of any edge, if there is one.
    pub fn first_valid_from(&self) -> Result<Option<String>> {
        self.conn
            .query_row("SELECT min(valid_from) FROM edges", [], |row| row.get(0))
            .map_err(self.graph_map())
    }

    pub fn quarantined(&self, include_resolved: bool) -> Result<Vec<QuarantineRow>> {
        self.collect(
            "SELECT id, src, relation, dst, valid_from, valid_to, confidence, recorded_at, reason, resolved_seq FROM edge_quarantine \
             WHERE ?1 OR resolved_seq IS NULL ORDER BY id",
            [include_resolved],
            quarantine_from,
        )
    }

    /// Ids of records of other projects than `visible` (personal `''` is always visible).
    pub fn hidden_record_ids(&self, visible_project: &str) -> Result<Vec<i64>> {
        self.collect(
            "SELECT id FROM memories WHERE project != ?1 AND project != '' ORDER BY id",
            [visible_project],
            |row| row.get(0),
        )
    }

    /// Clustering input: active records of `project` and personal ones, not generated, with
    /// their content hashes, in id order.
    pub fn cluster_candidates(&self, project: &str) -> Result<Vec<(i64, String)>> {
        self.collect(
            "SELECT id, CASE WHEN typeof(content_hash) = 'blob' THEN lower(hex(content_hash)) ELSE content_hash END \
             FROM memories m WHERE status = 'active' AND (project = ?1 OR project = '') \
             AND NOT EXISTS (SELECT 1 FROM generated_records g WHERE g.memory_id = m.id) ORDER BY id",
            [project],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    }

    /// Every open interval with a record at at least one end, valid at `at`: (src, relation, dst).
    pub fn record_edges_valid_at(&self, at: &str) -> Result<Vec<(Node, String, Node)>> {
        self.collect(
            "SELECT src_kind, src_id, relation, dst_kind, dst_id FROM edges WHERE (src_kind = 'record' OR dst_kind = 'record') \
             AND valid_from <= ?1 AND (valid_to IS NULL OR valid_to > ?1)",
            [at],
            |row| Ok((node(row, 0, 1)?, row.get(2)?, node(row, 3, 4)?)),
        )
    }

    /// Every generated-record mark: (memory id, generator, marked at), by id.
    pub fn generated_records(&self) -> Result<Vec<(i64, String, String)>> {
        self.collect(
            "SELECT memory_id, generator, marked_at FROM generated_records ORDER BY memory_id",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
    }

    pub fn is_generated(&self, memory_id: i64) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT count(*) FROM generated_records WHERE memory_id = ?1")
            .and_then(|mut s| s.query_row([memory_id], |row| row.get::<_, i64>(0)))
            .map(|n| n > 0)
            .map_err(self.graph_map())
    }

    /// A record's project, status, type and label text, for showing it as a graph node.
    pub fn record_node(&self, id: i64) -> Result<Option<(String, String, String, String)>> {
        // The body read as every reader reads it: a merged-away one is decoded against its
        // survivor's (schema v10).
        self.conn
            .prepare_cached(
                "SELECT project, status, type, title, body, \
                 (SELECT base.body FROM memories base WHERE base.id = memories.merged_into) \
                 FROM memories WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |row| {
                    let title: Option<String> = row.get(3)?;
                    let label = match title {
                        Some(title) => title,
                        None => crate::records::body_from(row, 4, 5)?
                            .chars()
                            .take(200)
                            .collect(),
                    };
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, label))
                })
                .optional()
            })
            .map_err(self.graph_map())
    }

    /// Counts for `doctor` and `stats`: (entities, log entries, intervals, open quarantined).
    pub fn graph_counts(&self) -> Result<(i64, i64, i64, i64)> {
        let count = |sql: &str| -> Result<i64> {
            self.conn
                .query_row(sql, [], |row| row.get(0))
                .map_err(self.graph_map())
        };
        Ok((
            count("SELECT count(*) FROM entities")?,
            count("SELECT count(*) FROM edge_log")?,
            count("SELECT count(*) FROM edges")?,
            count("SELECT count(*) FROM edge_quarantine WHERE resolved_seq IS NULL")?,
        ))
    }
}

/// Like `node`, without allocating the kind's text.
fn node_at(row: &Row<'_>, kind: usize, id: usize) -> rusqlite::Result<Node> {
    let kind_value = match row.get_ref(kind)?.as_str().map_err(rusqlite::Error::from)? {
        "record" => NodeKind::Record,
        "entity" => NodeKind::Entity,
        other => {
            return Err(rusqlite::Error::FromSqlConversionFailure(
                kind,
                rusqlite::types::Type::Text,
                format!("unknown endpoint kind {other:?}").into(),
            ));
        }
    };
    Ok(Node {
        kind: kind_value,
        id: row.get(id)?,
    })
}
