//! The shape of `import`: JSONL by default (`import [--format jsonl] FILE|-`), or a subcommand
//! naming the source: a cairn wiki, another tool's memory, or a share envelope.

use crate::cli::{Cli, open};
use crate::output::print_json;
use crate::wiki_cmd::WikiImportArgs;
use anyhow::Result;
use cairn_engine::exchange::LineStatus;
use cairn_engine::importers::{self, Parsed, SourceImportReport, SourceKind};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// `import [--format jsonl] FILE|-`, or `import SOURCE …`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub source: Option<ImportSource>,
    #[arg(long, default_value = "jsonl")]
    pub format: String,
    /// Input file, or `-` for stdin (a file named like a source kind: `./wiki`).
    #[arg(required = true)]
    pub file: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ImportSource {
    /// A wiki written by `cairn export wiki`: edits become updates, new pages new records,
    /// deleted pages are reported.
    Wiki(WikiImportArgs),
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

pub fn run(args: &Cli, source: &ImportSource) -> Result<ExitCode> {
    let (kind, parsed): (SourceKind, Parsed) = match source {
        ImportSource::Wiki(wiki) => return crate::wiki_cmd::run_import(args, wiki),
        ImportSource::Envelope { file } => return crate::share_cmd::run_import(args, file),
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
    let mut engine = open(args, "import")?;
    let report = engine.import_source(kind, parsed)?;
    print_report(args, &report);
    Ok(ExitCode::SUCCESS)
}

fn print_report(args: &Cli, report: &SourceImportReport) {
    if args.json {
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
