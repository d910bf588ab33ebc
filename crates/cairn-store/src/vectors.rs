//! The semantic index's rows: one vector per record, which model made them (in `meta`), what is
//! still pending. No policy: which text is embedded and when is the engine's business.

use crate::{Reader, Result, StoreError, WriteTx};
use cairn_core::memory::Memory;
use cairn_core::vector::{Bf16, from_bf16};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

/// `meta` key of the model id the brain's vectors come from.
pub const META_EMBED_MODEL: &str = "embed_model";
/// `meta` key of their dimension.
pub const META_EMBED_DIM: &str = "embed_dim";

/// Which model a brain's vectors were made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct VectorSpace {
    pub model: String,
    pub dimension: usize,
}

impl VectorSpace {
    /// The space the brain's meta rows name (its model and dimension); `None` before anything
    /// was embedded, or when the dimension is not a number.
    pub(crate) fn from_meta(model: Option<String>, dimension: Option<String>) -> Option<Self> {
        let (model, dimension) = (model?, dimension?);
        let dimension = dimension.parse::<usize>().ok()?;
        Some(VectorSpace { model, dimension })
    }
}

/// How complete the semantic index is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct VectorCounts {
    /// Records that should have a vector (every record; archived ones too, so a restore or an
    /// `--all` recall finds them).
    pub records: i64,
    pub with_vector: i64,
}

impl VectorCounts {
    pub fn pending(&self) -> i64 {
        (self.records - self.with_vector).max(0)
    }
}

/// Every stored vector in one contiguous row-major matrix, ids in the same order. The brain
/// keeps `f32`; the matrix keeps bfloat16, half the memory (`cairn_core::vector`, "Rows in
/// memory").
#[derive(Debug, Clone, Default)]
pub struct VectorMatrix {
    pub dimension: usize,
    pub ids: Vec<i64>,
    pub data: Vec<Bf16>,
    /// Per row, the [`text_fingerprint`] of the text its vector was made from: what a reader
    /// compares to learn which rows changed since it loaded them.
    pub fingerprints: Vec<u64>,
    /// Rows skipped because their blob did not hold `dimension` floats (damage).
    pub skipped: usize,
}

impl VectorMatrix {
    /// Row `row`'s values.
    pub fn row(&self, row: usize) -> &[Bf16] {
        &self.data[row * self.dimension..(row + 1) * self.dimension]
    }

    /// The vector of record `id` (as `f32`), if the matrix holds one.
    pub fn vector(&self, id: i64) -> Option<Vec<f32>> {
        let row = self.ids.binary_search(&id).ok()?;
        Some(from_bf16(self.row(row)))
    }
}

/// A 64-bit fingerprint of a vector's `text_hash` (FNV-1a): two rows with the same
/// fingerprint under the same model hold the same vector, up to a 2⁻⁶⁴ collision.
pub fn text_fingerprint(text_hash: &str) -> u64 {
    text_hash.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Little-endian f32 bytes of a vector.
pub fn vector_to_blob(vector: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(vector.len() * 4);
    for value in vector {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// The vector in a blob, or `None` when the blob is not `dimension` floats long.
pub fn blob_to_vector(blob: &[u8], dimension: usize) -> Option<Vec<f32>> {
    if blob.len() != dimension * 4 {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

impl WriteTx<'_> {
    /// Stores (or replaces) the vector of a record.
    pub fn put_vector(&self, memory_id: i64, text_hash: &str, vector: &[f32]) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO vectors (memory_id, text_hash, vector) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (memory_id) DO UPDATE SET text_hash = excluded.text_hash, vector = excluded.vector",
            )
            .and_then(|mut s| s.execute(params![memory_id, text_hash, vector_to_blob(vector)]))
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(())
    }

    /// Drops the vector of one record (it becomes pending: its embedded text changed).
    pub fn drop_vector(&self, memory_id: i64) -> Result<()> {
        self.tx
            .execute("DELETE FROM vectors WHERE memory_id = ?1", [memory_id])
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(())
    }

    /// Drops every vector and records the new vector space (a model switch).
    pub fn reset_vectors(&self, space: &VectorSpace) -> Result<usize> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let dropped = self.tx.execute("DELETE FROM vectors", []).map_err(map)?;
        self.set_vector_space(space)?;
        Ok(dropped)
    }

    /// Records which model the vectors come from.
    pub fn set_vector_space(&self, space: &VectorSpace) -> Result<()> {
        self.set_meta(META_EMBED_MODEL, &space.model)?;
        self.set_meta(META_EMBED_DIM, &space.dimension.to_string())
    }

    /// Drops vector rows whose record no longer exists (outside tampering only: a trigger
    /// drops them on delete).
    pub fn drop_orphan_vectors(&self) -> Result<usize> {
        self.tx
            .execute(
                "DELETE FROM vectors WHERE memory_id NOT IN (SELECT id FROM memories)",
                [],
            )
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }
}

impl Reader<'_> {
    /// The model the brain's vectors come from; `None` before anything was embedded.
    pub fn vector_space(&self) -> Result<Option<VectorSpace>> {
        Ok(VectorSpace::from_meta(
            self.meta(META_EMBED_MODEL)?,
            self.meta(META_EMBED_DIM)?,
        ))
    }

    pub fn vector_counts(&self) -> Result<VectorCounts> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let count = |sql: &str| -> Result<i64> {
            self.conn.query_row(sql, [], |row| row.get(0)).map_err(map)
        };
        Ok(VectorCounts {
            // A dream's merged-away records have no vector (schema v10): their survivor stands
            // for them, as in the full-text index.
            records: count(
                "SELECT (SELECT count(*) FROM memories) - (SELECT count(*) FROM memories WHERE merged_into IS NOT NULL)",
            )?,
            with_vector: count(
                "SELECT count(*) FROM vectors v WHERE EXISTS (SELECT 1 FROM memories m WHERE m.id = v.memory_id AND m.merged_into IS NULL)",
            )?,
        })
    }

    /// Per vector of an indexed record (not merged away), in id order: the record's id, the
    /// hash of the text it was made from and the blob's length in bytes (what `doctor`
    /// compares with the records and the model's dimension).
    pub fn vector_rows(&self) -> Result<Vec<(i64, String, usize)>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare(
                "SELECT v.memory_id, v.text_hash, length(v.vector) FROM vectors v \
                 JOIN memories m ON m.id = v.memory_id WHERE m.merged_into IS NULL ORDER BY v.memory_id",
            )
            .map_err(map)?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get::<_, i64>(2)?.max(0) as usize,
                ))
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map)
    }

    /// Rows in `vectors` whose record is gone.
    pub fn orphan_vectors(&self) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT count(*) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = v.memory_id)",
                [],
                |row| row.get(0),
            )
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }

    /// Ids of records without a vector, above `after`, oldest first, at most `limit`.
    pub fn pending_vector_ids(&self, after: i64, limit: usize) -> Result<Vec<i64>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT m.id FROM memories m WHERE m.id > ?1 AND m.merged_into IS NULL \
                 AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_id = m.id) \
                 ORDER BY m.id LIMIT ?2",
            )
            .map_err(map)?;
        let rows = statement
            .query_map(params![after, limit.min(i64::MAX as usize) as i64], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map)
    }

    /// Up to `count` episodes of the same project and scope created before `memory` and at
    /// most `window_secs` before it, newest first: the turns a conversation turn follows.
    pub fn preceding_episodes(
        &self,
        memory: &Memory,
        count: usize,
        window_secs: i64,
    ) -> Result<Vec<Memory>> {
        self.neighbouring_episodes(memory, count, window_secs, false)
    }

    /// Up to `count` episodes of the same project and scope created after `memory` and at
    /// most `window_secs` after it, oldest first: the turns that answer it.
    pub fn following_episodes(
        &self,
        memory: &Memory,
        count: usize,
        window_secs: i64,
    ) -> Result<Vec<Memory>> {
        self.neighbouring_episodes(memory, count, window_secs, true)
    }

    fn neighbouring_episodes(
        &self,
        memory: &Memory,
        count: usize,
        window_secs: i64,
        after: bool,
    ) -> Result<Vec<Memory>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let map = |e| StoreError::from_sqlite(e, self.path);
        let Ok(created) = chrono::DateTime::parse_from_rfc3339(&memory.created_at) else {
            return Ok(Vec::new());
        };
        let window = chrono::Duration::seconds(window_secs.max(0));
        let bound = cairn_core::time::format_ts(
            (if after {
                created + window
            } else {
                created - window
            })
            .with_timezone(&chrono::Utc),
        );
        let sql = if after {
            "SELECT id FROM memories WHERE type = 'episode' AND project = ?1 AND scope = ?2 AND merged_into IS NULL \
             AND created_at <= ?3 AND created_at >= ?4 AND (created_at > ?4 OR id > ?5) \
             ORDER BY created_at, id LIMIT ?6"
        } else {
            "SELECT id FROM memories WHERE type = 'episode' AND project = ?1 AND scope = ?2 AND merged_into IS NULL \
             AND created_at >= ?3 AND created_at <= ?4 AND (created_at < ?4 OR id < ?5) \
             ORDER BY created_at DESC, id DESC LIMIT ?6"
        };
        let ids: Vec<i64> = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| {
                s.query_map(
                    params![
                        memory.project.as_deref().unwrap_or(""),
                        memory.scope,
                        bound,
                        memory.created_at,
                        memory.id,
                        count as i64
                    ],
                    |row| row.get::<_, i64>(0),
                )?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(map)?;
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(previous) = self.get(id)? {
                found.push(previous);
            }
        }
        Ok(found)
    }

    /// A stored vector made from exactly this text (the cache by content hash).
    pub fn vector_for_text(&self, text_hash: &str, dimension: usize) -> Result<Option<Vec<f32>>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT vector FROM vectors WHERE text_hash = ?1 LIMIT 1")
            .and_then(|mut s| s.query_row([text_hash], |row| row.get(0)).optional())
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(blob.and_then(|blob| blob_to_vector(&blob, dimension)))
    }

    /// The vector of one record.
    pub fn vector_of(&self, memory_id: i64, dimension: usize) -> Result<Option<Vec<f32>>> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT vector FROM vectors WHERE memory_id = ?1")
            .and_then(|mut s| s.query_row([memory_id], |row| row.get(0)).optional())
            .map_err(|e| StoreError::from_sqlite(e, self.path))?;
        Ok(blob.and_then(|blob| blob_to_vector(&blob, dimension)))
    }

    /// How many times the `vectors` table changed (schema v9 triggers); `None` when the
    /// counter is missing (then a reader must compare fingerprints).
    pub fn vectors_version(&self) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vectors_version'")
            .and_then(|mut s| s.query_row([], |row| row.get(0)).optional())
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }

    /// `(memory_id, text_fingerprint)` of every stored vector in id order, read from the
    /// text-hash index alone (none of the vectors' bytes): how a long-lived reader finds the
    /// rows that changed since it loaded the matrix.
    pub fn vector_fingerprints(&self) -> Result<Vec<(i64, u64)>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare_cached("SELECT memory_id, text_hash FROM vectors INDEXED BY vectors_text_hash")
            .map_err(map)?;
        let mut rows = statement.query([]).map_err(map)?;
        let mut found = Vec::new();
        while let Some(row) = rows.next().map_err(map)? {
            let id: i64 = row.get(0).map_err(map)?;
            let hash = row.get_ref(1).map_err(map)?.as_str().unwrap_or("");
            found.push((id, text_fingerprint(hash)));
        }
        found.sort_unstable_by_key(|&(id, _)| id);
        Ok(found)
    }

    /// Every vector of `dimension` floats, in id order, as one contiguous matrix.
    pub fn load_vectors(&self, dimension: usize) -> Result<VectorMatrix> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let rows: i64 = self
            .conn
            .query_row("SELECT count(*) FROM vectors", [], |row| row.get(0))
            .map_err(map)?;
        let mut matrix = VectorMatrix {
            dimension,
            ids: Vec::with_capacity(rows as usize),
            data: Vec::with_capacity(rows as usize * dimension),
            fingerprints: Vec::with_capacity(rows as usize),
            skipped: 0,
        };
        let mut statement = self
            .conn
            // Rowid order (memory_id is the rowid): no sort needed. (Memory-mapping the file
            // made this ~30 % faster but counts the mapped file in RSS: 510 MB vs 271 MB peak
            // for a whole-process recall at 100k; not worth it.)
            .prepare_cached("SELECT memory_id, vector, text_hash FROM vectors")
            .map_err(map)?;
        let mut cursor = statement.query([]).map_err(map)?;
        while let Some(row) = cursor.next().map_err(map)? {
            let id: i64 = row.get(0).map_err(map)?;
            let blob = row.get_ref(1).map_err(map)?.as_blob().unwrap_or(&[]);
            if blob.len() != dimension * 4 {
                matrix.skipped += 1;
                continue;
            }
            matrix.ids.push(id);
            matrix.fingerprints.push(text_fingerprint(
                row.get_ref(2).map_err(map)?.as_str().unwrap_or(""),
            ));
            matrix.data.extend(
                blob.chunks_exact(4)
                    .map(|b| Bf16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            );
        }
        Ok(matrix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_wrong_lengths_are_refused() {
        let vector = vec![0.5f32, -1.25, 3.0e-7, 0.0];
        let blob = vector_to_blob(&vector);
        assert_eq!(blob.len(), 16);
        assert_eq!(blob_to_vector(&blob, 4).unwrap(), vector);
        assert!(blob_to_vector(&blob, 3).is_none());
        assert!(blob_to_vector(&blob[..15], 4).is_none());
    }
}
