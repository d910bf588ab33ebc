//! The command line of CLI.md and what each command does.

use crate::output::{REFUSED, print_json, snippet};
use anyhow::{Context as _, Result};
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, TrustZone};
use cairn_engine::exchange::{ImportOptions, LineStatus};
use cairn_engine::{
    Context, Engine, EngineError, ListRequest, Mode, RecallAnswer, RecallRequest, RememberRequest,
    RememberStatus, Review, UpdateRequest,
};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Long-term memory for AI agents: remember, recall, brief.",
    max_term_width = 100
)]
pub struct Cli {
    /// The brain: a SQLite file (default: $XDG_DATA_HOME/cairn/brain.db).
    #[arg(long, global = true, env = "CAIRN_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Project key (default: derived from the git root of the working directory).
    #[arg(long, global = true, env = "CAIRN_PROJECT", value_name = "KEY")]
    pub project: Option<String>,
    /// Print the JSON contract instead of human text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Directory of the local embedding model (default: the cache dir; see `cairn model`).
    #[arg(long, global = true, env = "CAIRN_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Store a memory (refuses near duplicates with the ways out; exit 3).
    Remember(RememberArgs),
    /// Find memories: ranked, explained, superseded ones followed forward.
    Recall(RecallArgs),
    /// Show one record, optionally with every earlier version.
    Show {
        id: i64,
        #[arg(long)]
        history: bool,
    },
    /// Change fields of a record in place (the old version goes to its history).
    Update(UpdateArgs),
    /// Archive a record (reversible with `restore`); `--hard` deletes it for good.
    Forget {
        id: i64,
        #[arg(long)]
        hard: bool,
    },
    /// Bring an archived record back.
    Restore { id: i64 },
    /// Mark a claim re-checked against a source (renews its review date).
    Verify {
        id: i64,
        #[arg(long)]
        source: String,
    },
    /// List records, newest first.
    List(ListArgs),
    /// Write every record (with history) and the event log as JSONL, or a Markdown wiki
    /// (`export wiki DIR`).
    Export(crate::wiki_cmd::ExportArgs),
    /// Read JSONL back (per-line report; a bad line never stops the others), or another
    /// source: `import wiki|claude-md|agents-md|mcp-memory|markdown|mem0|envelope …`.
    Import(crate::import_cmd::ImportArgs),
    /// Hand records to another agent as a JSON envelope that honors trust zones.
    Share(crate::share_cmd::ShareArgs),
    /// Check the brain's integrity and index consistency.
    Doctor {
        /// Rebuild derived indexes, drop orphans, VACUUM a bloated file, bound the WAL
        /// (idempotent).
        #[arg(long)]
        repair: bool,
        /// Read what can be read from a damaged brain into a new file (the damaged one is never
        /// changed or deleted).
        #[arg(long, value_name = "NEW_PATH", conflicts_with = "repair")]
        recover_into: Option<PathBuf>,
    },
    /// Counts and sizes.
    Stats,
    /// Declare, list and check scopes.
    Scope {
        #[command(subcommand)]
        command: ScopeCommand,
    },
    #[command(flatten)]
    Graph(crate::graph_cmd::GraphCommand),
    /// What an agent gets at session start, under a byte budget.
    Brief(crate::agent::BriefArgs),
    /// Records past their review date, open conflicts, and tier A/B records nobody re-checked.
    Review {
        /// List tier A/B records not verified for this many days (0: leave them out).
        #[arg(long, default_value_t = 180, value_name = "N")]
        stale_days: u32,
    },
    /// Archive expired records, lower the confidence of records nobody accessed, archive those
    /// below the floor (never tier A, pinned or guardrails).
    Decay(crate::lifecycle_cmd::DecayArgs),
    /// Consolidate on a snapshot: propose decay, merges, forgetting, summaries; then
    /// `dream show|accept|reject|list`.
    Dream(crate::lifecycle_cmd::DreamArgs),
    /// Settings kept in the brain (llm.command, llm.url, dream.auto_accept, …).
    Config {
        #[command(subcommand)]
        command: crate::lifecycle_cmd::ConfigCommand,
    },
    /// Candidate facts captured from transcripts, awaiting a decision.
    Inbox {
        #[command(subcommand)]
        command: Option<crate::agent::InboxCommand>,
    },
    /// Tasks this project owes (kept outside memory ranking).
    Task {
        #[command(subcommand)]
        command: crate::agent::TaskCommand,
    },
    /// Readings of a named value over time: last value and trend.
    Measure {
        #[command(subcommand)]
        command: crate::agent::MeasureCommand,
    },
    /// The activity log: what happened, what the last session did.
    Log(crate::agent::LogArgs),
    /// Who the agent is (one short text).
    Identity {
        #[command(subcommand)]
        command: crate::agent::IdentityCommand,
    },
    /// Short-lived working items (at most 10, with expiry).
    Awareness {
        #[command(subcommand)]
        command: crate::agent::AwarenessCommand,
    },
    /// Agent hook: reads the client's hook JSON on stdin; always exits 0.
    Hook(crate::hook::HookArgs),
    /// MCP server on stdio.
    Mcp,
    /// Write hook and MCP configuration for claude-code, codex, cursor or gemini.
    Install(crate::install::InstallArgs),
    /// The local embedding model: install it, check it.
    Model {
        #[command(subcommand)]
        command: crate::semantic_cmd::ModelCommand,
    },
    /// Embed records that have no vector yet; after a model switch, re-embed everything.
    Reindex {
        /// Re-embed every record, not only the pending ones.
        #[arg(long)]
        full: bool,
    },
    /// Retrieval evaluations (a program, not a test).
    Eval {
        #[command(subcommand)]
        command: crate::eval_cmd::EvalCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScopeCommand {
    /// Declare a scope (so `scope map` can tell typos from intent).
    Declare {
        scope: String,
        #[arg(long)]
        description: Option<String>,
    },
    /// Scopes of this project with their record counts.
    List,
    /// Stored scopes nobody declared, and declared scopes that hold nothing.
    Map,
}

#[derive(Debug, Args)]
pub struct RememberArgs {
    #[arg(long = "type", value_name = "TYPE")]
    memory_type: String,
    #[arg(long)]
    title: Option<String>,
    /// The text; `-` reads stdin.
    #[arg(long, value_parser = clap::value_parser!(OsString), conflicts_with = "body_file")]
    body: Option<OsString>,
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,
    #[arg(long)]
    summary: Option<String>,
    #[arg(long)]
    scope: Option<String>,
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    #[arg(long)]
    importance: Option<u8>,
    #[arg(long)]
    confidence: Option<String>,
    #[arg(long)]
    source: Option<String>,
    #[arg(long, value_name = "ID")]
    supersedes: Option<i64>,
    #[arg(long)]
    fork_ok: bool,
    #[arg(long)]
    allow_duplicate: bool,
    #[arg(long)]
    pin: bool,
    #[arg(long)]
    trust_zone: Option<String>,
    #[arg(long)]
    sensitivity: Option<String>,
    #[arg(long, value_name = "DATE", conflicts_with = "no_review")]
    review: Option<String>,
    #[arg(long)]
    no_review: bool,
    #[arg(long, value_name = "DATE")]
    expires: Option<String>,
    #[arg(long)]
    external_id: Option<String>,
    /// When it happened (RFC 3339); now by default.
    #[arg(long, value_name = "RFC3339")]
    at: Option<String>,
    /// File under no project: visible from every project.
    #[arg(long)]
    personal: bool,
}

#[derive(Debug, Args)]
pub struct RecallArgs {
    /// What to look for (anything: quotes and operators are searched as words).
    #[arg(required_unless_present = "batch")]
    query: Option<String>,
    /// JSONL file of queries (`-` for stdin), one answer line per query.
    #[arg(long, value_name = "FILE", conflicts_with = "query")]
    batch: Option<String>,
    #[arg(long, short = 'k', default_value_t = 10)]
    limit: usize,
    #[arg(long)]
    scope: Option<String>,
    #[arg(long = "type", value_delimiter = ',')]
    types: Vec<String>,
    /// Show superseded and archived versions instead of following them forward.
    #[arg(long)]
    all: bool,
    /// Do not record the access.
    #[arg(long)]
    no_touch: bool,
    #[arg(long, value_name = "TIME")]
    as_of: Option<String>,
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    #[arg(long, default_value = "hybrid")]
    mode: String,
    /// Relevance floor relative to the best match (0 keeps every match).
    #[arg(long)]
    floor: Option<f64>,
    /// Answer as a reader in this trust zone sees it: private_self (everything),
    /// trusted_collaborator, outside_contact, paid_public.
    #[arg(long, value_name = "ZONE")]
    zone: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    id: i64,
    #[arg(long)]
    title: Option<String>,
    #[arg(long, value_parser = clap::value_parser!(OsString))]
    body: Option<OsString>,
    #[arg(long)]
    summary: Option<String>,
    #[arg(long, value_delimiter = ',')]
    tags: Option<Vec<String>>,
    #[arg(long)]
    importance: Option<u8>,
    #[arg(long)]
    confidence: Option<String>,
    #[arg(long)]
    source: Option<String>,
    #[arg(long = "type")]
    memory_type: Option<String>,
    #[arg(long)]
    pin: bool,
    #[arg(long, conflicts_with = "pin")]
    unpin: bool,
    #[arg(long, value_name = "DATE")]
    review: Option<String>,
    #[arg(long, value_name = "DATE")]
    expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long = "type", value_delimiter = ',')]
    types: Vec<String>,
    #[arg(long)]
    scope: Option<String>,
    #[arg(long)]
    status: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Every project, not only this one and personal.
    #[arg(long)]
    all_projects: bool,
}

pub(crate) fn open(args: &Cli, actor: &str) -> Result<Engine> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    // An explicit project skips asking git (a process spawn on every command).
    let mut context = match args
        .project
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        Some(project) => Context {
            project: project.to_string(),
            cwd: cwd.clone(),
            actor: String::new(),
            read_only: false,
            now: None,
        },
        None => Context::for_directory(&cwd),
    };
    context.actor = actor.to_string();
    context.read_only =
        std::env::var("CAIRN_READ_ONLY").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    context.now = cairn_engine::test_clock_from_env()?;
    let path = args
        .db
        .clone()
        .unwrap_or_else(cairn_engine::default_brain_path);
    let mut engine = Engine::open(&path, context)?;
    engine.set_embedder_loader(crate::semantic_cmd::embedder_loader(
        args.model_dir.as_deref(),
    ));
    Ok(engine)
}

/// Text from an argument, a file or stdin, checked for UTF-8 and NUL before anything else.
fn read_text(value: Option<&OsString>, file: Option<&Path>) -> Result<Option<String>> {
    let bytes = match (value, file) {
        (Some(v), _) if v == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read the body from stdin")?;
            bytes
        }
        (Some(v), _) => os_bytes(v),
        (None, Some(path)) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
        }
        (None, None) => return Ok(None),
    };
    // Refuse invalid UTF-8 and NUL here with the byte offset; the engine's write path does the
    // stripping itself so it can report what it removed.
    cairn_core::text::sanitize_bytes(&bytes).map_err(EngineError::from)?;
    Ok(Some(
        String::from_utf8(bytes).expect("validated as UTF-8 just above"),
    ))
}

#[cfg(unix)]
fn os_bytes(value: &OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    value.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn os_bytes(value: &OsString) -> Vec<u8> {
    value.to_string_lossy().into_owned().into_bytes()
}

fn parse_types(types: &[String]) -> Result<Vec<MemoryType>> {
    types
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            t.parse::<MemoryType>()
                .map_err(|e| EngineError::from(e).into())
        })
        .collect()
}

pub fn run(args: Cli) -> Result<ExitCode> {
    match &args.command {
        Command::Remember(remember) => run_remember(&args, remember),
        Command::Recall(recall) => run_recall(&args, recall),
        Command::Show { id, history } => {
            let engine = open(&args, "cli")?;
            let memory = engine.get(*id)?;
            let versions = if *history {
                engine.history(*id)?
            } else {
                Vec::new()
            };
            let conflicts = engine.conflicts_of(*id)?;
            if args.json {
                let mut value = serde_json::to_value(&memory)?;
                if *history {
                    value["history"] = serde_json::to_value(&versions)?;
                }
                value["conflicts"] = serde_json::to_value(&conflicts)?;
                print_json(&value);
            } else {
                print_memory(&memory);
                for conflict in &conflicts {
                    let other = if conflict.memory_id == memory.id {
                        conflict.other_id
                    } else {
                        conflict.memory_id
                    };
                    outln!("  conflict with #{other}: {}", conflict.reason);
                }
                if *history {
                    if versions.is_empty() {
                        outln!("  history: no earlier versions");
                    }
                    for version in &versions {
                        let body = version
                            .snapshot
                            .get("body")
                            .and_then(|b| b.as_str())
                            .unwrap_or("");
                        outln!(
                            "  v{} {} {} by {}: {}",
                            version.version,
                            version.at,
                            version.op,
                            version.actor,
                            snippet(body, 80)
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Update(update) => {
            let mut engine = open(&args, "cli")?;
            let request = UpdateRequest {
                title: update.title.clone(),
                body: read_text(update.body.as_ref(), None)?,
                summary: update.summary.clone(),
                tags: update.tags.clone(),
                importance: update.importance,
                confidence: update
                    .confidence
                    .as_deref()
                    .map(str::parse::<Confidence>)
                    .transpose()
                    .map_err(EngineError::from)?,
                source: update.source.clone(),
                memory_type: update
                    .memory_type
                    .as_deref()
                    .map(str::parse::<MemoryType>)
                    .transpose()
                    .map_err(EngineError::from)?,
                pinned: if update.pin {
                    Some(true)
                } else if update.unpin {
                    Some(false)
                } else {
                    None
                },
                review_at: update.review.clone(),
                expires_at: update.expires.clone(),
            };
            let cairn_engine::Updated {
                memory,
                redacted,
                warnings,
            } = engine.update_with_warnings(update.id, &request)?;
            if args.json {
                print_json(
                    &serde_json::json!({"status": "updated", "id": memory.id, "redacted": redacted, "record": memory, "warnings": warnings}),
                );
            } else {
                outln!("updated #{}", memory.id);
                if !redacted.is_empty() {
                    outln!("  redacted secrets: {}", redacted.join(", "));
                }
                for warning in &warnings {
                    outln!("  note: {warning}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Forget { id, hard } => {
            let mut engine = open(&args, "cli")?;
            let memory = engine.forget(*id, *hard)?;
            if args.json {
                print_json(
                    &serde_json::json!({"status": if *hard { "deleted" } else { "archived" }, "id": memory.id}),
                );
            } else if *hard {
                outln!(
                    "deleted #{} for good (its history keeps the last version)",
                    memory.id
                );
            } else {
                outln!(
                    "archived #{}; `cairn restore {}` brings it back",
                    memory.id,
                    memory.id
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { id } => {
            let mut engine = open(&args, "cli")?;
            let memory = engine.restore(*id)?;
            if args.json {
                print_json(
                    &serde_json::json!({"status": "restored", "id": memory.id, "record_status": memory.status}),
                );
            } else {
                outln!("restored #{} ({})", memory.id, memory.status);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify { id, source } => {
            let mut engine = open(&args, "cli")?;
            let memory = engine.verify(*id, source)?;
            if args.json {
                print_json(
                    &serde_json::json!({"status": "verified", "id": memory.id, "review_at": memory.review_at}),
                );
            } else {
                match &memory.review_at {
                    Some(at) => outln!("verified #{}; next review {}", memory.id, &at[..10]),
                    None => outln!("verified #{}", memory.id),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List(list) => {
            let engine = open(&args, "cli")?;
            let status = list
                .status
                .as_deref()
                .map(str::parse::<Status>)
                .transpose()
                .map_err(EngineError::from)?;
            let memories = engine.list(&ListRequest {
                types: parse_types(&list.types)?,
                scope: list.scope.clone(),
                status,
                limit: list.limit,
                all_projects: list.all_projects,
            })?;
            if args.json {
                print_json(&memories);
            } else if memories.is_empty() {
                outln!("no records");
            } else {
                for memory in &memories {
                    outln!(
                        "#{:<6} {:<10} {:<10} {:<16} {}",
                        memory.id,
                        memory.memory_type.as_str(),
                        memory.status.as_str(),
                        snippet(&memory.scope, 16),
                        snippet(memory.title.as_deref().unwrap_or(&memory.body), 60)
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(crate::wiki_cmd::ExportArgs {
            target: Some(target),
            ..
        }) => crate::wiki_cmd::run_export(&args, target),
        Command::Export(crate::wiki_cmd::ExportArgs {
            target: None,
            format,
            file,
        }) => {
            ensure_jsonl(format)?;
            let engine = open(&args, "cli")?;
            let lines = if file == "-" {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                let lines = engine.export_jsonl(&mut out)?;
                out.flush()?;
                lines
            } else {
                let temporary = PathBuf::from(format!("{file}.tmp-{}", std::process::id()));
                let mut out = std::io::BufWriter::new(
                    std::fs::File::create(&temporary)
                        .with_context(|| format!("cannot write {}", temporary.display()))?,
                );
                let lines = engine.export_jsonl(&mut out)?;
                out.flush()?;
                drop(out);
                std::fs::rename(&temporary, file)
                    .with_context(|| format!("cannot move the export into {file}"))?;
                lines
            };
            if file != "-" {
                if args.json {
                    print_json(
                        &serde_json::json!({"status": "exported", "lines": lines, "file": file}),
                    );
                } else {
                    outln!("exported {lines} lines to {file}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(crate::import_cmd::ImportArgs {
            source: Some(source),
            ..
        }) => crate::import_cmd::run(&args, source),
        Command::Import(crate::import_cmd::ImportArgs { file: None, .. }) => {
            Err(EngineError::Invalid(
                "no input: give FILE (or - for stdin), or a source such as `import wiki DIR`"
                    .into(),
            )
            .into())
        }
        Command::Import(crate::import_cmd::ImportArgs {
            source: None,
            format,
            file: Some(file),
        }) => {
            ensure_jsonl(format)?;
            let mut engine = open(&args, "import")?;
            let mut input: Box<dyn BufRead> = if file == "-" {
                Box::new(BufReader::new(std::io::stdin()))
            } else {
                Box::new(BufReader::new(
                    std::fs::File::open(file).with_context(|| format!("cannot read {file}"))?,
                ))
            };
            let report = engine.import_jsonl(&mut input, &ImportOptions::default())?;
            let indexing = crate::semantic_cmd::index_after_import(&mut engine);
            if args.json {
                print_json(&report);
            } else {
                let s = &report.summary;
                outln!(
                    "imported: {} added, {} updated, {} unchanged, {} refused, {} errors ({} events)",
                    s.added,
                    s.updated,
                    s.noop,
                    s.refused,
                    s.error,
                    s.events
                );
                if let Some(note) = &indexing {
                    outln!("  {note}");
                }
                for line in report
                    .lines
                    .iter()
                    .filter(|l| matches!(l.status, LineStatus::Error | LineStatus::Refused))
                {
                    outln!(
                        "  line {}: {:?}: {}",
                        line.line,
                        line.status,
                        line.message.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Share(share) => crate::share_cmd::run_share(&args, share),
        Command::Doctor {
            recover_into: Some(target),
            ..
        } => run_recover(&args, target),
        Command::Doctor { repair, .. } => run_doctor(&args, *repair),
        Command::Graph(command) => crate::graph_cmd::run(&args, command),
        Command::Model { command } => {
            let mut engine = match command {
                crate::semantic_cmd::ModelCommand::Status => Some(open(&args, "cli")?),
                crate::semantic_cmd::ModelCommand::Install { .. } => None,
            };
            crate::semantic_cmd::run_model(
                command,
                args.model_dir.as_deref(),
                engine.as_mut(),
                args.json,
            )
        }
        Command::Reindex { full } => {
            let mut engine = open(&args, "reindex")?;
            crate::semantic_cmd::run_reindex(&mut engine, *full, args.json)
        }
        Command::Eval { command } => crate::eval_cmd::run(&args, command),
        Command::Stats => {
            let engine = open(&args, "cli")?;
            let stats = engine.stats()?;
            if args.json {
                print_json(&stats);
            } else {
                outln!("brain      {}", engine.store().path().display());
                outln!("records    {} ({} projects)", stats.records, stats.projects);
                for (status, count) in &stats.by_status {
                    outln!("  {status:<10} {count}");
                }
                for (memory_type, count) in &stats.by_type {
                    outln!("  {memory_type:<10} {count}");
                }
                outln!("history    {} earlier versions", stats.history_versions);
                outln!("events     {}", stats.events);
                outln!("conflicts  {} open", stats.open_conflicts);
                outln!(
                    "size       {:.1} MB file, {:.1} MB of text",
                    stats.file_bytes as f64 / 1e6,
                    stats.body_bytes as f64 / 1e6
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Brief(brief) => crate::agent::run_brief(&args, brief),
        Command::Review { stale_days } => crate::agent::run_review(&args, *stale_days),
        Command::Decay(decay) => crate::lifecycle_cmd::run_decay(&args, decay),
        Command::Dream(dream) => crate::lifecycle_cmd::run_dream(&args, dream),
        Command::Config { command } => crate::lifecycle_cmd::run_config(&args, command),
        Command::Inbox { command } => crate::agent::run_inbox(&args, command.as_ref()),
        Command::Task { command } => crate::agent::run_task(&args, command),
        Command::Measure { command } => crate::agent::run_measure(&args, command),
        Command::Log(log) => crate::agent::run_log(&args, log),
        Command::Identity { command } => crate::agent::run_identity(&args, command),
        Command::Awareness { command } => crate::agent::run_awareness(&args, command),
        Command::Hook(hook) => Ok(crate::hook::run_hook(&args, hook)),
        Command::Mcp => crate::mcp::run_mcp(&args),
        Command::Install(install) => crate::install::run_install(&args, install),
        Command::Scope { command } => {
            let mut engine = open(&args, "cli")?;
            match command {
                ScopeCommand::Declare { scope, description } => {
                    let scope = engine.declare_scope(scope, description.as_deref())?;
                    if args.json {
                        print_json(
                            &serde_json::json!({"status": "declared", "scope": scope.as_str()}),
                        );
                    } else {
                        outln!("declared scope {scope}");
                    }
                }
                ScopeCommand::List => {
                    let scopes = engine.scopes()?;
                    if args.json {
                        print_json(&scopes);
                    } else {
                        for scope in &scopes {
                            let declared = if scope.declared_at.is_some() {
                                "declared"
                            } else {
                                ""
                            };
                            outln!(
                                "{:<30} {:>6} records  {declared}",
                                scope.scope,
                                scope.records
                            );
                        }
                    }
                }
                ScopeCommand::Map => {
                    let map = engine.scope_map()?;
                    if args.json {
                        print_json(&map);
                    } else {
                        outln!("project {}", map.project);
                        for scope in &map.scopes {
                            outln!(
                                "  {:<30} {:>6} records{}",
                                scope.scope,
                                scope.records,
                                if scope.declared_at.is_some() {
                                    "  (declared)"
                                } else {
                                    ""
                                }
                            );
                        }
                        if !map.undeclared.is_empty() {
                            outln!(
                                "stored but never declared (typos?): {}",
                                map.undeclared.join(", ")
                            );
                        }
                        if !map.empty.is_empty() {
                            outln!("declared but empty: {}", map.empty.join(", "));
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn ensure_jsonl(format: &str) -> Result<()> {
    if format != "jsonl" {
        return Err(EngineError::Invalid(format!(
            "unknown format {format:?}: this command reads and writes `jsonl`"
        ))
        .into());
    }
    Ok(())
}

fn run_remember(args: &Cli, remember: &RememberArgs) -> Result<ExitCode> {
    let body =
        read_text(remember.body.as_ref(), remember.body_file.as_deref())?.ok_or_else(|| {
            EngineError::Invalid(
                "no body: give --body TEXT, --body-file FILE or --body - (stdin)".into(),
            )
        })?;
    let mut request = RememberRequest::new(
        remember
            .memory_type
            .parse::<MemoryType>()
            .map_err(EngineError::from)?,
        body,
    );
    request.title = remember.title.clone();
    request.summary = remember.summary.clone();
    request.scope = remember.scope.clone();
    request.tags = remember.tags.clone();
    request.importance = remember.importance;
    request.confidence = remember
        .confidence
        .as_deref()
        .map(str::parse::<Confidence>)
        .transpose()
        .map_err(EngineError::from)?;
    request.source = remember.source.clone();
    request.supersedes = remember.supersedes;
    request.fork_ok = remember.fork_ok;
    request.allow_duplicate = remember.allow_duplicate;
    request.pinned = remember.pin;
    request.trust_zone = remember
        .trust_zone
        .as_deref()
        .map(str::parse::<TrustZone>)
        .transpose()
        .map_err(EngineError::from)?;
    request.sensitivity = remember
        .sensitivity
        .as_deref()
        .map(str::parse::<Sensitivity>)
        .transpose()
        .map_err(EngineError::from)?;
    request.review = match (&remember.review, remember.no_review) {
        (_, true) => Review::Never,
        (Some(at), false) => Review::At(at.clone()),
        (None, false) => Review::Default,
    };
    request.expires_at = remember.expires.clone();
    request.external_id = remember.external_id.clone();
    request.at = remember.at.clone();
    request.personal = remember.personal;
    let mut engine = open(args, "cli")?;
    let outcome = engine.remember(&request)?;
    if args.json {
        print_json(&outcome);
    } else {
        outln!("{}", outcome.message);
        for warning in &outcome.warnings {
            outln!("  note: {warning}");
        }
    }
    Ok(if outcome.status == RememberStatus::Refused {
        ExitCode::from(REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

fn recall_request(recall: &RecallArgs, query: String) -> Result<RecallRequest> {
    let mut request = RecallRequest::new(query);
    request.limit = recall.limit;
    request.scope = recall.scope.clone();
    request.types = parse_types(&recall.types)?;
    request.all = recall.all;
    request.touch = !recall.no_touch;
    request.as_of = recall.as_of.clone();
    request.since = recall.since.clone();
    request.until = recall.until.clone();
    request.mode = recall.mode.parse::<Mode>()?;
    request.floor = recall.floor;
    request.zone = recall
        .zone
        .as_deref()
        .map(str::parse::<TrustZone>)
        .transpose()
        .map_err(EngineError::from)?;
    Ok(request)
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchLine {
    query: String,
    limit: Option<usize>,
    project: Option<String>,
    scope: Option<String>,
    as_of: Option<String>,
    mode: Option<String>,
    floor: Option<f64>,
    #[serde(rename = "type")]
    types: Option<Vec<String>>,
    zone: Option<String>,
}

fn run_recall(args: &Cli, recall: &RecallArgs) -> Result<ExitCode> {
    let mut engine = open(args, "cli")?;
    if let Some(batch) = &recall.batch {
        let input: Box<dyn BufRead> = if batch == "-" {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            Box::new(BufReader::new(
                std::fs::File::open(batch).with_context(|| format!("cannot read {batch}"))?,
            ))
        };
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        for (number, line) in input.lines().enumerate() {
            let line =
                line.with_context(|| format!("cannot read line {} of {batch}", number + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let answer = serde_json::from_str::<BatchLine>(&line)
                .map_err(|e| format!("line {}: not a query line: {e}", number + 1))
                .and_then(|parsed| {
                    let mut request =
                        recall_request(recall, parsed.query).map_err(|e| e.to_string())?;
                    if let Some(limit) = parsed.limit {
                        request.limit = limit;
                    }
                    request.project = parsed.project;
                    request.scope = parsed.scope.or(request.scope);
                    request.as_of = parsed.as_of.or(request.as_of);
                    if let Some(mode) = parsed.mode {
                        request.mode = mode.parse::<Mode>().map_err(|e| e.to_string())?;
                    }
                    request.floor = parsed.floor.or(request.floor);
                    if let Some(types) = parsed.types {
                        request.types = parse_types(&types).map_err(|e| e.to_string())?;
                    }
                    if let Some(zone) = parsed.zone {
                        request.zone = Some(zone.parse::<TrustZone>().map_err(|e| e.to_string())?);
                    }
                    engine.recall(&request).map_err(|e| e.to_string())
                });
            match answer {
                Ok(answer) => writeln!(out, "{}", serde_json::to_string(&answer)?)?,
                Err(error) => writeln!(
                    out,
                    "{}",
                    serde_json::json!({"status": "error", "error": error})
                )?,
            }
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let query = recall.query.clone().unwrap_or_default();
    let answer = engine.recall(&recall_request(recall, query)?)?;
    if args.json {
        print_json(&answer);
    } else {
        print_answer(&answer);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_answer(answer: &RecallAnswer) {
    if let Some(degraded) = &answer.degraded {
        outln!("(search is {degraded}: semantic search is unavailable, see the notes below)");
    }
    if answer.results.is_empty() {
        outln!("{}", answer.note.as_deref().unwrap_or("nothing found"));
        return;
    }
    for result in &answer.results {
        let mut header = format!("#{} {} · {}", result.id, result.memory_type, result.scope);
        if let Some(project) = &result.project {
            header.push_str(&format!(" · {}", snippet(project, 40)));
        } else {
            header.push_str(" · personal");
        }
        header.push_str(&format!(" · score {:.2}", result.score_norm));
        outln!("{header}");
        if let Some(title) = &result.title {
            outln!("  {title}");
        }
        outln!("  {}", snippet(&result.body, 240));
        let mut why = Vec::new();
        if let Some(rank) = result.why.lexical_rank {
            why.push(format!("lexical #{rank}"));
        }
        if let Some(rank) = result.why.vector_rank {
            why.push(format!("vector #{rank}"));
        }
        why.push(format!("recency {:.2}", result.why.recency));
        why.push(format!("stakes {:.2}", result.why.stakes));
        outln!("  why: {}", why.join(" · "));
        if let Some(from) = result.superseded_from {
            outln!("  (matched #{from}, which this record supersedes)");
        }
        if let Some(freshness) = &result.freshness {
            outln!("  freshness: {freshness}");
        }
        if result.review_due {
            outln!(
                "  review due: re-check this claim (`cairn verify {} --source …`)",
                result.id
            );
        }
    }
    for warning in &answer.warnings {
        outln!("note: {warning}");
    }
}

fn print_memory(memory: &cairn_core::memory::Memory) {
    outln!(
        "#{} {} · {} · {} · {}",
        memory.id,
        memory.memory_type,
        memory.status,
        memory.scope,
        memory.project.as_deref().unwrap_or("personal")
    );
    if let Some(title) = &memory.title {
        outln!("  {title}");
    }
    for line in memory.body.lines() {
        outln!("  | {line}");
    }
    let mut facts = vec![
        format!("importance {}", memory.importance),
        format!("confidence {}", memory.confidence),
        format!("trust {}", memory.trust),
        format!("zone {}", memory.trust_zone),
        format!("sensitivity {}", memory.sensitivity),
    ];
    if memory.pinned {
        facts.push("pinned".into());
    }
    outln!("  {}", facts.join(" · "));
    if !memory.tags.is_empty() {
        outln!("  tags: {}", memory.tags.join(", "));
    }
    if let Some(source) = &memory.source {
        outln!("  source: {source}");
    }
    if let Some(commit) = &memory.commit {
        outln!("  commit: {commit}");
    }
    if let Some(at) = &memory.review_at {
        outln!("  review at: {at}");
    }
    if let Some(at) = &memory.expires_at {
        outln!("  expires at: {at}");
    }
    if let Some(id) = memory.supersedes {
        outln!("  supersedes #{id}");
    }
    if let Some(id) = memory.superseded_by {
        outln!("  superseded by #{id}");
    }
    if let Some(external) = &memory.external_id {
        outln!("  external id: {external}");
    }
    outln!(
        "  created {} · updated {} · used {} times",
        memory.created_at,
        memory.updated_at,
        memory.use_count
    );
}

fn run_recover(args: &Cli, target: &Path) -> Result<ExitCode> {
    let damaged = args
        .db
        .clone()
        .unwrap_or_else(cairn_engine::default_brain_path);
    let tables = cairn_engine::recover_brain(&damaged, target)?;
    let rows: i64 = tables.iter().map(|t| t.rows).sum();
    let lost: i64 = tables.iter().map(|t| t.lost).sum();
    if args.json {
        print_json(&serde_json::json!({
            "status": "recovered",
            "from": damaged.display().to_string(),
            "into": target.display().to_string(),
            "rows": rows,
            "lost": lost,
            "tables": tables,
        }));
    } else {
        for table in &tables {
            outln!(
                "  {:<18} {} rows{}{}",
                table.table,
                table.rows,
                if table.lost > 0 {
                    format!(", {} unreadable", table.lost)
                } else {
                    String::new()
                },
                table
                    .error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
        outln!(
            "recovered {rows} rows into {} ({lost} unreadable); {} was not changed — check the new brain with `cairn --db {} doctor`, then use it with `--db`",
            target.display(),
            damaged.display(),
            target.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_doctor(args: &Cli, repair: bool) -> Result<ExitCode> {
    let mut engine = match open(args, "doctor") {
        Ok(engine) => engine,
        Err(error) => {
            if let Some(EngineError::Store(cairn_store_error)) = error.downcast_ref::<EngineError>()
            {
                let text = cairn_store_error.to_string();
                if text.contains("damaged") {
                    let path = args
                        .db
                        .clone()
                        .unwrap_or_else(cairn_engine::default_brain_path);
                    let advice = format!(
                        "the brain at {} cannot be opened as a database. Nothing was changed or deleted. To recover what can be read into a new file: `cairn doctor --recover-into {}.recovered.db` (or `sqlite3 {} .recover | sqlite3 {}.recovered.db`), then use `--db {}.recovered.db`; keep the damaged file until you have checked the result",
                        path.display(),
                        path.display(),
                        path.display(),
                        path.display(),
                        path.display()
                    );
                    if args.json {
                        print_json(
                            &serde_json::json!({"status": "error", "ok": false, "error": text, "fix": advice}),
                        );
                    } else {
                        eprintln!("cairn doctor: {text}");
                        eprintln!("{advice}");
                    }
                    return Ok(ExitCode::from(1));
                }
            }
            return Err(error);
        }
    };
    let report = engine.doctor(repair)?;
    if args.json {
        print_json(&report);
    } else {
        outln!("brain {} (schema {})", report.path, report.schema_version);
        for check in &report.checks {
            outln!(
                "  {} {:<22} {}",
                match (check.ok, check.warning) {
                    (false, _) => "BAD ",
                    (true, true) => "warn",
                    (true, false) => "ok  ",
                },
                check.name,
                check.detail
            );
            if let Some(fix) = &check.fix {
                outln!("      fix: {fix}");
            }
        }
        for repaired in &report.repaired {
            outln!("  repaired: {repaired}");
        }
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
