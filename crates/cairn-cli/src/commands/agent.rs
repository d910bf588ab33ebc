//! Commands around the memory proper: the brief, review, the inbox, and what is kept but never
//! ranked (tasks, measures, the activity log, the identity, awareness). Glue: each command is
//! one engine call and its printing.

use crate::output::{print_json, snippet};
use crate::settings::Settings;
use crate::values;
use anyhow::Result;
use cairn_core::brief::SectionKind;
use cairn_core::memory::Memory;
use cairn_core::record::MemoryType;
use cairn_engine::{
    BriefRequest, MeasureSummary, RememberOutcome, RememberStatus, ReviewReport, event_line,
};
use cairn_store::{AwarenessRow, EventRow, IdentityRow, InboxRow, TaskRow};
use clap::{Args, Subcommand};
use std::collections::HashMap;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// What an agent gets at session start, under a byte budget.
    Brief(BriefArgs),
    /// Records past their review date, open conflicts, and tier A/B records nobody re-checked.
    Review {
        /// List tier A/B records not verified for this many days (0: leave them out).
        #[arg(long, default_value_t = 180, value_name = "N")]
        stale_days: u32,
    },
    /// Candidate facts captured from transcripts, awaiting a decision.
    Inbox {
        #[command(subcommand)]
        command: Option<InboxCommand>,
    },
    /// Tasks this project owes (kept outside memory ranking).
    Task {
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Readings of a named value over time: last value and trend.
    Measure {
        #[command(subcommand)]
        command: MeasureCommand,
    },
    /// The activity log: what happened, what the last session did.
    Log(LogArgs),
    /// Who the agent is (one short text).
    Identity {
        #[command(subcommand)]
        command: IdentityCommand,
    },
    /// Short-lived working items (at most 10, with expiry).
    Awareness {
        #[command(subcommand)]
        command: AwarenessCommand,
    },
}

pub fn run(settings: &Settings, command: &AgentCommand) -> Result<ExitCode> {
    match command {
        AgentCommand::Brief(brief) => run_brief(settings, brief),
        AgentCommand::Review { stale_days } => run_review(settings, *stale_days),
        AgentCommand::Inbox { command } => run_inbox(settings, command.as_ref()),
        AgentCommand::Task { command } => run_task(settings, command),
        AgentCommand::Measure { command } => run_measure(settings, command),
        AgentCommand::Log(log) => run_log(settings, log),
        AgentCommand::Identity { command } => run_identity(settings, command),
        AgentCommand::Awareness { command } => run_awareness(settings, command),
    }
}

#[derive(Debug, Args)]
pub struct BriefArgs {
    /// Byte budget (0 = no limit).
    #[arg(long, default_value_t = cairn_engine::DEFAULT_BRIEF_BUDGET)]
    pub budget: usize,
    /// Only this section, in full (repeatable, or comma-separated).
    #[arg(long = "section", value_name = "NAME", value_delimiter = ',', value_parser = values::section())]
    pub sections: Vec<SectionKind>,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Add a task this project owes (shown in the brief until done).
    Add {
        title: String,
        #[arg(long)]
        detail: Option<String>,
        /// Due date or time.
        #[arg(long, value_name = "DATE")]
        due: Option<String>,
        /// A personal task, visible from every project.
        #[arg(long)]
        personal: bool,
    },
    /// Open tasks (with `--all`, done ones too).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Mark a task done.
    Done { id: i64 },
}

#[derive(Debug, Subcommand)]
pub enum MeasureCommand {
    /// Record one reading of a named value.
    Record {
        name: String,
        #[arg(allow_negative_numbers = true)]
        value: f64,
        #[arg(long)]
        unit: Option<String>,
        #[arg(long)]
        note: Option<String>,
    },
    /// Last value and trend of every measure, or of one.
    Show { name: Option<String> },
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// How many events (newest kept).
    #[arg(long, default_value_t = 30)]
    pub limit: usize,
    /// Everything since the last session started.
    #[arg(long)]
    pub last_session: bool,
    /// Only the events this actor wrote (`cli`, `hook`, `mcp`, a token's name, …; events
    /// written before schema v16 name no actor).
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub actor: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum IdentityCommand {
    /// Who the agent is.
    Show,
    /// Replace the identity (under 500 tokens); `-` reads stdin.
    Set { text: String },
}

#[derive(Debug, Subcommand)]
pub enum AwarenessCommand {
    /// Add a short-lived working item (at most 10 live; default life 24h).
    Add {
        text: String,
        /// When it expires: a time, or a duration such as 2h or 3d.
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
    },
    /// Live items.
    List,
    /// Drop an item before it expires.
    Drop { id: i64 },
}

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Captured candidates awaiting a decision (with `--all`, resolved ones too).
    List {
        #[arg(long)]
        all: bool,
    },
    /// Keep a candidate as a memory (through the whole write path).
    Accept {
        id: i64,
        /// Store it as this type instead of the suggested one.
        #[arg(long = "type", value_name = "TYPE", value_parser = values::memory_type())]
        memory_type: Option<MemoryType>,
    },
    /// Discard a candidate.
    Dismiss { id: i64 },
}

fn run_brief(settings: &Settings, brief: &BriefArgs) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    let request = BriefRequest {
        budget: brief.budget,
        sections: brief.sections.clone(),
    };
    // handed out: what it shows counts as used for decay (surfaced_at)
    let brief = engine.brief_for_agent(&request)?;
    if settings.json {
        print_json(&brief);
    } else {
        print_brief_text(&brief.assembled.text);
    }
    Ok(ExitCode::SUCCESS)
}

/// The brief as text: the assembled text as it is.
pub(crate) fn print_brief_text(text: &str) {
    out!("{text}");
}

fn run_review(settings: &Settings, stale_days: u32) -> Result<ExitCode> {
    let engine = settings.open("cli")?;
    let report = if stale_days == 0 {
        engine.review()?
    } else {
        engine.review_stale(stale_days)?
    };
    print_review(settings, &report);
    Ok(ExitCode::SUCCESS)
}

/// `cairn review`'s answer, printed (here and by the remote client).
pub(crate) fn print_review(settings: &Settings, report: &ReviewReport) {
    if settings.json {
        print_json(report);
        return;
    }
    if report.due.is_empty() && report.conflicts.is_empty() && report.stale.is_empty() {
        outln!("nothing to review: no record is past its review date and no conflict is open");
    }
    for memory in &report.due {
        outln!(
            "review due {}: {} (`cairn verify {} --source …`)",
            memory
                .review_at
                .as_deref()
                .unwrap_or("")
                .get(..10)
                .unwrap_or(""),
            memory.label(),
            memory.id
        );
    }
    for conflict in &report.conflicts {
        outln!(
            "conflict: #{} contradicts #{} ({}); supersede one of them",
            conflict.memory_id,
            conflict.other_id,
            conflict.reason
        );
    }
    for memory in &report.stale {
        outln!(
            "not re-checked in {} days: {} (`cairn verify {} --source …`)",
            report.stale_days.unwrap_or(0),
            memory.label(),
            memory.id
        );
    }
}

fn run_task(settings: &Settings, command: &TaskCommand) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    match command {
        TaskCommand::Add {
            title,
            detail,
            due,
            personal,
        } => {
            let task = engine.task_add(title, detail.as_deref(), due.as_deref(), *personal)?;
            print_task(settings, &task, "added");
        }
        TaskCommand::List { all } => print_tasks(settings, &engine.tasks(*all)?),
        TaskCommand::Done { id } => print_task(settings, &engine.task_done(*id)?, "done"),
    }
    Ok(ExitCode::SUCCESS)
}

/// One task after `task add` (`what`: added) or `task done` (done).
pub(crate) fn print_task(settings: &Settings, task: &TaskRow, what: &str) {
    if settings.json {
        print_json(task);
    } else {
        outln!("task {} {what}: {}", task.id, task.title);
    }
}

/// `cairn task list`'s answer.
pub(crate) fn print_tasks(settings: &Settings, tasks: &[TaskRow]) {
    if settings.json {
        print_json(&tasks);
    } else if tasks.is_empty() {
        outln!("no open tasks");
    } else {
        for task in tasks {
            let due = task
                .due_at
                .as_deref()
                .map(|d| format!(" (due {})", d.get(..10).unwrap_or(d)))
                .unwrap_or_default();
            let mark = if task.status == "done" { "x" } else { " " };
            outln!("[{mark}] {:>4} {}{due}", task.id, task.title);
        }
    }
}

fn run_measure(settings: &Settings, command: &MeasureCommand) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    match command {
        MeasureCommand::Record {
            name,
            value,
            unit,
            note,
        } => {
            let summary = engine.measure_record(name, *value, unit.as_deref(), note.as_deref())?;
            print_measures(settings, std::slice::from_ref(&summary), true);
        }
        MeasureCommand::Show { name } => {
            print_measures(settings, &engine.measures(name.as_deref())?, false);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Measures' summaries: after `measure record` (`recorded`: the one just recorded, printed as
/// one object in JSON) or `measure show`.
pub(crate) fn print_measures(settings: &Settings, summaries: &[MeasureSummary], recorded: bool) {
    if settings.json {
        match (recorded, summaries.first()) {
            (true, Some(summary)) => print_json(summary),
            _ => print_json(&summaries),
        }
        return;
    }
    if summaries.is_empty() {
        outln!("no readings yet: `cairn measure record NAME VALUE`");
    }
    for summary in summaries {
        let unit = summary.unit.as_deref().unwrap_or("");
        let previous = summary
            .previous
            .map(|p| format!(", previous {p}{unit}"))
            .unwrap_or_default();
        outln!(
            "{}: {}{unit} at {} ({}{previous}; {} readings)",
            summary.name,
            summary.last,
            summary.last_at,
            summary.trend,
            summary.readings
        );
    }
}

fn run_log(settings: &Settings, log: &LogArgs) -> Result<ExitCode> {
    let engine = settings.open("cli")?;
    let events = engine.activity_by(log.limit, log.last_session, log.actor.as_deref())?;
    print_log(settings, &events, |id| engine.get(id).ok());
    Ok(ExitCode::SUCCESS)
}

/// `cairn log`'s answer; `record` reads the record an event is about (for its label in text).
pub(crate) fn print_log(
    settings: &Settings,
    events: &[EventRow],
    record: impl Fn(i64) -> Option<Memory>,
) {
    if settings.json {
        print_json(&events);
        return;
    }
    if events.is_empty() {
        outln!("no activity yet");
    }
    let mut records: HashMap<i64, Memory> = HashMap::new();
    for id in events.iter().filter_map(|e| e.memory_id) {
        if !records.contains_key(&id)
            && let Some(memory) = record(id)
        {
            records.insert(memory.id, memory);
        }
    }
    for event in events {
        outln!("{}", event_line(event, &records));
    }
}

fn run_identity(settings: &Settings, command: &IdentityCommand) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    let identity = match command {
        IdentityCommand::Show => engine.identity()?,
        IdentityCommand::Set { text } => Some(engine.set_identity(&identity_text(text)?)?),
    };
    print_identity(settings, identity.as_ref());
    Ok(ExitCode::SUCCESS)
}

/// `identity set`'s text: the argument, or standard input for `-`.
pub(crate) fn identity_text(text: &str) -> Result<String> {
    if text != "-" {
        return Ok(text.to_string());
    }
    let mut body = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut body)?;
    Ok(body)
}

/// The identity after `identity show` or `identity set`.
pub(crate) fn print_identity(settings: &Settings, identity: Option<&IdentityRow>) {
    if settings.json {
        print_json(&identity);
    } else {
        match identity {
            Some(identity) => outln!("{}", identity.body),
            None => outln!("no identity set: `cairn identity set \"…\"`"),
        }
    }
}

fn run_awareness(settings: &Settings, command: &AwarenessCommand) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    match command {
        AwarenessCommand::Add { text, expires } => {
            let (row, dropped) = engine.aware(text, expires.as_deref())?;
            print_aware(settings, &row, dropped.as_ref());
        }
        AwarenessCommand::List => print_awareness(settings, &engine.awareness()?),
        AwarenessCommand::Drop { id } => {
            print_awareness_dropped(settings, *id, engine.awareness_drop(*id)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `awareness add`'s answer: the item, and the oldest one dropped to make room.
pub(crate) fn print_aware(settings: &Settings, row: &AwarenessRow, dropped: Option<&AwarenessRow>) {
    if settings.json {
        print_json(&serde_json::json!({"item": row, "dropped": dropped}));
        return;
    }
    outln!(
        "awareness {} until {}: {}",
        row.id,
        row.expires_at,
        row.body
    );
    if let Some(dropped) = dropped {
        outln!(
            "  note: {} items is the most; dropped {} ({})",
            cairn_engine::MAX_AWARENESS,
            dropped.id,
            snippet(&dropped.body, 60)
        );
    }
}

/// `awareness list`'s answer.
pub(crate) fn print_awareness(settings: &Settings, rows: &[AwarenessRow]) {
    if settings.json {
        print_json(&rows);
    } else if rows.is_empty() {
        outln!("nothing in awareness");
    } else {
        for row in rows {
            outln!("{:>4} until {}: {}", row.id, row.expires_at, row.body);
        }
    }
}

/// `awareness drop`'s answer (`dropped`: false when there was no such live item).
pub(crate) fn print_awareness_dropped(settings: &Settings, id: i64, dropped: bool) {
    if settings.json {
        print_json(&serde_json::json!({"dropped": dropped, "id": id}));
    } else if dropped {
        outln!("dropped awareness {id}");
    } else {
        outln!("no live awareness item {id}");
    }
}

fn run_inbox(settings: &Settings, command: Option<&InboxCommand>) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    match command.unwrap_or(&InboxCommand::List { all: false }) {
        InboxCommand::List { all } => {
            print_inbox(settings, &engine.inbox(*all)?);
            Ok(ExitCode::SUCCESS)
        }
        InboxCommand::Accept { id, memory_type } => Ok(print_inbox_accepted(
            settings,
            &engine.inbox_accept(*id, *memory_type)?,
        )),
        InboxCommand::Dismiss { id } => {
            print_inbox_dismissed(settings, &engine.inbox_dismiss(*id)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `inbox list`'s answer.
pub(crate) fn print_inbox(settings: &Settings, rows: &[InboxRow]) {
    if settings.json {
        print_json(&rows);
    } else if rows.is_empty() {
        outln!("the inbox is empty");
    } else {
        for row in rows {
            let state = row.resolution.as_deref().unwrap_or("open");
            outln!(
                "{:>4} {} ({}, {state}): {}",
                row.id,
                row.suggested_type,
                row.kind,
                row.body
            );
        }
    }
}

/// `inbox accept`'s outcome; a refused write (a near duplicate) exits 3.
pub(crate) fn print_inbox_accepted(settings: &Settings, outcome: &RememberOutcome) -> ExitCode {
    if settings.json {
        print_json(outcome);
    } else {
        outln!("{}", outcome.message);
    }
    if outcome.status == RememberStatus::Refused {
        ExitCode::from(crate::output::REFUSED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `inbox dismiss`'s answer.
pub(crate) fn print_inbox_dismissed(settings: &Settings, row: &InboxRow) {
    if settings.json {
        print_json(row);
    } else {
        outln!("dismissed inbox item {}", row.id);
    }
}
