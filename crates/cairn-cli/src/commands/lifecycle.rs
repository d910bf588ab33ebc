//! The lifecycle commands (docs/design.md §8): decay, dream (show, accept, reject, list), config, and
//! the review listing's stale part. Glue: each calls one engine function and prints its answer
//! as text or, with `--json`, as JSON. Settings are resolved here (the environment is read
//! only by the binary) and handed to the engine as plain data.

use crate::output::{print_json, snippet};
use crate::settings::Settings;
use anyhow::Result;
use cairn_engine::lifecycle::{
    AcceptReport, DecayExplanation, DecayReport, DreamOptions, DreamOutcome, DreamView, EmbedStep,
    MaintainOptions, MaintainReport, SettingValue, StepState,
};
use cairn_engine::{Engine, ExtractReport};
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum LifecycleCommand {
    /// Archive expired records, lower the confidence of records nobody accessed, archive those
    /// below the floor (never tier A, pinned or guardrails).
    Decay(DecayArgs),
    /// Consolidate on a snapshot: propose decay, merges, forgetting, summaries; then
    /// `dream show|accept|reject|list`.
    Dream(DreamArgs),
    /// Turn captured session turns into candidate records (decisions, gotchas, facts): with the
    /// configured LLM, else by rules; into the inbox, or stored with `capture.extract = auto`.
    Extract(ExtractArgs),
    /// Run the maintenance that is due — extraction, embedding of pending records, decay, an
    /// unattended dream — one run at a time per brain (what a session end starts detached).
    Maintain(MaintainArgs),
    /// Settings kept in the brain (llm.command, llm.url, dream.auto_accept, …).
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

pub fn run(settings: &Settings, command: &LifecycleCommand) -> Result<ExitCode> {
    match command {
        LifecycleCommand::Decay(decay) => run_decay(settings, decay),
        LifecycleCommand::Dream(dream) => run_dream(settings, dream),
        LifecycleCommand::Extract(extract) => run_extract(settings, extract),
        LifecycleCommand::Maintain(maintain) => run_maintain(settings, maintain),
        LifecycleCommand::Config { command } => run_config(settings, command),
    }
}

#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// The session that ended (the client's session id): its turns are extracted; default:
    /// every captured session with turns not yet extracted.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Only show each step's last run and when it is due next; nothing runs.
    #[arg(long)]
    pub(crate) status: bool,
}

/// What the maintenance may do, from the brain's settings (and their environment overrides):
/// it embeds here when an embedder is configured.
pub fn maintain_options(settings: &Settings, engine: &Engine) -> Result<MaintainOptions> {
    let embedder_on = !matches!(
        crate::embedder::choice(settings),
        Ok(crate::embedder::Choice::Configured(
            cairn_embed::EmbedderConfig::None
        ))
    );
    let embed = if embedder_on {
        EmbedStep::Here
    } else {
        EmbedStep::Off
    };
    Ok(engine.maintain_options(&env, embed)?)
}

fn run_maintain(settings: &Settings, args: &MaintainArgs) -> Result<ExitCode> {
    if args.status {
        let engine = settings.open("cli")?;
        let options = maintain_options(settings, &engine)?;
        print_maintain_status(settings, &engine.maintenance_status(&options)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut engine = settings.open("maintain")?;
    let options = maintain_options(settings, &engine)?;
    let report = engine.maintain(&options, args.session.as_deref())?;
    Ok(print_maintain(settings, &report))
}

/// `maintain --status`'s answer (here and from a server).
pub(crate) fn print_maintain_status(settings: &Settings, states: &[StepState]) {
    if settings.json {
        print_json(&serde_json::json!({"steps": states}));
        return;
    }
    for state in states {
        match &state.last {
            Some(run) => outln!(
                "{:<8} last {} ({}, {} ms): {} — next: {}",
                state.step,
                run.at,
                run.outcome,
                run.elapsed_ms,
                run.summary,
                state.due
            ),
            None => outln!("{:<8} never ran — next: {}", state.step, state.due),
        }
    }
}

/// `maintain`'s report (here and from a server); exit 1 when a step failed.
pub(crate) fn print_maintain(settings: &Settings, report: &MaintainReport) -> ExitCode {
    if settings.json {
        print_json(report);
    } else if report.busy {
        outln!("another maintenance run of this brain is going on; nothing was done");
    } else {
        for step in &report.steps {
            match (&step.run, &step.skipped) {
                (Some(run), _) => outln!("{:<8} {}: {}", step.step, run.outcome, run.summary),
                (None, Some(why)) => outln!("{:<8} skipped: {why}", step.step),
                (None, None) => {}
            }
        }
    }
    let failed = report
        .steps
        .iter()
        .any(|s| s.run.as_ref().is_some_and(|r| r.outcome == "error"));
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Only this session (the client's session id, as the hooks receive it); default: every
    /// captured session with turns not yet extracted.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Rules only, even when an LLM is configured.
    #[arg(long)]
    pub(crate) no_llm: bool,
}

fn run_extract(settings: &Settings, args: &ExtractArgs) -> Result<ExitCode> {
    let mut engine = settings.open("extract")?;
    let options = extract_options(&engine, args.session.clone(), args.no_llm)?;
    let report = engine.extract(&options)?;
    Ok(print_extract(settings, &report))
}

/// `extract`'s report (here and from a server); exit 1 when a batch failed.
pub(crate) fn print_extract(settings: &Settings, report: &ExtractReport) -> ExitCode {
    if settings.json {
        print_json(report);
    } else if report.busy {
        outln!("another extraction of this brain is running; nothing was done");
    } else {
        outln!(
            "{} turns of {} sessions read ({}, {} LLM calls): {} candidates — {} to the inbox, {} stored, {} updated, {} already known, {} refused, {} dropped",
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
        for reason in &report.reasons {
            outln!("  {reason}");
        }
        for error in &report.errors {
            outln!("  error: {error}");
        }
        if report.pending_turns > 0 {
            outln!(
                "{} turns wait for the next run (`cairn extract`)",
                report.pending_turns
            );
        }
    }
    if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Starts `cairn maintain --session ID` detached from the session-end hook (its own process
/// group, no terminal, errors appended to `hook-errors.log` next to the brain) when anything is
/// due: the session's turns wait for extraction, records wait for a vector, decay or a dream
/// is past its interval. One run at a time per brain is the maintenance's own lock; the
/// extraction is bounded by `extract.max_llm_calls` × `llm.timeout_secs`.
pub fn spawn_after_session(
    settings: &Settings,
    engine: &Engine,
    session: &str,
    cwd: &std::path::Path,
) -> Result<()> {
    let options = maintain_options(settings, engine)?;
    if !engine.maintenance_due(&options, Some(session))? {
        return Ok(());
    }
    let log_path = settings
        .db
        .parent()
        .map(|dir| dir.join("hook-errors.log"))
        .unwrap_or_else(|| std::path::PathBuf::from("hook-errors.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command
        .args(["maintain", "--session", session])
        .env("CAIRN_DB", &settings.db)
        .env("CAIRN_PROJECT", &engine.context().project)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    // Not waited for: it outlives the hook (and is reparented when the hook exits).
    command.spawn()?;
    Ok(())
}

/// The options of an extraction from the brain's settings: the LLM (unless `no_llm`), the
/// target (`capture.extract`) and the call budget.
pub fn extract_options(
    engine: &Engine,
    session: Option<String>,
    no_llm: bool,
) -> Result<cairn_engine::ExtractOptions> {
    Ok(engine.extract_options(&env, session, no_llm)?)
}

#[derive(Debug, Args)]
pub struct DecayArgs {
    /// List what would change without changing anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Say what decay did to one record and why, and what it would do now.
    #[arg(long, value_name = "ID", conflicts_with = "dry_run")]
    pub(crate) explain: Option<String>,
}

#[derive(Debug, Args)]
pub struct DreamArgs {
    #[command(subcommand)]
    pub(crate) command: Option<DreamCommand>,
    /// Run by a scheduler: proposes, and accepts only when `dream.auto_accept` is true.
    #[arg(long)]
    pub(crate) unattended: bool,
    /// Apply the proposals right away (refused for unattended runs unless configured).
    #[arg(long)]
    pub(crate) accept: bool,
    /// Skip the LLM phases even when an LLM is configured.
    #[arg(long)]
    pub(crate) no_llm: bool,
}

#[derive(Debug, Subcommand)]
pub enum DreamCommand {
    /// One proposal set with every proposal.
    Show { id: String },
    /// Apply a proposal set (or only some kinds) to the live brain.
    Accept {
        id: String,
        /// Only these kinds: decay, merge, forget, summary, reflection (comma-separated).
        #[arg(long, value_delimiter = ',', value_name = "KIND")]
        only: Vec<String>,
    },
    /// Discard a proposal set; nothing changes.
    Reject { id: String },
    /// Proposal sets, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Every setting with its value and where it comes from (env, brain, default).
    List,
    /// One setting's value.
    Get { key: String },
    /// Store a setting in this brain.
    Set {
        key: String,
        /// The value (may start with `-`: a negative number reaches the setting's check).
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Remove a stored setting (back to its default).
    Unset { key: String },
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub(crate) fn parse_id(given: &str) -> Result<i64> {
    let trimmed = given.trim().trim_start_matches('#');
    trimmed
        .parse::<i64>()
        .map_err(|_| anyhow::anyhow!("{given:?} is not a record id: use 42 or #42"))
}

fn run_decay(settings: &Settings, decay: &DecayArgs) -> Result<ExitCode> {
    if let Some(id) = &decay.explain {
        let engine = settings.open("cli")?;
        print_decay_explanation(settings, &engine.decay_explain(parse_id(id)?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut engine = settings.open("decay")?;
    print_decay(settings, &engine.decay(decay.dry_run)?);
    Ok(ExitCode::SUCCESS)
}

/// `decay --explain ID`'s answer (here and from a server).
pub(crate) fn print_decay_explanation(settings: &Settings, explanation: &DecayExplanation) {
    if settings.json {
        print_json(explanation);
        return;
    }
    outln!(
        "{} ({}, {}, confidence {})",
        explanation.label,
        explanation.memory_type,
        explanation.status,
        explanation.confidence
    );
    match explanation.half_life_days {
        Some(days) => {
            outln!("  decays with a half-life of {days:.0} days when nobody accesses it")
        }
        None => outln!("  never decays"),
    }
    outln!("  now: {} — {}", explanation.verdict, explanation.reason);
    if explanation.events.is_empty() {
        outln!("  decay never changed it");
    }
    for event in &explanation.events {
        let reason = event.detail["extra"]["reason"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_default();
        let by = event.detail["extra"]["by"].as_str().unwrap_or("");
        outln!(
            "  {} {}{}{}",
            event.at,
            event.op,
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            },
            if by.is_empty() || by == event.op {
                String::new()
            } else {
                format!(" (by {by})")
            }
        );
    }
}

/// `decay`'s report (a dry run says what it would do).
pub(crate) fn print_decay(settings: &Settings, report: &DecayReport) {
    if settings.json {
        print_json(report);
        return;
    }
    let verb = if report.dry_run { "would " } else { "" };
    if report.changes.is_empty() {
        outln!(
            "decay: nothing to do ({} active records, {} never decay)",
            report.examined,
            report.exempt
        );
    }
    for change in &report.changes {
        outln!(
            "{verb}{} {}: {}",
            change.action,
            snippet(&change.label, 60),
            change.reason
        );
    }
    if !report.expired_but_kept.is_empty() {
        let ids: Vec<String> = report
            .expired_but_kept
            .iter()
            .map(|id| format!("#{id}"))
            .collect();
        outln!(
            "kept although expired (tier A, pinned or guardrail): {}",
            ids.join(", ")
        );
    }
    if !report.dry_run && !report.changes.is_empty() {
        outln!(
            "{} changes; `cairn decay --explain ID` tells why, `cairn restore ID` brings an archived record back",
            report.changes.len()
        );
    }
}

fn print_dream(view: &DreamView) {
    outln!(
        "dream {} · {} · snapshot {}{}",
        view.id,
        view.status,
        view.snapshot_at,
        if view.unattended {
            " · unattended"
        } else {
            ""
        }
    );
    if let Some(decided) = &view.decided_at {
        let decision = view.decision.as_ref();
        let counts = match decision {
            Some(d) if d["applied"].is_number() => format!(
                ": {} applied, {} skipped",
                d["applied"].as_i64().unwrap_or(0),
                d["skipped"].as_i64().unwrap_or(0)
            ),
            _ => String::new(),
        };
        outln!("  {} at {decided}{counts}", view.status);
    }
    if let Some(pruned) = &view.pruned {
        if let Some(kinds) = view.report["proposals"].as_object()
            && !kinds.is_empty()
        {
            let counts: Vec<String> = kinds
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect();
            outln!("  proposed: {}", counts.join(", "));
        }
        outln!("  {}", pruned.note);
    }
    if let Some(errors) = view.report["llm"]["errors"].as_array() {
        for error in errors {
            outln!("  LLM error: {}", error.as_str().unwrap_or(""));
        }
    }
    if let Some(clusters) = view.report["clusters"].as_array()
        && !clusters.is_empty()
    {
        outln!("  {} clusters of related records", clusters.len());
    }
    for proposal in &view.proposals {
        let p = &proposal.payload;
        let what = match proposal.kind.as_str() {
            "decay" => format!(
                "{} {}: {}",
                p["action"].as_str().unwrap_or(""),
                snippet(p["label"].as_str().unwrap_or(""), 50),
                p["reason"].as_str().unwrap_or("")
            ),
            "merge" => {
                let merged: Vec<String> = p["merged"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|m| {
                                format!(
                                    "#{} ({:.2})",
                                    m["id"].as_i64().unwrap_or(0),
                                    m["similarity"].as_f64().unwrap_or(0.0)
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!(
                    "keep {}, archive near duplicates {}",
                    snippet(p["survivor_label"].as_str().unwrap_or(""), 50),
                    merged.join(", ")
                )
            }
            "forget" => format!(
                "{} (importance {:.2}, covered by #{} at {:.2})",
                snippet(p["label"].as_str().unwrap_or(""), 50),
                p["importance"].as_f64().unwrap_or(0.0),
                p["twin"].as_i64().unwrap_or(0),
                p["twin_similarity"].as_f64().unwrap_or(0.0)
            ),
            _ => format!(
                "{}: {} [{}]",
                p["title"].as_str().unwrap_or(""),
                snippet(p["body"].as_str().unwrap_or(""), 70),
                p["source"].as_str().unwrap_or("")
            ),
        };
        outln!(
            "  {:>3}. {:<10} {what}{}",
            proposal.seq,
            proposal.kind,
            proposal
                .outcome
                .as_deref()
                .map(|o| format!("  → {o}"))
                .unwrap_or_default()
        );
    }
}

fn run_dream(settings: &Settings, dream: &DreamArgs) -> Result<ExitCode> {
    match &dream.command {
        Some(DreamCommand::Show { id }) => {
            let engine = settings.open("cli")?;
            print_dream_view(settings, &engine.dream_show(id)?);
        }
        Some(DreamCommand::List { limit }) => {
            let engine = settings.open("cli")?;
            print_dreams(settings, &engine.dream_list(*limit)?);
        }
        Some(DreamCommand::Reject { id }) => {
            let mut engine = settings.open("dream")?;
            print_dream_rejected(settings, &engine.dream_reject(id)?.id);
        }
        Some(DreamCommand::Accept { id, only }) => {
            let mut engine = settings.open("dream")?;
            print_dream_accepted(settings, &engine.dream_accept(id, only)?);
        }
        None => {
            let mut engine = settings.open("dream")?;
            // `dream.auto_accept`: `true` lets an unattended run apply everything, `safe` only
            // what loses nothing (summaries, reflections, decay demotions — never an archive, a
            // merge or a forget); either way `--unattended` applies without `--accept` too.
            let auto_word = engine
                .setting("dream.auto_accept", &env)?
                .value
                .map(|v| v.trim().to_string())
                .unwrap_or_default();
            let safe_only = auto_word == "safe";
            let auto_accept = auto_word == "true" || safe_only;
            let accept_all = if dream.unattended {
                // `--accept` without the setting stays a refusal (the engine says so)
                auto_word == "true" || (dream.accept && !safe_only)
            } else {
                dream.accept
            };
            let options = engine.dream_options(&env, dream.no_llm)?;
            let outcome: DreamOutcome = engine.dream(&DreamOptions {
                unattended: dream.unattended,
                accept: accept_all,
                auto_accept,
                // `safe` on an unattended run: only what loses nothing is applied
                accept_safe: dream.unattended && safe_only && !accept_all,
                ..options
            })?;
            print_dream_outcome(settings, &outcome);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `dream show`'s answer.
pub(crate) fn print_dream_view(settings: &Settings, view: &DreamView) {
    if settings.json {
        print_json(view);
    } else {
        print_dream(view);
    }
}

/// `dream list`'s answer.
pub(crate) fn print_dreams(settings: &Settings, runs: &[DreamView]) {
    if settings.json {
        print_json(&serde_json::json!({"dreams": runs}));
    } else if runs.is_empty() {
        outln!("no dreams yet: `cairn dream` makes a proposal set");
    } else {
        for run in runs {
            outln!(
                "{} {} {} proposals {}{}",
                run.id,
                run.created_at,
                run.status,
                run.report["proposals"],
                if run.pruned.is_some() {
                    " (details pruned)"
                } else {
                    ""
                }
            );
        }
    }
}

/// `dream reject`'s answer.
pub(crate) fn print_dream_rejected(settings: &Settings, id: &str) {
    if settings.json {
        print_json(&serde_json::json!({"status": "rejected", "id": id}));
    } else {
        outln!("rejected dream {id}; nothing in the brain changed");
    }
}

/// `dream accept`'s report.
pub(crate) fn print_dream_accepted(settings: &Settings, report: &AcceptReport) {
    if settings.json {
        print_json(report);
        return;
    }
    outln!(
        "dream {}: {} applied, {} skipped ({})",
        report.id,
        report.applied.len(),
        report.skipped.len(),
        report.status
    );
    for outcome in report.applied.iter().chain(&report.skipped) {
        outln!(
            "  {:>3}. {:<10} {}: {}",
            outcome.seq,
            outcome.kind,
            outcome.outcome,
            outcome.detail
        );
    }
    if let Some(compacted) = &report.compacted {
        outln!("{compacted}");
    }
}

/// A dream run's outcome: its proposal set, then what happened to it.
pub(crate) fn print_dream_outcome(settings: &Settings, outcome: &DreamOutcome) {
    if settings.json {
        print_json(outcome);
    } else {
        print_dream(&outcome.dream);
        outln!("{}", outcome.message);
    }
}

fn run_config(settings: &Settings, command: &ConfigCommand) -> Result<ExitCode> {
    match command {
        ConfigCommand::List => {
            let engine = settings.open("cli")?;
            print_settings(settings, &engine.settings(&env)?);
        }
        ConfigCommand::Get { key } => {
            let engine = settings.open("cli")?;
            print_setting(settings, &engine.setting(key, &env)?);
        }
        ConfigCommand::Set { key, value } => {
            let mut engine = settings.open("cli")?;
            engine.set_setting(key, Some(value))?;
            if settings.json {
                print_json(&serde_json::json!({"status": "set", "key": key, "value": value}));
            } else {
                outln!("{key} = {value}");
            }
        }
        ConfigCommand::Unset { key } => {
            let mut engine = settings.open("cli")?;
            engine.set_setting(key, None)?;
            if settings.json {
                print_json(&serde_json::json!({"status": "unset", "key": key}));
            } else {
                outln!("{key} unset");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `config list`'s answer (here and from a server).
pub(crate) fn print_settings(settings: &Settings, stored: &[SettingValue]) {
    if settings.json {
        print_json(&serde_json::json!({"settings": stored}));
        return;
    }
    for s in stored {
        outln!(
            "{:<20} {:<30} ({}) — {}",
            s.key,
            s.value.as_deref().unwrap_or("-"),
            s.from,
            s.help
        );
    }
}

/// `config get`'s answer (here and from a server).
pub(crate) fn print_setting(settings: &Settings, setting: &SettingValue) {
    if settings.json {
        print_json(setting);
    } else {
        outln!(
            "{} ({})",
            setting.value.as_deref().unwrap_or("-"),
            setting.from
        );
    }
}
