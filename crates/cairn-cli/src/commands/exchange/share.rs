//! `cairn share --zone Z [--query Q | --ids …] [--include-content]` and
//! `cairn import envelope FILE`.

use crate::output::print_json;
use crate::settings::Settings;
use crate::values;
use anyhow::{Context as _, Result};
use cairn_core::record::TrustZone;
use cairn_engine::share::{MAX_ENVELOPE_BYTES, ShareRequest};
use clap::Args;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ShareArgs {
    /// Who receives it.
    #[arg(long, value_parser = values::trust_zone())]
    pub zone: TrustZone,
    /// Share the records a recall for this finds (as the zone would see them).
    #[arg(long, conflicts_with = "ids")]
    pub query: Option<String>,
    /// Share these records (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub ids: Vec<i64>,
    /// Carry the text of each record, not only references (refused for outside_contact and
    /// paid_public).
    #[arg(long)]
    pub include_content: bool,
    /// Most records a query selects.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Write the envelope here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn run(settings: &Settings, share: &ShareArgs) -> Result<ExitCode> {
    let mut engine = settings.open("share")?;
    let envelope = engine.share(&ShareRequest {
        zone: share.zone,
        query: share.query.clone(),
        ids: share.ids.clone(),
        include_content: share.include_content,
        limit: share.limit,
    })?;
    let text = serde_json::to_string_pretty(&envelope)?;
    match &share.out {
        Some(path) => {
            let temporary = PathBuf::from(format!("{}.tmp-{}", path.display(), std::process::id()));
            std::fs::write(&temporary, format!("{text}\n"))
                .with_context(|| format!("cannot write {}", temporary.display()))?;
            std::fs::rename(&temporary, path)
                .with_context(|| format!("cannot move the envelope into {}", path.display()))?;
            if settings.json {
                print_json(&serde_json::json!({
                    "status": "shared", "file": path.display().to_string(), "count": envelope.count,
                    "withheld": envelope.withheld, "payload_sha256": envelope.payload_sha256,
                }));
            } else {
                outln!(
                    "shared {} record(s) with {} in {} ({} withheld); payload sha256 {}",
                    envelope.count,
                    envelope.zone,
                    path.display(),
                    envelope.withheld,
                    envelope.payload_sha256
                );
            }
        }
        None => outln!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn import_envelope(settings: &Settings, file: &Path) -> Result<ExitCode> {
    let mut bytes = Vec::new();
    if file.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_ENVELOPE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .context("cannot read the envelope from stdin")?;
    } else {
        std::fs::File::open(file)
            .with_context(|| format!("cannot read {}", file.display()))?
            .take(MAX_ENVELOPE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {}", file.display()))?;
    }
    let mut engine = settings.open("import")?;
    let report = engine.import_envelope(&bytes)?;
    if settings.json {
        print_json(&report);
    } else {
        let s = &report.import.summary;
        outln!(
            "imported envelope {} from {} ({}): {} added, {} updated, {} unchanged, {} errors; {} reference(s) without content not stored",
            &report.payload_sha256[..12.min(report.payload_sha256.len())],
            report.from_project,
            report.zone,
            s.added,
            s.updated,
            s.noop,
            s.error,
            report.references
        );
    }
    Ok(super::import::lines_failed(&report.import.summary))
}
