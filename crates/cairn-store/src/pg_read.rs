//! Recall's reads on PostgreSQL (issue 15): [`PgReader`] implements the recall seam
//! ([`RecallRead`]) over a brain `cairn migrate` copied to a PostgreSQL database, with the
//! answers of the SQLite side — BM25 through `pg_search` (FTS5's scores), the same filters,
//! the same conversation neighbours, the same vectors.
//!
//! Every read that takes many ids is one statement (`= ANY($1)`); supersession chains are one
//! recursive statement. Nothing here writes brain data: opening a reader only adds, when
//! missing, the two indexes its statements need (episodes by conversation, edges by source),
//! as SQLite's schema has them.

use crate::pg_search::{self, Params, push_filters};
use crate::postgres::{PgTarget, check_version, schema_version};
use crate::recall_read::{DERIVED_FROM, RecallRead};
use crate::search::{EpisodeNeighbours, LexicalHit, LexicalQuery};
use crate::vectors::{META_EMBED_DIM, META_EMBED_MODEL, text_fingerprint};
use crate::{Result, StoreError, VectorCounts, VectorMatrix, VectorSpace};
use cairn_core::memory::Memory;
use std::cell::RefCell;
use std::collections::HashMap;

/// The indexes recall's statements need beyond the tables' keys (SQLite's schema has their
/// counterparts: `memories_conversation`, the edges' covering indexes).
const READ_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS cairn_memories_conversation
    ON memories (project, scope, created_at COLLATE \"C\") WHERE type = 'episode';
CREATE INDEX IF NOT EXISTS cairn_edges_source ON edges (src_kind, src_id, relation);
";

/// A record's columns as [`memory_from_row`] reads them (alias `m`): the body as text or, for a
/// record a dream merged away, as a delta against the body of the record it was merged into;
/// the content hash as text or as its bytes.
const MEMORY_COLUMNS: &str = "m.id, m.project, m.scope, m.type, m.title, m.body, m.body_bytes, m.summary, \
     m.tags, m.importance, m.confidence, m.trust, m.trust_zone, m.sensitivity, m.source, m.commit_rev, \
     m.review_at, m.expires_at, m.pinned, m.status, m.supersedes, m.superseded_by, m.external_id, \
     m.created_at, m.updated_at, m.last_accessed_at, m.valid_from, m.use_count, \
     coalesce(m.content_hash, encode(m.content_hash_bytes, 'hex')), m.retired_at, \
     (SELECT b.body FROM memories b WHERE b.id = m.merged_into)";

/// A brain on PostgreSQL, read by recall. One connection; not shared between threads.
pub struct PgReader {
    target: PgTarget,
    client: RefCell<postgres::Client>,
}

impl std::fmt::Debug for PgReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgReader")
            .field("target", &self.target)
            .finish()
    }
}

impl PgReader {
    /// Connects to the brain in `target`'s database: refused when the database holds no
    /// brain, a brain of another schema version, or no full-text index.
    pub fn open(target: PgTarget) -> Result<PgReader> {
        let mut client = target.connect()?;
        match schema_version(&target, &mut client)? {
            None => {
                return Err(target.error(
                    "this database holds no cairn brain",
                    &"copy one there first with `cairn migrate --from brain.db --to <url>`",
                ));
            }
            Some(found) => check_version(&target, found)?,
        }
        let indexed: bool = client
            .query_one(
                "SELECT to_regclass('public.cairn_fts_totals') IS NOT NULL",
                &[],
            )
            .map_err(|e| target.error("cannot read the catalog", &e))?
            .get(0);
        if !indexed {
            return Err(target.error(
                "this brain has no full-text index",
                &"copy it again with `cairn migrate`, which builds the index",
            ));
        }
        client
            .batch_execute(READ_INDEXES)
            .map_err(|e| target.error("cannot create the indexes recall reads", &e))?;
        Ok(PgReader {
            target,
            client: RefCell::new(client),
        })
    }

    /// The address, without its password.
    pub fn shown(&self) -> &str {
        self.target.shown()
    }

    fn fail(&self, what: &'static str) -> impl Fn(postgres::Error) -> StoreError + '_ {
        move |e| self.target.error(what, &e)
    }

    /// The records matching `where_sql` (over alias `m`, with `params`).
    fn memories(&self, where_sql: &str, params: &Params) -> Result<Vec<Memory>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                &format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where_sql}"),
                &params.refs(),
            )
            .map_err(self.fail("cannot read records"))?;
        rows.iter().map(|row| self.memory_from_row(row)).collect()
    }

    fn malformed(&self, detail: String) -> StoreError {
        StoreError::Malformed {
            path: self.target.shown().into(),
            detail,
        }
    }

    fn memory_from_row(&self, row: &postgres::Row) -> Result<Memory> {
        fn parse<T: std::str::FromStr>(
            reader: &PgReader,
            row: &postgres::Row,
            index: usize,
        ) -> Result<T>
        where
            T::Err: std::fmt::Display,
        {
            let text: String = row.get(index);
            text.parse::<T>().map_err(|e| {
                reader.malformed(format!(
                    "{e} (column {index} of record {})",
                    row.get::<_, i64>(0)
                ))
            })
        }
        let id: i64 = row.get(0);
        let project: String = row.get(1);
        let tags: String = row.get(8);
        let body = match (
            row.get::<_, Option<String>>(5),
            row.get::<_, Option<Vec<u8>>>(6),
        ) {
            (Some(body), _) => body,
            (None, Some(delta)) => {
                let base: Option<String> = row.get(30);
                let base = base.ok_or_else(|| {
                    self.malformed(format!(
                        "record {id}: a merged-away body whose base record is missing"
                    ))
                })?;
                cairn_core::delta::apply(&base, &delta)
                    .map_err(|e| self.malformed(format!("record {id}: {e}")))?
            }
            (None, None) => return Err(self.malformed(format!("record {id} has no body"))),
        };
        let importance: i64 = row.get(9);
        let pinned: i64 = row.get(18);
        let use_count: i64 = row.get(27);
        Ok(Memory {
            id,
            project: (!project.is_empty()).then_some(project),
            scope: row.get(2),
            memory_type: parse(self, row, 3)?,
            title: row.get(4),
            body,
            summary: row.get(7),
            tags: tags.split_whitespace().map(str::to_string).collect(),
            importance: importance.clamp(0, u8::MAX.into()) as u8,
            confidence: parse(self, row, 10)?,
            trust: parse(self, row, 11)?,
            trust_zone: parse(self, row, 12)?,
            sensitivity: parse(self, row, 13)?,
            source: row.get(14),
            commit: row.get(15),
            review_at: row.get(16),
            expires_at: row.get(17),
            pinned: pinned != 0,
            status: parse(self, row, 19)?,
            supersedes: row.get(20),
            superseded_by: row.get(21),
            external_id: row.get(22),
            created_at: row.get(23),
            updated_at: row.get(24),
            last_accessed_at: row.get(25),
            valid_from: row.get(26),
            use_count: use_count.clamp(0, u32::MAX.into()) as u32,
            content_hash: row.get::<_, Option<String>>(28).unwrap_or_default(),
            retired_at: row.get(29),
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .client
            .borrow_mut()
            .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
            .map_err(self.fail("cannot read the brain's settings"))?
            .map(|row| row.get(0)))
    }
}

impl RecallRead for PgReader {
    fn generation(&self) -> Result<u64> {
        // Every change to a record appends an event; every change to a vector bumps
        // `vectors_version` (the triggers `cairn migrate` carries over).
        let row = self
            .client
            .borrow_mut()
            .query_one(
                "SELECT (SELECT coalesce(max(id), 0) FROM events), \
                 (SELECT coalesce(max(id), 0) FROM memories), \
                 (SELECT value FROM meta WHERE key = 'vectors_version')",
                &[],
            )
            .map_err(self.fail("cannot read the brain's generation"))?;
        let (events, records): (i64, i64) = (row.get(0), row.get(1));
        let vectors: Option<String> = row.get(2);
        let vectors = vectors.and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        Ok((events as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (records as u64).rotate_left(21)
            ^ (vectors as u64).rotate_left(42))
    }

    fn indexed_count(&self) -> Result<usize> {
        let records: i64 = self
            .client
            .borrow_mut()
            .query_one("SELECT records FROM cairn_fts_totals", &[])
            .map_err(self.fail("cannot read the full-text index"))?
            .get(0);
        Ok(records.max(0) as usize)
    }

    fn lexical_search(
        &self,
        terms: &[String],
        filter: &LexicalQuery<'_>,
    ) -> Result<Vec<LexicalHit>> {
        pg_search::lexical_search(&self.target, &mut *self.client.borrow_mut(), terms, filter)
    }

    fn term_counts(&self, terms: &[String], cap: usize) -> Result<Vec<usize>> {
        pg_search::term_counts(&self.target, &mut *self.client.borrow_mut(), terms, cap)
    }

    fn get_many(&self, ids: &[i64]) -> Result<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut params = Params::default();
        let ids = params.mark(ids.to_vec());
        self.memories(&format!("m.id = ANY({ids})"), &params)
    }

    fn successors(&self, ids: &[i64]) -> Result<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut params = Params::default();
        let ids = params.mark(ids.to_vec());
        // UNION (not ALL): a chain that comes back on itself ends.
        self.memories(
            &format!(
                "m.id IN (WITH RECURSIVE chain(id) AS ( \
                 SELECT superseded_by FROM memories WHERE id = ANY({ids}) AND superseded_by IS NOT NULL \
                 UNION SELECT s.superseded_by FROM memories s JOIN chain c ON s.id = c.id \
                 WHERE s.superseded_by IS NOT NULL) SELECT id FROM chain)"
            ),
            &params,
        )
    }

    fn filter_ids(&self, ids: &[i64], filter: &LexicalQuery<'_>) -> Result<Vec<i64>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut params = Params::default();
        let mark = params.mark(ids.to_vec());
        let mut sql = format!("SELECT m.id FROM memories m WHERE m.id = ANY({mark})");
        push_filters(filter, &mut sql, &mut params);
        let rows = self
            .client
            .borrow_mut()
            .query(&sql, &params.refs())
            .map_err(self.fail("cannot filter records"))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn episode_neighbours(&self, ids: &[i64], window_secs: i64) -> Result<Vec<EpisodeNeighbours>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // SQLite's statement (search.rs): `strftime('%Y-%m-%dT%H:%M:%SZ', c.created_at, ±N
        // seconds)` is the same text as this `to_char`, and text compares byte-wise.
        let bound = |sign: &str| {
            format!(
                "to_char((c.created_at::timestamptz {sign} make_interval(secs => $2)) AT TIME ZONE 'UTC', \
                 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') COLLATE \"C\""
            )
        };
        let sql = format!(
            "SELECT c.id, \
             (SELECT p.id FROM memories p WHERE p.type = 'episode' AND p.project = c.project \
              AND p.scope = c.scope AND p.merged_into IS NULL \
              AND p.created_at COLLATE \"C\" >= {before} \
              AND p.created_at COLLATE \"C\" <= c.created_at \
              AND (p.created_at COLLATE \"C\" < c.created_at OR p.id < c.id) \
              ORDER BY p.created_at COLLATE \"C\" DESC, p.id DESC LIMIT 1), \
             (SELECT n.id FROM memories n WHERE n.type = 'episode' AND n.project = c.project \
              AND n.scope = c.scope AND n.merged_into IS NULL \
              AND n.created_at COLLATE \"C\" <= {after} \
              AND n.created_at COLLATE \"C\" >= c.created_at \
              AND (n.created_at COLLATE \"C\" > c.created_at OR n.id > c.id) \
              ORDER BY n.created_at COLLATE \"C\", n.id LIMIT 1) \
             FROM memories c WHERE c.type = 'episode' AND c.id = ANY($1)",
            before = bound("-"),
            after = bound("+"),
        );
        let window = window_secs.max(0) as f64;
        let rows = self
            .client
            .borrow_mut()
            .query(&sql, &[&ids.to_vec(), &window])
            .map_err(self.fail("cannot read conversation neighbours"))?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect())
    }

    fn derived_from(&self, ids: &[i64]) -> Result<HashMap<i64, Vec<i64>>> {
        let mut found: HashMap<i64, Vec<i64>> = HashMap::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT src_id, dst_id FROM edges WHERE src_kind = 'record' AND src_id = ANY($1) \
                 AND relation = $2 AND invalidate_seq IS NULL AND dst_kind = 'record' \
                 ORDER BY src_id, dst_id",
                &[&ids.to_vec(), &DERIVED_FROM],
            )
            .map_err(self.fail("cannot read derived_from edges"))?;
        for row in rows {
            found.entry(row.get(0)).or_default().push(row.get(1));
        }
        Ok(found)
    }

    fn vector_space(&self) -> Result<Option<VectorSpace>> {
        Ok(VectorSpace::from_meta(
            self.meta(META_EMBED_MODEL)?,
            self.meta(META_EMBED_DIM)?,
        ))
    }

    fn vector_counts(&self) -> Result<VectorCounts> {
        let row = self
            .client
            .borrow_mut()
            .query_one(
                "SELECT (SELECT count(*) FROM memories WHERE merged_into IS NULL), \
                 (SELECT count(*) FROM vectors v WHERE EXISTS \
                  (SELECT 1 FROM memories m WHERE m.id = v.memory_id AND m.merged_into IS NULL))",
                &[],
            )
            .map_err(self.fail("cannot count the vectors"))?;
        Ok(VectorCounts {
            records: row.get(0),
            with_vector: row.get(1),
        })
    }

    fn vectors_version(&self) -> Result<Option<i64>> {
        Ok(self
            .meta("vectors_version")?
            .and_then(|value| value.trim().parse().ok()))
    }

    fn vector_fingerprints(&self) -> Result<Vec<(i64, u64)>> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT memory_id, text_hash FROM vectors ORDER BY memory_id",
                &[],
            )
            .map_err(self.fail("cannot read the vectors"))?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), text_fingerprint(row.get(1))))
            .collect())
    }

    fn vector_of(&self, memory_id: i64, dimension: usize) -> Result<Option<Vec<f32>>> {
        let row = self
            .client
            .borrow_mut()
            .query_opt(
                "SELECT vector FROM vectors WHERE memory_id = $1",
                &[&memory_id],
            )
            .map_err(self.fail("cannot read a vector"))?;
        Ok(row
            .map(|row| row.get::<_, pgvector::Vector>(0).to_vec())
            .filter(|vector| vector.len() == dimension))
    }

    fn load_vectors(&self, dimension: usize) -> Result<VectorMatrix> {
        let rows = self
            .client
            .borrow_mut()
            .query(
                "SELECT memory_id, vector, text_hash FROM vectors ORDER BY memory_id",
                &[],
            )
            .map_err(self.fail("cannot read the vectors"))?;
        let mut matrix = VectorMatrix {
            dimension,
            ids: Vec::with_capacity(rows.len()),
            data: Vec::with_capacity(rows.len() * dimension),
            fingerprints: Vec::with_capacity(rows.len()),
            skipped: 0,
        };
        for row in rows {
            let vector = row.get::<_, pgvector::Vector>(1);
            let values = vector.as_slice();
            if values.len() != dimension {
                matrix.skipped += 1;
                continue;
            }
            matrix.ids.push(row.get(0));
            matrix.fingerprints.push(text_fingerprint(row.get(2)));
            cairn_core::vector::extend_bf16(&mut matrix.data, values);
        }
        Ok(matrix)
    }
}
