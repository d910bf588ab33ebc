//! The storage seam of recall (issue 15 item 2): everything the engine's recall path reads, as
//! one trait both backends implement — SQLite ([`SqliteRecall`], over a [`Store`] and the
//! optional in-memory full-text index) and PostgreSQL (`pg_read::PgReader`).
//!
//! The trait speaks in query *terms*, never in a backend's query syntax: FTS5 match expressions
//! are built inside the SQLite side only. Reads that take many ids take them in one call, so a
//! backend across a network answers each in one round trip (records by id, supersession
//! chains, episode neighbours, `derived_from` edges, filters, term counts).

use crate::search::{EpisodeNeighbours, LexicalHit, LexicalQuery};
use crate::{LexicalIndex, Reader, Result, Store, VectorCounts, VectorMatrix, VectorSpace};
use cairn_core::memory::Memory;
use cairn_core::query::fts_match_expression;
use std::collections::HashMap;

/// The `derived_from` relation of the graph: a fact to the turns it was extracted from.
pub const DERIVED_FROM: &str = "derived_from";

/// What recall reads from a brain. Every method answers from one consistent brain; none writes.
pub trait RecallRead {
    /// Changes whenever the brain may have changed (caches of derived data — the record
    /// count, the vector matrix — are valid while it stays the same).
    fn generation(&self) -> Result<u64>;
    /// Records in the full-text index (FTS5's N).
    fn indexed_count(&self) -> Result<usize>;
    /// The best `filter.limit` records matching any of `terms` (each a query word, searched as
    /// one phrase) that pass the filters, strongest BM25 first, ties by the lower id. The
    /// filter's `match_expression` is not read. No terms: no hits.
    fn lexical_search(
        &self,
        terms: &[String],
        filter: &LexicalQuery<'_>,
    ) -> Result<Vec<LexicalHit>>;
    /// For each of `terms`, in order, how many records contain it, counting no further than
    /// `cap`.
    fn term_counts(&self, terms: &[String], cap: usize) -> Result<Vec<usize>>;
    /// The records among `ids` that exist (in no particular order).
    fn get_many(&self, ids: &[i64]) -> Result<Vec<Memory>>;
    /// Every record reachable from `ids` by following `superseded_by` forward (not the
    /// records of `ids` themselves unless a chain comes back to them), in no particular order:
    /// what recall needs to answer each match with the head of its chain.
    fn successors(&self, ids: &[i64]) -> Result<Vec<Memory>>;
    /// The ids among `ids` that pass the filters of `filter` (its match expression and limit
    /// are not read), in no particular order.
    fn filter_ids(&self, ids: &[i64], filter: &LexicalQuery<'_>) -> Result<Vec<i64>>;
    /// For each episode among `ids`: the episodes right before and after it in its
    /// conversation (same project and scope, at most `window_secs` apart).
    fn episode_neighbours(&self, ids: &[i64], window_secs: i64) -> Result<Vec<EpisodeNeighbours>>;
    /// For each of `ids` with open `derived_from` edges to records, those records' ids,
    /// lowest first.
    fn derived_from(&self, ids: &[i64]) -> Result<HashMap<i64, Vec<i64>>>;
    /// The model the brain's vectors come from; `None` before anything was embedded.
    fn vector_space(&self) -> Result<Option<VectorSpace>>;
    /// How complete the semantic index is.
    fn vector_counts(&self) -> Result<VectorCounts>;
    /// How many times the vectors changed; `None` when the brain keeps no counter.
    fn vectors_version(&self) -> Result<Option<i64>>;
    /// `(memory_id, text_fingerprint)` of every stored vector, in id order.
    fn vector_fingerprints(&self) -> Result<Vec<(i64, u64)>>;
    /// The vector of one record, when it has `dimension` floats.
    fn vector_of(&self, memory_id: i64, dimension: usize) -> Result<Option<Vec<f32>>>;
    /// Every vector of `dimension` floats, in id order, as one matrix.
    fn load_vectors(&self, dimension: usize) -> Result<VectorMatrix>;
}

/// Recall's reads on a SQLite brain: FTS5 (or the shared in-memory copy of its index, which
/// gives FTS5's answers) and the brain file's tables.
pub struct SqliteRecall<'a> {
    store: &'a Store,
    reader: Reader<'a>,
    index: Option<&'a LexicalIndex>,
}

impl<'a> SqliteRecall<'a> {
    /// Reads `store`, its full-text searches answered by `index` when given.
    pub fn new(store: &'a Store, index: Option<&'a LexicalIndex>) -> SqliteRecall<'a> {
        SqliteRecall {
            store,
            reader: store.reader(),
            index,
        }
    }

    /// The quoted FTS5 expression of one term (empty when the term has nothing searchable).
    fn term_expression(term: &str) -> String {
        fts_match_expression(std::slice::from_ref(&term.to_string())).unwrap_or_default()
    }
}

impl RecallRead for SqliteRecall<'_> {
    fn generation(&self) -> Result<u64> {
        self.store.generation()
    }

    fn indexed_count(&self) -> Result<usize> {
        self.reader.indexed_count()
    }

    fn lexical_search(
        &self,
        terms: &[String],
        filter: &LexicalQuery<'_>,
    ) -> Result<Vec<LexicalHit>> {
        let Some(expression) = fts_match_expression(terms) else {
            return Ok(Vec::new());
        };
        let query = LexicalQuery {
            match_expression: &expression,
            ..filter.clone()
        };
        match self.index {
            Some(index) => index.search(&self.reader, &query),
            None => self.reader.lexical_search(&query),
        }
    }

    fn term_counts(&self, terms: &[String], cap: usize) -> Result<Vec<usize>> {
        terms
            .iter()
            .map(|term| {
                let expression = Self::term_expression(term);
                if expression.is_empty() {
                    return Ok(0);
                }
                match self.index {
                    Some(index) => index.term_frequency(&self.reader, &expression, cap),
                    None => self.reader.term_frequency(&expression, cap),
                }
            })
            .collect()
    }

    fn get_many(&self, ids: &[i64]) -> Result<Vec<Memory>> {
        self.reader.get_many(ids)
    }

    fn successors(&self, ids: &[i64]) -> Result<Vec<Memory>> {
        // A local file: one lookup per step is cheap. Each record is read once.
        let mut seen: std::collections::HashSet<i64> = std::collections::HashSet::new();
        let mut found = Vec::new();
        let mut front: Vec<Memory> = self.reader.get_many(ids)?;
        loop {
            let next: Vec<i64> = front
                .iter()
                .filter_map(|m| m.superseded_by)
                .filter(|id| seen.insert(*id))
                .collect();
            if next.is_empty() {
                return Ok(found);
            }
            front = self.reader.get_many(&next)?;
            found.extend(front.iter().cloned());
        }
    }

    fn filter_ids(&self, ids: &[i64], filter: &LexicalQuery<'_>) -> Result<Vec<i64>> {
        match self.index {
            Some(index) => index.filter_ids(&self.reader, ids, filter),
            None => self.reader.filter_ids(ids, filter),
        }
    }

    fn episode_neighbours(&self, ids: &[i64], window_secs: i64) -> Result<Vec<EpisodeNeighbours>> {
        match self.index {
            Some(index) => index.episode_neighbours(&self.reader, ids, window_secs),
            None => self.reader.episode_neighbours(ids, window_secs),
        }
    }

    fn derived_from(&self, ids: &[i64]) -> Result<HashMap<i64, Vec<i64>>> {
        let mut found = HashMap::new();
        for (id, targets) in self.reader.open_targets_of_records(ids, DERIVED_FROM)? {
            let turns: Vec<i64> = targets
                .into_iter()
                .filter(|(node, _)| node.kind == cairn_core::graph::NodeKind::Record)
                .map(|(node, _)| node.id)
                .collect();
            if !turns.is_empty() {
                found.insert(id, turns);
            }
        }
        Ok(found)
    }

    fn vector_space(&self) -> Result<Option<VectorSpace>> {
        self.reader.vector_space()
    }

    fn vector_counts(&self) -> Result<VectorCounts> {
        self.reader.vector_counts()
    }

    fn vectors_version(&self) -> Result<Option<i64>> {
        self.reader.vectors_version()
    }

    fn vector_fingerprints(&self) -> Result<Vec<(i64, u64)>> {
        self.reader.vector_fingerprints()
    }

    fn vector_of(&self, memory_id: i64, dimension: usize) -> Result<Option<Vec<f32>>> {
        self.reader.vector_of(memory_id, dimension)
    }

    fn load_vectors(&self, dimension: usize) -> Result<VectorMatrix> {
        self.reader.load_vectors(dimension)
    }
}
