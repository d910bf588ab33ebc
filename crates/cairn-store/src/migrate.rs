//! `cairn migrate`: copies a whole brain between a SQLite file and a PostgreSQL database, in
//! either direction (issue 15 item 5, docs/postgres.md).
//!
//! * Lossless: every table of the schema ([`crate::postgres::brain_tables`]), every row, every
//!   value with its type (a value whose type does not match its column is refused, never
//!   converted). FTS5's index is not copied: a SQLite destination rebuilds it from `memories`
//!   through its triggers; a PostgreSQL destination gets cairn's BM25 index built
//!   ([`crate::pg_search::rebuild_lexical`]).
//! * In batches, each committed on the destination together with the count of rows copied so
//!   far (`cairn_migration_progress`), so a migration killed at any point continues where it
//!   stopped when the same command runs again, with no row copied twice. Rows are read in key
//!   order, so the source must not change in between (stop the agents writing to it).
//! * The destination remembers which brain it receives (a fingerprint of the source: each
//!   table's row count and first row): a destination holding anything else is refused. At the
//!   end the progress table is dropped and `migrated_from` (`meta` on SQLite, `cairn_pg_meta`
//!   on PostgreSQL) holds the fingerprint, so running the command again reports it complete.

use crate::error::StoreError;
use crate::postgres::{self, ColumnType, PgTarget, Table, quote};
use crate::{SCHEMA_VERSION, Store};
use rusqlite::types::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, StoreError>;

/// The table a destination keeps its progress in while a migration runs.
pub const PROGRESS_TABLE: &str = "cairn_migration_progress";

/// One side of a migration.
#[derive(Debug)]
pub enum Endpoint {
    Sqlite(PathBuf),
    Postgres(PgTarget),
}

impl Endpoint {
    /// A `postgres://` URL, or else a brain file's path.
    pub fn parse(text: &str) -> Result<Endpoint> {
        if postgres::is_postgres_url(text) {
            Ok(Endpoint::Postgres(PgTarget::parse(text)?))
        } else {
            Ok(Endpoint::Sqlite(PathBuf::from(text)))
        }
    }

    /// The side as it may be printed (a URL without its password).
    pub fn shown(&self) -> String {
        match self {
            Endpoint::Sqlite(path) => path.display().to_string(),
            Endpoint::Postgres(target) => target.shown().to_string(),
        }
    }
}

/// What one table's migration did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableSummary {
    /// The table's name (SQLite's).
    pub table: String,
    /// Rows in the source (all of them are in the destination at the end).
    pub rows: u64,
    /// Rows this run copied (fewer than `rows` when it resumed an interrupted migration).
    pub copied: u64,
}

/// What a migration did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub from: String,
    pub to: String,
    pub schema_version: i64,
    /// This run continued an interrupted migration.
    pub resumed: bool,
    /// The destination already held the whole brain; nothing was copied.
    pub already_complete: bool,
    pub tables: Vec<TableSummary>,
}

/// Progress reports, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// The rows to copy in all (the rows of a resumed run included).
    Start { total: u64, done: u64 },
    /// `rows` more rows of `table` are in the destination.
    Rows { table: &'a str, rows: u64 },
    /// Every row is in; the destination's full-text index is being built from them (the last
    /// step, tens of seconds at 100,000 records).
    Indexing,
}

/// Copies the brain at `from` into `to`, `batch` rows per committed transaction.
pub fn migrate(
    from: &Endpoint,
    to: &Endpoint,
    batch: usize,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Summary> {
    let batch = batch.max(1);
    let (mut source, mut dest) = match (from, to) {
        (Endpoint::Sqlite(a), Endpoint::Sqlite(b)) => {
            return Err(StoreError::Migration {
                detail: format!(
                    "both sides are SQLite files ({} and {}): copy the file itself while no cairn process writes to it, or use `cairn export` and `cairn import`",
                    a.display(),
                    b.display()
                ),
            });
        }
        (Endpoint::Postgres(a), Endpoint::Postgres(b)) => {
            return Err(StoreError::Migration {
                detail: format!(
                    "both sides are PostgreSQL ({} and {}): copy the database with pg_dump",
                    a.shown(),
                    b.shown()
                ),
            });
        }
        (Endpoint::Sqlite(path), Endpoint::Postgres(target)) => {
            let store = Store::open_read_only(path)?;
            let mut client = target.connect()?;
            prepare_pg(target, &mut client)?;
            (
                Side::Sqlite { store },
                Side::Pg {
                    target: target.clone_target(),
                    client: Box::new(client),
                },
            )
        }
        (Endpoint::Postgres(target), Endpoint::Sqlite(path)) => {
            let mut client = target.connect()?;
            match postgres::schema_version(target, &mut client)? {
                Some(found) => postgres::check_version(target, found)?,
                None => {
                    return Err(target.error(
                        "this database holds no cairn brain",
                        &"nothing to migrate (cairn_pg_meta is missing)",
                    ));
                }
            }
            let mut side = Side::Pg {
                target: target.clone_target(),
                client: Box::new(client),
            };
            if in_progress(&mut side)? {
                return Err(target.error(
                    "a migration into this database was interrupted",
                    &"finish it first (re-run the same `cairn migrate` command)",
                ));
            }
            if side.migrated_from()?.is_none() {
                return Err(target.error(
                    "this database holds no complete brain",
                    &"only a database filled by `cairn migrate` can be read so far",
                ));
            }
            let store = prepare_sqlite(path)?;
            (side, Side::Sqlite { store })
        }
    };
    // The SQLite side's own schema is the reference: it is at SCHEMA_VERSION (checked above).
    let tables = match (&source, &dest) {
        (Side::Sqlite { store }, _) | (_, Side::Sqlite { store }) => {
            postgres::brain_tables(&store.conn)?
        }
        _ => unreachable!("one side is SQLite"),
    };
    if let Side::Pg { target, client } = &mut dest
        && postgres::schema_version(target, client)?.is_none()
    {
        postgres::create_schema(target, client, &tables)?;
    }

    let mut counts = Vec::with_capacity(tables.len());
    let mut hasher = Sha256::new();
    for table in &tables {
        let rows = source.count(table)?;
        let first = source.read(table, 0, 1)?;
        hasher.update(table.sqlite_name.as_bytes());
        hasher.update(rows.to_le_bytes());
        hasher.update(format!("{first:?}").as_bytes());
        counts.push(rows);
    }
    let fingerprint = hex::encode(hasher.finalize());

    let mut summary = Summary {
        from: from.shown(),
        to: to.shown(),
        schema_version: SCHEMA_VERSION,
        resumed: false,
        already_complete: false,
        tables: Vec::new(),
    };
    let mut done = vec![0u64; tables.len()];
    if in_progress(&mut dest)? {
        let theirs = dest.progress_value("source")?;
        if theirs.as_deref() != Some(fingerprint.as_str()) {
            return Err(StoreError::Migration {
                detail: format!(
                    "{} holds an interrupted migration of a different brain (or the source changed since); refusing to mix them — point --to at an empty destination",
                    to.shown()
                ),
            });
        }
        summary.resumed = true;
        for (i, table) in tables.iter().enumerate() {
            done[i] = dest
                .progress_value(&format!("rows:{}", table.sqlite_name))?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    } else if dest.migrated_from()?.as_deref() == Some(fingerprint.as_str()) {
        summary.already_complete = true;
        summary.tables = tables
            .iter()
            .zip(&counts)
            .map(|(t, &rows)| TableSummary {
                table: t.sqlite_name.clone(),
                rows,
                copied: 0,
            })
            .collect();
        return Ok(summary);
    } else {
        for table in &tables {
            if !SEEDED.contains(&table.sqlite_name.as_str()) && dest.count(table)? > 0 {
                return Err(StoreError::Migration {
                    detail: format!(
                        "{} already holds a brain (its table {} has rows) that is not the one at {}; refusing to mix two brains — point --to at a new file or an empty database",
                        to.shown(),
                        table.sqlite_name,
                        from.shown()
                    ),
                });
            }
        }
        dest.begin(&tables, &fingerprint)?;
    }

    let pause = std::env::var("CAIRN_TEST_MIGRATE_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(std::time::Duration::from_millis);
    progress(Progress::Start {
        total: counts.iter().sum(),
        done: done.iter().sum(),
    });
    for (i, table) in tables.iter().enumerate() {
        let mut copied = 0u64;
        if done[i] > 0 {
            progress(Progress::Rows {
                table: &table.sqlite_name,
                rows: 0,
            });
        }
        while done[i] < counts[i] {
            let rows = source.read(table, done[i], batch)?;
            if rows.is_empty() {
                break;
            }
            let n = rows.len() as u64;
            dest.write(table, &rows, done[i] + n)?;
            done[i] += n;
            copied += n;
            progress(Progress::Rows {
                table: &table.sqlite_name,
                rows: n,
            });
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
        }
        if done[i] != counts[i] {
            return Err(StoreError::Migration {
                detail: format!(
                    "{} has {} rows in {} but {} were read: the source changed during the migration; stop every writer and run the command again",
                    table.sqlite_name,
                    counts[i],
                    from.shown(),
                    done[i]
                ),
            });
        }
        summary.tables.push(TableSummary {
            table: table.sqlite_name.clone(),
            rows: counts[i],
            copied,
        });
    }
    // The full-text index is derived: built from the records now all there (before `finish`,
    // so a run killed while it builds builds it again when resumed).
    progress(Progress::Indexing);
    if let Side::Pg { target, client } = &mut dest {
        crate::pg_search::rebuild_lexical(target, client)?;
    }
    dest.finish(&fingerprint)?;
    Ok(summary)
}

/// Tables a fresh brain already has rows in (SQLite's `Store::open` seeds them): they do not
/// make a destination "hold a brain", and are emptied before the copy.
const SEEDED: &[&str] = &["meta", "relation_types", "sqlite_sequence"];

impl PgTarget {
    fn clone_target(&self) -> PgTarget {
        self.with_database(&self.database())
    }
}

fn prepare_pg(target: &PgTarget, client: &mut ::postgres::Client) -> Result<()> {
    if let Some(found) = postgres::schema_version(target, client)? {
        postgres::check_version(target, found)?;
        return Ok(());
    }
    let taken: bool = client
        .query_one(
            "SELECT count(*) > 0 FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .map_err(|e| target.error("cannot read the catalog", &e))?
        .get(0);
    if taken {
        return Err(StoreError::Migration {
            detail: format!(
                "{} already has tables but no cairn brain (no cairn_pg_meta); refusing to write into it — create an empty database (createdb) and point --to at it",
                target.shown()
            ),
        });
    }
    Ok(())
}

fn prepare_sqlite(path: &Path) -> Result<Store> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > 0) {
        // Refuses a newer or older brain before anything is written to the file.
        match Store::open_read_only(path) {
            Ok(_) => {}
            Err(StoreError::NeedsMigration { path, found }) => {
                return Err(StoreError::Migration {
                    detail: format!(
                        "{} holds a brain at schema version {found}, not a place to migrate into; point --to at a new file",
                        path.display()
                    ),
                });
            }
            Err(error) => return Err(error),
        }
    }
    Store::open(path)
}

fn in_progress(side: &mut Side) -> Result<bool> {
    match side {
        Side::Sqlite { store } => store
            .conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [PROGRESS_TABLE],
                |row| row.get(0),
            )
            .map_err(|e| StoreError::from_sqlite(e, &store.path)),
        Side::Pg { target, client } => Ok(client
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL",
                &[&format!("public.{PROGRESS_TABLE}")],
            )
            .map_err(|e| target.error("cannot read the catalog", &e))?
            .get(0)),
    }
}

enum Side {
    Sqlite {
        store: Store,
    },
    Pg {
        target: PgTarget,
        client: Box<::postgres::Client>,
    },
}

impl Side {
    fn count(&mut self, table: &Table) -> Result<u64> {
        match self {
            Side::Sqlite { store } => store
                .conn
                .query_row(
                    &format!("SELECT count(*) FROM {}", quote(&table.sqlite_name)),
                    [],
                    |row| row.get::<_, i64>(0),
                )
                .map(|n| n as u64)
                .map_err(|e| StoreError::from_sqlite(e, &store.path)),
            Side::Pg { target, client } => client
                .query_one(
                    &format!("SELECT count(*) FROM {}", quote(&table.pg_name)),
                    &[],
                )
                .map(|row| row.get::<_, i64>(0) as u64)
                .map_err(|e| target.error(&format!("cannot count {}", table.pg_name), &e)),
        }
    }

    /// `limit` rows from `offset`, in key order, as SQLite values checked against the columns.
    fn read(&mut self, table: &Table, offset: u64, limit: usize) -> Result<Vec<Vec<Value>>> {
        let columns: Vec<String> = table.columns.iter().map(|c| quote(&c.name)).collect();
        let pg_columns: Vec<String> = table
            .columns
            .iter()
            .flat_map(|c| c.pg_names())
            .map(|n| quote(&n))
            .collect();
        match self {
            Side::Sqlite { store } => {
                let order = if table.key.is_empty() {
                    "rowid".to_string()
                } else {
                    table
                        .key
                        .iter()
                        .map(|k| quote(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let sql = format!(
                    "SELECT {} FROM {} ORDER BY {order} LIMIT ?1 OFFSET ?2",
                    columns.join(", "),
                    quote(&table.sqlite_name)
                );
                let sqlite = |e| StoreError::from_sqlite(e, &store.path);
                let mut statement = store.conn.prepare(&sql).map_err(sqlite)?;
                let mut rows = statement
                    .query(rusqlite::params![limit as i64, offset as i64])
                    .map_err(sqlite)?;
                let mut out = Vec::new();
                let mut index = offset;
                while let Some(row) = rows.next().map_err(sqlite)? {
                    let mut values = Vec::with_capacity(table.columns.len());
                    for (i, column) in table.columns.iter().enumerate() {
                        let value: Value = row.get(i).map_err(sqlite)?;
                        values.push(checked(table, &column.name, column.kind, value, index)?);
                    }
                    out.push(values);
                    index += 1;
                }
                Ok(out)
            }
            Side::Pg { target, client } => {
                let order: Vec<String> = if table.key.is_empty() {
                    table
                        .columns
                        .iter()
                        .map(|c| order_term(&c.name, c.kind))
                        .collect()
                } else {
                    table
                        .key
                        .iter()
                        .map(|k| {
                            let kind = table
                                .columns
                                .iter()
                                .find(|c| &c.name == k)
                                .map_or(ColumnType::Integer, |c| c.kind);
                            order_term(k, kind)
                        })
                        .collect()
                };
                let sql = format!(
                    "SELECT {} FROM {} ORDER BY {} LIMIT $1 OFFSET $2",
                    pg_columns.join(", "),
                    quote(&table.pg_name),
                    order.join(", ")
                );
                let rows = client
                    .query(&sql, &[&(limit as i64), &(offset as i64)])
                    .map_err(|e| target.error(&format!("cannot read {}", table.pg_name), &e))?;
                let bad = |e: ::postgres::Error| {
                    target.error(&format!("cannot decode a row of {}", table.pg_name), &e)
                };
                let mut out = Vec::with_capacity(rows.len());
                for row in rows {
                    let mut values = Vec::with_capacity(table.columns.len());
                    let mut i = 0;
                    for column in &table.columns {
                        let value = match column.kind {
                            ColumnType::TextOrBlob => {
                                let text = row.try_get::<_, Option<String>>(i).map_err(bad)?;
                                i += 1;
                                let bytes = row.try_get::<_, Option<Vec<u8>>>(i).map_err(bad)?;
                                match (text, bytes) {
                                    (Some(text), _) => Value::Text(text),
                                    (None, Some(bytes)) => Value::Blob(bytes),
                                    (None, None) => Value::Null,
                                }
                            }
                            ColumnType::Integer => row
                                .try_get::<_, Option<i64>>(i)
                                .map_err(bad)?
                                .map_or(Value::Null, Value::Integer),
                            ColumnType::Real => row
                                .try_get::<_, Option<f64>>(i)
                                .map_err(bad)?
                                .map_or(Value::Null, Value::Real),
                            ColumnType::Text => row
                                .try_get::<_, Option<String>>(i)
                                .map_err(bad)?
                                .map_or(Value::Null, Value::Text),
                            ColumnType::Blob => row
                                .try_get::<_, Option<Vec<u8>>>(i)
                                .map_err(bad)?
                                .map_or(Value::Null, Value::Blob),
                            ColumnType::Vector => row
                                .try_get::<_, Option<pgvector::Vector>>(i)
                                .map_err(bad)?
                                .map_or(Value::Null, |v| {
                                    Value::Blob(
                                        v.as_slice().iter().flat_map(|x| x.to_le_bytes()).collect(),
                                    )
                                }),
                        };
                        i += 1;
                        values.push(value);
                    }
                    out.push(values);
                }
                Ok(out)
            }
        }
    }

    /// Empties the destination's tables (a fresh SQLite brain's seeded rows) and records which
    /// brain it now receives, in one transaction.
    fn begin(&mut self, tables: &[Table], fingerprint: &str) -> Result<()> {
        match self {
            Side::Sqlite { store } => {
                let path = store.path.clone();
                let sqlite = |e| StoreError::from_sqlite(e, &path);
                let tx = store.conn.transaction().map_err(sqlite)?;
                for table in tables.iter().rev() {
                    tx.execute(&format!("DELETE FROM {}", quote(&table.sqlite_name)), [])
                        .map_err(sqlite)?;
                }
                tx.execute_batch(&format!(
                    "CREATE TABLE {PROGRESS_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                ))
                .map_err(sqlite)?;
                tx.execute(
                    &format!("INSERT INTO {PROGRESS_TABLE} (key, value) VALUES ('source', ?1)"),
                    [fingerprint],
                )
                .map_err(sqlite)?;
                tx.commit().map_err(sqlite)
            }
            Side::Pg { target, client } => {
                let fail = |e: ::postgres::Error| target.error("cannot start the migration", &e);
                let mut tx = client.transaction().map_err(fail)?;
                for table in tables.iter().rev() {
                    tx.execute(&format!("DELETE FROM {}", quote(&table.pg_name)), &[])
                        .map_err(fail)?;
                }
                tx.batch_execute(&format!(
                    "CREATE TABLE {PROGRESS_TABLE} (key text PRIMARY KEY, value text NOT NULL)"
                ))
                .map_err(fail)?;
                tx.execute(
                    &format!("INSERT INTO {PROGRESS_TABLE} (key, value) VALUES ('source', $1)"),
                    &[&fingerprint],
                )
                .map_err(fail)?;
                tx.commit().map_err(fail)
            }
        }
    }

    fn progress_value(&mut self, key: &str) -> Result<Option<String>> {
        match self {
            Side::Sqlite { store } => {
                use rusqlite::OptionalExtension as _;
                store
                    .conn
                    .query_row(
                        &format!("SELECT value FROM {PROGRESS_TABLE} WHERE key = ?1"),
                        [key],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(|e| StoreError::from_sqlite(e, &store.path))
            }
            Side::Pg { target, client } => Ok(client
                .query_opt(
                    &format!("SELECT value FROM {PROGRESS_TABLE} WHERE key = $1"),
                    &[&key],
                )
                .map_err(|e| target.error("cannot read the migration's progress", &e))?
                .map(|row| row.get(0))),
        }
    }

    fn migrated_from(&mut self) -> Result<Option<String>> {
        match self {
            Side::Sqlite { store } => store.reader().meta("migrated_from"),
            Side::Pg { target, client } => Ok(client
                .query_opt(
                    &format!(
                        "SELECT value FROM {} WHERE key = 'migrated_from'",
                        postgres::META_TABLE
                    ),
                    &[],
                )
                .map_err(|e| target.error("cannot read cairn_pg_meta", &e))?
                .map(|row| row.get(0))),
        }
    }

    /// Writes `rows` of `table` and the new count of rows copied, in one transaction.
    fn write(&mut self, table: &Table, rows: &[Vec<Value>], done: u64) -> Result<()> {
        let names: Vec<String> = table.columns.iter().map(|c| quote(&c.name)).collect();
        let key = format!("rows:{}", table.sqlite_name);
        match self {
            Side::Sqlite { store } => {
                let path = store.path.clone();
                let sqlite = |e| StoreError::from_sqlite(e, &path);
                let tx = store.conn.transaction().map_err(sqlite)?;
                {
                    let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
                    let mut insert = tx
                        .prepare(&format!(
                            "INSERT OR REPLACE INTO {} ({}) VALUES ({})",
                            quote(&table.sqlite_name),
                            names.join(", "),
                            marks.join(", ")
                        ))
                        .map_err(sqlite)?;
                    for row in rows {
                        if table.sqlite_name == "sqlite_sequence" {
                            tx.execute("DELETE FROM sqlite_sequence WHERE name = ?1", [&row[0]])
                                .map_err(sqlite)?;
                        }
                        insert
                            .execute(rusqlite::params_from_iter(row.iter()))
                            .map_err(sqlite)?;
                    }
                    tx.execute(
                        &format!(
                            "INSERT OR REPLACE INTO {PROGRESS_TABLE} (key, value) VALUES (?1, ?2)"
                        ),
                        rusqlite::params![key, done.to_string()],
                    )
                    .map_err(sqlite)?;
                }
                tx.commit().map_err(sqlite)
            }
            Side::Pg { target, client } => {
                let fail = |e: ::postgres::Error| {
                    target.error(&format!("cannot write into {}", table.pg_name), &e)
                };
                let mut tx = client.transaction().map_err(fail)?;
                let pg_names: Vec<String> = table
                    .columns
                    .iter()
                    .flat_map(|c| c.pg_names())
                    .map(|n| quote(&n))
                    .collect();
                let marks: Vec<String> = (1..=pg_names.len()).map(|i| format!("${i}")).collect();
                // Prepared only for the columns' types as the server has them (pgvector's
                // `vector` included): the rows go in by one binary COPY, not a statement each.
                let insert = tx
                    .prepare(&format!(
                        "INSERT INTO {} ({}) VALUES ({})",
                        quote(&table.pg_name),
                        pg_names.join(", "),
                        marks.join(", ")
                    ))
                    .map_err(fail)?;
                let sink = tx
                    .copy_in(&format!(
                        "COPY {} ({}) FROM STDIN (FORMAT binary)",
                        quote(&table.pg_name),
                        pg_names.join(", ")
                    ))
                    .map_err(fail)?;
                let mut copy =
                    ::postgres::binary_copy::BinaryCopyInWriter::new(sink, insert.params());
                for row in rows {
                    let params = pg_params(table, row)?;
                    let refs: Vec<&(dyn ::postgres::types::ToSql + Sync)> =
                        params.iter().map(|p| p.as_ref()).collect();
                    copy.write(&refs).map_err(fail)?;
                }
                copy.finish().map_err(fail)?;
                tx.execute(
                    &format!(
                        "INSERT INTO {PROGRESS_TABLE} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                    ),
                    &[&key, &done.to_string()],
                )
                .map_err(fail)?;
                tx.commit().map_err(fail)
            }
        }
    }

    /// Drops the progress table and records the brain as migrated, in one transaction.
    fn finish(&mut self, fingerprint: &str) -> Result<()> {
        match self {
            Side::Sqlite { store } => {
                let path = store.path.clone();
                let sqlite = |e| StoreError::from_sqlite(e, &path);
                let tx = store.conn.transaction().map_err(sqlite)?;
                tx.execute_batch(&format!("DROP TABLE {PROGRESS_TABLE}"))
                    .map_err(sqlite)?;
                // The full-text index is derived: built from the records now all here.
                tx.execute_batch("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")
                    .map_err(sqlite)?;
                tx.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('migrated_from', ?1)",
                    [fingerprint],
                )
                .map_err(sqlite)?;
                tx.commit().map_err(sqlite)
            }
            Side::Pg { target, client } => {
                let fail = |e: ::postgres::Error| target.error("cannot finish the migration", &e);
                let mut tx = client.transaction().map_err(fail)?;
                tx.batch_execute(&format!("DROP TABLE {PROGRESS_TABLE}"))
                    .map_err(fail)?;
                tx.execute(
                    &format!(
                        "INSERT INTO {} (key, value) VALUES ('migrated_from', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        postgres::META_TABLE
                    ),
                    &[&fingerprint],
                )
                .map_err(fail)?;
                tx.commit().map_err(fail)
            }
        }
    }
}

fn order_term(name: &str, kind: ColumnType) -> String {
    match kind {
        ColumnType::Text => format!("{} COLLATE \"C\"", quote(name)),
        _ => quote(name),
    }
}

/// `value` if its type is what `kind` holds (a REAL column's integer becomes a real, as
/// SQLite's REAL affinity stores it); anything else is refused rather than converted.
fn checked(table: &Table, column: &str, kind: ColumnType, value: Value, row: u64) -> Result<Value> {
    let ok = match (&value, kind) {
        (Value::Null, _)
        | (Value::Integer(_), ColumnType::Integer)
        | (Value::Real(_), ColumnType::Real)
        | (Value::Text(_), ColumnType::Text)
        | (Value::Blob(_), ColumnType::Blob)
        | (Value::Text(_) | Value::Blob(_), ColumnType::TextOrBlob) => true,
        (Value::Blob(bytes), ColumnType::Vector) => bytes.len() % 4 == 0,
        (Value::Integer(n), ColumnType::Real) => return Ok(Value::Real(*n as f64)),
        _ => false,
    };
    if ok {
        Ok(value)
    } else {
        Err(StoreError::Migration {
            detail: format!(
                "{}.{column} (row {} in key order) holds {} where {:?} is declared; it cannot be carried losslessly — run `cairn doctor` on the source",
                table.sqlite_name,
                row + 1,
                value_kind(&value),
                kind
            ),
        })
    }
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "NULL",
        Value::Integer(_) => "an INTEGER",
        Value::Real(_) => "a REAL",
        Value::Text(_) => "a TEXT",
        Value::Blob(_) => "a BLOB",
    }
}

type PgParam = Box<dyn ::postgres::types::ToSql + Sync>;

fn pg_params(table: &Table, row: &[Value]) -> Result<Vec<PgParam>> {
    let mut params: Vec<PgParam> = Vec::with_capacity(row.len());
    for (column, value) in table.columns.iter().zip(row) {
        let param: PgParam = match (column.kind, value) {
            (ColumnType::Integer, Value::Integer(n)) => Box::new(Some(*n)),
            (ColumnType::Integer, _) => Box::new(None::<i64>),
            (ColumnType::Real, Value::Real(x)) => Box::new(Some(*x)),
            (ColumnType::Real, _) => Box::new(None::<f64>),
            (ColumnType::Text, Value::Text(s)) => Box::new(Some(s.clone())),
            (ColumnType::Text, _) => Box::new(None::<String>),
            (ColumnType::Blob, Value::Blob(b)) => Box::new(Some(b.clone())),
            (ColumnType::Blob, _) => Box::new(None::<Vec<u8>>),
            (ColumnType::Vector, Value::Blob(b)) => {
                let floats: Vec<f32> = b
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Box::new(Some(pgvector::Vector::from(floats)))
            }
            (ColumnType::Vector, _) => Box::new(None::<pgvector::Vector>),
            (ColumnType::TextOrBlob, value) => {
                let (text, bytes) = match value {
                    Value::Text(s) => (Some(s.clone()), None),
                    Value::Blob(b) => (None, Some(b.clone())),
                    _ => (None, None),
                };
                params.push(Box::new(text));
                Box::new(bytes)
            }
        };
        params.push(param);
    }
    Ok(params)
}
