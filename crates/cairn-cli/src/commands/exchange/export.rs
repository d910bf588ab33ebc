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
    let lines = write_export(file, |out| Ok(engine.export_jsonl(out)?))?;
    print_exported(settings, file, lines);
    Ok(ExitCode::SUCCESS)
}

/// Writes an export to `file` (`-`: stdout) through `write`, which answers the lines written: a
/// file goes to a temporary name first and is renamed when complete, so an interrupted export
/// never leaves a partial file under the name asked for.
pub(crate) fn write_export(
    file: &str,
    write: impl FnOnce(&mut dyn Write) -> Result<usize>,
) -> Result<usize> {
    if file == "-" {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let lines = write(&mut out)?;
        out.flush()?;
        return Ok(lines);
    }
    let temporary = PathBuf::from(format!("{file}.tmp-{}", std::process::id()));
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&temporary)
            .with_context(|| format!("cannot write {}", temporary.display()))?,
    );
    let lines = match write(&mut out).and_then(|lines| Ok(out.flush().map(|()| lines)?)) {
        Ok(lines) => lines,
        Err(error) => {
            drop(out);
            let _ = std::fs::remove_file(&temporary);
            return Err(error);
        }
    };
    drop(out);
    std::fs::rename(&temporary, file)
        .with_context(|| format!("cannot move the export into {file}"))?;
    Ok(lines)
}

/// What `export FILE` says when it is done (nothing after an export to stdout).
pub(crate) fn print_exported(settings: &Settings, file: &str, lines: usize) {
    if file != "-" {
        if settings.json {
            print_json(&serde_json::json!({"status": "exported", "lines": lines, "file": file}));
        } else {
            outln!("exported {lines} lines to {file}");
        }
    }
}
