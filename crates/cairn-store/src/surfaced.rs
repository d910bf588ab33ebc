//! Passive use (issue 18): when the brief or the prompt hook hands a record to an agent, the
//! record is *surfaced*. One row per record with the last time and how many times; kept apart
//! from `memories` so it changes neither `use_count` nor anything recall ranks on. Decay reads
//! it (idleness runs from the later of last access and last surfacing).

use crate::{Reader, Result, StoreError, WriteTx};
use rusqlite::{OptionalExtension, params};

impl WriteTx<'_> {
    fn surfaced_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// Marks the records of `ids` that exist as surfaced at `at` (a later time never goes
    /// back); returns how many rows changed.
    pub fn mark_surfaced(&self, ids: &[i64], at: &str) -> Result<usize> {
        let mut statement = self
            .tx
            .prepare_cached(
                "INSERT INTO surfacings (memory_id, surfaced_at, times) \
                 SELECT id, ?2, 1 FROM memories WHERE id = ?1 \
                 ON CONFLICT(memory_id) DO UPDATE SET surfaced_at = max(surfaced_at, excluded.surfaced_at), \
                 times = times + 1",
            )
            .map_err(self.surfaced_map())?;
        let mut changed = 0;
        for id in ids {
            changed += statement
                .execute(params![id, at])
                .map_err(self.surfaced_map())?;
        }
        Ok(changed)
    }
}

impl Reader<'_> {
    /// When the record was last handed to an agent by the brief or the prompt hook, and how
    /// many times in all; `None` when never.
    pub fn surfaced(&self, id: i64) -> Result<Option<(String, i64)>> {
        self.conn
            .query_row(
                "SELECT surfaced_at, times FROM surfacings WHERE memory_id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(|e| StoreError::from_sqlite(e, self.path))
    }
}
