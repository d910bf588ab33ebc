//! cairn-store: the SQLite brain file.
//!
//! One database file holds records, their history, the event log, conflicts, declared scopes
//! and the FTS5 index (an external-content table over the records not merged away, so text is
//! stored once: the write path inserts a record's row, triggers replace or delete it when the
//! record's text changes or a dream merges it away). Every write runs in one `BEGIN IMMEDIATE` transaction; WAL lets readers (hooks, the
//! MCP server, the CLI) go on while one process writes.

mod agent;
mod codemap;
mod error;
mod exchange;
mod graph;
mod history;
mod lexical;
mod lifecycle;
pub mod migrate;
pub mod pg_read;
pub mod pg_search;
#[cfg(test)]
#[path = "../../cairn-cli/tests/pg_support.rs"]
mod pg_support;
pub mod postgres;
mod recall_read;
mod records;
mod schema;
mod search;
mod sessions;
mod size;
mod surfaced;
#[cfg(test)]
mod testing;
mod tokens;
mod vectors;
mod wiki;

pub use agent::{
    AwarenessRow, CaptureOffset, IdentityRow, InboxRow, MeasureRow, NewInboxItem, TaskRow,
};
pub use codemap::{CodeFileMeta, CodeFileRow, CodeMapState, CodeProjectHead};
pub use error::StoreError;
pub use exchange::ExchangeTable;
pub use graph::{
    AdjacentRow, EdgeKey, EntityRow, IntervalRow, LogRow, NewLogEntry, QuarantineRow,
    RelationTypeRow,
};
pub use lexical::LexicalIndex;
pub use lifecycle::{
    DreamRunRow, LifecycleRow, Orphans, PageStats, ProposalRow, PrunedSet, RecoveredTable,
};
pub use recall_read::{DERIVED_FROM, RecallRead, SqliteRecall};
pub use records::{
    ConflictRow, EventRow, HistoryRow, IndexGaps, ListFilter, NewEvent, ScopeRow, Stats,
};
pub use schema::{MIGRATIONS, SCHEMA_VERSION};
pub use search::{EpisodeNeighbours, LexicalHit, LexicalQuery};
pub use size::{FileSizes, TableSize};
pub use tokens::TokenRow;
pub use vectors::{
    META_EMBED_DIM, META_EMBED_MODEL, VectorCounts, VectorMatrix, VectorSpace, blob_to_vector,
    text_fingerprint, vector_to_blob,
};
pub use wiki::{EventMonth, LogEvent, Skeleton};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Once the write-ahead log file passes this size after a write, it is checkpointed into the
/// database and truncated (see [`Store::write`]). A process that opens the brain first replays
/// the whole log (SQLite's WAL recovery), which must stay cheap for hooks.
pub const WAL_TRUNCATE_BYTES: u64 = 1024 * 1024;

/// A store that leaves checkpoints to a checkpointer ([`Store::leave_checkpoints`]) still
/// checkpoints and truncates the log itself past this size after a write: the bound when the
/// checkpointer cannot keep up (or is gone).
pub const WAL_WRITER_CAP_BYTES: u64 = 16 * WAL_TRUNCATE_BYTES;

/// The size of the write-ahead log of the brain at `db` in bytes (0 when there is none);
/// metadata only, the file is never opened (opening it would break SQLite's locks), and no
/// connection is needed.
pub fn wal_bytes_of(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

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
    /// The log size past which a write checkpoints it: [`WAL_TRUNCATE_BYTES`], or
    /// [`WAL_WRITER_CAP_BYTES`] when a checkpointer does it ([`Store::leave_checkpoints`]).
    checkpoint_past: u64,
    /// Checkpoints this handle ran (what the tests look at).
    checkpoints: std::cell::Cell<u64>,
}

/// What one [`Store::checkpoint_passive`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPass {
    /// Frames in the log when it ran.
    pub frames: u64,
    /// Frames of it now copied into the database: all of them when equal (the next write
    /// starts the log over).
    pub copied: u64,
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
            checkpoint_past: WAL_TRUNCATE_BYTES,
            checkpoints: std::cell::Cell::new(0),
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
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(|e| StoreError::from_sqlite(e, path))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            writes: 0,
            checkpoint_past: WAL_TRUNCATE_BYTES,
            checkpoints: std::cell::Cell::new(0),
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

    /// Reads the brain's file through a memory map of up to `bytes` (`PRAGMA mmap_size`) on
    /// this connection: a page this connection's cache lacks is then read from the map instead
    /// of by `pread` into the cache. For long-lived processes (`cairn serve`): every write
    /// moves the write-ahead log, and each other connection then drops its page cache at its
    /// next read, so without the map a busy service re-reads the same pages over and over
    /// (a quarter of its CPU under load, issue 14). SQLite caps the size at its compile-time
    /// maximum and answers what it set; `0` turns the map off.
    pub fn map_memory(&self, bytes: u64) -> Result<u64> {
        let size: i64 = self
            .conn
            .query_row(&format!("PRAGMA mmap_size = {bytes}"), [], |row| row.get(0))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        Ok(u64::try_from(size).unwrap_or(0))
    }

    /// Caps this connection's page cache at `bytes` (`PRAGMA cache_size`; 16 MB by default).
    /// A long-lived process with several connections and no memory map (the local daemon)
    /// keeps each one's cache small: the kernel's page cache holds the file anyway, and every
    /// connection's own cache is resident memory of the process.
    pub fn limit_page_cache(&self, bytes: u64) -> Result<()> {
        let kib = (bytes / 1024).max(1);
        self.conn
            .execute_batch(&format!("PRAGMA cache_size = -{kib}"))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))
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
        // The write path, recall and the graph use a few dozen distinct statements; rusqlite
        // keeps 16 by default, and an evicted one is parsed and planned again.
        self.conn
            .set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Plans never depend on bound values (the query planner stability guarantee). Without
        // it, a statement whose parameter is compared with a partial index's constant (the
        // `status = 'active'` indexes) is prepared again on every new binding: a third of the
        // import's CPU in a profile.
        self.conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(map)?;
        // Most processes are short (a hook, one CLI command) and write a few pages. SQLite
        // would checkpoint the WAL into the database (two fsyncs and a delete) every time the
        // last connection closes; instead the log is left for the next writer, and a write
        // that finds it past `WAL_TRUNCATE_BYTES` checkpoints and truncates it
        // (`checkpoint_if_large`): bounded, with the fsyncs spread over many writes.
        self.conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
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
        self.checkpoint_if_large();
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
        let value = {
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
            value
        };
        self.writes += 1;
        self.checkpoint_if_large();
        Ok(value)
    }

    /// Checkpoints the write-ahead log into the database and truncates it once the file is
    /// past `checkpoint_past` ([`WAL_TRUNCATE_BYTES`] unless a checkpointer does it), without
    /// waiting: with readers still on the log, SQLite copies what it can and the next write
    /// tries again. Connections never checkpoint on close (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`),
    /// so this is what keeps the log bounded.
    fn checkpoint_if_large(&self) {
        if self.wal_bytes() <= self.checkpoint_past {
            return;
        }
        if self.conn.busy_timeout(Duration::ZERO).is_ok() {
            self.checkpoints.set(self.checkpoints.get() + 1);
            // Busy (readers on the log) or not, the brain is consistent; nothing to report.
            let _ = self
                .conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
            let _ = self.conn.busy_timeout(busy_timeout());
        }
    }

    /// Leaves the log's checkpoints to another connection that calls
    /// [`Store::checkpoint_passive`] (a long-lived service's checkpointer thread): this
    /// handle's writes no longer checkpoint at [`WAL_TRUNCATE_BYTES`] (only past
    /// [`WAL_WRITER_CAP_BYTES`]), nor does SQLite's automatic checkpoint run on its commits,
    /// and when the log starts over after a full checkpoint its first commit truncates the
    /// file to [`WAL_TRUNCATE_BYTES`]. A checkpoint copies pages into the database and syncs
    /// both files: on the writer it held every write queued behind it for milliseconds to tens
    /// of milliseconds (issue 14, the slowest remembers under load).
    pub fn leave_checkpoints(&mut self) -> Result<()> {
        self.conn
            .execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = {WAL_TRUNCATE_BYTES};"
            ))
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        self.checkpoint_past = WAL_WRITER_CAP_BYTES;
        Ok(())
    }

    /// Copies what it can of the write-ahead log into the database without waiting for or
    /// holding up any reader or writer (`PRAGMA wal_checkpoint(PASSIVE)`). A writer goes on
    /// appending meanwhile; once every frame is copied, the next write starts the log over.
    pub fn checkpoint_passive(&self) -> Result<CheckpointPass> {
        self.checkpoints.set(self.checkpoints.get() + 1);
        let (frames, copied): (i64, i64) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get(1)?, row.get(2)?))
            })
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        Ok(CheckpointPass {
            frames: u64::try_from(frames).unwrap_or(0),
            copied: u64::try_from(copied).unwrap_or(0),
        })
    }

    /// Checkpoints this handle ran, on its writes or asked ([`Store::checkpoint_passive`]).
    pub fn checkpoints_run(&self) -> u64 {
        self.checkpoints.get()
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
        self.writes += 1;
        self.checkpoint_if_large();
        Ok(())
    }

    /// Merges the full-text index's segments (after bulk imports).
    pub fn optimize(&mut self) -> Result<()> {
        self.conn
            .execute_batch(
                "INSERT INTO memories_fts(memories_fts) VALUES('optimize'); PRAGMA optimize;",
            )
            .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        self.checkpoint_if_large();
        Ok(())
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

    /// Runs `work` inside a savepoint of this transaction, so that one write of several fails
    /// alone: on `Err` what `work` wrote is rolled back and the transaction goes on with what
    /// was written before it. The outer error is the savepoint's own (SQLite could not set it
    /// or roll back to it, for instance after a failure that ended the whole transaction): the
    /// transaction must not be committed then.
    pub fn alone<T, E>(
        &self,
        work: impl FnOnce(&WriteTx<'_>) -> std::result::Result<T, E>,
    ) -> Result<std::result::Result<T, E>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        self.tx.execute_batch("SAVEPOINT alone").map_err(map)?;
        let done = work(self);
        let end = if done.is_ok() {
            "RELEASE alone"
        } else {
            "ROLLBACK TO alone; RELEASE alone"
        };
        self.tx.execute_batch(end).map_err(map)?;
        Ok(done)
    }
}

fn tracing_free_warning(message: &str) {
    eprintln!("cairn: warning: {message}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::params;

    /// `open_targets_of_records` answers, for each record, what `open_targets` answers.
    #[test]
    fn open_targets_of_many_records_are_each_ones_open_targets() {
        use cairn_core::graph::Node;
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let mut rng = crate::testing::WordRng::new(11, &[]);
        let mut next = |n: i64| rng.below(n as usize) as i64;
        store
            .write(|tx| {
                for seq in 1..=600 {
                    let src = Node::record(1 + next(40));
                    let dst = match next(3) {
                        0 => Node::entity(1 + next(20)),
                        _ => Node::record(1 + next(200)),
                    };
                    let relation = ["derived_from", "mentions", "relates"][next(3) as usize];
                    let key = EdgeKey {
                        src,
                        relation: relation.to_string(),
                        dst,
                    };
                    let id = tx.open_interval(&key, "2026-01-01T00:00:00Z", 1.0, seq)?;
                    if next(4) == 0 {
                        tx.close_interval(id, "2026-02-01T00:00:00Z", seq + 1_000)?;
                    }
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let reader = store.reader();
        let records: Vec<i64> = (0..45).collect();
        for relation in ["derived_from", "mentions", "relates", "none"] {
            let many = reader.open_targets_of_records(&records, relation).unwrap();
            for &id in &records {
                let one = reader.open_targets(Node::record(id), relation).unwrap();
                assert_eq!(
                    many.get(&id).cloned().unwrap_or_default(),
                    one,
                    "record {id}, {relation}"
                );
            }
        }
    }

    /// `get_many` answers what `get` answers for each id, in the order asked: missing ids left
    /// out, an id asked twice answered twice, lists past one statement's chunk and of every
    /// length around the rounded widths.
    #[test]
    fn get_many_answers_each_id_as_get_does_in_the_order_asked() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let note = cairn_core::record::MemoryType::Note;
        let ids: Vec<i64> = store
            .write(|tx| {
                (0..1_200)
                    .map(|i| {
                        tx.insert_memory(
                            &crate::testing::memory("p", note, &format!("record {i}"), "active"),
                            None,
                        )
                    })
                    .collect::<Result<Vec<i64>>>()
            })
            .unwrap();
        let reader = store.reader();
        let one_by_one = |asked: &[i64]| -> Vec<cairn_core::memory::Memory> {
            asked
                .iter()
                .filter_map(|id| reader.get(*id).unwrap())
                .collect()
        };
        let mut rng = crate::testing::WordRng::new(7, &[]);
        let mut next = |n: usize| rng.below(n);
        for length in (0..=20).chain([31, 32, 33, 63, 64, 65, 499, 500, 501, 1_000, 1_300]) {
            let asked: Vec<i64> = (0..length)
                .map(|_| match next(10) {
                    // Missing: past the last id, or never used.
                    0 => 5_000 + next(100) as i64,
                    _ => ids[next(ids.len())],
                })
                .collect();
            let many = reader.get_many(&asked).unwrap();
            let expected = one_by_one(&asked);
            assert_eq!(
                many.iter().map(|m| m.id).collect::<Vec<_>>(),
                expected.iter().map(|m| m.id).collect::<Vec<_>>(),
                "{length} ids"
            );
            assert_eq!(
                serde_json::to_value(&many).unwrap(),
                serde_json::to_value(&expected).unwrap()
            );
        }
        assert!(reader.get_many(&[]).unwrap().is_empty());
    }

    /// A write that fails inside `alone` leaves nothing, and the writes before and after it in
    /// the same transaction are committed.
    #[test]
    fn a_write_that_fails_alone_is_rolled_back_and_the_others_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let answers = store
            .write(|tx| {
                let mut answers = Vec::new();
                for (id, fail) in [(1, false), (2, true), (3, false)] {
                    let done = tx.alone(|tx| {
                        tx.put_vector(id, "t", &[1.0, 0.0]).map_err(|_| "put")?;
                        if fail {
                            return Err("refused");
                        }
                        Ok(id)
                    })?;
                    answers.push(done.is_ok());
                }
                Ok::<_, StoreError>(answers)
            })
            .unwrap();
        assert_eq!(answers, [true, false, true]);
        let stored: String = store
            .conn
            .query_row(
                "SELECT group_concat(memory_id, ',' ORDER BY memory_id) FROM vectors",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(stored, "1,3");
    }

    /// A batch of accesses adds each record's uses and leaves its latest time, in one
    /// statement, as one `touch` per access would.
    #[test]
    fn counted_touches_add_every_use_and_keep_the_latest_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let note = cairn_core::record::MemoryType::Note;
        let (one, two, three) = store
            .write(|tx| {
                let insert = |body| {
                    tx.insert_memory(&crate::testing::memory("p", note, body, "active"), None)
                };
                Ok::<_, StoreError>((insert("one")?, insert("two")?, insert("three")?))
            })
            .unwrap();
        store
            .write(|tx| {
                tx.touch_counted(&[
                    (one, 1, "2026-01-02T00:00:00Z"),
                    (two, 1, "2026-01-02T00:00:00Z"),
                    (one, 2, "2026-01-03T00:00:00Z"),
                ])
            })
            .unwrap();
        let read = |id| {
            let memory = store.reader().get(id).unwrap().unwrap();
            (memory.use_count, memory.last_accessed_at)
        };
        assert_eq!(read(one), (3, Some("2026-01-03T00:00:00Z".into())));
        assert_eq!(read(two), (1, Some("2026-01-02T00:00:00Z".into())));
        assert_eq!(read(three), (0, None));
    }

    /// Schema v9: every change to `vectors` bumps `meta.vectors_version`; other writes do not.
    #[test]
    fn the_vectors_version_counts_vector_changes_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let version = |store: &Store| store.reader().vectors_version().unwrap().unwrap();
        assert_eq!(version(&store), 0);
        store
            .write(|tx| tx.put_vector(1, "a", &[1.0, 0.0]))
            .unwrap();
        assert_eq!(version(&store), 1);
        store
            .write(|tx| tx.put_vector(1, "b", &[0.0, 1.0]))
            .unwrap();
        assert_eq!(version(&store), 2);
        store
            .write(|tx| {
                tx.set_vector_space(&VectorSpace {
                    model: "m".into(),
                    dimension: 2,
                })
            })
            .unwrap();
        assert_eq!(version(&store), 2);
        store.write(|tx| tx.drop_vector(1)).unwrap();
        assert_eq!(version(&store), 3);
    }

    /// Issue 6's schema v8 on a v7 brain with data: signatures dropped, hashes and receipts
    /// turned into bytes; everything a reader sees is what it saw before, and new versions of
    /// a record with full (v7) history walk back through both forms.
    #[test]
    fn migrating_a_v7_brain_to_v8_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let hash = |n: u8| hex::encode([n; 32]);
        let snapshot = serde_json::json!({
            "id": 2, "project": "p", "scope": "global", "type": "episode", "title": null,
            "body": "the second body", "summary": null, "tags": [], "importance": 3,
            "confidence": "reported", "trust": "captured", "trust_zone": "private_self",
            "sensitivity": "normal", "source": null, "commit": null, "review_at": null,
            "expires_at": null, "pinned": false, "status": "active", "supersedes": null,
            "superseded_by": null, "external_id": null, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "last_accessed_at": null,
            "valid_from": "2026-01-01T00:00:00Z", "use_count": 0, "content_hash": hash(2)
        });
        let events = [
            (
                1,
                "remember",
                serde_json::json!({"op": "remember", "id": 1, "at": "2026-01-01T00:00:00Z", "content_hash": hash(1), "status": "active", "extra": {"conflicts": []}}),
                hash(9),
            ),
            (
                2,
                "merge",
                serde_json::json!({"op": "merge", "id": 2, "at": "2026-01-02T00:00:00Z", "content_hash": hash(2), "status": "archived", "extra": {"merged_into": 1, "similarity": 0.7578125}}),
                "not-a-hex-receipt".to_string(),
            ),
        ];
        {
            let conn = Connection::open(&path).unwrap();
            for (version, migration) in schema::MIGRATIONS.iter().enumerate().take(7) {
                conn.execute_batch(migration).unwrap();
                conn.execute_batch(&format!("PRAGMA user_version = {}", version + 1))
                    .unwrap();
            }
            for (id, status, body) in [
                (1, "active", "the first body"),
                (2, "archived", "the second body"),
            ] {
                conn.execute(
                    "INSERT INTO memories (id, project, type, body, confidence, trust, trust_zone, sensitivity, status, \
                     created_at, updated_at, valid_from, content_hash, minhash, retired_at) \
                     VALUES (?1, 'p', 'episode', ?2, 'reported', 'captured', 'private_self', 'normal', ?3, \
                     '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?4, ?5, ?6)",
                    params![id, body, status, hash(id as u8), vec![7u8; 512], (status == "archived").then_some("2026-01-02T00:00:00Z")],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO memories_fts (rowid, title, summary, tags, body) VALUES (?1, NULL, NULL, '', ?2)",
                    params![id, body],
                )
                .unwrap();
            }
            conn.execute(
                "INSERT INTO history (memory_id, version, at, op, actor, snapshot) VALUES (2, 1, '2026-01-02T00:00:00Z', 'merge', 'me', ?1)",
                [snapshot.to_string()],
            )
            .unwrap();
            for (memory_id, op, detail, receipt) in &events {
                conn.execute(
                    "INSERT INTO events (at, op, memory_id, project, detail, receipt) VALUES (?1, ?2, ?3, 'p', ?4, ?5)",
                    params![detail["at"].as_str().unwrap(), op, memory_id, detail.to_string(), receipt],
                )
                .unwrap();
            }
        }

        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let reader = store.reader();
        assert_eq!(reader.get(1).unwrap().unwrap().content_hash, hash(1));
        let archived = reader.get(2).unwrap().unwrap();
        assert_eq!(archived.content_hash, hash(2));
        assert_eq!(reader.find_by_hash_any_status(&hash(2)).unwrap()[0].id, 2);
        assert_eq!(reader.merged_into(2).unwrap(), Some(1));
        let history = reader.history(2).unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].snapshot, snapshot);
        let stored: Vec<(serde_json::Value, String)> = reader
            .events(None, 0)
            .unwrap()
            .into_iter()
            .map(|e| (e.detail, e.receipt))
            .collect();
        let expected: Vec<(serde_json::Value, String)> = events
            .iter()
            .map(|(_, _, d, r)| (d.clone(), r.clone()))
            .collect();
        assert_eq!(stored, expected);
        assert!(reader.meta("vacuum_due").unwrap().is_some());
        let found: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'second'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(found, 1);

        // Schema v10: a record merged before it stays whole and indexed until it is packed
        // (`doctor --repair`); packed, it reads the same and leaves the index.
        assert_eq!(store.reader().merged_away_unpacked().unwrap(), vec![(2, 1)]);
        assert!(store.write(|tx| tx.pack_merged(2, 1)).unwrap());
        assert!(store.reader().merged_away_unpacked().unwrap().is_empty());
        assert_eq!(
            serde_json::to_value(store.reader().get(2).unwrap().unwrap()).unwrap(),
            serde_json::to_value(&archived).unwrap()
        );
        let indexed = |store: &Store| -> (Option<i64>, i64) {
            store
                .conn
                .query_row(
                    "SELECT (SELECT merged_into FROM memories WHERE id = 2), \
                     (SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'second')",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap()
        };
        assert_eq!(indexed(&store), (Some(1), 0));
        assert_eq!(store.fts_integrity_check().unwrap(), None);

        // A change after the migration is a delta; the walk crosses into the v7 snapshot.
        let mut restored = archived.clone();
        restored.status = cairn_core::record::Status::Active;
        restored.retired_at = None;
        restored.updated_at = "2026-01-03T00:00:00Z".into();
        store
            .write(|tx| {
                tx.touch(&[2], "2026-01-04T00:00:00Z")?;
                let current = tx.reader().get(2)?.unwrap();
                tx.update_memory(&restored, None, &current, "restore", "me")?;
                tx.touch(&[2], "2026-01-05T00:00:00Z")?;
                tx.append_event(
                    &crate::NewEvent {
                        at: "2026-01-03T00:00:00Z",
                        op: "restore",
                        memory_id: Some(2),
                        project: Some("p"),
                        detail: &serde_json::json!({"op": "restore", "id": 2, "at": "2026-01-03T00:00:00Z", "status": "active", "content_hash": hash(2)}),
                        actor: "me",
                    },
                    &hash(8),
                )
            })
            .unwrap();
        let history = store.reader().history(2).unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[0].snapshot, snapshot);
        let mut before_restore = serde_json::to_value(&archived).unwrap();
        before_restore["use_count"] = 1.into();
        before_restore["last_accessed_at"] = "2026-01-04T00:00:00Z".into();
        assert_eq!(history[1].snapshot, before_restore);
        let last = store.reader().events(Some(2), 1).unwrap().pop().unwrap();
        assert_eq!(last.detail["id"], 2);
        assert_eq!(last.detail["op"], "restore");
        assert_eq!(last.detail["content_hash"], hash(2));
        assert_eq!(last.detail.as_object().unwrap().len(), 5);
        assert_eq!(last.receipt, hash(8));
        // Restored: whole, and found again.
        assert_eq!(indexed(&store), (None, 1));
        assert_eq!(store.fts_integrity_check().unwrap(), None);
    }

    /// A merged-away body is stored against its base record; when recovery cannot read the
    /// base, the record says so instead of every read of the recovered brain failing.
    #[test]
    fn recovery_without_a_merged_records_base_says_what_was_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        let body = |edit: &str| {
            let mut words: Vec<String> = (0..40).map(|i| format!("word{i}")).collect();
            words[7] = edit.to_string();
            words.join(" ")
        };
        let record = |text: String, status: &str| {
            crate::testing::memory("p", cairn_core::record::MemoryType::Episode, &text, status)
        };
        let (kept, merged, lost) = store
            .write(|tx| {
                let kept = tx.insert_memory(&record(body("kept"), "active"), None)?;
                let merged = tx.insert_memory(&record(body("merged"), "archived"), None)?;
                let base = tx.insert_memory(&record(body("base"), "active"), None)?;
                let lost = tx.insert_memory(&record(body("lost"), "archived"), None)?;
                assert!(tx.pack_merged(merged, kept)?);
                assert!(tx.pack_merged(lost, base)?);
                // The base's page is damaged: its row cannot be read back.
                tx.tx
                    .execute("DELETE FROM memories WHERE id = ?1", [base])
                    .unwrap();
                Ok::<_, StoreError>((kept, merged, lost))
            })
            .unwrap();
        let _ = kept;
        drop(store);
        let target = dir.path().join("recovered.db");
        let report = Store::recover_into(&path, &target).unwrap();
        let orphaned = report
            .iter()
            .find(|t| t.table.starts_with("memories (merged-away"))
            .expect("the lost bodies are reported");
        assert_eq!(orphaned.lost, 1);
        let recovered = Store::open(&target).unwrap();
        let reader = recovered.reader();
        assert_eq!(reader.get(merged).unwrap().unwrap().body, body("merged"));
        let note = reader.get(lost).unwrap().unwrap().body;
        assert!(note.contains("could not be recovered"), "{note}");
        assert_eq!(recovered.fts_integrity_check().unwrap(), None);
    }

    /// Short processes that each write a little never checkpoint on close; the log must still
    /// stay bounded (a write past `WAL_TRUNCATE_BYTES` truncates it) and lose nothing.
    #[test]
    fn the_write_ahead_log_stays_bounded_across_short_processes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let wal = dir.path().join("brain.db-wal");
        let mut largest = 0u64;
        for round in 0..120 {
            let mut store = Store::open(&path).unwrap();
            store
                .write(|tx| tx.set_meta(&format!("k{round}"), &"x".repeat(30_000)))
                .unwrap();
            drop(store);
            largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        }
        assert!(
            largest <= WAL_TRUNCATE_BYTES + 256 * 1024,
            "the log reached {largest} bytes"
        );
        let store = Store::open(&path).unwrap();
        for round in 0..120 {
            let value = store.reader().meta(&format!("k{round}")).unwrap();
            assert_eq!(value.map(|v| v.len()), Some(30_000), "round {round}");
        }
    }

    /// A store that leaves checkpoints to another connection never checkpoints on its writes
    /// below its cap; the other connection's passive checkpoint copies the log, the next write
    /// starts it over (truncated), nothing is lost; past the cap the writer checkpoints itself.
    #[test]
    fn a_writer_leaves_checkpoints_to_a_checkpointer_up_to_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut writer = Store::open(&path).unwrap();
        writer.leave_checkpoints().unwrap();
        let checkpointer = Store::open(&path).unwrap();
        let mut round = 0;
        while writer.wal_bytes() <= 2 * WAL_TRUNCATE_BYTES {
            writer
                .write(|tx| tx.set_meta(&format!("k{round}"), &"x".repeat(30_000)))
                .unwrap();
            round += 1;
        }
        assert_eq!(writer.checkpoints_run(), 0, "the writer left them");
        let pass = checkpointer.checkpoint_passive().unwrap();
        assert!(pass.frames > 0 && pass.copied == pass.frames, "{pass:?}");
        writer.write(|tx| tx.set_meta("after", "y")).unwrap();
        assert!(
            writer.wal_bytes() <= WAL_TRUNCATE_BYTES,
            "the log started over and was cut back: {} bytes",
            writer.wal_bytes()
        );
        // No checkpointer: the writer's own cap bounds the log.
        let mut largest = 0;
        for more in 0..80 {
            writer
                .write(|tx| tx.set_meta(&format!("big{more}"), &"z".repeat(300_000)))
                .unwrap();
            largest = largest.max(writer.wal_bytes());
        }
        assert!(writer.checkpoints_run() > 0, "past its cap it checkpoints");
        assert!(
            largest <= WAL_WRITER_CAP_BYTES + 512 * 1024,
            "the log reached {largest} bytes"
        );
        let fresh = Store::open(&path).unwrap();
        for k in 0..round {
            let value = fresh.reader().meta(&format!("k{k}")).unwrap();
            assert_eq!(value.map(|v| v.len()), Some(30_000), "round {k}");
        }
        assert_eq!(fresh.reader().meta("after").unwrap().as_deref(), Some("y"));
        assert_eq!(
            fresh.reader().meta("big79").unwrap().map(|v| v.len()),
            Some(300_000)
        );
    }

    /// A memory-mapped connection reads what another connection writes after the map was made
    /// (the write-ahead log moves and, past `WAL_TRUNCATE_BYTES`, is checkpointed into the
    /// mapped file: the map must not serve stale pages), and the map can be
    /// turned off again.
    #[test]
    fn a_mapped_connection_sees_every_later_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mapped = Store::open(&path).unwrap();
        assert_eq!(mapped.map_memory(64 << 20).unwrap(), 64 << 20);
        let mut writer = Store::open(&path).unwrap();
        for round in 0..50 {
            writer
                .write(|tx| tx.set_meta(&format!("k{round}"), &"y".repeat(30_000 + round)))
                .unwrap();
            let value = mapped.reader().meta(&format!("k{round}")).unwrap();
            assert_eq!(
                value.map(|v| v.len()),
                Some(30_000 + round),
                "round {round}"
            );
        }
        assert_eq!(mapped.map_memory(0).unwrap(), 0);
        assert_eq!(
            mapped.reader().meta("k49").unwrap().map(|v| v.len()),
            Some(30_049)
        );
    }
}
