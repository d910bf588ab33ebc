//! What is kept but never ranked (docs/design.md §9): tasks, measures, the identity, awareness items and
//! the activity log — plus the inbox of captured candidates and `review`.
//!
//! Text typed here goes through the same sanitizer and secret guard as a memory body. Every
//! change appends an event, so `cairn log` tells what a session did.

use crate::remember::RememberOutcome;
use crate::{Engine, EngineError, RememberRequest, Result};
use cairn_core::memory::Memory;
use cairn_core::record::{MemoryType, Trust};
use cairn_core::time::{format_ts, parse_time_ahead};
use cairn_core::{receipt, secrets, text};
use cairn_store::{
    AwarenessRow, ConflictRow, EventRow, IdentityRow, InboxRow, MeasureRow, NewEvent, TaskRow,
    WriteTx,
};
use chrono::Duration;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// At most this many live awareness items per project (docs/design.md §9).
pub const MAX_AWARENESS: usize = 10;
/// Default life of an awareness item.
pub const AWARENESS_DEFAULT_HOURS: i64 = 24;
/// The identity stays under 500 tokens; at about 4 characters a token that is 2,000 characters.
pub const MAX_IDENTITY_CHARS: usize = 2_000;
const MAX_TASK_CHARS: usize = 500;
const MAX_ITEM_CHARS: usize = 1_000;

/// Sanitized, secret-guarded, trimmed, size-checked text.
pub(crate) fn clean_text(value: &str, what: &'static str, limit: usize) -> Result<String> {
    let sanitized = text::sanitize(value)?;
    let guarded = secrets::redact(&sanitized.text);
    let cleaned = guarded.text.trim().to_string();
    if cleaned.is_empty() {
        return Err(EngineError::Empty { what });
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
    Ok(cleaned)
}

pub(crate) fn append_event(
    tx: &WriteTx<'_>,
    op: &str,
    project: Option<&str>,
    at: &str,
    actor: &str,
    detail: serde_json::Value,
) -> Result<()> {
    let mut detail = detail;
    detail["op"] = json!(op);
    detail["at"] = json!(at);
    let receipt = receipt::receipt(&detail);
    tx.append_event(
        &NewEvent {
            at,
            op,
            memory_id: None,
            project,
            detail: &detail,
            actor,
        },
        &receipt,
    )?;
    Ok(())
}

/// A measure's last value and trend.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeasureSummary {
    pub name: String,
    pub unit: Option<String>,
    pub last: f64,
    pub last_at: String,
    pub readings: usize,
    pub previous: Option<f64>,
    /// `rising`, `falling`, `steady` (against the mean of up to 4 earlier readings, ±1 %), or
    /// `first reading`.
    pub trend: String,
    pub history: Vec<MeasureRow>,
}

/// Most stale records one `review --stale-days` lists.
pub const REVIEW_STALE_LIMIT: usize = 100;

/// `review`: what needs a person's attention.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReviewReport {
    /// Active records past their review date.
    pub due: Vec<Memory>,
    /// Open contradictions between records.
    pub conflicts: Vec<ConflictRow>,
    /// Tier A/B records nobody re-checked (`verify`) in `stale_days` days, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_days: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<Memory>,
}

fn trend(values: &[f64]) -> String {
    let Some((last, earlier)) = values.split_last() else {
        return "no readings".into();
    };
    if earlier.is_empty() {
        return "first reading".into();
    }
    let window = &earlier[earlier.len().saturating_sub(4)..];
    let mean = window.iter().sum::<f64>() / window.len() as f64;
    let tolerance = mean.abs().max(f64::EPSILON) * 0.01;
    if *last > mean + tolerance {
        "rising".into()
    } else if *last < mean - tolerance {
        "falling".into()
    } else {
        "steady".into()
    }
}

impl Engine {
    fn project_for(&self, personal: bool) -> Option<String> {
        (!personal).then(|| self.context.project.clone())
    }

    // ---- tasks -------------------------------------------------------------------------

    /// Adds a task owed by this project (or a personal one).
    pub fn task_add(
        &mut self,
        title: &str,
        detail: Option<&str>,
        due: Option<&str>,
        personal: bool,
    ) -> Result<TaskRow> {
        self.ensure_writable("task add")?;
        let now = self.now();
        let at = format_ts(now);
        let title = clean_text(title, "the task", MAX_TASK_CHARS)?.replace('\n', " ");
        let detail = detail
            .map(|d| clean_text(d, "the task detail", MAX_ITEM_CHARS))
            .transpose()?;
        let due = due
            .map(|d| parse_time_ahead(d, now).map(format_ts))
            .transpose()?;
        let project = self.project_for(personal);
        let actor = self.context.actor.clone();
        let id = self.store.write(|tx| {
            let id = tx.insert_task(
                project.as_deref(),
                &title,
                detail.as_deref(),
                due.as_deref(),
                &at,
            )?;
            append_event(
                tx,
                "task_add",
                project.as_deref(),
                &at,
                &actor,
                json!({"task": id, "title": title}),
            )?;
            Ok::<_, EngineError>(id)
        })?;
        self.task(id)
    }

    pub fn task(&self, id: i64) -> Result<TaskRow> {
        self.store.reader()?.task(id)?.ok_or_else(|| {
            EngineError::Invalid(format!("no task {id}: `cairn task list` shows them"))
        })
    }

    /// Open tasks of this project and personal ones (done ones too with `include_done`).
    pub fn tasks(&self, include_done: bool) -> Result<Vec<TaskRow>> {
        Ok(self
            .store
            .reader()?
            .tasks(&self.visible_projects(), include_done)?)
    }

    /// Marks a task done (idempotent).
    pub fn task_done(&mut self, id: i64) -> Result<TaskRow> {
        self.ensure_writable("task done")?;
        let task = self.task(id)?;
        let at = format_ts(self.now());
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            if tx.finish_task(id, &at)? {
                append_event(
                    tx,
                    "task_done",
                    task.project.as_deref(),
                    &at,
                    &actor,
                    json!({"task": id, "title": task.title}),
                )?;
            }
            Ok::<_, EngineError>(())
        })?;
        self.task(id)
    }

    // ---- measures ----------------------------------------------------------------------

    /// Records one reading of a named value.
    pub fn measure_record(
        &mut self,
        name: &str,
        value: f64,
        unit: Option<&str>,
        note: Option<&str>,
    ) -> Result<MeasureSummary> {
        self.ensure_writable("measure record")?;
        if !value.is_finite() {
            return Err(EngineError::Invalid(format!(
                "{value} is not a number that can be recorded"
            )));
        }
        let name = clean_text(name, "the measure name", 100)?.replace('\n', " ");
        let unit = unit.map(|u| clean_text(u, "the unit", 20)).transpose()?;
        let note = note
            .map(|n| clean_text(n, "the note", MAX_ITEM_CHARS))
            .transpose()?;
        let at = format_ts(self.now());
        let project = Some(self.context.project.clone());
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let id = tx.insert_measure(
                project.as_deref(),
                &name,
                value,
                unit.as_deref(),
                note.as_deref(),
                &at,
            )?;
            append_event(
                tx,
                "measure",
                project.as_deref(),
                &at,
                &actor,
                json!({"measure": id, "name": name, "value": value}),
            )?;
            Ok::<_, EngineError>(())
        })?;
        self.measures(Some(&name))?
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::Invalid("the reading was not stored".into()))
    }

    /// Every measure (or one) with its last value and trend.
    pub fn measures(&self, name: Option<&str>) -> Result<Vec<MeasureSummary>> {
        let rows = self
            .store
            .reader()?
            .measures(&self.visible_projects(), name)?;
        let mut summaries: Vec<MeasureSummary> = Vec::new();
        for row in rows {
            match summaries.last_mut() {
                Some(summary) if summary.name == row.name => summary.history.push(row),
                _ => summaries.push(MeasureSummary {
                    name: row.name.clone(),
                    unit: None,
                    last: 0.0,
                    last_at: String::new(),
                    readings: 0,
                    previous: None,
                    trend: String::new(),
                    history: vec![row],
                }),
            }
        }
        for summary in &mut summaries {
            let values: Vec<f64> = summary.history.iter().map(|r| r.value).collect();
            let last = summary.history.last().expect("at least one reading");
            summary.last = last.value;
            summary.last_at = last.at.clone();
            summary.unit = last.unit.clone();
            summary.readings = values.len();
            summary.previous = values.len().checked_sub(2).map(|i| values[i]);
            summary.trend = trend(&values);
            let keep = summary.history.len().saturating_sub(10);
            summary.history.drain(..keep);
        }
        Ok(summaries)
    }

    // ---- identity ----------------------------------------------------------------------

    pub fn identity(&self) -> Result<Option<IdentityRow>> {
        Ok(self.store.reader()?.identity()?)
    }

    /// Replaces the identity (who the agent is; under 500 tokens).
    pub fn set_identity(&mut self, body: &str) -> Result<IdentityRow> {
        self.ensure_writable("identity set")?;
        let body = clean_text(body, "the identity", MAX_IDENTITY_CHARS)?;
        let at = format_ts(self.now());
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            tx.set_identity(&body, &at)?;
            append_event(
                tx,
                "identity_set",
                Some(&project),
                &at,
                &actor,
                json!({"chars": body.chars().count()}),
            )?;
            Ok::<_, EngineError>(())
        })?;
        self.identity()?
            .ok_or_else(|| EngineError::Invalid("the identity was not stored".into()))
    }

    // ---- awareness ---------------------------------------------------------------------

    /// Live awareness items of this project and personal ones.
    pub fn awareness(&self) -> Result<Vec<AwarenessRow>> {
        let now = format_ts(self.now());
        Ok(self
            .store
            .reader()?
            .awareness(&self.visible_projects(), &now)?)
    }

    /// Adds a short-lived working item (default life 24 h). With 10 already live, the one that
    /// expires soonest is dropped, and the answer says which.
    pub fn aware(
        &mut self,
        body: &str,
        expires: Option<&str>,
    ) -> Result<(AwarenessRow, Option<AwarenessRow>)> {
        self.ensure_writable("awareness add")?;
        let now = self.now();
        let body = clean_text(body, "the awareness item", MAX_ITEM_CHARS)?.replace('\n', " ");
        let expires_at = match expires {
            Some(given) => {
                // an age like `2h` means "for two hours", not "two hours ago"
                let at = parse_time_ahead(given, now)?;
                if at <= now {
                    return Err(EngineError::Invalid(format!(
                        "{given} is already past: give a future time or a duration like 2h or 3d"
                    )));
                }
                format_ts(at)
            }
            None => format_ts(now + Duration::hours(AWARENESS_DEFAULT_HOURS)),
        };
        let at = format_ts(now);
        let project = self.context.project.clone();
        let live = self.awareness()?;
        let mine: Vec<&AwarenessRow> = live
            .iter()
            .filter(|row| row.project.as_deref() == Some(project.as_str()))
            .collect();
        let dropped = if mine.len() >= MAX_AWARENESS {
            mine.iter()
                .min_by(|a, b| a.expires_at.cmp(&b.expires_at).then(a.id.cmp(&b.id)))
                .map(|row| (*row).clone())
        } else {
            None
        };
        let actor = self.context.actor.clone();
        let id = self.store.write(|tx| {
            tx.expire_awareness(&at)?;
            if let Some(row) = &dropped {
                tx.delete_awareness(row.id)?;
            }
            let id = tx.insert_awareness(Some(&project), &body, &at, &expires_at)?;
            append_event(
                tx,
                "aware",
                Some(&project),
                &at,
                &actor,
                json!({"awareness": id, "body": body, "expires_at": expires_at, "dropped": dropped.as_ref().map(|d| d.id)}),
            )?;
            Ok::<_, EngineError>(id)
        })?;
        let row = self
            .awareness()?
            .into_iter()
            .find(|row| row.id == id)
            .ok_or_else(|| EngineError::Invalid("the awareness item expired at once".into()))?;
        Ok((row, dropped))
    }

    /// Drops an awareness item before it expires.
    pub fn awareness_drop(&mut self, id: i64) -> Result<bool> {
        self.ensure_writable("awareness drop")?;
        let at = format_ts(self.now());
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            let dropped = tx.delete_awareness(id)?;
            if dropped {
                append_event(
                    tx,
                    "unaware",
                    Some(&project),
                    &at,
                    &actor,
                    json!({"awareness": id}),
                )?;
            }
            Ok::<_, EngineError>(dropped)
        })
    }

    // ---- the activity log --------------------------------------------------------------

    /// Events of this project (and personal ones), oldest first: the newest `limit`, or with
    /// `last_session` everything since the latest session start.
    pub fn activity(&self, limit: usize, last_session: bool) -> Result<Vec<EventRow>> {
        self.activity_by(limit, last_session, None)
    }

    /// [`Engine::activity`] of one actor when `actor` is given (`cairn log --actor`; `""` names
    /// the events written before schema v16, which recorded no actor).
    pub fn activity_by(
        &self,
        limit: usize,
        last_session: bool,
        actor: Option<&str>,
    ) -> Result<Vec<EventRow>> {
        let projects = self.visible_projects();
        let reader = self.store.reader()?;
        let from = if last_session {
            reader.last_event_id(&projects, "session_start")?
        } else {
            None
        };
        Ok(reader.project_events_by(&projects, from, actor, limit.max(1))?)
    }

    /// The actors of this project's (and personal) events, sorted: what `activity_by` can
    /// filter by.
    pub fn activity_actors(&self) -> Result<Vec<String>> {
        let projects = self.visible_projects();
        Ok(self.store.reader()?.event_actors(&projects)?)
    }

    /// Appends a bookkeeping event (hooks: `session_start`, `session_end`).
    pub fn note_event(&mut self, op: &str, detail: serde_json::Value) -> Result<()> {
        self.ensure_writable("log")?;
        let at = format_ts(self.now());
        let project = self.context.project.clone();
        let actor = self.context.actor.clone();
        self.store.write(|tx| {
            if op == "session_end" {
                tx.expire_awareness(&at)?;
            }
            append_event(tx, op, Some(&project), &at, &actor, detail)
        })
    }

    /// Passive use: the records of `ids` were handed to an agent (by the brief or the prompt
    /// hook). Sets their `surfaced_at`; `use_count`, `last_accessed_at` and ranking are left
    /// alone. Returns how many records were marked.
    pub fn note_surfaced(&mut self, ids: &[i64]) -> Result<usize> {
        self.ensure_writable("surfacing")?;
        if ids.is_empty() {
            return Ok(0);
        }
        let at = format_ts(self.now());
        self.store.write(|tx| Ok(tx.mark_surfaced(ids, &at)?))
    }

    /// When the record was last surfaced to an agent, `None` when never.
    pub fn surfaced_at(&self, id: i64) -> Result<Option<String>> {
        Ok(self.store.reader()?.surfaced(id)?.map(|(at, _)| at))
    }

    // ---- inbox and review --------------------------------------------------------------

    /// Captured candidates awaiting a decision (all of them with `all`).
    pub fn inbox(&self, all: bool) -> Result<Vec<InboxRow>> {
        Ok(self.store.reader()?.inbox(&self.visible_projects(), all)?)
    }

    fn inbox_item(&self, id: i64) -> Result<InboxRow> {
        self.inbox(true)?
            .into_iter()
            .find(|row| row.id == id)
            .ok_or_else(|| {
                EngineError::Invalid(format!("no inbox item {id}: `cairn inbox` lists them"))
            })
    }

    /// Keeps a candidate as a memory (through the whole write path; trust stays `captured`).
    pub fn inbox_accept(
        &mut self,
        id: i64,
        memory_type: Option<MemoryType>,
    ) -> Result<RememberOutcome> {
        let item = self.inbox_item(id)?;
        if let Some(resolution) = &item.resolution {
            return Err(EngineError::Invalid(format!(
                "inbox item {id} was already resolved ({resolution})"
            )));
        }
        let suggested = item.suggested_type.parse::<MemoryType>()?;
        let mut request = RememberRequest::new(memory_type.unwrap_or(suggested), item.body.clone());
        request.trust = Some(Trust::Captured);
        request.source = Some(item.source.clone());
        let outcome = self.remember(&request)?;
        if let Some(memory_id) = outcome.id {
            let at = format_ts(self.now());
            self.store.write(|tx| {
                tx.resolve_inbox(id, &format!("accepted as #{memory_id}"), &at)?;
                Ok::<_, EngineError>(())
            })?;
        }
        Ok(outcome)
    }

    /// Discards a candidate (kept, marked dismissed).
    pub fn inbox_dismiss(&mut self, id: i64) -> Result<InboxRow> {
        self.ensure_writable("inbox dismiss")?;
        self.inbox_item(id)?;
        let at = format_ts(self.now());
        self.store.write(|tx| {
            tx.resolve_inbox(id, "dismissed", &at)?;
            Ok::<_, EngineError>(())
        })?;
        self.inbox_item(id)
    }

    /// Records past their review date and open conflicts, in this project and personal ones.
    pub fn review(&self) -> Result<ReviewReport> {
        let now = format_ts(self.now());
        let projects = self.visible_projects();
        let reader = self.store.reader()?;
        let due = reader.review_due(&projects, &now)?;
        let mut conflicts = Vec::new();
        for conflict in reader.open_conflicts(None)? {
            let involved = reader.get_many(&[conflict.memory_id, conflict.other_id])?;
            if involved.iter().any(|m| projects.contains(&m.project)) {
                conflicts.push(conflict);
            }
        }
        Ok(ReviewReport {
            due,
            conflicts,
            stale_days: None,
            stale: Vec::new(),
        })
    }

    /// `review` plus the tier A/B records nobody re-checked in `stale_days` days (at most
    /// `REVIEW_STALE_LIMIT`, oldest first).
    pub fn review_stale(&self, stale_days: u32) -> Result<ReviewReport> {
        let mut report = self.review()?;
        let cutoff = format_ts(self.now() - chrono::Duration::days(i64::from(stale_days)));
        let types: Vec<&str> = cairn_core::record::MemoryType::ALL
            .iter()
            .filter(|t| {
                matches!(
                    t.tier(),
                    cairn_core::record::Tier::A | cairn_core::record::Tier::B
                )
            })
            .map(|t| t.as_str())
            .collect();
        let reader = self.store.reader()?;
        let ids = reader.stale_unverified(
            &self.visible_projects(),
            &types,
            &cutoff,
            REVIEW_STALE_LIMIT,
        )?;
        report.stale = reader.get_many(&ids)?;
        report.stale_days = Some(stale_days);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::trend;

    #[test]
    fn trends_compare_the_last_reading_with_the_recent_mean() {
        assert_eq!(trend(&[]), "no readings");
        assert_eq!(trend(&[3.0]), "first reading");
        assert_eq!(trend(&[1.0, 2.0, 3.0]), "rising");
        assert_eq!(trend(&[3.0, 2.0, 1.0]), "falling");
        assert_eq!(trend(&[100.0, 100.5]), "steady");
        // only the 4 readings before the last count
        assert_eq!(trend(&[1000.0, 1.0, 1.0, 1.0, 1.0, 1.0]), "steady");
    }
}
