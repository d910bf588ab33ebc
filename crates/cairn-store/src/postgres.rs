//! PostgreSQL: the address of a server, the connection, and the schema a brain has there
//! (issue 15, docs/postgres.md). This is the ground the PostgreSQL backend will stand on: a
//! PostgreSQL database can hold a whole brain (`cairn migrate`), but no engine command reads or
//! writes it yet.
//!
//! The schema is not copied by hand: it is derived at run time from the SQLite schema this
//! binary writes (`PRAGMA table_info` of a fresh brain), so a new SQLite migration carries over
//! by itself. SQLite's `INTEGER`, `REAL`, `TEXT` and `BLOB` become `bigint`, `double precision`,
//! `text` and `bytea`; `vectors.vector` (little-endian f32) becomes pgvector's `vector` (f32
//! too, so the round trip is exact). The FTS5 index has no counterpart here: its source
//! columns live in `memories`, which is what a BM25 index built later will read. SQLite's
//! `sqlite_sequence` (the AUTOINCREMENT high-water marks, so a deleted id is never handed out
//! again) is kept in `cairn_autoincrement`. `cairn_pg_meta` holds `schema_version`.

use crate::error::StoreError;
use crate::schema::SCHEMA_VERSION;

type Result<T> = std::result::Result<T, StoreError>;

/// The table holding the schema version (and, after a migration, where the brain came from).
pub const META_TABLE: &str = "cairn_pg_meta";
/// SQLite's `sqlite_sequence`, under its PostgreSQL name.
pub const AUTOINCREMENT_TABLE: &str = "cairn_autoincrement";
/// The columns stored as pgvector `vector`: (table, column).
const VECTOR_COLUMNS: &[(&str, &str)] = &[("vectors", "vector")];
/// The TEXT columns SQLite also stores BLOBs in (its types are per value): a body stored as a
/// delta against the record it was merged into, a SHA-256 as its 32 bytes when it is lowercase
/// hex (records.rs). PostgreSQL gets two columns, `name` (text) and `name_bytes` (bytea), at
/// most one of them set, so the storage class survives the round trip.
const TEXT_OR_BLOB_COLUMNS: &[(&str, &str)] = &[
    ("memories", "body"),
    ("memories", "content_hash"),
    ("events", "receipt"),
];

/// Whether `text` names a PostgreSQL server rather than a file.
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A PostgreSQL server and database, parsed from a `postgres://` URL. Its `Debug` and
/// everything it prints show the address without the password.
pub struct PgTarget {
    config: Box<postgres::Config>,
    shown: String,
    password: Option<String>,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTarget")
            .field("url", &self.shown)
            .finish()
    }
}

impl PgTarget {
    /// Parses `url` (`postgres://user[:password]@host[:port]/database`). TLS is not supported
    /// yet: a URL asking for it (`sslmode=require`, `verify-ca`, `verify-full`) is refused.
    pub fn parse(url: &str) -> Result<PgTarget> {
        let url = url.trim();
        let shown = redact(url);
        if !is_postgres_url(url) {
            return Err(StoreError::Migration {
                detail: format!("{shown} is not a postgres:// URL"),
            });
        }
        if let Some((_, query)) = url.split_once('?') {
            for pair in query.split('&') {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                if key == "sslmode" && !matches!(value, "disable" | "allow" | "prefer") {
                    return Err(StoreError::Migration {
                        detail: format!(
                            "{shown}: sslmode={value} is not supported yet (cairn connects to PostgreSQL without TLS for now); use a local or tunnelled server with sslmode=disable"
                        ),
                    });
                }
            }
        }
        let mut config: postgres::Config = url.parse().map_err(|e| StoreError::Migration {
            detail: format!("{shown} is not a valid PostgreSQL URL: {e}"),
        })?;
        config.ssl_mode(postgres::config::SslMode::Disable);
        // cairn's statements are short: JIT compilation (on above a planner cost, which a
        // search over a frequent word can reach) costs 100+ ms for nothing.
        let options = match config.get_options() {
            Some(given) => format!("{given} -c jit=off"),
            None => "-c jit=off".to_string(),
        };
        config.options(&options);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .filter(|p| !p.is_empty());
        Ok(PgTarget {
            config: Box::new(config),
            shown,
            password,
        })
    }

    /// The address without its password (and without its query).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The database name (`postgres` when the URL names none).
    pub fn database(&self) -> String {
        self.config
            .get_dbname()
            .map(str::to_string)
            .or_else(|| self.config.get_user().map(str::to_string))
            .unwrap_or_else(|| "postgres".to_string())
    }

    /// This server with another database.
    pub fn with_database(&self, database: &str) -> PgTarget {
        let mut config = self.config.clone();
        config.dbname(database);
        let shown = match self.shown.rsplit_once('/') {
            Some((head, _)) if head.contains("://") && !head.ends_with('/') => {
                format!("{head}/{database}")
            }
            _ => format!("{}/{database}", self.shown.trim_end_matches('/')),
        };
        PgTarget {
            config,
            shown,
            password: self.password.clone(),
        }
    }

    /// Connects (no TLS).
    pub fn connect(&self) -> Result<postgres::Client> {
        self.config.connect(postgres::NoTls).map_err(|e| {
            self.error(
                "cannot connect (is the server running and the URL right?)",
                &e,
            )
        })
    }

    /// An error about this server, with the password scrubbed from `source`'s text.
    pub fn error(&self, what: &str, source: &dyn std::fmt::Display) -> StoreError {
        let mut detail = format!("{what}: {}", error_text(source));
        if let Some(password) = &self.password {
            detail = detail.replace(password.as_str(), "***");
        }
        StoreError::Postgres {
            url: self.shown.clone(),
            detail,
        }
    }
}

/// The text of a postgres error with its causes (`Display` alone often says just "db error").
fn error_text(source: &dyn std::fmt::Display) -> String {
    source.to_string()
}

/// `url` without the password in its user part and without its query (which may hold one).
pub fn redact(url: &str) -> String {
    let url = url.split('?').next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<not a URL>".to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    format!("{scheme}://{authority}{path}")
}

/// The type a column has on PostgreSQL, from its declared SQLite type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Integer,
    Real,
    Text,
    Blob,
    /// pgvector `vector`; a little-endian f32 BLOB on SQLite.
    Vector,
    /// A TEXT column whose values may also be BLOBs: `name text` and `name_bytes bytea`.
    TextOrBlob,
}

impl ColumnType {
    fn sql(self) -> &'static str {
        match self {
            ColumnType::Integer => "bigint",
            ColumnType::Real => "double precision",
            ColumnType::Text => "text",
            ColumnType::Blob => "bytea",
            ColumnType::Vector => "vector",
            ColumnType::TextOrBlob => "text",
        }
    }
}

impl Column {
    /// Its columns on PostgreSQL (two for [`ColumnType::TextOrBlob`]).
    pub fn pg_names(&self) -> Vec<String> {
        match self.kind {
            ColumnType::TextOrBlob => vec![self.name.clone(), format!("{}_bytes", self.name)],
            _ => vec![self.name.clone()],
        }
    }
}

/// One column of a brain table.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: ColumnType,
    pub not_null: bool,
    /// A literal default (a number or a quoted string), kept as written.
    pub default: Option<String>,
}

/// One table of a brain, as both backends hold it.
#[derive(Debug, Clone)]
pub struct Table {
    /// Its name on SQLite.
    pub sqlite_name: String,
    /// Its name on PostgreSQL (the same, but for `sqlite_sequence`).
    pub pg_name: String,
    pub columns: Vec<Column>,
    /// The primary key's columns, in key order (empty: none).
    pub key: Vec<String>,
}

/// Every table of the brain `conn` holds (its own schema, which the caller has checked is at
/// [`SCHEMA_VERSION`]): the real tables, not FTS5's virtual table and its shadow tables, with
/// `sqlite_sequence` and then `meta` last (a vector's insert trigger bumps
/// `meta.vectors_version`, so `meta` must be written after `vectors` to end up as it was).
pub fn brain_tables(conn: &rusqlite::Connection) -> Result<Vec<Table>> {
    let sqlite = |e| StoreError::Migration {
        detail: format!("cannot read the SQLite schema: {e}"),
    };
    let mut statement = conn
        .prepare("SELECT name, type, coalesce(sql, '') FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
        .map_err(sqlite)?;
    let entries: Vec<(String, String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .map_err(sqlite)?
        .collect::<std::result::Result<_, _>>()
        .map_err(sqlite)?;
    let virtual_tables: Vec<String> = entries
        .iter()
        .filter(|(_, _, sql)| {
            sql.trim_start()
                .to_ascii_uppercase()
                .starts_with("CREATE VIRTUAL")
        })
        .map(|(name, _, _)| name.clone())
        .collect();
    let mut tables = Vec::new();
    let mut last = Vec::new();
    for (name, _, sql) in &entries {
        let is_virtual = virtual_tables.contains(name);
        let is_shadow = virtual_tables
            .iter()
            .any(|v| name.starts_with(&format!("{v}_")));
        if is_virtual || is_shadow || sql.is_empty() && name != "sqlite_sequence" {
            continue;
        }
        if name == "sqlite_sequence" {
            last.push(Table {
                sqlite_name: name.clone(),
                pg_name: AUTOINCREMENT_TABLE.to_string(),
                columns: vec![
                    Column {
                        name: "name".to_string(),
                        kind: ColumnType::Text,
                        not_null: true,
                        default: None,
                    },
                    Column {
                        name: "seq".to_string(),
                        kind: ColumnType::Integer,
                        not_null: true,
                        default: None,
                    },
                ],
                key: vec!["name".to_string()],
            });
            continue;
        }
        // `fts_changes` is derived (which full-text rows changed, for in-memory copies of the
        // index): a destination keeps its own.
        if name.starts_with("sqlite_") || name == "fts_changes" {
            continue;
        }
        let table = table_of(conn, name)?;
        if name == "meta" {
            last.push(table);
        } else {
            tables.push(table);
        }
    }
    last.sort_by_key(|t| t.sqlite_name == "meta");
    tables.extend(last);
    Ok(tables)
}

fn table_of(conn: &rusqlite::Connection, name: &str) -> Result<Table> {
    let sqlite = |e| StoreError::Migration {
        detail: format!("cannot read the columns of {name}: {e}"),
    };
    let mut statement = conn
        .prepare(&format!("PRAGMA table_info({})", quote(name)))
        .map_err(sqlite)?;
    let rows: Vec<(String, String, bool, Option<String>, i64)> = statement
        .query_map([], |row| {
            Ok((
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
            ))
        })
        .map_err(sqlite)?
        .collect::<std::result::Result<_, _>>()
        .map_err(sqlite)?;
    let mut columns = Vec::new();
    let mut key: Vec<(i64, String)> = Vec::new();
    for (column, declared, not_null, default, pk) in rows {
        let kind = if VECTOR_COLUMNS.contains(&(name, column.as_str())) {
            ColumnType::Vector
        } else if TEXT_OR_BLOB_COLUMNS.contains(&(name, column.as_str())) {
            ColumnType::TextOrBlob
        } else {
            column_type(name, &column, &declared)?
        };
        if pk > 0 {
            key.push((pk, column.clone()));
        }
        columns.push(Column {
            name: column,
            kind,
            not_null: not_null || pk > 0,
            default: default.filter(|d| is_literal(d)),
        });
    }
    key.sort();
    Ok(Table {
        sqlite_name: name.to_string(),
        pg_name: name.to_string(),
        columns,
        key: key.into_iter().map(|(_, c)| c).collect(),
    })
}

/// SQLite's type affinity rules (https://sqlite.org/datatype3.html §3.1) for the declared types
/// cairn's schema uses; anything else is refused so a new kind of column is not guessed.
fn column_type(table: &str, column: &str, declared: &str) -> Result<ColumnType> {
    let upper = declared.to_ascii_uppercase();
    Ok(if upper.contains("INT") {
        ColumnType::Integer
    } else if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        ColumnType::Text
    } else if upper.contains("BLOB") {
        ColumnType::Blob
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        ColumnType::Real
    } else {
        return Err(StoreError::Migration {
            detail: format!(
                "{table}.{column} has the SQLite type {declared:?}, which has no PostgreSQL mapping yet (crates/cairn-store/src/postgres.rs)"
            ),
        });
    })
}

fn is_literal(default: &str) -> bool {
    default.parse::<f64>().is_ok()
        || default.len() >= 2
            && default.starts_with('\'')
            && default.ends_with('\'')
            && !default[1..default.len() - 1]
                .replace("''", "")
                .contains('\'')
}

/// `name` as a quoted identifier (the same syntax on both backends).
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The `CREATE TABLE` of `table` on PostgreSQL.
pub fn create_table_sql(table: &Table) -> String {
    let mut parts: Vec<String> = table
        .columns
        .iter()
        .map(|c| {
            if c.kind == ColumnType::TextOrBlob {
                let bytes = quote(&format!("{}_bytes", c.name));
                let name = quote(&c.name);
                let mut part = format!("{name} text, {bytes} bytea");
                if c.not_null {
                    part.push_str(&format!(
                        ", CHECK ({name} IS NOT NULL OR {bytes} IS NOT NULL)"
                    ));
                }
                return part;
            }
            let mut part = format!("{} {}", quote(&c.name), c.kind.sql());
            if c.not_null {
                part.push_str(" NOT NULL");
            }
            if let Some(default) = &c.default {
                part.push_str(" DEFAULT ");
                part.push_str(default);
            }
            part
        })
        .collect();
    if !table.key.is_empty() {
        let key: Vec<String> = table.key.iter().map(|k| quote(k)).collect();
        parts.push(format!("PRIMARY KEY ({})", key.join(", ")));
    }
    format!(
        "CREATE TABLE {} (\n    {}\n)",
        quote(&table.pg_name),
        parts.join(",\n    ")
    )
}

/// The schema version of the brain in the database `client` is connected to: `None` when the
/// database holds no brain (no `cairn_pg_meta`).
pub fn schema_version(target: &PgTarget, client: &mut postgres::Client) -> Result<Option<i64>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("public.{META_TABLE}")],
        )
        .map_err(|e| target.error("cannot read the catalog", &e))?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = client
        .query_opt(
            &format!("SELECT value FROM {META_TABLE} WHERE key = 'schema_version'"),
            &[],
        )
        .map_err(|e| target.error("cannot read the schema version", &e))?;
    let Some(row) = row else {
        return Err(target.error(
            "the database has a cairn_pg_meta table without a schema_version",
            &"refusing to touch it",
        ));
    };
    let value: String = row.get(0);
    value
        .parse()
        .map(Some)
        .map_err(|_| target.error("the schema_version is not a number", &value))
}

/// Refuses a brain written by a newer cairn (the same error as SQLite's) or an older schema
/// (there is none yet: v16 is the first PostgreSQL schema).
pub fn check_version(target: &PgTarget, found: i64) -> Result<()> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: target.shown().into(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found < SCHEMA_VERSION {
        return Err(StoreError::NeedsMigration {
            path: target.shown().into(),
            found,
        });
    }
    Ok(())
}

/// Creates the brain schema (pgvector, every table, `cairn_pg_meta` at [`SCHEMA_VERSION`]) in
/// one transaction, in a database that holds no brain yet.
pub fn create_schema(
    target: &PgTarget,
    client: &mut postgres::Client,
    tables: &[Table],
) -> Result<()> {
    let mut tx = client
        .transaction()
        .map_err(|e| target.error("cannot begin a transaction", &e))?;
    tx.batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
        .map_err(|e| {
            target.error(
                "cannot enable pgvector (CREATE EXTENSION vector); install it on the server (scripts/install-pgvector.sh does, see docs/postgres.md)",
                &e,
            )
        })?;
    for table in tables {
        tx.batch_execute(&create_table_sql(table))
            .map_err(|e| target.error(&format!("cannot create the table {}", table.pg_name), &e))?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE {META_TABLE} (key text PRIMARY KEY, value text NOT NULL)"
    ))
    .map_err(|e| target.error("cannot create cairn_pg_meta", &e))?;
    tx.execute(
        &format!("INSERT INTO {META_TABLE} (key, value) VALUES ('schema_version', $1)"),
        &[&SCHEMA_VERSION.to_string()],
    )
    .map_err(|e| target.error("cannot write the schema version", &e))?;
    tx.commit()
        .map_err(|e| target.error("cannot commit the schema", &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_drops_the_password_and_the_query() {
        assert_eq!(
            redact("postgres://alice:s3cret@db.example:5432/brain?password=other"),
            "postgres://alice@db.example:5432/brain"
        );
        assert_eq!(redact("postgresql://h/db"), "postgresql://h/db");
        let target = PgTarget::parse("postgres://alice:s3cret@127.0.0.1:1/brain").unwrap();
        assert_eq!(target.shown(), "postgres://alice@127.0.0.1:1/brain");
        assert!(!format!("{target:?}").contains("s3cret"));
        let error = target.error("x", &"the password s3cret leaked");
        assert!(!error.to_string().contains("s3cret"), "{error}");
    }

    #[test]
    fn tls_is_refused_with_a_clear_error() {
        let error = PgTarget::parse("postgres://u:pw@h/db?sslmode=require").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("sslmode=require is not supported yet"),
            "{text}"
        );
        assert!(!text.contains("pw@"), "{text}");
        assert!(PgTarget::parse("postgres://u@h/db?sslmode=disable").is_ok());
    }

    #[test]
    fn every_table_of_the_sqlite_schema_maps_to_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(&dir.path().join("b.db")).unwrap();
        let tables = brain_tables(&store.conn).unwrap();
        let names: Vec<&str> = tables.iter().map(|t| t.pg_name.as_str()).collect();
        for expected in [
            "memories",
            "history",
            "events",
            "edge_log",
            "vectors",
            "tasks",
            "service_tokens",
            "codemap_files",
            "cairn_autoincrement",
            "meta",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        assert!(
            !names.iter().any(|n| n.starts_with("memories_fts")),
            "{names:?}"
        );
        assert_eq!(names.last(), Some(&"meta"));
        let vectors = tables.iter().find(|t| t.pg_name == "vectors").unwrap();
        assert_eq!(
            vectors
                .columns
                .iter()
                .find(|c| c.name == "vector")
                .unwrap()
                .kind,
            ColumnType::Vector
        );
        let memories = tables.iter().find(|t| t.pg_name == "memories").unwrap();
        assert_eq!(memories.key, vec!["id".to_string()]);
        let sql = create_table_sql(memories);
        assert!(
            sql.contains("\"scope\" text NOT NULL DEFAULT 'global'"),
            "{sql}"
        );
        assert!(
            sql.contains("\"body\" text, \"body_bytes\" bytea, CHECK"),
            "{sql}"
        );
    }
}
