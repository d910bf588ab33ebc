//! The commands on single records: remember, show, update, forget, restore, verify, list
//! (recall has its own module). Glue: each is one engine call and its printing.

use crate::commands::recall::{self, RecallArgs};
use crate::output::{REFUSED, print_json, snippet};
use crate::settings::Settings;
use crate::values;
use anyhow::{Context as _, Result};
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, TrustZone};
use cairn_engine::{
    EngineError, ListRequest, RememberOutcome, RememberRequest, RememberStatus, Review,
    UpdateRequest,
};
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
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
}

#[derive(Debug, Args)]
pub struct RememberArgs {
    #[arg(long = "type", value_name = "TYPE", value_parser = values::memory_type())]
    pub(crate) memory_type: MemoryType,
    #[arg(long)]
    pub(crate) title: Option<String>,
    /// The text; `-` reads stdin.
    #[arg(long, value_parser = clap::value_parser!(OsString), conflicts_with = "body_file")]
    pub(crate) body: Option<OsString>,
    #[arg(long, value_name = "FILE")]
    pub(crate) body_file: Option<PathBuf>,
    #[arg(long)]
    pub(crate) summary: Option<String>,
    #[arg(long)]
    pub(crate) scope: Option<String>,
    #[arg(long, value_delimiter = ',')]
    pub(crate) tags: Vec<String>,
    #[arg(long)]
    pub(crate) importance: Option<u8>,
    #[arg(long, value_parser = values::confidence())]
    pub(crate) confidence: Option<Confidence>,
    #[arg(long)]
    pub(crate) source: Option<String>,
    #[arg(long, value_name = "ID")]
    pub(crate) supersedes: Option<i64>,
    #[arg(long)]
    pub(crate) fork_ok: bool,
    #[arg(long)]
    pub(crate) allow_duplicate: bool,
    #[arg(long)]
    pub(crate) pin: bool,
    #[arg(long, value_parser = values::trust_zone())]
    pub(crate) trust_zone: Option<TrustZone>,
    #[arg(long, value_parser = values::sensitivity())]
    pub(crate) sensitivity: Option<Sensitivity>,
    #[arg(long, value_name = "DATE", conflicts_with = "no_review")]
    pub(crate) review: Option<String>,
    #[arg(long)]
    pub(crate) no_review: bool,
    #[arg(long, value_name = "DATE")]
    pub(crate) expires: Option<String>,
    #[arg(long)]
    pub(crate) external_id: Option<String>,
    /// When it happened (RFC 3339); now by default.
    #[arg(long, value_name = "RFC3339")]
    pub(crate) at: Option<String>,
    /// File under no project: visible from every project.
    #[arg(long)]
    pub(crate) personal: bool,
}

#[derive(Debug, Args)]
pub struct UpdateArgs {
    pub(crate) id: i64,
    #[arg(long)]
    pub(crate) title: Option<String>,
    #[arg(long, value_parser = clap::value_parser!(OsString))]
    pub(crate) body: Option<OsString>,
    #[arg(long)]
    pub(crate) summary: Option<String>,
    #[arg(long, value_delimiter = ',')]
    pub(crate) tags: Option<Vec<String>>,
    #[arg(long)]
    pub(crate) importance: Option<u8>,
    #[arg(long, value_parser = values::confidence())]
    pub(crate) confidence: Option<Confidence>,
    #[arg(long)]
    pub(crate) source: Option<String>,
    #[arg(long = "type", value_name = "TYPE", value_parser = values::memory_type())]
    pub(crate) memory_type: Option<MemoryType>,
    #[arg(long)]
    pub(crate) pin: bool,
    #[arg(long, conflicts_with = "pin")]
    pub(crate) unpin: bool,
    #[arg(long, value_name = "DATE")]
    pub(crate) review: Option<String>,
    #[arg(long, value_name = "DATE")]
    pub(crate) expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long = "type", value_name = "TYPE", value_delimiter = ',', value_parser = values::memory_type())]
    pub(crate) types: Vec<MemoryType>,
    #[arg(long)]
    pub(crate) scope: Option<String>,
    #[arg(long, value_parser = values::status())]
    pub(crate) status: Option<Status>,
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
    /// Every project, not only this one and personal.
    #[arg(long)]
    pub(crate) all_projects: bool,
}

pub fn run(settings: &Settings, command: &RecordsCommand) -> Result<ExitCode> {
    match command {
        RecordsCommand::Remember(remember) => run_remember(settings, remember, true),
        RecordsCommand::Recall(args) => recall::run(settings, args),
        RecordsCommand::Show { id, history } => {
            let engine = settings.open("cli")?;
            print_show(settings, &engine.show_document(*id, *history)?, *history)?;
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::Update(update) => {
            let mut engine = settings.open("cli")?;
            let request = UpdateRequest {
                title: update.title.clone(),
                body: read_text(update.body.as_ref(), None)?,
                summary: update.summary.clone(),
                tags: update.tags.clone(),
                importance: update.importance,
                confidence: update.confidence,
                source: update.source.clone(),
                memory_type: update.memory_type,
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
            print_updated(
                settings,
                &serde_json::json!({"status": "updated", "id": memory.id, "redacted": redacted, "record": memory, "warnings": warnings}),
            );
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::Forget { id, hard } => {
            let mut engine = settings.open("cli")?;
            let memory = engine.forget(*id, *hard)?;
            print_forgotten(
                settings,
                &serde_json::json!({"status": if *hard { "deleted" } else { "archived" }, "id": memory.id}),
            );
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::Restore { id } => {
            let mut engine = settings.open("cli")?;
            let memory = engine.restore(*id)?;
            print_restored(
                settings,
                &serde_json::json!({"status": "restored", "id": memory.id, "record_status": memory.status}),
            );
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::Verify { id, source } => {
            let mut engine = settings.open("cli")?;
            let memory = engine.verify(*id, source)?;
            print_verified(
                settings,
                &serde_json::json!({"status": "verified", "id": memory.id, "review_at": memory.review_at}),
            );
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::List(list) => {
            let engine = settings.open("cli")?;
            let memories = engine.list(&ListRequest {
                types: list.types.clone(),
                scope: list.scope.clone(),
                status: list.status,
                limit: list.limit,
                all_projects: list.all_projects,
            })?;
            print_list(settings, &memories);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `remember` on the file; `load_model`: embed the new record now (else it waits for the
/// daemon's indexer: `crate::daemon`).
pub(crate) fn run_remember(
    settings: &Settings,
    remember: &RememberArgs,
    load_model: bool,
) -> Result<ExitCode> {
    let body =
        read_text(remember.body.as_ref(), remember.body_file.as_deref())?.ok_or_else(|| {
            EngineError::Invalid(
                "no body: give --body TEXT, --body-file FILE or --body - (stdin)".into(),
            )
        })?;
    let mut request = RememberRequest::new(remember.memory_type, body);
    request.title = remember.title.clone();
    request.summary = remember.summary.clone();
    request.scope = remember.scope.clone();
    request.tags = remember.tags.clone();
    request.importance = remember.importance;
    request.confidence = remember.confidence;
    request.source = remember.source.clone();
    request.supersedes = remember.supersedes;
    request.fork_ok = remember.fork_ok;
    request.allow_duplicate = remember.allow_duplicate;
    request.pinned = remember.pin;
    request.trust_zone = remember.trust_zone;
    request.sensitivity = remember.sensitivity;
    request.review = match (&remember.review, remember.no_review) {
        (_, true) => Review::Never,
        (Some(at), false) => Review::At(at.clone()),
        (None, false) => Review::Default,
    };
    request.expires_at = remember.expires.clone();
    request.external_id = remember.external_id.clone();
    request.at = remember.at.clone();
    request.personal = remember.personal;
    let mut engine = if load_model {
        settings.open("cli")?
    } else {
        settings.open_without_model("cli")?
    };
    let outcome = engine.remember(&request)?;
    Ok(print_remember(settings, &outcome))
}

/// Prints what `remember` did; exit 3 when it was refused.
pub(crate) fn print_remember(settings: &Settings, outcome: &RememberOutcome) -> ExitCode {
    if settings.json {
        print_json(outcome);
    } else {
        outln!("{}", outcome.message);
        for warning in &outcome.warnings {
            outln!("  note: {warning}");
        }
    }
    if outcome.status == RememberStatus::Refused {
        ExitCode::from(REFUSED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `show`'s document (`Engine::show_document`, `GET /v1/records/{id}`) read back for text.
#[derive(Debug, serde::Deserialize)]
struct ShowDocument {
    #[serde(flatten)]
    memory: cairn_core::memory::Memory,
    #[serde(default)]
    merged_into: Option<i64>,
    #[serde(default)]
    surfaced_at: Option<String>,
    #[serde(default)]
    history: Vec<cairn_store::HistoryRow>,
    #[serde(default)]
    conflicts: Vec<cairn_store::ConflictRow>,
}

/// Prints one record: its document as JSON, or as text.
pub(crate) fn print_show(
    settings: &Settings,
    document: &serde_json::Value,
    history: bool,
) -> Result<()> {
    if settings.json {
        print_json(document);
        return Ok(());
    }
    let shown: ShowDocument = serde_json::from_value(document.clone())
        .context("the record's document does not read back as a record")?;
    let memory = &shown.memory;
    let id = memory.id;
    print_memory(memory);
    if let Some(survivor) = shown.merged_into {
        outln!("  merged into #{survivor} by a dream (`cairn restore {id}` undoes it)");
    }
    if let Some(at) = &shown.surfaced_at {
        outln!("  surfaced to an agent {at} (brief or prompt hook)");
    }
    for conflict in &shown.conflicts {
        let other = if conflict.memory_id == memory.id {
            conflict.other_id
        } else {
            conflict.memory_id
        };
        outln!("  conflict with #{other}: {}", conflict.reason);
    }
    if history {
        if shown.history.is_empty() {
            outln!("  history: no earlier versions");
        }
        for version in &shown.history {
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
    Ok(())
}

/// The text of a field of an answer (`id`, `status`, …).
fn field<'a>(answer: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    answer.get(key).unwrap_or(&serde_json::Value::Null)
}

/// Prints `update`'s answer (`{"status": "updated", "id", "redacted", "record", "warnings"}`).
pub(crate) fn print_updated(settings: &Settings, answer: &serde_json::Value) {
    if settings.json {
        print_json(answer);
        return;
    }
    outln!("updated #{}", field(answer, "id"));
    let strings = |key: &str| -> Vec<String> {
        field(answer, key)
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let redacted = strings("redacted");
    if !redacted.is_empty() {
        outln!("  redacted secrets: {}", redacted.join(", "));
    }
    for warning in strings("warnings") {
        outln!("  note: {warning}");
    }
}

/// Prints `forget`'s answer (`{"status": "archived"|"deleted", "id"}`).
pub(crate) fn print_forgotten(settings: &Settings, answer: &serde_json::Value) {
    if settings.json {
        print_json(answer);
        return;
    }
    let id = field(answer, "id");
    if field(answer, "status") == "deleted" {
        outln!("deleted #{id} for good (its history keeps the last version)");
    } else {
        outln!("archived #{id}; `cairn restore {id}` brings it back");
    }
}

/// Prints `restore`'s answer (`{"status": "restored", "id", "record_status"}`).
pub(crate) fn print_restored(settings: &Settings, answer: &serde_json::Value) {
    if settings.json {
        print_json(answer);
        return;
    }
    let status = field(answer, "record_status").as_str().unwrap_or("");
    outln!("restored #{} ({status})", field(answer, "id"));
}

/// Prints `verify`'s answer (`{"status": "verified", "id", "review_at"}`).
pub(crate) fn print_verified(settings: &Settings, answer: &serde_json::Value) {
    if settings.json {
        print_json(answer);
        return;
    }
    let id = field(answer, "id");
    match field(answer, "review_at").as_str() {
        Some(at) => outln!("verified #{id}; next review {}", at.get(..10).unwrap_or(at)),
        None => outln!("verified #{id}"),
    }
}

/// Prints `list`'s records, newest first.
pub(crate) fn print_list(settings: &Settings, memories: &[cairn_core::memory::Memory]) {
    if settings.json {
        print_json(&memories);
    } else if memories.is_empty() {
        outln!("no records");
    } else {
        for memory in memories {
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
}

/// Text from an argument, a file or stdin, checked for UTF-8 and NUL before anything else.
pub(crate) fn read_text(value: Option<&OsString>, file: Option<&Path>) -> Result<Option<String>> {
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
