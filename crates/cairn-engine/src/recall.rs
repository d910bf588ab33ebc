//! Recall (docs/design.md §5): candidate sources, fusion, the bounded final score, supersession followed
//! forward, the relevance floor, and an answer that says why each result is there.
//!
//! Candidate sources are independent ranked lists fed to RRF; lexical (FTS5) is the first, and a
//! semantic source adds a second list without changing anything downstream.

use crate::semantic::SemanticCandidates;
use crate::{Engine, EngineError, Result, git};
use cairn_core::memory::Memory;
use cairn_core::query;
use cairn_core::record::{MemoryType, Status, TrustZone};
use cairn_core::scope::Scope;
use cairn_core::score::{self, Hit, ScoreParts};
use cairn_core::time::{age_days, format_ts, parse_time};
use cairn_store::{LexicalQuery, NewEvent};
use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

/// Candidates kept per source relative to the requested limit (at least `MIN_CANDIDATES`).
const CANDIDATES_PER_RESULT: usize = RecallRequest::CANDIDATES_PER_RESULT;
const MIN_CANDIDATES: usize = RecallRequest::MIN_CANDIDATES;
/// The default relevance floor: a candidate weaker than this fraction of its source's best match
/// is dropped.
pub const DEFAULT_FLOOR: f64 = 0.1;
/// Which query terms a large brain searches (docs/design.md §5.1): a term found in more than `share` of
/// the records, or in more than `most_records`, costs tens of milliseconds on a large brain and
/// adds little to the ranking, so it is dropped — unless it is among the `keep_rarest` rarest
/// terms the brain holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermCutoff {
    pub share: f64,
    pub most_records: usize,
    pub keep_rarest: usize,
}

impl TermCutoff {
    /// Below this many records every term is kept: frequency says little on a small brain.
    /// Public so the benchmarks time the store calls recall makes with recall's own numbers.
    pub const MIN_RECORDS: usize = 2_000;
    /// Most terms searched for one query (the rarest are kept).
    pub const MAX_TERMS: usize = 16;

    /// Every recall but the prompt hook's.
    pub const DEFAULT: TermCutoff = TermCutoff {
        share: 0.1,
        most_records: usize::MAX,
        keep_rarest: 1,
    };
    /// The `user-prompt-submit` hook's: the same up to 20,000 records; past that, terms found in
    /// more than 2,000 records are dropped (at 100,000 records 2 % instead of 10 %), keeping the
    /// two rarest. Ranking every match of a word in 10 % of a big brain is what made the hook
    /// slow, and its 2 KB hold a few records, each holding two of the prompt's words.
    pub const HOOK: TermCutoff = TermCutoff {
        share: 0.1,
        most_records: 2_000,
        keep_rarest: 2,
    };
}

const FREQUENT_TERM_MIN_RECORDS: usize = TermCutoff::MIN_RECORDS;
const MAX_QUERY_TERMS: usize = TermCutoff::MAX_TERMS;
/// Lexical hits that lend conversation context to their neighbouring turns: the best ones
/// only (measured on LoCoMo: the same recall from the best 25, 50, 100 or all 250; a weak
/// hit's 0.3 × share rarely lifts a turn into the top, and each hit costs an index lookup).
const CONTEXT_LENDERS: usize = 50;
/// Diversity (`SemanticConfig::diversity`) reorders the first `DIVERSE_PLACES` places of an
/// answer, choosing among its best `DIVERSITY_POOL` candidates.
const DIVERSE_PLACES: usize = 10;
const DIVERSITY_POOL: usize = 50;
/// Lexical feedback (`SemanticConfig::lexical_feedback`) reads the best `FEEDBACK_DOCS`
/// lexical hits and searches their `FEEDBACK_TERMS` most telling words.
const FEEDBACK_DOCS: usize = 3;
const FEEDBACK_TERMS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Hybrid,
    Lexical,
    Semantic,
}

impl std::str::FromStr for Mode {
    type Err = EngineError;
    fn from_str(given: &str) -> Result<Mode> {
        match given.trim().to_ascii_lowercase().as_str() {
            "hybrid" => Ok(Mode::Hybrid),
            "lexical" => Ok(Mode::Lexical),
            "semantic" => Ok(Mode::Semantic),
            _ => Err(EngineError::Invalid(format!(
                "unknown mode {given:?}: expected hybrid, lexical or semantic"
            ))),
        }
    }
}

/// A recall question.
#[derive(Debug, Clone)]
pub struct RecallRequest {
    pub query: String,
    pub limit: usize,
    pub scope: Option<String>,
    pub types: Vec<MemoryType>,
    /// Show retired (superseded, archived) versions instead of following them forward.
    pub all: bool,
    /// Record the access (use count, last access, an event). Replays never touch.
    pub touch: bool,
    pub as_of: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub mode: Mode,
    /// Relevance floor relative to the top match of each source; `DEFAULT_FLOOR` when `None`.
    pub floor: Option<f64>,
    /// Search this project instead of the context's.
    pub project: Option<String>,
    /// Answer as a reader in this trust zone: only what it may see (`TrustZone::may_see`).
    /// `None` is the owner's view (`private_self`: everything).
    pub zone: Option<TrustZone>,
    /// Ask git for freshness verdicts of commit-stamped results (hooks skip it: speed).
    pub freshness: bool,
    /// The hook path (docs/design.md §1.6): answer within tens of milliseconds. Semantic candidates
    /// are used only when the embedder is already loaded in this process (a long-running
    /// server); a model is never loaded for a fast recall, which then runs lexical-only and
    /// says `degraded: lexical-only`. See docs/retrieval.md, "The hook path".
    pub fast: bool,
    /// Which query terms are searched on a large brain.
    pub term_cutoff: TermCutoff,
}

impl RecallRequest {
    /// Candidates kept per source relative to the requested limit...
    pub const CANDIDATES_PER_RESULT: usize = 5;
    /// ...and at least this many (public for the benchmarks, like `TermCutoff`'s numbers).
    pub const MIN_CANDIDATES: usize = 50;

    pub fn new(query: impl Into<String>) -> RecallRequest {
        RecallRequest {
            query: query.into(),
            limit: 10,
            scope: None,
            types: Vec::new(),
            all: false,
            touch: true,
            as_of: None,
            since: None,
            until: None,
            mode: Mode::Hybrid,
            floor: None,
            project: None,
            zone: None,
            freshness: true,
            fast: false,
            term_cutoff: TermCutoff::DEFAULT,
        }
    }
}

/// Why a result is where it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Why {
    pub lexical_rank: Option<u32>,
    pub vector_rank: Option<u32>,
    pub relevance: f64,
    pub recency: f64,
    pub stakes: f64,
    /// The speaker of this turn, when the query names them (relevance includes the boost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The record is dated within a period the query names (relevance includes the boost).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub named_date: bool,
}

/// One answer (the JSON of docs/cli.md).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallResult {
    pub id: i64,
    pub external_id: Option<String>,
    #[serde(rename = "type")]
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub body: String,
    pub scope: String,
    pub project: Option<String>,
    pub status: Status,
    pub trust: cairn_core::record::Trust,
    pub created_at: String,
    pub score: f64,
    pub score_norm: f64,
    pub why: Why,
    pub freshness: Option<String>,
    pub review_due: bool,
    pub superseded_from: Option<i64>,
    /// For a fact extracted from a session, the turns it was extracted from (its
    /// `derived_from` edges, lowest id first): the evidence behind it, one `show` away.
    /// Empty (and left out of the JSON) for every other record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_from: Vec<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallAnswer {
    pub query: String,
    pub degraded: Option<String>,
    pub results: Vec<RecallResult>,
    /// Plain words when nothing was found, or when the query had nothing searchable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// How many of the first places of the two lists [`agreement`] compares.
const AGREEMENT_PLACES: usize = 10;

/// The share of the lexical list's first places that the semantic list's first places also
/// hold (0 when the semantic list is empty; 1 when they hold the same records).
fn agreement(lexical: &[Hit], semantic: &[Hit]) -> f64 {
    let places = lexical.len().min(AGREEMENT_PLACES);
    if places == 0 {
        return 0.0;
    }
    let top: std::collections::HashSet<i64> = semantic
        .iter()
        .take(AGREEMENT_PLACES)
        .map(|h| h.id)
        .collect();
    let shared = lexical
        .iter()
        .take(places)
        .filter(|h| top.contains(&h.id))
        .count();
    shared as f64 / places as f64
}

/// The records lexical feedback reads: the best `FEEDBACK_DOCS` of a list, each with its
/// share of the list's best strength (none when the best is not positive).
fn feedback_docs(hits: &[Hit]) -> Vec<(i64, f64)> {
    match hits.first().map(|hit| hit.strength) {
        Some(top) if top > 0.0 => hits
            .iter()
            .take(FEEDBACK_DOCS)
            .map(|hit| (hit.id, hit.strength / top))
            .collect(),
        _ => Vec::new(),
    }
}

/// The median strength of a list (`None` when it is empty).
fn median_strength(hits: &[Hit]) -> Option<f64> {
    let mut strengths: Vec<f64> = hits.iter().map(|h| h.strength).collect();
    if strengths.is_empty() {
        return None;
    }
    strengths.sort_by(f64::total_cmp);
    Some(strengths[strengths.len() / 2])
}

/// The semantic leg's confidence for one query (`SemanticConfig::confidence`): how far its
/// best cosine stands above `reference`, in units of `span`, within 0..1. No reference (a
/// model without a measured floor) or no candidate: 1, the fixed weight.
fn semantic_confidence(semantic: &[Hit], reference: Option<f64>, span: f64) -> f64 {
    let best = semantic.iter().map(|h| h.strength).fold(f64::NAN, f64::max);
    match reference {
        Some(reference) if best.is_finite() && span > 0.0 => {
            ((best - reference) / span).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// Two-level retrieval (`SemanticConfig::window_weight`) centres windows on this many of the
/// best fused candidates.
const WINDOW_CENTRES: usize = 50;

/// Window similarity (`SemanticConfig::window_similarity`) rescores this many of the best
/// semantic candidates.
const WINDOW_SIMILARITY_DEPTH: usize = 50;

/// Names of the candidate sources, in the order their lists are fused.
const LEXICAL: usize = 0;
const SEMANTIC: usize = 1;

impl Engine {
    pub fn recall(&mut self, request: &RecallRequest) -> Result<RecallAnswer> {
        self.recall_embedded(request, None)
    }

    /// [`Engine::recall`] with the query's vector already made by this engine's embedder (a
    /// service embeds it before taking its one engine with the vectors, so concurrent recalls
    /// embed side by side instead of one at a time). Lexical recalls ignore it.
    pub fn recall_with_query_vector(
        &mut self,
        request: &RecallRequest,
        query_vector: Vec<f32>,
    ) -> Result<RecallAnswer> {
        self.recall_embedded(request, Some(query_vector))
    }

    fn recall_embedded(
        &mut self,
        request: &RecallRequest,
        embedded: Option<Vec<f32>>,
    ) -> Result<RecallAnswer> {
        let now = self.now();
        let as_of = request
            .as_of
            .as_deref()
            .map(|t| parse_time(t, now))
            .transpose()?;
        let since = request
            .since
            .as_deref()
            .map(|t| parse_time(t, now).map(format_ts))
            .transpose()?;
        let until = request
            .until
            .as_deref()
            .map(|t| parse_time(t, now).map(format_ts))
            .transpose()?;
        let scope_chain = request
            .scope
            .as_deref()
            .map(Scope::parse)
            .transpose()?
            .map(|s| s.chain());
        let projects = match &request.project {
            Some(project) => vec![Some(project.clone()), None],
            None => self.visible_projects(),
        };
        let limit = request.limit.clamp(1, 1000);
        let mut answer = RecallAnswer {
            query: request.query.clone(),
            degraded: None,
            results: Vec::new(),
            note: None,
            warnings: Vec::new(),
        };
        let as_of_text = as_of.map(format_ts);
        let terms = self.searchable_terms(&request.query, request.term_cutoff)?;
        // Whether the query has anything to search lexically (the backend builds its own
        // query from the terms: no backend syntax here).
        let searchable = terms.iter().any(|term| !term.is_empty());
        let candidate_limit = (limit * CANDIDATES_PER_RESULT).max(MIN_CANDIDATES);
        let filter = LexicalQuery {
            match_expression: "",
            projects: &projects,
            scopes: scope_chain.as_deref(),
            types: (!request.types.is_empty()).then_some(request.types.as_slice()),
            include_archived: request.all,
            as_of: as_of_text.as_deref(),
            since: since.as_deref(),
            until: until.as_deref(),
            visible_to: request.zone,
            limit: candidate_limit,
        };
        let floor = request.floor.unwrap_or(DEFAULT_FLOOR);
        // With the model already loaded, the query is embedded on a second thread while
        // SQLite runs the lexical search (two cores: the two slowest steps overlap).
        let resident = if request.mode == Mode::Lexical || embedded.is_some() {
            None
        } else {
            self.resident_embedder()
        };
        let embedded = embedded.filter(|_| request.mode != Mode::Lexical);
        let (lexical, query_vector) = std::thread::scope(|scope| {
            let embedding = resident.map(|embedder| {
                let text = request.query.as_str();
                scope.spawn(move || embedder.embed_query(text))
            });
            let lexical: Result<Vec<Hit>> = match (searchable, request.mode) {
                (true, Mode::Lexical | Mode::Hybrid) => {
                    self.lexical_search(&terms, &filter).map(|hits| {
                        hits.iter()
                            .map(|h| Hit {
                                id: h.id,
                                strength: h.strength,
                            })
                            .collect()
                    })
                }
                _ => Ok(Vec::new()),
            };
            let query_vector = embedding.map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(cairn_embed::EmbedError::Inference {
                        model: "embedder".into(),
                        reason: "panicked while embedding the query".into(),
                    })
                })
            });
            (lexical, query_vector.or(embedded.map(Ok)))
        });
        let lexical = lexical?;
        let config = self.semantic_config().clone();
        let feedback = config.lexical_feedback > 0.0 && !request.fast;
        let feedback_from_fused =
            feedback && config.feedback_source == crate::semantic::FeedbackSource::Fused;
        let lexical = if feedback && !feedback_from_fused {
            self.with_feedback(lexical, &terms, &filter, config.lexical_feedback)?
        } else {
            lexical
        };
        let lexical = self.with_conversation_context(lexical, &filter, &config)?;
        let lexical = score::apply_floor(&lexical, floor);
        let mut semantic: Vec<Hit> = Vec::new();
        let mut semantic_model: Option<String> = None;
        let mut semantic_query: Vec<f32> = Vec::new();
        if request.mode != Mode::Lexical {
            match self.semantic_list(request, &filter, candidate_limit, query_vector) {
                Ok(Some(candidates)) => {
                    let indexed = self.indexed_count()?;
                    if candidates.embedded < indexed {
                        answer.warnings.push(format!(
                            "the semantic index is incomplete ({} of {indexed} records embedded): results are complete lexically; `cairn reindex` embeds the rest",
                            candidates.embedded
                        ));
                    }
                    semantic = candidates.hits;
                    semantic_model = Some(candidates.model);
                    semantic_query = candidates.query_vector;
                }
                Ok(None) => answer.degraded = Some("lexical-only".to_string()),
                Err(reason) => {
                    answer.degraded = Some("lexical-only".to_string());
                    answer.warnings.push(reason);
                }
            }
        }
        if answer.degraded.is_some() && request.mode == Mode::Semantic && semantic.is_empty() {
            // Semantic asked for but unavailable: answer lexically rather than with nothing.
            if searchable {
                let mut lexical_answer = self.recall(&RecallRequest {
                    mode: Mode::Lexical,
                    ..request.clone()
                })?;
                lexical_answer.degraded = answer.degraded.clone();
                lexical_answer
                    .warnings
                    .splice(0..0, answer.warnings.clone());
                return Ok(lexical_answer);
            }
        }
        if !searchable && semantic.is_empty() {
            answer.note = Some(query::no_terms_reason(&request.query));
            return Ok(answer);
        }
        // A vector-only candidate (no lexical match) enters only near the top of the semantic
        // list; the bound is measured on the evaluation set (docs/retrieval.md).
        // It also needs a similarity of at least the model's measured floor: on a small brain
        // every record is among the nearest, related or not.
        let floor_of_vector_only = config.vector_only_floor.or_else(|| {
            semantic_model
                .as_deref()
                .and_then(crate::semantic::vector_only_floor)
        });
        // The semantic leg's confidence for this query, read before the vector-only filter
        // (from every candidate it found).
        let confidence = if config.confidence > 0.0 {
            let reference = match config.confidence_reference {
                crate::semantic::ConfidenceReference::Floor => floor_of_vector_only,
                crate::semantic::ConfidenceReference::Median => median_strength(&semantic),
            };
            semantic_confidence(&semantic, reference, config.confidence)
        } else {
            1.0
        };
        if request.mode == Mode::Hybrid
            && (config.vector_only_rank != usize::MAX || floor_of_vector_only.is_some())
        {
            let matched: std::collections::HashSet<i64> = lexical.iter().map(|h| h.id).collect();
            let floor = floor_of_vector_only.unwrap_or(f64::NEG_INFINITY);
            semantic = semantic
                .into_iter()
                .enumerate()
                .filter(|(rank, hit)| {
                    matched.contains(&hit.id)
                        || (*rank < config.vector_only_rank && hit.strength >= floor)
                })
                .map(|(_, hit)| hit)
                .collect();
        }
        let semantic_weight = if config.agreement > 0.0 && !lexical.is_empty() {
            config.semantic_weight
                * (1.0 - config.agreement * (1.0 - agreement(&lexical, &semantic)))
        } else {
            config.semantic_weight
        };
        // Confidence moves the weight only when the lexical leg is there to take over.
        let semantic_weight = if lexical.is_empty() {
            semantic_weight
        } else {
            semantic_weight * confidence
        };
        let semantic = if config.window_similarity > 0 && !semantic.is_empty() {
            self.with_window_similarity(semantic, &semantic_query, &filter, &config)?
        } else {
            semantic
        };
        let mut weights = vec![config.lexical_weight, semantic_weight];
        let mut lists = vec![lexical, semantic];
        let mut fused = score::rrf_weighted_k(&lists, &weights, config.rrf_k);
        // Feedback from the fused list: the words of the candidates both legs put first.
        if feedback_from_fused && !lists[LEXICAL].is_empty() {
            let docs: Vec<(i64, f64)> = match fused.first().map(|f| f.fused) {
                Some(top) if top > 0.0 => fused
                    .iter()
                    .take(FEEDBACK_DOCS)
                    .map(|f| (f.id, f.fused / top))
                    .collect(),
                _ => Vec::new(),
            };
            let lexical = std::mem::take(&mut lists[LEXICAL]);
            lists[LEXICAL] =
                self.with_feedback_from(lexical, &docs, &terms, &filter, config.lexical_feedback)?;
            fused = score::rrf_weighted_k(&lists, &weights, config.rrf_k);
        }
        if request.mode == Mode::Hybrid
            && config.window_weight > 0.0
            && semantic_model.is_some()
            && !fused.is_empty()
        {
            let windows = self.window_list(&fused, &filter, &config, candidate_limit)?;
            lists.push(windows);
            weights.push(config.window_weight);
            fused = score::rrf_weighted_k(&lists, &weights, config.rrf_k);
        }
        // The knowledge graph as a third source: records mentioning the question's entities
        // (and, when asked, their neighbours and the best candidates' bridge entities).
        if request.mode == Mode::Hybrid && config.graph_weight > 0.0 && !fused.is_empty() {
            let at = as_of_text.clone().unwrap_or_else(|| format_ts(now));
            let sources = crate::graph::recall::GraphSources {
                bridge: config.graph_bridge,
                neighbours: config.graph_neighbours,
            };
            let graph = self.graph_list(
                &request.query,
                &fused,
                &filter,
                &at,
                sources,
                candidate_limit,
            )?;
            if !graph.is_empty() {
                lists.push(graph);
                weights.push(config.graph_weight);
                fused = score::rrf_weighted_k(&lists, &weights, config.rrf_k);
            }
        }
        if fused.is_empty() {
            answer.note = Some(format!("nothing found for {:?}", request.query));
            return Ok(answer);
        }
        let reference = as_of.unwrap_or(now);
        let source = self.store.recall_read(self.lexical.as_deref());
        let memories: HashMap<i64, Memory> = source
            .get_many(&fused.iter().map(|f| f.id).collect::<Vec<_>>())?
            .into_iter()
            .map(|m| (m.id, m))
            .collect();
        // Every successor of a retired match, read in one call, to answer each match with the
        // head of its chain.
        let retired: Vec<i64> = memories
            .values()
            .filter(|m| m.superseded_by.is_some())
            .map(|m| m.id)
            .collect();
        let successors: HashMap<i64, Memory> = if request.all || retired.is_empty() {
            HashMap::new()
        } else {
            source
                .successors(&retired)?
                .into_iter()
                .map(|m| (m.id, m))
                .collect()
        };
        // BM25 strengths are on a ratio scale, cosine similarities are not (score::relevances).
        let relevances = score::relevances(&fused, &[true, false, false]);
        // Each candidate answers as the current head of its supersession chain (unless --all);
        // a head reached twice keeps its better placement.
        let mut by_head: BTreeMap<i64, RecallResult> = BTreeMap::new();
        // Commit stamps of the records shown, for freshness verdicts after the cut.
        let mut commits: HashMap<i64, (String, git::StampedIn)> = HashMap::new();
        let reference_text = format_ts(reference);
        let query_tokens = cairn_core::text::word_tokens(&request.query);
        let periods = if config.date_boost == 1.0 {
            Vec::new()
        } else {
            query::named_periods(&query_tokens)
        };
        for (candidate, relevance) in fused.iter().zip(relevances) {
            let Some(matched) = memories.get(&candidate.id) else {
                continue;
            };
            let (shown, superseded_from) = if request.all {
                (matched, None)
            } else {
                match current_head(matched, &successors, as_of_text.as_deref()) {
                    Some(head) if head.id != matched.id => (head, Some(matched.id)),
                    Some(head) => (head, None),
                    None => continue,
                }
            };
            // A successor the reader may not see is not shown in its place (nor is the
            // outdated record it replaced).
            if let Some(zone) = request.zone
                && !zone.may_see(shown.trust_zone, shown.sensitivity)
            {
                continue;
            }
            let tier = shown.memory_type.tier();
            let created = parse_time(&shown.valid_from, now).unwrap_or(reference);
            // The query names who said this turn (see `SemanticConfig::speaker_boost`).
            let speaker = (shown.memory_type == MemoryType::Episode && config.speaker_boost != 1.0)
                .then(|| query::speaker_of(&shown.body))
                .flatten()
                .filter(|speaker| query::names_speaker(&query_tokens, speaker))
                .map(str::to_string);
            // The record is dated in a period the query names ("in June", "on 29 Dec 2023").
            let named_date = periods
                .iter()
                .any(|period| period.contains(created.year(), created.month(), created.day()));
            let speaker_factor = if speaker.is_some() {
                config.speaker_boost
            } else {
                1.0
            };
            let date_factor = if named_date { config.date_boost } else { 1.0 };
            let parts = ScoreParts {
                relevance: relevance * speaker_factor * date_factor,
                recency: if shown.pinned {
                    1.0
                } else {
                    score::recency(tier, age_days(created, reference))
                },
                stakes: score::stakes(tier, shown.importance, shown.use_count, shown.confidence),
            };
            let result = RecallResult {
                id: shown.id,
                external_id: shown.external_id.clone(),
                memory_type: shown.memory_type,
                // Filled in for the results that make the cut (below): most candidates do not.
                title: None,
                body: String::new(),
                scope: shown.scope.clone(),
                project: shown.project.clone(),
                status: shown.status,
                trust: shown.trust,
                created_at: shown.created_at.clone(),
                score: parts.score(),
                score_norm: 0.0,
                why: Why {
                    lexical_rank: candidate.ranks[LEXICAL],
                    vector_rank: candidate.ranks[SEMANTIC],
                    relevance: round(parts.relevance),
                    recency: round(parts.recency),
                    stakes: round(parts.stakes),
                    speaker,
                    named_date,
                },
                freshness: None,
                review_due: shown
                    .review_at
                    .as_deref()
                    .is_some_and(|at| at <= reference_text.as_str()),
                superseded_from,
                derived_from: Vec::new(),
            };
            // A verdict is about this repository's history: a record of another project has
            // none, and a personal one only when this tree holds its commit (git::StampedIn).
            let stamped_in = match shown.project.as_deref() {
                None => Some(git::StampedIn::Personal),
                Some(project) if project == self.context.project => {
                    Some(git::StampedIn::ThisProject)
                }
                Some(_) => None,
            };
            if let (Some(commit), Some(stamped_in)) = (&shown.commit, stamped_in) {
                commits.insert(shown.id, (commit.clone(), stamped_in));
            }
            match by_head.get(&shown.id) {
                Some(existing) if existing.score >= result.score => {}
                _ => {
                    by_head.insert(shown.id, result);
                }
            }
        }
        let mut results: Vec<RecallResult> = by_head.into_values().collect();
        results.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        if semantic_model.is_some() && config.diversity > 0.0 {
            self.diversify(&mut results, config.diversity, limit.min(DIVERSE_PLACES));
        }
        results.truncate(limit);
        for result in &mut results {
            if let Some(shown) = memories
                .get(&result.id)
                .or_else(|| successors.get(&result.id))
            {
                result.title = shown.title.clone();
                result.body = shown.body.clone();
            }
        }
        let top = results.first().map(|r| r.score).unwrap_or(1.0);
        let mut freshness_cache: HashMap<(String, git::StampedIn), Option<String>> = HashMap::new();
        // A fact answers with the turns it came from (docs/retrieval.md, issue 18: on
        // LoCoMo, counting a fact's turns at its rank lifts hybrid recall@10 0.762 → 0.785).
        let facts: Vec<i64> = results
            .iter()
            .filter(|r| r.memory_type != MemoryType::Episode)
            .map(|r| r.id)
            .collect();
        let mut derived = if facts.is_empty() {
            HashMap::new()
        } else {
            source.derived_from(&facts)?
        };
        for result in &mut results {
            result.score_norm = round(result.score / top);
            result.score = round(result.score);
            if let Some(turns) = derived.remove(&result.id) {
                result.derived_from = turns;
            }
        }
        // Freshness verdicts for records stamped with a commit (one git question per commit).
        let ids: Vec<i64> = results.iter().map(|r| r.id).collect();
        if request.freshness {
            for result in &mut results {
                if let Some((commit, stamped_in)) = commits.get(&result.id) {
                    result.freshness = freshness_cache
                        .entry((commit.clone(), *stamped_in))
                        .or_insert_with(|| self.freshness(commit, *stamped_in))
                        .clone();
                }
            }
        }
        if request.touch
            && as_of.is_none()
            && !self.context.read_only
            // Nothing is written to a PostgreSQL brain yet (`Engine::open_postgres`).
            && !self.is_postgres()
            && !results.is_empty()
            && let Err(error) = self.log_recall(&request.query, &ids, now)
        {
            answer.warnings.push(format!(
                "the access was not recorded ({error}); results are complete"
            ));
        }
        answer.results = results;
        Ok(answer)
    }

    /// Maximal marginal relevance in the first `places` of `results` (sorted by score), among
    /// the best `DIVERSITY_POOL`, with the vectors the semantic search just used: a question
    /// whose evidence lies in several turns gets one turn per hop instead of near-copies of
    /// one (`cairn_core::score::diversify`). Scores are unchanged; only the order moves.
    fn diversify(&self, results: &mut [RecallResult], lambda: f64, places: usize) {
        let Some(matrix) = self.loaded_vectors() else {
            return;
        };
        let pool = results.len().min(DIVERSITY_POOL);
        let owned: Vec<Option<Vec<f32>>> = results[..pool]
            .iter()
            .map(|result| matrix.vector(result.id))
            .collect();
        let vectors: Vec<Option<&[f32]>> = owned.iter().map(Option::as_deref).collect();
        let scores: Vec<f64> = results[..pool].iter().map(|r| r.score).collect();
        let order = score::diversify(&scores, &vectors, lambda, places);
        let head: Vec<RecallResult> = order.iter().map(|&i| results[i].clone()).collect();
        for (slot, result) in head.into_iter().enumerate() {
            results[slot] = result;
        }
    }

    /// The semantic candidate list, `Ok(None)` when no embedder is configured (or, on the fast
    /// path, none is loaded), `Err(why)` when one is configured but unusable.
    fn semantic_list(
        &mut self,
        request: &RecallRequest,
        filter: &LexicalQuery<'_>,
        limit: usize,
        query_vector: Option<std::result::Result<Vec<f32>, cairn_embed::EmbedError>>,
    ) -> std::result::Result<Option<SemanticCandidates>, String> {
        if request.fast && !self.embedder_is_loaded() {
            return Ok(None);
        }
        if !self.embedder_is_configured() {
            return Ok(None);
        }
        let query_vector = query_vector
            .transpose()
            .map_err(|error| error.to_string())?;
        self.semantic_candidates(&request.query, filter, limit, query_vector)
            .map(Some)
    }

    /// Two-level retrieval (`SemanticConfig::window_weight`): the best `WINDOW_CENTRES` fused
    /// candidates each centre a window of up to `window_turns` episodes on either side (the
    /// same conversation: each step a neighbour as `episode_neighbours` finds it; a record
    /// that is not an episode is a window of one); a window scores the sum of its records'
    /// fused scores. The list holds the records of the windows, best window first, each
    /// window's records by their own fused score (then nearest the centre); a record is
    /// listed once, where its best window puts it. Records that no turn-level list found
    /// enter when they pass the query's filters. Strengths are the window scores.
    fn window_list(
        &self,
        fused: &[score::Fused],
        filter: &LexicalQuery<'_>,
        config: &crate::SemanticConfig,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let own: HashMap<i64, f64> = fused.iter().map(|f| (f.id, f.fused)).collect();
        let centres: Vec<i64> = fused.iter().take(WINDOW_CENTRES).map(|f| f.id).collect();
        let windows =
            self.episode_windows(&centres, config.window_turns, config.context_window_secs)?;
        let reader = self.store.recall_read(self.lexical.as_deref());
        let mut ranked: Vec<(f64, usize)> = windows
            .iter()
            .enumerate()
            .map(|(n, window)| {
                let sum: f64 = window
                    .iter()
                    .map(|id| own.get(id).copied().unwrap_or(0.0))
                    .sum();
                (sum, n)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let added: Vec<i64> = windows
            .iter()
            .flatten()
            .filter(|id| !own.contains_key(id))
            .copied()
            .collect();
        let allowed: std::collections::HashSet<i64> =
            reader.filter_ids(&added, filter)?.into_iter().collect();
        let mut seen: std::collections::HashSet<i64> = std::collections::HashSet::new();
        let mut out: Vec<Hit> = Vec::new();
        for (sum, n) in ranked {
            let mut members: Vec<(usize, i64)> = windows[n]
                .iter()
                .enumerate()
                .filter(|(_, id)| own.contains_key(id) || allowed.contains(id))
                .map(|(distance, &id)| (distance, id))
                .collect();
            members.sort_by(|a, b| {
                let (fa, fb) = (own.get(&a.1).unwrap_or(&0.0), own.get(&b.1).unwrap_or(&0.0));
                fb.total_cmp(fa).then(a.0.cmp(&b.0))
            });
            for (_, id) in members {
                if seen.insert(id) {
                    out.push(Hit { id, strength: sum });
                }
            }
            if out.len() >= limit {
                break;
            }
        }
        out.truncate(limit);
        Ok(out)
    }

    /// The conversation window of each of `centres`, nearest first: the centre, then up to
    /// `turns` episodes on each side, each step a neighbour as `episode_neighbours` finds it
    /// (same project and scope, within `window_secs`); a record that is not an episode is a
    /// window of one.
    fn episode_windows(
        &self,
        centres: &[i64],
        turns: usize,
        window_secs: i64,
    ) -> Result<Vec<Vec<i64>>> {
        let reader = self.store.recall_read(self.lexical.as_deref());
        let mut links: HashMap<i64, (Option<i64>, Option<i64>)> = HashMap::new();
        let mut windows: Vec<Vec<i64>> = centres.iter().map(|&id| vec![id]).collect();
        let mut fronts: Vec<(Option<i64>, Option<i64>)> =
            centres.iter().map(|&id| (Some(id), Some(id))).collect();
        for _ in 0..turns {
            let mut unknown: Vec<i64> = fronts
                .iter()
                .flat_map(|(back, ahead)| [*back, *ahead])
                .flatten()
                .filter(|id| !links.contains_key(id))
                .collect();
            unknown.sort_unstable();
            unknown.dedup();
            if !unknown.is_empty() {
                for id in &unknown {
                    links.insert(*id, (None, None));
                }
                for (id, previous, next) in reader.episode_neighbours(&unknown, window_secs)? {
                    links.insert(id, (previous, next));
                }
            }
            for (window, (back, ahead)) in windows.iter_mut().zip(fronts.iter_mut()) {
                *back = back.and_then(|id| links.get(&id).and_then(|l| l.0));
                *ahead = ahead.and_then(|id| links.get(&id).and_then(|l| l.1));
                window.extend(back.iter().chain(ahead.iter()).copied());
            }
        }
        Ok(windows)
    }

    /// Window similarity (`SemanticConfig::window_similarity`): each of the best
    /// `WINDOW_SIMILARITY_DEPTH` semantic hits scores the larger of its own cosine and the
    /// cosine between the query and its window's mean vector (its own vector and those of
    /// the episodes around it that pass the query's filters), and the list is re-sorted.
    /// A record without neighbours keeps its cosine; strengths only rise, so the list stays
    /// sorted below the rescored part.
    fn with_window_similarity(
        &self,
        hits: Vec<Hit>,
        query_vector: &[f32],
        filter: &LexicalQuery<'_>,
        config: &crate::SemanticConfig,
    ) -> Result<Vec<Hit>> {
        let Some(matrix) = self.loaded_vectors() else {
            return Ok(hits);
        };
        let depth = hits.len().min(WINDOW_SIMILARITY_DEPTH);
        if depth == 0 || matrix.dimension != query_vector.len() {
            return Ok(hits);
        }
        let centres: Vec<i64> = hits[..depth].iter().map(|h| h.id).collect();
        let windows = self.episode_windows(
            &centres,
            config.window_similarity,
            config.context_window_secs,
        )?;
        let neighbours: Vec<i64> = windows
            .iter()
            .flat_map(|w| w[1..].iter().copied())
            .collect();
        let allowed: std::collections::HashSet<i64> = self
            .store
            .recall_read(self.lexical.as_deref())
            .filter_ids(&neighbours, filter)?
            .into_iter()
            .collect();
        let mut rescored: Vec<(usize, Hit)> = hits
            .iter()
            .take(depth)
            .zip(&windows)
            .enumerate()
            .map(|(place, (hit, window))| {
                let owned: Vec<Vec<f32>> = std::iter::once(hit.id)
                    .chain(
                        window[1..]
                            .iter()
                            .copied()
                            .filter(|id| allowed.contains(id)),
                    )
                    .filter_map(|id| matrix.vector(id))
                    .collect();
                let members: Vec<&[f32]> = owned.iter().map(Vec::as_slice).collect();
                let strength = match score::mean_cosine(query_vector, &members) {
                    Some(window_cosine) if members.len() > 1 => hit.strength.max(window_cosine),
                    _ => hit.strength,
                };
                (
                    place,
                    Hit {
                        id: hit.id,
                        strength,
                    },
                )
            })
            .collect();
        rescored.sort_by(|a, b| b.1.strength.total_cmp(&a.1.strength).then(a.0.cmp(&b.0)));
        Ok(rescored
            .into_iter()
            .map(|(_, hit)| hit)
            .chain(hits[depth..].iter().cloned())
            .collect())
    }

    /// Conversation context on the lexical side: each `episode` among the best
    /// `CONTEXT_LENDERS` lexical hits lends
    /// `config.lexical_context_before` × its BM25 to the turn after it and
    /// `config.lexical_context_after` × its BM25 to the turn before it (same project and scope,
    /// within `context_window_secs`), so an answer like "Yes, last Saturday!" is found by the
    /// words of the question it answers. A turn that gains a score this way enters the list
    /// when it passes the same filters. Other records are unchanged; the list stays in BM25
    /// units (a ratio scale) and keeps its length.
    fn with_conversation_context(
        &self,
        hits: Vec<Hit>,
        filter: &LexicalQuery<'_>,
        config: &crate::SemanticConfig,
    ) -> Result<Vec<Hit>> {
        let (before, after) = (config.lexical_context_before, config.lexical_context_after);
        if hits.is_empty() || (before <= 0.0 && after <= 0.0) {
            return Ok(hits);
        }
        let reader = self.store.recall_read(self.lexical.as_deref());
        let ids: Vec<i64> = hits.iter().take(CONTEXT_LENDERS).map(|h| h.id).collect();
        let neighbours = reader.episode_neighbours(&ids, config.context_window_secs)?;
        if neighbours.is_empty() {
            return Ok(hits);
        }
        let strength: HashMap<i64, f64> = hits.iter().map(|h| (h.id, h.strength)).collect();
        let mut scored = strength.clone();
        for (id, previous, next) in neighbours {
            let own = strength[&id];
            if let Some(next) = next {
                *scored.entry(next).or_default() += before * own;
            }
            if let Some(previous) = previous {
                *scored.entry(previous).or_default() += after * own;
            }
        }
        let added: Vec<i64> = scored
            .keys()
            .filter(|id| !strength.contains_key(id))
            .copied()
            .collect();
        let allowed: std::collections::HashSet<i64> =
            reader.filter_ids(&added, filter)?.into_iter().collect();
        let mut out: Vec<Hit> = scored
            .into_iter()
            .filter(|(id, _)| strength.contains_key(id) || allowed.contains(id))
            .map(|(id, strength)| Hit { id, strength })
            .collect();
        out.sort_by(|a, b| b.strength.total_cmp(&a.strength).then(a.id.cmp(&b.id)));
        out.truncate(hits.len().max(filter.limit));
        Ok(out)
    }

    /// Pseudo-relevance feedback on the lexical side (RM3-like, without an LLM): the words of the
    /// best `FEEDBACK_DOCS` hits, each weighted by its hit's share of the best BM25 and by its
    /// inverse document frequency, are ranked; the best `FEEDBACK_TERMS` that are not query
    /// words and occur in at least two records are searched, and every record adds `weight` ×
    /// that BM25 to its own. The list stays in BM25 units and keeps the filter's limit.
    fn with_feedback(
        &self,
        hits: Vec<Hit>,
        terms: &[String],
        filter: &LexicalQuery<'_>,
        weight: f64,
    ) -> Result<Vec<Hit>> {
        let docs = feedback_docs(&hits);
        self.with_feedback_from(hits, &docs, terms, filter, weight)
    }

    /// Lexical feedback whose words come from `docs` (record, share of the best source
    /// score), read from the best lexical hits ([`feedback_docs`]) or the best fused
    /// candidates (`FeedbackSource::Fused`).
    fn with_feedback_from(
        &self,
        hits: Vec<Hit>,
        docs: &[(i64, f64)],
        terms: &[String],
        filter: &LexicalQuery<'_>,
        weight: f64,
    ) -> Result<Vec<Hit>> {
        if docs.is_empty() {
            return Ok(hits);
        }
        let records = self.indexed_count()?.max(1);
        let reader = self.store.recall_read(self.lexical.as_deref());
        let share: HashMap<i64, f64> = docs.iter().copied().collect();
        let ids: Vec<i64> = share.keys().copied().collect();
        let mut weights: BTreeMap<String, f64> = BTreeMap::new();
        for memory in reader.get_many(&ids)? {
            let text = match &memory.title {
                Some(title) => format!("{title} {}", memory.body),
                None => memory.body.clone(),
            };
            for term in query::query_terms(&text) {
                if term.chars().count() < 3
                    || term.chars().all(|c| c.is_ascii_digit())
                    || terms.contains(&term)
                {
                    continue;
                }
                *weights.entry(term).or_default() += share[&memory.id];
            }
        }
        let words: Vec<String> = weights.keys().cloned().collect();
        let counts = reader.term_counts(&words, records)?;
        let mut ranked: Vec<(f64, String)> = Vec::new();
        for ((term, weight), found) in weights.into_iter().zip(counts) {
            // A word of one record only finds that record again.
            if found >= 2 {
                ranked.push((weight * (records as f64 / found as f64).ln(), term));
            }
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        ranked.truncate(FEEDBACK_TERMS);
        let expansion: Vec<String> = ranked.into_iter().map(|(_, term)| term).collect();
        if expansion.is_empty() {
            return Ok(hits);
        }
        let expanded = self.lexical_search(&expansion, filter)?;
        let mut scored: HashMap<i64, f64> = hits.iter().map(|h| (h.id, h.strength)).collect();
        for hit in expanded {
            *scored.entry(hit.id).or_default() += weight * hit.strength;
        }
        let mut out: Vec<Hit> = scored
            .into_iter()
            .map(|(id, strength)| Hit { id, strength })
            .collect();
        out.sort_by(|a, b| b.strength.total_cmp(&a.strength).then(a.id.cmp(&b.id)));
        out.truncate(hits.len().max(filter.limit));
        Ok(out)
    }

    /// Query terms worth searching: stop words dropped (by `query_terms`), very frequent terms
    /// dropped on a large brain (`cutoff`), at most `MAX_QUERY_TERMS`, rarest first. Public so
    /// the benchmark times the selection recall makes instead of restating it.
    pub fn searchable_terms(&self, text: &str, cutoff: TermCutoff) -> Result<Vec<String>> {
        let terms = query::query_terms(text);
        let records = self.indexed_count()?;
        let frequent_matter = records >= FREQUENT_TERM_MIN_RECORDS && terms.len() > 1;
        if !frequent_matter && terms.len() <= MAX_QUERY_TERMS {
            return Ok(terms);
        }
        // Count each term's records (bounded): terms found nowhere add nothing, very frequent
        // ones cost much and rank little, and past MAX_QUERY_TERMS the rarest terms are kept.
        let share_cap = if frequent_matter {
            (((records as f64) * cutoff.share) as usize).max(1)
        } else {
            records.max(1)
        };
        let cap = if frequent_matter {
            share_cap.min(cutoff.most_records.max(1))
        } else {
            share_cap
        };
        let source = self.store.recall_read(self.lexical.as_deref());
        // Every term counted in one call (one round trip on a networked backend).
        let mut counted: Vec<(usize, String)> = source
            .term_counts(&terms, cap)?
            .into_iter()
            .zip(terms)
            .collect();
        // Fewer of the rarest terms under the cap than the cutoff keeps: which of the others are
        // rarer is counted further (up to the share), so the right ones are kept.
        let under = counted.iter().filter(|(f, _)| *f > 0 && *f < cap).count();
        if frequent_matter && cap < share_cap && under < cutoff.keep_rarest {
            let over: Vec<String> = counted
                .iter()
                .filter(|(f, _)| *f >= cap)
                .map(|(_, term)| term.clone())
                .collect();
            let mut recounted = source.term_counts(&over, share_cap)?.into_iter();
            for (frequency, _) in counted.iter_mut().filter(|(f, _)| *f >= cap) {
                *frequency = recounted.next().unwrap_or(*frequency);
            }
        }
        let found: Vec<(usize, String)> = counted.iter().filter(|(f, _)| *f > 0).cloned().collect();
        if found.is_empty() {
            // Nothing matches any term: searching them answers "nothing found" honestly.
            counted.truncate(MAX_QUERY_TERMS);
            return Ok(counted.into_iter().map(|(_, term)| term).collect());
        }
        let mut kept = found;
        kept.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        // The rarest terms stay whatever their frequency (ties with the last of them too).
        let floor = kept
            .get(cutoff.keep_rarest.max(1) - 1)
            .or(kept.last())
            .map_or(0, |(frequency, _)| *frequency);
        kept.retain(|(frequency, _)| !frequent_matter || *frequency < cap || *frequency <= floor);
        kept.truncate(MAX_QUERY_TERMS);
        Ok(kept.into_iter().map(|(_, term)| term).collect())
    }

    /// The backend's lexical search for `terms` (the shared in-memory index answers on SQLite
    /// when there is one).
    fn lexical_search(
        &self,
        terms: &[String],
        filter: &LexicalQuery<'_>,
    ) -> Result<Vec<cairn_store::LexicalHit>> {
        Ok(self
            .store
            .recall_read(self.lexical.as_deref())
            .lexical_search(terms, filter)?)
    }

    /// Records in the full-text index, counted once per store generation.
    pub(crate) fn indexed_count(&self) -> Result<usize> {
        let generation = self.store.generation()?;
        if let Some((counted_at, count)) = self.indexed.get()
            && counted_at == generation
        {
            return Ok(count);
        }
        let count = self
            .store
            .recall_read(self.lexical.as_deref())
            .indexed_count()?;
        self.indexed.set(Some((generation, count)));
        Ok(count)
    }

    /// Records a recall's access (each result's use count and last access, one `recall` event):
    /// at once, or into the access buffer when [`Engine::buffer_accesses`] turned it on.
    fn log_recall(&mut self, query_text: &str, ids: &[i64], now: DateTime<Utc>) -> Result<()> {
        let access = Access {
            at: format_ts(now),
            project: self.context.project.clone(),
            actor: self.context.actor.clone(),
            query: query_text.to_string(),
            ids: ids.to_vec(),
        };
        if let Some(buffer) = self.accesses.as_mut() {
            if buffer.entries.is_empty() {
                buffer.since = Some(std::time::Instant::now());
            }
            buffer.entries.push(access);
            return Ok(());
        }
        self.store
            .write(|tx| write_access(tx, &access).map_err(EngineError::from))
    }

    /// Buffers the accesses recall records (use counts, last access, `recall` events) in memory
    /// instead of writing one transaction per recall; [`Engine::flush_accesses`] writes them,
    /// all in one transaction. For a long-lived service: it flushes on a timer, after a batch,
    /// and on shutdown, so a crash loses at most the accesses since the last flush (never a
    /// record or any other write). Off (every access written at once) when opened.
    pub fn buffer_accesses(&mut self) {
        if self.accesses.is_none() {
            self.accesses = Some(AccessBuffer::default());
        }
    }

    /// Takes the accesses buffered so far out of this engine (it goes on buffering), to be
    /// written by another engine ([`Engine::add_accesses`]).
    pub fn take_accesses(&mut self) -> AccessBuffer {
        self.accesses
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Buffers accesses another engine recorded ([`Engine::take_accesses`]), to be written by
    /// this one's next [`Engine::flush_accesses`] (turning buffering on if it was off).
    pub fn add_accesses(&mut self, accesses: AccessBuffer) {
        self.accesses
            .get_or_insert_with(AccessBuffer::default)
            .append(accesses);
    }

    /// Accesses buffered and not written yet, and since when the oldest of them waits.
    pub fn pending_accesses(&self) -> (usize, Option<std::time::Instant>) {
        match &self.accesses {
            Some(buffer) => (buffer.entries.len(), buffer.since),
            None => (0, None),
        }
    }

    /// Writes every buffered access in one transaction and answers how many: the use counts
    /// and last accesses of all of them in one statement, then one `recall` event each. On failure they
    /// stay buffered for the next try (the newest [`MAX_BUFFERED_ACCESSES`] of them).
    pub fn flush_accesses(&mut self) -> Result<usize> {
        let Some(buffer) = self.accesses.as_mut() else {
            return Ok(0);
        };
        if buffer.entries.is_empty() {
            return Ok(0);
        }
        let entries = std::mem::take(&mut buffer.entries);
        let since = buffer.since.take();
        let written = self.store.write(|tx| {
            let touches: Vec<(i64, u32, &str)> = entries
                .iter()
                .flat_map(|access| access.ids.iter().map(|id| (*id, 1, access.at.as_str())))
                .collect();
            tx.touch_counted(&touches)?;
            for access in &entries {
                log_access(tx, access)?;
            }
            Ok::<_, EngineError>(())
        });
        match written {
            Ok(()) => Ok(entries.len()),
            Err(error) => {
                let buffer = self.accesses.as_mut().expect("checked above");
                let mut kept = entries;
                kept.append(&mut buffer.entries);
                let over = kept.len().saturating_sub(MAX_BUFFERED_ACCESSES);
                kept.drain(..over);
                buffer.entries = kept;
                buffer.since = since.or(Some(std::time::Instant::now()));
                Err(error)
            }
        }
    }
}

/// The record a match answers as: itself when current, else its newest successor (from
/// `successors`, every record its chain leads to) that existed at `as_of`. `None` when the
/// match should not be shown (archived head).
fn current_head<'a>(
    matched: &'a Memory,
    successors: &'a HashMap<i64, Memory>,
    as_of: Option<&str>,
) -> Option<&'a Memory> {
    let mut current = matched;
    let mut seen = std::collections::BTreeSet::new();
    while seen.insert(current.id) {
        let retired_by_then = match (as_of, current.retired_at.as_deref()) {
            (Some(as_of), Some(retired)) => retired <= as_of,
            (Some(_), None) => current.status != Status::Active,
            (None, _) => current.status != Status::Active,
        };
        if !retired_by_then {
            return Some(current);
        }
        // Archived with no successor (or one gone): not shown by default.
        let successor = successors.get(&current.superseded_by?)?;
        if as_of.is_some_and(|as_of| successor.created_at.as_str() > as_of) {
            return Some(current);
        }
        current = successor;
    }
    Some(current)
}

/// Most accesses kept in the buffer while they cannot be written (the brain locked or read-only
/// for a long time): the oldest are dropped past it.
pub const MAX_BUFFERED_ACCESSES: usize = 10_000;

/// Recall accesses waiting to be written ([`Engine::buffer_accesses`]); taken from one engine
/// ([`Engine::take_accesses`]) they can be written by another ([`Engine::add_accesses`]), so
/// that a service's reader engines never write.
#[derive(Debug, Default)]
pub struct AccessBuffer {
    entries: Vec<Access>,
    /// When the oldest entry was buffered.
    since: Option<std::time::Instant>,
}

impl AccessBuffer {
    /// The accesses held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Since when the oldest of them waits (`None` when empty).
    pub fn since(&self) -> Option<std::time::Instant> {
        self.since
    }

    /// Adds `other`'s accesses after these (the oldest wait of both kept).
    pub fn append(&mut self, mut other: AccessBuffer) {
        if other.entries.is_empty() {
            return;
        }
        self.since = match (self.since, other.since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.entries.append(&mut other.entries);
    }
}

/// One recall's access: what was asked, what it answered, when, from which project, by whom.
#[derive(Debug)]
struct Access {
    at: String,
    project: String,
    actor: String,
    query: String,
    ids: Vec<i64>,
}

fn write_access(tx: &cairn_store::WriteTx<'_>, access: &Access) -> cairn_store::Result<()> {
    tx.touch(&access.ids, &access.at)?;
    log_access(tx, access)
}

/// The `recall` event of one access.
fn log_access(tx: &cairn_store::WriteTx<'_>, access: &Access) -> cairn_store::Result<()> {
    let detail =
        json!({"op": "recall", "query": access.query, "results": access.ids, "at": access.at});
    let receipt = cairn_core::receipt::receipt(&detail);
    tx.append_event(
        &NewEvent {
            at: &access.at,
            op: "recall",
            memory_id: None,
            project: Some(&access.project),
            detail: &detail,
            actor: &access.actor,
        },
        &receipt,
    )?;
    Ok(())
}

fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(ids: &[i64]) -> Vec<Hit> {
        ids.iter().map(|&id| Hit { id, strength: 1.0 }).collect()
    }

    fn strengths(values: &[f64]) -> Vec<Hit> {
        values
            .iter()
            .enumerate()
            .map(|(n, &strength)| Hit {
                id: n as i64,
                strength,
            })
            .collect()
    }

    #[test]
    fn confidence_is_the_best_cosine_above_the_reference_in_units_of_the_span() {
        let list = strengths(&[0.86, 0.84, 0.83, 0.80, 0.79]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(semantic_confidence(&list, Some(0.80), 0.1), 0.6));
        assert!(close(semantic_confidence(&list, Some(0.80), 0.05), 1.0));
        assert!(close(semantic_confidence(&list, Some(0.90), 0.1), 0.0));
        // No reference (an unmeasured model) or no candidate: the fixed weight.
        assert_eq!(semantic_confidence(&list, None, 0.1), 1.0);
        assert_eq!(semantic_confidence(&[], Some(0.8), 0.1), 1.0);
        assert_eq!(median_strength(&list), Some(0.83));
        assert_eq!(median_strength(&strengths(&[0.5, 0.9])), Some(0.9));
        assert_eq!(median_strength(&[]), None);
        let median = median_strength(&list);
        assert!(close(semantic_confidence(&list, median, 0.1), 0.3));
    }

    #[test]
    fn agreement_is_the_share_of_the_first_lexical_places_the_semantic_ones_hold() {
        assert_eq!(agreement(&hits(&[1, 2, 3, 4]), &hits(&[4, 3, 2, 1])), 1.0);
        assert_eq!(agreement(&hits(&[1, 2, 3, 4]), &hits(&[9, 2, 8, 4])), 0.5);
        assert_eq!(agreement(&hits(&[1, 2]), &[]), 0.0);
        assert_eq!(agreement(&[], &hits(&[1])), 0.0);
        // only the first ten places of each list count
        let lexical: Vec<i64> = (1..=20).collect();
        let semantic: Vec<i64> = (11..=30).collect();
        assert_eq!(agreement(&hits(&lexical), &hits(&semantic)), 0.0);
    }
}
