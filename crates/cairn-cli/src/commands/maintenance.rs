//! Looking after the brain: doctor (check, repair, recover), stats and scopes.

use crate::output::print_json;
use crate::settings::Settings;
use anyhow::Result;
use cairn_engine::ErrorKind;
use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum MaintenanceCommand {
    /// Check the brain's integrity and index consistency.
    Doctor {
        /// Rebuild derived indexes, drop orphans, VACUUM a bloated file, bound the WAL
        /// (idempotent).
        #[arg(long)]
        repair: bool,
        /// Read what can be read from a damaged brain into a new file (the damaged one is never
        /// changed or deleted).
        #[arg(long, value_name = "NEW_PATH", conflicts_with = "repair")]
        recover_into: Option<PathBuf>,
    },
    /// Counts and sizes.
    Stats,
    /// Declare, list and check scopes.
    Scope {
        #[command(subcommand)]
        command: ScopeCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ScopeCommand {
    /// Declare a scope (so `scope map` can tell typos from intent).
    Declare {
        scope: String,
        #[arg(long)]
        description: Option<String>,
    },
    /// Scopes of this project with their record counts.
    List,
    /// Stored scopes nobody declared, and declared scopes that hold nothing.
    Map,
}

pub fn run(settings: &Settings, command: &MaintenanceCommand) -> Result<ExitCode> {
    match command {
        MaintenanceCommand::Doctor {
            recover_into: Some(target),
            ..
        } => run_recover(settings, target),
        MaintenanceCommand::Doctor { repair, .. } => run_doctor(settings, *repair),
        MaintenanceCommand::Stats => {
            let engine = settings.open("cli")?;
            let stats = engine.stats()?;
            print_stats(
                settings,
                &engine.store()?.path().display().to_string(),
                &stats,
            );
            Ok(ExitCode::SUCCESS)
        }
        MaintenanceCommand::Scope { command } => {
            let mut engine = settings.open("cli")?;
            match command {
                ScopeCommand::Declare { scope, description } => {
                    let scope = engine.declare_scope(scope, description.as_deref())?;
                    if settings.json {
                        print_json(
                            &serde_json::json!({"status": "declared", "scope": scope.as_str()}),
                        );
                    } else {
                        outln!("declared scope {scope}");
                    }
                }
                ScopeCommand::List => {
                    let scopes = engine.scopes()?;
                    if settings.json {
                        print_json(&scopes);
                    } else {
                        for scope in &scopes {
                            let declared = if scope.declared_at.is_some() {
                                "declared"
                            } else {
                                ""
                            };
                            outln!(
                                "{:<30} {:>6} records  {declared}",
                                scope.scope,
                                scope.records
                            );
                        }
                    }
                }
                ScopeCommand::Map => {
                    let map = engine.scope_map()?;
                    if settings.json {
                        print_json(&map);
                    } else {
                        outln!("project {}", map.project);
                        for scope in &map.scopes {
                            outln!(
                                "  {:<30} {:>6} records{}",
                                scope.scope,
                                scope.records,
                                if scope.declared_at.is_some() {
                                    "  (declared)"
                                } else {
                                    ""
                                }
                            );
                        }
                        if !map.undeclared.is_empty() {
                            outln!(
                                "stored but never declared (typos?): {}",
                                map.undeclared.join(", ")
                            );
                        }
                        if !map.empty.is_empty() {
                            outln!("declared but empty: {}", map.empty.join(", "));
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_recover(settings: &Settings, target: &Path) -> Result<ExitCode> {
    let damaged = &settings.db;
    let tables = cairn_engine::recover_brain(damaged, target)?;
    let rows: i64 = tables.iter().map(|t| t.rows).sum();
    let lost: i64 = tables.iter().map(|t| t.lost).sum();
    if settings.json {
        print_json(&serde_json::json!({
            "status": "recovered",
            "from": damaged.display().to_string(),
            "into": target.display().to_string(),
            "rows": rows,
            "lost": lost,
            "tables": tables,
        }));
    } else {
        for table in &tables {
            outln!(
                "  {:<18} {} rows{}{}",
                table.table,
                table.rows,
                if table.lost > 0 {
                    format!(", {} unreadable", table.lost)
                } else {
                    String::new()
                },
                table
                    .error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
        outln!(
            "recovered {rows} rows into {} ({lost} unreadable); {} was not changed — check the new brain with `cairn --db {} doctor`, then use it with `--db`",
            target.display(),
            damaged.display(),
            target.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_doctor(settings: &Settings, repair: bool) -> Result<ExitCode> {
    let mut engine = match settings.open("doctor") {
        Ok(engine) => engine,
        Err(error) => {
            return match error.downcast_ref::<cairn_engine::EngineError>() {
                Some(damaged) if damaged.kind() == ErrorKind::Damaged => {
                    Ok(report_damaged(settings, &damaged.to_string()))
                }
                _ => Err(error),
            };
        }
    };
    let report = engine.doctor(repair)?;
    Ok(print_doctor(settings, &report))
}

/// Prints the counts and sizes of `brain` (its file, or the server that answered).
pub(crate) fn print_stats(settings: &Settings, brain: &str, stats: &cairn_store::Stats) {
    if settings.json {
        print_json(stats);
        return;
    }
    outln!("brain      {brain}");
    outln!("records    {} ({} projects)", stats.records, stats.projects);
    for (status, count) in &stats.by_status {
        outln!("  {status:<10} {count}");
    }
    for (memory_type, count) in &stats.by_type {
        outln!("  {memory_type:<10} {count}");
    }
    outln!("history    {} earlier versions", stats.history_versions);
    outln!("events     {}", stats.events);
    outln!("conflicts  {} open", stats.open_conflicts);
    if !stats.capture_skipped.is_empty() {
        let skipped: Vec<String> = stats
            .capture_skipped
            .iter()
            .map(|(reason, count)| format!("{count} {reason}"))
            .collect();
        outln!(
            "skipped    {} captured turns: {}",
            stats.capture_skipped.iter().map(|(_, c)| c).sum::<i64>(),
            skipped.join(", ")
        );
    }
    outln!(
        "size       {:.1} MB file, {:.1} MB of text",
        stats.file_bytes as f64 / 1e6,
        stats.body_bytes as f64 / 1e6
    );
}

/// Prints a doctor report; exit 1 when a check failed.
pub(crate) fn print_doctor(settings: &Settings, report: &cairn_engine::DoctorReport) -> ExitCode {
    if settings.json {
        print_json(report);
    } else {
        outln!("brain {} (schema {})", report.path, report.schema_version);
        for check in &report.checks {
            outln!(
                "  {} {:<22} {}",
                match (check.ok, check.warning) {
                    (false, _) => "BAD ",
                    (true, true) => "warn",
                    (true, false) => "ok  ",
                },
                check.name,
                check.detail
            );
            if let Some(fix) = &check.fix {
                outln!("      fix: {fix}");
            }
        }
        for repaired in &report.repaired {
            outln!("  repaired: {repaired}");
        }
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// A brain SQLite cannot read as a database: what doctor says instead of a report (exit 1).
fn report_damaged(settings: &Settings, error: &str) -> ExitCode {
    let path = settings.db.display();
    let advice = format!(
        "the brain at {path} cannot be opened as a database. Nothing was changed or deleted. To recover what can be read into a new file: `cairn doctor --recover-into {path}.recovered.db` (or `sqlite3 {path} .recover | sqlite3 {path}.recovered.db`), then use `--db {path}.recovered.db`; keep the damaged file until you have checked the result"
    );
    if settings.json {
        print_json(
            &serde_json::json!({"status": "error", "ok": false, "error": error, "fix": advice}),
        );
    } else {
        eprintln!("cairn doctor: {error}");
        eprintln!("{advice}");
    }
    ExitCode::from(1)
}
