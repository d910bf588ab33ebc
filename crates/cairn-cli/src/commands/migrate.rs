//! `cairn migrate --from SRC --to DST`: copies a whole brain between a SQLite file and a
//! PostgreSQL database (docs/postgres.md). The work is `cairn_store::migrate`; this is the
//! command line: the progress bar (stderr, on a terminal only) and the summary.

use crate::settings::Settings;
use anyhow::Result;
use cairn_store::migrate::{self, Endpoint, Progress};
use clap::Args;
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The brain to copy: a brain file's path or a postgres:// URL.
    #[arg(long, value_name = "PATH|URL")]
    pub from: String,
    /// Where to copy it: a new (or empty) brain file, or an empty PostgreSQL database. Running
    /// the same command again after an interruption continues where it stopped.
    #[arg(long, value_name = "PATH|URL")]
    pub to: String,
    /// Rows per committed transaction.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
}

pub fn run(settings: &Settings, args: &MigrateArgs) -> Result<ExitCode> {
    let from = Endpoint::parse(&args.from)?;
    let to = Endpoint::parse(&args.to)?;
    let mut bar = crate::output::progress_bar("migrating");
    let (mut done, mut total) = (0usize, 0usize);
    let summary = migrate::migrate(&from, &to, args.batch as usize, &mut |event| match event {
        Progress::Start { total: t, done: d } => {
            total = t as usize;
            done = d as usize;
            bar(done, total);
        }
        Progress::Rows { rows, .. } => {
            done += rows as usize;
            bar(done, total);
        }
        Progress::Indexing => {
            if std::io::stderr().is_terminal() {
                eprintln!(
                    "building the full-text index of {} from its records",
                    to.shown()
                );
            }
        }
    })?;
    if settings.json {
        crate::output::print_json(&serde_json::json!({"status": "ok", "migration": summary}));
        return Ok(ExitCode::SUCCESS);
    }
    let rows: u64 = summary.tables.iter().map(|t| t.rows).sum();
    let copied: u64 = summary.tables.iter().map(|t| t.copied).sum();
    if summary.already_complete {
        outln!(
            "{} already holds the whole brain of {} ({rows} rows in {} tables); nothing to do",
            summary.to,
            summary.from,
            summary.tables.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for table in &summary.tables {
        outln!("{:<20} {:>9} rows", table.table, table.rows);
    }
    let resumed = if summary.resumed {
        format!(" (resumed: {copied} copied now)")
    } else {
        String::new()
    };
    outln!(
        "migrated {rows} rows in {} tables from {} to {}{resumed}",
        summary.tables.len(),
        summary.from,
        summary.to
    );
    Ok(ExitCode::SUCCESS)
}
