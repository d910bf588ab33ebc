//! `cairn decay` (docs/design.md §8): archive expired records, lower the confidence of records nobody
//! accessed, archive those whose strength fell below the floor — never tier A, pinned records
//! or guardrails. Every change is a history version plus a `decay` event that says why, so
//! `decay --explain ID` can tell the story.

use crate::remember::log_event;
use crate::{Engine, EngineError, Result};
use cairn_core::lifecycle::{DecayInput, DecayVerdict, confidence_half_life, decay_verdict};
use cairn_core::memory::Memory;
use cairn_core::record::{Confidence, MemoryType, Status};
use cairn_core::text;
use cairn_core::time::format_ts;
use cairn_store::{EventRow, LifecycleRow, WriteTx};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One change decay made (or, with `--dry-run`, would make).
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DecayChange {
    pub id: i64,
    /// For people reading it; not stored with a dream's proposal (shown from the live record).
    #[serde(default)]
    pub label: String,
    /// `expired`, `archive` or `demote`.
    pub action: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strength: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_confidence: Option<Confidence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_confidence: Option<Confidence>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecayReport {
    pub dry_run: bool,
    /// Active records looked at (every project).
    pub examined: usize,
    /// Of those, never decaying (tier A, pinned, guardrails).
    pub exempt: usize,
    /// Exempt records whose expiry date passed (kept).
    pub expired_but_kept: Vec<i64>,
    pub changes: Vec<DecayChange>,
}

/// `decay --explain ID`: the record's verdict now and every decay event it had.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DecayExplanation {
    pub id: i64,
    pub label: String,
    pub status: Status,
    pub memory_type: MemoryType,
    pub confidence: Confidence,
    /// The half-life decay applies to this record, in days; `None`: never decays.
    pub half_life_days: Option<f64>,
    pub verdict: String,
    pub reason: String,
    pub strength: Option<f64>,
    pub events: Vec<EventRow>,
}

fn parse(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The decay input of a light row; `None` when a stored value does not parse (left alone).
pub(crate) fn input_of_row(row: &LifecycleRow) -> Option<DecayInput> {
    Some(DecayInput {
        memory_type: row.memory_type.parse().ok()?,
        pinned: row.pinned,
        confidence: row.confidence.parse().ok()?,
        created_at: parse(&row.created_at)?,
        // Passive use counts: idleness runs from the later of last access and last surfacing.
        last_accessed_at: later(
            row.last_accessed_at.as_deref().and_then(parse),
            row.last_surfaced_at.as_deref().and_then(parse),
        ),
        expires_at: row.expires_at.as_deref().and_then(parse),
    })
}

fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

pub(crate) fn input_of(memory: &Memory) -> Option<DecayInput> {
    Some(DecayInput {
        memory_type: memory.memory_type,
        pinned: memory.pinned,
        confidence: memory.confidence,
        created_at: parse(&memory.created_at)?,
        last_accessed_at: memory.last_accessed_at.as_deref().and_then(parse),
        expires_at: memory.expires_at.as_deref().and_then(parse),
    })
}

pub(crate) fn strength_of(verdict: &DecayVerdict) -> Option<f64> {
    match verdict {
        DecayVerdict::Archive { strength, .. }
        | DecayVerdict::Demote { strength, .. }
        | DecayVerdict::Keep { strength, .. } => Some(*strength),
        _ => None,
    }
}

pub(crate) fn change_of(memory_id: i64, label: String, verdict: &DecayVerdict) -> DecayChange {
    let (from_confidence, to_confidence) = match verdict {
        DecayVerdict::Demote { from, to, .. } => (Some(*from), Some(*to)),
        _ => (None, None),
    };
    DecayChange {
        id: memory_id,
        label,
        action: verdict.action().to_string(),
        reason: verdict.explain(),
        // Rounded: a proposal set's id hashes it, and the same brain a second later must
        // propose the same set.
        strength: strength_of(verdict).map(|s| (s * 1000.0).round() / 1000.0),
        from_confidence,
        to_confidence,
    }
}

/// Applies one decay change to a record inside a write transaction: a history version and a
/// `decay` event naming who decided (`by`: `decay` or the dream that proposed it).
pub(crate) fn apply_decay(
    tx: &WriteTx<'_>,
    previous: &Memory,
    change: &DecayChange,
    now: &str,
    actor: &str,
    by: &str,
) -> Result<Memory> {
    let mut changed = previous.clone();
    match change.action.as_str() {
        "expired" | "archive" => {
            changed.status = Status::Archived;
            changed.retired_at = Some(now.to_string());
        }
        "demote" => {
            changed.confidence = change.to_confidence.ok_or_else(|| {
                EngineError::Invalid(format!(
                    "decay change for #{} has no target confidence",
                    previous.id
                ))
            })?;
        }
        other => {
            return Err(EngineError::Invalid(format!(
                "decay action {other:?} changes nothing"
            )));
        }
    }
    changed.updated_at = now.to_string();
    let norm = changed.title.as_deref().map(text::normalize_title);
    tx.update_memory(&changed, norm.as_deref(), previous, "decay", actor)?;
    if changed.status == Status::Archived {
        tx.resolve_conflicts(previous.id, now)?;
    }
    log_event(
        tx,
        "decay",
        &changed,
        now,
        actor,
        json!({
            "action": change.action,
            "reason": change.reason,
            "strength": change.strength,
            "from_confidence": change.from_confidence,
            "to_confidence": change.to_confidence,
            "by": by,
        }),
    )?;
    Ok(changed)
}

impl Engine {
    /// What decay would do to every active record at `now`, from light rows.
    pub(crate) fn decay_plan(&self) -> Result<(DecayReport, Vec<(LifecycleRow, DecayVerdict)>)> {
        let now = self.now();
        let rows = self.store.reader()?.lifecycle_rows(false)?;
        let mut report = DecayReport {
            dry_run: true,
            examined: rows.len(),
            exempt: 0,
            expired_but_kept: Vec::new(),
            changes: Vec::new(),
        };
        let mut planned = Vec::new();
        for row in rows {
            let Some(input) = input_of_row(&row) else {
                continue;
            };
            let verdict = decay_verdict(&input, now);
            if let DecayVerdict::Exempt { expired, .. } = verdict {
                report.exempt += 1;
                if expired {
                    report.expired_but_kept.push(row.id);
                }
                continue;
            }
            if verdict.changes() {
                let label = format!(
                    "#{} {}",
                    row.id,
                    row.title
                        .as_deref()
                        .unwrap_or(&row.opening)
                        .replace('\n', " ")
                );
                report.changes.push(change_of(row.id, label, &verdict));
                planned.push((row, verdict));
            }
        }
        Ok((report, planned))
    }

    /// `cairn decay [--dry-run]`: applies (or only lists) every decay change, each as its own
    /// history version and event, all in one transaction.
    pub fn decay(&mut self, dry_run: bool) -> Result<DecayReport> {
        self.decay_where(dry_run, false)
    }

    /// Decay's demotions only (a lower confidence; the record stays active): what
    /// `dream.auto_accept = safe` lets the unattended maintenance apply. Archives — expired or
    /// below the floor — are left for `cairn decay` or a dream's proposal set.
    pub fn decay_demotions(&mut self) -> Result<DecayReport> {
        self.decay_where(false, true)
    }

    fn decay_where(&mut self, dry_run: bool, demotions_only: bool) -> Result<DecayReport> {
        if !dry_run {
            self.ensure_writable("decay")?;
        }
        let (mut report, _) = self.decay_plan()?;
        if demotions_only {
            report.changes.retain(|change| change.action == "demote");
        }
        report.dry_run = dry_run;
        if dry_run || report.changes.is_empty() {
            return Ok(report);
        }
        let now = format_ts(self.now());
        let actor = self.context.actor.clone();
        let changes = report.changes.clone();
        let applied = self.store.write(|tx| {
            let mut applied = Vec::new();
            for change in &changes {
                let Some(previous) = tx.reader().get(change.id)? else {
                    continue;
                };
                if previous.status != Status::Active {
                    continue;
                }
                let mut change = change.clone();
                change.label = previous.label();
                apply_decay(tx, &previous, &change, &now, &actor, "decay")?;
                applied.push(change);
            }
            Ok::<_, EngineError>(applied)
        })?;
        report.changes = applied;
        Ok(report)
    }

    /// `cairn decay --explain ID`: what decay did to a record and why, and what it would do now.
    pub fn decay_explain(&self, id: i64) -> Result<DecayExplanation> {
        let memory = self.get(id)?;
        let events: Vec<EventRow> = self
            .store
            .reader()?
            .events(Some(id), 0)?
            .into_iter()
            .filter(|e| {
                e.op == "decay"
                    || e.op == "restore"
                    || e.op == "verify"
                    || e.op == "merge"
                    || e.op == "forget"
            })
            .collect();
        let (verdict, reason, strength) = if memory.status != Status::Active {
            (
                "not active".to_string(),
                format!(
                    "#{id} is {}: decay only looks at active records (`cairn restore {id}` brings an archived one back)",
                    memory.status
                ),
                None,
            )
        } else {
            let surfaced = self.store.reader()?.surfaced(id)?.map(|(at, _)| at);
            match input_of(&memory).map(|mut input| {
                input.last_accessed_at =
                    later(input.last_accessed_at, surfaced.as_deref().and_then(parse));
                input
            }) {
                Some(input) => {
                    let verdict = decay_verdict(&input, self.now());
                    (
                        verdict.action().to_string(),
                        verdict.explain(),
                        strength_of(&verdict),
                    )
                }
                None => (
                    "unreadable".to_string(),
                    "a stored timestamp does not parse; decay leaves the record alone".to_string(),
                    None,
                ),
            }
        };
        Ok(DecayExplanation {
            id,
            label: memory.label(),
            status: memory.status,
            memory_type: memory.memory_type,
            confidence: memory.confidence,
            half_life_days: if memory.pinned || memory.memory_type.is_guardrail() {
                None
            } else {
                confidence_half_life(memory.memory_type.tier())
            },
            verdict,
            reason,
            strength,
            events,
        })
    }
}
