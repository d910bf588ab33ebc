//! The service's access tokens (schema `MIGRATION_SERVICE_TOKENS`): rows keyed by the SHA-256
//! of the secret, never the secret itself. Making secrets, comparing them and deciding what a
//! token may do live in the engine (`cairn_engine::tokens`).

use crate::{Reader, Result, StoreError, WriteTx};
use rusqlite::{OptionalExtension, params};

/// One token as stored (its secret is not: only `secret_hash`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    /// SHA-256 of the secret, 32 bytes.
    pub secret_hash: Vec<u8>,
    /// `None`: every project.
    pub project: Option<String>,
    pub role: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
}

const COLUMNS: &str = "id, name, secret_hash, project, role, created_at, expires_at, revoked_at";

fn token_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<TokenRow> {
    Ok(TokenRow {
        id: row.get(0)?,
        name: row.get(1)?,
        secret_hash: row.get(2)?,
        project: row.get(3)?,
        role: row.get(4)?,
        created_at: row.get(5)?,
        expires_at: row.get(6)?,
        revoked_at: row.get(7)?,
    })
}

impl WriteTx<'_> {
    /// Stores a new token; `None` when a live token already has this name.
    pub fn insert_token(
        &self,
        name: &str,
        secret_hash: &[u8],
        project: Option<&str>,
        role: &str,
        created_at: &str,
        expires_at: Option<&str>,
    ) -> Result<Option<i64>> {
        let live: Option<i64> = self
            .tx
            .query_row(
                "SELECT id FROM service_tokens WHERE name = ?1 AND revoked_at IS NULL",
                [name],
                |row| row.get(0),
            )
            .optional()
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        if live.is_some() {
            return Ok(None);
        }
        self.tx
            .execute(
                "INSERT INTO service_tokens (name, secret_hash, project, role, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![name, secret_hash, project, role, created_at, expires_at],
            )
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(Some(self.tx.last_insert_rowid()))
    }

    /// Revokes the live token called `name`; the row as revoked, or `None` if none is live.
    pub fn revoke_token(&self, name: &str, at: &str) -> Result<Option<TokenRow>> {
        let changed = self
            .tx
            .execute(
                "UPDATE service_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL",
                params![name, at],
            )
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        if changed == 0 {
            return Ok(None);
        }
        self.tx
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM service_tokens WHERE name = ?1 AND revoked_at = ?2 ORDER BY id DESC LIMIT 1"
                ),
                params![name, at],
                token_row,
            )
            .optional()
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }
}

impl Reader<'_> {
    /// The token whose secret hashes to `secret_hash`, revoked or not.
    pub fn token_by_hash(&self, secret_hash: &[u8]) -> Result<Option<TokenRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM service_tokens WHERE secret_hash = ?1"
            ))
            .and_then(|mut statement| statement.query_row([secret_hash], token_row).optional())
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }

    /// Every token, oldest first.
    pub fn tokens(&self) -> Result<Vec<TokenRow>> {
        let mut statement = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM service_tokens ORDER BY id"))
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        let rows = statement
            .query_map([], token_row)
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[test]
    fn a_name_is_unique_among_live_tokens_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let first = store
            .write(|tx| tx.insert_token("ci", &[1; 32], Some("p"), "read", "t0", None))
            .unwrap();
        assert!(first.is_some());
        let twin = store
            .write(|tx| tx.insert_token("ci", &[2; 32], None, "write", "t0", None))
            .unwrap();
        assert_eq!(twin, None, "a live name cannot be given twice");
        let revoked = store
            .write(|tx| tx.revoke_token("ci", "t1"))
            .unwrap()
            .unwrap();
        assert_eq!(revoked.revoked_at.as_deref(), Some("t1"));
        assert_eq!(store.write(|tx| tx.revoke_token("ci", "t2")).unwrap(), None);
        let again = store
            .write(|tx| tx.insert_token("ci", &[3; 32], None, "admin", "t2", Some("t9")))
            .unwrap();
        assert!(again.is_some(), "a revoked name can be given again");
        let found = store.reader().token_by_hash(&[3; 32]).unwrap().unwrap();
        assert_eq!(found.role, "admin");
        assert_eq!(found.project, None);
        assert_eq!(store.reader().tokens().unwrap().len(), 2);
        assert_eq!(store.reader().token_by_hash(&[9; 32]).unwrap(), None);
    }
}
