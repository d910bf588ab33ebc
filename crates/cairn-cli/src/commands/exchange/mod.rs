//! Moving memories in and out: `export` (JSONL, or a Markdown wiki), `import` (JSONL, a wiki,
//! another tool's memory, a share envelope) and `share`.

pub(crate) mod export;
pub(crate) mod import;
mod share;
mod wiki;

use crate::settings::Settings;
use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ExchangeCommand {
    /// Write every record (with history) and the event log as JSONL, or a Markdown wiki
    /// (`export wiki DIR`).
    Export(export::ExportArgs),
    /// Read JSONL back (per-line report; a bad line never stops the others), or another
    /// source: `import wiki|claude-md|agents-md|mcp-memory|markdown|mem0|envelope …`.
    Import(import::ImportArgs),
    /// Hand records to another agent as a JSON envelope that honors trust zones.
    Share(share::ShareArgs),
}

pub fn run(settings: &Settings, command: &ExchangeCommand) -> Result<ExitCode> {
    match command {
        ExchangeCommand::Export(export) => export::run(settings, export),
        ExchangeCommand::Import(import) => import::run(settings, import),
        ExchangeCommand::Share(share) => share::run(settings, share),
    }
}
