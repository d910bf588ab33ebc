//! The semantic index (docs/design.md §4 step 8, §5, §6): which embedder, which text a record is
//! embedded as, the queue of records still to embed, and the vector candidates of recall.
//!
//! * The embedder is loaded lazily, on first use, by a loader the adapter hands in: a lexical
//!   recall, `doctor` or `stats` never pay for a model load, and a recall that needs both the
//!   model and the vectors loads them on two threads at once.
//! * One brain, one vector space: the brain records the model id and dimension (`meta`). A
//!   configured model that differs from the brain's is never mixed in: semantic search is
//!   refused (recall says `degraded: lexical-only` with the fix) until `cairn reindex`
//!   re-embeds everything with the new model.
//! * A record with no vector row is pending. Writes embed what they stored right after their
//!   transaction plus a bounded slice of older pending records (the background pass);
//!   `reindex` completes the rest. Recall is correct at any completeness: lexical candidates
//!   cover every record, vectors add what they can.

use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::MemoryType;
use cairn_core::score::Hit;
use cairn_core::vector;
use cairn_core::vector::{Bf16, IvfIndex, IvfParams, Nearest, QuantizedRows};
use cairn_embed::{EmbedError, Embedder};
use cairn_store::{LexicalQuery, VectorCounts, VectorMatrix, VectorSpace};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Loads the configured embedder: `Ok(None)` when none is configured ("none").
pub type EmbedderLoader =
    Box<dyn FnOnce() -> std::result::Result<Option<Box<dyn Embedder>>, EmbedError> + Send>;

/// Records read per indexing step (their texts are built together, at most 64 KB of body
/// each plus their context).
const INDEX_BATCH: usize = 64;
/// Tokens handed to the embedder in one call ([`Embedder::passage_tokens`]): the model's
/// working set is bounded by this, not by how
/// many records there are or how long they are (a long record counts what the model reads
/// of it, at most its input limit: 512 tokens for e5).
const INDEX_TOKENS: usize = 8 * 1024;
/// Older pending records a write embeds along with its own (the background pass).
pub const BACKGROUND_BATCH: usize = 16;

/// Tuning of recall's candidate lists and their fusion (the semantic leg, conversation
/// context, speakers). Defaults are the measured ones (docs/retrieval.md).
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticConfig {
    /// An `episode` is embedded together with up to this many preceding episodes of the same
    /// project and scope (the conversation it is part of).
    pub context_turns: usize,
    /// ... and with up to this many following episodes (the turns that answer it). A new
    /// episode makes the ones before it pending again, so their context includes it.
    pub context_after: usize,
    /// ... created at most this many seconds apart (a new conversation starts after a gap).
    pub context_window_secs: i64,
    /// RRF weights of the lexical and the semantic list.
    pub lexical_weight: f64,
    pub semantic_weight: f64,
    /// A semantic candidate that did not match lexically enters only within this rank of the
    /// semantic list (0: never, `usize::MAX`: always).
    pub vector_only_rank: usize,
    /// ... and only with at least this cosine similarity to the query. `None`: the floor
    /// measured for the model ([`vector_only_floor`]; none for an unmeasured model);
    /// `Some(-1.0)`: no floor.
    pub vector_only_floor: Option<f64>,
    /// The RRF constant (`cairn_core::score::RRF_K`).
    pub rrf_k: f64,
    /// Conversation context on the lexical side: an `episode` also scores this fraction of
    /// the BM25 of the turn right before it (the question it answers) ...
    pub lexical_context_before: f64,
    /// ... and of the turn right after it (the reply that says what it was about).
    pub lexical_context_after: f64,
    /// An `episode` whose speaker (`<speaker>: <text>`) the query names has its relevance
    /// multiplied by this (1: off). "What did Caroline say about…" is mostly about
    /// Caroline's own turns; the name itself is in half the turns, so BM25 gives it no weight
    /// and the embedding barely moves.
    pub speaker_boost: f64,
    /// From this many stored vectors on, a long-lived process builds an IVF index and searches
    /// it instead of scanning every vector. Off (`usize::MAX`) by default: at 100k vectors the
    /// index answered 2.4× faster than the exact scan but with recall@10 0.75 against it, which
    /// costs ranking quality for 3 ms (docs/retrieval.md, "Vector search").
    pub ann_min_rows: usize,
    /// From this many stored vectors on, a long-lived process keeps an int8 copy of the
    /// vectors and scans that first, re-scoring the best rows exactly (`usize::MAX`: never).
    /// It answers like the exact scan (recall@200 against it is measured by the benchmark)
    /// in a third of the time at 100k.
    pub quantized_min_rows: usize,
    /// Diversity in the first ten places of a hybrid or semantic answer (maximal marginal
    /// relevance, `cairn_core::score::diversify`): a candidate's score relative to the best
    /// minus this × its redundancy with what is already placed (0: off).
    pub diversity: f64,
    /// A record dated within a calendar period the query names ("in June", "on 29 Dec 2023",
    /// `cairn_core::query::named_periods`) has its relevance multiplied by this (1: off).
    /// 1.1, the size of the recency bound like the speaker's: it breaks near-ties and never
    /// overrides a much better match. Measured in lexical mode on both development splits
    /// (docs/retrieval.md, "Issue 20"): LoCoMo recall@10 0.687 → 0.696, REALTALK unchanged.
    pub date_boost: f64,
    /// Pseudo-relevance feedback on the lexical side: the best lexical hits' most telling
    /// words (`FEEDBACK_TERMS`) are searched too, and a record adds this × their BM25 to its
    /// own (0: off). Never on the fast (hook) path.
    pub lexical_feedback: f64,
    /// The semantic list's weight follows the two lists' agreement per query: with `a` the
    /// share of the first ten lexical hits that the first ten semantic hits also hold, the
    /// semantic weight is multiplied by `1 − this × (1 − a)` (0: off, a fixed weight). A
    /// semantic leg that finds other things than the words do is trusted less for that query.
    /// Off: measured on both development splits, it trades LoCoMo for REALTALK like a milder
    /// fixed weight (docs/retrieval.md, "Issue 20").
    pub agreement: f64,
    /// The semantic leg's own confidence per query sets its weight: the semantic weight is
    /// multiplied by `clamp((best cosine − reference) / this, 0, 1)`, the reference chosen by
    /// `confidence_reference` (0: off, a fixed weight). A query whose nearest record stands
    /// barely above the reference is one the embedding does not recognise, and its ranks are
    /// trusted less. Off: measured on both development splits (docs/retrieval.md, "Issue 20").
    pub confidence: f64,
    /// What the best cosine is measured against (`confidence`).
    pub confidence_reference: ConfidenceReference,
    /// Two-level retrieval: a third list, of conversation windows, is fused with the two
    /// turn-level ones at this RRF weight (0: off; hybrid mode only). A window is a turn of
    /// the best fused candidates with up to `window_turns` episodes on each side (same
    /// conversation, as for context); windows rank by the sum of their turns' fused scores,
    /// and the list holds the turns of the best windows, best window first. The hops of a
    /// question told over several neighbouring turns gain together. Off: measured on both
    /// development splits (docs/retrieval.md, "Issue 20").
    pub window_weight: f64,
    /// Episodes on each side of a window's centre (`window_weight`).
    pub window_turns: usize,
    /// Window similarity on the semantic leg: each of the best `WINDOW_SIMILARITY_DEPTH`
    /// semantic candidates that is an episode scores the larger of its own cosine and the
    /// cosine of its conversation window (the mean of its vector and those of up to this many
    /// episodes on each side), and the list is re-sorted (0: off). A hop told over two
    /// turns, each only half about the question, is matched by the pair.
    pub window_similarity: usize,
    /// Where lexical feedback (`lexical_feedback`) reads its words: the best lexical hits
    /// (`Lexical`, the default) or the best fused candidates (`Fused`: in hybrid mode the
    /// turns both legs agree on, which are more often the relevant ones).
    pub feedback_source: FeedbackSource,
    /// The knowledge graph as a candidate source (hybrid mode): the records mentioning the
    /// entities the question names (their keys found in the graph) form a third ranked list,
    /// fused at this RRF weight (0: off). Rarer entities count more
    /// (`graph::recall::rank_by_entities`). Off: measured on both development splits
    /// (docs/retrieval.md, "Issue 20").
    pub graph_weight: f64,
    /// ... and the entities the best fused candidates mention that the question does not
    /// (bridge entities: the second hop of a multi-hop question), at half a named one's weight.
    pub graph_bridge: bool,
    /// ... and the entities one co-occurrence (`relates`) edge from the question's, at half
    /// weight.
    pub graph_neighbours: bool,
}

/// Where lexical pseudo-relevance feedback reads its words ([`SemanticConfig::feedback_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeedbackSource {
    /// The best lexical hits.
    #[default]
    Lexical,
    /// The best fused candidates (both lists); in lexical mode the same as `Lexical`.
    Fused,
}

impl std::str::FromStr for FeedbackSource {
    type Err = String;
    fn from_str(given: &str) -> std::result::Result<Self, String> {
        match given.trim().to_ascii_lowercase().as_str() {
            "lexical" => Ok(FeedbackSource::Lexical),
            "fused" => Ok(FeedbackSource::Fused),
            _ => Err(format!(
                "unknown feedback source {given:?}: expected lexical or fused"
            )),
        }
    }
}

/// The reference the semantic leg's confidence is measured against
/// ([`SemanticConfig::confidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfidenceReference {
    /// The vector-only floor (`SemanticConfig::vector_only_floor`, else the one measured for
    /// the model): how far the best match stands above what counts as related at all. A
    /// model without a measured floor keeps the fixed weight.
    #[default]
    Floor,
    /// The median cosine of the semantic candidates: how far the best match stands out of
    /// the pool, whatever the model's cosine range.
    Median,
}

impl std::str::FromStr for ConfidenceReference {
    type Err = String;
    fn from_str(given: &str) -> std::result::Result<Self, String> {
        match given.trim().to_ascii_lowercase().as_str() {
            "floor" => Ok(ConfidenceReference::Floor),
            "median" => Ok(ConfidenceReference::Median),
            _ => Err(format!(
                "unknown confidence reference {given:?}: expected floor or median"
            )),
        }
    }
}

impl Default for SemanticConfig {
    fn default() -> Self {
        SemanticConfig {
            context_turns: 2,
            context_after: 0,
            context_window_secs: 3600,
            lexical_weight: 1.0,
            semantic_weight: 1.0,
            vector_only_rank: usize::MAX,
            vector_only_floor: None,
            rrf_k: cairn_core::score::RRF_K,
            lexical_context_before: 0.3,
            lexical_context_after: 0.3,
            speaker_boost: 1.1,
            ann_min_rows: usize::MAX,
            quantized_min_rows: vector::QUANTIZED_MIN_ROWS,
            diversity: 0.0,
            date_boost: 1.1,
            agreement: 0.0,
            lexical_feedback: 0.0,
            confidence: 0.0,
            confidence_reference: ConfidenceReference::Floor,
            window_weight: 0.0,
            window_turns: 2,
            window_similarity: 0,
            feedback_source: FeedbackSource::Lexical,
            graph_weight: 0.0,
            graph_bridge: false,
            graph_neighbours: false,
        }
    }
}

pub(crate) enum Slot {
    /// No embedder configured: lexical-only by choice.
    Off,
    /// Configured, not loaded yet.
    Pending(EmbedderLoader),
    Ready(Arc<dyn Embedder>),
    /// Loading failed; the message says why and how to fix it.
    Failed(String),
}

/// The engine's semantic state.
pub(crate) struct Semantic {
    pub(crate) slot: Slot,
    pub(crate) config: SemanticConfig,
    /// The vectors as last loaded, with the store generation they reflect.
    cache: Option<MatrixCache>,
    /// A background indexer embeds the older pending records
    /// ([`Engine::leave_backlog_to_indexer`]): a write embeds only what it wrote.
    backlog_elsewhere: bool,
    /// The background indexer also embeds what a write stores
    /// ([`Engine::leave_writes_to_indexer`]): a write only notes its records here, for
    /// [`Engine::take_unembedded_writes`].
    writes_elsewhere: bool,
    unembedded_writes: Vec<i64>,
    /// The vectors this engine stores are kept for [`Engine::take_written_vectors`] (the
    /// background indexer's engine, so the engine that answers recalls can take them into
    /// its matrix without reading the brain's vectors again).
    keep_written: bool,
    /// What was kept since the last take, oldest first (cleared when it grows past
    /// [`KEPT_ROWS`]: the other engine then refreshes from the brain as before).
    written: Vec<VectorWrite>,
    /// Times this engine read the brain's vectors whole or their fingerprints (to bring the
    /// matrix it holds up to date): [`Engine::vector_reads`].
    vector_reads: AtomicUsize,
}

/// Rows [`Engine::keep_written_vectors`] keeps at most between two takes (a few hundred KB of
/// vectors); past it they are dropped and the recalling engine reads the changes itself.
const KEPT_ROWS: usize = 1024;

/// Vectors one engine stored, for another engine of the same process to take into the matrix
/// it holds ([`Engine::absorb_vectors`]) instead of reading the brain's vectors again: what the
/// background indexer hands to the engine that answers recalls after it embedded a write.
#[derive(Debug, Default)]
pub struct WrittenVectors {
    writes: Vec<VectorWrite>,
}

impl WrittenVectors {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// How many vectors (rows) these are.
    pub fn rows(&self) -> usize {
        self.writes.iter().map(|write| write.rows.len()).sum()
    }
}

/// One write transaction's vectors: the `vectors_version` it started from and the one it
/// left, and the rows it stored `(memory id, text fingerprint, vector)`, ascending by id.
#[derive(Debug)]
struct VectorWrite {
    space: VectorSpace,
    before: i64,
    after: i64,
    rows: Vec<(i64, u64, Vec<f32>)>,
}

/// A loaded vector matrix and, on a large one in a long-lived process, its int8 copy and its
/// IVF index.
struct MatrixCache {
    generation: u64,
    /// The vector space the matrix was read under (a model switch reloads it whole).
    space: Option<VectorSpace>,
    /// `meta.vectors_version` when the matrix was read (`None`: unknown): while it stays the
    /// same, writes elsewhere in the brain leave the matrix as it is.
    vectors_version: Option<i64>,
    matrix: Arc<VectorMatrix>,
    index: Derived<IvfIndex>,
    quantized: Derived<QuantizedRows>,
    /// Semantic queries answered from this matrix (the index and the int8 copy are built from
    /// the second on, or when a server warms its vectors: a one-shot CLI process never pays
    /// for them).
    queries: usize,
}

impl MatrixCache {
    fn new(generation: u64, space: Option<VectorSpace>, matrix: Arc<VectorMatrix>) -> MatrixCache {
        MatrixCache {
            generation,
            space,
            vectors_version: None,
            matrix,
            index: Derived::default(),
            quantized: Derived::default(),
            queries: 0,
        }
    }
}

/// A slot filled once, possibly by another thread.
type Built<T> = Arc<OnceLock<T>>;

/// A structure derived from the cached matrix (the IVF index, the int8 copy), filled once by
/// a background thread or at once; queries scan exactly until it is there.
struct Derived<T> {
    slot: Built<T>,
    started: bool,
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived {
            slot: Arc::new(OnceLock::new()),
            started: false,
        }
    }
}

impl<T: Send + Sync + 'static> Derived<T> {
    fn get(&self) -> Option<&T> {
        self.slot.get()
    }

    /// Starts building it from `matrix` on a background thread, once.
    fn start(&mut self, name: &str, matrix: &Arc<VectorMatrix>, build: fn(&VectorMatrix) -> T) {
        if self.started {
            return;
        }
        let (matrix, slot) = (Arc::clone(matrix), Arc::clone(&self.slot));
        self.started = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _ = slot.set(build(&matrix));
            })
            .is_ok();
    }

    /// Builds it from `matrix` now (unless it is there already).
    fn build_now(&mut self, matrix: &VectorMatrix, build: fn(&VectorMatrix) -> T) {
        self.slot.get_or_init(|| build(matrix));
        self.started = true;
    }

    /// Set to `value` (a copy kept up to date by other means).
    fn set(&mut self, value: T) {
        let _ = self.slot.set(value);
        self.started = true;
    }

    /// Mutable access when it is built and no builder thread still holds it.
    fn get_mut(&mut self) -> Option<&mut T> {
        Arc::get_mut(&mut self.slot).and_then(OnceLock::get_mut)
    }
}

fn build_ivf(matrix: &VectorMatrix) -> IvfIndex {
    IvfIndex::build(&matrix.data, matrix.dimension, IvfParams::default())
}

fn build_int8(matrix: &VectorMatrix) -> QuantizedRows {
    QuantizedRows::build(&matrix.data, matrix.dimension)
}

impl Default for Semantic {
    fn default() -> Self {
        Semantic {
            slot: Slot::Off,
            config: SemanticConfig::default(),
            cache: None,
            backlog_elsewhere: false,
            writes_elsewhere: false,
            unembedded_writes: Vec::new(),
            keep_written: false,
            written: Vec::new(),
            vector_reads: AtomicUsize::new(0),
        }
    }
}

/// What `index_pending` / `reindex` did.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct IndexReport {
    pub model: Option<String>,
    pub embedded: usize,
    /// Vectors reused from an identical text already embedded (the content-hash cache).
    pub reused: usize,
    /// Vectors dropped by a model switch before re-embedding.
    pub dropped: usize,
    pub failed: usize,
    pub errors: Vec<String>,
    /// Records still without a vector afterwards.
    pub pending: i64,
}

/// What `model status` and `doctor` report about the semantic index.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SemanticStatus {
    /// The configured embedder, once loaded.
    pub model: Option<String>,
    pub dimension: Option<usize>,
    /// The model the brain's vectors come from.
    pub brain: Option<VectorSpace>,
    pub counts: VectorCounts,
    /// Why semantic search is unavailable, with the fix; `None` when it works.
    pub problem: Option<String>,
}

/// The text a record is embedded as: its title, summary and body, preceded for an `episode`
/// by the turns before it (two by default, measured on LoCoMo) (a turn is rarely understandable alone: "Yes, last Saturday!").
pub fn embedding_text(memory: &Memory, before: &[Memory], after: &[Memory]) -> String {
    let mut text = String::new();
    for previous in before {
        text.push_str(&previous.body);
        text.push('\n');
    }
    for part in [memory.title.as_deref(), memory.summary.as_deref()]
        .into_iter()
        .flatten()
    {
        text.push_str(part);
        text.push('\n');
    }
    text.push_str(&memory.body);
    for next in after {
        text.push('\n');
        text.push_str(&next.body);
    }
    text
}

/// Consecutive ranges of `costs` (each text's tokens, in order) for the embedder's calls:
/// each range sums to at most `max_tokens` — a single text over it goes alone — and holds at
/// most `max_texts` texts. Every index is in exactly one range.
pub(crate) fn token_batches(
    costs: &[usize],
    max_tokens: usize,
    max_texts: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut batches = Vec::new();
    let (mut start, mut tokens) = (0, 0usize);
    for (index, &cost) in costs.iter().enumerate() {
        let full = index - start >= max_texts.max(1) || tokens.saturating_add(cost) > max_tokens;
        if index > start && full {
            batches.push(start..index);
            (start, tokens) = (index, 0);
        }
        tokens = tokens.saturating_add(cost);
    }
    if start < costs.len() {
        batches.push(start..costs.len());
    }
    batches
}

pub(crate) fn text_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl Engine {
    /// Uses `embedder` for semantic search and indexing.
    pub fn set_embedder(&mut self, embedder: Box<dyn Embedder>) {
        self.semantic.slot = Slot::Ready(Arc::from(embedder));
    }

    /// Uses an embedder shared with other engines (one model in memory for many brains).
    pub fn set_shared_embedder(&mut self, embedder: Arc<dyn Embedder>) {
        self.semantic.slot = Slot::Ready(embedder);
    }

    /// A background indexer of this process embeds the records still pending (the service's,
    /// `cairn-service`): a write then embeds only the records it wrote, not up to
    /// `BACKGROUND_BATCH` older ones — finding those scans the whole brain (at 100,000 records
    /// most of a write's time in the daemon).
    pub fn leave_backlog_to_indexer(&mut self) {
        self.semantic.backlog_elsewhere = true;
    }

    /// The background indexer of this process embeds what each write stores, too: a write is
    /// acknowledged once it is stored, and the records it wrote wait in
    /// [`Engine::take_unembedded_writes`] for the caller to hand to the indexer (embedding one
    /// record took most of a `remember`'s time in the daemon). Until they are embedded, recall
    /// finds them lexically. Only `remember` is deferred: an update embeds its new text at once
    /// (and warns when it cannot). Implies [`Engine::leave_backlog_to_indexer`].
    pub fn leave_writes_to_indexer(&mut self) {
        self.semantic.backlog_elsewhere = true;
        self.semantic.writes_elsewhere = true;
    }

    /// Undoes [`Engine::leave_writes_to_indexer`] (the backlog stays the indexer's): a write
    /// embeds what it stored before it answers, and warns when it cannot — what a service does
    /// while its indexer's embeddings fail.
    pub fn embed_writes_here(&mut self) {
        self.semantic.writes_elsewhere = false;
    }

    /// The records written since the last call whose embedding was left to the indexer
    /// ([`Engine::leave_writes_to_indexer`]), oldest first.
    pub fn take_unembedded_writes(&mut self) -> Vec<i64> {
        std::mem::take(&mut self.semantic.unembedded_writes)
    }

    /// Embeds those of `ids` still without a vector (what writes left to the indexer), and
    /// nothing else: the background indexer's quick pass after writes.
    pub fn index_records(&mut self, ids: &[i64]) -> Result<IndexReport> {
        self.ensure_writable("reindex")?;
        self.index_written(ids)
    }

    /// Keeps the vectors this engine stores from now on, for [`Engine::take_written_vectors`]
    /// (the service's background indexer: its new vectors go straight into the matrix of the
    /// engine that answers recalls).
    pub fn keep_written_vectors(&mut self) {
        self.semantic.keep_written = true;
    }

    /// The vectors stored since the last call ([`Engine::keep_written_vectors`]).
    pub fn take_written_vectors(&mut self) -> WrittenVectors {
        WrittenVectors {
            writes: std::mem::take(&mut self.semantic.written),
        }
    }

    /// Takes vectors another engine of this process stored ([`Engine::take_written_vectors`])
    /// into the matrix this engine holds, editing it in place (and its int8 copy), when the
    /// matrix was up to date right before they were written; then the next recall reads
    /// nothing of the brain's vectors, not even their fingerprints. Anything else (the matrix
    /// was already behind, a row would go in the middle, the matrix is shared with a builder
    /// thread) leaves the matrix as it is, and the next recall brings it up to date from the
    /// brain as always. Returns how many rows were taken in.
    pub fn absorb_vectors(&mut self, written: &WrittenVectors) -> usize {
        let mut absorbed = 0;
        for write in &written.writes {
            let Some(cache) = self.semantic.cache.as_mut() else {
                break;
            };
            if !absorb_write(cache, write) {
                break;
            }
            absorbed += write.rows.len();
        }
        absorbed
    }

    /// How many times this engine read the brain's vectors whole, or their fingerprints to
    /// bring the matrix it holds up to date (what the service's tests count).
    pub fn vector_reads(&self) -> usize {
        self.semantic.vector_reads.load(Ordering::Relaxed)
    }

    /// Rows of the vector matrix this engine holds (`None`: none loaded); reads nothing.
    pub fn held_vectors(&self) -> Option<usize> {
        self.semantic
            .cache
            .as_ref()
            .map(|cache| cache.matrix.ids.len())
    }

    /// The loaded embedder, loading it now if it is configured (to share it, see
    /// [`Engine::set_shared_embedder`]). `Ok(None)` when none is configured.
    pub fn load_embedder(&mut self) -> std::result::Result<Option<Arc<dyn Embedder>>, String> {
        self.embedder()
    }

    /// Loads the embedder with `loader` the first time it is needed.
    pub fn set_embedder_loader(&mut self, loader: EmbedderLoader) {
        self.semantic.slot = Slot::Pending(loader);
    }

    /// The embedder when it is already loaded (no loading here).
    pub(crate) fn resident_embedder(&self) -> Option<Arc<dyn Embedder>> {
        match &self.semantic.slot {
            Slot::Ready(embedder) => Some(embedder.clone()),
            _ => None,
        }
    }

    /// Whether an embedder is configured (loaded or not).
    pub fn embedder_is_configured(&self) -> bool {
        !matches!(self.semantic.slot, Slot::Off)
    }

    /// Whether the embedder is loaded in this process (the hook's fast path uses it only then).
    pub fn embedder_is_loaded(&self) -> bool {
        matches!(self.semantic.slot, Slot::Ready(_))
    }

    /// Replaces the semantic tuning (experiments, the evaluation).
    pub fn set_semantic_config(&mut self, config: SemanticConfig) {
        self.semantic.config = config;
    }

    pub fn semantic_config(&self) -> &SemanticConfig {
        &self.semantic.config
    }

    /// Reads the brain's vectors into memory now and, on a large brain, starts building their
    /// int8 copy (a long-running server calls it once the model is resident, so the first
    /// recall does not pay the load).
    pub fn warm_vectors(&mut self) -> Result<()> {
        if self.embedder_is_loaded() {
            let matrix = self.matrix()?;
            if matrix.ids.len() >= self.semantic.config.quantized_min_rows
                && let Some(cache) = self.semantic.cache.as_mut()
            {
                cache
                    .quantized
                    .start("cairn-int8", &cache.matrix, build_int8);
            }
        }
        Ok(())
    }

    /// Loads the embedder if it is configured and not loaded yet; `Ok(None)` when none is
    /// configured, `Err(message)` when it cannot be used.
    pub(crate) fn embedder(&mut self) -> std::result::Result<Option<Arc<dyn Embedder>>, String> {
        let slot = std::mem::replace(&mut self.semantic.slot, Slot::Off);
        self.semantic.slot = match slot {
            Slot::Pending(loader) => match loader() {
                Ok(Some(embedder)) => Slot::Ready(Arc::from(embedder)),
                Ok(None) => Slot::Off,
                Err(error) => Slot::Failed(error.to_string()),
            },
            other => other,
        };
        match &self.semantic.slot {
            Slot::Off | Slot::Pending(_) => Ok(None),
            Slot::Ready(embedder) => Ok(Some(embedder.clone())),
            Slot::Failed(message) => Err(message.clone()),
        }
    }

    /// `Err(message with the fix)` when the brain's vectors come from another model.
    fn check_space(&self, embedder: &dyn Embedder) -> std::result::Result<(), String> {
        let reader = self.store.recall_read(None);
        let space = reader.vector_space().map_err(|e| e.to_string())?;
        let Some(space) = space else { return Ok(()) };
        if space.model == embedder.model_id() && space.dimension == embedder.dimension() {
            return Ok(());
        }
        let counts = reader.vector_counts().map_err(|e| e.to_string())?;
        if counts.with_vector == 0 {
            return Ok(());
        }
        let what = if space.dimension != embedder.dimension() {
            format!(
                "this brain's {} vectors are {}-dimensional ({}) but the configured model {} makes {}-dimensional ones",
                counts.with_vector,
                space.dimension,
                space.model,
                embedder.model_id(),
                embedder.dimension()
            )
        } else {
            format!(
                "this brain's {} vectors come from {} but the configured model is {}",
                counts.with_vector,
                space.model,
                embedder.model_id()
            )
        };
        Err(format!(
            "{what}; vectors of different models are never mixed, so semantic search is off and nothing was changed. Fix: `cairn reindex` re-embeds every record with {} (the old vectors are replaced), or configure {} again",
            embedder.model_id(),
            space.model
        ))
    }

    /// The state of the semantic index, loading the embedder if configured.
    pub fn semantic_status(&mut self) -> Result<SemanticStatus> {
        let embedder = self.embedder();
        let reader = self.store.reader()?;
        let brain = reader.vector_space()?;
        let counts = reader.vector_counts()?;
        let (model, dimension, problem) = match &embedder {
            Ok(Some(embedder)) => (
                Some(embedder.model_id().to_string()),
                Some(embedder.dimension()),
                self.check_space(embedder.as_ref()).err(),
            ),
            Ok(None) => (
                None,
                None,
                Some(
                    "no embedder is configured (CAIRN_EMBEDDER=none): recall is lexical-only. Fix: unset CAIRN_EMBEDDER (the local model is the default) or set CAIRN_EMBEDDER=http with CAIRN_EMBED_URL".to_string(),
                ),
            ),
            Err(message) => (None, None, Some(message.clone())),
        };
        Ok(SemanticStatus {
            model,
            dimension,
            brain,
            counts,
            problem,
        })
    }

    /// The records an `episode` is embedded with: the turns around it in its conversation,
    /// oldest first.
    fn context_of(&self, memory: &Memory) -> Result<(Vec<Memory>, Vec<Memory>)> {
        let config = &self.semantic.config;
        if memory.memory_type != MemoryType::Episode {
            return Ok((Vec::new(), Vec::new()));
        }
        let reader = self.store.reader()?;
        let mut before =
            reader.preceding_episodes(memory, config.context_turns, config.context_window_secs)?;
        before.reverse(); // oldest first, as the conversation went
        let after =
            reader.following_episodes(memory, config.context_after, config.context_window_secs)?;
        Ok((before, after))
    }

    /// After storing an episode: the episodes before it embedded it as their following
    /// context only if it existed then, so they become pending and are embedded again.
    pub(crate) fn refresh_context_of_neighbours(&mut self, id: i64) -> Result<()> {
        let after = self.semantic.config.context_after;
        if after == 0 || matches!(self.semantic.slot, Slot::Off) {
            return Ok(());
        }
        let Some(memory) = self.store.reader()?.get(id)? else {
            return Ok(());
        };
        if memory.memory_type != MemoryType::Episode {
            return Ok(());
        }
        let window = self.semantic.config.context_window_secs;
        let previous = self
            .store
            .reader()?
            .preceding_episodes(&memory, after, window)?;
        if previous.is_empty() {
            return Ok(());
        }
        self.store.write(|tx| {
            for earlier in &previous {
                tx.drop_vector(earlier.id)?;
            }
            Ok::<_, EngineError>(())
        })
    }

    /// Embeds records that have no vector yet, oldest first: all of them (`limit` `None`) or
    /// at most `limit`. `progress(done, total)` is called after each batch. One record that
    /// cannot be embedded is reported and skipped; it stays pending.
    pub fn index_pending(
        &mut self,
        limit: Option<usize>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<IndexReport> {
        self.ensure_writable("reindex")?;
        let embedder = match self.embedder() {
            Ok(Some(embedder)) => embedder,
            Ok(None) => {
                return Err(EngineError::Invalid(
                    "no embedder is configured (CAIRN_EMBEDDER=none); nothing to index with".into(),
                ));
            }
            Err(message) => return Err(EngineError::Invalid(message)),
        };
        self.check_space(embedder.as_ref())
            .map_err(EngineError::Invalid)?;
        let total_pending = self.store.reader()?.vector_counts()?.pending() as usize;
        let total = limit.map_or(total_pending, |l| l.min(total_pending));
        let mut report = IndexReport {
            model: Some(embedder.model_id().to_string()),
            ..IndexReport::default()
        };
        let mut after = 0i64;
        let mut done = 0usize;
        progress(0, total);
        while done < total {
            let want = INDEX_BATCH.min(total - done);
            let ids = self.store.reader()?.pending_vector_ids(after, want)?;
            let Some(&last) = ids.last() else { break };
            after = last;
            self.index_batch(embedder.as_ref(), &ids, &mut report)?;
            done += ids.len();
            progress(done, total);
        }
        report.pending = self.store.reader()?.vector_counts()?.pending();
        Ok(report)
    }

    /// Embeds those of `ids` that have no vector yet (what one write stored), without looking
    /// for other pending records.
    fn index_written(&mut self, ids: &[i64]) -> Result<IndexReport> {
        let embedder = match self.embedder() {
            Ok(Some(embedder)) => embedder,
            Ok(None) => return Ok(IndexReport::default()),
            Err(message) => return Err(EngineError::Invalid(message)),
        };
        self.check_space(embedder.as_ref())
            .map_err(EngineError::Invalid)?;
        let dimension = embedder.dimension();
        let mut pending = Vec::new();
        for &id in ids {
            if self.store.reader()?.vector_of(id, dimension)?.is_none() {
                pending.push(id);
            }
        }
        let mut report = IndexReport {
            model: Some(embedder.model_id().to_string()),
            ..IndexReport::default()
        };
        if !pending.is_empty() {
            self.index_batch(embedder.as_ref(), &pending, &mut report)?;
        }
        Ok(report)
    }

    fn index_batch(
        &mut self,
        embedder: &dyn Embedder,
        ids: &[i64],
        report: &mut IndexReport,
    ) -> Result<()> {
        let dimension = embedder.dimension();
        let memories = self.store.reader()?.get_many(ids)?;
        // (id, hash, vector if cached, text)
        let mut work: Vec<(i64, String, Option<Vec<f32>>, String)> = Vec::new();
        for memory in &memories {
            let (before, after) = self.context_of(memory)?;
            let text = embedding_text(memory, &before, &after);
            let hash = text_hash(&text);
            let cached = self.store.reader()?.vector_for_text(&hash, dimension)?;
            work.push((memory.id, hash, cached, text));
        }
        let missing: Vec<usize> = (0..work.len()).filter(|&i| work[i].2.is_none()).collect();
        let costs: Vec<usize> = missing
            .iter()
            .map(|&i| embedder.passage_tokens(&work[i].3))
            .collect();
        for batch in token_batches(&costs, INDEX_TOKENS, INDEX_BATCH) {
            let missing = &missing[batch];
            let texts: Vec<&str> = missing.iter().map(|&i| work[i].3.as_str()).collect();
            match embedder.embed_batch(&texts) {
                Ok(vectors) if vectors.len() == texts.len() => {
                    for (&i, vector) in missing.iter().zip(vectors) {
                        work[i].2 = Some(vector);
                    }
                }
                _ => {
                    // Find the culprit(s) one by one; the others still get their vectors.
                    for &i in missing {
                        match embedder.embed_batch(&[work[i].3.as_str()]) {
                            Ok(mut one) if one.len() == 1 => work[i].2 = one.pop(),
                            Ok(_) => {}
                            Err(error) => {
                                report.failed += 1;
                                if report.errors.len() < 10 {
                                    report.errors.push(format!("#{}: {error}", work[i].0));
                                }
                            }
                        }
                    }
                }
            }
        }
        let space = VectorSpace {
            model: embedder.model_id().to_string(),
            dimension,
        };
        let mut reused = 0usize;
        let mut embedded = 0usize;
        let keep = self.semantic.keep_written;
        let mut kept = Vec::new();
        let mut versions = None;
        self.store.write(|tx| {
            if tx.reader().vector_space()?.as_ref() != Some(&space) {
                tx.set_vector_space(&space)?;
            }
            // Inside the transaction: exactly the version these rows move the brain from.
            let before = if keep {
                tx.reader().vectors_version()?
            } else {
                None
            };
            for (index, (id, hash, vector, _)) in work.iter().enumerate() {
                let Some(vector) = vector else { continue };
                if vector.len() != dimension {
                    continue;
                }
                tx.put_vector(*id, hash, vector)?;
                if keep {
                    kept.push((*id, cairn_store::text_fingerprint(hash), vector.clone()));
                }
                if missing.contains(&index) {
                    embedded += 1;
                } else {
                    reused += 1;
                }
            }
            if keep {
                versions = before.zip(tx.reader().vectors_version()?);
            }
            Ok::<_, EngineError>(())
        })?;
        report.embedded += embedded;
        report.reused += reused;
        if let Some((before, after)) = versions
            && !kept.is_empty()
        {
            self.keep_write(VectorWrite {
                space,
                before,
                after,
                rows: kept,
            });
        }
        Ok(())
    }

    /// Keeps one write's vectors for [`Engine::take_written_vectors`], within [`KEPT_ROWS`].
    fn keep_write(&mut self, mut write: VectorWrite) {
        write.rows.sort_by_key(|&(id, _, _)| id);
        write.rows.dedup_by_key(|&mut (id, _, _)| id);
        let kept: usize = self.semantic.written.iter().map(|w| w.rows.len()).sum();
        if kept + write.rows.len() > KEPT_ROWS {
            // Too many to hand over: the other engine reads what changed itself.
            self.semantic.written.clear();
            return;
        }
        self.semantic.written.push(write);
    }

    /// Re-embeds every record: after a model switch (the brain's vectors come from another
    /// model) or when `full` is asked; otherwise completes what is pending.
    pub fn reindex(
        &mut self,
        full: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<IndexReport> {
        self.ensure_writable("reindex")?;
        let embedder = match self.embedder() {
            Ok(Some(embedder)) => embedder,
            Ok(None) => {
                return Err(EngineError::Invalid(
                    "no embedder is configured (CAIRN_EMBEDDER=none); nothing to index with. Fix: unset CAIRN_EMBEDDER or set it to local or http".into(),
                ));
            }
            Err(message) => return Err(EngineError::Invalid(message)),
        };
        let switch = self.check_space(embedder.as_ref()).is_err();
        let mut dropped = 0;
        if switch || full {
            let space = VectorSpace {
                model: embedder.model_id().to_string(),
                dimension: embedder.dimension(),
            };
            dropped = self.store.write(|tx| tx.reset_vectors(&space))?;
        }
        let mut report = self.index_pending(None, progress)?;
        report.dropped = dropped;
        Ok(report)
    }

    /// After a write of `written`: embed what is pending, at most `BACKGROUND_BATCH` records
    /// (only `written` when a background indexer takes the rest:
    /// [`Engine::leave_backlog_to_indexer`]). Problems become warnings; the records are stored
    /// either way and stay pending.
    ///
    /// A `remember` (`new_records`) whose embedding is left to the indexer
    /// ([`Engine::leave_writes_to_indexer`]) is only noted; an update embeds its new text here
    /// either way, so a text that cannot be embedded says so in its answer.
    pub(crate) fn index_after_write(
        &mut self,
        written: &[i64],
        new_records: bool,
    ) -> Option<String> {
        // No embedder configured (CAIRN_EMBEDDER=none): lexical by choice, nothing to warn of.
        if self.context.read_only || matches!(self.embedder(), Ok(None)) {
            return None;
        }
        if new_records
            && self.semantic.writes_elsewhere
            && matches!(self.semantic.slot, Slot::Ready(_))
        {
            self.semantic.unembedded_writes.extend_from_slice(written);
            return None;
        }
        let indexed = if self.semantic.backlog_elsewhere {
            self.index_written(written)
        } else {
            self.index_pending(Some(BACKGROUND_BATCH), &mut |_, _| {})
        };
        match indexed {
            Ok(report) if report.failed == 0 => None,
            Ok(report) => Some(format!(
                "{} record(s) could not be embedded yet ({}); they stay pending: `cairn reindex` retries",
                report.failed,
                report.errors.join("; ")
            )),
            Err(error) => Some(format!(
                "stored, but not embedded yet ({error}); recall finds it lexically, `cairn reindex` embeds it"
            )),
        }
    }

    /// Semantic candidates for `query`, filtered exactly like the lexical ones, best first,
    /// `strength` = cosine similarity. `Err(message)` when semantic search is unavailable.
    pub(crate) fn semantic_candidates(
        &mut self,
        query: &str,
        filter: &LexicalQuery<'_>,
        limit: usize,
        query_vector: Option<Vec<f32>>,
    ) -> std::result::Result<SemanticCandidates, String> {
        // Load the model and the vectors at the same time: on a cold process both take
        // 100–200 ms and there are two cores.
        let need_matrix = !self.matrix_is_fresh();
        let slot = std::mem::replace(&mut self.semantic.slot, Slot::Off);
        let (slot, matrix) = match slot {
            Slot::Pending(loader) if need_matrix => std::thread::scope(|scope| {
                let loading = scope.spawn(loader);
                let matrix = self.load_matrix();
                let slot = match loading.join() {
                    Ok(Ok(Some(embedder))) => Slot::Ready(Arc::from(embedder)),
                    Ok(Ok(None)) => Slot::Off,
                    Ok(Err(error)) => Slot::Failed(error.to_string()),
                    Err(_) => Slot::Failed("the embedder panicked while loading".to_string()),
                };
                (slot, Some(matrix))
            }),
            other => (other, None),
        };
        self.semantic.slot = slot;
        let embedder = match self.embedder()? {
            Some(embedder) => embedder,
            None => {
                return Err("no embedder is configured (CAIRN_EMBEDDER=none)".to_string());
            }
        };
        self.check_space(embedder.as_ref())?;
        let matrix = match matrix {
            Some(loaded) => {
                let loaded = loaded.map_err(|e| e.to_string())?;
                self.remember_matrix(loaded.clone());
                loaded
            }
            None => self.matrix().map_err(|e| e.to_string())?,
        };
        if matrix.dimension != embedder.dimension() && !matrix.ids.is_empty() {
            return Err(format!(
                "stored vectors are {}-dimensional, the model makes {}: `cairn reindex`",
                matrix.dimension,
                embedder.dimension()
            ));
        }
        let query_vector = match query_vector {
            Some(vector) => vector,
            None => embedder.embed_query(query).map_err(|e| e.to_string())?,
        };
        let (index, quantized) = self.derived_structures(&matrix);
        let mut want = limit.saturating_mul(4).max(limit);
        let hits = loop {
            let nearest = nearest_rows(
                &matrix,
                index.as_ref().and_then(|slot| slot.get()),
                quantized.as_ref().and_then(|slot| slot.get()),
                &query_vector,
                want,
            );
            let ids: Vec<i64> = nearest.iter().map(|n| matrix.ids[n.row]).collect();
            let allowed: std::collections::HashSet<i64> = self
                .store
                .recall_read(None)
                .filter_ids(&ids, filter)
                .map_err(|e| e.to_string())?
                .into_iter()
                .collect();
            let hits = nearest
                .iter()
                .filter(|n| allowed.contains(&matrix.ids[n.row]))
                .take(limit)
                .map(|n| Hit {
                    id: matrix.ids[n.row],
                    strength: n.similarity as f64,
                })
                .collect::<Vec<_>>();
            if hits.len() >= limit || nearest.len() < want {
                break hits;
            }
            want = want.saturating_mul(4);
        };
        Ok(SemanticCandidates {
            hits,
            embedded: matrix.ids.len(),
            model: embedder.model_id().to_string(),
            query_vector,
        })
    }

    /// Counts a query on `matrix` and hands out its IVF index and int8 copy where the brain is
    /// large enough for them; from the second query on a long-lived engine (MCP server,
    /// evaluation) they are built in the background.
    fn derived_structures(
        &mut self,
        matrix: &Arc<VectorMatrix>,
    ) -> (Option<Built<IvfIndex>>, Option<Built<QuantizedRows>>) {
        let config = &self.semantic.config;
        let (ivf_rows, int8_rows) = (config.ann_min_rows, config.quantized_min_rows);
        let Some(cache) = self
            .semantic
            .cache
            .as_mut()
            .filter(|cache| Arc::ptr_eq(&cache.matrix, matrix))
        else {
            return (None, None);
        };
        cache.queries += 1;
        let rows = matrix.ids.len();
        let index = (rows >= ivf_rows).then(|| {
            if cache.queries >= 2 {
                cache.index.start("cairn-ivf", matrix, build_ivf);
            }
            Arc::clone(&cache.index.slot)
        });
        let quantized = (rows >= int8_rows).then(|| {
            if cache.queries >= 2 {
                cache.quantized.start("cairn-int8", matrix, build_int8);
            }
            Arc::clone(&cache.quantized.slot)
        });
        (index, quantized)
    }

    /// Builds the IVF index of the current vectors now if they are many enough (the
    /// benchmark, before measuring). Returns whether one is in use.
    pub fn prepare_vector_index(&mut self) -> Result<bool> {
        let min_rows = self.semantic.config.ann_min_rows;
        self.prepare(min_rows, |cache| {
            cache.index.build_now(&cache.matrix, build_ivf)
        })
    }

    /// Builds the int8 copy of the current vectors now if they are many enough (the
    /// benchmark, before measuring). Returns whether one is in use.
    pub fn prepare_quantized_vectors(&mut self) -> Result<bool> {
        let min_rows = self.semantic.config.quantized_min_rows;
        self.prepare(min_rows, |cache| {
            cache.quantized.build_now(&cache.matrix, build_int8)
        })
    }

    fn prepare(&mut self, min_rows: usize, build: impl FnOnce(&mut MatrixCache)) -> Result<bool> {
        let matrix = self.matrix()?;
        match self.semantic.cache.as_mut() {
            Some(cache) if matrix.ids.len() >= min_rows && Arc::ptr_eq(&cache.matrix, &matrix) => {
                build(cache);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn store_generation(&self) -> u64 {
        self.store.generation().unwrap_or(u64::MAX)
    }

    /// The vectors as last loaded by a semantic search (no load, no refresh): what recall's
    /// diversity step compares its first candidates with.
    pub(crate) fn loaded_vectors(&self) -> Option<Arc<VectorMatrix>> {
        self.semantic
            .cache
            .as_ref()
            .map(|cache| cache.matrix.clone())
    }

    fn matrix_is_fresh(&self) -> bool {
        matches!(&self.semantic.cache, Some(cache) if cache.generation == self.store_generation())
    }

    fn load_matrix(&self) -> cairn_store::Result<Arc<VectorMatrix>> {
        self.semantic.vector_reads.fetch_add(1, Ordering::Relaxed);
        let reader = self.store.recall_read(None);
        let dimension = reader.vector_space()?.map_or(0, |space| space.dimension);
        Ok(Arc::new(reader.load_vectors(dimension)?))
    }

    /// The vectors, loaded once and, after the brain changed, brought up to date: when only
    /// some rows changed (a hook captured turns, the background pass embedded a batch) the
    /// unchanged rows and their int8 codes are reused and only the changed vectors are read.
    fn matrix(&mut self) -> cairn_store::Result<Arc<VectorMatrix>> {
        let generation = self.store_generation();
        if let Some(cache) = &self.semantic.cache
            && cache.generation == generation
        {
            return Ok(cache.matrix.clone());
        }
        // Read before the vectors: a change after this point shows up as a newer version.
        let version = self.store.recall_read(None).vectors_version()?;
        let space = self.store.recall_read(None).vector_space()?;
        if let Some(mut previous) = self.semantic.cache.take()
            && previous.space == space
        {
            if version.is_some() && previous.vectors_version == version {
                previous.generation = generation;
                let matrix = previous.matrix.clone();
                self.semantic.cache = Some(previous);
                return Ok(matrix);
            }
            if let Some(mut cache) = self.refreshed(previous, generation)? {
                cache.vectors_version = version;
                let matrix = cache.matrix.clone();
                self.semantic.cache = Some(cache);
                return Ok(matrix);
            }
        }
        let matrix = self.load_matrix()?;
        let mut cache = MatrixCache::new(generation, space, matrix.clone());
        cache.vectors_version = version;
        self.semantic.cache = Some(cache);
        Ok(matrix)
    }

    /// `previous` brought up to `generation` by reading only the vectors that changed;
    /// `None` when so many changed that a full load is as cheap.
    fn refreshed(
        &self,
        mut previous: MatrixCache,
        generation: u64,
    ) -> cairn_store::Result<Option<MatrixCache>> {
        let reader = self.store.recall_read(None);
        self.semantic.vector_reads.fetch_add(1, Ordering::Relaxed);
        let current = reader.vector_fingerprints()?;
        let old = previous.matrix.clone();
        let unchanged = current.len() == old.ids.len()
            && current
                .iter()
                .zip(old.ids.iter().zip(&old.fingerprints))
                .all(|(&(id, print), (&old_id, &old_print))| id == old_id && print == old_print);
        if unchanged {
            previous.generation = generation;
            return Ok(Some(previous));
        }
        drop(old);
        if refresh_in_place(&mut previous, &current, &*reader)? {
            previous.generation = generation;
            return Ok(Some(previous));
        }
        let old = previous.matrix.clone();
        // Which old row each current row repeats (both lists ascend by id).
        let mut sources: Vec<Option<usize>> = Vec::with_capacity(current.len());
        let mut old_row = 0;
        for &(id, print) in &current {
            while old_row < old.ids.len() && old.ids[old_row] < id {
                old_row += 1;
            }
            let same = old_row < old.ids.len()
                && old.ids[old_row] == id
                && old.fingerprints[old_row] == print;
            sources.push(same.then_some(old_row));
        }
        let changed = sources.iter().filter(|source| source.is_none()).count();
        if changed > current.len() / 4 {
            return Ok(None);
        }
        let dimension = old.dimension;
        let mut matrix = VectorMatrix {
            dimension,
            ids: Vec::with_capacity(current.len()),
            data: Vec::with_capacity(current.len() * dimension),
            fingerprints: Vec::with_capacity(current.len()),
            skipped: 0,
        };
        let mut kept_sources = Vec::with_capacity(current.len());
        for (&(id, print), source) in current.iter().zip(&sources) {
            match source {
                Some(row) => matrix.data.extend_from_slice(old.row(*row)),
                None => match reader.vector_of(id, dimension)? {
                    Some(vector) => vector::extend_bf16(&mut matrix.data, &vector),
                    None => {
                        matrix.skipped += 1;
                        continue;
                    }
                },
            }
            matrix.ids.push(id);
            matrix.fingerprints.push(print);
            kept_sources.push(*source);
        }
        let mut cache = MatrixCache::new(generation, previous.space.clone(), Arc::new(matrix));
        // A long-lived process keeps what it had: its query count, and the int8 copy
        // (updated row by row). The IVF index is rebuilt in the background.
        cache.queries = previous.queries;
        if let Some(codes) = previous.quantized.get() {
            cache.quantized.set(QuantizedRows::rebuild(
                codes,
                &kept_sources,
                &cache.matrix.data,
                dimension,
            ));
        }
        Ok(Some(cache))
    }

    /// Keeps a matrix loaded alongside the model (see `semantic_candidates`).
    fn remember_matrix(&mut self, matrix: Arc<VectorMatrix>) {
        let generation = self.store_generation();
        let space = self.store.recall_read(None).vector_space().ok().flatten();
        self.semantic.cache = Some(MatrixCache::new(generation, space, matrix));
    }
}

/// Takes `write` into `cache` in place (see [`Engine::absorb_vectors`]); `false`, with `cache`
/// untouched, when it cannot.
fn absorb_write(cache: &mut MatrixCache, write: &VectorWrite) -> bool {
    if cache.vectors_version != Some(write.before) || cache.space.as_ref() != Some(&write.space) {
        return false;
    }
    let dimension = cache.matrix.dimension;
    let old_rows = cache.matrix.ids.len();
    // Where each row goes: over an existing row, or after the last one (ids ascend).
    let mut targets = Vec::with_capacity(write.rows.len());
    let mut next_new = old_rows;
    for (id, _, vector) in &write.rows {
        if vector.len() != dimension {
            return false;
        }
        match cache.matrix.ids.binary_search(id) {
            Ok(row) => targets.push(row),
            Err(at) if at == old_rows => {
                targets.push(next_new);
                next_new += 1;
            }
            Err(_) => return false,
        }
    }
    let Some(matrix) = Arc::get_mut(&mut cache.matrix) else {
        return false;
    };
    let encoded: Vec<Vec<Bf16>> = write
        .rows
        .iter()
        .map(|(_, _, vector)| vector::to_bf16(vector))
        .collect();
    for ((&row, (id, print, _)), vector) in targets.iter().zip(&write.rows).zip(&encoded) {
        if row < old_rows {
            matrix.data[row * dimension..(row + 1) * dimension].copy_from_slice(vector);
            matrix.fingerprints[row] = *print;
        } else {
            matrix.ids.push(*id);
            matrix.fingerprints.push(*print);
            matrix.data.extend_from_slice(vector);
        }
    }
    let quantizing = cache.quantized.started;
    match cache.quantized.get_mut() {
        Some(codes) if codes.rows() == old_rows => {
            for (&row, vector) in targets.iter().zip(&encoded) {
                if row < old_rows {
                    codes.set_row(row, vector);
                } else {
                    codes.push_row(vector);
                }
            }
        }
        None if !quantizing => {}
        _ => cache.quantized = Derived::default(),
    }
    cache.index = Derived::default();
    cache.vectors_version = Some(write.after);
    true
}

/// Brings `cache` up to `current` by editing its matrix (and int8 copy) in place, when the
/// only changes are rows whose vector changed and new rows after the last one (what writes,
/// the background indexer and context refreshes do) and nothing else holds the matrix.
/// `false` (and `cache` untouched) otherwise: the caller copies into a new matrix.
fn refresh_in_place(
    cache: &mut MatrixCache,
    current: &[(i64, u64)],
    reader: &dyn cairn_store::RecallRead,
) -> cairn_store::Result<bool> {
    let old_rows = cache.matrix.ids.len();
    if current.len() < old_rows
        || current[..old_rows]
            .iter()
            .zip(&cache.matrix.ids)
            .any(|(&(id, _), &old_id)| id != old_id)
    {
        return Ok(false);
    }
    let dimension = cache.matrix.dimension;
    // Read every changed vector first: a damaged one sends the caller down the copying path.
    let mut edits: Vec<(usize, u64, Vec<Bf16>)> = Vec::new();
    for (row, &(id, print)) in current.iter().enumerate() {
        if row < old_rows && cache.matrix.fingerprints[row] == print {
            continue;
        }
        match reader.vector_of(id, dimension)? {
            Some(vector) => edits.push((row, print, vector::to_bf16(&vector))),
            None => return Ok(false),
        }
    }
    let Some(matrix) = Arc::get_mut(&mut cache.matrix) else {
        return Ok(false);
    };
    for (row, print, vector) in &edits {
        if *row < old_rows {
            matrix.data[row * dimension..(row + 1) * dimension].copy_from_slice(vector);
            matrix.fingerprints[*row] = *print;
        } else {
            matrix.ids.push(current[*row].0);
            matrix.fingerprints.push(*print);
            matrix.data.extend_from_slice(vector);
        }
    }
    // The int8 copy follows row by row when it is built and not shared; otherwise it is
    // built again in the background. The IVF index is always rebuilt.
    match cache.quantized.get_mut() {
        Some(codes) if codes.rows() == old_rows => {
            for (row, _, vector) in &edits {
                if *row < old_rows {
                    codes.set_row(*row, vector);
                } else {
                    codes.push_row(vector);
                }
            }
        }
        _ => cache.quantized = Derived::default(),
    }
    cache.index = Derived::default();
    Ok(true)
}

/// The `want` nearest rows: from the IVF index when it is built and `want` is a small part of
/// the matrix, else from the int8 copy when it is built (exact similarities, see
/// `QuantizedRows`), else (or when the probed lists hold too few rows) by the exact scan.
fn nearest_rows(
    matrix: &VectorMatrix,
    index: Option<&IvfIndex>,
    quantized: Option<&QuantizedRows>,
    query: &[f32],
    want: usize,
) -> Vec<Nearest> {
    if let Some(ivf) = index
        && ivf.rows() == matrix.ids.len()
        && want.saturating_mul(8) <= ivf.rows()
    {
        let found = ivf.search(&matrix.data, query, want, 0);
        if found.len() == want {
            return found;
        }
    }
    if let Some(rows) = quantized
        && rows.rows() == matrix.ids.len()
        && want.saturating_mul(8) <= rows.rows()
    {
        return rows.search(&matrix.data, query, want);
    }
    vector::top_k(&matrix.data, query, want)
}

/// The semantic list of one recall.
pub(crate) struct SemanticCandidates {
    pub hits: Vec<Hit>,
    /// Records with a vector (to tell an incomplete index).
    pub embedded: usize,
    /// The model that embedded the query (whose similarity floor applies).
    pub model: String,
    /// The query's vector (what the window similarity compares windows with).
    pub query_vector: Vec<f32>,
}

/// The cosine similarity under which a vector-only candidate (one the lexical search did not
/// find) is not shown, per model, measured on the LoCoMo development split (docs/retrieval.md,
/// "Issue 13: a similarity floor for vector-only candidates"): the highest floor that keeps
/// hybrid recall@10, @25 and @50. Without it a small brain answers every query with every record, since any record is somebody's nearest
/// neighbour. Models not listed have no floor (their cosines are on another scale).
pub const VECTOR_ONLY_FLOORS: &[(&str, f64)] = &[(E5_SMALL_MODEL_ID, E5_SMALL_VECTOR_ONLY_FLOOR)];

/// The default model's id, as `cairn_embed::E5Embedder` reports it.
const E5_SMALL_MODEL_ID: &str = "multilingual-e5-small-q4";
const E5_SMALL_VECTOR_ONLY_FLOOR: f64 = 0.80;

/// The measured vector-only floor of `model_id`, if any ([`VECTOR_ONLY_FLOORS`]).
pub fn vector_only_floor(model_id: &str) -> Option<f64> {
    VECTOR_ONLY_FLOORS
        .iter()
        .find(|(model, _)| *model == model_id)
        .map(|(_, floor)| *floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_batches_bound_long_records_by_tokens() {
        // 100 records each at e5's 512-token limit: 16 to a call, never more tokens.
        let long = vec![512usize; 100];
        let batches = token_batches(&long, INDEX_TOKENS, INDEX_BATCH);
        assert_eq!(batches.len(), 7);
        for batch in &batches {
            let tokens: usize = long[batch.clone()].iter().sum();
            assert!(tokens <= INDEX_TOKENS, "{batch:?}: {tokens} tokens");
        }
        // Short records fill a call up to the record count instead.
        let short = vec![20usize; 100];
        let lengths: Vec<usize> = token_batches(&short, INDEX_TOKENS, INDEX_BATCH)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(lengths, [64, 36]);
        // Mixed lengths: consecutive, complete, each within the bound; one text over the
        // bound goes alone.
        let mixed = [3000, 3000, 3000, 9000, 1, 8192, 5];
        let batches = token_batches(&mixed, INDEX_TOKENS, INDEX_BATCH);
        assert_eq!(batches, [0..2, 2..3, 3..4, 4..5, 5..6, 6..7]);
        assert!(token_batches(&[], INDEX_TOKENS, INDEX_BATCH).is_empty());
    }

    fn memory(memory_type: MemoryType, title: Option<&str>, body: &str) -> Memory {
        let mut memory: Memory = serde_json::from_value(serde_json::json!({
            "id": 1, "project": null, "scope": "global", "type": memory_type.as_str(),
            "title": title, "body": body, "summary": null, "tags": [], "importance": 3,
            "confidence": "reported", "trust": "stated", "trust_zone": "private_self",
            "sensitivity": "normal", "source": null, "commit": null, "review_at": null,
            "expires_at": null, "pinned": false, "status": "active", "supersedes": null,
            "superseded_by": null, "external_id": null, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "last_accessed_at": null,
            "valid_from": "2026-01-01T00:00:00Z", "use_count": 0, "content_hash": "x",
            "retired_at": null
        }))
        .expect("a memory");
        memory.body = body.to_string();
        memory
    }

    #[test]
    fn the_embedded_text_puts_context_first_then_title_and_body() {
        let check = |m: &Memory, context: &[Memory], expect: &str| {
            assert_eq!(embedding_text(m, context, &[]), expect);
        };
        let fact = memory(MemoryType::Fact, Some("Queue"), "We use Postgres.");
        check(&fact, &[], "Queue\nWe use Postgres.");
        let turn = memory(MemoryType::Episode, None, "B: Yes, last Saturday!");
        let before = memory(MemoryType::Episode, None, "A: Did you go hiking?");
        check(
            &turn,
            std::slice::from_ref(&before),
            "A: Did you go hiking?\nB: Yes, last Saturday!",
        );
        check(&turn, &[], "B: Yes, last Saturday!");
        let answer = memory(MemoryType::Episode, None, "A: Nice!");
        assert_eq!(
            embedding_text(
                &turn,
                std::slice::from_ref(&before),
                std::slice::from_ref(&answer)
            ),
            "A: Did you go hiking?\nB: Yes, last Saturday!\nA: Nice!"
        );
    }
}
