//! Search on PostgreSQL (issue 15 item 4): BM25 with FTS5's answers, and pgvector HNSW top-k,
//! each one statement with the recall filters inside it. These are the primitives the
//! PostgreSQL backend plugs into the storage seam; no engine command calls them yet
//! (docs/postgres.md).
//!
//! **Lexical.** PostgreSQL's own full-text search ranks with `ts_rank_cd`, which is not BM25,
//! and tokenizes otherwise. Here the index is cairn's own, in three tables beside the brain's:
//!
//! * `cairn_fts_postings (term, memory_id, freq, length, positions)`: per token of a record's
//!   full-text row (the records FTS5 indexes: not merged away), its weighted frequency (title 3,
//!   summary 2, tags 2, body 1, as `bm25(memories_fts, 3.0, 2.0, 2.0, 1.0)` weighs them), the
//!   record's tokens over all columns (FTS5's D, kept here so a query never reads another
//!   table per match) and the instances' positions (`column << 28 | offset`: for phrases).
//! * `cairn_fts_docs (memory_id, length)`: every indexed record, tokens or not (FTS5's N
//!   counts rows with no tokens too).
//! * `cairn_fts_totals`: one row, the records and tokens in the index (N and avgdl).
//!
//! The tokens are FTS5's own: documents and query terms go through `memories_fts`'s tokenizer
//! (`porter unicode61`) in this process (see `lexical.rs`). A search is one statement: the
//! matches of every phrase, each phrase's match count (its IDF), the score of each matching
//! record computed with `fts5Bm25Function`'s operations in its order (so the scores are FTS5's
//! to the last bit or nearly: `ln` is the C library's on both sides), then the filters of
//! [`LexicalQuery`] (the same clauses as SQLite's) and the order `strength DESC, id` — in
//! SQLite's two passes: the filters on the best window of matches, every match only when the
//! window was full and too few passed (usually one statement).
//!
//! The index is derived data, kept in step by [`reindex_lexical`] (called with the ids whose
//! text, `merged_into` or existence changed, in the writing transaction) and built whole by
//! [`rebuild_lexical`] (after `cairn migrate`).
//!
//! **Vectors.** An HNSW index (`vector_ip_ops`: cairn's similarity is the inner product of unit
//! vectors) on `vectors.vector` cast to the brain's dimension; [`vector_search`] orders by it
//! with the filters in the same statement, pgvector's iterative scan (0.8) going on until
//! enough records pass them. [`VectorMode::Exact`] scans every vector instead (for recall
//! checks).

use crate::lexical::{self, DocumentTerm, POSITION_BITS, Tokenizer, WEIGHTS};
use crate::postgres::PgTarget;
use crate::search::{FIRST_PASS_WINDOW, LexicalHit, LexicalQuery};
use crate::{Result, StoreError};
use postgres::GenericClient;
use postgres::types::ToSql;
use std::cell::RefCell;

/// The full-text tables (see the module documentation), created when missing.
const LEXICAL_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS cairn_fts_docs (
    memory_id bigint PRIMARY KEY,
    length integer NOT NULL
);
CREATE TABLE IF NOT EXISTS cairn_fts_postings (
    term bytea NOT NULL,
    memory_id bigint NOT NULL,
    freq integer NOT NULL,
    length integer NOT NULL,
    positions integer[] NOT NULL,
    PRIMARY KEY (term, memory_id) INCLUDE (freq, length)
);
CREATE INDEX IF NOT EXISTS cairn_fts_postings_memory ON cairn_fts_postings (memory_id);
CREATE TABLE IF NOT EXISTS cairn_fts_totals (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    records bigint NOT NULL,
    tokens bigint NOT NULL
);
INSERT INTO cairn_fts_totals (only_row, records, tokens) VALUES (true, 0, 0)
    ON CONFLICT (only_row) DO NOTHING;
";

/// Records read and indexed per statement by [`rebuild_lexical`].
const REBUILD_BATCH: i64 = 1000;

thread_local! {
    /// FTS5's tokenizer (not thread-safe; created once per thread that searches or writes).
    static TOKENIZER: RefCell<Option<Tokenizer>> = const { RefCell::new(None) };
}

/// Runs `work` with this thread's FTS5 tokenizer.
fn with_tokenizer<T>(work: impl FnOnce(&mut Tokenizer) -> Result<T>) -> Result<T> {
    TOKENIZER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Tokenizer::new().map_err(|detail| StoreError::Malformed {
                path: std::path::PathBuf::from("(full-text tokenizer)"),
                detail,
            })?);
        }
        work(slot.as_mut().expect("just set"))
    })
}

/// Creates the full-text tables when they are missing (an empty index).
pub fn create_lexical_schema(target: &PgTarget, client: &mut impl GenericClient) -> Result<()> {
    client
        .batch_execute(LEXICAL_SCHEMA)
        .map_err(|e| target.error("cannot create the full-text tables", &e))
}

/// Builds the full-text index from every record, replacing what it held, in one transaction;
/// answers the records indexed. A bulk load: the rows go in by `COPY`, and the postings' two
/// indexes are dropped first and built once at the end (a sorted build, not millions of
/// entries inserted one by one into B-trees larger than the server's buffers: most of
/// `cairn migrate`'s time before).
pub fn rebuild_lexical(target: &PgTarget, client: &mut postgres::Client) -> Result<u64> {
    let fail = |e: postgres::Error| target.error("cannot rebuild the full-text index", &e);
    let mut tx = client.transaction().map_err(fail)?;
    create_lexical_schema(target, &mut tx)?;
    tx.batch_execute(
        "TRUNCATE cairn_fts_postings, cairn_fts_docs; \
         ALTER TABLE cairn_fts_postings DROP CONSTRAINT IF EXISTS cairn_fts_postings_pkey; \
         DROP INDEX IF EXISTS cairn_fts_postings_memory; \
         SET LOCAL maintenance_work_mem = '256MB'",
    )
    .map_err(fail)?;
    let mut after = i64::MIN;
    let (mut records, mut tokens) = (0i64, 0i64);
    loop {
        let rows = tx
            .query(
                "SELECT id, title, summary, tags, body FROM memories \
                 WHERE id > $1 AND merged_into IS NULL ORDER BY id LIMIT $2",
                &[&after, &REBUILD_BATCH],
            )
            .map_err(fail)?;
        let Some(last) = rows.last() else { break };
        after = last.get(0);
        let documents = tokenize_rows(&rows)?;
        records += documents.len() as i64;
        tokens += documents.iter().map(|d| i64::from(d.1)).sum::<i64>();
        copy_documents(target, &mut tx, &documents)?;
    }
    // The same keys as the schema's (LEXICAL_SCHEMA), which a test compares.
    tx.batch_execute(
        "ALTER TABLE cairn_fts_postings ADD PRIMARY KEY (term, memory_id) INCLUDE (freq, length); \
         CREATE INDEX cairn_fts_postings_memory ON cairn_fts_postings (memory_id)",
    )
    .map_err(fail)?;
    tx.execute(
        "UPDATE cairn_fts_totals SET records = $1, tokens = $2",
        &[&records, &tokens],
    )
    .map_err(fail)?;
    tx.commit().map_err(fail)?;
    // Fresh statistics and visibility map for every table (after `cairn migrate`'s bulk load
    // they are all new): the planner's estimates (without them it expects a handful of records
    // and joins the window with a scan of every one) and index-only scans — and no autovacuum
    // pass over the new rows while the first searches run.
    client
        .batch_execute("VACUUM ANALYZE")
        .map_err(|e| target.error("cannot analyze the full-text index", &e))?;
    Ok(records as u64)
}

/// Copies the full-text rows of `documents` into the index's tables (`COPY … FROM STDIN` in
/// the binary format), leaving the totals to the caller: [`rebuild_lexical`]'s bulk load.
fn copy_documents(
    target: &PgTarget,
    tx: &mut postgres::Transaction<'_>,
    documents: &[Document],
) -> Result<()> {
    use postgres::binary_copy::BinaryCopyInWriter;
    use postgres::types::Type;
    let fail = |e: postgres::Error| target.error("cannot write the full-text index", &e);
    let sink = tx
        .copy_in("COPY cairn_fts_docs (memory_id, length) FROM STDIN (FORMAT binary)")
        .map_err(fail)?;
    let mut docs = BinaryCopyInWriter::new(sink, &[Type::INT8, Type::INT4]);
    for (id, length, _) in documents {
        docs.write(&[id, &(*length as i32)]).map_err(fail)?;
    }
    docs.finish().map_err(fail)?;
    let sink = tx
        .copy_in(
            "COPY cairn_fts_postings (term, memory_id, freq, length, positions) \
             FROM STDIN (FORMAT binary)",
        )
        .map_err(fail)?;
    let mut postings = BinaryCopyInWriter::new(
        sink,
        &[
            Type::BYTEA,
            Type::INT8,
            Type::INT4,
            Type::INT4,
            Type::INT4_ARRAY,
        ],
    );
    for (id, length, terms) in documents {
        let length = *length as i32;
        for term in terms {
            postings
                .write(&[
                    &term.token.as_slice(),
                    id,
                    &(term.freq as i32),
                    &length,
                    &term.positions,
                ])
                .map_err(fail)?;
        }
    }
    postings.finish().map_err(fail)?;
    Ok(())
}

/// Brings the full-text rows of `ids` in step with their records (re-read from `memories`):
/// what the write path calls, in its transaction, with every record whose title, summary, tags,
/// body or `merged_into` changed, or that was inserted or deleted (FTS5's triggers on SQLite).
pub fn reindex_lexical(
    target: &PgTarget,
    client: &mut impl GenericClient,
    ids: &[i64],
) -> Result<()> {
    let fail = |e: postgres::Error| target.error("cannot update the full-text index", &e);
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    client
        .execute(
            "WITH gone AS (DELETE FROM cairn_fts_docs WHERE memory_id = ANY($1) RETURNING length) \
             UPDATE cairn_fts_totals SET records = records - (SELECT count(*) FROM gone), \
             tokens = tokens - (SELECT coalesce(sum(length), 0) FROM gone)",
            &[&ids],
        )
        .map_err(fail)?;
    client
        .execute(
            "DELETE FROM cairn_fts_postings WHERE memory_id = ANY($1)",
            &[&ids],
        )
        .map_err(fail)?;
    let rows = client
        .query(
            "SELECT id, title, summary, tags, body FROM memories \
             WHERE id = ANY($1) AND merged_into IS NULL ORDER BY id",
            &[&ids],
        )
        .map_err(fail)?;
    let documents = tokenize_rows(&rows)?;
    insert_documents(target, client, &documents)
}

/// One record's full-text row: its id, its tokens over all columns and its distinct terms.
type Document = (i64, u32, Vec<DocumentTerm>);

/// Tokenizes rows of `id, title, summary, tags, body`.
fn tokenize_rows(rows: &[postgres::Row]) -> Result<Vec<Document>> {
    with_tokenizer(|tokenizer| {
        rows.iter()
            .map(|row| {
                let columns: [Option<String>; 4] = [row.get(1), row.get(2), row.get(3), row.get(4)];
                let (length, terms) = lexical::document_terms(tokenizer, &columns)?;
                Ok((row.get::<_, i64>(0), length, terms))
            })
            .collect()
    })
}

/// Inserts the full-text rows of records not in the index, in two statements (the positions
/// travel as one flat array, each posting a slice of it).
fn insert_documents(
    target: &PgTarget,
    client: &mut impl GenericClient,
    documents: &[Document],
) -> Result<()> {
    if documents.is_empty() {
        return Ok(());
    }
    let fail = |e: postgres::Error| target.error("cannot write the full-text index", &e);
    let doc_ids: Vec<i64> = documents.iter().map(|d| d.0).collect();
    let doc_lengths: Vec<i32> = documents.iter().map(|d| d.1 as i32).collect();
    let tokens: i64 = documents.iter().map(|d| i64::from(d.1)).sum();
    client
        .execute(
            "INSERT INTO cairn_fts_docs (memory_id, length) SELECT * FROM unnest($1::int8[], $2::int4[])",
            &[&doc_ids, &doc_lengths],
        )
        .map_err(fail)?;
    client
        .execute(
            "UPDATE cairn_fts_totals SET records = records + $1, tokens = tokens + $2",
            &[&(documents.len() as i64), &tokens],
        )
        .map_err(fail)?;
    let mut batch = PostingBatch::default();
    for (id, length, document_terms) in documents {
        for term in document_terms {
            if batch.flat.len() + term.positions.len() > PostingBatch::MAX_POSITIONS {
                batch.flush(target, client)?;
            }
            batch.terms.push(&term.token);
            batch.ids.push(*id);
            batch.freqs.push(term.freq as i32);
            batch.lengths.push(*length as i32);
            batch.firsts.push(batch.flat.len() as i32 + 1);
            batch.flat.extend_from_slice(&term.positions);
            batch.lasts.push(batch.flat.len() as i32);
        }
    }
    batch.flush(target, client)
}

/// Postings on their way to one `INSERT`, as columns; each posting's positions are the slice
/// `firsts[i]..=lasts[i]` (1-based, PostgreSQL's) of `flat`.
#[derive(Default)]
struct PostingBatch<'a> {
    terms: Vec<&'a [u8]>,
    ids: Vec<i64>,
    freqs: Vec<i32>,
    lengths: Vec<i32>,
    firsts: Vec<i32>,
    lasts: Vec<i32>,
    flat: Vec<i32>,
}

impl PostingBatch<'_> {
    /// Positions per statement at most (a few megabytes per message).
    const MAX_POSITIONS: usize = 1 << 20;

    fn flush(&mut self, target: &PgTarget, client: &mut impl GenericClient) -> Result<()> {
        if self.terms.is_empty() {
            return Ok(());
        }
        client
            .execute(
                "INSERT INTO cairn_fts_postings (term, memory_id, freq, length, positions) \
                 SELECT t.term, t.id, t.freq, t.len, ($7::int4[])[t.first:t.last] \
                 FROM unnest($1::bytea[], $2::int8[], $3::int4[], $4::int4[], $5::int4[], $6::int4[]) \
                 AS t(term, id, freq, len, first, last)",
                &[
                    &self.terms,
                    &self.ids,
                    &self.freqs,
                    &self.lengths,
                    &self.firsts,
                    &self.lasts,
                    &self.flat,
                ],
            )
            .map_err(|e| target.error("cannot write the full-text index", &e))?;
        *self = PostingBatch::default();
        Ok(())
    }
}

/// Statement parameters, numbered as they are pushed.
#[derive(Default)]
pub(crate) struct Params {
    values: Vec<Box<dyn ToSql + Sync>>,
}

impl Params {
    /// Adds `value`; answers its placeholder (`$n`).
    pub(crate) fn mark(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.values.push(Box::new(value));
        format!("${}", self.values.len())
    }

    pub(crate) fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values.iter().map(|v| v.as_ref()).collect()
    }
}

/// Appends the candidate filters of `query` to `sql` as ` AND …` clauses over the alias `m`:
/// the clauses of SQLite's `push_filters` (search.rs), clause for clause. Text dates compare
/// byte-wise (`COLLATE "C"`), as SQLite compares them.
pub(crate) fn push_filters(query: &LexicalQuery<'_>, sql: &mut String, params: &mut Params) {
    let projects: Vec<String> = query
        .projects
        .iter()
        .map(|p| params.mark(p.clone().unwrap_or_default()))
        .collect();
    if projects.is_empty() {
        sql.push_str(" AND false");
    } else {
        sql.push_str(&format!(" AND m.project IN ({})", projects.join(", ")));
    }
    if let Some(scopes) = query.scopes {
        let marks: Vec<String> = scopes.iter().map(|s| params.mark(s.clone())).collect();
        if marks.is_empty() {
            sql.push_str(" AND false");
        } else {
            sql.push_str(&format!(" AND m.scope IN ({})", marks.join(", ")));
        }
    }
    if let Some(types) = query.types {
        let marks: Vec<String> = types
            .iter()
            .map(|t| params.mark(t.as_str().to_string()))
            .collect();
        if marks.is_empty() {
            sql.push_str(" AND false");
        } else {
            sql.push_str(&format!(" AND m.type IN ({})", marks.join(", ")));
        }
    }
    match (query.as_of, query.include_archived) {
        (_, true) => {}
        (Some(as_of), false) => {
            let at = params.mark(as_of.to_string());
            sql.push_str(&format!(
                " AND (m.status <> 'archived' OR (m.retired_at IS NOT NULL AND m.retired_at > {at} COLLATE \"C\"))"
            ));
        }
        (None, false) => sql.push_str(" AND m.status <> 'archived'"),
    }
    if let Some(as_of) = query.as_of {
        let at = params.mark(as_of.to_string());
        sql.push_str(&format!(" AND m.created_at <= {at} COLLATE \"C\""));
    }
    if let Some(since) = query.since {
        let at = params.mark(since.to_string());
        sql.push_str(&format!(" AND m.created_at >= {at} COLLATE \"C\""));
    }
    if let Some(until) = query.until {
        let at = params.mark(until.to_string());
        sql.push_str(&format!(" AND m.created_at <= {at} COLLATE \"C\""));
    }
    match query.visible_to {
        None | Some(cairn_core::record::TrustZone::PrivateSelf) => {}
        Some(cairn_core::record::TrustZone::TrustedCollaborator) => {
            sql.push_str(" AND m.sensitivity <> 'do_not_export'")
        }
        Some(
            cairn_core::record::TrustZone::OutsideContact
            | cairn_core::record::TrustZone::PaidPublic,
        ) => sql.push_str(" AND m.sensitivity = 'public_safe' AND m.trust_zone <> 'private_self'"),
    }
}

/// The weight of a position's column, in SQL (`pos` an instance position).
fn column_weight_sql(position: &str) -> String {
    format!(
        "CASE {position} >> {POSITION_BITS} WHEN 0 THEN {} WHEN 1 THEN {} WHEN 2 THEN {} ELSE {} END",
        WEIGHTS[0], WEIGHTS[1], WEIGHTS[2], WEIGHTS[3]
    )
}

/// The best `query.limit` records matching any of `terms` (each a quoted FTS5 term: one phrase)
/// that pass the filters of `query` (its `match_expression` is not read), strongest first, ties
/// by the lower id — the answer of SQLite's `Reader::lexical_search` for
/// `fts_match_expression(terms)`, with the same strengths.
pub fn lexical_search(
    target: &PgTarget,
    client: &mut impl GenericClient,
    terms: &[String],
    query: &LexicalQuery<'_>,
) -> Result<Vec<LexicalHit>> {
    let phrases = phrases_of(terms)?;
    if phrases.is_empty() {
        return Ok(Vec::new());
    }
    // SQLite's two passes (search.rs): the filters on the best window of matches first (a
    // frequent word matches tens of thousands of records; joining each with `memories` cost
    // more than ranking them), every match only when the window held too few that pass. The
    // order (strength, then id) is total, so both give the answer of filtering every match.
    // Narrow filters go straight to the full pass.
    let limit = query.limit.max(1);
    let narrow = query.scopes.is_some()
        || query.types.is_some()
        || query.since.is_some()
        || query.until.is_some();
    if !narrow {
        let window = FIRST_PASS_WINDOW.max(limit.saturating_mul(4));
        let (hits, matches) = lexical_pass(target, client, &phrases, query, Some(window))?;
        if hits.len() >= limit || matches < window {
            return Ok(hits);
        }
    }
    Ok(lexical_pass(target, client, &phrases, query, None)?.0)
}

/// The phrases of `terms` (each a query term: one phrase), each with its place among the
/// non-empty terms and its FTS5 tokens; a phrase of no tokens (it matches nothing and adds
/// nothing to a score) is left out.
fn phrases_of(terms: &[String]) -> Result<Vec<(usize, Vec<Vec<u8>>)>> {
    let phrases: Vec<Vec<Vec<u8>>> = with_tokenizer(|tokenizer| {
        terms
            .iter()
            .filter(|term| !term.is_empty())
            .map(|term| lexical::phrase_tokens(tokenizer, term))
            .collect()
    })?;
    Ok(phrases
        .into_iter()
        .enumerate()
        .filter(|(_, tokens)| !tokens.is_empty())
        .collect())
}

/// For each of `terms`, in order, how many records contain it (as FTS5 matches the quoted
/// term), counting no further than `cap`: one statement for every term.
pub fn term_counts(
    target: &PgTarget,
    client: &mut impl GenericClient,
    terms: &[String],
    cap: usize,
) -> Result<Vec<usize>> {
    let mut counts = vec![0; terms.len()];
    // `phrases_of` numbers the non-empty terms; map those numbers back to places in `terms`.
    let places: Vec<usize> = (0..terms.len()).filter(|&n| !terms[n].is_empty()).collect();
    let phrases = phrases_of(terms)?;
    if phrases.is_empty() {
        return Ok(counts);
    }
    let mut params = Params::default();
    let sql = format!(
        "SELECT phrase, count(*) FROM ({}) x GROUP BY phrase",
        matches_sql(&phrases, &mut params)
    );
    let rows = client
        .query(&sql, &params.refs())
        .map_err(|e| target.error("cannot count the records of the query terms", &e))?;
    for row in rows {
        let phrase: i32 = row.get(0);
        let found: i64 = row.get(1);
        counts[places[phrase as usize]] = (found.max(0) as usize).min(cap);
    }
    Ok(counts)
}

/// One pass of [`lexical_search`]: the filtered best matches among the best `window` (all when
/// `None`), and how many rows the window held.
fn lexical_pass(
    target: &PgTarget,
    client: &mut impl GenericClient,
    phrases: &[(usize, Vec<Vec<u8>>)],
    query: &LexicalQuery<'_>,
    window: Option<usize>,
) -> Result<(Vec<LexicalHit>, usize)> {
    let limit = query.limit.max(1);
    let (sql, params) = lexical_statement(phrases, query, window);
    let rows = client
        .query(&sql, &params.refs())
        .map_err(|e| target.error("cannot search the full-text index", &e))?;
    let hits = rows
        .iter()
        .filter(|row| row.get::<_, bool>(2))
        .take(limit)
        .map(|row| LexicalHit {
            id: row.get(0),
            strength: row.get(1),
        })
        .collect();
    Ok((hits, rows.len()))
}

/// The matches of `phrases` (each its number in the query and its tokens; none empty) as one
/// `UNION ALL` of `(phrase, memory_id, freq, length)` rows, one per phrase and record holding
/// it, its values pushed to `params`.
fn matches_sql(phrases: &[(usize, Vec<Vec<u8>>)], params: &mut Params) -> String {
    let mut matches: Vec<String> = Vec::with_capacity(phrases.len());
    for (phrase, tokens) in phrases {
        if let [token] = tokens.as_slice() {
            let term = params.mark(token.clone());
            matches.push(format!(
                "SELECT {phrase} AS phrase, p.memory_id, p.freq, p.length \
                 FROM cairn_fts_postings p WHERE p.term = {term}"
            ));
            continue;
        }
        // A phrase: the records holding all its tokens, and in each the instances where they
        // follow one another in one column, weighted by that column.
        let mut sql = format!(
            "SELECT {phrase} AS phrase, p0.memory_id, f.freq, p0.length FROM cairn_fts_postings p0"
        );
        let mut follows: Vec<String> = Vec::new();
        for (index, token) in tokens.iter().enumerate().skip(1) {
            let term = params.mark(token.clone());
            sql.push_str(&format!(
                " JOIN cairn_fts_postings p{index} ON p{index}.memory_id = p0.memory_id AND p{index}.term = {term}"
            ));
            follows.push(format!("(pos + {index}) = ANY(p{index}.positions)"));
        }
        let first = params.mark(tokens[0].clone());
        sql.push_str(&format!(
            " CROSS JOIN LATERAL (SELECT sum({})::integer AS freq FROM unnest(p0.positions) AS pos WHERE {}) f \
             WHERE p0.term = {first} AND f.freq IS NOT NULL",
            column_weight_sql("pos"),
            follows.join(" AND ")
        ));
        matches.push(sql);
    }
    matches.join(" UNION ALL ")
}

/// [`lexical_search`]'s statement for `phrases` (each its number in the query and its tokens;
/// none empty) and its parameters.
fn lexical_statement(
    phrases: &[(usize, Vec<Vec<u8>>)],
    query: &LexicalQuery<'_>,
    window: Option<usize>,
) -> (String, Params) {
    let mut params = Params::default();
    let matches = matches_sql(phrases, &mut params);
    // fts5Bm25Function: per phrase idf = ln((N − n + 0.5) / (n + 0.5)), 1e-6 when not above
    // 0; the row's score adds, phrase by phrase in query order, idf · (f · (k1 + 1)) /
    // (f + k1 · (1 − b + b · D / avgdl)). Each operation below is FTS5's, in its order.
    let sum: Vec<String> = phrases
        .iter()
        .map(|(phrase, _)| {
            format!(" + coalesce(max(part) FILTER (WHERE phrase = {phrase}), 0::float8)")
        })
        .collect();
    // N and avgdl are uncorrelated scalar subqueries (computed once, and estimated as one
    // value: a join with the totals row made the planner expect millions of rows and compile
    // the statement with JIT, 250 ms).
    let mut sql = format!(
        "WITH matches AS MATERIALIZED ({}), \
         idfs AS MATERIALIZED (SELECT phrase, CASE WHEN idf <= 0::float8 THEN 1e-6::float8 ELSE idf END AS idf \
                  FROM (SELECT phrase, ln((((SELECT records FROM cairn_fts_totals) - count(*))::float8 + 0.5::float8) \
                  / (count(*)::float8 + 0.5::float8)) AS idf FROM matches GROUP BY phrase) x), \
         parts AS (SELECT h.memory_id, h.phrase, i.idf * ((h.freq::float8 * (1.2::float8 + 1.0::float8)) / \
                   (h.freq::float8 + 1.2::float8 * (1.0::float8 - 0.75::float8 + 0.75::float8 * h.length::float8 / \
                   (SELECT tokens::float8 / nullif(records, 0)::float8 FROM cairn_fts_totals)))) AS part \
                   FROM matches h JOIN idfs i ON i.phrase = h.phrase), \
         scored AS (SELECT memory_id AS id, 0::float8{} AS strength FROM parts GROUP BY memory_id) ",
        matches,
        sum.join("")
    );
    match window {
        // Every windowed match comes back (to count them); the filters, in the ON clause,
        // give the ones they refuse a NULL record id.
        Some(window) => {
            sql.push_str(&format!(
                ", best AS (SELECT id, strength FROM scored ORDER BY strength DESC, id LIMIT {window}) \
                 SELECT b.id, b.strength, m.id IS NOT NULL FROM best b LEFT JOIN memories m ON m.id = b.id"
            ));
            push_filters(query, &mut sql, &mut params);
            sql.push_str(" ORDER BY b.strength DESC, b.id");
        }
        None => {
            sql.push_str("SELECT s.id, s.strength, true FROM scored s JOIN memories m ON m.id = s.id WHERE true");
            push_filters(query, &mut sql, &mut params);
            sql.push_str(&format!(
                " ORDER BY s.strength DESC, s.id LIMIT {}",
                query.limit.max(1)
            ));
        }
    }
    (sql, params)
}

/// How [`vector_search`] finds the nearest vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorMode {
    /// The HNSW index, looking at `ef_search` candidates at a time (pgvector's
    /// `hnsw.ef_search`; more is slower and more exact).
    Hnsw { ef_search: u32 },
    /// Every vector (what the recall of the index is measured against).
    Exact,
}

/// One semantic candidate: a record and the inner product of its vector with the query's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorHit {
    pub id: i64,
    pub similarity: f64,
}

/// The name of the HNSW index over vectors of `dimension` floats.
fn hnsw_index_name(dimension: usize) -> String {
    format!("cairn_vectors_hnsw_{dimension}")
}

/// Creates the HNSW index over the brain's vectors of `dimension` floats (pgvector's defaults:
/// m 16, ef_construction 64), when missing. Vectors of another dimension (another model's)
/// are not in it.
pub fn create_vector_index(
    target: &PgTarget,
    client: &mut impl GenericClient,
    dimension: usize,
) -> Result<()> {
    client
        .batch_execute(&format!(
            "CREATE INDEX IF NOT EXISTS {} ON vectors USING hnsw ((vector::vector({dimension})) vector_ip_ops) \
             WHERE vector_dims(vector) = {dimension}",
            hnsw_index_name(dimension)
        ))
        .map_err(|e| target.error("cannot create the vector index", &e))
}

/// The `limit` records whose vectors are nearest `vector` (highest inner product) among those
/// passing the filters of `query` (its `match_expression` and `limit` are not read), nearest
/// first: filters and ordering in one statement, in one transaction of
/// its own (the search settings are local to it).
pub fn vector_search(
    target: &PgTarget,
    client: &mut postgres::Client,
    vector: &[f32],
    query: &LexicalQuery<'_>,
    limit: usize,
    mode: VectorMode,
) -> Result<Vec<VectorHit>> {
    let fail = |e: postgres::Error| target.error("cannot search the vectors", &e);
    if vector.is_empty() {
        return Ok(Vec::new());
    }
    let (settings, sql, params) = vector_statement(vector, query, limit, mode);
    let mut tx = client.transaction().map_err(fail)?;
    tx.batch_execute(&settings).map_err(fail)?;
    let rows = tx.query(&sql, &params.refs()).map_err(fail)?;
    tx.commit().map_err(fail)?;
    Ok(rows
        .iter()
        .map(|row| VectorHit {
            id: row.get(0),
            similarity: row.get(1),
        })
        .collect())
}

/// [`vector_search`]'s settings (local to its transaction), statement and parameters.
fn vector_statement(
    vector: &[f32],
    query: &LexicalQuery<'_>,
    limit: usize,
    mode: VectorMode,
) -> (String, String, Params) {
    let dimension = vector.len();
    let mut params = Params::default();
    let query_vector = params.mark(pgvector::Vector::from(vector.to_vec()));
    let (settings, distance, tie) = match mode {
        // strict_order: the iterative scan keeps the exact distance order while it goes on
        // past records the filters refuse. The index orders by the distance alone (an added
        // key would keep the planner from using it).
        VectorMode::Hnsw { ef_search } => (
            format!(
                "SET LOCAL hnsw.ef_search = {}; SET LOCAL hnsw.iterative_scan = strict_order",
                ef_search.clamp(1, 1000)
            ),
            format!("(v.vector::vector({dimension}) <#> {query_vector}::vector({dimension}))"),
            "",
        ),
        VectorMode::Exact => (
            "SET LOCAL enable_indexscan = off".to_string(),
            format!("(v.vector <#> {query_vector})"),
            ", v.memory_id",
        ),
    };
    // The same filters as SQLite's semantic candidates (`filter_ids`).
    let mut sql = format!(
        "SELECT v.memory_id, -{distance} FROM vectors v JOIN memories m ON m.id = v.memory_id \
         WHERE vector_dims(v.vector) = {dimension}"
    );
    push_filters(query, &mut sql, &mut params);
    sql.push_str(&format!(" ORDER BY {distance}{tie} LIMIT {}", limit.max(1)));
    (settings, sql, params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::migrate::{Endpoint, migrate};
    use crate::pg_support::TestDb;
    use crate::testing::memory;
    use crate::{Store, StoreError};
    use cairn_core::query::fts_match_expression;
    use cairn_core::record::{MemoryType, TrustZone};

    /// Stemming cases, case, diacritics, other scripts, words FTS5 splits in several tokens
    /// (phrases), numbers.
    const WORDS: &[&str] = &[
        "run",
        "running",
        "runs",
        "Ran",
        "connect",
        "connection",
        "CONNECTING",
        "café",
        "Cafe",
        "naïve",
        "straße",
        "東京",
        "über",
        "the",
        "of",
        "db-pool",
        "v1.2",
        "42",
        "amber",
        "birch",
        "cedar",
        "delta",
        "ember",
        "fjord",
        "grove",
        "hazel",
        "iris",
        "e-mail",
        "don't",
        "zebra",
        "quartz",
    ];

    type Rng = crate::testing::WordRng;

    /// The tests' generator over this module's words.
    fn seeded(seed: u64) -> Rng {
        Rng::new(seed, WORDS)
    }

    const PROJECTS: &[&str] = &["p", "q", ""];
    const SCOPES: &[&str] = &["global", "session:a", "branch:main"];
    const TYPES: &[&str] = &["note", "decision", "fact", "episode"];
    const STATUSES: &[&str] = &["active", "active", "active", "archived", "superseded"];
    const SENSITIVITIES: &[&str] = &["normal", "public_safe", "do_not_export"];
    const ZONES: &[&str] = &["private_self", "trusted_collaborator", "outside_contact"];

    /// A record with random text and filter fields.
    fn random_memory(rng: &mut Rng) -> cairn_core::memory::Memory {
        let mut value = serde_json::to_value(memory("p", MemoryType::Note, "x", "active")).unwrap();
        let day = 1 + rng.below(28);
        let created = format!("2026-0{}-{day:02}T10:00:00Z", 1 + rng.below(9));
        let status = rng.pick(STATUSES);
        value["project"] = match rng.pick(PROJECTS) {
            "" => serde_json::Value::Null,
            project => project.into(),
        };
        value["scope"] = rng.pick(SCOPES).into();
        value["type"] = rng.pick(TYPES).into();
        value["status"] = status.into();
        value["sensitivity"] = rng.pick(SENSITIVITIES).into();
        value["trust_zone"] = rng.pick(ZONES).into();
        value["created_at"] = created.clone().into();
        value["retired_at"] = if status == "active" {
            serde_json::Value::Null
        } else {
            format!("2026-1{}-01T00:00:00Z", rng.below(3)).into()
        };
        value["body"] = rng.text(30).into();
        value["title"] = rng.maybe_text(5).into();
        value["summary"] = rng.maybe_text(8).into();
        value["tags"] = (0..rng.below(3))
            .map(|_| rng.word().to_lowercase())
            .collect::<Vec<_>>()
            .into();
        serde_json::from_value(value).unwrap()
    }

    fn insert_random(store: &mut Store, rng: &mut Rng, count: usize) -> Vec<i64> {
        store
            .write(|tx| {
                let mut ids = Vec::new();
                for _ in 0..count {
                    ids.push(tx.insert_memory(&random_memory(rng), None)?);
                }
                Ok::<_, StoreError>(ids)
            })
            .unwrap()
    }

    /// A brain in SQLite, migrated to a fresh database of the test server; `None`: no server
    /// (skipped, printed).
    struct Both {
        // Dropped in this order: the connection, then the database, then the file.
        client: postgres::Client,
        target: PgTarget,
        _db: TestDb,
        store: Store,
        path: std::path::PathBuf,
        _dir: tempfile::TempDir,
    }

    fn migrated(fill: impl FnOnce(&mut Store)) -> Option<Both> {
        let db = TestDb::new()?;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        fill(&mut store);
        drop(store);
        let target = PgTarget::parse(&db.url).unwrap();
        migrate(
            &Endpoint::Sqlite(path.clone()),
            &Endpoint::Postgres(PgTarget::parse(&db.url).unwrap()),
            500,
            &mut |_| {},
        )
        .unwrap();
        let client = target.connect().unwrap();
        Some(Both {
            store: Store::open(&path).unwrap(),
            _dir: dir,
            path,
            _db: db,
            target,
            client,
        })
    }

    /// Random filters of every kind `LexicalQuery` has.
    struct Filters {
        projects: Vec<Option<String>>,
        scopes: Option<Vec<String>>,
        types: Option<Vec<MemoryType>>,
        include_archived: bool,
        as_of: Option<String>,
        since: Option<String>,
        until: Option<String>,
        visible_to: Option<TrustZone>,
    }

    impl Filters {
        fn random(rng: &mut Rng) -> Filters {
            let projects = match rng.below(4) {
                0 => vec![Some("p".to_string())],
                1 => vec![Some("q".to_string()), None],
                _ => vec![Some("p".to_string()), Some("q".to_string()), None],
            };
            let narrow = rng.below(3) == 0;
            Filters {
                projects,
                scopes: (narrow && rng.below(2) == 0)
                    .then(|| vec!["global".to_string(), rng.pick(&SCOPES[1..]).to_string()]),
                types: (narrow && rng.below(2) == 0).then(|| {
                    vec![
                        MemoryType::Note,
                        [MemoryType::Decision, MemoryType::Episode][rng.below(2)],
                    ]
                }),
                include_archived: rng.below(2) == 0,
                as_of: (rng.below(6) == 0).then(|| "2026-06-15T00:00:00Z".to_string()),
                since: (narrow && rng.below(3) == 0).then(|| "2026-03-01T00:00:00Z".to_string()),
                until: (narrow && rng.below(3) == 0).then(|| "2026-08-01T00:00:00Z".to_string()),
                visible_to: match rng.below(6) {
                    0 => Some(TrustZone::TrustedCollaborator),
                    1 => Some(TrustZone::OutsideContact),
                    2 => Some(TrustZone::PrivateSelf),
                    _ => None,
                },
            }
        }

        fn query<'a>(&'a self, expression: &'a str, limit: usize) -> LexicalQuery<'a> {
            LexicalQuery {
                match_expression: expression,
                projects: &self.projects,
                scopes: self.scopes.as_deref(),
                types: self.types.as_deref(),
                include_archived: self.include_archived,
                as_of: self.as_of.as_deref(),
                since: self.since.as_deref(),
                until: self.until.as_deref(),
                visible_to: self.visible_to,
                limit,
            }
        }
    }

    /// PostgreSQL answers `terms` under `filters` exactly as FTS5 does: the same ids in the
    /// same order, strengths equal within 1e-9 relative. Answers how many hits were compared.
    fn check(both: &mut Both, terms: &[String], filters: &Filters, limit: usize) -> usize {
        let Some(expression) = fts_match_expression(terms) else {
            return 0;
        };
        let query = filters.query(&expression, limit);
        let want = both.store.reader().lexical_search(&query).unwrap();
        let got = lexical_search(&both.target, &mut both.client, terms, &query).unwrap();
        let ids = |hits: &[LexicalHit]| hits.iter().map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(
            ids(&got),
            ids(&want),
            "{expression} limit {limit} {:?} {:?} {:?} archived {} as_of {:?} {:?}..{:?} {:?}",
            filters.projects,
            filters.scopes,
            filters.types,
            filters.include_archived,
            filters.as_of,
            filters.since,
            filters.until,
            filters.visible_to
        );
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g.strength - w.strength).abs() <= 1e-9 * w.strength.abs().max(1e-12),
                "{expression}: {g:?} {w:?}"
            );
        }
        want.len()
    }

    fn random_terms(rng: &mut Rng) -> Vec<String> {
        (0..1 + rng.below(4))
            .map(|_| match rng.below(10) {
                0 => "nowhere".to_string(),
                1 => "db pool".to_string(),
                _ => rng.word().to_string(),
            })
            .collect()
    }

    fn check_random(both: &mut Both, rng: &mut Rng, queries: usize) -> usize {
        let mut compared = 0;
        for _ in 0..queries {
            let terms = random_terms(rng);
            let filters = Filters::random(rng);
            let limit = [1, 3, 10, 60, 400][rng.below(5)];
            compared += check(both, &terms, &filters, limit);
        }
        compared
    }

    /// Runs `sql` on the brain file and on the PostgreSQL copy (the same text on both).
    /// A line `--sqlite: …` runs on SQLite only.
    fn both_execute(both: &mut Both, sql: &str) {
        let conn = rusqlite::Connection::open(&both.path).unwrap();
        conn.execute_batch(&sql.replace("\n--sqlite: ", "\n"))
            .unwrap();
        let postgres: String = sql
            .lines()
            .filter(|line| !line.starts_with("--sqlite: "))
            .collect::<Vec<_>>()
            .join("\n");
        both.client.batch_execute(&postgres).unwrap();
    }

    fn literal(text: Option<String>) -> String {
        match text {
            Some(text) => format!("'{}'", text.replace('\'', "''")),
            None => "NULL".to_string(),
        }
    }

    /// Writes of every kind that touch the full-text rows, the same on both sides, then the
    /// PostgreSQL index brought in step with the ids they touched.
    fn mutate(both: &mut Both, rng: &mut Rng) {
        let ids: Vec<i64> = {
            let reader = both.store.reader();
            let mut statement = reader
                .conn
                .prepare("SELECT id FROM memories ORDER BY id")
                .unwrap();
            statement
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        let mut next_id: i64 = ids.iter().max().copied().unwrap_or(0) + 1000;
        let mut touched = Vec::new();
        for _ in 0..40 {
            let id = ids[rng.below(ids.len())];
            let sql = match rng.below(8) {
                0 => format!(
                    "UPDATE memories SET body = {} WHERE id = {id}",
                    literal(Some(rng.text(30)))
                ),
                1 => format!(
                    "UPDATE memories SET title = {} WHERE id = {id}",
                    literal(rng.maybe_text(4))
                ),
                2 => format!(
                    "UPDATE memories SET tags = {}, summary = {} WHERE id = {id}",
                    literal(Some(rng.word().to_lowercase())),
                    literal(rng.maybe_text(6))
                ),
                // A forget.
                3 => format!("DELETE FROM memories WHERE id = {id}"),
                // Merged away by a dream, and back.
                4 => format!(
                    "UPDATE memories SET merged_into = {} WHERE id = {id} AND merged_into IS NULL",
                    ids[0]
                ),
                5 => format!("UPDATE memories SET merged_into = NULL WHERE id = {id}"),
                // A new record (a copy of another with new text).
                6 => {
                    next_id += 1;
                    touched.push(next_id);
                    format!(
                        "CREATE TEMP TABLE copied AS SELECT * FROM memories WHERE id = {id}; \
                         UPDATE copied SET id = {next_id}, body = {}, title = {}; \
                         INSERT INTO memories SELECT * FROM copied; DROP TABLE copied;",
                        literal(Some(rng.text(20))),
                        literal(rng.maybe_text(3))
                    ) + &format!(
                        // What `insert_memory` does on SQLite: the row's full-text entry is
                        // written by the write path, not by a trigger (schema.rs).
                        "\n--sqlite: INSERT INTO memories_fts (rowid, title, summary, tags, body) \
                         SELECT id, title, summary, tags, body FROM memories WHERE id = {next_id} AND merged_into IS NULL;"
                    )
                }
                // A supersede or archive: only what the filters see changes.
                _ => format!(
                    "UPDATE memories SET status = '{}' WHERE id = {id}",
                    rng.pick(&["archived", "superseded", "active"])
                ),
            };
            both_execute(both, &sql);
            touched.push(id);
        }
        let mut tx = both.client.transaction().unwrap();
        reindex_lexical(&both.target, &mut tx, &touched).unwrap();
        tx.commit().unwrap();
    }

    #[test]
    fn bm25_on_postgres_answers_as_fts5_through_writes_of_every_kind() {
        let mut rng = seeded(0x0b25);
        let Some(mut both) = migrated(|store| {
            insert_random(store, &mut seeded(0x5eed), 900);
        }) else {
            return;
        };
        let mut compared = check_random(&mut both, &mut rng, 250);
        // Hand-picked: absent terms, a repeated term, phrases, stems, case and diacritics,
        // another script, a stop word, many terms.
        let all = Filters {
            projects: vec![Some("p".into()), Some("q".into()), None],
            scopes: None,
            types: None,
            include_archived: true,
            as_of: None,
            since: None,
            until: None,
            visible_to: None,
        };
        for terms in [
            &["nowhere"][..],
            &["nowhere", "elsewhere"],
            &["amber"],
            &["amber", "amber"],
            &["amber", "nowhere", "amber"],
            &["running"],
            &["RUNS", "connected"],
            &["cafe", "CAFÉ"],
            &["naive"],
            &["strasse", "straße"],
            &["東京"],
            &["the"],
            &["db-pool"],
            &["db pool", "e mail"],
            &["v1.2", "42"],
            &["don't", "dont"],
            &["amber birch"],
            &[
                "zebra", "quartz", "hazel", "iris", "fjord", "grove", "ember",
            ],
        ] {
            let terms: Vec<String> = terms.iter().map(|t| t.to_string()).collect();
            for limit in [1, 10, 1000] {
                compared += check(&mut both, &terms, &all, limit);
            }
        }
        assert!(compared > 2000, "too few hits compared: {compared}");
        for _ in 0..4 {
            mutate(&mut both, &mut rng);
            check_random(&mut both, &mut rng, 60);
        }
        // A full rebuild gives the same index as the writes kept in step.
        let totals = |client: &mut postgres::Client| -> (i64, i64, i64) {
            let row = client
                .query_one(
                    "SELECT records, tokens, (SELECT count(*) FROM cairn_fts_postings) FROM cairn_fts_totals",
                    &[],
                )
                .unwrap();
            (row.get(0), row.get(1), row.get(2))
        };
        // Its bulk load drops the postings' indexes and builds them again: as the schema has them.
        let indexes = |client: &mut postgres::Client| -> Vec<(String, String)> {
            client
                .query(
                    "SELECT indexname::text, indexdef FROM pg_indexes \
                     WHERE tablename LIKE 'cairn_fts_%' ORDER BY indexname",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect()
        };
        let kept = totals(&mut both.client);
        let schema_indexes = indexes(&mut both.client);
        assert_eq!(schema_indexes.len(), 4, "{schema_indexes:?}");
        rebuild_lexical(&both.target, &mut both.client).unwrap();
        assert_eq!(totals(&mut both.client), kept);
        assert_eq!(indexes(&mut both.client), schema_indexes);
        assert_eq!(
            kept.0 as usize,
            both.store.reader().indexed_count().unwrap()
        );
        check_random(&mut both, &mut rng, 40);
        // And writes keep it in step after the rebuild as before.
        mutate(&mut both, &mut rng);
        check_random(&mut both, &mut rng, 40);
    }

    /// The counts of many terms, read in one statement, are FTS5's for each term (phrases,
    /// stems, absent and tokenless terms included), bounded by the cap.
    #[test]
    fn term_counts_are_fts5s_term_by_term() {
        let Some(mut both) = migrated(|store| {
            insert_random(store, &mut seeded(0x7e57), 600);
        }) else {
            return;
        };
        let mut terms: Vec<String> = WORDS.iter().map(|w| w.to_string()).collect();
        terms.extend(["nowhere", "db pool", "", "amber birch", "-"].map(String::from));
        for cap in [1, 7, 100_000] {
            let got = term_counts(&both.target, &mut both.client, &terms, cap).unwrap();
            let want: Vec<usize> = terms
                .iter()
                .map(
                    |term| match fts_match_expression(std::slice::from_ref(term)) {
                        Some(expression) => both
                            .store
                            .reader()
                            .term_frequency(&expression, cap)
                            .unwrap(),
                        None => 0,
                    },
                )
                .collect();
            assert_eq!(got, want, "cap {cap}");
        }
        assert_eq!(
            term_counts(&both.target, &mut both.client, &[], 5).unwrap(),
            Vec::<usize>::new()
        );
    }

    /// An empty brain, and a query whose terms have no tokens, answer nothing.
    #[test]
    fn an_empty_index_and_tokenless_terms_answer_nothing() {
        let Some(mut both) = migrated(|_| {}) else {
            return;
        };
        let all = Filters {
            projects: vec![Some("p".into())],
            scopes: None,
            types: None,
            include_archived: true,
            as_of: None,
            since: None,
            until: None,
            visible_to: None,
        };
        assert_eq!(check(&mut both, &["amber".to_string()], &all, 10), 0);
        let query = all.query("", 10);
        let got = lexical_search(
            &both.target,
            &mut both.client,
            &["".to_string(), "...".to_string()],
            &query,
        )
        .unwrap();
        assert!(got.is_empty());
    }

    /// HNSW's top 10 holds at least 95 % of the exact scan's, with and without filters; the
    /// exact scan is the nearest vectors (computed here from the SQLite copy) among the records
    /// SQLite's own filters allow, and nothing the filters refuse ever comes back.
    #[test]
    fn hnsw_top_10_finds_what_the_exact_scan_finds_within_the_filters() {
        let dimension = 24;
        let Some(mut both) = migrated(|store| {
            let mut rng = seeded(77);
            let ids = insert_random(store, &mut rng, 3000);
            store
                .write(|tx| {
                    tx.set_vector_space(&crate::VectorSpace {
                        model: "test".into(),
                        dimension,
                    })?;
                    for id in ids {
                        tx.put_vector(id, &format!("h{id}"), &rng.unit_vector(dimension))?;
                    }
                    Ok::<_, StoreError>(())
                })
                .unwrap();
        }) else {
            return;
        };
        create_vector_index(&both.target, &mut both.client, dimension).unwrap();
        both.client
            .batch_execute("ANALYZE vectors, memories")
            .unwrap();
        // The HNSW mode does go through the index (3,000 rows: a plan could scan them all).
        {
            let all = [Some("p".to_string()), Some("q".to_string()), None];
            let query = LexicalQuery {
                projects: &all,
                ..LexicalQuery::default()
            };
            let vector = seeded(5).unit_vector(dimension);
            let (settings, sql, params) =
                vector_statement(&vector, &query, 10, VectorMode::Hnsw { ef_search: 100 });
            let mut tx = both.client.transaction().unwrap();
            tx.batch_execute(&settings).unwrap();
            let plan: Vec<String> = tx
                .query(&format!("EXPLAIN {sql}"), &params.refs())
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect();
            assert!(
                plan.iter()
                    .any(|line| line.contains(&hnsw_index_name(dimension))),
                "{plan:#?}"
            );
        }
        let matrix = both.store.reader().load_vectors(dimension).unwrap();
        assert_eq!(matrix.ids.len(), 3000);
        // The brain's own f32 vectors (the matrix rounds them to bfloat16).
        let stored: Vec<Vec<f32>> = matrix
            .ids
            .iter()
            .map(|&id| {
                both.store
                    .reader()
                    .vector_of(id, dimension)
                    .unwrap()
                    .unwrap()
            })
            .collect();
        let mut rng = seeded(99);
        let (mut found, mut wanted) = (0usize, 0usize);
        for round in 0..80 {
            let filters = if round % 2 == 0 {
                Filters {
                    projects: vec![Some("p".into()), Some("q".into()), None],
                    scopes: None,
                    types: None,
                    include_archived: true,
                    as_of: None,
                    since: None,
                    until: None,
                    visible_to: None,
                }
            } else {
                Filters::random(&mut rng)
            };
            let vector = rng.unit_vector(dimension);
            let query = filters.query("", 10);
            let exact = vector_search(
                &both.target,
                &mut both.client,
                &vector,
                &query,
                10,
                VectorMode::Exact,
            )
            .unwrap();
            let approximate = vector_search(
                &both.target,
                &mut both.client,
                &vector,
                &query,
                10,
                VectorMode::Hnsw { ef_search: 100 },
            )
            .unwrap();
            // The exact answer, here: every vector SQLite's filters allow, nearest first.
            let reader = both.store.reader();
            let allowed: std::collections::HashSet<i64> = reader
                .filter_ids(&matrix.ids, &query)
                .unwrap()
                .into_iter()
                .collect();
            let mut scored: Vec<(f64, i64)> = matrix
                .ids
                .iter()
                .enumerate()
                .filter(|(_, id)| allowed.contains(id))
                .map(|(row, id)| {
                    let dot: f64 = stored[row]
                        .iter()
                        .zip(&vector)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum();
                    (dot, *id)
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let want: Vec<i64> = scored.iter().take(10).map(|s| s.1).collect();
            assert_eq!(
                exact.iter().map(|h| h.id).collect::<Vec<_>>(),
                want,
                "round {round}"
            );
            for (hit, (dot, _)) in exact.iter().zip(&scored) {
                assert!((hit.similarity - dot).abs() < 1e-5, "{hit:?} {dot}");
            }
            for hit in &approximate {
                assert!(allowed.contains(&hit.id), "round {round}: {hit:?} refused");
            }
            found += approximate.iter().filter(|h| want.contains(&h.id)).count();
            wanted += want.len();
        }
        assert!(wanted > 500);
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.95, "recall@10 {recall:.3}");
    }
}
