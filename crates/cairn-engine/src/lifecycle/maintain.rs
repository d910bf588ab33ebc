//! Maintenance on its own (issue 18): what a session's end makes due, run detached from the
//! hook (`cairn maintain`), one run at a time per brain, each step within its interval.
//!
//! The steps, in order: the **extraction** of the session's captured turns (whenever turns
//! wait, unless `capture.extract = off`), the **embedding** of records still waiting for a
//! vector (`maintenance.embed`), **decay** (`maintenance.decay_every`, default daily) and an
//! unattended **dream** (`maintenance.dream_every`, default daily). What the unattended steps
//! apply is `dream.auto_accept`'s: `false` nothing (decay is left to the dream's proposal set,
//! for a person), `safe` only what loses nothing (decay demotions; a dream's summaries,
//! reflections and demotions — never an archive, a merge or a forget), `true` everything.
//! Each step's last run (when, how it ended, what it did) is kept in `meta` under
//! `maintenance.last.STEP`; `cairn maintain --status` reads it. A step that fails is recorded
//! with its error and the next steps still run; it is tried again once its interval passed.

use super::decay::DecayReport;
use super::dream::DreamOptions;
use crate::extract::ExtractOptions;
use crate::{Engine, EngineError, Result};
use cairn_core::time::format_ts;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Instant;

/// The steps, in the order they run.
pub const STEPS: &[&str] = &["extract", "embed", "decay", "dream"];

/// `dream.auto_accept`: what unattended runs may apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoAccept {
    /// Nothing: dreams propose, decay waits in their sets.
    No,
    /// What loses nothing: summaries, reflections, decay demotions.
    Safe,
    /// Everything.
    All,
}

impl AutoAccept {
    /// The setting's value (`false`, `safe`, `true`); anything else is `false`.
    pub fn parse(value: &str) -> AutoAccept {
        match value.trim() {
            "true" => AutoAccept::All,
            "safe" => AutoAccept::Safe,
            _ => AutoAccept::No,
        }
    }
}

/// Who embeds the records waiting for a vector during a maintenance run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedStep {
    /// Nobody: no embedder is configured, or `maintenance.embed = off`.
    Off,
    /// The run itself (the CLI's `cairn maintain`).
    Here,
    /// A server's background indexer, which embeds them on its own connection as they come
    /// (`cairn serve`): the run leaves them to it.
    Indexer,
}

/// What one maintenance run may do, from the brain's settings ([`Engine::maintain_options`]).
#[derive(Debug, Clone)]
pub struct MaintainOptions {
    /// The extraction (`None`: `capture.extract = off`).
    pub extract: Option<ExtractOptions>,
    /// Who embeds the records waiting for a vector.
    pub embed: EmbedStep,
    /// `maintenance.decay_every` (`None`: off).
    pub decay_every: Option<TimeDelta>,
    /// `maintenance.dream_every` (`None`: off).
    pub dream_every: Option<TimeDelta>,
    pub auto_accept: AutoAccept,
    /// The dream's LLM, budget and pruning (its accept fields are set from `auto_accept`).
    pub dream: DreamOptions,
}

impl MaintainOptions {
    /// Decay's interval as the maintenance sees it: `None` (never due) when
    /// `dream.auto_accept = false` lets it apply nothing.
    fn decay_interval(&self) -> Option<TimeDelta> {
        self.decay_every
            .filter(|_| self.auto_accept != AutoAccept::No)
    }
}

/// A step's last run, as kept in `meta` (and shown by `cairn maintain --status`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct StepRun {
    pub step: String,
    /// When it ran (the engine's clock).
    pub at: String,
    /// `ok`, `error` or `busy` (another run of that step held its lock).
    pub outcome: String,
    /// What it did, in one line.
    pub summary: String,
    pub elapsed_ms: u64,
}

/// One step of this run: what it did, or why it did not run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepReport {
    pub step: String,
    /// Whether it ran this time.
    pub ran: bool,
    /// Its run (when `ran`), else why not: `not due until …`, `off`, `nothing waits`, ….
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<StepRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// What `cairn maintain` did (its `--json`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MaintainReport {
    /// Another maintenance run of this brain was going on: this one did nothing.
    pub busy: bool,
    pub steps: Vec<StepReport>,
    pub elapsed_ms: u64,
}

/// One step's state for `cairn maintain --status`: its last run and when it is due next.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepState {
    pub step: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<StepRun>,
    /// `now`, a time, `off`, or `when turns wait` / `when records wait` for the
    /// extraction and the embedding.
    pub due: String,
}

fn state_key(step: &str) -> String {
    format!("maintenance.last.{step}")
}

fn lock_path(db: &std::path::Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".maintain.lock");
    db.with_file_name(name)
}

fn parse_at(at: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl Engine {
    /// A step's last run, if it ever ran (an unreadable entry counts as never).
    pub fn maintenance_last(&self, step: &str) -> Result<Option<StepRun>> {
        Ok(self
            .store
            .reader()?
            .meta(&state_key(step))?
            .and_then(|json| serde_json::from_str(&json).ok()))
    }

    /// When an interval step (`decay`, `dream`) is due next: `None` when it is off, the last
    /// run plus the interval, or the beginning of time when it never ran (due whatever the
    /// clock says).
    fn next_due(&self, step: &str, every: Option<TimeDelta>) -> Result<Option<DateTime<Utc>>> {
        let Some(every) = every else { return Ok(None) };
        let last = self
            .maintenance_last(step)?
            .and_then(|run| parse_at(&run.at));
        Ok(Some(match last {
            Some(at) => at.checked_add_signed(every).unwrap_or(at),
            None => DateTime::<Utc>::MIN_UTC,
        }))
    }

    /// Whether anything is due for session `session` (cheap reads only: what the session-end
    /// hook asks before it starts a maintenance run).
    pub fn maintenance_due(
        &self,
        options: &MaintainOptions,
        session: Option<&str>,
    ) -> Result<bool> {
        let now = self.now();
        if options.extract.is_some() {
            match session {
                Some(session) if self.has_turns_to_extract(session)? => return Ok(true),
                None => return Ok(true),
                _ => {}
            }
        }
        if options.embed == EmbedStep::Here && self.store.reader()?.vector_counts()?.pending() > 0 {
            return Ok(true);
        }
        for (step, every) in [
            ("decay", options.decay_interval()),
            ("dream", options.dream_every),
        ] {
            if self.next_due(step, every)?.is_some_and(|due| due <= now) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every step's last run and when it is due next.
    pub fn maintenance_status(&self, options: &MaintainOptions) -> Result<Vec<StepState>> {
        let now = self.now();
        let mut states = Vec::new();
        for step in STEPS {
            let due = match *step {
                "extract" if options.extract.is_none() => "off".to_string(),
                "extract" => "when turns wait".to_string(),
                "embed" => match options.embed {
                    EmbedStep::Off => "off".to_string(),
                    EmbedStep::Here => "when records wait".to_string(),
                    EmbedStep::Indexer => "always: the server's background indexer".to_string(),
                },
                "decay" if options.auto_accept == AutoAccept::No => {
                    "off (dream.auto_accept = false: the dream proposes decay)".to_string()
                }
                _ => {
                    let every = if *step == "decay" {
                        options.decay_every
                    } else {
                        options.dream_every
                    };
                    match self.next_due(step, every)? {
                        None => "off".to_string(),
                        Some(at) if at <= now => "now".to_string(),
                        Some(at) => format_ts(at),
                    }
                }
            };
            states.push(StepState {
                step: step.to_string(),
                last: self.maintenance_last(step)?,
                due,
            });
        }
        Ok(states)
    }

    /// Runs what is due (see the module doc), one run at a time per brain: a second run
    /// started meanwhile reports `busy` and does nothing.
    pub fn maintain(
        &mut self,
        options: &MaintainOptions,
        session: Option<&str>,
    ) -> Result<MaintainReport> {
        self.ensure_writable("maintain")?;
        let started = Instant::now();
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
                return Ok(MaintainReport {
                    busy: true,
                    steps: Vec::new(),
                    elapsed_ms: started.elapsed().as_millis() as u64,
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(EngineError::Io {
                    path: lock_file,
                    source,
                });
            }
        }
        // in order: what the extraction stores is embedded, then decay and the dream see it
        let steps = vec![
            self.extract_step(options, session)?,
            self.embed_step(options)?,
            self.decay_step(options)?,
            self.dream_step(options)?,
        ];
        drop(lock);
        Ok(MaintainReport {
            busy: false,
            steps,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Records a step's run in `meta` and returns its report.
    fn record_step(
        &mut self,
        step: &str,
        at: DateTime<Utc>,
        started: Instant,
        result: Result<(String, String)>,
    ) -> Result<StepReport> {
        let (outcome, summary) = match result {
            Ok(done) => done,
            Err(error) => ("error".to_string(), error.to_string()),
        };
        let run = StepRun {
            step: step.to_string(),
            at: format_ts(at),
            outcome,
            summary,
            elapsed_ms: started.elapsed().as_millis() as u64,
        };
        let json = serde_json::to_string(&run).expect("a step run serializes");
        let key = state_key(step);
        self.store.write(|tx| {
            tx.set_meta(&key, &json)?;
            Ok::<_, EngineError>(())
        })?;
        Ok(StepReport {
            step: step.to_string(),
            ran: true,
            run: Some(run),
            skipped: None,
        })
    }

    fn skipped(step: &str, why: String) -> StepReport {
        StepReport {
            step: step.to_string(),
            ran: false,
            run: None,
            skipped: Some(why),
        }
    }

    fn extract_step(
        &mut self,
        options: &MaintainOptions,
        session: Option<&str>,
    ) -> Result<StepReport> {
        let Some(extract) = &options.extract else {
            return Ok(Self::skipped(
                "extract",
                "off (capture.extract = off)".into(),
            ));
        };
        if let Some(session) = session
            && !self.has_turns_to_extract(session)?
        {
            return Ok(Self::skipped(
                "extract",
                format!("no turn of session {session} waits"),
            ));
        }
        let mut extract = extract.clone();
        extract.session = session.map(str::to_string);
        let (at, started) = (self.now(), Instant::now());
        let result = self.extract(&extract).map(|report| {
            if report.busy {
                return (
                    "busy".to_string(),
                    "another extraction of this brain was running".to_string(),
                );
            }
            let outcome = if report.errors.is_empty() {
                "ok"
            } else {
                "error"
            };
            let mut summary = format!(
                "{} turns of {} sessions ({}, {} LLM calls): {} candidates — {} to the inbox, {} stored, {} updated, {} already known, {} refused, {} dropped",
                report.turns,
                report.sessions,
                report.method,
                report.llm_calls,
                report.candidates,
                report.inbox,
                report.stored,
                report.updated,
                report.duplicates,
                report.refused,
                report.dropped
            );
            for error in &report.errors {
                summary.push_str(&format!("; error: {error}"));
            }
            (outcome.to_string(), summary)
        });
        self.record_step("extract", at, started, result)
    }

    fn embed_step(&mut self, options: &MaintainOptions) -> Result<StepReport> {
        match options.embed {
            EmbedStep::Off => {
                return Ok(Self::skipped(
                    "embed",
                    "off (no embedder configured, or maintenance.embed = off)".into(),
                ));
            }
            EmbedStep::Indexer => {
                return Ok(Self::skipped(
                    "embed",
                    "left to the server's background indexer (it embeds records waiting for a vector as they come)".into(),
                ));
            }
            EmbedStep::Here => {}
        }
        let pending = self.store.reader()?.vector_counts()?.pending();
        if pending == 0 {
            return Ok(Self::skipped(
                "embed",
                "no record waits for a vector".into(),
            ));
        }
        let (at, started) = (self.now(), Instant::now());
        let result = self.index_pending(None, &mut |_, _| {}).map(|report| {
            let mut summary = format!(
                "{} embedded, {} reused, {} failed, {} still pending",
                report.embedded, report.reused, report.failed, report.pending
            );
            for error in &report.errors {
                summary.push_str(&format!("; {error}"));
            }
            let outcome = if report.failed == 0 { "ok" } else { "error" };
            (outcome.to_string(), summary)
        });
        self.record_step("embed", at, started, result)
    }

    /// Whether an interval step is due now; `Err(why not)` when it is not.
    fn due(&self, step: &str, every: Option<TimeDelta>) -> Result<std::result::Result<(), String>> {
        Ok(match self.next_due(step, every)? {
            None => Err(format!("off (maintenance.{step}_every = off)")),
            Some(at) if at > self.now() => Err(format!("not due until {}", format_ts(at))),
            Some(_) => Ok(()),
        })
    }

    fn decay_step(&mut self, options: &MaintainOptions) -> Result<StepReport> {
        if let Err(why) = self.due("decay", options.decay_every)? {
            return Ok(Self::skipped("decay", why));
        }
        if options.auto_accept == AutoAccept::No {
            return Ok(Self::skipped(
                "decay",
                "dream.auto_accept = false: nothing is applied unattended (the dream proposes decay for a person: `cairn dream list`)".into(),
            ));
        }
        let (at, started) = (self.now(), Instant::now());
        let demotions_only = options.auto_accept == AutoAccept::Safe;
        let result = if demotions_only {
            self.decay_demotions()
        } else {
            self.decay(false)
        }
        .map(|report: DecayReport| {
            let count = |action: &str| report.changes.iter().filter(|c| c.action == action).count();
            let mut summary = format!(
                "{} records examined: {} demoted, {} archived",
                report.examined,
                count("demote"),
                count("archive") + count("expired")
            );
            if demotions_only {
                summary.push_str(
                    " (dream.auto_accept = safe: demotions only; archives wait for `cairn decay` or a dream's set)",
                );
            }
            ("ok".to_string(), summary)
        });
        self.record_step("decay", at, started, result)
    }

    fn dream_step(&mut self, options: &MaintainOptions) -> Result<StepReport> {
        if let Err(why) = self.due("dream", options.dream_every)? {
            return Ok(Self::skipped("dream", why));
        }
        let dream = DreamOptions {
            unattended: true,
            accept: options.auto_accept == AutoAccept::All,
            auto_accept: options.auto_accept != AutoAccept::No,
            accept_safe: options.auto_accept == AutoAccept::Safe,
            ..options.dream.clone()
        };
        let (at, started) = (self.now(), Instant::now());
        let result = self
            .dream(&dream)
            .map(|outcome| ("ok".to_string(), outcome.message));
        self.record_step("dream", at, started, result)
    }
}
