//! JSONL exchange: every record with its history, declared scopes, the graph, the rest of the
//! brain's state (settings, identity, tasks, measures, awareness, inbox, conflicts, capture
//! offsets, dream sets: `exchange_state`) and events, one JSON object a line — the backup and
//! migration format (docs/cli.md "Exchange", docs/exchange.md).
//!
//! Import goes through the write path's rules that apply to restoring decided records
//! (sanitize, secret guard, identity by external id or title, exact duplicate → noop) and reports
//! per line; a bad line never stops the others. Ids are kept when they are free in the target
//! brain, otherwise re-assigned with supersession links remapped.

use crate::remember::{RememberRequest, Review, log_event, prepare};
use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, Trust, TrustZone};
use cairn_core::time::{format_ts, parse_time};
use cairn_store::{HistoryRow, ListFilter, NewEvent, WriteTx};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, Write};

/// Version of the JSONL format written by `export`.
pub const FORMAT_VERSION: u32 = 1;
/// Lines per write transaction during import.
const IMPORT_BATCH: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LineStatus {
    Added,
    Updated,
    Noop,
    Refused,
    Error,
}

/// What happened to one input line.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LineOutcome {
    pub line: usize,
    pub status: LineStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportSummary {
    pub added: usize,
    pub updated: usize,
    pub noop: usize,
    pub refused: usize,
    pub error: usize,
    pub events: usize,
    pub history_versions: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportReport {
    pub summary: ImportSummary,
    pub lines: Vec<LineOutcome>,
}

/// Options for an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Trust stamped on lines that do not say theirs (default `imported`).
    pub default_trust: Option<Trust>,
}

/// What a newly stored record's line said about other records, applied once every record of
/// the file is stored (their ids remapped).
struct PendingLinks {
    id: i64,
    supersedes: Option<i64>,
    superseded_by: Option<i64>,
    /// The record a dream merged this one into.
    merged_into: Option<i64>,
}

/// One memory line as read: every field optional but `body`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryLine {
    #[serde(default)]
    kind: Option<String>,
    id: Option<i64>,
    #[serde(default, deserialize_with = "double_option")]
    project: Option<Option<String>>,
    scope: Option<String>,
    #[serde(rename = "type")]
    memory_type: Option<String>,
    title: Option<String>,
    body: Option<String>,
    summary: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    importance: Option<u8>,
    confidence: Option<String>,
    trust: Option<String>,
    trust_zone: Option<String>,
    sensitivity: Option<String>,
    source: Option<String>,
    commit: Option<String>,
    review_at: Option<String>,
    expires_at: Option<String>,
    pinned: Option<bool>,
    status: Option<String>,
    supersedes: Option<i64>,
    superseded_by: Option<i64>,
    external_id: Option<String>,
    created_at: Option<String>,
    updated_at: Option<String>,
    last_accessed_at: Option<String>,
    valid_from: Option<String>,
    use_count: Option<u32>,
    content_hash: Option<String>,
    retired_at: Option<String>,
    merged_into: Option<i64>,
    #[serde(default)]
    history: Vec<HistoryLine>,
}

#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
struct HistoryLine {
    version: i64,
    at: String,
    op: String,
    actor: String,
    snapshot: Value,
}

fn double_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::<String>::deserialize(d)?))
}

fn parse_or<T: std::str::FromStr<Err = cairn_core::record::UnknownValue>>(
    value: &Option<String>,
    default: T,
) -> Result<T> {
    match value {
        Some(text) => Ok(text.parse::<T>()?),
        None => Ok(default),
    }
}

impl Engine {
    /// Writes every record (with history), the declared scopes, the graph, the brain's other
    /// state (`exchange_state`) and every event as JSONL. Returns the number of lines written.
    pub fn export_jsonl(&self, out: &mut dyn Write) -> Result<usize> {
        let reader = self.store.reader()?;
        let io = |source| EngineError::Io {
            path: "<export>".into(),
            source,
        };
        let mut lines = 0usize;
        let header = json!({
            "kind": "header",
            "format": "cairn-jsonl",
            "version": FORMAT_VERSION,
            "schema": cairn_store::SCHEMA_VERSION,
        });
        writeln!(out, "{header}").map_err(io)?;
        lines += 1;
        let merged = reader.merged_bases()?;
        let mut after = None;
        loop {
            let page = reader.list(&ListFilter {
                after_id: after,
                limit: 2000,
                ..ListFilter::default()
            })?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            for memory in &page {
                let mut value = serde_json::to_value(memory).expect("a record serializes");
                let object = value.as_object_mut().expect("a record is an object");
                object.insert("kind".into(), json!("memory"));
                if let Some(&base) = merged.get(&memory.id) {
                    // The survivor the dream named (the base may be where it went since).
                    let survivor = reader.merged_into(memory.id)?.unwrap_or(base);
                    object.insert("merged_into".into(), json!(survivor));
                }
                let history = reader.history(memory.id)?;
                if !history.is_empty() {
                    object.insert(
                        "history".into(),
                        serde_json::to_value(history).expect("history serializes"),
                    );
                }
                writeln!(out, "{value}").map_err(io)?;
                lines += 1;
            }
        }
        for scope in reader
            .scopes(Some(&self.context.project))?
            .into_iter()
            .filter(|s| s.declared_at.is_some())
        {
            writeln!(out, "{}", json!({"kind": "scope", "project": scope.project, "scope": scope.scope, "description": scope.description, "declared_at": scope.declared_at})).map_err(io)?;
            lines += 1;
        }
        lines += crate::graph::exchange::export_graph(&reader, out)?;
        lines += crate::exchange_state::export_state(&reader, out)?;
        for event in reader.events(None, 0)? {
            let mut value = serde_json::to_value(&event).expect("an event serializes");
            value
                .as_object_mut()
                .expect("object")
                .insert("kind".into(), json!("event"));
            writeln!(out, "{value}").map_err(io)?;
            lines += 1;
        }
        Ok(lines)
    }

    /// Reads JSONL written by `export` (or memory lines from elsewhere) and reports per line.
    pub fn import_jsonl(
        &mut self,
        input: &mut dyn BufRead,
        options: &ImportOptions,
    ) -> Result<ImportReport> {
        self.ensure_writable("import")?;
        let now = self.now();
        let actor = "import".to_string();
        let default_project = self.context.project.clone();
        let default_trust = options.default_trust.unwrap_or(Trust::Imported);
        let mut report = ImportReport {
            summary: ImportSummary::default(),
            lines: Vec::new(),
        };
        // old id → new id, for links and events of lines whose id was taken.
        let mut id_map: HashMap<i64, i64> = HashMap::new();
        let mut pending_links: Vec<PendingLinks> = Vec::new();
        let mut pending_events: Vec<Value> = Vec::new();
        // Records added or changed, whose entities are extracted at the end unless the file
        // carries a graph of its own (an export's graph lines restore the edge log as it was;
        // extracting first would write a second history of the same edges).
        let mut to_link: Vec<(i64, bool)> = Vec::new();
        let extract = self.extract_entities;
        let staging = Staging {
            default_project: &default_project,
            default_trust,
            now,
        };
        // A pipeline of two stages: a second thread parses each batch of lines and runs the
        // write path's store-free steps (sanitize, secret guard, MinHash), while this thread
        // reads the next batch and writes the previous one in its transaction. The lines are
        // written in file order either way; on two cores the import takes about as long as the
        // longer stage instead of both.
        std::thread::scope(|scope| -> Result<()> {
            let (raw_sender, raw_receiver) = std::sync::mpsc::sync_channel::<RawBatch>(1);
            let (staged_sender, staged_receiver) =
                std::sync::mpsc::sync_channel::<Vec<(usize, LineWork)>>(1);
            let staging = &staging;
            scope.spawn(move || {
                for batch in raw_receiver {
                    let staged = batch
                        .into_iter()
                        .map(|(line, raw)| (line, staging.stage(raw)))
                        .collect();
                    if staged_sender.send(staged).is_err() {
                        break;
                    }
                }
            });
            let mut in_flight = 0usize;
            let mut batch: RawBatch = Vec::with_capacity(IMPORT_BATCH);
            let mut line_number = 0usize;
            let mut buffer = Vec::new();
            let mut reading = true;
            while reading || in_flight > 0 {
                if reading {
                    buffer.clear();
                    let read =
                        input
                            .read_until(b'\n', &mut buffer)
                            .map_err(|source| EngineError::Io {
                                path: "<import>".into(),
                                source,
                            })?;
                    if read > 0 {
                        line_number += 1;
                        let raw = match std::str::from_utf8(&buffer) {
                            Err(e) => Err(format!(
                                "not valid UTF-8 (byte {}); re-encode the file as UTF-8",
                                e.valid_up_to()
                            )),
                            Ok(text) if text.trim().is_empty() => continue,
                            Ok(text) => Ok(text.trim().to_string()),
                        };
                        batch.push((line_number, raw));
                        if batch.len() < IMPORT_BATCH {
                            continue;
                        }
                    } else {
                        reading = false;
                    }
                    if !batch.is_empty() {
                        raw_sender
                            .send(std::mem::replace(
                                &mut batch,
                                Vec::with_capacity(IMPORT_BATCH),
                            ))
                            .map_err(|_| {
                                EngineError::Invalid("the import stager stopped".into())
                            })?;
                        in_flight += 1;
                    }
                    // Keep one batch staging while this one is written.
                    if reading && in_flight < 2 {
                        continue;
                    }
                }
                if in_flight == 0 {
                    break;
                }
                let staged = staged_receiver
                    .recv()
                    .map_err(|_| EngineError::Invalid("the import stager stopped".into()))?;
                in_flight -= 1;
                self.import_batch(
                    staged,
                    &default_project,
                    now,
                    &actor,
                    &mut id_map,
                    &mut pending_links,
                    &mut pending_events,
                    &mut to_link,
                    &mut report,
                )?;
            }
            drop(raw_sender);
            Ok(())
        })?;
        let now_text = format_ts(now);
        let summary = report.summary.clone();
        self.store.write(|tx| {
            let (state_lines, rest): (Vec<&Value>, Vec<&Value>) = pending_events
                .iter()
                .partition(|v| v.get("state_line").is_some());
            let (graph_lines, events): (Vec<&Value>, Vec<&Value>) = rest
                .into_iter()
                .partition(|v| v.get("graph_line").is_some());
            for PendingLinks {
                id: new_id,
                supersedes,
                superseded_by,
                ..
            } in &pending_links
            {
                let Some(mut memory) = tx.reader().get(*new_id)? else {
                    continue;
                };
                let remap = |old: &Option<i64>| old.map(|o| id_map.get(&o).copied().unwrap_or(o));
                let fixed_supersedes =
                    remap(supersedes).filter(|id| tx.reader().get(*id).ok().flatten().is_some());
                let fixed_by =
                    remap(superseded_by).filter(|id| tx.reader().get(*id).ok().flatten().is_some());
                // The file's own graph lines carry the supersedes edge with its history.
                if let Some(old) = fixed_supersedes
                    && graph_lines.is_empty()
                {
                    let at = memory.valid_from.clone();
                    crate::graph::write::record_supersedes(
                        tx, memory.id, old, &at, &now_text, "import",
                    )?;
                }
                if memory.supersedes != fixed_supersedes || memory.superseded_by != fixed_by {
                    let previous = memory.clone();
                    memory.supersedes = fixed_supersedes;
                    memory.superseded_by = fixed_by;
                    let norm = memory
                        .title
                        .as_deref()
                        .map(cairn_core::text::normalize_title);
                    tx.update_memory(&memory, norm.as_deref(), &previous, "import-link", "import")?;
                }
            }
            // Records a dream merged away are stored against the record they went into, as in
            // the brain they came from (out of recall, found through the survivor).
            for link in &pending_links {
                if let Some(base) = link.merged_into {
                    tx.pack_merged(link.id, id_map.get(&base).copied().unwrap_or(base))?;
                }
            }
            let graph_lines: Vec<(usize, Value)> = graph_lines
                .into_iter()
                .map(|v| {
                    let line = v.get("graph_line").and_then(Value::as_u64).unwrap_or(0) as usize;
                    (line, v.get("value").cloned().unwrap_or(Value::Null))
                })
                .collect();
            if extract && graph_lines.is_empty() {
                for (id, added) in &to_link {
                    crate::graph::write::link_record_id(tx, *id, now, "import", *added)?;
                }
            }
            crate::graph::exchange::import_graph(
                tx,
                &graph_lines,
                &id_map,
                &now_text,
                &actor,
                &mut report,
            )?;
            let state_lines: Vec<(usize, Value)> = state_lines
                .into_iter()
                .map(|v| {
                    let line = v.get("state_line").and_then(Value::as_u64).unwrap_or(0) as usize;
                    (line, v.get("value").cloned().unwrap_or(Value::Null))
                })
                .collect();
            crate::exchange_state::import_state(tx, &state_lines, &id_map, &mut report)?;
            // An event the brain already holds (same time, operation, record and receipt) is
            // not appended again: importing the same file twice changes nothing.
            let known_events: std::collections::HashSet<(String, String, Option<i64>, String)> =
                if events.is_empty() {
                    Default::default()
                } else {
                    tx.reader()
                        .events(None, 0)?
                        .into_iter()
                        .map(|e| (e.at, e.op, e.memory_id, e.receipt))
                        .collect()
                };
            for event in events {
                let at = event.get("at").and_then(Value::as_str).unwrap_or(&now_text);
                let op = event.get("op").and_then(Value::as_str).unwrap_or("event");
                let memory_id = event
                    .get("memory_id")
                    .and_then(Value::as_i64)
                    .map(|id| id_map.get(&id).copied().unwrap_or(id));
                let project = event.get("project").and_then(Value::as_str);
                // Who wrote it, as the file says; a file from before schema v16 names nobody.
                let event_actor = event.get("actor").and_then(Value::as_str).unwrap_or("");
                let detail = event.get("detail").cloned().unwrap_or(Value::Null);
                let receipt = event
                    .get("receipt")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| cairn_core::receipt::receipt(&detail));
                if known_events.contains(&(
                    at.to_string(),
                    op.to_string(),
                    memory_id,
                    receipt.clone(),
                )) {
                    continue;
                }
                tx.append_event(
                    &NewEvent {
                        at,
                        op,
                        memory_id,
                        project,
                        detail: &detail,
                        actor: event_actor,
                    },
                    &receipt,
                )?;
                report.summary.events += 1;
            }
            let detail = json!({"op": "import", "at": now_text, "summary": summary});
            let receipt = cairn_core::receipt::receipt(&detail);
            tx.append_event(
                &NewEvent {
                    at: &now_text,
                    op: "import",
                    memory_id: None,
                    project: Some(&default_project),
                    detail: &detail,
                    actor: &actor,
                },
                &receipt,
            )?;
            Ok::<_, EngineError>(())
        })?;
        if report.summary.added > 1000 {
            self.store.sqlite_mut()?.optimize()?;
        }
        Ok(report)
    }

    #[allow(clippy::too_many_arguments)]
    fn import_batch(
        &mut self,
        lines: Vec<(usize, LineWork)>,
        default_project: &str,
        now: chrono::DateTime<chrono::Utc>,
        actor: &str,
        id_map: &mut HashMap<i64, i64>,
        pending_links: &mut Vec<PendingLinks>,
        pending_events: &mut Vec<Value>,
        to_link: &mut Vec<(i64, bool)>,
        report: &mut ImportReport,
    ) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        self.store.write(|tx| {
            for (line, work) in lines {
                let value = match work {
                    LineWork::Error(message) => {
                        record(report, line, LineStatus::Error, None, Some(message));
                        continue;
                    }
                    LineWork::Memory(Err(error)) => {
                        record(report, line, LineStatus::Error, None, Some(error.to_string()));
                        continue;
                    }
                    LineWork::Memory(Ok(staged)) => {
                        match import_memory(tx, *staged, now, actor, id_map, pending_links) {
                            Ok((status, id, message)) => {
                                if matches!(status, LineStatus::Added | LineStatus::Updated)
                                    && let Some(id) = id
                                {
                                    to_link.push((id, status == LineStatus::Added));
                                }
                                record(report, line, status, id, message)
                            }
                            Err(EngineError::Store(store)) => return Err(EngineError::Store(store)),
                            Err(other) => record(report, line, LineStatus::Error, None, Some(other.to_string())),
                        }
                        continue;
                    }
                    LineWork::Other(value) => value,
                };
                match value.get("kind").and_then(Value::as_str) {
                    Some("header") => continue,
                    Some("event") => {
                        pending_events.push(value);
                        continue;
                    }
                    // Graph lines wait for every memory (their record ids are remapped), and
                    // ride with the events, tagged with their line number.
                    Some(kind) if crate::graph::exchange::GRAPH_KINDS.contains(&kind) => {
                        pending_events.push(json!({"graph_line": line, "value": value}));
                        continue;
                    }
                    // So do the brain's other state lines (conflicts name records).
                    Some(kind) if crate::exchange_state::STATE_KINDS.contains(&kind) => {
                        pending_events.push(json!({"state_line": line, "value": value}));
                        continue;
                    }
                    Some("scope") => {
                        let scope = value.get("scope").and_then(Value::as_str).unwrap_or("");
                        match cairn_core::scope::Scope::parse(scope) {
                            Ok(scope) => {
                                let description = value.get("description").and_then(Value::as_str);
                                let at = value.get("declared_at").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format_ts(now));
                                let project = value.get("project").and_then(Value::as_str).unwrap_or(default_project);
                                // Declared already, with this description (or none given): nothing changes.
                                let declared = tx.reader().scopes(Some(project))?.into_iter().any(|s| {
                                    s.scope == scope.as_str() && s.declared_at.is_some() && (description.is_none() || s.description.as_deref() == description)
                                });
                                if declared {
                                    record(report, line, LineStatus::Noop, None, Some(format!("scope {scope} is already declared")));
                                } else {
                                    tx.declare_scope(Some(project), scope.as_str(), description, &at)?;
                                    record(report, line, LineStatus::Added, None, Some(format!("scope {scope}")));
                                }
                            }
                            Err(e) => record(report, line, LineStatus::Error, None, Some(e.to_string())),
                        }
                    }
                    Some(other) => {
                        record(report, line, LineStatus::Error, None, Some(format!("unknown line kind {other:?}: expected memory, event, scope, header, a graph kind ({}) or a state kind ({}); the line was skipped", crate::graph::exchange::GRAPH_KINDS.join(", "), crate::exchange_state::STATE_KINDS.join(", "))));
                    }
                    // `stage` hands memory lines over as `LineWork::Memory`.
                    None => {}
                }
            }
            Ok::<_, EngineError>(())
        })
    }
}

/// Lines read but not yet parsed: the line number and its text (or why it is unreadable).
type RawBatch = Vec<(usize, std::result::Result<String, String>)>;

/// What the staging thread made of one line.
enum LineWork {
    /// Not UTF-8, not JSON, or not a memory line it could read: the line's error.
    Error(String),
    /// A memory line through the store-free steps of the write path.
    Memory(Result<Box<StagedMemory>>),
    /// Any other kind (header, event, scope, graph, unknown), handled in the transaction.
    Other(Value),
}

/// A memory line after the write path's store-free steps.
struct StagedMemory {
    line: MemoryLine,
    memory: Memory,
    title_norm: Option<String>,
    redacted: Vec<String>,
}

/// What staging needs to know (the same for every line of an import).
struct Staging<'a> {
    default_project: &'a str,
    default_trust: Trust,
    now: chrono::DateTime<chrono::Utc>,
}

impl Staging<'_> {
    fn stage(&self, raw: std::result::Result<String, String>) -> LineWork {
        let value = match raw.and_then(|text| {
            serde_json::from_str::<Value>(&text).map_err(|e| format!("not valid JSON: {e}"))
        }) {
            Ok(value) => value,
            Err(message) => return LineWork::Error(message),
        };
        match value.get("kind").and_then(Value::as_str) {
            Some("memory") | None => {}
            Some(_) => return LineWork::Other(value),
        }
        match serde_json::from_value::<MemoryLine>(value) {
            Ok(line) => LineWork::Memory(
                stage_memory(line, self.default_project, self.default_trust, self.now)
                    .map(Box::new),
            ),
            Err(e) => LineWork::Error(format!("not a memory line: {e}")),
        }
    }
}

/// Records what became of one graph or state line: its outcome, or the error that made it be
/// skipped (a row naming a column its table lacks says which columns there are). Only a store
/// failure stops the import: it is handed back.
pub(crate) fn record_line(
    report: &mut ImportReport,
    line: usize,
    outcome: Result<(LineStatus, String)>,
) -> Result<()> {
    let message = match outcome {
        Ok((status, message)) => {
            record(report, line, status, None, Some(message));
            return Ok(());
        }
        Err(EngineError::Store(cairn_store::StoreError::UnknownColumn {
            table,
            column,
            known,
        })) => {
            format!("{table} has no column {column:?} (its columns: {known}); the line was skipped")
        }
        Err(EngineError::Store(cairn_store::StoreError::MissingColumn { table, column })) => {
            format!("{table} needs a value for {column:?}; the line was skipped")
        }
        Err(EngineError::Store(error)) => return Err(EngineError::Store(error)),
        Err(other) => other.to_string(),
    };
    record(report, line, LineStatus::Error, None, Some(message));
    Ok(())
}

pub(crate) fn record(
    report: &mut ImportReport,
    line: usize,
    status: LineStatus,
    id: Option<i64>,
    message: Option<String>,
) {
    let summary = &mut report.summary;
    match status {
        LineStatus::Added => summary.added += 1,
        LineStatus::Updated => summary.updated += 1,
        LineStatus::Noop => summary.noop += 1,
        LineStatus::Refused => summary.refused += 1,
        LineStatus::Error => summary.error += 1,
    }
    report.lines.push(LineOutcome {
        line,
        status,
        id,
        message,
    });
}

/// The store-free part of importing one memory line: the request it stands for, through
/// `remember::prepare`, with the state a full export line restores verbatim.
fn stage_memory(
    line: MemoryLine,
    default_project: &str,
    default_trust: Trust,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<StagedMemory> {
    let _ = &line.kind;
    let _ = &line.content_hash;
    let body = line
        .body
        .clone()
        .ok_or(EngineError::Empty { what: "the body" })?;
    let memory_type: MemoryType = match &line.memory_type {
        Some(t) => t.parse()?,
        None => MemoryType::Note,
    };
    let project = match &line.project {
        Some(project) => project.clone(),
        None => Some(default_project.to_string()),
    };
    let created = line.created_at.clone().or(line.valid_from.clone());
    let mut request = RememberRequest::new(memory_type, body);
    request.title = line.title.clone();
    request.summary = line.summary.clone();
    request.scope = line.scope.clone();
    request.tags = line.tags.clone();
    request.importance = line.importance;
    request.confidence = line
        .confidence
        .as_deref()
        .map(str::parse::<Confidence>)
        .transpose()?;
    request.source = line.source.clone();
    request.pinned = line.pinned.unwrap_or(false);
    request.trust = Some(parse_or(&line.trust, default_trust)?);
    request.trust_zone = Some(parse_or(&line.trust_zone, TrustZone::PrivateSelf)?);
    request.sensitivity = Some(parse_or(&line.sensitivity, Sensitivity::Normal)?);
    request.review = match &line.review_at {
        Some(at) => Review::At(at.clone()),
        None if line.id.is_some() => Review::Never,
        None => Review::Default,
    };
    request.expires_at = line.expires_at.clone();
    request.external_id = line.external_id.clone();
    request.at = created;
    request.personal = project.is_none();
    let prepared = prepare(&request, project, now, line.commit.clone())?;
    let mut memory = prepared.memory;
    // A full export line carries the state to restore verbatim.
    memory.commit = line.commit.clone();
    memory.status = parse_or(&line.status, Status::Active)?;
    if let Some(updated_at) = &line.updated_at {
        memory.updated_at = format_ts(parse_time(updated_at, now)?);
    }
    if let Some(valid_from) = &line.valid_from {
        memory.valid_from = format_ts(parse_time(valid_from, now)?);
    }
    memory.last_accessed_at = line.last_accessed_at.clone();
    memory.use_count = line.use_count.unwrap_or(0);
    memory.retired_at = line.retired_at.clone();
    if line.importance.is_none() && line.id.is_none() {
        memory.importance = 3;
    }
    Ok(StagedMemory {
        line,
        memory,
        title_norm: prepared.title_norm,
        redacted: prepared.redacted,
    })
}

/// Stores one staged memory line in the import's transaction.
fn import_memory(
    tx: &WriteTx<'_>,
    staged: StagedMemory,
    now: chrono::DateTime<chrono::Utc>,
    actor: &str,
    id_map: &mut HashMap<i64, i64>,
    pending_links: &mut Vec<PendingLinks>,
) -> Result<(LineStatus, Option<i64>, Option<String>)> {
    let StagedMemory {
        line,
        mut memory,
        title_norm,
        redacted,
    } = staged;
    let reader = tx.reader();
    let partition = memory.partition();
    // Identity: external id, then scope + title; exact duplicate → noop.
    let existing = match memory.external_id.as_deref() {
        Some(external_id) => reader.find_by_external_id(memory.project.as_deref(), external_id)?,
        None => match title_norm.as_deref() {
            Some(norm) if memory.status == Status::Active => reader
                .find_by_identity(memory.project.as_deref(), &memory.scope, norm)?
                .filter(|m| m.partition() == partition),
            _ => None,
        },
    };
    if let Some(existing) = existing {
        if let Some(old_id) = line.id {
            id_map.insert(old_id, existing.id);
        }
        if existing.content_hash == memory.content_hash && existing.title == memory.title {
            return Ok((
                LineStatus::Noop,
                Some(existing.id),
                Some(format!("already stored as #{}", existing.id)),
            ));
        }
        let mut updated = existing.clone();
        updated.title = memory.title.clone();
        updated.body = memory.body.clone();
        updated.content_hash = memory.content_hash.clone();
        updated.summary = memory.summary.clone();
        updated.tags = memory.tags.clone();
        updated.updated_at = format_ts(now);
        tx.update_memory(&updated, title_norm.as_deref(), &existing, "import", actor)?;
        log_event(
            tx,
            "update",
            &updated,
            &format_ts(now),
            actor,
            json!({"via": "import"}),
        )?;
        return Ok((
            LineStatus::Updated,
            Some(existing.id),
            Some(format!("updated #{} (same identity)", existing.id)),
        ));
    }
    // Exact duplicate: the same text in the same partition, in the same state (a re-import of a
    // superseded record finds its earlier import, not the successor).
    if memory.external_id.is_none()
        && let Some(twin) = reader
            .find_by_hash_any_status(&memory.content_hash)?
            .into_iter()
            .find(|m| m.partition() == partition && m.status == memory.status)
    {
        if let Some(old_id) = line.id {
            id_map.insert(old_id, twin.id);
        }
        return Ok((
            LineStatus::Noop,
            Some(twin.id),
            Some(format!("same text as #{}", twin.id)),
        ));
    }
    let wanted_id = line.id.filter(|id| *id > 0);
    let keep_id = match wanted_id {
        Some(id) => reader.get(id)?.is_none(),
        None => false,
    };
    memory.id = if keep_id { wanted_id.unwrap_or(0) } else { 0 };
    memory.supersedes = line.supersedes;
    memory.superseded_by = line.superseded_by;
    let new_id = tx.insert_memory(&memory, title_norm.as_deref())?;
    if let Some(old_id) = wanted_id {
        id_map.insert(old_id, new_id);
    }
    if line.supersedes.is_some() || line.superseded_by.is_some() || line.merged_into.is_some() {
        pending_links.push(PendingLinks {
            id: new_id,
            supersedes: line.supersedes,
            superseded_by: line.superseded_by,
            merged_into: line.merged_into,
        });
    }
    for history in &line.history {
        tx.insert_history_row(
            new_id,
            &HistoryRow {
                version: history.version,
                at: history.at.clone(),
                op: history.op.clone(),
                actor: history.actor.clone(),
                snapshot: history.snapshot.clone(),
            },
        )?;
    }
    let message = (!redacted.is_empty()).then(|| format!("redacted: {}", redacted.join(", ")));
    Ok((LineStatus::Added, Some(new_id), message))
}
