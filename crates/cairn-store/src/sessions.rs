//! A session's captured turns, read back for fact extraction (issue 18): the `episode` records
//! a capture stored with the session's source, in order, after a given record id.

use crate::{Reader, Result, StoreError};
use rusqlite::params;

impl Reader<'_> {
    fn sessions_map(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |e| StoreError::from_sqlite(e, self.path)
    }

    /// The active turns (`episode` records) captured from session `session_id` with an id above
    /// `after`, lowest id first, at most `limit`: `(id, body)`.
    pub fn session_turns(
        &self,
        session_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT id, body FROM memories WHERE type = 'episode' AND status = 'active' \
                 AND merged_into IS NULL AND source IN (?1, ?2) AND id > ?3 ORDER BY id LIMIT ?4",
            )
            .map_err(self.sessions_map())?;
        let rows = statement
            .query_map(
                params![
                    format!("transcript of session {session_id}"),
                    format!("turn of session {session_id}"),
                    after,
                    limit as i64
                ],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(self.sessions_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.sessions_map())
    }

    /// Whether session `session_id` has an active captured turn with an id above `after` (what
    /// `session_turns(session_id, after, 1)` finds, without reading a body).
    ///
    /// It walks the active episodes newest first (`memories_status` holds them in id order)
    /// and stops at the first of this session's, or at `after`. A session's end comes right
    /// after its captures, so its newest turn is among the newest episodes: the walk reads a
    /// few rows where the oldest-first walk of `session_turns` read every active episode before
    /// the session's (tens of MB at 100k records). A session with nothing above `after` still
    /// reads the episodes above `after`.
    pub fn has_session_turns_after(&self, session_id: &str, after: i64) -> Result<bool> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT id FROM memories INDEXED BY memories_status \
                 WHERE status = 'active' AND type = 'episode' AND id > ?3 \
                 AND merged_into IS NULL AND source IN (?1, ?2) ORDER BY id DESC LIMIT 1",
            )
            .map_err(self.sessions_map())?;
        let found = statement
            .exists(params![
                format!("transcript of session {session_id}"),
                format!("turn of session {session_id}"),
                after,
            ])
            .map_err(self.sessions_map())?;
        Ok(found)
    }

    /// The sessions capture has seen, most recently captured first: the transcripts it read
    /// (their offsets) and the sessions whose turns a client handed over one by one (Gemini,
    /// Cursor: episodes with the source `turn of session ID`, no offset).
    pub fn captured_sessions(&self, limit: usize) -> Result<Vec<String>> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT session FROM ( \
                   SELECT session_id AS session, updated_at AS at FROM capture_offsets \
                   UNION ALL \
                   SELECT substr(source, 17), created_at FROM memories \
                   WHERE type = 'episode' AND source LIKE 'turn of session %' \
                 ) GROUP BY session ORDER BY max(at) DESC, session LIMIT ?1",
            )
            .map_err(self.sessions_map())?;
        let rows = statement
            .query_map([limit as i64], |row| row.get(0))
            .map_err(self.sessions_map())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.sessions_map())
    }
}
