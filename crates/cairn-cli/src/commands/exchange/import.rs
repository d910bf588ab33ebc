//! The shape of `import`: JSONL by default (`import [--format jsonl] FILE|-`), or a subcommand
//! naming the source: a cairn wiki, another tool's memory, or a share envelope.

use super::{share, wiki};
use crate::output::{print_json, progress_bar};
use crate::settings::Settings;
use crate::values::ExchangeFormat;
use anyhow::{Context as _, Result};
use cairn_engine::exchange::{ImportOptions, ImportSummary, LineStatus};
use cairn_engine::importers::{self, Parsed, SourceImportReport, SourceKind};
use cairn_engine::{Engine, EngineError};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;

/// `import [--format jsonl] FILE|-`, or `import SOURCE …`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: Option<ImportSource>,
    /// The file's format.
    #[arg(long, default_value = "jsonl", value_parser = crate::values::exchange_format())]
    pub format: ExchangeFormat,
    /// Input file, or `-` for stdin (a file named like a source kind: `./wiki`).
    #[arg(required = true)]
    pub file: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ImportSource {
    /// A wiki written by `cairn export wiki`: edits become updates, new pages new records,
    /// deleted pages are reported.
    Wiki(wiki::WikiImportArgs),
    /// Claude Code's CLAUDE.md, or a folder of them and of its per-project memory files.
    ClaudeMd { path: PathBuf },
    /// An AGENTS.md file (or a folder holding them).
    AgentsMd { path: PathBuf },
    /// The MCP reference memory server's knowledge graph (memory.jsonl).
    McpMemory { file: PathBuf },
    /// A folder of Markdown notes: basic-memory or an Obsidian vault.
    Markdown { dir: PathBuf },
    /// A mem0 export (JSON).
    Mem0 { file: PathBuf },
    /// A share envelope made by `cairn share` (refused if any hash does not match).
    Envelope { file: PathBuf },
}

pub fn run(settings: &Settings, import: &ImportArgs) -> Result<ExitCode> {
    let file = match import {
        ImportArgs {
            source: Some(source),
            ..
        } => return run_source(settings, source),
        ImportArgs { file: None, .. } => {
            return Err(EngineError::Invalid(
                "no input: give FILE (or - for stdin), or a source such as `import wiki DIR`"
                    .into(),
            )
            .into());
        }
        ImportArgs {
            file: Some(file), ..
        } => file,
    };
    let ExchangeFormat::Jsonl = import.format;
    let mut engine = settings.open("import")?;
    let mut input = open_input(file)?;
    let report = engine.import_jsonl(&mut input, &ImportOptions::default())?;
    let embedding = embed_after_import(&mut engine);
    Ok(print_import(settings, &report, embedding.as_ref()))
}

/// The JSONL to import: `file`, or stdin for `-`.
pub(crate) fn open_input(file: &str) -> Result<Box<dyn BufRead>> {
    Ok(if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot read {file}"))?,
        ))
    })
}

/// Prints an import's report (and what embedding after it did); exit 1 when a line failed.
pub(crate) fn print_import(
    settings: &Settings,
    report: &cairn_engine::exchange::ImportReport,
    embedding: Option<&EmbeddingOutcome>,
) -> ExitCode {
    let indexing = embedding.and_then(EmbeddingOutcome::note);
    if settings.json {
        let mut value = serde_json::to_value(report).expect("the import report serializes");
        value["embedding"] = serde_json::to_value(embedding).expect("the outcome serializes");
        print_json(&value);
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
    lines_failed(&report.summary)
}

/// Exit 1 when any line was not stored (an error or a refusal): the others are stored and the
/// report says which failed; exit 0 when every line was taken.
fn lines_failed(summary: &ImportSummary) -> ExitCode {
    if summary.error + summary.refused > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn run_source(settings: &Settings, source: &ImportSource) -> Result<ExitCode> {
    let (kind, parsed): (SourceKind, Parsed) = match source {
        ImportSource::Wiki(target) => return wiki::import(settings, target),
        ImportSource::Envelope { file } => return share::import_envelope(settings, file),
        ImportSource::ClaudeMd { path } => (
            SourceKind::ClaudeMd,
            importers::claude_md::read(path, SourceKind::ClaudeMd)?,
        ),
        ImportSource::AgentsMd { path } => (
            SourceKind::AgentsMd,
            importers::claude_md::read(path, SourceKind::AgentsMd)?,
        ),
        ImportSource::McpMemory { file } => {
            (SourceKind::McpMemory, importers::mcp_memory::read(file)?)
        }
        ImportSource::Markdown { dir } => (SourceKind::Markdown, importers::markdown::read(dir)?),
        ImportSource::Mem0 { file } => (SourceKind::Mem0, importers::mem0::read(file)?),
    };
    let mut engine = settings.open("import")?;
    let report = engine.import_source(kind, parsed)?;
    print_report(settings, &report);
    Ok(lines_failed(&report.summary))
}

fn print_report(settings: &Settings, report: &SourceImportReport) {
    if settings.json {
        print_json(report);
        return;
    }
    let s = &report.summary;
    outln!(
        "imported from {}: {} added, {} updated, {} unchanged, {} errors; {} note(s) on what was not mapped",
        report.kind.as_str(),
        s.added,
        s.updated,
        s.noop,
        s.error + s.refused,
        report.unmapped.len()
    );
    for item in &report.items {
        let id = item.id.map(|i| format!("#{i} ")).unwrap_or_default();
        let status = match item.status {
            LineStatus::Added => "added",
            LineStatus::Updated => "updated",
            LineStatus::Noop => "unchanged",
            LineStatus::Refused => "refused",
            LineStatus::Error => "error",
        };
        outln!(
            "  {status:<9} {id}{}{}",
            item.origin,
            item.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        );
    }
    for note in &report.unmapped {
        outln!("  not mapped: {note}");
    }
}

/// What embedding after an import did (`import --json`'s `embedding`).
#[derive(Debug, Serialize)]
pub struct EmbeddingOutcome {
    /// Records the model embedded.
    pub embedded: usize,
    /// Records whose vector was reused from an identical text already embedded.
    pub reused: usize,
    /// Records the model failed on (they stay pending).
    pub failed: usize,
    /// Records of the brain still without a vector afterwards (`None`: the count could not
    /// be read).
    pub pending: Option<i64>,
    /// Why nothing was embedded (the model is missing, ...), with the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl EmbeddingOutcome {
    /// The line the text output prints (none when there was nothing to embed).
    fn note(&self) -> Option<String> {
        match &self.error {
            Some(error) => Some(format!(
                "not embedded ({error}); recall works lexically, `cairn reindex` embeds them later"
            )),
            None if self.embedded + self.reused + self.failed == 0 => None,
            None => Some(format!(
                "embedded {} records ({} reused), {} failed, {} pending",
                self.embedded,
                self.reused,
                self.failed,
                self.pending.map_or("?".to_string(), |p| p.to_string())
            )),
        }
    }
}

/// After an import: embed what it added (a progress bar on a terminal). `None` when the
/// engine has no embedder slot at all (`CAIRN_EMBEDDER=none` is an outcome with an error). A missing model is not an error here — the records are stored and
/// recall works lexically — so the outcome carries the message instead.
pub fn embed_after_import(engine: &mut Engine) -> Option<EmbeddingOutcome> {
    if !engine.embedder_is_configured() {
        return None;
    }
    let mut progress = progress_bar("embedding");
    Some(match engine.index_pending(None, &mut progress) {
        Ok(report) => EmbeddingOutcome {
            embedded: report.embedded,
            reused: report.reused,
            failed: report.failed,
            pending: Some(report.pending),
            error: None,
        },
        Err(error) => EmbeddingOutcome {
            embedded: 0,
            reused: 0,
            failed: 0,
            pending: engine
                .semantic_status()
                .ok()
                .map(|status| status.counts.pending()),
            error: Some(error.to_string()),
        },
    })
}
