//! The write path (docs/design.md §4): sanitize and guard secrets, identity, exact and near duplicates,
//! contradictions, supersession, stamping, index and log — in that order, in one transaction.

use crate::{Context, Engine, EngineError, GitSource, Result};
use cairn_core::memory::Memory;
use cairn_core::minhash::{self, Signature};
use cairn_core::record::{
    Confidence, MAX_BODY_BYTES, MAX_SUMMARY_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS,
    MemoryType, Sensitivity, Status, Trust, TrustZone,
};
use cairn_core::scope::Scope;
use cairn_core::time::{format_ts, parse_time, parse_time_ahead};
use cairn_core::{polarity, query, receipt, secrets, text};
use cairn_store::{LexicalIndex, LexicalQuery, NewEvent, WriteTx};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// Near-duplicate thresholds of docs/design.md §4 step 4.
pub const NEAR_DUPLICATE_JACCARD: f64 = 0.9;
pub const TITLE_OVERLAP: f64 = 0.5;
/// Captured expiring content lives this long by default.
pub const CAPTURE_EXPIRY_DAYS: i64 = 14;

/// When the claim must be re-verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Review {
    /// The type's default (`infra`, `access`: +30 days).
    #[default]
    Default,
    At(String),
    Never,
}

/// A request to store one memory.
#[derive(Debug, Clone)]
pub struct RememberRequest {
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub body: String,
    pub summary: Option<String>,
    pub scope: Option<String>,
    pub tags: Vec<String>,
    pub importance: Option<u8>,
    pub confidence: Option<Confidence>,
    pub source: Option<String>,
    pub supersedes: Option<i64>,
    pub fork_ok: bool,
    pub allow_duplicate: bool,
    pub pinned: bool,
    pub trust: Option<Trust>,
    pub trust_zone: Option<TrustZone>,
    pub sensitivity: Option<Sensitivity>,
    pub review: Review,
    pub expires_at: Option<String>,
    pub external_id: Option<String>,
    /// When it happened (RFC 3339); now when absent.
    pub at: Option<String>,
    /// File under no project: visible from every project.
    pub personal: bool,
    /// Automatic capture: near duplicates of earlier captures update them instead of refusing.
    pub capture: bool,
}

impl RememberRequest {
    pub fn new(memory_type: MemoryType, body: impl Into<String>) -> RememberRequest {
        RememberRequest {
            memory_type,
            title: None,
            body: body.into(),
            summary: None,
            scope: None,
            tags: Vec::new(),
            importance: None,
            confidence: None,
            source: None,
            supersedes: None,
            fork_ok: false,
            allow_duplicate: false,
            pinned: false,
            trust: None,
            trust_zone: None,
            sensitivity: None,
            review: Review::Default,
            expires_at: None,
            external_id: None,
            at: None,
            personal: false,
            capture: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RememberStatus {
    Added,
    Updated,
    Noop,
    Refused,
    Flagged,
}

/// What `remember` did (the JSON of docs/cli.md).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RememberOutcome {
    pub status: RememberStatus,
    pub id: Option<i64>,
    pub existing: Option<i64>,
    pub conflicts: Vec<i64>,
    pub redacted: Vec<String>,
    pub ways_out: Vec<String>,
    pub warnings: Vec<String>,
    pub receipt: Option<String>,
    /// One sentence for humans.
    pub message: String,
}

/// Sanitized, validated fields, ready for the checks that need the store.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub memory: Memory,
    pub title_norm: Option<String>,
    pub signature: Signature,
    pub redacted: Vec<String>,
    pub warnings: Vec<String>,
}

/// Sanitizes `value` and redacts secrets, adding what was stripped and redacted to the tallies.
fn clean(value: &str, redacted: &mut Vec<String>, stripped: &mut usize) -> Result<String> {
    let sanitized = text::sanitize(value)?;
    *stripped += sanitized.stripped;
    let guarded = secrets::redact(&sanitized.text);
    redacted.extend(guarded.kinds.iter().map(|k| k.to_string()));
    Ok(guarded.text)
}

fn clean_optional(
    value: Option<&str>,
    what: &'static str,
    limit: usize,
    redacted: &mut Vec<String>,
    stripped: &mut usize,
) -> Result<Option<String>> {
    let Some(value) = value else { return Ok(None) };
    let cleaned = clean(value, redacted, stripped)?.trim().replace('\n', " ");
    if cleaned.is_empty() {
        return Ok(None);
    }
    let count = cleaned.chars().count();
    if count > limit {
        return Err(EngineError::TooLarge {
            what,
            actual: count,
            limit,
            unit: "characters",
        });
    }
    Ok(Some(cleaned))
}

/// Normalizes and validates tags: lowercase, no spaces, deduplicated, sorted.
pub fn clean_tags(tags: &[String]) -> Result<Vec<String>> {
    let mut cleaned: Vec<String> = Vec::new();
    for tag in tags.iter().flat_map(|t| t.split(',')) {
        let sanitized = text::sanitize(tag)?.text;
        let tag: String = sanitized
            .trim()
            .trim_start_matches('#')
            .to_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("-");
        if tag.is_empty() {
            continue;
        }
        if tag.chars().count() > MAX_TAG_CHARS {
            return Err(EngineError::TooLarge {
                what: "a tag",
                actual: tag.chars().count(),
                limit: MAX_TAG_CHARS,
                unit: "characters",
            });
        }
        cleaned.push(tag);
    }
    cleaned.sort();
    cleaned.dedup();
    if cleaned.len() > MAX_TAGS {
        return Err(EngineError::TooLarge {
            what: "the tag list",
            actual: cleaned.len(),
            limit: MAX_TAGS,
            unit: "tags",
        });
    }
    Ok(cleaned)
}

/// Step 1 and 7 without the store: sanitize, guard secrets, validate sizes, fill defaults and
/// stamp times. `commit` is the git revision for stamped types.
pub fn prepare(
    request: &RememberRequest,
    project: Option<String>,
    now: DateTime<Utc>,
    commit: Option<String>,
) -> Result<Prepared> {
    let mut redacted = Vec::new();
    let mut stripped = 0usize;
    let mut warnings = Vec::new();
    let body = clean(&request.body, &mut redacted, &mut stripped)?;
    let body = body.trim().to_string();
    if body.is_empty() {
        return Err(EngineError::Empty { what: "the body" });
    }
    if body.len() > MAX_BODY_BYTES {
        return Err(EngineError::TooLarge {
            what: "the body",
            actual: body.len(),
            limit: MAX_BODY_BYTES,
            unit: "bytes",
        });
    }
    let title = clean_optional(
        request.title.as_deref(),
        "the title",
        MAX_TITLE_CHARS,
        &mut redacted,
        &mut stripped,
    )?;
    let summary = clean_optional(
        request.summary.as_deref(),
        "the summary",
        MAX_SUMMARY_CHARS,
        &mut redacted,
        &mut stripped,
    )?;
    let source = clean_optional(
        request.source.as_deref(),
        "the source",
        1000,
        &mut redacted,
        &mut stripped,
    )?;
    let external_id = clean_optional(
        request.external_id.as_deref(),
        "the external id",
        200,
        &mut redacted,
        &mut stripped,
    )?;
    let tags = clean_tags(&request.tags)?;
    if stripped > 0 {
        warnings.push(format!(
            "removed {stripped} invisible character(s) (zero-width, bidi or tag characters)"
        ));
    }
    redacted.sort();
    redacted.dedup();
    if !redacted.is_empty() {
        warnings.push(format!(
            "redacted secrets before storing: {}",
            redacted.join(", ")
        ));
    }
    let scope = match request.scope.as_deref() {
        Some(scope) => Scope::parse(scope)?,
        None => Scope::global(),
    };
    let importance = request.importance.unwrap_or(3);
    if !(1..=5).contains(&importance) {
        return Err(EngineError::Invalid(format!(
            "importance {importance} is out of range: use 1 (trivia) to 5 (critical)"
        )));
    }
    let mut confidence = request.confidence.unwrap_or(Confidence::Reported);
    if confidence == Confidence::Confirmed && source.is_none() {
        confidence = Confidence::Reported;
        warnings.push(crate::records::CONFIRMED_NEEDS_SOURCE.to_string());
    }
    let created = match request.at.as_deref() {
        Some(at) => parse_time(at, now)?,
        None => now,
    };
    let created_at = format_ts(created);
    let review_at = match &request.review {
        Review::Never => None,
        Review::At(at) => Some(format_ts(parse_time_ahead(at, now)?)),
        Review::Default => request.memory_type.default_review_days().map(|days| {
            let at = format_ts(created + Duration::days(days));
            warnings.push(format!(
                "review on {} (default for {}, {days}d)",
                &at[..10],
                request.memory_type
            ));
            at
        }),
    };
    let trust = request.trust.unwrap_or(if request.capture {
        Trust::Captured
    } else {
        Trust::Stated
    });
    let expires_at = match request.expires_at.as_deref() {
        Some(at) => Some(format_ts(parse_time_ahead(at, now)?)),
        None if request.capture && request.memory_type == MemoryType::State => {
            Some(format_ts(created + Duration::days(CAPTURE_EXPIRY_DAYS)))
        }
        None => None,
    };
    let commit = if request.memory_type.stamped_with_commit() {
        commit
    } else {
        None
    };
    let title_norm = title
        .as_deref()
        .map(text::normalize_title)
        .filter(|t| !t.is_empty());
    let memory = Memory {
        id: 0,
        project: if request.personal { None } else { project },
        scope: scope.as_str().to_string(),
        memory_type: request.memory_type,
        title,
        content_hash: text::content_hash(&body),
        body,
        summary,
        tags,
        importance,
        confidence,
        trust,
        trust_zone: request.trust_zone.unwrap_or(TrustZone::PrivateSelf),
        sensitivity: request.sensitivity.unwrap_or(Sensitivity::Normal),
        source,
        commit,
        review_at,
        expires_at,
        pinned: request.pinned,
        status: Status::Active,
        supersedes: request.supersedes,
        superseded_by: None,
        external_id,
        created_at: created_at.clone(),
        updated_at: format_ts(now.max(created)),
        last_accessed_at: None,
        valid_from: created_at,
        use_count: 0,
        retired_at: None,
    };
    let signature = minhash::signature(&memory.body);
    Ok(Prepared {
        memory,
        title_norm,
        signature,
        redacted,
        warnings,
    })
}

/// Ways out of a near-duplicate refusal.
pub fn duplicate_ways_out(existing: i64) -> Vec<String> {
    vec![
        format!("--supersedes {existing}"),
        format!("cairn update {existing}"),
        "--allow-duplicate".to_string(),
    ]
}

impl Engine {
    /// Stores one memory through the whole write path.
    pub fn remember(&mut self, request: &RememberRequest) -> Result<RememberOutcome> {
        let (prepared, now) = self.prepare_remember(request)?;
        let actor = self.context.actor.clone();
        let extract = self.extract_entities;
        let lexical = self.lexical_for_write();
        let mut outcome = self.store.write(|tx| {
            remember_whole(
                tx,
                request,
                prepared,
                now,
                &actor,
                extract,
                lexical.as_deref(),
            )
        })?;
        self.after_remembered(&mut outcome);
        Ok(outcome)
    }

    /// Stores several memories in one write transaction (one commit for all of them: group
    /// commit, for a service whose writes queue), each through the whole write path in its
    /// own context, in order, as if they were remembered one after the other: a later one sees
    /// what the earlier ones stored, so a near duplicate of one is refused or merged exactly as
    /// it would be alone. Each gets its own answer: one that fails (bad input, a missing
    /// supersession target) is rolled back alone and the others are stored. When the
    /// transaction itself fails (the brain locked, the disk full), each is tried again in a
    /// transaction of its own, so each error is its own. The engine is left in the last one's
    /// context.
    pub fn remember_group(&mut self, group: &[GroupedRemember]) -> Vec<Result<RememberOutcome>> {
        let mut answers: Vec<Option<Result<RememberOutcome>>> =
            group.iter().map(|_| None).collect();
        let mut ready = Vec::new();
        for (index, item) in group.iter().enumerate() {
            self.enter(item);
            match self.prepare_remember(&item.request) {
                Ok((prepared, now)) => ready.push((index, prepared, now)),
                Err(error) => answers[index] = Some(Err(error)),
            }
        }
        let indexes: Vec<usize> = ready.iter().map(|(index, _, _)| *index).collect();
        if indexes.is_empty() {
            return answers.into_iter().flatten().collect();
        }
        let extract = self.extract_entities;
        let lexical = self.lexical_for_write();
        let stored = self.store.write(|tx| {
            let mut outcomes = Vec::with_capacity(ready.len());
            for (index, prepared, now) in ready {
                let item = &group[index];
                let outcome = tx.alone(|tx| {
                    remember_whole(
                        tx,
                        &item.request,
                        prepared,
                        now,
                        &item.context.actor,
                        extract,
                        lexical.as_deref(),
                    )
                })?;
                outcomes.push((index, outcome));
            }
            Ok::<_, EngineError>(outcomes)
        });
        match stored {
            Ok(outcomes) => {
                for (index, outcome) in outcomes {
                    answers[index] = Some(outcome.map(|mut outcome| {
                        self.enter(&group[index]);
                        self.after_remembered(&mut outcome);
                        outcome
                    }));
                }
            }
            Err(error) if indexes.len() == 1 => answers[indexes[0]] = Some(Err(error)),
            Err(_) => {
                for index in indexes {
                    self.enter(&group[index]);
                    answers[index] = Some(self.remember(&group[index].request));
                }
            }
        }
        answers
            .into_iter()
            .map(|answer| answer.expect("every remember of the group is answered"))
            .collect()
    }

    /// The shared full-text index for a write's near-duplicate search
    /// ([`LexicalIndex::search_in_write`]), brought up to date with the brain first (the change
    /// log's head and the records changed since), so that the write's transaction finds it
    /// current; `None` without one or while its first build runs (not waited for: FTS5
    /// answers).
    fn lexical_for_write(&self) -> Option<std::sync::Arc<LexicalIndex>> {
        let index = self.lexical.as_ref().filter(|index| index.is_built())?;
        // Not brought up to date (an error reading the log): the write's searches find it
        // behind and go to FTS5.
        if let Ok(reader) = self.store.reader() {
            let _ = index.prepare(&reader);
        }
        Some(std::sync::Arc::clone(index))
    }

    /// Checks and cleans `request` in this engine's context, before its transaction: the
    /// memory to store and the time it is stored at.
    fn prepare_remember(&self, request: &RememberRequest) -> Result<(Prepared, DateTime<Utc>)> {
        self.ensure_writable("remember")?;
        let now = self.now();
        let commit = if request.memory_type.stamped_with_commit() {
            self.head_commit()
        } else {
            None
        };
        let prepared = prepare(request, Some(self.context.project.clone()), now, commit)?;
        Ok((prepared, now))
    }

    /// What follows a stored remember's commit: the context vectors of the turns before it,
    /// its own vector (or leaving it to the indexer); what fails is said in its warnings.
    fn after_remembered(&mut self, outcome: &mut RememberOutcome) {
        if !matches!(
            outcome.status,
            RememberStatus::Added | RememberStatus::Updated | RememberStatus::Flagged
        ) {
            return;
        }
        if let Some(id) = outcome.id
            && let Err(error) = self.refresh_context_of_neighbours(id)
        {
            outcome.warnings.push(format!(
                "the turns before #{id} keep their old context vectors ({error})"
            ));
        }
        let written: Vec<i64> = outcome.id.into_iter().collect();
        if let Some(warning) = self.index_after_write(&written, true) {
            outcome.warnings.push(warning);
        }
    }

    /// Switches to the context of one remember of a group.
    fn enter(&mut self, item: &GroupedRemember) {
        self.set_context(item.context.clone());
        self.set_git_source(item.git.clone());
    }
}

/// One remember of a group ([`Engine::remember_group`]) and the context it runs in.
#[derive(Debug, Clone)]
pub struct GroupedRemember {
    pub context: Context,
    pub git: GitSource,
    pub request: RememberRequest,
}

/// The store-side steps of one remember and the graph's, inside its transaction; its
/// near-duplicate search answered by `index` while the transaction has not changed the
/// full-text index ([`LexicalIndex::search_in_write`]).
fn remember_whole(
    tx: &WriteTx<'_>,
    request: &RememberRequest,
    prepared: Prepared,
    now: DateTime<Utc>,
    actor: &str,
    extract: bool,
    index: Option<&LexicalIndex>,
) -> Result<RememberOutcome> {
    let mut counts = TermCounts {
        index,
        ..TermCounts::default()
    };
    let outcome = remember_in_batch(tx, request, prepared, now, actor, &mut counts)?;
    crate::graph::write::after_remember(tx, request, &outcome, now, actor, extract)?;
    Ok(outcome)
}

/// The store-side steps of the write path inside one transaction.
pub(crate) fn remember_in(
    tx: &WriteTx<'_>,
    request: &RememberRequest,
    prepared: Prepared,
    now: DateTime<Utc>,
    actor: &str,
) -> Result<RememberOutcome> {
    remember_in_batch(
        tx,
        request,
        prepared,
        now,
        actor,
        &mut TermCounts::default(),
    )
}

/// What the writes of one transaction learn about the brain's words, kept for the next write
/// (a capture stores a session's new turns together, and their words repeat): how many records
/// hold a word (for explicit writes), which records do (for captures), and the captures stored
/// so far with their words. The counts and lists are read once per word, so they miss what the
/// same transaction wrote after that: those records are the `written` ones. With `index` (a
/// long-lived process's full-text index in memory), explicit writes count words and search for
/// near duplicates there while the transaction has not changed the full-text rows, FTS5's
/// answer without its BM25 over every match (issue 14: most of a remember's CPU in the
/// daemon).
#[derive(Debug, Default)]
pub(crate) struct TermCounts<'a> {
    index: Option<&'a LexicalIndex>,
    counted: HashMap<String, usize>,
    postings: HashMap<String, Postings>,
    written: Vec<(i64, HashSet<String>)>,
}

/// The records holding one word, lowest id first: all of them, or the first
/// `CAPTURE_POSTINGS_CAP` when `complete` is false.
#[derive(Debug)]
struct Postings {
    ids: Vec<i64>,
    complete: bool,
}

impl TermCounts<'_> {
    /// Records holding `term`, counted no further than `SIMILAR_TERM_COUNT_CAP`.
    fn count(&mut self, tx: &WriteTx<'_>, term: &str) -> Result<usize> {
        if let Some(count) = self.counted.get(term) {
            return Ok(*count);
        }
        let single = query::fts_match_expression(&[term.to_string()]).unwrap_or_default();
        let reader = tx.reader();
        let count = match self.index {
            Some(index) => {
                index.term_frequency_in_write(&reader, &single, SIMILAR_TERM_COUNT_CAP)?
            }
            None => reader.term_frequency(&single, SIMILAR_TERM_COUNT_CAP)?,
        };
        self.counted.insert(term.to_string(), count);
        Ok(count)
    }

    fn postings(&mut self, tx: &WriteTx<'_>, term: &str) -> Result<&Postings> {
        if !self.postings.contains_key(term) {
            let single = query::fts_match_expression(&[term.to_string()]).unwrap_or_default();
            let mut ids = tx.reader().term_ids(&single, CAPTURE_POSTINGS_CAP + 1)?;
            let complete = ids.len() <= CAPTURE_POSTINGS_CAP;
            ids.truncate(CAPTURE_POSTINGS_CAP);
            self.postings
                .insert(term.to_string(), Postings { ids, complete });
        }
        Ok(&self.postings[term])
    }

    /// A capture this transaction stored (added, or merged into `id`), with its words.
    fn note_written(&mut self, id: i64, memory: &Memory) {
        let terms = query::query_terms(&claim_text(memory))
            .into_iter()
            .collect();
        self.written.retain(|(other, _)| *other != id);
        self.written.push((id, terms));
    }
}

/// [`remember_in`] for one write of several in a transaction, sharing `counts` with the others.
pub(crate) fn remember_in_batch(
    tx: &WriteTx<'_>,
    request: &RememberRequest,
    prepared: Prepared,
    now: DateTime<Utc>,
    actor: &str,
    counts: &mut TermCounts<'_>,
) -> Result<RememberOutcome> {
    let Prepared {
        mut memory,
        title_norm,
        signature,
        redacted,
        mut warnings,
    } = prepared;
    let reader = tx.reader();
    let now_text = format_ts(now);
    let partition = memory.partition();
    let outcome = |status, id, existing, message: String, warnings: Vec<String>| RememberOutcome {
        status,
        id,
        existing,
        conflicts: Vec::new(),
        redacted: redacted.clone(),
        ways_out: Vec::new(),
        warnings,
        receipt: None,
        message,
    };

    // Supersession target (step 6), checked first: it decides which checks apply.
    let superseded = match request.supersedes {
        None => None,
        Some(old_id) => {
            let old = reader
                .get(old_id)?
                .ok_or(EngineError::NotFound { id: old_id })?;
            if let Some(successor) = old.superseded_by
                && !request.fork_ok
            {
                return Ok(RememberOutcome {
                    ways_out: vec![format!("--supersedes {successor}"), "--fork-ok".to_string()],
                    ..outcome(
                        RememberStatus::Refused,
                        None,
                        Some(successor),
                        format!(
                            "#{old_id} was already superseded by #{successor}; supersede #{successor} instead, or pass --fork-ok to fork the chain"
                        ),
                        warnings.clone(),
                    )
                });
            }
            if old.status == Status::Archived {
                warnings.push(format!(
                    "#{old_id} was archived; it stays archived and now points to the new record"
                ));
            }
            Some(old)
        }
    };

    // Identity by caller-supplied id (imports, evaluation): same external id → same record.
    if superseded.is_none()
        && let Some(external_id) = memory.external_id.as_deref()
        && let Some(existing) =
            reader.find_by_external_id(memory.project.as_deref(), external_id)?
    {
        return update_existing(
            tx,
            existing,
            memory,
            &title_norm,
            now,
            actor,
            outcome_for(&redacted, &warnings),
        );
    }

    // Step 2: identity — same scope and normalized title as an active record.
    if superseded.is_none()
        && let Some(norm) = title_norm.as_deref()
        && let Some(existing) =
            reader.find_by_identity(memory.project.as_deref(), &memory.scope, norm)?
        && existing.partition() == partition
    {
        return update_existing(
            tx,
            existing,
            memory,
            &title_norm,
            now,
            actor,
            outcome_for(&redacted, &warnings),
        );
    }

    // Step 3: exact duplicate in the same partition → NOOP (touch it). Records carrying
    // different caller ids are separate by the caller's word.
    if let Some(existing) = reader
        .find_by_hash(&memory.content_hash)?
        .into_iter()
        .find(|m| {
            m.partition() == partition && (memory.external_id.is_none() || m.external_id.is_none())
        })
    {
        tx.touch(&[existing.id], &now_text)?;
        return Ok(outcome(
            RememberStatus::Noop,
            Some(existing.id),
            Some(existing.id),
            format!(
                "already stored as #{} (same text); nothing changed",
                existing.id
            ),
            warnings,
        ));
    }

    // Step 3b: a capture repeating the exact text of a record a dream merged away → NOOP on
    // the record it was merged into (T2: one row per content hash and scope; the archived one
    // keeps the wording, `cairn restore` brings it back).
    if request.capture
        && memory.external_id.is_none()
        && let Some(survivor) = merged_survivor(&reader, &memory.content_hash, &partition)?
    {
        tx.touch(&[survivor.id], &now_text)?;
        return Ok(outcome(
            RememberStatus::Noop,
            Some(survivor.id),
            Some(survivor.id),
            format!(
                "already captured: the same text was merged into #{}; nothing changed",
                survivor.id
            ),
            warnings,
        ));
    }

    // Records sharing the most words: candidates for steps 4 and 5, searched once.
    let near_duplicate_check =
        superseded.is_none() && !request.allow_duplicate && memory.external_id.is_none();
    let contradiction_check = !request.capture && memory.external_id.is_none();
    let similar = if request.capture && !contradiction_check {
        // A capture is only merged into an earlier capture it nearly repeats: look for twins,
        // not for records on the same subject.
        if near_duplicate_check {
            capture_twin_ids(tx, &memory, counts)?
        } else {
            Vec::new()
        }
    } else if near_duplicate_check || contradiction_check {
        similar_ids(tx, &memory, counts)?
    } else {
        Vec::new()
    };

    // Step 4: near duplicates.
    if near_duplicate_check {
        let candidates = reader.with_signatures(&similar)?;
        let twin = candidates
            .iter()
            .filter(|(m, _)| m.partition() == partition)
            .map(|(m, sig)| (m, sig.jaccard(&signature)))
            .filter(|(_, jaccard)| *jaccard >= NEAR_DUPLICATE_JACCARD)
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.id.cmp(&a.0.id)));
        if request.capture {
            if let Some((existing, _)) =
                twin.filter(|(m, _)| m.trust == cairn_core::record::Trust::Captured)
            {
                let existing = existing.clone();
                if memory.body.len() > existing.body.len() {
                    let mut merged = existing.clone();
                    merged.body = memory.body.clone();
                    merged.content_hash = memory.content_hash.clone();
                    counts.note_written(existing.id, &merged);
                    return update_existing(
                        tx,
                        existing,
                        merged,
                        &title_norm,
                        now,
                        actor,
                        outcome_for(&redacted, &warnings),
                    );
                }
                tx.touch(&[existing.id], &now_text)?;
                return Ok(outcome(
                    RememberStatus::Noop,
                    Some(existing.id),
                    Some(existing.id),
                    format!(
                        "already captured as #{} (near-identical text); kept the longer version",
                        existing.id
                    ),
                    warnings,
                ));
            }
        } else {
            if let Some((existing, jaccard)) = twin {
                return Ok(refuse_duplicate(
                    existing.id,
                    format!("{:.0} % of its text is the same", jaccard * 100.0),
                    &redacted,
                    warnings,
                ));
            }
            if let Some(title) = memory.title.as_deref()
                && let Some((existing, overlap)) = title_twin(tx, &memory, title)?
            {
                return Ok(refuse_duplicate(
                    existing,
                    format!("{:.0} % title overlap", overlap * 100.0),
                    &redacted,
                    warnings,
                ));
            }
        }
    }

    // Step 5: contradiction with an active record of the same partition.
    let conflicts = if contradiction_check {
        find_contradictions(tx, &memory, request.supersedes, &similar)?
    } else {
        Vec::new()
    };

    // Steps 6–9: insert, retire the superseded record, log.
    let id = tx.insert_memory(&memory, title_norm.as_deref())?;
    memory.id = id;
    if request.capture {
        counts.note_written(id, &memory);
    }
    if let Some(old) = superseded {
        let mut retired = old.clone();
        retired.superseded_by = Some(id);
        if retired.status == Status::Active {
            retired.status = Status::Superseded;
            retired.retired_at = Some(now_text.clone());
        }
        retired.updated_at = now_text.clone();
        let old_norm = old.title.as_deref().map(text::normalize_title);
        tx.update_memory(&retired, old_norm.as_deref(), &old, "supersede", actor)?;
        tx.resolve_conflicts(old.id, &now_text)?;
    }
    for (other, reason) in &conflicts {
        tx.add_conflict(id, *other, reason, &now_text)?;
    }
    let op = if memory.supersedes.is_some() {
        "supersede"
    } else {
        "remember"
    };
    let receipt = log_event(
        tx,
        op,
        &memory,
        &now_text,
        actor,
        json!({"conflicts": conflicts.iter().map(|c| c.0).collect::<Vec<_>>()}),
    )?;
    let conflict_ids: Vec<i64> = conflicts.iter().map(|c| c.0).collect();
    let (status, message) = if conflict_ids.is_empty() {
        let message = match memory.supersedes {
            Some(old) => format!("stored as #{id}, superseding #{old}"),
            None => format!("stored as #{id}"),
        };
        (RememberStatus::Added, message)
    } else {
        let listed: Vec<String> = conflicts
            .iter()
            .map(|(other, reason)| format!("#{other} ({reason})"))
            .collect();
        (
            RememberStatus::Flagged,
            format!(
                "stored as #{id} and flagged: it contradicts {}; resolve with `cairn remember … --supersedes ID` or `cairn forget ID`",
                listed.join(", ")
            ),
        )
    };
    Ok(RememberOutcome {
        conflicts: conflict_ids,
        receipt: Some(receipt),
        ..outcome(status, Some(id), None, message, warnings)
    })
}

struct OutcomeBase {
    redacted: Vec<String>,
    warnings: Vec<String>,
}

fn outcome_for(redacted: &[String], warnings: &[String]) -> OutcomeBase {
    OutcomeBase {
        redacted: redacted.to_vec(),
        warnings: warnings.to_vec(),
    }
}

fn refuse_duplicate(
    existing: i64,
    why: String,
    redacted: &[String],
    warnings: Vec<String>,
) -> RememberOutcome {
    RememberOutcome {
        status: RememberStatus::Refused,
        id: None,
        existing: Some(existing),
        conflicts: Vec::new(),
        redacted: redacted.to_vec(),
        ways_out: duplicate_ways_out(existing),
        warnings,
        receipt: None,
        message: format!(
            "#{existing} is already about this ({why}); nothing was stored: --supersedes {existing} (the fact changed) | cairn update {existing} (same fact, better words) | --allow-duplicate (genuinely separate)"
        ),
    }
}

/// Identity or external-id match: update the record in place, keeping history.
#[allow(clippy::too_many_arguments)]
fn update_existing(
    tx: &WriteTx<'_>,
    existing: Memory,
    incoming: Memory,
    title_norm: &Option<String>,
    now: DateTime<Utc>,
    actor: &str,
    base: OutcomeBase,
) -> Result<RememberOutcome> {
    let now_text = format_ts(now);
    let mut updated = existing.clone();
    updated.title = incoming.title.or(existing.title.clone());
    updated.body = incoming.body;
    updated.content_hash = incoming.content_hash;
    updated.summary = incoming.summary.or(existing.summary.clone());
    if !incoming.tags.is_empty() {
        updated.tags = incoming.tags;
    }
    updated.memory_type = incoming.memory_type;
    updated.importance = incoming.importance;
    updated.confidence = incoming.confidence;
    updated.source = incoming.source.or(existing.source.clone());
    updated.commit = incoming.commit.or(existing.commit.clone());
    updated.review_at = incoming.review_at.or(existing.review_at.clone());
    updated.expires_at = incoming.expires_at.or(existing.expires_at.clone());
    updated.pinned = incoming.pinned || existing.pinned;
    let unchanged = Memory {
        updated_at: existing.updated_at.clone(),
        ..updated.clone()
    } == existing;
    if unchanged {
        tx.touch(&[existing.id], &now_text)?;
        return Ok(RememberOutcome {
            status: RememberStatus::Noop,
            id: Some(existing.id),
            existing: Some(existing.id),
            conflicts: Vec::new(),
            redacted: base.redacted,
            ways_out: Vec::new(),
            warnings: base.warnings,
            receipt: None,
            message: format!("#{} already says this; nothing changed", existing.id),
        });
    }
    updated.updated_at = now_text.clone();
    let norm = updated
        .title
        .as_deref()
        .map(text::normalize_title)
        .or(title_norm.clone());
    tx.update_memory(&updated, norm.as_deref(), &existing, "update", actor)?;
    let receipt = log_event(
        tx,
        "update",
        &updated,
        &now_text,
        actor,
        json!({"previous_hash": existing.content_hash}),
    )?;
    Ok(RememberOutcome {
        status: RememberStatus::Updated,
        id: Some(existing.id),
        existing: Some(existing.id),
        conflicts: Vec::new(),
        redacted: base.redacted,
        ways_out: Vec::new(),
        warnings: base.warnings,
        receipt: Some(receipt),
        message: format!(
            "updated #{} in place (same title in the same scope); the previous version is in its history",
            existing.id
        ),
    })
}

/// An active record in the same partition whose title overlaps ≥ 50 % (titles of 5+ tokens).
fn title_twin(tx: &WriteTx<'_>, memory: &Memory, title: &str) -> Result<Option<(i64, f64)>> {
    let terms = text::title_tokens(title);
    if terms.len() < 5 {
        return Ok(None);
    }
    let Some(expression) = query::fts_match_expression(&terms) else {
        return Ok(None);
    };
    let projects = [memory.project.clone()];
    let scopes = [memory.scope.clone()];
    let hits = tx.reader().lexical_search(&LexicalQuery {
        match_expression: &format!("title : ({expression})"),
        projects: &projects,
        scopes: Some(&scopes),
        limit: 20,
        ..LexicalQuery::default()
    })?;
    let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
    let partition = memory.partition();
    let mut best: Option<(i64, f64)> = None;
    for candidate in tx.reader().get_many(&ids)? {
        if candidate.status != Status::Active || candidate.partition() != partition {
            continue;
        }
        let Some(other_title) = candidate.title.as_deref() else {
            continue;
        };
        if let Some(overlap) = text::title_overlap(title, other_title)
            && overlap >= TITLE_OVERLAP
            && best.is_none_or(|(_, b)| overlap > b)
        {
            best = Some((candidate.id, overlap));
        }
    }
    Ok(best)
}

/// Active records in the same partition that make the opposite claim.
/// Text of a record as one claim: title and body.
fn claim_text(memory: &Memory) -> String {
    match memory.title.as_deref() {
        Some(title) => format!("{title}. {}", memory.body),
        None => memory.body.clone(),
    }
}

/// Records of the same project and scope that share the most words with `memory`: the
/// candidates for near-duplicate and contradiction checks. A near-duplicate (MinHash ≥ 0.9)
/// shares almost every word, so it ranks at the top of this lexical search.
/// Words of a new record searched for its near-duplicate and contradiction candidates (the
/// rarest in the brain), and how far each word's records are counted to find them.
const SIMILAR_TERMS: usize = 8;
const SIMILAR_TERM_COUNT_CAP: usize = 1_000;

fn similar_ids(tx: &WriteTx<'_>, memory: &Memory, counts: &mut TermCounts<'_>) -> Result<Vec<i64>> {
    let terms = query::query_terms(&claim_text(memory));
    // A near duplicate shares nearly every word, so its rarest words find it; searching only
    // those keeps BM25 from scoring every record that shares a common word (at 100k records
    // the 24 words in text order cost over 50 ms per write).
    let mut counted = Vec::with_capacity(terms.len());
    for term in terms {
        let frequency = counts.count(tx, &term)?;
        if frequency > 0 {
            counted.push((frequency, term));
        }
    }
    counted.sort();
    counted.truncate(SIMILAR_TERMS);
    let terms: Vec<String> = counted.into_iter().map(|(_, term)| term).collect();
    let Some(expression) = query::fts_match_expression(&terms) else {
        return Ok(Vec::new());
    };
    let projects = [memory.project.clone()];
    let scopes = [memory.scope.clone()];
    let query = LexicalQuery {
        match_expression: &expression,
        projects: &projects,
        scopes: Some(&scopes),
        limit: 20,
        ..LexicalQuery::default()
    };
    let reader = tx.reader();
    let hits = match counts.index {
        Some(index) => index.search_in_write(&reader, &query)?,
        None => reader.lexical_search(&query)?,
    };
    Ok(hits.iter().map(|h| h.id).collect())
}

/// Words of a capture sampled for its twin search, and how many of the rarest of them are
/// searched for.
const CAPTURE_SAMPLE_TERMS: usize = 24;
const CAPTURE_RARE_TERMS: usize = 6;
/// Most records read per sampled word (reading a word's records costs in proportion to them).
const CAPTURE_POSTINGS_CAP: usize = 1_000;
/// Most candidate twins a capture is compared with.
const CAPTURE_CANDIDATES: usize = 20;

/// Candidate twins of a capture: records holding at least two of the six rarest among 24 of
/// its words, those holding the most of them first (then the newest); MinHash then decides.
///
/// A twin (MinHash Jaccard ≥ 0.9 over word 3-shingles) holds nearly every word of the capture,
/// so it holds at least two of any six of them unless five of the six are exactly the words the
/// two versions do not share. The words are sampled in the order of a fixed hash, not of the
/// text, so a version with a sentence added in front samples the same words. Each word's
/// records are read once per transaction (up to `CAPTURE_POSTINGS_CAP`) and the rarest lists
/// intersected in memory; the captures stored earlier in the same transaction are checked
/// against the same six words. When a chosen word's list is longer than the cap, the full-text
/// index answers instead (every pair of the six words, best BM25 first in the capture's project
/// and scope). Explicit writes search the union of their eight rarest words, ranked by BM25:
/// at 100,000 memories that ranking, with counting every word, took 15 ms per captured turn.
fn capture_twin_ids(
    tx: &WriteTx<'_>,
    memory: &Memory,
    counts: &mut TermCounts<'_>,
) -> Result<Vec<i64>> {
    let mut terms = query::query_terms(&claim_text(memory));
    terms.sort_by_cached_key(|term| (sample_order(term), term.clone()));
    terms.truncate(CAPTURE_SAMPLE_TERMS);
    // How many records hold each word: the list read from the index, plus the captures this
    // transaction wrote since (a word new to the brain may be in one of those only).
    let mut counted = Vec::with_capacity(terms.len());
    for term in terms {
        let listed = counts.postings(tx, &term)?.ids.len();
        let written = counts
            .written
            .iter()
            .filter(|(_, words)| words.contains(&term))
            .count();
        if listed + written > 0 {
            counted.push((listed + written, term));
        }
    }
    counted.sort();
    counted.truncate(CAPTURE_RARE_TERMS);
    let rarest: Vec<String> = counted.into_iter().map(|(_, term)| term).collect();
    let needed = rarest.len().min(2);
    if needed == 0 {
        return Ok(Vec::new());
    }
    // Records holding `needed` of the rarest words, with how many they hold.
    let mut held: HashMap<i64, usize> = HashMap::new();
    for (id, words) in &counts.written {
        let count = rarest.iter().filter(|term| words.contains(*term)).count();
        if count >= needed {
            held.insert(*id, count);
        }
    }
    let mut ranked: Vec<i64> = Vec::new();
    if rarest.iter().all(|term| counts.postings[term].complete) {
        let mut listed: HashMap<i64, usize> = HashMap::new();
        for term in &rarest {
            for id in &counts.postings[term].ids {
                *listed.entry(*id).or_default() += 1;
            }
        }
        for (id, count) in listed {
            if count >= needed {
                let best = held.entry(id).or_default();
                *best = (*best).max(count);
            }
        }
    } else if let Some(expression) = query::fts_at_least_two(&rarest) {
        let projects = [memory.project.clone()];
        let scopes = [memory.scope.clone()];
        ranked = tx
            .reader()
            .lexical_search(&LexicalQuery {
                match_expression: &expression,
                projects: &projects,
                scopes: Some(&scopes),
                limit: CAPTURE_CANDIDATES,
                ..LexicalQuery::default()
            })?
            .iter()
            .map(|hit| hit.id)
            .collect();
    }
    let mut by_count: Vec<(usize, i64)> = held.into_iter().map(|(id, n)| (n, id)).collect();
    by_count.sort_by(|a, b| b.cmp(a));
    // The full-text ranking (when it answered) first: BM25 already weighs the shared words.
    let mut candidates = ranked;
    for (_, id) in by_count {
        if !candidates.contains(&id) {
            candidates.push(id);
        }
    }
    candidates.truncate(CAPTURE_CANDIDATES);
    Ok(candidates)
}

/// A fixed pseudo-random order of words (FNV-1a 64): the same words of two versions of a text
/// sort the same way wherever they stand in it.
fn sample_order(term: &str) -> u64 {
    term.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn find_contradictions(
    tx: &WriteTx<'_>,
    memory: &Memory,
    superseding: Option<i64>,
    ids: &[i64],
) -> Result<Vec<(i64, String)>> {
    let claim = claim_text(memory);
    let partition = memory.partition();
    let mut found = Vec::new();
    for candidate in tx.reader().get_many(ids)? {
        if candidate.status != Status::Active
            || candidate.partition() != partition
            || Some(candidate.id) == superseding
        {
            continue;
        }
        if let Some(reason) = polarity::contradiction(&claim, &claim_text(&candidate)) {
            found.push((candidate.id, reason));
        }
    }
    Ok(found)
}

/// The active record that an archived record with this content hash (same partition) was
/// merged into, following merges of merges.
fn merged_survivor(
    reader: &cairn_store::Reader<'_>,
    content_hash: &str,
    partition: &cairn_core::memory::Partition,
) -> Result<Option<Memory>> {
    const MAX_HOPS: usize = 32;
    for archived in reader.find_by_hash_any_status(content_hash)? {
        if archived.status != Status::Archived || &archived.partition() != partition {
            continue;
        }
        let mut id = archived.id;
        for _ in 0..MAX_HOPS {
            let Some(next) = reader.merged_into(id)? else {
                break;
            };
            match reader.get(next)? {
                Some(survivor) if survivor.status == Status::Active => {
                    return Ok((&survivor.partition() == partition).then_some(survivor));
                }
                Some(survivor) if survivor.status == Status::Archived => id = survivor.id,
                _ => break,
            }
        }
    }
    Ok(None)
}

/// Appends an event for `memory` and returns its receipt.
pub(crate) fn log_event(
    tx: &WriteTx<'_>,
    op: &str,
    memory: &Memory,
    at: &str,
    actor: &str,
    extra: serde_json::Value,
) -> Result<String> {
    let detail = json!({
        "op": op,
        "id": memory.id,
        "at": at,
        "content_hash": memory.content_hash,
        "status": memory.status.as_str(),
        "extra": extra,
    });
    let receipt = receipt::receipt(&detail);
    tx.append_event(
        &NewEvent {
            at,
            op,
            memory_id: Some(memory.id),
            project: memory.project.as_deref(),
            detail: &detail,
            actor,
        },
        &receipt,
    )?;
    Ok(receipt)
}
