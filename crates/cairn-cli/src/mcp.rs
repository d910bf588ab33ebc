//! `cairn mcp`: opens nothing itself — it hands the brain's path and the context to the MCP
//! server crate, which owns stdout from here on (protocol messages only).

use crate::cli::Cli;
use anyhow::{Context as _, Result};
use cairn_engine::Context;
use std::process::ExitCode;

pub fn run_mcp(args: &Cli) -> Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let mut context = Context::for_directory(&cwd);
    if let Some(project) = args.project.as_deref().filter(|p| !p.trim().is_empty()) {
        context.project = project.trim().to_string();
    }
    context.actor = "mcp".to_string();
    context.read_only =
        std::env::var("CAIRN_READ_ONLY").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    let db = args
        .db
        .clone()
        .unwrap_or_else(cairn_engine::default_brain_path);
    // Recall is hybrid once the model has loaded in the background (lexical-only until then,
    // and said so); writes embed their record when the model is there, else stay pending.
    let loader = crate::semantic_cmd::embedder_loader(args.model_dir.as_deref());
    let mut options = cairn_mcp::ServerOptions::new(db, context);
    if let Ok(value) = std::env::var("CAIRN_MCP_INDEX_SECS") {
        options.index_interval = value
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
            })?;
    }
    cairn_mcp::serve(options, Some(loader)).map_err(|message| anyhow::anyhow!(message))?;
    Ok(ExitCode::SUCCESS)
}
