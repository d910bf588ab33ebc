//! Fact extraction (issue 18): a session's captured turns become candidate durable records.
//!
//! With an LLM (`llm.command` / `llm.url`) the turns are sent in batches under the contract of
//! `cairn_core::extraction` (the LLM runs read-only, marked as a nested run); without one, the
//! deterministic candidates (an error and its fix → `gotcha`, "we decided" → `decision`).
//! Every candidate is validated, then goes through the ordinary write path with trust
//! `captured` and confidence `inferred` (`capture.extract = auto`) or into the inbox (the
//! default). A batch's candidates and the session's progress mark are written in ONE
//! transaction: a crash mid-extraction leaves nothing half-stored and the next run resumes
//! from the last whole batch. One extraction at a time per brain (a lock file next to it):
//! a second one at the same moment reports `busy` and does nothing.

use crate::lifecycle::llm::LlmConfig;
use crate::remember::{RememberStatus, TermCounts, prepare, remember_in_batch};
use crate::{Engine, EngineError, RememberRequest, Result};
use cairn_core::extraction::{self, Fact};
use cairn_core::record::{Confidence, Trust};
use cairn_core::time::format_ts;
use cairn_core::{secrets, text};
use cairn_store::{NewInboxItem, WriteTx};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Most turns in one LLM call.
pub const BATCH_TURNS: usize = 100;
/// Most characters of turns in one LLM call.
pub const BATCH_CHARS: usize = 60_000;
/// Longest reply read, in bytes.
pub const MAX_EXTRACTION_REPLY_BYTES: usize = 64 * 1024;
/// Most sessions one run without `--session` looks at (most recently captured first).
pub const MAX_SESSIONS: usize = 20;

/// Where validated candidates go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExtractTarget {
    /// The inbox, for review (`cairn inbox accept`): the default.
    Inbox,
    /// Stored directly through the write path (`capture.extract = auto`).
    Auto,
}

impl ExtractTarget {
    /// The `capture.extract` setting's value: `inbox` (default) or `auto`.
    pub fn parse(value: &str) -> Option<ExtractTarget> {
        match value.trim() {
            "inbox" => Some(ExtractTarget::Inbox),
            "auto" => Some(ExtractTarget::Auto),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExtractOptions {
    /// One session (the client's session id); `None`: every captured session with new turns.
    pub session: Option<String>,
    pub llm: Option<LlmConfig>,
    pub target: ExtractTarget,
    /// Most LLM calls this run makes; the rest waits for the next run.
    pub max_calls: usize,
}

/// What one extraction did (the JSON of `cairn extract --json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ExtractReport {
    /// `llm` or `deterministic`.
    pub method: String,
    /// Another extraction of this brain was running: this one did nothing.
    pub busy: bool,
    pub sessions: usize,
    pub turns: usize,
    pub llm_calls: usize,
    /// Candidates the LLM (or the deterministic rules) proposed.
    pub candidates: usize,
    /// Stored as new records (`auto`).
    pub stored: usize,
    /// Put in the inbox (`inbox`).
    pub inbox: usize,
    /// Updated a record of the same identity in place (`auto`).
    pub updated: usize,
    /// Already known: an exact duplicate or an inbox item with the same text (no-op).
    pub duplicates: usize,
    /// Stored with a contradiction flagged (`auto`; `cairn review`).
    pub flagged: usize,
    /// Refused by the write path (a near duplicate, a size limit, …).
    pub refused: usize,
    /// Invalid candidates (schema, size, turns that do not exist or do not support it).
    pub dropped: usize,
    /// Why candidates were dropped or refused (at most 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Batches that failed (the LLM missing, hanging, answering garbage): their turns wait for
    /// the next run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Turns left for a later run (the call budget ran out or a batch failed).
    pub pending_turns: usize,
    pub elapsed_ms: u64,
    /// Of which waiting for the LLM.
    pub llm_ms: u64,
}

impl ExtractReport {
    fn reason(&mut self, why: String) {
        if self.reasons.len() < 20 {
            self.reasons.push(why);
        }
    }
}

/// The `meta` key of a session's progress: the last turn id extraction took.
fn progress_key(session: &str) -> String {
    format!("extract.done.{session}")
}

/// The lock file that keeps extractions of one brain one at a time.
fn lock_path(db: &std::path::Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".extract.lock");
    db.with_file_name(name)
}

impl Engine {
    /// Extracts candidate durable records from captured sessions (see the module doc).
    pub fn extract(&mut self, options: &ExtractOptions) -> Result<ExtractReport> {
        self.ensure_writable("extract")?;
        let started = Instant::now();
        let mut report = ExtractReport {
            method: if options.llm.is_some() {
                "llm"
            } else {
                "deterministic"
            }
            .to_string(),
            ..ExtractReport::default()
        };
        let lock_file = lock_path(self.store.sqlite()?.path());
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(|source| EngineError::Io {
                path: lock_file.clone(),
                source,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                report.busy = true;
                return Ok(report);
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(EngineError::Io {
                    path: lock_file,
                    source,
                });
            }
        }
        let sessions = match &options.session {
            Some(session) => vec![session.clone()],
            None => self.store.reader()?.captured_sessions(MAX_SESSIONS)?,
        };
        let mut calls_left = options.max_calls;
        for session in &sessions {
            self.extract_session(session, options, &mut calls_left, &mut report)?;
        }
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        drop(lock); // released here (and by the OS if the process dies)
        Ok(report)
    }

    /// Whether session `session` has captured turns no extraction has taken yet.
    pub fn has_turns_to_extract(&self, session: &str) -> Result<bool> {
        let done: i64 = self
            .store
            .reader()?
            .meta(&progress_key(session))?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(self
            .store
            .reader()?
            .has_session_turns_after(session, done)?)
    }

    fn extract_session(
        &mut self,
        session: &str,
        options: &ExtractOptions,
        calls_left: &mut usize,
        report: &mut ExtractReport,
    ) -> Result<()> {
        let key = progress_key(session);
        let mut done: i64 = self
            .store
            .reader()?
            .meta(&key)?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut counted_session = false;
        loop {
            let turns = self
                .store
                .reader()?
                .session_turns(session, done, BATCH_TURNS)?;
            if turns.is_empty() {
                return Ok(());
            }
            if !counted_session {
                report.sessions += 1;
                counted_session = true;
            }
            let mut batch = Vec::new();
            let mut chars = 0;
            for (id, body) in turns {
                let size = body.chars().count().min(extraction::MAX_TURN_CHARS);
                if !batch.is_empty() && chars + size > BATCH_CHARS {
                    break;
                }
                chars += size;
                batch.push((id, body));
            }
            let last = batch.last().map_or(done, |(id, _)| *id);
            let facts = match &options.llm {
                Some(llm) => {
                    if *calls_left == 0 {
                        report.pending_turns += self.pending_after(session, done)?;
                        return Ok(());
                    }
                    *calls_left -= 1;
                    report.llm_calls += 1;
                    let waited = Instant::now();
                    let reply =
                        llm.complete_data(&extraction::prompt(&batch), MAX_EXTRACTION_REPLY_BYTES);
                    report.llm_ms += waited.elapsed().as_millis() as u64;
                    let candidates = match reply.and_then(|r| extraction::facts_of_reply(&r)) {
                        Ok(candidates) => candidates,
                        Err(error) => {
                            report.errors.push(format!("session {session}: {error}"));
                            report.pending_turns += self.pending_after(session, done)?;
                            return Ok(());
                        }
                    };
                    let known: BTreeMap<i64, String> = batch.iter().cloned().collect();
                    validated(&candidates, &known, report)
                }
                None => {
                    let facts = extraction::deterministic(&batch);
                    report.candidates += facts.len();
                    facts
                }
            };
            report.turns += batch.len();
            let by = options
                .llm
                .as_ref()
                .map_or("deterministic rules".to_string(), LlmConfig::describe);
            self.store_facts(session, &facts, last, &by, options.target, report)?;
            done = last;
        }
    }

    fn pending_after(&self, session: &str, after: i64) -> Result<usize> {
        Ok(self
            .store
            .reader()?
            .session_turns(session, after, usize::MAX >> 1)?
            .len())
    }

    /// Candidates from elsewhere than an LLM call — `cairn eval locomo --facts observations`
    /// hands over LoCoMo's per-session observations — through the same path as a reply:
    /// validated against every captured turn of `session` (the contract's JSON objects, each
    /// citing its turns by record id), then stored (`target`) with the session's progress
    /// moved past those turns, so a later `cairn extract` does not read them again. `by`
    /// names where they came from in each record's source.
    pub fn extract_candidates(
        &mut self,
        session: &str,
        candidates: &[serde_json::Value],
        by: &str,
        target: ExtractTarget,
    ) -> Result<ExtractReport> {
        self.ensure_writable("extract")?;
        let started = Instant::now();
        let turns = self
            .store
            .reader()?
            .session_turns(session, 0, usize::MAX >> 1)?;
        let mut report = ExtractReport {
            method: "given".to_string(),
            sessions: usize::from(!turns.is_empty()),
            turns: turns.len(),
            ..ExtractReport::default()
        };
        let Some(last) = turns.last().map(|(id, _)| *id) else {
            report.dropped = candidates.len();
            report.candidates = candidates.len();
            if !candidates.is_empty() {
                report.reason(format!("dropped: session {session} has no captured turns"));
            }
            return Ok(report);
        };
        let known: BTreeMap<i64, String> = turns.into_iter().collect();
        let facts = validated_all(candidates, &known, &mut report);
        self.store_facts(session, &facts, last, by, target, &mut report)?;
        report.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// The turns a record was extracted from (its `derived_from` edges), lowest id first;
    /// empty for a record that was not extracted or was stored before the link existed.
    pub fn derived_turns(&self, record: i64) -> Result<Vec<i64>> {
        Ok(self
            .store
            .reader()?
            .open_targets(
                cairn_core::graph::Node::record(record),
                crate::graph::write::DERIVED_FROM,
            )?
            .into_iter()
            .filter(|(node, _)| node.kind == cairn_core::graph::NodeKind::Record)
            .map(|(node, _)| node.id)
            .collect())
    }

    /// One batch's candidates and the session's progress, in one transaction.
    fn store_facts(
        &mut self,
        session: &str,
        facts: &[Fact],
        last: i64,
        by: &str,
        target: ExtractTarget,
        report: &mut ExtractReport,
    ) -> Result<()> {
        let now = self.now();
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        let extract_entities = self.extract_entities;
        let mut tally = ExtractReport::default();
        self.store.write(|tx| {
            let mut counts = TermCounts::default();
            for fact in facts {
                let source = format!(
                    "extracted by {by} from session {session}, turns {}",
                    fact.turns
                        .iter()
                        .map(|id| format!("#{id}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                match target {
                    ExtractTarget::Inbox => {
                        store_in_inbox(tx, fact, &project, &source, now, &mut tally)?
                    }
                    ExtractTarget::Auto => store_record(
                        tx,
                        fact,
                        &source,
                        now,
                        &actor,
                        &project,
                        extract_entities,
                        &mut counts,
                        &mut tally,
                    )?,
                }
            }
            tx.set_meta(&progress_key(session), &last.to_string())?;
            Ok::<_, EngineError>(())
        })?;
        report.stored += tally.stored;
        report.inbox += tally.inbox;
        report.updated += tally.updated;
        report.duplicates += tally.duplicates;
        report.flagged += tally.flagged;
        report.refused += tally.refused;
        for reason in tally.reasons {
            report.reason(reason);
        }
        Ok(())
    }
}

/// The valid candidates of one reply (at most `MAX_FACTS_PER_REPLY`); the others are dropped
/// and counted, with the reason.
fn validated(
    candidates: &[serde_json::Value],
    known: &BTreeMap<i64, String>,
    report: &mut ExtractReport,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    for (index, candidate) in candidates.iter().enumerate() {
        report.candidates += 1;
        if index >= extraction::MAX_FACTS_PER_REPLY {
            report.dropped += 1;
            continue;
        }
        validate_one(candidate, known, &mut facts, report);
    }
    facts
}

/// Every valid candidate, with no per-reply cap (candidates not from one LLM reply).
fn validated_all(
    candidates: &[serde_json::Value],
    known: &BTreeMap<i64, String>,
    report: &mut ExtractReport,
) -> Vec<Fact> {
    let mut facts = Vec::new();
    for candidate in candidates {
        report.candidates += 1;
        validate_one(candidate, known, &mut facts, report);
    }
    facts
}

fn validate_one(
    candidate: &serde_json::Value,
    known: &BTreeMap<i64, String>,
    facts: &mut Vec<Fact>,
    report: &mut ExtractReport,
) {
    match extraction::validate(candidate, known) {
        Ok(fact) => facts.push(fact),
        Err(why) => {
            report.dropped += 1;
            report.reason(format!("dropped: {why}"));
        }
    }
}

fn store_in_inbox(
    tx: &WriteTx<'_>,
    fact: &Fact,
    project: &str,
    source: &str,
    now: DateTime<Utc>,
    tally: &mut ExtractReport,
) -> Result<()> {
    let joined = match &fact.title {
        Some(title) if !fact.body.starts_with(title.as_str()) => {
            format!("{title}: {}", fact.body)
        }
        _ => fact.body.clone(),
    };
    let Ok(sanitized) = text::sanitize(&joined) else {
        tally.refused += 1;
        tally.reason("refused: the candidate is not usable text".into());
        return Ok(());
    };
    let body = secrets::redact(&sanitized.text).text;
    let hash = text::content_hash(&body);
    let added = tx.insert_inbox(&NewInboxItem {
        project: Some(project),
        kind: "extracted",
        suggested_type: fact.memory_type.as_str(),
        body: &body,
        content_hash: &hash,
        source,
        at: &format_ts(now),
    })?;
    if added.is_some() {
        tally.inbox += 1;
    } else {
        tally.duplicates += 1;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn store_record(
    tx: &WriteTx<'_>,
    fact: &Fact,
    source: &str,
    now: DateTime<Utc>,
    actor: &str,
    project: &str,
    extract_entities: bool,
    counts: &mut TermCounts<'_>,
    tally: &mut ExtractReport,
) -> Result<()> {
    let mut request = RememberRequest::new(fact.memory_type, fact.body.clone());
    request.title = fact.title.clone();
    request.trust = Some(Trust::Captured);
    request.confidence = Some(Confidence::Inferred);
    request.source = Some(source.to_string());
    request.tags = vec!["extracted".to_string()];
    let prepared = match prepare(&request, Some(project.to_string()), now, None) {
        Ok(prepared) => prepared,
        Err(error) => {
            tally.refused += 1;
            tally.reason(format!("refused: {error}"));
            return Ok(());
        }
    };
    let outcome = remember_in_batch(tx, &request, prepared, now, actor, counts)?;
    crate::graph::write::after_remember(tx, &request, &outcome, now, actor, extract_entities)?;
    if let Some(id) = outcome.id
        && matches!(
            outcome.status,
            RememberStatus::Added | RememberStatus::Flagged | RememberStatus::Updated
        )
    {
        // the link to its supporting turns (`derived_from`), through the graph API
        crate::graph::write::record_derived_from(tx, id, &fact.turns, &format_ts(now), actor)?;
    }
    match outcome.status {
        RememberStatus::Added => tally.stored += 1,
        RememberStatus::Flagged => {
            tally.stored += 1;
            tally.flagged += 1;
        }
        RememberStatus::Updated => tally.updated += 1,
        RememberStatus::Noop => tally.duplicates += 1,
        RememberStatus::Refused => {
            tally.refused += 1;
            tally.reason(format!("refused: {}", outcome.message));
        }
    }
    Ok(())
}
