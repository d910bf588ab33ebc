//! Importers for other tools' memory: each reads its format into [`Candidate`]s (what it could
//! map) and notes (what it could not), then every candidate goes through the JSONL import with
//! trust `imported` and a stable `external_id` derived from where it came from, so importing the
//! same source twice adds nothing and an edited source updates its records in place.
//!
//! Formats: `claude_md` (Claude Code's `CLAUDE.md` and its per-project memory files, and
//! `AGENTS.md`), `mcp_memory` (the MCP reference memory server's JSONL knowledge graph),
//! `markdown` (basic-memory and Obsidian folders), `mem0` (mem0 JSON exports).

pub mod claude_md;
pub mod markdown;
pub mod mcp_memory;
pub mod mem0;

use crate::exchange::{ImportOptions, ImportSummary, LineStatus};
use crate::{Engine, EngineError, Result};
use cairn_core::record::MemoryType;
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest source file read, in bytes.
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

/// The kinds of source an importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    ClaudeMd,
    AgentsMd,
    McpMemory,
    Markdown,
    Mem0,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::ClaudeMd => "claude-md",
            SourceKind::AgentsMd => "agents-md",
            SourceKind::McpMemory => "mcp-memory",
            SourceKind::Markdown => "markdown",
            SourceKind::Mem0 => "mem0",
        }
    }
}

/// One record an importer could map.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Where it came from, for the report (`CLAUDE.md#Testing`, `line 4`).
    pub origin: String,
    pub external_id: String,
    pub memory_type: MemoryType,
    pub title: Option<String>,
    pub body: String,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub source: Option<String>,
    pub created_at: Option<String>,
}

/// A relation an importer read, written as a knowledge-graph edge once its records exist.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedRelation {
    /// Where it came from, for the report.
    pub origin: String,
    /// The source end's name (an entity's name when it is not one of the source's records).
    pub from_name: String,
    /// The external id of the source end's record, when the source maps it to one.
    pub from_record: Option<String>,
    pub relation: String,
    pub to_name: String,
    pub to_record: Option<String>,
}

/// What an importer read: candidates, relations between them, and notes on what it could not
/// map.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub candidates: Vec<Candidate>,
    pub relations: Vec<ParsedRelation>,
    pub unmapped: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ItemOutcome {
    pub origin: String,
    pub status: LineStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What an import did, per item, plus what could not be mapped.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SourceImportReport {
    pub kind: SourceKind,
    pub summary: ImportSummary,
    pub items: Vec<ItemOutcome>,
    /// The graph edges written for the source's relations, one outcome each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<ItemOutcome>,
    pub unmapped: Vec<String>,
}

/// Reads a source file: a regular file (not a symlink), at most `MAX_SOURCE_BYTES`, UTF-8.
pub fn read_source(path: &Path) -> std::result::Result<String, String> {
    let metadata = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if metadata.file_type().is_symlink() {
        return Err("a symlink; not followed".into());
    }
    if !metadata.is_file() {
        return Err("not a regular file".into());
    }
    if metadata.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "{} bytes, over the limit of {MAX_SOURCE_BYTES} bytes",
            metadata.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not valid UTF-8 (first bad byte at offset {}); re-encode it as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Every regular file under `dir` whose name passes `keep`, sorted, as (relative path, full
/// path); symlinks and hidden entries are not followed, and noted.
pub fn walk(
    dir: &Path,
    keep: &dyn Fn(&str) -> bool,
    notes: &mut Vec<String>,
) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            notes.push(format!("{prefix}: cannot read this folder"));
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let relative = format!("{prefix}{name}");
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_symlink() {
                notes.push(format!("{relative}: a symlink; not followed"));
            } else if file_type.is_dir() {
                stack.push((entry.path(), format!("{relative}/")));
            } else if file_type.is_file() && keep(&relative) {
                found.push((relative, entry.path()));
            }
        }
    }
    found.sort();
    notes.sort();
    found
}

impl Engine {
    /// Stores what an importer mapped (trust `imported`, idempotent by external id) and reports
    /// per item.
    pub fn import_source(
        &mut self,
        kind: SourceKind,
        parsed: Parsed,
    ) -> Result<SourceImportReport> {
        self.ensure_writable("import")?;
        let mut lines = String::new();
        for candidate in &parsed.candidates {
            let line = json!({
                "type": candidate.memory_type,
                "title": candidate.title,
                "body": candidate.body,
                "summary": candidate.summary,
                "tags": candidate.tags,
                "source": candidate.source,
                "external_id": candidate.external_id,
                "created_at": candidate.created_at,
                "trust": "imported",
            });
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        let imported = if parsed.candidates.is_empty() {
            None
        } else {
            Some(self.import_jsonl(
                &mut std::io::Cursor::new(lines.into_bytes()),
                &ImportOptions::default(),
            )?)
        };
        let mut items = Vec::new();
        let summary = imported
            .as_ref()
            .map(|r| r.summary.clone())
            .unwrap_or_default();
        let mut records: HashMap<&str, i64> = HashMap::new();
        for outcome in imported.map(|r| r.lines).unwrap_or_default() {
            let candidate = parsed.candidates.get(outcome.line - 1);
            if let (Some(candidate), Some(id)) = (candidate, outcome.id) {
                records.insert(candidate.external_id.as_str(), id);
            }
            let origin = candidate.map(|c| c.origin.clone()).unwrap_or_default();
            items.push(ItemOutcome {
                origin,
                status: outcome.status,
                id: outcome.id,
                message: outcome.message,
            });
        }
        let relations = self.import_relations(&parsed.relations, &records)?;
        Ok(SourceImportReport {
            kind,
            summary,
            items,
            relations,
            unmapped: parsed.unmapped,
        })
    }

    /// Writes a source's relations as graph edges, through the graph API: an end with a record
    /// is that record, any other end an entity (created when missing); a relation type cairn
    /// does not know is declared. One outcome per relation; asserting an edge that already
    /// holds changes nothing, so importing twice adds no edge.
    fn import_relations(
        &mut self,
        relations: &[ParsedRelation],
        records: &HashMap<&str, i64>,
    ) -> Result<Vec<ItemOutcome>> {
        let mut outcomes = Vec::with_capacity(relations.len());
        for relation in relations {
            let outcome = match self.import_relation(relation, records) {
                Ok((status, message)) => ItemOutcome {
                    origin: relation.origin.clone(),
                    status,
                    id: None,
                    message: Some(message),
                },
                Err(EngineError::Store(error)) => return Err(EngineError::Store(error)),
                Err(other) => ItemOutcome {
                    origin: relation.origin.clone(),
                    status: LineStatus::Error,
                    id: None,
                    message: Some(format!("{other}; this relation was skipped")),
                },
            };
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    fn import_relation(
        &mut self,
        relation: &ParsedRelation,
        records: &HashMap<&str, i64>,
    ) -> Result<(LineStatus, String)> {
        let name = cairn_core::graph::normalize_relation(&relation.relation)
            .map_err(|e| EngineError::Invalid(e.to_string()))?;
        if !self.relation_types()?.iter().any(|t| t.name == name) {
            self.declare_relation_type(
                &name,
                None,
                false,
                Some("declared by an mcp-memory import"),
            )?;
        }
        let mut end = |record: &Option<String>, entity: &str| -> Result<String> {
            match record.as_deref().and_then(|external| records.get(external)) {
                Some(id) => Ok(format!("#{id}")),
                None => {
                    self.add_entity(entity, "thing", &[])?;
                    Ok(entity.to_string())
                }
            }
        };
        let src = end(&relation.from_record, &relation.from_name)?;
        let dst = end(&relation.to_record, &relation.to_name)?;
        let outcome = self.relate(&crate::graph::RelateRequest {
            src,
            relation: name,
            dst,
            from: None,
            to: None,
            allow_dangling: false,
            confidence: None,
        })?;
        let status = match outcome.status {
            crate::graph::RelateStatus::Asserted => LineStatus::Added,
            crate::graph::RelateStatus::AlreadyAsserted => LineStatus::Noop,
            crate::graph::RelateStatus::Quarantined => LineStatus::Refused,
        };
        Ok((status, outcome.message))
    }
}

/// An importer's error for a whole source that cannot be read.
pub fn unreadable(path: &Path, why: String) -> EngineError {
    EngineError::Invalid(format!("cannot import {}: {why}", path.display()))
}

/// `[a-z0-9-]` from a heading or name, for external ids.
pub fn id_part(text: &str) -> String {
    let slug = crate::wiki::paths::slug_text(text, 60);
    if slug.is_empty() {
        "untitled".into()
    } else {
        slug
    }
}
