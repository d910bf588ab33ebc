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
    let mut input: Box<dyn BufRead> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot read {file}"))?,
        ))
    };
    let report = engine.import_jsonl(&mut input, &ImportOptions::default())?;
    let indexing = index_after_import(&mut engine);
    if settings.json {
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
    Ok(lines_failed(&report.summary))
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

/// After an import: embed what it added (a progress bar on a terminal). A missing model is
/// not an error here — the records are stored and recall works lexically — so this returns
/// a note to print instead.
pub fn index_after_import(engine: &mut Engine) -> Option<String> {
    if !engine.embedder_is_configured() {
        return None;
    }
    let mut progress = progress_bar("embedding");
    match engine.index_pending(None, &mut progress) {
        Ok(report) if report.embedded + report.reused + report.failed == 0 => None,
        Ok(report) => Some(format!(
            "embedded {} records ({} reused), {} failed, {} pending",
            report.embedded, report.reused, report.failed, report.pending
        )),
        Err(error) => Some(format!(
            "not embedded ({error}); recall works lexically, `cairn reindex` embeds them later"
        )),
    }
}
