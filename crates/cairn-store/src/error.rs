//! The store's errors, mapped from SQLite's codes to what they mean for the user.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no brain at {}: nothing to read yet (a first `cairn remember` creates it)", path.display())]
    Missing { path: PathBuf },
    #[error(
        "the brain at {} is locked by another process and stayed locked for {:.1} s; nothing was written — retry, or find the process holding it",
        path.display(), crate::busy_timeout().as_secs_f64()
    )]
    Locked { path: PathBuf },
    #[error(
        "the brain at {} is read-only (file or directory permissions, or a read-only mount); nothing was written — fix the permissions or point --db at a writable file",
        path.display()
    )]
    ReadOnly { path: PathBuf },
    #[error(
        "the brain at {} is damaged or is not a cairn database ({detail}); nothing was changed or deleted — run `cairn doctor` to check it and recover what can be read",
        path.display()
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "the brain at {} has schema version {found}, newer than this cairn understands ({known}); nothing was changed — upgrade cairn to open it",
        path.display()
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "the brain at {} has schema version {found} and needs migrating; open it once for writing (any cairn write command) to migrate it",
        path.display()
    )]
    NeedsMigration { path: PathBuf, found: i64 },
    #[error("the disk is full while writing {}; the write was rolled back and nothing was lost — free space and retry", path.display())]
    DiskFull { path: PathBuf },
    #[error("cannot use {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("database error on {}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("stored data is malformed in {}: {detail}", path.display())]
    Malformed { path: PathBuf, detail: String },
    #[error(
        "the table {table} has no column {column:?} (its columns: {known}); the row was not written"
    )]
    UnknownColumn {
        table: &'static str,
        column: String,
        known: String,
    },
    #[error("the table {table} needs a value for {column:?}; the row was not written")]
    MissingColumn { table: &'static str, column: String },
    /// A PostgreSQL server could not be reached or refused a statement. `url` is the address
    /// without its password, and `detail` never holds the password either.
    #[error("PostgreSQL at {url}: {detail}")]
    Postgres { url: String, detail: String },
    /// `cairn migrate` refused or could not go on (a different brain at the destination, a
    /// value that cannot be carried losslessly, an unsupported URL option).
    #[error("{detail}")]
    Migration { detail: String },
    /// An engine opened on a PostgreSQL brain was asked for something only the SQLite backend
    /// does so far (everything but recall). `url` is the address without its password.
    #[error(
        "not available on a PostgreSQL store yet: only recall reads the brain at {url} so far; nothing was read or changed — use the brain file for this (`cairn migrate --from <url> --to brain.db` copies it back)"
    )]
    NotOnPostgres { url: String },
}

impl StoreError {
    pub fn from_sqlite(error: rusqlite::Error, path: &std::path::Path) -> StoreError {
        use rusqlite::ErrorCode;
        let path = path.to_path_buf();
        if let rusqlite::Error::SqliteFailure(failure, message) = &error {
            match failure.code {
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                    return StoreError::Locked { path };
                }
                ErrorCode::ReadOnly => return StoreError::ReadOnly { path },
                ErrorCode::CannotOpen
                    if !path.exists() && path.parent().is_some_and(|p| p.exists()) =>
                {
                    return StoreError::ReadOnly { path };
                }
                ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt => {
                    let detail = message.clone().unwrap_or_else(|| failure.to_string());
                    return StoreError::Corrupt { path, detail };
                }
                ErrorCode::DiskFull => return StoreError::DiskFull { path },
                _ => {}
            }
        }
        if let rusqlite::Error::FromSqlConversionFailure(column, _, source) = &error {
            return StoreError::Malformed {
                path,
                detail: format!(
                    "{source} (column {column}); run `cairn doctor` to check the brain"
                ),
            };
        }
        StoreError::Sqlite {
            path,
            source: error,
        }
    }
}
