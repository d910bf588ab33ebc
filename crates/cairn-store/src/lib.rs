//! cairn-store: the SQLite brain file.
//!
//! One database file holds records, their history, the event log, conflicts, declared scopes
//! and the FTS5 index (an external-content table kept in sync by triggers, so text is stored
//! once). Every write runs in one `BEGIN IMMEDIATE` transaction; WAL lets readers (hooks, the
//! MCP server, the CLI) go on while one process writes.

mod agent;
mod error;
mod graph;
mod lifecycle;
mod records;
mod schema;
mod search;
mod vectors;
mod wiki;

pub use agent::{
    AwarenessRow, CaptureOffset, IdentityRow, InboxRow, MeasureRow, NewInboxItem, TaskRow,
};
pub use error::StoreError;
pub use graph::{
    AdjacentRow, EdgeKey, EntityRow, IntervalRow, LogRow, NewLogEntry, QuarantineRow,
    RelationTypeRow,
};
pub use lifecycle::{DreamRunRow, LifecycleRow, Orphans, PageStats, ProposalRow, RecoveredTable};
pub use records::{
    ConflictRow, EventRow, HistoryRow, IndexGaps, ListFilter, NewEvent, ScopeRow, Stats,
};
pub use schema::SCHEMA_VERSION;
pub use search::{EpisodeNeighbours, LexicalHit, LexicalQuery};
pub use vectors::{
    META_EMBED_DIM, META_EMBED_MODEL, VectorCounts, VectorMatrix, VectorSpace, blob_to_vector,
    vector_to_blob,
};
pub use wiki::{EventMonth, LogEvent, Skeleton};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer waits for another process's write lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// The lock wait in force: `BUSY_TIMEOUT`, or `CAIRN_BUSY_TIMEOUT_MS` when set (tests use a
/// short one to exercise the locked path quickly).
pub fn busy_timeout() -> Duration {
    std::env::var("CAIRN_BUSY_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(BUSY_TIMEOUT)
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// An open brain.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Write transactions committed through this handle (see [`Store::generation`]).
    writes: u64,
}

/// A write transaction (always `BEGIN IMMEDIATE`).
pub struct WriteTx<'a> {
    tx: rusqlite::Transaction<'a>,
    path: &'a Path,
}

impl Store {
    /// Opens (creating if needed) the brain at `path` and applies pending migrations.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Io {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| StoreError::from_sqlite(e, path))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            writes: 0,
        };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing brain without writing to it (no migration, no WAL switch).
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::from_sqlite(e, path))?;
        conn.busy_timeout(busy_timeout())
            .map_err(|e| StoreError::from_sqlite(e, path))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            writes: 0,
        };
        let version = store.schema_version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: store.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version < SCHEMA_VERSION {
            return Err(StoreError::NeedsMigration {
                path: store.path.clone(),
                found: version,
            });
        }
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&mut self) -> Result<()> {
        let path = self.path.clone();
        let map = |e| StoreError::from_sqlite(e, &path);
        self.conn.busy_timeout(busy_timeout()).map_err(map)?;
        // Reading the header first turns "not a database" into a clear corruption error before
        // any pragma tries to write.
        self.conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(map)?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(map)?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing_free_warning(&format!("journal_mode is {mode}, not wal"));
        }
        self.conn
            .execute_batch(
                "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16000; \
                 PRAGMA journal_size_limit = 67108864;",
            )
            .map_err(map)?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        self.conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))
    }

    fn migrate(&mut self) -> Result<()> {
        let version = self.schema_version()?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        let path = self.path.clone();
        let map = |e| StoreError::from_sqlite(e, &path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(map)?;
        // Another process may have migrated while we waited for the lock.
        let mut current: i64 = tx
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(map)?;
        while current < SCHEMA_VERSION {
            tx.execute_batch(schema::MIGRATIONS[current as usize])
                .map_err(map)?;
            current += 1;
            tx.execute_batch(&format!("PRAGMA user_version = {current}"))
                .map_err(map)?;
        }
        tx.commit().map_err(map)?;
        Ok(())
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction, committing on `Ok`.
    pub fn write<T, E>(
        &mut self,
        work: impl FnOnce(&WriteTx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        let path = self.path.as_path();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| StoreError::from_sqlite(e, path))?;
        let write = WriteTx { tx, path };
        let value = work(&write)?;
        write
            .tx
            .commit()
            .map_err(|e| StoreError::from_sqlite(e, path))?;
        self.writes += 1;
        Ok(value)
    }

    /// Changes whenever the brain may have changed: a commit through this handle or by any
    /// other connection (`PRAGMA data_version`). Caches of derived data (the vector matrix)
    /// are valid while it stays the same.
    pub fn generation(&self) -> Result<u64> {
        let others: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        Ok((others as u64) << 32 ^ self.writes)
    }

    /// Read access outside a write transaction.
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            conn: &self.conn,
            path: &self.path,
        }
    }

    /// `PRAGMA integrity_check`: `ok`, or the problems found.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        let mut statement = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        let rows = statement
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| StoreError::from_sqlite(e, &self.path))
    }

    /// FTS5's own consistency check of the index against the records.
    pub fn fts_integrity_check(&self) -> Result<Option<String>> {
        match self.conn.execute(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)",
            [],
        ) {
            Ok(_) => Ok(None),
            Err(rusqlite::Error::SqliteFailure(code, message))
                if code.code == rusqlite::ErrorCode::DatabaseCorrupt =>
            {
                Ok(Some(message.unwrap_or_else(|| {
                    "the full-text index does not match the records".into()
                })))
            }
            Err(e) => Err(StoreError::from_sqlite(e, &self.path)),
        }
    }

    /// Rebuilds the full-text index from the records.
    pub fn rebuild_fts(&mut self) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO memories_fts(memories_fts) VALUES('rebuild')",
                [],
            )
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        Ok(())
    }

    /// Merges the full-text index's segments (after bulk imports).
    pub fn optimize(&mut self) -> Result<()> {
        self.conn
            .execute_batch(
                "INSERT INTO memories_fts(memories_fts) VALUES('optimize'); PRAGMA optimize;",
            )
            .map_err(|e| StoreError::from_sqlite(e, &self.path))
    }
}

/// Read-only access, either on its own or inside a write transaction.
pub struct Reader<'a> {
    conn: &'a Connection,
    path: &'a Path,
}

impl<'a> WriteTx<'a> {
    pub fn reader(&self) -> Reader<'_> {
        Reader {
            conn: &self.tx,
            path: self.path,
        }
    }
}

fn tracing_free_warning(message: &str) {
    eprintln!("cairn: warning: {message}");
}
