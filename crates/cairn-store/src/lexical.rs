//! An in-memory copy of the full-text index for long-lived processes (`cairn serve`, the
//! `serve --local` daemon, `cairn mcp`): [`LexicalIndex::search`] gives exactly the answer of
//! [`Reader::lexical_search`] (same ids, same order, the same strengths), without FTS5's
//! `bm25()` walking the match list of a frequent word row by row (most of a lexical recall's
//! CPU at 100,000 records, issue 14).
//!
//! * **The same tokens**: the documents and the query terms go through FTS5's own tokenizer
//!   (`porter unicode61`, the table's), reached through the `fts5_api` C interface.
//! * **The same score**: `fts5Bm25Function` of SQLite's source, re-done in the same operations
//!   and order — the per-phrase frequency is the weighted count of its instances (title 3,
//!   summary 2, tags 2, body 1; whole numbers, so exact), D the row's tokens over all columns,
//!   avgdl the tokens over the rows, IDF `ln((N − n + 0.5) / (n + 0.5))` floored at 1e-6,
//!   k1 1.2, b 0.75.
//! * **The same records**: the filters are applied as `lexical_search` applies them (the best
//!   window first, then further only when the window did not hold `limit` records), from the
//!   records' filter columns kept beside the index (`facets`: the store's SQL clause by clause,
//!   byte-compared strings, times in cairn's canonical form) or, for what those cannot tell
//!   and inside a write transaction, by the store's own SQL. The same kept columns answer
//!   recall's `filter_ids` and `episode_neighbours` ([`LexicalIndex::filter_ids`],
//!   [`LexicalIndex::episode_neighbours`]).
//! * **Never stale**: schema v17 logs which record's full-text row changed (`fts_changes`,
//!   triggers — so writes of *other processes* too), and v18 also a change to its filter
//!   columns (project, scope, type, status, times, sensitivity, trust zone); every search first reads the log's head
//!   (one lookup) and re-reads the records changed since, or rebuilds when the log no longer
//!   reaches back that far. A search inside a write transaction leaves the index as it is and
//!   ranks the records changed since beside it, read from the transaction (its own
//!   uncommitted rows included), with N, avgdl and each term's count as the transaction sees
//!   them.
//!
//! What it does not answer exactly, it leaves to FTS5: a quoted term of several tokens (a
//! phrase) or of none, an expression of another shape (`AND`, column filters), narrow filters
//! (a scope or type filter at most [`NARROW_FILTER_MATCHES`] active records pass, or a time
//! window alone: SQLite then starts from `memories`), a brain without the log (older schema,
//! read-only), ids beyond `u32`. A broad scope filter (the write path's `global`) is ranked
//! here and filtered window by window like the project filter.

mod facets;

use crate::search::{
    EpisodeNeighbours, FIRST_PASS_WINDOW, LexicalHit, LexicalQuery, NARROW_FILTER_MATCHES,
};
use crate::{Reader, Result, StoreError};
use facets::{FACET_COLUMNS, FacetText};
pub(crate) use fts5::Tokenizer;
use rusqlite::OptionalExtension;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

/// The column weights cairn passes to `bm25()`: title, summary, tags, body.
pub(crate) const WEIGHTS: [u32; 4] = [3, 2, 2, 1];
/// FTS5's BM25 constants (`fts5Bm25Function`).
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// FTS5 indexes at most this many bytes of a token (`FTS5_MAX_TOKEN_SIZE`).
const MAX_TOKEN_BYTES: usize = 32768;
/// The `memories_fts` tokenizer (schema.rs): `porter` over `unicode61`.
const TOKENIZER: &std::ffi::CStr = c"porter";
const TOKENIZER_ARGS: [&std::ffi::CStr; 1] = [c"unicode61"];
pub(crate) const FTS5_TOKENIZE_QUERY: c_int = 0x0001;
const FTS5_TOKENIZE_DOCUMENT: c_int = 0x0004;
const FTS5_TOKEN_COLOCATED: c_int = 0x0001;

/// See the module documentation. One per brain, shared by every engine of a process.
pub struct LexicalIndex {
    /// FTS5's tokenizer for query terms (not thread-safe: porter keeps a buffer), created on
    /// first use; `None` inside: it could not be created, and every search goes to FTS5.
    tokenizer: Mutex<Option<Option<Tokenizer>>>,
    /// The documents' tokenizer, used only while `state` is held for writing (a build or a
    /// catch-up): its own, so a search tokenizes its terms while the index is being built.
    document_tokenizer: Mutex<Option<Option<Tokenizer>>>,
    state: RwLock<State>,
    /// `state.built`, readable while a build holds the lock.
    built: AtomicBool,
}

impl std::fmt::Debug for LexicalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("LexicalIndex")
            .field("built", &state.built)
            .field("rows", &state.rows)
            .field("terms", &state.terms.len())
            .finish_non_exhaustive()
    }
}

impl Default for LexicalIndex {
    fn default() -> LexicalIndex {
        LexicalIndex::new()
    }
}

#[derive(Default)]
struct State {
    /// Built from the brain at least once; false also after it was found unusable.
    built: bool,
    /// This brain cannot be kept in memory (no change log, an id beyond `u32`): FTS5 answers.
    unusable: bool,
    /// The last `fts_changes.seq` applied.
    seq: i64,
    /// Token → term number (the index into `postings`).
    terms: HashMap<Box<[u8]>, u32>,
    /// Per term, the records holding it, by id.
    postings: Vec<Vec<Posting>>,
    /// Per record id: its tokens over all columns (FTS5's D); 0 for an id not indexed.
    lengths: Vec<u32>,
    /// Per indexed record: its terms (to take it out again).
    docs: HashMap<u32, Box<[u32]>>,
    /// Rows and tokens in the index (FTS5's N and the total behind avgdl).
    rows: u64,
    tokens: u64,
    /// The indexed records' filter columns and conversations (`facets`), when the brain's
    /// change log records their changes (schema v18); `None`: SQL answers the filters.
    facets: Option<facets::Kept>,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    id: u32,
    /// The weighted count of the term's instances in the record.
    freq: u32,
}

/// Whether a search may bring the index up to date from its reader first: not from a reader
/// inside a write transaction, which sees rows the transaction may still roll back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CatchUp {
    Yes,
    No,
}

/// Highest record id kept (the length table is indexed by id): past it, FTS5 answers.
const MAX_ID: i64 = 1 << 27;

/// The schema version from which the change log records changes to the filter columns too
/// (`MIGRATION_FILTER_CHANGES`): the index keeps the records' facets from then on.
const FACETS_LOGGED_SINCE: i64 = 18;

/// What tells one record's answer from the kept facets (see `LexicalIndex::told_or_asked`).
type Teller<'k, T> = Box<dyn Fn(u32) -> Option<Option<T>> + 'k>;

/// A search's ranking, filtered from the kept facets or left for the store's SQL filters.
enum Ranked {
    Filtered(Vec<LexicalHit>),
    Unfiltered(Vec<(f64, u32)>),
}

impl LexicalIndex {
    /// An empty index; it is built from the brain on the first search.
    pub fn new() -> LexicalIndex {
        LexicalIndex {
            tokenizer: Mutex::new(None),
            document_tokenizer: Mutex::new(None),
            state: RwLock::new(State::default()),
            built: AtomicBool::new(false),
        }
    }

    /// The answer of [`Reader::lexical_search`] for `query`, from memory when it can be given
    /// exactly (see the module documentation), else from FTS5 through `reader`.
    pub fn search(&self, reader: &Reader<'_>, query: &LexicalQuery<'_>) -> Result<Vec<LexicalHit>> {
        match self.search_in_memory(reader, query, CatchUp::Yes)? {
            Some(hits) => Ok(hits),
            None => reader.lexical_search(query),
        }
    }

    /// [`LexicalIndex::search`] for a `reader` inside a write transaction (the write path's
    /// near-duplicate search): from memory, as the transaction sees the brain — the index, and
    /// the few records changed since it was last brought up to date (by this transaction, the
    /// earlier remembers of a group commit, or anyone) read from the transaction and ranked
    /// with it ([`Overlay`]) — else from FTS5. It never brings the index itself up to date from
    /// such a reader: that would take in rows the transaction may still roll back.
    pub fn search_in_write(
        &self,
        reader: &Reader<'_>,
        query: &LexicalQuery<'_>,
    ) -> Result<Vec<LexicalHit>> {
        match self.search_in_memory(reader, query, CatchUp::No)? {
            Some(hits) => Ok(hits),
            None => reader.lexical_search(query),
        }
    }

    /// [`LexicalIndex::search`] from memory; `None` when FTS5 must answer.
    fn search_in_memory(
        &self,
        reader: &Reader<'_>,
        query: &LexicalQuery<'_>,
        catch_up: CatchUp,
    ) -> Result<Option<Vec<LexicalHit>>> {
        self.search_in_memory_bounded(reader, query, NARROW_FILTER_MATCHES, catch_up)
    }

    /// [`LexicalIndex::search_in_memory`] with the narrow-filter bound as a parameter. A
    /// narrow filter is left to FTS5, which starts from the few records it lets through; a
    /// broad one (the write path's `global` scope) is ranked here and filtered window by
    /// window, as an unfiltered search is.
    fn search_in_memory_bounded(
        &self,
        reader: &Reader<'_>,
        query: &LexicalQuery<'_>,
        narrow_bound: usize,
        catch_up: CatchUp,
    ) -> Result<Option<Vec<LexicalHit>>> {
        if reader.narrow_filter(query, narrow_bound)? {
            return Ok(None);
        }
        let Some(tokens) = self.query_tokens(query.match_expression) else {
            return Ok(None);
        };
        let limit = query.limit.max(1);
        let window = FIRST_PASS_WINDOW.max(limit.saturating_mul(4));
        let Some(ranked) = self.as_seen(reader, catch_up, |state, overlay| {
            let mut ranked = state.rank(&tokens, overlay);
            // Inside a write transaction the records changed since are the transaction's to
            // tell: SQL filters them all.
            let kept = state.facets.as_ref().filter(|_| overlay.is_none());
            if let Some(kept) = kept
                && let Some(filter) = kept.compile(query)
                && let Some(hits) =
                    kept.filter_ranked(&mut ranked, &filter, limit, window, stronger)
            {
                return Ranked::Filtered(hits);
            }
            Ranked::Unfiltered(ranked)
        })?
        else {
            return Ok(None);
        };
        match ranked {
            Ranked::Filtered(hits) => Ok(Some(hits)),
            Ranked::Unfiltered(ranked) => filter_ranked(reader, query, ranked).map(Some),
        }
    }

    /// [`Reader::filter_ids`] from the kept facets, brought up to date first; the ids they do
    /// not tell (not indexed, a time in another form, a brain before schema v18) are asked of
    /// SQL through `reader`.
    pub fn filter_ids(
        &self,
        reader: &Reader<'_>,
        ids: &[i64],
        query: &LexicalQuery<'_>,
    ) -> Result<Vec<i64>> {
        self.told_or_asked(
            reader,
            ids,
            |kept| {
                let filter = kept.compile(query)?;
                Some(Box::new(move |key| {
                    kept.passes(key, &filter)
                        .map(|passes| passes.then_some(i64::from(key)))
                }))
            },
            |ids| reader.filter_ids(ids, query),
        )
    }

    /// [`Reader::episode_neighbours`] from the kept conversations, brought up to date first;
    /// what they do not tell is asked of SQL through `reader`. By id, as SQL answers up to 500
    /// ids (it walks an `IN` list in order).
    pub fn episode_neighbours(
        &self,
        reader: &Reader<'_>,
        ids: &[i64],
        window_secs: i64,
    ) -> Result<Vec<EpisodeNeighbours>> {
        let mut found = self.told_or_asked(
            reader,
            ids,
            |kept| Some(Box::new(move |key| kept.neighbours(key, window_secs))),
            |ids| reader.episode_neighbours(ids, window_secs),
        )?;
        found.sort_unstable_by_key(|(id, _, _)| *id);
        Ok(found)
    }

    /// Answers about each of `ids` (each once, as SQL's `IN` takes them) from the kept facets,
    /// brought up to date first: `teller` gives, for the facets, what tells one record
    /// (`Some(Some(answer))`, `Some(None)`: nothing to answer, `None`: not told here) — or
    /// `None` when they tell nothing of this question. What is not told is asked with `ask` in
    /// one call; everything is when no facets are kept.
    fn told_or_asked<T>(
        &self,
        reader: &Reader<'_>,
        ids: &[i64],
        teller: impl FnOnce(&facets::Kept) -> Option<Teller<'_, T>>,
        ask: impl FnOnce(&[i64]) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let told = self.with_current(reader, |state| {
            let tell = teller(state.facets.as_ref()?)?;
            let mut answers = Vec::with_capacity(ids.len());
            let mut asked = Vec::new();
            for &id in &ids {
                match u32::try_from(id).ok().and_then(&tell) {
                    Some(Some(answer)) => answers.push(answer),
                    Some(None) => {}
                    None => asked.push(id),
                }
            }
            Some((answers, asked))
        })?;
        match told.flatten() {
            Some((mut answers, asked)) => {
                if !asked.is_empty() {
                    answers.extend(ask(&asked)?);
                }
                Ok(answers)
            }
            None => ask(&ids),
        }
    }

    /// What [`Reader::term_frequency`] answers for `term_expression` (one quoted term), from
    /// memory when the term is a single token.
    pub fn term_frequency(
        &self,
        reader: &Reader<'_>,
        term_expression: &str,
        cap: usize,
    ) -> Result<usize> {
        self.term_frequency_caught_up(reader, term_expression, cap, CatchUp::Yes)
    }

    /// [`LexicalIndex::term_frequency`] for a `reader` inside a write transaction, under the
    /// rule of [`LexicalIndex::search_in_write`]: from memory only when nothing changed since
    /// the index was brought up to date, else from FTS5.
    pub fn term_frequency_in_write(
        &self,
        reader: &Reader<'_>,
        term_expression: &str,
        cap: usize,
    ) -> Result<usize> {
        self.term_frequency_caught_up(reader, term_expression, cap, CatchUp::No)
    }

    fn term_frequency_caught_up(
        &self,
        reader: &Reader<'_>,
        term_expression: &str,
        cap: usize,
        catch_up: CatchUp,
    ) -> Result<usize> {
        let single = self
            .query_tokens(term_expression)
            .filter(|tokens| tokens.len() == 1);
        if let Some(tokens) = single {
            let token = tokens[0].as_slice();
            if let Some(found) = self.as_seen(reader, catch_up, |state, overlay| {
                state.frequency(token, overlay)
            })? {
                return Ok(found.min(cap));
            }
        }
        reader.term_frequency(term_expression, cap)
    }

    /// Builds the index (or brings it up to date) now, from `reader`'s snapshot, so that no
    /// search has to: a long-lived process calls it on a thread of its own at start
    /// (`Service::start_lexical_index`). Searches made meanwhile are answered by FTS5. Answers
    /// whether the index is now kept in memory (false: this brain is left to FTS5, or another
    /// thread is building it).
    pub fn prepare(&self, reader: &Reader<'_>) -> Result<bool> {
        Ok(self.with_current(reader, |_| ())?.is_some())
    }

    /// Whether the index has been built and answers from memory.
    pub fn is_built(&self) -> bool {
        self.built.load(Ordering::Acquire)
    }

    /// Rows in the index (FTS5's count), from memory when it is kept.
    pub fn indexed_count(&self, reader: &Reader<'_>) -> Result<usize> {
        match self.with_current(reader, |state| state.rows as usize)? {
            Some(rows) => Ok(rows),
            None => reader.indexed_count(),
        }
    }

    /// The tokens of each term of an expression of the shape `fts_match_expression` builds
    /// (`"a" OR "b" …`), one token per term; `None` for any other shape, a term of several
    /// tokens (a phrase) or of none, or without a tokenizer.
    fn query_tokens(&self, expression: &str) -> Option<Vec<Vec<u8>>> {
        let terms = cairn_core::query::or_expression_terms(expression)?;
        let mut guard = self.tokenizer.lock().unwrap_or_else(|p| p.into_inner());
        let tokenizer = guard
            .get_or_insert_with(|| Tokenizer::new().ok())
            .as_mut()?;
        let mut out = Vec::with_capacity(terms.len());
        for term in &terms {
            let mut tokens: Vec<Vec<u8>> = Vec::new();
            tokenizer
                .tokenize(term, FTS5_TOKENIZE_QUERY, &mut |token, _| {
                    tokens.push(token.to_vec())
                })
                .ok()?;
            if tokens.len() != 1 {
                return None;
            }
            out.extend(tokens);
        }
        Some(out)
    }

    /// Runs `work` on the index as `reader` sees the brain: brought up to date first
    /// ([`CatchUp::Yes`]), or, from a reader inside a write transaction ([`CatchUp::No`]), with
    /// what changed since beside it ([`LexicalIndex::with_transaction`]).
    fn as_seen<T>(
        &self,
        reader: &Reader<'_>,
        catch_up: CatchUp,
        work: impl FnOnce(&State, Option<&Overlay>) -> T,
    ) -> Result<Option<T>> {
        match catch_up {
            CatchUp::Yes => self.with_current(reader, |state| work(state, None)),
            CatchUp::No => self.with_transaction(reader, work),
        }
    }

    /// Runs `work` on the index brought up to date with the brain as `reader` sees it;
    /// `None` when this brain is not kept in memory.
    fn with_current<T>(
        &self,
        reader: &Reader<'_>,
        work: impl FnOnce(&State) -> T,
    ) -> Result<Option<T>> {
        let head = log_head(reader)?;
        {
            let state = match self.state.try_read() {
                Ok(state) => state,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // A build or a catch-up holds it: a first build (seconds at 100,000 records) is
                // not waited for — FTS5 answers meanwhile; a catch-up is short.
                Err(std::sync::TryLockError::WouldBlock) => {
                    if !self.built.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                    self.state.read().unwrap_or_else(|p| p.into_inner())
                }
            };
            if state.unusable {
                return Ok(None);
            }
            if state.built && head.is_some_and(|(_, last)| last == state.seq) {
                return Ok(Some(work(&state)));
            }
        }
        {
            let mut state = match self.state.try_write() {
                Ok(state) => state,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // Another thread is bringing it up to date (see above).
                Err(std::sync::TryLockError::WouldBlock) => {
                    if !self.built.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                    self.state.write().unwrap_or_else(|p| p.into_inner())
                }
            };
            let caught_up = self.with_document_tokenizer(|tokenizer| {
                catch_up(&mut state, reader, tokenizer).map(Some)
            });
            match caught_up {
                Ok(Some(())) => {}
                Ok(None) => return Ok(None),
                Err(error) => {
                    // Half-applied: start again from the brain next time.
                    *state = State::default();
                    self.built.store(false, Ordering::Release);
                    return Err(error);
                }
            }
            self.built
                .store(state.built && !state.unusable, Ordering::Release);
            if state.unusable {
                return Ok(None);
            }
        }
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        if state.unusable || !state.built {
            return Ok(None);
        }
        Ok(Some(work(&state)))
    }

    /// Runs `work` on the index as a `reader` inside a write transaction sees the brain: the
    /// index as it is, and an [`Overlay`] of the records changed since it was brought up to
    /// date (by this transaction, or committed by anyone since), read and tokenized from the
    /// transaction's own snapshot. The index itself is left as it is: the transaction may
    /// still roll back. `None` when this brain is not kept in memory, the index is being built,
    /// or the changes are too many or out of the log's reach (FTS5 answers then).
    fn with_transaction<T>(
        &self,
        reader: &Reader<'_>,
        work: impl FnOnce(&State, Option<&Overlay>) -> T,
    ) -> Result<Option<T>> {
        let Some((first, last)) = log_head(reader)? else {
            return Ok(None);
        };
        let base = {
            let Some(state) = self.usable_state() else {
                return Ok(None);
            };
            if state.seq == last {
                return Ok(Some(work(&state, None)));
            }
            state.seq
        };
        if last < base || first > base + 1 || last - base > MAX_OVERLAY_CHANGES {
            return Ok(None);
        }
        let Some(overlay) =
            self.with_document_tokenizer(|tokenizer| Overlay::read(reader, base, last, tokenizer))?
        else {
            return Ok(None);
        };
        let Some(state) = self.usable_state() else {
            return Ok(None);
        };
        // Brought up to date meanwhile (from a committed snapshot): the overlay was read
        // against another base.
        if state.seq != base {
            return Ok(None);
        }
        Ok(Some(work(&state, Some(&overlay))))
    }

    /// Runs `work` with the documents' tokenizer (created on first use); `None` when it cannot
    /// be created. A catch-up takes it while it holds the index's lock: nothing may take that
    /// lock while holding this one.
    fn with_document_tokenizer<T>(
        &self,
        work: impl FnOnce(&mut Tokenizer) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut guard = self
            .document_tokenizer
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match guard.get_or_insert_with(|| Tokenizer::new().ok()).as_mut() {
            Some(tokenizer) => work(tokenizer),
            None => Ok(None),
        }
    }

    /// The index for reading, when it is built and usable; `None` without waiting while a
    /// first build holds it.
    fn usable_state(&self) -> Option<std::sync::RwLockReadGuard<'_, State>> {
        let state = match self.state.try_read() {
            Ok(state) => state,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                if !self.built.load(Ordering::Acquire) {
                    return None;
                }
                self.state.read().unwrap_or_else(|p| p.into_inner())
            }
        };
        (state.built && !state.unusable).then_some(state)
    }
}

/// The change log's first and last `seq`; `None` when the brain has no log (a schema before
/// v17, opened read-only).
fn log_head(reader: &Reader<'_>) -> Result<Option<(i64, i64)>> {
    let map = |e| StoreError::from_sqlite(e, reader.path);
    let head = reader
        .conn
        .prepare_cached(
            "SELECT (SELECT min(seq) FROM fts_changes), (SELECT max(seq) FROM fts_changes)",
        )
        .and_then(|mut s| {
            s.query_row([], |row| {
                Ok((row.get::<_, Option<i64>>(0)?, row.get::<_, Option<i64>>(1)?))
            })
        });
    match head {
        Ok((first, last)) => Ok(Some((first.unwrap_or(0), last.unwrap_or(0)))),
        Err(rusqlite::Error::SqliteFailure(_, Some(message)))
            if message.contains("no such table") =>
        {
            Ok(None)
        }
        Err(error) => Err(map(error)),
    }
}

/// Brings `state` up to date with the brain, in one read transaction (the log and the rows
/// it names are one snapshot).
fn catch_up(state: &mut State, reader: &Reader<'_>, tokenizer: &mut Tokenizer) -> Result<()> {
    let map = |e| StoreError::from_sqlite(e, reader.path);
    reader
        .conn
        .execute_batch("SAVEPOINT lexical_index")
        .map_err(map)?;
    let done = catch_up_inside(state, reader, tokenizer);
    let released = reader
        .conn
        .execute_batch("RELEASE lexical_index")
        .map_err(map);
    done.and(released)
}

fn catch_up_inside(
    state: &mut State,
    reader: &Reader<'_>,
    tokenizer: &mut Tokenizer,
) -> Result<()> {
    let map = |e| StoreError::from_sqlite(e, reader.path);
    let Some((first, last)) = log_head(reader)? else {
        state.unusable = true;
        return Ok(());
    };
    if state.built && last == state.seq {
        return Ok(());
    }
    // Behind the log's reach (or the log was started again): rebuild.
    if !state.built || last < state.seq || first > state.seq + 1 {
        let version: i64 = reader
            .conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(map)?;
        *state = State {
            seq: last,
            facets: (version >= FACETS_LOGGED_SINCE).then(facets::Kept::default),
            ..State::default()
        };
        // The rows of `memories_fts_source` (the index's content), with their facets.
        let mut statement = reader
            .conn
            .prepare(&format!(
                "SELECT id, title, summary, tags, body, {FACET_COLUMNS} FROM memories \
                 WHERE merged_into IS NULL ORDER BY id"
            ))
            .map_err(map)?;
        let mut rows = statement.query([]).map_err(map)?;
        while let Some(row) = rows.next().map_err(map)? {
            let id: i64 = row.get(0).map_err(map)?;
            let columns = read_columns(row, 1).map_err(map)?;
            let facets = FacetText::read(row, 5).map_err(map)?;
            if !state.add(id, &columns, &facets, tokenizer)? {
                state.unusable = true;
                return Ok(());
            }
        }
        state.built = true;
        state.shrink();
        return Ok(());
    }
    let mut changed: Vec<i64> = {
        let mut statement = reader
            .conn
            .prepare_cached("SELECT memory_id FROM fts_changes WHERE seq > ?1 AND seq <= ?2")
            .map_err(map)?;
        statement
            .query_map([state.seq, last], |row| row.get(0))
            .map_err(map)?
            .collect::<rusqlite::Result<_>>()
            .map_err(map)?
    };
    changed.sort_unstable();
    changed.dedup();
    let mut statement = reader
        .conn
        .prepare_cached(&format!(
            "SELECT title, summary, tags, body, {FACET_COLUMNS} FROM memories \
             WHERE id = ?1 AND merged_into IS NULL"
        ))
        .map_err(map)?;
    for id in changed {
        if let Ok(key) = u32::try_from(id) {
            state.remove(key);
        }
        let row = statement
            .query_row([id], |row| {
                Ok((read_columns(row, 0)?, FacetText::read(row, 4)?))
            })
            .optional()
            .map_err(map)?;
        if let Some((columns, facets)) = row
            && !state.add(id, &columns, &facets, tokenizer)?
        {
            state.unusable = true;
            return Ok(());
        }
    }
    state.seq = last;
    Ok(())
}

/// At most this many change-log entries are read into an [`Overlay`]; more are left to FTS5
/// (a write transaction holds a few: its own records, and what other processes committed since
/// the index was last brought up to date).
const MAX_OVERLAY_CHANGES: i64 = 256;

/// What a write transaction sees that the index does not hold: the records changed since the
/// index's `seq` (a change log entry each), as the transaction's snapshot has them.
struct Overlay {
    /// Every changed id, sorted: the index's copy of these is not what the transaction sees.
    changed: Vec<u32>,
    /// The changed records the snapshot still holds (a forgotten or merged one is not there):
    /// id, tokens over all columns (FTS5's D), terms sorted by token.
    docs: Vec<(u32, u32, Vec<DocumentTerm>)>,
}

impl Overlay {
    /// The changes after `base` up to `last`, with the rows the transaction sees; `None` when
    /// an id cannot be kept in memory.
    fn read(
        reader: &Reader<'_>,
        base: i64,
        last: i64,
        tokenizer: &mut Tokenizer,
    ) -> Result<Option<Overlay>> {
        let map = |e| StoreError::from_sqlite(e, reader.path);
        let mut ids: Vec<i64> = reader
            .conn
            .prepare_cached("SELECT memory_id FROM fts_changes WHERE seq > ?1 AND seq <= ?2")
            .map_err(map)?
            .query_map([base, last], |row| row.get(0))
            .map_err(map)?
            .collect::<rusqlite::Result<_>>()
            .map_err(map)?;
        ids.sort_unstable();
        ids.dedup();
        let mut statement = reader
            .conn
            .prepare_cached(
                "SELECT title, summary, tags, body FROM memories_fts_source WHERE id = ?1",
            )
            .map_err(map)?;
        let mut changed = Vec::with_capacity(ids.len());
        let mut docs = Vec::with_capacity(ids.len());
        for id in ids {
            // The log's first entry (0) names no record.
            if id == 0 {
                continue;
            }
            if !(0..MAX_ID).contains(&id) {
                return Ok(None);
            }
            let key = id as u32;
            changed.push(key);
            let columns = statement
                .query_row([id], |row| read_columns(row, 0))
                .optional()
                .map_err(map)?;
            if let Some(columns) = columns {
                let (length, terms) = document_terms(tokenizer, &columns)?;
                docs.push((key, length, terms));
            }
        }
        Ok(Some(Overlay { changed, docs }))
    }

    fn is_changed(&self, id: u32) -> bool {
        self.changed.binary_search(&id).is_ok()
    }

    /// The changed records' weighted frequency of `token`, by id.
    fn postings<'a>(&'a self, token: &'a [u8]) -> impl Iterator<Item = Posting> + 'a {
        self.docs.iter().filter_map(move |(id, _, terms)| {
            terms
                .binary_search_by(|term| term.token.as_slice().cmp(token))
                .ok()
                .map(|at| Posting {
                    id: *id,
                    freq: terms[at].freq,
                })
        })
    }

    /// A changed record's length (`None`: the index's, when it holds the id unchanged).
    fn length(&self, id: u32) -> Option<u32> {
        self.docs
            .iter()
            .find(|(doc, _, _)| *doc == id)
            .map(|(_, length, _)| *length)
    }
}

fn read_columns(row: &rusqlite::Row<'_>, from: usize) -> rusqlite::Result<[Option<String>; 4]> {
    Ok([
        row.get(from)?,
        row.get(from + 1)?,
        row.get(from + 2)?,
        row.get(from + 3)?,
    ])
}

impl State {
    /// Indexes record `id` with its four columns (it must not be indexed already); false when
    /// the id cannot be kept.
    fn add(
        &mut self,
        id: i64,
        columns: &[Option<String>; 4],
        facets: &FacetText,
        tokenizer: &mut Tokenizer,
    ) -> Result<bool> {
        if !(0..MAX_ID).contains(&id) {
            return Ok(false);
        }
        let key = id as u32;
        let mut instances: Vec<(u32, u32)> = Vec::new();
        let mut length: u32 = 0;
        for (column, text) in columns.iter().enumerate() {
            let Some(text) = text else { continue };
            let weight = WEIGHTS[column];
            // As fts5StorageInsertCallback: a colocated token takes no position of its own.
            let mut size: u32 = 0;
            let terms = &mut self.terms;
            let postings = &mut self.postings;
            tokenizer
                .tokenize(text, FTS5_TOKENIZE_DOCUMENT, &mut |token, colocated| {
                    if !colocated || size == 0 {
                        size += 1;
                    }
                    let token = &token[..token.len().min(MAX_TOKEN_BYTES)];
                    let term = match terms.get(token) {
                        Some(&term) => term,
                        None => {
                            let term = postings.len() as u32;
                            postings.push(Vec::new());
                            terms.insert(token.into(), term);
                            term
                        }
                    };
                    instances.push((term, weight));
                })
                .map_err(|detail| StoreError::Malformed {
                    path: std::path::PathBuf::from("(full-text tokenizer)"),
                    detail,
                })?;
            length += size;
        }
        instances.sort_unstable_by_key(|(term, _)| *term);
        let mut held: Vec<u32> = Vec::new();
        let mut index = 0;
        while index < instances.len() {
            let term = instances[index].0;
            let mut freq = 0u32;
            while index < instances.len() && instances[index].0 == term {
                freq += instances[index].1;
                index += 1;
            }
            let list = &mut self.postings[term as usize];
            let at = list.partition_point(|p| p.id < key);
            list.insert(at, Posting { id: key, freq });
            held.push(term);
        }
        if self.lengths.len() <= key as usize {
            self.lengths.resize(key as usize + 1, 0);
        }
        self.lengths[key as usize] = length;
        self.docs.insert(key, held.into_boxed_slice());
        if let Some(kept) = &mut self.facets {
            kept.add(key, facets);
        }
        self.rows += 1;
        self.tokens += u64::from(length);
        Ok(true)
    }

    /// Gives back what the lists grew beyond their lengths while a build filled them (a list
    /// doubles when full, so up to half of its bytes are spare), so a long-lived process holds
    /// what the index holds (issue 14: the daemon's RSS; no change beyond run-to-run noise was
    /// seen at 100,000 records, `cairn-bench daemon`).
    fn shrink(&mut self) {
        for list in &mut self.postings {
            list.shrink_to_fit();
        }
        self.postings.shrink_to_fit();
        self.lengths.shrink_to_fit();
        self.terms.shrink_to_fit();
        self.docs.shrink_to_fit();
        if let Some(kept) = &mut self.facets {
            kept.shrink();
        }
    }

    /// Takes record `id` out of the index (nothing when it is not in).
    fn remove(&mut self, id: u32) {
        let Some(held) = self.docs.remove(&id) else {
            return;
        };
        if let Some(kept) = &mut self.facets {
            kept.remove(id);
        }
        for term in held.iter() {
            let list = &mut self.postings[*term as usize];
            if let Ok(at) = list.binary_search_by_key(&id, |p| p.id) {
                list.remove(at);
            }
        }
        let length = std::mem::take(&mut self.lengths[id as usize]);
        self.rows -= 1;
        self.tokens -= u64::from(length);
    }

    /// Every record holding any of `tokens` (each its own phrase, in order), with
    /// `fts5Bm25Function`'s score computed the way it computes it.
    fn rank(&self, tokens: &[Vec<u8>], overlay: Option<&Overlay>) -> Vec<(f64, u32)> {
        let (rows, total) = self.totals(overlay);
        if rows == 0 {
            return Vec::new();
        }
        let rows = rows as i64;
        let avgdl = total as f64 / rows as f64;
        let phrases: Vec<(std::borrow::Cow<'_, [Posting]>, f64)> = tokens
            .iter()
            .map(|token| {
                let list = self.list(token, overlay);
                let hits = list.len() as i64;
                let mut idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
                if idf <= 0.0 {
                    idf = 1e-6;
                }
                (list, idf)
            })
            .collect();
        let length = |id: u32| {
            overlay
                .and_then(|overlay| overlay.length(id))
                .unwrap_or_else(|| self.lengths[id as usize])
        };
        let total: usize = phrases.iter().map(|(list, _)| list.len()).sum();
        let mut out = Vec::with_capacity(total);
        let mut cursors = vec![0usize; phrases.len()];
        loop {
            let mut next = u32::MAX;
            let mut any = false;
            for (phrase, (list, _)) in phrases.iter().enumerate() {
                if let Some(posting) = list.get(cursors[phrase]) {
                    any = true;
                    next = next.min(posting.id);
                }
            }
            if !any {
                break;
            }
            let d = length(next) as f64;
            let mut score = 0.0f64;
            for (phrase, (list, idf)) in phrases.iter().enumerate() {
                // A phrase the row lacks adds FTS5's 0.0: nothing.
                if let Some(posting) = list.get(cursors[phrase]).filter(|p| p.id == next) {
                    let freq = f64::from(posting.freq);
                    score += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * d / avgdl)));
                    cursors[phrase] += 1;
                }
            }
            out.push((score, next));
        }
        out
    }

    /// FTS5's N and the total behind avgdl, as the transaction of `overlay` sees them.
    fn totals(&self, overlay: Option<&Overlay>) -> (u64, u64) {
        let Some(overlay) = overlay else {
            return (self.rows, self.tokens);
        };
        let (mut rows, mut tokens) = (self.rows, self.tokens);
        for id in &overlay.changed {
            if self.docs.contains_key(id) {
                rows -= 1;
                tokens -= u64::from(self.lengths[*id as usize]);
            }
        }
        for (_, length, _) in &overlay.docs {
            rows += 1;
            tokens += u64::from(*length);
        }
        (rows, tokens)
    }

    /// The records holding `token`, by id, as the transaction of `overlay` sees them: the
    /// index's list without the changed records, with the changed records' own postings.
    fn list(&self, token: &[u8], overlay: Option<&Overlay>) -> std::borrow::Cow<'_, [Posting]> {
        let base: &[Posting] = self
            .terms
            .get(token)
            .map_or(&[], |&term| self.postings[term as usize].as_slice());
        let Some(overlay) = overlay else {
            return std::borrow::Cow::Borrowed(base);
        };
        let removes = overlay
            .changed
            .iter()
            .any(|id| base.binary_search_by_key(id, |p| p.id).is_ok());
        let mut added = overlay.postings(token).peekable();
        if !removes && added.peek().is_none() {
            return std::borrow::Cow::Borrowed(base);
        }
        let mut list: Vec<Posting> = if removes {
            base.iter()
                .filter(|p| !overlay.is_changed(p.id))
                .copied()
                .collect()
        } else {
            base.to_vec()
        };
        list.extend(added);
        list.sort_unstable_by_key(|p| p.id);
        std::borrow::Cow::Owned(list)
    }

    /// How many records hold `token` (FTS5's term frequency of a one-token term).
    fn frequency(&self, token: &[u8], overlay: Option<&Overlay>) -> usize {
        let base: &[Posting] = self
            .terms
            .get(token)
            .map_or(&[], |&term| self.postings[term as usize].as_slice());
        let Some(overlay) = overlay else {
            return base.len();
        };
        let removed = overlay
            .changed
            .iter()
            .filter(|id| base.binary_search_by_key(*id, |p| p.id).is_ok())
            .count();
        base.len() - removed + overlay.postings(token).count()
    }
}

/// One token of a record's full-text row, as FTS5 holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocumentTerm {
    pub token: Vec<u8>,
    /// The weighted count of its instances (title 3, summary 2, tags 2, body 1).
    pub freq: u32,
    /// Where each instance is: `column << POSITION_BITS | offset`, ascending.
    pub positions: Vec<i32>,
}

/// The bits of a [`DocumentTerm`] position that hold the offset in its column.
pub(crate) const POSITION_BITS: u32 = 28;

/// A record's full-text row as FTS5 indexes it (`fts5StorageInsertCallback`): its tokens over
/// all columns (FTS5's D) and, per distinct token, its weighted frequency and positions, tokens
/// in byte order.
pub(crate) fn document_terms(
    tokenizer: &mut Tokenizer,
    columns: &[Option<String>; 4],
) -> Result<(u32, Vec<DocumentTerm>)> {
    let mut instances: Vec<(Vec<u8>, u32, i32)> = Vec::new();
    let mut length: u32 = 0;
    for (column, text) in columns.iter().enumerate() {
        let Some(text) = text else { continue };
        let weight = WEIGHTS[column];
        // A colocated token takes no position of its own (none with `porter unicode61`).
        let mut size: u32 = 0;
        tokenizer
            .tokenize(text, FTS5_TOKENIZE_DOCUMENT, &mut |token, colocated| {
                if !colocated || size == 0 {
                    size += 1;
                }
                let token = &token[..token.len().min(MAX_TOKEN_BYTES)];
                let offset = (size - 1).min((1 << POSITION_BITS) - 1) as i32;
                instances.push((
                    token.to_vec(),
                    weight,
                    (column as i32) << POSITION_BITS | offset,
                ));
            })
            .map_err(|detail| StoreError::Malformed {
                path: std::path::PathBuf::from("(full-text tokenizer)"),
                detail,
            })?;
        length += size;
    }
    instances.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut terms: Vec<DocumentTerm> = Vec::new();
    for (token, weight, position) in instances {
        match terms.last_mut() {
            Some(last) if last.token == token => {
                last.freq += weight;
                if last.positions.last() != Some(&position) {
                    last.positions.push(position);
                }
            }
            _ => terms.push(DocumentTerm {
                token,
                freq: weight,
                positions: vec![position],
            }),
        }
    }
    Ok((length, terms))
}

/// The tokens FTS5 reads in one quoted query term (a phrase when several).
pub(crate) fn phrase_tokens(tokenizer: &mut Tokenizer, term: &str) -> Result<Vec<Vec<u8>>> {
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    tokenizer
        .tokenize(term, FTS5_TOKENIZE_QUERY, &mut |token, colocated| {
            if !colocated {
                tokens.push(token.to_vec());
            }
        })
        .map_err(|detail| StoreError::Malformed {
            path: std::path::PathBuf::from("(full-text tokenizer)"),
            detail,
        })?;
    Ok(tokens)
}

/// Strongest first, ties by the lower id: `ORDER BY strength DESC, id`.
fn stronger(a: &(f64, u32), b: &(f64, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// `lexical_search`'s two passes over an in-memory ranking: the filters on the best window,
/// then on the rest in ranking order only when the window did not hold `limit` records.
///
/// The filters are asked about the window in ranking order, a first slice only a little
/// larger than `limit` (usually every one of those passes, and the rest of the window is not
/// looked at), then the rest of the window. Hits are taken in ranking order either way, so the
/// slices change how many records SQLite reads (one lookup each), not the answer. The slices'
/// sizes depend on `limit` alone, so the filter statements stay few in the statement cache.
fn filter_ranked(
    reader: &Reader<'_>,
    query: &LexicalQuery<'_>,
    mut ranked: Vec<(f64, u32)>,
) -> Result<Vec<LexicalHit>> {
    let limit = query.limit.max(1);
    let window = FIRST_PASS_WINDOW.max(limit.saturating_mul(4));
    let first = first_filter_slice(limit).min(window);
    let mut hits = Vec::with_capacity(limit);
    let keep = |chunk: &[(f64, u32)], hits: &mut Vec<LexicalHit>| -> Result<()> {
        if chunk.is_empty() || hits.len() >= limit {
            return Ok(());
        }
        let ids: Vec<i64> = chunk.iter().map(|(_, id)| i64::from(*id)).collect();
        let allowed: std::collections::HashSet<i64> =
            reader.filter_ids(&ids, query)?.into_iter().collect();
        for (strength, id) in chunk {
            if hits.len() < limit && allowed.contains(&i64::from(*id)) {
                hits.push(LexicalHit {
                    id: i64::from(*id),
                    strength: *strength,
                });
            }
        }
        Ok(())
    };
    let best_len = ranked.len().min(window);
    if ranked.len() > window {
        ranked.select_nth_unstable_by(window - 1, stronger);
    }
    let (best, rest) = ranked.split_at_mut(best_len);
    best.sort_unstable_by(stronger);
    let (head, tail) = best.split_at(first.min(best_len));
    keep(head, &mut hits)?;
    keep(tail, &mut hits)?;
    if hits.len() >= limit || rest.is_empty() {
        return Ok(hits);
    }
    // Too few passed: the rest, in ranking order, until `limit` are found.
    rest.sort_unstable_by(stronger);
    for chunk in rest.chunks(window) {
        keep(chunk, &mut hits)?;
        if hits.len() >= limit {
            break;
        }
    }
    Ok(hits)
}

/// How many of the best matches the filters are asked about first: `limit` and a quarter
/// more (at least 8 more), for the few that a filter refuses.
fn first_filter_slice(limit: usize) -> usize {
    limit.saturating_add((limit / 4).max(8))
}

/// The one place with `unsafe` code (the workspace denies it elsewhere): rusqlite has no safe
/// wrapper for FTS5's tokenizer interface, and the index must tokenize exactly as FTS5 does.
#[allow(unsafe_code)]
pub(crate) mod fts5 {
    use super::{FTS5_TOKEN_COLOCATED, TOKENIZER, TOKENIZER_ARGS};
    use rusqlite::ffi;
    use std::ffi::{c_char, c_int, c_void};

    /// FTS5's tokenizer of `memories_fts`, on a private in-memory connection (the tokenizer
    /// belongs to FTS5's per-connection state; it needs no table).
    pub(crate) struct Tokenizer {
        module: ffi::fts5_tokenizer,
        handle: *mut ffi::Fts5Tokenizer,
        /// Kept open for as long as the tokenizer lives (dropped after it, see `Drop`).
        _conn: rusqlite::Connection,
    }

    // The tokenizer is used behind a mutex only; its connection is private to it.
    unsafe impl Send for Tokenizer {}

    impl Tokenizer {
        pub(crate) fn new() -> std::result::Result<Tokenizer, String> {
            let conn = rusqlite::Connection::open_in_memory().map_err(|e| e.to_string())?;
            // SAFETY: the statement and the pointers below are used as SQLite documents them
            // (https://sqlite.org/fts5.html#extending_fts5): `SELECT fts5(?1)` with a pointer bound
            // as "fts5_api_ptr" writes the connection's fts5_api there; the tokenizer is created
            // from the module `xFindTokenizer` fills in, and deleted before the connection closes.
            unsafe {
                let db = conn.handle();
                let mut statement: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
                let rc = ffi::sqlite3_prepare_v2(
                    db,
                    c"SELECT fts5(?1)".as_ptr(),
                    -1,
                    &mut statement,
                    std::ptr::null_mut(),
                );
                if rc != ffi::SQLITE_OK {
                    return Err(format!("cannot reach FTS5 (code {rc})"));
                }
                let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
                ffi::sqlite3_bind_pointer(
                    statement,
                    1,
                    (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
                    c"fts5_api_ptr".as_ptr(),
                    None,
                );
                ffi::sqlite3_step(statement);
                ffi::sqlite3_finalize(statement);
                if api.is_null() {
                    return Err("FTS5 gave no API".to_string());
                }
                let find = (*api).xFindTokenizer.ok_or("FTS5 has no xFindTokenizer")?;
                let mut user: *mut c_void = std::ptr::null_mut();
                let mut module: ffi::fts5_tokenizer = std::mem::zeroed();
                let rc = find(api, TOKENIZER.as_ptr(), &mut user, &mut module);
                if rc != ffi::SQLITE_OK {
                    return Err(format!("FTS5 has no {TOKENIZER:?} tokenizer (code {rc})"));
                }
                let create = module.xCreate.ok_or("the tokenizer has no xCreate")?;
                if module.xTokenize.is_none() {
                    return Err("the tokenizer has no xTokenize".to_string());
                }
                let mut args: Vec<*const c_char> =
                    TOKENIZER_ARGS.iter().map(|a| a.as_ptr()).collect();
                let mut handle: *mut ffi::Fts5Tokenizer = std::ptr::null_mut();
                let rc = create(user, args.as_mut_ptr(), args.len() as c_int, &mut handle);
                if rc != ffi::SQLITE_OK || handle.is_null() {
                    return Err(format!("cannot create the tokenizer (code {rc})"));
                }
                Ok(Tokenizer {
                    module,
                    handle,
                    _conn: conn,
                })
            }
        }

        /// Calls `sink(token, colocated)` for every token of `text`, as FTS5 does with `flags`.
        pub(crate) fn tokenize(
            &mut self,
            text: &str,
            flags: c_int,
            sink: &mut dyn FnMut(&[u8], bool),
        ) -> std::result::Result<(), String> {
            let length =
                c_int::try_from(text.len()).map_err(|_| "a text beyond 2 GB".to_string())?;
            let mut sink: &mut dyn FnMut(&[u8], bool) = sink;
            let context = (&mut sink as *mut &mut dyn FnMut(&[u8], bool)).cast::<c_void>();
            let tokenize = self.module.xTokenize.expect("checked in new");
            // SAFETY: `handle` came from this module's xCreate; `context` points at `sink`, alive
            // for the call; the callback only reads the token FTS5 hands it.
            let rc = unsafe {
                tokenize(
                    self.handle,
                    context,
                    flags,
                    text.as_ptr().cast::<c_char>(),
                    length,
                    Some(token_callback),
                )
            };
            if rc == ffi::SQLITE_OK {
                Ok(())
            } else {
                Err(format!("the full-text tokenizer failed (code {rc})"))
            }
        }
    }

    unsafe extern "C" fn token_callback(
        context: *mut c_void,
        flags: c_int,
        token: *const c_char,
        length: c_int,
        _start: c_int,
        _end: c_int,
    ) -> c_int {
        // SAFETY: `context` is the `&mut dyn FnMut` `tokenize` passed; the token is `length`
        // bytes FTS5 owns for the duration of the call.
        unsafe {
            let sink = &mut *context.cast::<&mut dyn FnMut(&[u8], bool)>();
            let bytes = if token.is_null() || length <= 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(token.cast::<u8>(), length as usize)
            };
            sink(bytes, flags & FTS5_TOKEN_COLOCATED != 0);
        }
        ffi::SQLITE_OK
    }

    impl Drop for Tokenizer {
        fn drop(&mut self) {
            if let Some(delete) = self.module.xDelete {
                // SAFETY: created by this module's xCreate, deleted once, before the connection.
                unsafe { delete(self.handle) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::testing::memory;
    use cairn_core::query::fts_match_expression;
    use cairn_core::record::{MemoryType, TrustZone};

    /// Words with stemming cases, case, diacritics, other scripts, punctuation and numbers.
    const WORDS: &[&str] = &[
        "run",
        "running",
        "runs",
        "runner",
        "Ran",
        "connect",
        "connection",
        "connected",
        "CONNECTING",
        "café",
        "Cafe",
        "naïve",
        "naive",
        "straße",
        "東京",
        "über",
        "the",
        "a",
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
        "juniper",
        "e-mail",
        "don't",
        "x",
        "zebra",
        "quartz",
    ];

    /// Scopes of the random records: `global` for most, the rest spread over small ones.
    const SCOPES: [&str; 4] = ["global", "session-a", "session-b", "repo/src"];

    type Rng = crate::testing::WordRng;

    /// The tests' generator over this module's words.
    fn seeded(seed: u64) -> Rng {
        Rng::new(seed, WORDS)
    }

    fn insert_random(store: &mut Store, rng: &mut Rng, count: usize) {
        store
            .write(|tx| {
                for _ in 0..count {
                    let project = if rng.below(4) == 0 { "q" } else { "p" };
                    let status = if rng.below(6) == 0 {
                        "archived"
                    } else {
                        "active"
                    };
                    let body = rng.text(30);
                    let memory_type = if rng.below(8) == 0 {
                        MemoryType::Decision
                    } else {
                        MemoryType::Note
                    };
                    let mut m = memory(project, memory_type, &body, status);
                    // Most records in `global` (a broad filter), a few in small scopes.
                    if rng.below(4) == 0 {
                        m.scope = SCOPES[1 + rng.below(SCOPES.len() - 1)].to_string();
                    }
                    m.title = rng.maybe_text(5);
                    m.summary = rng.maybe_text(8);
                    m.tags = (0..rng.below(3))
                        .map(|_| rng.word().to_lowercase())
                        .collect();
                    tx.insert_memory(&m, None)?;
                }
                Ok::<_, StoreError>(())
            })
            .unwrap();
    }

    /// The ids of the records that satisfy `condition` (SQL over `memories`), lowest first.
    fn ids_where(conn: &rusqlite::Connection, condition: &str) -> Vec<i64> {
        conn.prepare(&format!(
            "SELECT id FROM memories WHERE {condition} ORDER BY id"
        ))
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
    }

    /// A canonical time in the first days of 2026 (seconds apart, so conversations interleave).
    fn random_time(rng: &mut Rng) -> String {
        format!(
            "2026-01-0{}T{:02}:{:02}:{:02}Z",
            1 + rng.below(3),
            rng.below(24),
            rng.below(60),
            rng.below(60)
        )
    }

    /// Spreads the records over what the filters and conversations read — types (a third
    /// episodes), creation times, retirement times, sensitivities and trust zones — through
    /// another connection. With `odd`, one record in 30 (never an episode) gets a creation time
    /// in a form other than cairn's, which only SQL may compare.
    fn vary_facets(path: &std::path::Path, rng: &mut Rng, odd: bool) {
        let conn = rusqlite::Connection::open(path).unwrap();
        let ids = ids_where(&conn, "1");
        for id in ids {
            let kind = ["episode", "note", "decision"][rng.below(3)];
            let created = if odd && kind != "episode" && rng.below(30) == 0 {
                "2026-01-02 12:00:00".to_string()
            } else {
                random_time(rng)
            };
            let retired = (rng.below(2) == 0).then(|| random_time(rng));
            conn.execute(
                "UPDATE memories SET type = ?2, created_at = ?3, \
                 retired_at = CASE WHEN status = 'active' THEN NULL ELSE ?4 END, \
                 sensitivity = ?5, trust_zone = ?6 WHERE id = ?1",
                rusqlite::params![
                    id,
                    kind,
                    created,
                    retired,
                    rng.pick(&["normal", "normal", "do_not_export", "public_safe"]),
                    rng.pick(&["private_self", "trusted_collaborator", "outside_contact"]),
                ],
            )
            .unwrap();
        }
    }

    /// Changes of every kind that touch the full-text rows, by another connection (as another
    /// process would make them).
    fn mutate_elsewhere(path: &std::path::Path, rng: &mut Rng) {
        mutate(&rusqlite::Connection::open(path).unwrap(), rng, 40);
    }

    /// `count` changes of every kind that touch the full-text rows, through `other`.
    fn mutate(other: &rusqlite::Connection, rng: &mut Rng, count: usize) {
        let ids = ids_where(other, "1");
        for _ in 0..count {
            let id = ids[rng.below(ids.len())];
            match rng.below(8) {
                0 => other
                    .execute("UPDATE memories SET body = ?2 WHERE id = ?1", rusqlite::params![id, rng.text(30)])
                    .unwrap(),
                1 => other
                    .execute("UPDATE memories SET title = ?2 WHERE id = ?1", rusqlite::params![id, rng.maybe_text(4)])
                    .unwrap(),
                2 => other
                    .execute(
                        "UPDATE memories SET tags = ?2, summary = ?3 WHERE id = ?1",
                        rusqlite::params![id, rng.word().to_lowercase(), rng.maybe_text(6)],
                    )
                    .unwrap(),
                // A forget.
                3 => other.execute("DELETE FROM memories WHERE id = ?1", [id]).unwrap(),
                // Merged away by a dream, and back.
                4 => other
                    .execute(
                        "UPDATE memories SET merged_into = ?2 WHERE id = ?1 AND merged_into IS NULL",
                        rusqlite::params![id, ids[0]],
                    )
                    .unwrap(),
                5 => other
                    .execute("UPDATE memories SET merged_into = NULL WHERE id = ?1", [id])
                    .unwrap(),
                // What the filters and conversations read (schema v18 logs these).
                6 => {
                    let (column, value) = match rng.below(6) {
                        0 => ("project", rng.pick(&["p", "q", ""]).to_string()),
                        1 => ("scope", rng.pick(&SCOPES).to_string()),
                        2 => ("type", rng.pick(&["episode", "note"]).to_string()),
                        3 => ("created_at", random_time(rng)),
                        4 => ("retired_at", random_time(rng)),
                        _ => ("sensitivity", rng.pick(&["normal", "public_safe"]).to_string()),
                    };
                    other
                        .execute(
                            &format!("UPDATE memories SET {column} = ?2 WHERE id = ?1"),
                            rusqlite::params![id, value],
                        )
                        .unwrap()
                }
                // A supersede or archive: no full-text change, only what the filters see.
                _ => other
                    .execute(
                        "UPDATE memories SET status = ?2 WHERE id = ?1",
                        rusqlite::params![id, ["archived", "superseded", "active"][rng.below(3)]],
                    )
                    .unwrap(),
            };
        }
    }

    /// The index answers every query exactly as FTS5 does (ids, order, strengths), and answers
    /// it from memory.
    /// Returns how many filtered queries were narrow and how many broad (at the test's bound).
    fn assert_same(
        store: &Store,
        index: &LexicalIndex,
        rng: &mut Rng,
        queries: usize,
    ) -> [usize; 2] {
        let reader = store.reader();
        let roads = assert_same_in(&reader, index, rng, queries, CatchUp::Yes);
        assert_eq!(
            index.indexed_count(&reader).unwrap(),
            reader.indexed_count().unwrap()
        );
        roads
    }

    /// [`assert_same`] through `reader` (inside a write transaction with [`CatchUp::No`]:
    /// the index is not brought up to date, what changed since is ranked beside it).
    fn assert_same_in(
        reader: &Reader<'_>,
        index: &LexicalIndex,
        rng: &mut Rng,
        queries: usize,
        catch_up: CatchUp,
    ) -> [usize; 2] {
        let mut roads = [0usize; 2];
        for _ in 0..queries {
            let terms: Vec<String> = (0..1 + rng.below(4))
                .map(|_| match rng.below(8) {
                    0 => "nowhere".to_string(),
                    _ => rng.word().to_string(),
                })
                .collect();
            // A phrase (several tokens) FTS5 answers itself.
            let Some(expression) = fts_match_expression(&terms) else {
                continue;
            };
            let projects: Vec<Option<String>> = match rng.below(3) {
                0 => vec![Some("p".into())],
                1 => vec![Some("q".into()), None],
                _ => vec![Some("p".into()), Some("q".into())],
            };
            let limit = [1, 3, 10, 60, 250][rng.below(5)];
            let scopes: Vec<String> = match rng.below(4) {
                0 => vec![SCOPES[0].to_string()],
                1 => vec![SCOPES[1 + rng.below(SCOPES.len() - 1)].to_string()],
                2 => SCOPES.iter().map(|s| s.to_string()).collect(),
                _ => Vec::new(),
            };
            let types = [MemoryType::Decision];
            let (as_of, since, until) = (random_time(rng), random_time(rng), random_time(rng));
            let zones = [
                TrustZone::PrivateSelf,
                TrustZone::TrustedCollaborator,
                TrustZone::OutsideContact,
                TrustZone::PaidPublic,
            ];
            let query = LexicalQuery {
                match_expression: &expression,
                projects: &projects,
                scopes: (!scopes.is_empty()).then_some(&scopes[..]),
                types: (rng.below(5) == 0).then_some(&types[..]),
                include_archived: rng.below(2) == 0,
                as_of: (rng.below(4) == 0).then_some(as_of.as_str()),
                since: (rng.below(5) == 0).then_some(since.as_str()),
                until: (rng.below(5) == 0).then_some(until.as_str()),
                visible_to: (rng.below(3) == 0).then(|| zones[rng.below(zones.len())]),
                limit,
            };
            if catch_up == CatchUp::Yes {
                assert_same_facets(reader, index, rng, &query);
            }
            // The reference: every match filtered, no window, no decision about the filter.
            let (want, _) = reader.lexical_pass(&query, None).unwrap();
            // FTS5 by either road (a small bound makes `global` broad on this small brain).
            for bound in [NARROW_FILTER_MATCHES, 40, 0] {
                assert_eq!(
                    reader.lexical_search_bounded(&query, bound).unwrap(),
                    want,
                    "{expression} bound {bound}"
                );
            }
            let bound = 40;
            let narrow = reader.narrow_filter(&query, bound).unwrap();
            if query.scopes.is_some() || query.types.is_some() {
                roads[usize::from(!narrow)] += 1;
            }
            let got = index
                .search_in_memory_bounded(reader, &query, bound, catch_up)
                .unwrap();
            let single_tokens = terms.iter().all(|t| !t.contains(['-', '.', '\'']));
            let Some(got) = got else {
                assert!(!single_tokens || narrow, "{expression}: left to FTS5");
                continue;
            };
            assert!(
                !narrow,
                "{expression}: a narrow filter answered from memory"
            );
            assert_eq!(
                got.iter().map(|h| h.id).collect::<Vec<_>>(),
                want.iter().map(|h| h.id).collect::<Vec<_>>(),
                "{expression} {projects:?} limit {limit}"
            );
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g.strength - w.strength).abs() <= 1e-9,
                    "{expression}: {g:?} {w:?}"
                );
            }
            for term in &terms {
                let single = fts_match_expression(std::slice::from_ref(term)).unwrap();
                for cap in [1, 5, 1000] {
                    assert_eq!(
                        index
                            .term_frequency_caught_up(reader, &single, cap, catch_up)
                            .unwrap(),
                        reader.term_frequency(&single, cap).unwrap(),
                        "{single} cap {cap}"
                    );
                }
            }
        }
        roads
    }

    /// `filter_ids` and `episode_neighbours` answer as the store's SQL does, for ids of every
    /// kind (indexed, merged away, forgotten, never written).
    fn assert_same_facets(
        reader: &Reader<'_>,
        index: &LexicalIndex,
        rng: &mut Rng,
        query: &LexicalQuery<'_>,
    ) {
        let top: i64 = reader
            .conn
            .query_row("SELECT coalesce(max(id), 0) + 3 FROM memories", [], |row| {
                row.get(0)
            })
            .unwrap();
        let ids: Vec<i64> = (0..1 + rng.below(80))
            .map(|_| rng.below(top as usize) as i64)
            .collect();
        let sorted = |mut ids: Vec<i64>| {
            ids.sort_unstable();
            ids
        };
        assert_eq!(
            sorted(index.filter_ids(reader, &ids, query).unwrap()),
            sorted(reader.filter_ids(&ids, query).unwrap()),
            "filter_ids {ids:?}"
        );
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        for window in [0, 600, 7_200, 86_400 * 3] {
            let mut want = reader.episode_neighbours(&unique, window).unwrap();
            want.sort_unstable();
            assert_eq!(
                index.episode_neighbours(reader, &unique, window).unwrap(),
                want,
                "neighbours of {unique:?} within {window} s"
            );
        }
    }

    /// How many of `ids` the kept facets tell without SQL: (filters, neighbours).
    fn told_in_memory(
        index: &LexicalIndex,
        reader: &Reader<'_>,
        ids: &[i64],
        query: &LexicalQuery<'_>,
    ) -> (usize, usize) {
        index
            .with_current(reader, |state| {
                let kept = state.facets.as_ref().expect("facets kept");
                let filter = kept.compile(query).expect("canonical bounds");
                let filters = ids
                    .iter()
                    .filter(|&&id| kept.passes(id as u32, &filter).is_some())
                    .count();
                let neighbours = ids
                    .iter()
                    .filter(|&&id| kept.neighbours(id as u32, 600).is_some())
                    .count();
                (filters, neighbours)
            })
            .unwrap()
            .unwrap()
    }

    /// The filters and the conversations are told from memory for every indexed record in
    /// cairn's form — through another connection's edits of each filter column — and a record
    /// whose time is in another form is left to SQL (an episode of that form sends every
    /// neighbour question to SQL).
    #[test]
    fn filters_and_neighbours_are_told_from_memory_and_odd_times_from_sql() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        let mut rng = seeded(41);
        insert_random(&mut store, &mut rng, 300);
        vary_facets(&path, &mut rng, false);
        let index = LexicalIndex::new();
        let reader = store.reader();
        let ids = ids_where(reader.conn, "merged_into IS NULL");
        let projects = [Some("p".to_string()), None];
        let query = LexicalQuery {
            projects: &projects,
            as_of: Some("2026-01-02T12:00:00Z"),
            visible_to: Some(TrustZone::OutsideContact),
            ..LexicalQuery::default()
        };
        assert_eq!(
            told_in_memory(&index, &reader, &ids, &query),
            (ids.len(), ids.len())
        );
        mutate_elsewhere(&path, &mut rng);
        let ids = ids_where(reader.conn, "merged_into IS NULL");
        assert_eq!(
            told_in_memory(&index, &reader, &ids, &query),
            (ids.len(), ids.len())
        );
        assert_same_facets(&reader, &index, &mut rng, &query);
        // One episode created in another form: its own filters, and every neighbour, go to SQL.
        let odd = ids[0];
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE memories SET type = 'episode', created_at = '2026-01-02 08:00:00', \
                 project = 'p', status = 'active' WHERE id = ?1",
                [odd],
            )
            .unwrap();
        // Every other clause passes it, so only its time could tell.
        let everyone = [Some("p".to_string()), Some("q".to_string()), None];
        let by_time = LexicalQuery {
            projects: &everyone,
            as_of: Some("2026-01-02T12:00:00Z"),
            ..LexicalQuery::default()
        };
        let (filters, neighbours) = told_in_memory(&index, &reader, &ids, &by_time);
        assert_eq!((filters, neighbours), (ids.len() - 1, 0));
        for _ in 0..20 {
            assert_same_facets(&reader, &index, &mut rng, &query);
            assert_same_facets(&reader, &index, &mut rng, &by_time);
        }
    }

    #[test]
    fn the_index_answers_as_fts5_through_writes_of_every_kind() {
        let add = |a: [usize; 2], b: [usize; 2]| [a[0] + b[0], a[1] + b[1]];
        let mut roads = [0usize; 2];
        for seed in [1u64, 2, 3] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("brain.db");
            let mut store = Store::open(&path).unwrap();
            let mut rng = seeded(seed);
            let index = LexicalIndex::new();
            insert_random(&mut store, &mut rng, 450);
            vary_facets(&path, &mut rng, seed == 2);
            roads = add(roads, assert_same(&store, &index, &mut rng, 60));
            for _ in 0..4 {
                mutate_elsewhere(&path, &mut rng);
                roads = add(roads, assert_same(&store, &index, &mut rng, 30));
                insert_random(&mut store, &mut rng, 30);
                roads = add(roads, assert_same(&store, &index, &mut rng, 30));
            }
            // Changes through a second `Store` handle, too.
            let mut second = Store::open(&path).unwrap();
            insert_random(&mut second, &mut rng, 20);
            roads = add(roads, assert_same(&store, &index, &mut rng, 30));
        }
        assert!(roads[0] > 0 && roads[1] > 0, "both roads taken: {roads:?}");
    }

    /// Inside a write transaction the index answers from memory as FTS5 does in that
    /// transaction: its own inserts, edits, forgets and merges, and what another process
    /// committed since the index was last brought up to date, ranked beside the index (N,
    /// avgdl and the term counts as the transaction sees them); after a rollback the index is
    /// where it was.
    #[test]
    fn inside_a_write_the_changes_since_are_ranked_beside_the_index() {
        let mut roads = [0usize; 2];
        for seed in [21u64, 22, 23] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("brain.db");
            let mut store = Store::open(&path).unwrap();
            let mut rng = seeded(seed);
            insert_random(&mut store, &mut rng, 400);
            let index = LexicalIndex::new();
            assert!(index.prepare(&store.reader()).unwrap());
            // Committed elsewhere after the index was brought up to date.
            mutate_elsewhere(&path, &mut rng);
            let seq = index.state.read().unwrap().seq;
            let outcome = store.write(|tx| {
                let reader = tx.reader();
                for round in 0..4 {
                    let r = assert_same_in(&reader, &index, &mut rng, 25, CatchUp::No);
                    roads = [roads[0] + r[0], roads[1] + r[1]];
                    for _ in 0..1 + rng.below(3) {
                        let project = if rng.below(4) == 0 { "q" } else { "p" };
                        let mut m = memory(project, MemoryType::Note, &rng.text(30), "active");
                        m.title = rng.maybe_text(5);
                        m.summary = rng.maybe_text(8);
                        tx.insert_memory(&m, None)?;
                    }
                    if round % 2 == 1 {
                        mutate(reader.conn, &mut rng, 6);
                    }
                }
                assert_same_in(&reader, &index, &mut rng, 25, CatchUp::No);
                Err::<(), _>(StoreError::Migration {
                    detail: "rolled back by the test".to_string(),
                })
            });
            assert!(outcome.is_err(), "rolled back");
            assert_eq!(
                index.state.read().unwrap().seq,
                seq,
                "the index was left alone"
            );
            assert_same(&store, &index, &mut rng, 20);
        }
        assert!(roads[0] > 0 && roads[1] > 0, "both roads taken: {roads:?}");
    }

    /// Strengths agree to the bit, not only within the tolerance: the order of equal scores
    /// then breaks on the id exactly as in FTS5.
    #[test]
    fn strengths_are_fts5s_to_the_bit() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("brain.db")).unwrap();
        let mut rng = seeded(7);
        insert_random(&mut store, &mut rng, 300);
        let index = LexicalIndex::new();
        let reader = store.reader();
        let projects = [Some("p".to_string()), Some("q".to_string())];
        for expression in [
            "\"amber\"",
            "\"run\" OR \"connection\" OR \"東京\"",
            "\"the\" OR \"café\"",
        ] {
            let query = LexicalQuery {
                match_expression: expression,
                projects: &projects,
                include_archived: true,
                limit: 1000,
                ..LexicalQuery::default()
            };
            let want = reader.lexical_search(&query).unwrap();
            let got = index
                .search_in_memory(&reader, &query, CatchUp::Yes)
                .unwrap()
                .unwrap();
            assert!(!want.is_empty());
            assert_eq!(got, want, "{expression}");
        }
    }

    /// While a first build holds the index (and the documents' tokenizer), a search on another
    /// connection does not wait for it: FTS5 answers, the same answer. `prepare` then builds it.
    #[test]
    fn a_search_during_the_first_build_is_answered_by_fts5_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        let mut rng = seeded(5);
        insert_random(&mut store, &mut rng, 200);
        let index = LexicalIndex::new();
        let projects = [Some("p".to_string()), Some("q".to_string())];
        let query = LexicalQuery {
            match_expression: "\"amber\" OR \"run\"",
            projects: &projects,
            include_archived: true,
            limit: 50,
            ..LexicalQuery::default()
        };
        let want = store.reader().lexical_search(&query).unwrap();
        assert!(!want.is_empty());
        let building = index.state.write().unwrap();
        let tokenizing = index.document_tokenizer.lock().unwrap();
        let (send, answer) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let other = Store::open(&path).unwrap();
                let _ = send.send(index.search(&other.reader(), &query));
            });
            let got = answer
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("the search waited for the build")
                .unwrap();
            assert_eq!(got, want);
            drop(tokenizing);
            drop(building);
        });
        assert!(!index.is_built());
        assert!(index.prepare(&store.reader()).unwrap());
        assert!(index.is_built());
        let got = index
            .search_in_memory(&store.reader(), &query, CatchUp::Yes)
            .unwrap()
            .unwrap();
        assert_eq!(got, want);
    }

    /// Inside a write transaction the index answers only while the transaction has changed no
    /// full-text row: after a write, FTS5 answers (with the new row), and the index never takes
    /// in what the transaction wrote, so a rollback leaves it exact.
    #[test]
    fn a_search_inside_a_write_answers_what_the_transaction_sees() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        let mut rng = seeded(12);
        insert_random(&mut store, &mut rng, 200);
        let index = LexicalIndex::new();
        assert!(index.prepare(&store.reader()).unwrap());
        let projects = [Some("p".to_string())];
        let word = "cedar".to_string();
        let expression = fts_match_expression(&[word.clone(), "zebra".to_string()]).unwrap();
        let single = fts_match_expression(std::slice::from_ref(&word)).unwrap();
        let query = LexicalQuery {
            match_expression: &expression,
            projects: &projects,
            limit: 20,
            ..LexicalQuery::default()
        };
        let before = store.reader().lexical_search(&query).unwrap();
        let frequency = store.reader().term_frequency(&single, 1_000).unwrap();
        let outcome = store.write(|tx| {
            let reader = tx.reader();
            // Nothing written yet: answered from memory, FTS5's answer.
            assert!(
                index
                    .search_in_memory(&reader, &query, CatchUp::No)
                    .unwrap()
                    .is_some()
            );
            assert_eq!(index.search_in_write(&reader, &query).unwrap(), before);
            assert_eq!(
                index
                    .term_frequency_in_write(&reader, &single, 1_000)
                    .unwrap(),
                frequency
            );
            let mut m = memory(
                "p",
                MemoryType::Note,
                &format!("zebra {word} zebra"),
                "active",
            );
            m.title = Some(format!("zebra {word}"));
            let id = tx.insert_memory(&m, None)?;
            // Written: answered from memory with the new row beside the index, as FTS5 (which
            // sees the new row) answers.
            let inside = index
                .search_in_memory(&reader, &query, CatchUp::No)
                .unwrap()
                .expect("the transaction's own row ranked beside the index");
            assert_eq!(inside, reader.lexical_search(&query).unwrap());
            assert_eq!(index.search_in_write(&reader, &query).unwrap(), inside);
            assert_eq!(inside.first().map(|hit| hit.id), Some(id));
            assert_eq!(
                index
                    .term_frequency_in_write(&reader, &single, 1_000)
                    .unwrap(),
                frequency + 1
            );
            Err::<(), _>(StoreError::Migration {
                detail: "rolled back by the test".to_string(),
            })
        });
        assert!(outcome.is_err(), "rolled back");
        // The index still answers from memory, exactly as FTS5 after the rollback.
        let reader = store.reader();
        let after = index
            .search_in_memory(&reader, &query, CatchUp::No)
            .unwrap()
            .expect("the rollback left the index at the brain's head");
        assert_eq!(after, before);
        assert_eq!(
            index.term_frequency(&reader, &single, 1_000).unwrap(),
            frequency
        );
    }

    /// A log that no longer reaches back to what the index holds makes it rebuild, and a
    /// phrase, another expression shape or a narrow filter is left to FTS5.
    #[test]
    fn a_lost_log_rebuilds_and_what_it_cannot_answer_goes_to_fts5() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("brain.db");
        let mut store = Store::open(&path).unwrap();
        let mut rng = seeded(11);
        insert_random(&mut store, &mut rng, 100);
        let index = LexicalIndex::new();
        let projects = [Some("p".to_string()), Some("q".to_string())];
        let query = |expression| LexicalQuery {
            match_expression: expression,
            projects: &projects,
            include_archived: true,
            limit: 50,
            ..LexicalQuery::default()
        };
        let reader = store.reader();
        assert!(
            index
                .search_in_memory(&reader, &query("\"zebra\""), CatchUp::Yes)
                .unwrap()
                .is_some()
        );
        let other = rusqlite::Connection::open(&path).unwrap();
        other
            .execute_batch(
                "UPDATE memories SET body = 'zebra zebra quartz' WHERE id <= 20;
                 DELETE FROM fts_changes WHERE seq < (SELECT max(seq) FROM fts_changes);",
            )
            .unwrap();
        for expression in ["\"zebra\"", "\"quartz\" OR \"zebra\""] {
            let got = index
                .search_in_memory(&reader, &query(expression), CatchUp::Yes)
                .unwrap()
                .unwrap();
            assert_eq!(got, reader.lexical_search(&query(expression)).unwrap());
            assert!(got.len() >= 20);
        }
        for expression in [
            "\"db-pool\"",
            "\"zebra\" AND \"quartz\"",
            "title : (\"zebra\")",
            "",
        ] {
            assert!(
                index
                    .search_in_memory(&reader, &query(expression), CatchUp::Yes)
                    .unwrap()
                    .is_none(),
                "{expression}"
            );
        }
        let scopes = ["global".to_string()];
        let narrow = LexicalQuery {
            scopes: Some(&scopes),
            ..query("\"zebra\"")
        };
        assert!(
            index
                .search_in_memory(&reader, &narrow, CatchUp::Yes)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            index.search(&reader, &narrow).unwrap(),
            reader.lexical_search(&narrow).unwrap()
        );
        // The same filter over more records than the bound is broad: answered from memory.
        assert_eq!(
            index
                .search_in_memory_bounded(&reader, &narrow, 10, CatchUp::Yes)
                .unwrap()
                .expect("a broad filter is answered from memory"),
            reader.lexical_search(&narrow).unwrap()
        );
    }

    #[test]
    fn or_expressions_parse_and_other_shapes_do_not() {
        assert_eq!(
            cairn_core::query::or_expression_terms("\"a\""),
            Some(vec!["a".to_string()])
        );
        assert_eq!(
            cairn_core::query::or_expression_terms("\"a\"\"b\" OR \"c d\""),
            Some(vec!["a\"b".to_string(), "c d".to_string()])
        );
        for other in [
            "",
            "a",
            "\"a\" AND \"b\"",
            "\"a\" OR",
            "\"a",
            "(\"a\")",
            "\"a\" OR b",
        ] {
            assert_eq!(
                cairn_core::query::or_expression_terms(other),
                None,
                "{other}"
            );
        }
    }
}
