//! Whole rows of the tables the JSONL exchange carries besides records and the graph: tasks,
//! measure readings, the identity, awareness items, the inbox, conflicts, capture offsets,
//! surfacings and dream proposal sets. Rows go out as JSON objects keyed by column name and come back the
//! same way; only the tables of [`ExchangeTable`] are reachable, and a row's keys are checked
//! against the table's real columns before any SQL is built, so input never names SQL.
//! The rules (which ids to remap, what counts as already there) live in the engine.

use crate::{Reader, Result, StoreError, WriteTx};
use rusqlite::types::{Value as SqlValue, ValueRef};
use serde_json::{Map, Value};

/// A table the exchange reads and writes whole rows of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeTable {
    Tasks,
    Measures,
    Identity,
    Awareness,
    Inbox,
    Conflicts,
    CaptureOffsets,
    Surfacings,
    DreamRuns,
    DreamProposals,
}

impl ExchangeTable {
    pub fn name(self) -> &'static str {
        match self {
            ExchangeTable::Tasks => "tasks",
            ExchangeTable::Measures => "measures",
            ExchangeTable::Identity => "identity",
            ExchangeTable::Awareness => "awareness",
            ExchangeTable::Inbox => "inbox",
            ExchangeTable::Conflicts => "conflicts",
            ExchangeTable::CaptureOffsets => "capture_offsets",
            ExchangeTable::Surfacings => "surfacings",
            ExchangeTable::DreamRuns => "dream_runs",
            ExchangeTable::DreamProposals => "dream_proposals",
        }
    }

    /// The order rows are exported in: stable, so two exports of equal brains are equal.
    fn order(self) -> &'static str {
        match self {
            ExchangeTable::CaptureOffsets => "session_id",
            ExchangeTable::Surfacings => "memory_id",
            ExchangeTable::DreamRuns => "created_at, id",
            ExchangeTable::DreamProposals => "run_id, seq",
            _ => "id",
        }
    }
}

fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => Value::from(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        // None of the exchanged tables holds a blob; hex keeps one lossless if it ever does.
        ValueRef::Blob(b) => Value::String(hex::encode(b)),
    }
}

fn to_sql(value: &Value) -> SqlValue {
    match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        // A nested value is stored as its JSON text (the dream tables keep JSON in TEXT).
        other => SqlValue::Text(other.to_string()),
    }
}

impl Reader<'_> {
    fn columns(&self, table: ExchangeTable) -> Result<Vec<String>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare(&format!("PRAGMA table_info({})", table.name()))
            .map_err(map)?;
        let names = statement
            .query_map([], |row| row.get::<_, String>(1))
            .map_err(map)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map)?;
        Ok(names)
    }

    /// The columns a row of `table` must give: `NOT NULL`, no default, not the integer key.
    fn required_columns(&self, table: ExchangeTable) -> Result<Vec<String>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare(&format!(
                "SELECT name FROM pragma_table_info('{}') WHERE \"notnull\" = 1 AND dflt_value IS NULL AND pk = 0",
                table.name()
            ))
            .map_err(map)?;
        let names = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(map)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map)?;
        Ok(names)
    }

    /// Every row of `table`, each as `{column: value}`, in the table's stable order; with
    /// `filter` (a column and a value) only the rows where that column holds the value.
    pub fn exchange_rows(
        &self,
        table: ExchangeTable,
        filter: Option<(&str, &Value)>,
    ) -> Result<Vec<Map<String, Value>>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let columns = self.columns(table)?;
        let filter = match filter {
            Some((column, value)) if columns.iter().any(|c| c == column) => {
                Some((column, to_sql(value)))
            }
            Some((column, _)) => {
                return Err(StoreError::UnknownColumn {
                    table: table.name(),
                    column: column.to_string(),
                    known: columns.join(", "),
                });
            }
            None => None,
        };
        let sql = format!(
            "SELECT {} FROM {}{} ORDER BY {}",
            columns.join(", "),
            table.name(),
            filter
                .as_ref()
                .map(|(column, _)| format!(" WHERE {column} = ?1"))
                .unwrap_or_default(),
            table.order()
        );
        let mut statement = self.conn.prepare(&sql).map_err(map)?;
        let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<Map<String, Value>> {
            let mut object = Map::new();
            for (i, column) in columns.iter().enumerate() {
                object.insert(column.clone(), to_json(row.get_ref(i)?));
            }
            Ok(object)
        };
        let rows = match &filter {
            Some((_, value)) => statement.query_map([value], read),
            None => statement.query_map([], read),
        }
        .map_err(map)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map)?;
        Ok(rows)
    }

    /// Whether `table` holds a row equal to `row` on every column `row` names.
    pub fn exchange_row_exists(
        &self,
        table: ExchangeTable,
        row: &Map<String, Value>,
    ) -> Result<bool> {
        let (columns, values) = self.checked(table, row)?;
        if columns.is_empty() {
            return Ok(false);
        }
        let condition: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} IS ?{}", i + 1))
            .collect();
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE {})",
            table.name(),
            condition.join(" AND ")
        );
        self.conn
            .query_row(&sql, rusqlite::params_from_iter(values.iter()), |r| {
                r.get::<_, bool>(0)
            })
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }

    /// The row's columns (checked against the table) and their SQL values, in one order.
    fn checked(
        &self,
        table: ExchangeTable,
        row: &Map<String, Value>,
    ) -> Result<(Vec<String>, Vec<SqlValue>)> {
        let known = self.columns(table)?;
        let mut columns = Vec::with_capacity(row.len());
        let mut values = Vec::with_capacity(row.len());
        for (column, value) in row {
            if !known.iter().any(|k| k == column) {
                return Err(StoreError::UnknownColumn {
                    table: table.name(),
                    column: column.clone(),
                    known: known.join(", "),
                });
            }
            columns.push(column.clone());
            values.push(to_sql(value));
        }
        Ok((columns, values))
    }
}

impl WriteTx<'_> {
    /// Inserts `row` into `table`; `Ok(false)` when a unique key (or the primary key) already
    /// holds a row, which is left as it was.
    pub fn insert_exchange_row(
        &self,
        table: ExchangeTable,
        row: &Map<String, Value>,
    ) -> Result<bool> {
        let (columns, values) = self.reader().checked(table, row)?;
        // Said before the insert: `OR IGNORE` would also skip a row that breaks `NOT NULL`,
        // and the import would call a line it dropped "already there".
        for column in self.reader().required_columns(table)? {
            if row.get(&column).is_none_or(Value::is_null) {
                return Err(StoreError::MissingColumn {
                    table: table.name(),
                    column,
                });
            }
        }
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT OR IGNORE INTO {} ({}) VALUES ({})",
            table.name(),
            columns.join(", "),
            marks.join(", ")
        );
        let changed = self
            .tx
            .execute(&sql, rusqlite::params_from_iter(values.iter()))
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(changed > 0)
    }

    /// Whether `table` has a row whose integer primary key is `id`.
    pub fn exchange_id_taken(&self, table: ExchangeTable, id: i64) -> Result<bool> {
        self.tx
            .query_row(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM {} WHERE rowid = ?1)",
                    table.name()
                ),
                [id],
                |r| r.get::<_, bool>(0),
            )
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }
}

impl Reader<'_> {
    /// The member hash of each generated record that has one (a dream's summary or
    /// reflection), by record id: what makes regenerating it idempotent.
    pub fn generated_member_hashes(&self) -> Result<std::collections::HashMap<i64, String>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare(
                "SELECT memory_id, member_hash FROM generated_records WHERE member_hash IS NOT NULL",
            )
            .map_err(map)?;
        let rows = statement
            .query_map([], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(map)?
            .collect::<rusqlite::Result<std::collections::HashMap<_, _>>>()
            .map_err(map)?;
        Ok(rows)
    }
}
