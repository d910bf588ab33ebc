//! Lexical candidates: FTS5 BM25 with field weights title 3, summary 2, tags 2, body 1
//! (k1 1.2 and b 0.75 are FTS5's own constants), filtered in the same statement.

use crate::{Reader, Result, StoreError};
use rusqlite::OptionalExtension;
use rusqlite::types::Value;

/// What to search and which records may answer.
#[derive(Debug, Clone, Default)]
pub struct LexicalQuery<'a> {
    /// An FTS5 match expression built by `cairn_core::query` (quoted terms only).
    pub match_expression: &'a str,
    /// Projects to search; `None` inside is personal.
    pub projects: &'a [Option<String>],
    /// Allowed scopes (the scope chain); `None` = every scope.
    pub scopes: Option<&'a [String]>,
    pub types: Option<&'a [cairn_core::record::MemoryType]>,
    /// Also return archived records (superseded ones always come back so the engine can follow
    /// them forward to their successor).
    pub include_archived: bool,
    /// Replay: only records created by then, with the status they had then.
    pub as_of: Option<&'a str>,
    pub since: Option<&'a str>,
    pub until: Option<&'a str>,
    /// Only records a reader in this trust zone may see (`TrustZone::may_see`); `None` = all.
    pub visible_to: Option<cairn_core::record::TrustZone>,
    pub limit: usize,
}

/// An episode and the episodes right before and after it in its conversation:
/// `(id, previous, next)`.
pub type EpisodeNeighbours = (i64, Option<i64>, Option<i64>);

/// One lexical candidate; `strength` is the negated BM25 (higher is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalHit {
    pub id: i64,
    pub strength: f64,
}

/// Appends the candidate filters of `query` (project, scope chain, types, status, time window)
/// to `sql` as ` AND …` clauses over the alias `m`, with their values. Lexical and semantic
/// candidates pass the very same filters.
fn push_filters(query: &LexicalQuery<'_>, sql: &mut String, values: &mut Vec<Value>) {
    let mark = |value: Value, values: &mut Vec<Value>| {
        values.push(value);
        format!("?{}", values.len())
    };
    let projects: Vec<String> = query
        .projects
        .iter()
        .map(|p| mark(p.clone().unwrap_or_default().into(), values))
        .collect();
    sql.push_str(&format!(" AND m.project IN ({})", projects.join(", ")));
    if let Some(scopes) = query.scopes {
        let marks: Vec<String> = scopes
            .iter()
            .map(|s| mark(s.clone().into(), values))
            .collect();
        sql.push_str(&format!(" AND m.scope IN ({})", marks.join(", ")));
    }
    if let Some(types) = query.types {
        let marks: Vec<String> = types
            .iter()
            .map(|t| mark(t.as_str().to_string().into(), values))
            .collect();
        sql.push_str(&format!(" AND m.type IN ({})", marks.join(", ")));
    }
    match (query.as_of, query.include_archived) {
        (_, true) => {}
        (Some(as_of), false) => {
            let at = mark(as_of.to_string().into(), values);
            sql.push_str(&format!(
                    " AND (m.status != 'archived' OR (m.retired_at IS NOT NULL AND m.retired_at > {at}))"
                ));
        }
        (None, false) => sql.push_str(" AND m.status != 'archived'"),
    }
    if let Some(as_of) = query.as_of {
        let at = mark(as_of.to_string().into(), values);
        sql.push_str(&format!(" AND m.created_at <= {at}"));
    }
    if let Some(since) = query.since {
        let at = mark(since.to_string().into(), values);
        sql.push_str(&format!(" AND m.created_at >= {at}"));
    }
    if let Some(until) = query.until {
        let at = mark(until.to_string().into(), values);
        sql.push_str(&format!(" AND m.created_at <= {at}"));
    }
    // The same rule as `TrustZone::may_see`, in SQL so hidden records never use up the
    // candidate limit.
    match query.visible_to {
        None | Some(cairn_core::record::TrustZone::PrivateSelf) => {}
        Some(cairn_core::record::TrustZone::TrustedCollaborator) => {
            sql.push_str(" AND m.sensitivity != 'do_not_export'")
        }
        Some(
            cairn_core::record::TrustZone::OutsideContact
            | cairn_core::record::TrustZone::PaidPublic,
        ) => sql.push_str(" AND m.sensitivity = 'public_safe' AND m.trust_zone != 'private_self'"),
    }
}

/// How many of the best full-text matches the first pass of `lexical_search` ranks before the
/// filters (at least this many, or four times the limit).
pub(crate) const FIRST_PASS_WINDOW: usize = 200;

/// A scope or type filter is *narrow* when at most this many active records pass it: the
/// search then starts from those records (SQLite asks FTS5 about each) instead of ranking the
/// matches first. Counting stops at one more, through the `(project, scope)` or `(status,
/// type)` index, so deciding costs at most this many index entries.
pub(crate) const NARROW_FILTER_MATCHES: usize = 2_000;

impl Reader<'_> {
    /// The best `query.limit` matches that pass the filters, strongest first (ties: lower id).
    ///
    /// Two passes with one answer: first BM25 ranks inside the full-text index alone and only
    /// the best `max(FIRST_PASS_WINDOW, 4 × limit)` matches are joined with `memories` and
    /// filtered — a frequent word matches tens of thousands of records, and reading each of
    /// their rows for the filters cost more than ranking them. The ranking order (strength, then
    /// id) is total, so the filtered prefix of that window *is* the answer whenever it holds
    /// `limit` records or the window held every match; otherwise the second pass filters every
    /// match, exactly as before (the tests below check both agree). Narrow filters skip the
    /// window (see [`Reader::narrow_filter`]).
    pub fn lexical_search(&self, query: &LexicalQuery<'_>) -> Result<Vec<LexicalHit>> {
        self.lexical_search_bounded(query, NARROW_FILTER_MATCHES)
    }

    /// [`Reader::lexical_search`] with the narrow-filter bound as a parameter (tests use a
    /// small one to take both roads on a small brain).
    pub(crate) fn lexical_search_bounded(
        &self,
        query: &LexicalQuery<'_>,
        narrow_bound: usize,
    ) -> Result<Vec<LexicalHit>> {
        if self.narrow_filter(query, narrow_bound)? {
            return Ok(self.lexical_pass(query, None)?.0);
        }
        let limit = query.limit.max(1);
        let window = FIRST_PASS_WINDOW.max(limit.saturating_mul(4));
        let (hits, matches_in_window) = self.lexical_pass(query, Some(window))?;
        if hits.len() >= limit || matches_in_window < window {
            return Ok(hits);
        }
        Ok(self.lexical_pass(query, None)?.0)
    }

    /// Whether the filters of `query` let so few records through that searching from them
    /// beats ranking every match first. A time window without a scope or type is narrow (no
    /// index counts it cheaply; such searches are rare and short). A scope or type filter is
    /// narrow when at most `bound` active records pass every filter: a session's scope holds a
    /// few records, but the write path's near-duplicate check filters on the record's scope,
    /// usually `global`, which holds most of the brain — counting its records one by one
    /// instead of ranking a few rare words' matches was most of a write's cost. Only the
    /// search's cost depends on the answer; both roads give the same hits.
    pub(crate) fn narrow_filter(&self, query: &LexicalQuery<'_>, bound: usize) -> Result<bool> {
        if query.scopes.is_none() && query.types.is_none() {
            return Ok(query.since.is_some() || query.until.is_some());
        }
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut values: Vec<Value> = Vec::new();
        let mut sql = String::from(
            "SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.status = 'active'",
        );
        push_filters(query, &mut sql, &mut values);
        sql.push_str(&format!(" LIMIT {})", bound.saturating_add(1)));
        let mut statement = self.conn.prepare_cached(&sql).map_err(map)?;
        let passed: i64 = statement
            .query_row(rusqlite::params_from_iter(values), |row| row.get(0))
            .map_err(map)?;
        Ok(usize::try_from(passed).unwrap_or(usize::MAX) <= bound)
    }

    /// One pass of `lexical_search`: the filtered best matches among the best `window` (all
    /// when `None`), and how many matches the window held (0 when `None`: not counted).
    pub(crate) fn lexical_pass(
        &self,
        query: &LexicalQuery<'_>,
        window: Option<usize>,
    ) -> Result<(Vec<LexicalHit>, usize)> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let limit = query.limit.max(1);
        let mut values: Vec<Value> = vec![query.match_expression.to_string().into()];
        let mut sql = match window {
            // Every windowed match comes back (to count them); a LEFT JOIN with the filters in
            // its ON clause gives the ones the filters refuse a NULL record id.
            Some(window) => format!(
                "SELECT f.id, f.strength, m.id IS NOT NULL FROM \
                 (SELECT rowid AS id, -bm25(memories_fts, 3.0, 2.0, 2.0, 1.0) AS strength \
                 FROM memories_fts WHERE memories_fts MATCH ?1 ORDER BY strength DESC, id LIMIT {window}) f \
                 LEFT JOIN memories m ON m.id = f.id"
            ),
            None => String::from(
                "SELECT m.id, -bm25(memories_fts, 3.0, 2.0, 2.0, 1.0) AS strength, 1 \
                 FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
                 WHERE memories_fts MATCH ?1",
            ),
        };
        push_filters(query, &mut sql, &mut values);
        match window {
            Some(_) => sql.push_str(" ORDER BY f.strength DESC, f.id"),
            None => sql.push_str(&format!(" ORDER BY strength DESC, m.id LIMIT {limit}")),
        }
        let mut statement = self.conn.prepare_cached(&sql).map_err(map)?;
        let mut rows = statement
            .query(rusqlite::params_from_iter(values))
            .map_err(map)?;
        let mut hits = Vec::with_capacity(limit);
        let mut matches = 0usize;
        while let Some(row) = rows.next().map_err(map)? {
            matches += 1;
            if hits.len() < limit && row.get::<_, bool>(2).map_err(map)? {
                hits.push(LexicalHit {
                    id: row.get(0).map_err(map)?,
                    strength: row.get(1).map_err(map)?,
                });
            }
        }
        Ok((hits, if window.is_some() { matches } else { 0 }))
    }

    /// The ids among `ids` that pass the filters of `query` (its match expression and limit
    /// are ignored), in no particular order. Semantic candidates come from a scan of every
    /// vector; this keeps only those the same filters as lexical search allow.
    pub fn filter_ids(&self, ids: &[i64], query: &LexicalQuery<'_>) -> Result<Vec<i64>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut allowed = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let mut values: Vec<Value> = Vec::with_capacity(chunk.len() + 8);
            let marks: Vec<String> = chunk
                .iter()
                .map(|id| {
                    values.push(Value::Integer(*id));
                    format!("?{}", values.len())
                })
                .collect();
            let mut sql = format!(
                "SELECT m.id FROM memories m WHERE m.id IN ({})",
                marks.join(", ")
            );
            push_filters(query, &mut sql, &mut values);
            let mut statement = self.conn.prepare_cached(&sql).map_err(map)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| {
                    row.get::<_, i64>(0)
                })
                .map_err(map)?;
            for row in rows {
                allowed.push(row.map_err(map)?);
            }
        }
        Ok(allowed)
    }

    /// For each episode among `ids`: the episode right before it and right after it in its
    /// conversation (same project and scope, at most `window_secs` apart), as
    /// `(id, previous, next)`. Records that are not episodes are left out. One statement per
    /// 500 ids; each neighbour is one range lookup in the `memories_conversation` index (both
    /// bounds of the range are spelled out: with only the window's far end, SQLite walks the
    /// whole rest of the conversation from the far end; 250 hits then took 20 ms, not 0.6).
    pub fn episode_neighbours(
        &self,
        ids: &[i64],
        window_secs: i64,
    ) -> Result<Vec<EpisodeNeighbours>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut out = Vec::with_capacity(ids.len());
        let window = window_secs.max(0);
        for chunk in ids.chunks(500) {
            let mut values: Vec<Value> = vec![
                Value::Text(format!("-{window} seconds")),
                Value::Text(format!("+{window} seconds")),
            ];
            let marks: Vec<String> = chunk
                .iter()
                .map(|id| {
                    values.push(Value::Integer(*id));
                    format!("?{}", values.len())
                })
                .collect();
            let sql = format!(
                "SELECT c.id, \
                 (SELECT p.id FROM memories p WHERE p.type = 'episode' AND p.project = c.project \
                  AND p.scope = c.scope AND p.merged_into IS NULL \
                  AND p.created_at >= strftime('%Y-%m-%dT%H:%M:%SZ', c.created_at, ?1) \
                  AND p.created_at <= c.created_at \
                  AND (p.created_at < c.created_at OR p.id < c.id) \
                  ORDER BY p.created_at DESC, p.id DESC LIMIT 1), \
                 (SELECT n.id FROM memories n WHERE n.type = 'episode' AND n.project = c.project \
                  AND n.scope = c.scope AND n.merged_into IS NULL \
                  AND n.created_at <= strftime('%Y-%m-%dT%H:%M:%SZ', c.created_at, ?2) \
                  AND n.created_at >= c.created_at \
                  AND (n.created_at > c.created_at OR n.id > c.id) \
                  ORDER BY n.created_at, n.id LIMIT 1) \
                 FROM memories c WHERE c.type = 'episode' AND c.id IN ({})",
                marks.join(", ")
            );
            let mut statement = self.conn.prepare_cached(&sql).map_err(map)?;
            let rows = statement
                .query_map(rusqlite::params_from_iter(values), |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .map_err(map)?;
            for row in rows {
                out.push(row.map_err(map)?);
            }
        }
        Ok(out)
    }

    /// How many records contain `term`, counting no further than `cap` (cheap for rare terms,
    /// bounded for frequent ones).
    pub fn term_frequency(&self, term_expression: &str, cap: usize) -> Result<usize> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        self.conn
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ?1 LIMIT ?2)",
            )
            .and_then(|mut s| s.query_row(rusqlite::params![term_expression, cap as i64], |row| row.get::<_, i64>(0)))
            .map(|n| n as usize)
            .map_err(map)
    }

    /// The ids of the first `limit` records (lowest id first) that contain `term_expression`.
    pub fn term_ids(&self, term_expression: &str, limit: usize) -> Result<Vec<i64>> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?1 ORDER BY rowid LIMIT ?2",
            )
            .map_err(map)?;
        let rows = statement
            .query_map(rusqlite::params![term_expression, limit as i64], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(map)?;
        rows.collect::<rusqlite::Result<Vec<i64>>>().map_err(map)
    }

    /// Number of records in the full-text index.
    ///
    /// FTS5 keeps this number itself, for BM25: the first varint of its "averages" record
    /// (rowid 1 of `memories_fts_data`), updated by every insert and delete. Reading it is one
    /// lookup; counting the `docsize` rows read every leaf page of that table (1.3 ms of a
    /// 15 ms hook at 100,000 records). An absent or unreadable record (an empty index) falls
    /// back to counting.
    pub fn indexed_count(&self) -> Result<usize> {
        let map = |e| StoreError::from_sqlite(e, self.path);
        let averages: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT block FROM memories_fts_data WHERE id = 1")
            .and_then(|mut s| s.query_row([], |row| row.get::<_, Vec<u8>>(0)).optional())
            .map_err(map)?;
        if let Some(count) = averages.as_deref().and_then(sqlite_varint) {
            return Ok(count as usize);
        }
        self.conn
            .prepare_cached("SELECT count(*) FROM memories_fts_docsize")
            .and_then(|mut s| s.query_row([], |row| row.get::<_, i64>(0)))
            .map(|n| n as usize)
            .map_err(map)
    }
}

/// The varint at the start of `bytes` in SQLite's encoding (big-endian groups of 7 bits, the
/// high bit set on every byte but the last; a ninth byte carries 8 bits), which FTS5 uses in
/// its records. `None` when `bytes` ends first.
fn sqlite_varint(bytes: &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for (index, byte) in bytes.iter().take(9).enumerate() {
        if index == 8 {
            return Some((value << 8) | u64::from(*byte));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::testing::memory;
    use cairn_core::record::MemoryType;

    #[test]
    fn sqlite_varints_decode() {
        assert_eq!(sqlite_varint(&[]), None);
        assert_eq!(sqlite_varint(&[0x05]), Some(5));
        assert_eq!(sqlite_varint(&[0x81, 0x00]), Some(128));
        assert_eq!(sqlite_varint(&[0x86, 0x8d, 0x34]), Some(100_020));
        assert_eq!(sqlite_varint(&[0x86, 0x8d]), None, "cut short");
        assert_eq!(sqlite_varint(&[0xff; 9]), Some(u64::MAX));
    }

    /// The count FTS5 keeps is the number of indexed rows through inserts, updates and
    /// deletes, and an empty index counts zero.
    #[test]
    fn the_indexed_count_follows_inserts_updates_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let counted = |store: &Store| {
            let reader = store.reader();
            let exact: i64 = reader
                .conn
                .query_row("SELECT count(*) FROM memories_fts_docsize", [], |r| {
                    r.get(0)
                })
                .unwrap();
            (reader.indexed_count().unwrap(), exact as usize)
        };
        assert_eq!(counted(&store), (0, 0));
        store
            .write(|tx| {
                for i in 0..300 {
                    let body = format!("record number {i}");
                    let m = memory("p", MemoryType::Note, &body, "active");
                    tx.insert_memory(&m, None)?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        assert_eq!(counted(&store), (300, 300));
        // Another connection, as outside changes are: the triggers keep the index in step.
        let other = rusqlite::Connection::open(dir.path().join("brain.db")).unwrap();
        other
            .execute_batch(
                "UPDATE memories SET body = body || ' changed' WHERE id % 3 = 0;
                 DELETE FROM memories WHERE id % 2 = 0;",
            )
            .unwrap();
        assert_eq!(counted(&store), (150, 150));
        other.execute_batch("DELETE FROM memories").unwrap();
        assert_eq!(counted(&store), (0, 0));
    }

    /// The windowed first pass gives exactly the answer of filtering every match, including
    /// when the filters refuse most of the window (second pass) and when equal scores straddle
    /// the window's edge (ties break on the id in both).
    #[test]
    fn the_windowed_search_answers_like_filtering_every_match() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let words = [
            "amber", "birch", "cedar", "delta", "ember", "fjord", "grove",
        ];
        let mut state = 0x5eed_u64;
        let mut next = move |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        store
            .write(|tx| {
                for i in 0..1200 {
                    // A third of the records share one text: hundreds of equal scores.
                    let body = if i % 3 == 0 {
                        "amber birch cedar".to_string()
                    } else {
                        (0..3 + next(12))
                            .map(|_| words[next(words.len())])
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    let project = if next(4) == 0 { "other" } else { "p" };
                    let memory_type = if next(10) == 0 {
                        MemoryType::Decision
                    } else {
                        MemoryType::Note
                    };
                    let status = if next(8) == 0 { "archived" } else { "active" };
                    let m = memory(project, memory_type, &body, status);
                    tx.insert_memory(&m, None)?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let decisions = [MemoryType::Decision];
        let mut second_pass = 0;
        for expression in [
            "\"amber\"",
            "\"amber\" OR \"grove\"",
            "\"fjord\"",
            "\"delta\" OR \"ember\" OR \"birch\"",
            "\"nothing\"",
        ] {
            // "other" holds a quarter of the records: its window is mostly refused.
            for (project, types) in [("p", None), ("other", None), ("p", Some(&decisions[..]))] {
                let projects = [Some(project.to_string())];
                for limit in [1, 10, 50, 300] {
                    let query = LexicalQuery {
                        match_expression: expression,
                        projects: &projects,
                        types,
                        limit,
                        ..LexicalQuery::default()
                    };
                    let reader = store.reader();
                    let got = reader.lexical_search(&query).unwrap();
                    let (everything, _) = reader.lexical_pass(&query, None).unwrap();
                    assert_eq!(got, everything, "{expression} {project} {types:?} {limit}");
                    let window = FIRST_PASS_WINDOW.max(limit * 4);
                    let (first, seen) = reader.lexical_pass(&query, Some(window)).unwrap();
                    if first.len() < limit && seen == window {
                        second_pass += 1;
                    }
                }
            }
        }
        assert!(second_pass > 0, "no query needed the second pass");
    }
}
