//! Cheap reads for the Markdown wiki export: every record's identity and change markers without
//! bodies (to decide which pages to render), the event log by month (to render only the
//! months that grew), and the graph's record-to-record edges (the pages' typed links).

use crate::{Reader, Result, StoreError};
use cairn_core::record::{MemoryType, Sensitivity, Status, TrustZone};

/// What the wiki needs to place a record's page and to tell whether it changed: no body.
#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    pub id: i64,
    pub project: Option<String>,
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub scope: String,
    pub trust_zone: TrustZone,
    pub sensitivity: Sensitivity,
    pub status: Status,
    pub supersedes: Option<i64>,
    pub superseded_by: Option<i64>,
    pub updated_at: String,
    pub use_count: u32,
    pub last_accessed_at: Option<String>,
    /// Earlier versions kept in history.
    pub history_versions: i64,
}

/// One month of the event log: `YYYY-MM`, how many events, the newest event id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventMonth {
    pub month: String,
    pub count: i64,
    pub max_id: i64,
}

/// One event as the wiki log shows it: id, time, operation, record id, receipt.
pub type LogEvent = (i64, String, String, Option<i64>, String);

fn parse<T: std::str::FromStr>(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text: String = row.get(index)?;
    text.parse::<T>().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn project_clause(projects: Option<&[Option<String>]>, values: &mut Vec<String>) -> String {
    match projects {
        None => String::new(),
        Some(projects) => {
            let marks: Vec<String> = projects
                .iter()
                .map(|p| {
                    values.push(p.clone().unwrap_or_default());
                    format!("?{}", values.len())
                })
                .collect();
            format!(" AND project IN ({})", marks.join(", "))
        }
    }
}

impl Reader<'_> {
    /// Every record of `projects` (all projects when `None`) as a skeleton, in id order.
    pub fn skeletons(&self, projects: Option<&[Option<String>]>) -> Result<Vec<Skeleton>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut values = Vec::new();
        let clause = project_clause(projects, &mut values);
        let sql = format!(
            "SELECT id, project, type, title, scope, trust_zone, sensitivity, status, supersedes, \
             superseded_by, updated_at, use_count, last_accessed_at, COALESCE(h.versions, 0) \
             FROM memories LEFT JOIN (SELECT memory_id, count(*) AS versions FROM history GROUP BY memory_id) h \
             ON h.memory_id = memories.id WHERE 1 = 1{clause} ORDER BY id"
        );
        let mut statement = self.conn.prepare(&sql).map_err(map)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                let project: String = row.get(1)?;
                Ok(Skeleton {
                    id: row.get(0)?,
                    project: (!project.is_empty()).then_some(project),
                    memory_type: parse(row, 2)?,
                    title: row.get(3)?,
                    scope: row.get(4)?,
                    trust_zone: parse(row, 5)?,
                    sensitivity: parse(row, 6)?,
                    status: parse(row, 7)?,
                    supersedes: row.get(8)?,
                    superseded_by: row.get(9)?,
                    updated_at: row.get(10)?,
                    use_count: row.get(11)?,
                    last_accessed_at: row.get(12)?,
                    history_versions: row.get(13)?,
                })
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map)
    }

    /// The months of the event log of `projects` (all when `None`), oldest first.
    pub fn event_months(&self, projects: Option<&[Option<String>]>) -> Result<Vec<EventMonth>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut values = Vec::new();
        let clause = project_clause(projects, &mut values);
        let sql = format!(
            "SELECT substr(at, 1, 7), count(*), max(id) FROM events WHERE 1 = 1{clause} GROUP BY 1 ORDER BY 1"
        );
        let mut statement = self.conn.prepare(&sql).map_err(map)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(EventMonth {
                    month: row.get(0)?,
                    count: row.get(1)?,
                    max_id: row.get(2)?,
                })
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map)
    }

    /// Events of one month (`YYYY-MM`) of `projects`, oldest first: (id, at, op, memory id,
    /// receipt).
    pub fn events_of_month(
        &self,
        projects: Option<&[Option<String>]>,
        month: &str,
    ) -> Result<Vec<LogEvent>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut values = vec![month.to_string()];
        let clause = project_clause(projects, &mut values);
        let sql = format!(
            "SELECT id, at, op, memory_id, CASE WHEN typeof(receipt) = 'blob' THEN lower(hex(receipt)) ELSE receipt END \
             FROM events WHERE substr(at, 1, 7) = ?1{clause} ORDER BY id"
        );
        let mut statement = self.conn.prepare(&sql).map_err(map)?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map)
    }
}

impl Reader<'_> {
    /// The knowledge graph's edges between two records valid at `at`, as (source id, relation,
    /// destination id) in key order: the typed links of the wiki's pages. Reads the covering
    /// index of edges by source; edges to entities are skipped in SQL, never materialized.
    pub fn record_links_valid_at(&self, at: &str) -> Result<Vec<(i64, String, i64)>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT src_id, relation, dst_id FROM edges \
                 WHERE src_kind = 'record' AND dst_kind = 'record' \
                 AND valid_from <= ?1 AND (valid_to IS NULL OR valid_to > ?1) \
                 ORDER BY src_id, relation, dst_id",
            )
            .map_err(map)?;
        let rows = statement
            .query_map([at], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(map)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map)?;
        Ok(rows)
    }
}
