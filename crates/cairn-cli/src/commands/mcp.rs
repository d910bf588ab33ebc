//! `cairn mcp`: opens nothing itself — it hands the brain's path and the context (from the
//! settings, as every command gets them) to the MCP server crate, which owns stdout from here
//! on (protocol messages only).

use crate::settings::Settings;
use anyhow::{Context as _, Result};
use std::process::ExitCode;

pub fn run(settings: &Settings) -> Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let context = settings.context("mcp", &cwd);
    // Recall is hybrid once the model has loaded in the background (lexical-only until then,
    // and said so); writes embed their record when the model is there, else stay pending.
    let loader = crate::embedder::loader(settings);
    let mut options = cairn_mcp::ServerOptions::new(settings.db.clone(), context);
    if let Ok(value) = std::env::var("CAIRN_MCP_INDEX_SECS") {
        options.index_interval = index_interval(&value)?;
    }
    cairn_mcp::serve(options, Some(loader)).map_err(|message| anyhow::anyhow!(message))?;
    Ok(ExitCode::SUCCESS)
}

/// `CAIRN_MCP_INDEX_SECS`: seconds between background indexing passes (`cairn mcp`, `cairn
/// serve`).
pub fn index_interval(value: &str) -> Result<std::time::Duration> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|secs| secs.is_finite() && *secs >= 0.05)
        .map(std::time::Duration::from_secs_f64)
        .with_context(|| {
            format!(
                "CAIRN_MCP_INDEX_SECS={value:?}: expected seconds between background indexing passes, at least 0.05 (default {})",
                cairn_mcp::INDEX_INTERVAL.as_secs()
            )
        })
}
