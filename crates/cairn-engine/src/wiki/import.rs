//! `import wiki DIR`: edited pages become updates (history kept), new pages new records,
//! deleted pages are reported; pages untouched since the export are skipped without reading.
//!
//! Whether a page was edited is decided by the manifest (the bytes the export wrote). Without
//! one — a wiki copied without its manifest, or written by hand — every page is compared with
//! its record field by field, and the page wins where they differ.
//!
//! New pages go through the JSONL import (`Engine::import_jsonl`), so identity, exact
//! duplicates, id keeping and supersession links follow exactly the same rules as a backup
//! restore. A page with an `id` the brain does not have is a restore: its metadata is kept when
//! its body still has the `content_hash` it was exported with, otherwise it is stamped
//! `imported`.

use super::MAX_PAGE_BYTES;
use super::export::fs_error;
use super::fs::SafeDir;
use super::manifest::{self, Manifest};
use super::page::{self, ParsedPage};
use crate::exchange::{ImportOptions, LineStatus};
use crate::remember::{RememberRequest, Review, log_event, prepare};
use crate::{Engine, EngineError, Result};
use cairn_core::memory::Memory;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, TrustZone};
use cairn_core::text;
use cairn_core::time::format_ts;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value as Json, json};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Edits applied per write transaction.
const EDIT_BATCH: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct WikiImportOptions {
    /// Apply a page edit even when its record also changed in the brain since the export (the
    /// page wins).
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PageStatus {
    Added,
    Updated,
    Unchanged,
    /// The page is gone; its record is kept (deleting is explicit: `cairn forget`).
    Deleted,
    /// Not applied: the page and the brain both changed, or two pages claim one record.
    Conflict,
    Error,
    Skipped,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PageOutcome {
    pub path: String,
    pub status: PageStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WikiImportSummary {
    pub pages: usize,
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub deleted: usize,
    pub conflicts: usize,
    pub errors: usize,
    pub skipped: usize,
}

/// Every page that was not unchanged, in path order, and the counts.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WikiImportReport {
    pub dir: String,
    pub summary: WikiImportSummary,
    pub pages: Vec<PageOutcome>,
}

impl WikiImportReport {
    fn push(&mut self, path: &str, status: PageStatus, id: Option<i64>, message: Option<String>) {
        let summary = &mut self.summary;
        match status {
            PageStatus::Added => summary.added += 1,
            PageStatus::Updated => summary.updated += 1,
            PageStatus::Unchanged => summary.unchanged += 1,
            PageStatus::Deleted => summary.deleted += 1,
            PageStatus::Conflict => summary.conflicts += 1,
            PageStatus::Error => summary.errors += 1,
            PageStatus::Skipped => summary.skipped += 1,
        }
        if status != PageStatus::Unchanged || message.is_some() {
            self.pages.push(PageOutcome {
                path: path.to_string(),
                status,
                id,
                message,
            });
        }
    }
}

/// A frontmatter key: `None` when absent, `Some(None)` when null.
fn field(parsed: &ParsedPage, key: &str) -> Option<Option<String>> {
    parsed
        .frontmatter
        .get(key)
        .map(|_| parsed.frontmatter.text(key))
}

/// The record with the page's editable fields applied (cleaned by the write path's first
/// steps); `None` when the page says nothing the record does not already say.
pub fn apply_edits(
    parsed: &ParsedPage,
    existing: &Memory,
    now: DateTime<Utc>,
) -> Result<Option<Memory>> {
    let fm = &parsed.frontmatter;
    let memory_type = match fm.text("type") {
        Some(t) => t.parse::<MemoryType>()?,
        None => existing.memory_type,
    };
    let mut request = RememberRequest::new(memory_type, parsed.body.clone());
    request.title = field(parsed, "title").unwrap_or(existing.title.clone());
    request.summary = field(parsed, "summary").unwrap_or(existing.summary.clone());
    request.tags = match fm.get("tags") {
        Some(_) => fm.list("tags"),
        None => existing.tags.clone(),
    };
    request.scope = Some(
        field(parsed, "scope")
            .flatten()
            .unwrap_or(existing.scope.clone()),
    );
    request.importance = Some(match fm.get("importance") {
        Some(_) => {
            let value = fm.int("importance").ok_or_else(|| {
                EngineError::Invalid("importance must be a number from 1 to 5".into())
            })?;
            u8::try_from(value).map_err(|_| {
                EngineError::Invalid(format!("importance {value} is out of range: use 1 to 5"))
            })?
        }
        None => existing.importance,
    });
    request.confidence = Some(match fm.text("confidence") {
        Some(c) => c.parse::<Confidence>()?,
        None => existing.confidence,
    });
    request.source = field(parsed, "source").unwrap_or(existing.source.clone());
    request.pinned = fm.bool("pinned").unwrap_or(existing.pinned);
    request.trust = Some(existing.trust);
    request.trust_zone = Some(match fm.text("trust_zone") {
        Some(z) => z.parse::<TrustZone>()?,
        None => existing.trust_zone,
    });
    request.sensitivity = Some(match fm.text("sensitivity") {
        Some(s) => s.parse::<Sensitivity>()?,
        None => existing.sensitivity,
    });
    request.review = match field(parsed, "review_at").unwrap_or(existing.review_at.clone()) {
        Some(at) => Review::At(at),
        None => Review::Never,
    };
    request.expires_at = field(parsed, "expires_at").unwrap_or(existing.expires_at.clone());
    request.at = Some(existing.created_at.clone());
    request.personal = existing.project.is_none();
    let prepared = prepare(&request, existing.project.clone(), now, None)?;
    let cleaned = prepared.memory;
    let mut updated = existing.clone();
    updated.memory_type = cleaned.memory_type;
    updated.title = cleaned.title;
    updated.body = cleaned.body;
    updated.content_hash = cleaned.content_hash;
    updated.summary = cleaned.summary;
    updated.tags = cleaned.tags;
    updated.scope = cleaned.scope;
    updated.importance = cleaned.importance;
    updated.confidence = cleaned.confidence;
    updated.source = cleaned.source;
    updated.pinned = cleaned.pinned;
    updated.trust_zone = cleaned.trust_zone;
    updated.sensitivity = cleaned.sensitivity;
    updated.review_at = cleaned.review_at;
    updated.expires_at = cleaned.expires_at;
    Ok((updated != *existing).then_some(updated))
}

/// Whether a path is one of the files the export generates (not a record page).
fn is_generated(path: &str) -> bool {
    matches!(path, "index.md" | "SCHEMA.md" | "log.md")
        || path.starts_with("log/")
        || path == "_index.md"
        || path.ends_with("/_index.md")
}

fn put(object: &mut Map<String, Json>, key: &str, value: Option<Json>) {
    if let Some(value) = value {
        object.insert(key.to_string(), value);
    }
}

/// A JSONL import line for a page whose record the brain does not have.
fn new_record_line(parsed: &ParsedPage, path: &str) -> Json {
    let fm = &parsed.frontmatter;
    let mut line = Map::new();
    let id = fm.int("id");
    let text = |key: &str| fm.text(key).map(Json::String);
    let int = |key: &str| fm.int(key).map(Json::from);
    // An untouched exported page (its body still hashes to its content_hash) is restored with
    // its metadata; anything else arrived from outside.
    let verified = id.is_some()
        && fm.text("content_hash").as_deref() == Some(text::content_hash(&parsed.body).as_str());
    line.insert("kind".into(), json!("memory"));
    let memory_type = fm.text("type").or_else(|| {
        let folder = path.strip_prefix("archive/").unwrap_or(path);
        let folder = folder.split('/').next().filter(|_| folder.contains('/'))?;
        folder.parse::<MemoryType>().ok().map(|t| t.to_string())
    });
    put(
        &mut line,
        "type",
        Some(json!(memory_type.unwrap_or_else(|| "note".into()))),
    );
    let title = field(parsed, "title")
        .unwrap_or_else(|| parsed.heading.clone())
        .filter(|t| !t.trim().is_empty());
    put(&mut line, "title", title.map(Json::String));
    line.insert("body".into(), json!(parsed.body));
    for key in [
        "scope",
        "summary",
        "confidence",
        "trust_zone",
        "sensitivity",
        "source",
        "review_at",
        "expires_at",
    ] {
        put(&mut line, key, text(key));
    }
    put(&mut line, "importance", int("importance"));
    put(&mut line, "pinned", fm.bool("pinned").map(Json::from));
    if fm.get("tags").is_some() {
        line.insert("tags".into(), json!(fm.list("tags")));
    }
    if let Some(project) = field(parsed, "project") {
        line.insert("project".into(), json!(project));
    }
    if let Some(id) = id {
        line.insert("id".into(), json!(id));
        for key in [
            "status",
            "commit",
            "external_id",
            "created_at",
            "updated_at",
            "valid_from",
            "retired_at",
            "last_accessed_at",
        ] {
            put(&mut line, key, text(key));
        }
        for key in ["supersedes", "superseded_by", "use_count"] {
            put(&mut line, key, int(key));
        }
        if verified {
            put(&mut line, "trust", text("trust"));
        }
        let history: Vec<Json> = parsed
            .history
            .iter()
            .map(|entry| {
                let mut snapshot = json!({"restored_from": "wiki"});
                if let Some(body) = &entry.body {
                    snapshot["body"] = json!(body);
                }
                json!({"version": entry.version, "at": entry.at, "op": entry.op, "actor": entry.actor, "snapshot": snapshot})
            })
            .collect();
        if !history.is_empty() {
            line.insert("history".into(), Json::Array(history));
        }
    }
    if !line.contains_key("trust") {
        line.insert("trust".into(), json!("imported"));
    }
    Json::Object(line)
}

impl Engine {
    /// Reads a wiki directory back into the brain; see the module documentation.
    pub fn import_wiki(
        &mut self,
        dir: &Path,
        options: &WikiImportOptions,
    ) -> Result<WikiImportReport> {
        self.ensure_writable("import wiki")?;
        let safe = SafeDir::open(dir, false).map_err(fs_error)?;
        let manifest = Manifest::load(&safe);
        let now = self.now();
        let mut report = WikiImportReport {
            dir: dir.display().to_string(),
            ..WikiImportReport::default()
        };
        let (files, skipped) = safe.walk();
        for (path, why) in skipped {
            report.push(&path, PageStatus::Skipped, None, Some(why));
        }
        let known: HashMap<i64, String> = self
            .store
            .reader()?
            .skeletons(None)?
            .into_iter()
            .map(|s| (s.id, manifest::version(&s.updated_at, s.history_versions)))
            .collect();
        let present: HashSet<&str> = files.iter().map(String::as_str).collect();
        let mut claimed: HashMap<i64, String> = HashMap::new();
        let mut edits: Vec<(String, Memory, Memory)> = Vec::new();
        let mut new_pages: Vec<(String, Json)> = Vec::new();
        for path in files
            .iter()
            .filter(|p| p.ends_with(".md") && !is_generated(p))
        {
            report.summary.pages += 1;
            let entry = manifest.entries.get(path.as_str());
            let exported_id = entry.and_then(|e| e.id);
            if let (Some(entry), Some(id)) = (entry, exported_id)
                && known.contains_key(&id)
                && safe.stamp(path) == Some(entry.stamp)
            {
                // Untouched since the export: nothing to bring back.
                claimed.insert(id, path.clone());
                report.push(path, PageStatus::Unchanged, Some(id), None);
                continue;
            }
            let bytes = match safe.read(path, MAX_PAGE_BYTES) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => continue,
                Err(error) => {
                    report.push(path, PageStatus::Error, None, Some(error.to_string()));
                    continue;
                }
            };
            if let (Some(entry), Some(id)) = (entry, exported_id)
                && known.contains_key(&id)
                && manifest::sha256(&bytes) == entry.sha256
            {
                claimed.insert(id, path.clone());
                report.push(path, PageStatus::Unchanged, Some(id), None);
                continue;
            }
            let parsed = match page::parse(&bytes) {
                Ok(parsed) => parsed,
                Err(error) => {
                    report.push(
                        path,
                        PageStatus::Error,
                        None,
                        Some(format!("{error}; the page was not imported")),
                    );
                    continue;
                }
            };
            let id = parsed.frontmatter.int("id");
            if let Some(id) = id {
                if let Some(other) = claimed.get(&id) {
                    report.push(
                        path,
                        PageStatus::Conflict,
                        Some(id),
                        Some(format!(
                            "{other} already shows #{id}; remove the `id:` line from this copy to make it a new record"
                        )),
                    );
                    continue;
                }
                claimed.insert(id, path.clone());
            }
            match id.filter(|id| known.contains_key(id)) {
                Some(id) => {
                    let existing = self.get(id)?;
                    match apply_edits(&parsed, &existing, now) {
                        Err(error) => report.push(
                            path,
                            PageStatus::Error,
                            Some(id),
                            Some(format!("{error}; the page was not imported")),
                        ),
                        Ok(None) => report.push(path, PageStatus::Unchanged, Some(id), None),
                        Ok(Some(updated)) => {
                            let brain_moved = entry.is_some_and(|e| {
                                e.id == Some(id)
                                    && e.version.as_deref() != known.get(&id).map(String::as_str)
                            });
                            if brain_moved && !options.force {
                                report.push(
                                    path,
                                    PageStatus::Conflict,
                                    Some(id),
                                    Some(format!(
                                        "both this page and #{id} changed since the export; not applied. Keep the page's version with `cairn import wiki --force`, or the brain's with `cairn export wiki --force`"
                                    )),
                                );
                            } else {
                                edits.push((path.clone(), existing, updated));
                            }
                        }
                    }
                }
                None => new_pages.push((path.clone(), new_record_line(&parsed, path))),
            }
        }
        for (path, entry) in &manifest.entries {
            if let Some(id) = entry.id
                && !present.contains(path.as_str())
                && !claimed.contains_key(&id)
                && known.contains_key(&id)
            {
                report.push(
                    path,
                    PageStatus::Deleted,
                    Some(id),
                    Some(format!(
                        "the page is gone; #{id} is kept (deleting is explicit: `cairn forget {id}`)"
                    )),
                );
            }
        }
        self.apply_wiki_edits(&edits, now, &mut report)?;
        if !new_pages.is_empty() {
            let mut lines = String::new();
            for (_, line) in &new_pages {
                lines.push_str(&line.to_string());
                lines.push('\n');
            }
            let imported = self.import_jsonl(
                &mut std::io::Cursor::new(lines.into_bytes()),
                &ImportOptions::default(),
            )?;
            for outcome in imported.lines {
                let Some((path, _)) = new_pages.get(outcome.line - 1) else {
                    continue;
                };
                let status = match outcome.status {
                    LineStatus::Added => PageStatus::Added,
                    LineStatus::Updated => PageStatus::Updated,
                    LineStatus::Noop => PageStatus::Unchanged,
                    LineStatus::Refused | LineStatus::Error => PageStatus::Error,
                };
                report.push(path, status, outcome.id, outcome.message);
            }
        }
        report.pages.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(report)
    }

    fn apply_wiki_edits(
        &mut self,
        edits: &[(String, Memory, Memory)],
        now: DateTime<Utc>,
        report: &mut WikiImportReport,
    ) -> Result<()> {
        let now_text = format_ts(now);
        for chunk in edits.chunks(EDIT_BATCH) {
            self.store.write(|tx| {
                for (path, existing, updated) in chunk {
                    let mut updated = updated.clone();
                    updated.updated_at = now_text.clone();
                    let norm = updated.title.as_deref().map(text::normalize_title);
                    tx.update_memory(
                        &updated,
                        norm.as_deref(),
                        existing,
                        "wiki-edit",
                        "wiki",
                    )?;
                    log_event(
                        tx,
                        "update",
                        &updated,
                        &now_text,
                        "wiki",
                        json!({"via": "wiki", "page": path, "previous_hash": existing.content_hash}),
                    )?;
                }
                Ok::<_, EngineError>(())
            })?;
            for (path, existing, _) in chunk {
                report.push(
                    path,
                    PageStatus::Updated,
                    Some(existing.id),
                    Some(format!(
                        "#{} updated from the page; the previous version is in its history",
                        existing.id
                    )),
                );
            }
        }
        Ok(())
    }
}
