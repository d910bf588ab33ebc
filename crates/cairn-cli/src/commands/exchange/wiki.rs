//! `cairn export wiki DIR` and `cairn import wiki DIR`.

use crate::output::print_json;
use crate::settings::Settings;
use anyhow::Result;
use cairn_engine::wiki::{PageStatus, WikiExportOptions, WikiImportOptions};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct WikiExportArgs {
    /// The wiki directory (created if missing; every write stays inside it).
    pub dir: PathBuf,
    /// Every project in the brain, not only this one and personal records.
    #[arg(long)]
    pub all_projects: bool,
    /// Overwrite pages edited since the last export (the brain wins).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct WikiImportArgs {
    /// The wiki directory written by `cairn export wiki` (or by hand).
    pub dir: PathBuf,
    /// Apply edits even when the record also changed in the brain since the export (the page
    /// wins).
    #[arg(long)]
    pub force: bool,
}

pub fn export(settings: &Settings, wiki: &WikiExportArgs) -> Result<ExitCode> {
    let engine = settings.open("cli")?;
    let report = engine.export_wiki(
        &wiki.dir,
        &WikiExportOptions {
            all_projects: wiki.all_projects,
            force: wiki.force,
        },
    )?;
    if settings.json {
        print_json(&report);
    } else {
        outln!(
            "exported {} records to {}: {} files written, {} unchanged, {} removed",
            report.records,
            report.dir,
            report.written,
            report.unchanged,
            report.removed
        );
        for issue in &report.conflicts {
            outln!("  conflict {}: {}", issue.path, issue.problem);
        }
        for issue in &report.refused {
            outln!("  refused {}: {}", issue.path, issue.problem);
        }
    }
    Ok(
        if report.conflicts.is_empty() && report.refused.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

pub fn import(settings: &Settings, wiki: &WikiImportArgs) -> Result<ExitCode> {
    let mut engine = settings.open("wiki")?;
    let report = engine.import_wiki(&wiki.dir, &WikiImportOptions { force: wiki.force })?;
    if settings.json {
        print_json(&report);
    } else {
        let s = &report.summary;
        outln!(
            "imported {} pages from {}: {} added, {} updated, {} unchanged, {} deleted (kept), {} conflicts, {} errors, {} skipped",
            s.pages,
            report.dir,
            s.added,
            s.updated,
            s.unchanged,
            s.deleted,
            s.conflicts,
            s.errors,
            s.skipped
        );
        for page in &report.pages {
            let status = match page.status {
                PageStatus::Added => "added",
                PageStatus::Updated => "updated",
                PageStatus::Unchanged => "unchanged",
                PageStatus::Deleted => "deleted",
                PageStatus::Conflict => "conflict",
                PageStatus::Error => "error",
                PageStatus::Skipped => "skipped",
            };
            let id = page.id.map(|i| format!(" #{i}")).unwrap_or_default();
            let message = page
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            outln!("  {status:<9} {}{id}{message}", page.path);
        }
    }
    // Exit 1 when a page was not taken (an error, or a conflict with a newer change in the
    // brain): the other pages are stored and the report names the ones that were not.
    let s = &report.summary;
    Ok(if s.errors + s.conflicts > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
