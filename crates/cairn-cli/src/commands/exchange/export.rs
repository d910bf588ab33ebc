//! `cairn export [--format jsonl] [FILE|-]` and the shape of `export` (JSONL by default, or a
//! subcommand naming another target).

use super::wiki;
use crate::output::print_json;
use crate::settings::Settings;
use crate::values::ExchangeFormat;
use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// `export [--format jsonl] [FILE|-]`, or `export wiki DIR`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub target: Option<ExportTarget>,
    /// The file's format.
    #[arg(long, default_value = "jsonl", value_parser = crate::values::exchange_format())]
    pub format: ExchangeFormat,
    /// Output file, or `-` for stdout.
    #[arg(default_value = "-")]
    pub file: String,
}

#[derive(Debug, Subcommand)]
pub enum ExportTarget {
    /// Write the brain as a Markdown wiki (index.md, a folder per type, one page per record,
    /// log.md, SCHEMA.md); only pages that changed are rewritten.
    Wiki(wiki::WikiExportArgs),
}

pub fn run(settings: &Settings, export: &ExportArgs) -> Result<ExitCode> {
    let ExportArgs {
        target,
        format: ExchangeFormat::Jsonl,
        file,
    } = export;
    if let Some(ExportTarget::Wiki(target)) = target {
        return wiki::export(settings, target);
    }
    let engine = settings.open("cli")?;
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
        if settings.json {
            print_json(&serde_json::json!({"status": "exported", "lines": lines, "file": file}));
        } else {
            outln!("exported {lines} lines to {file}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
