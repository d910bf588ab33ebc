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
    cairn_mcp::serve(cairn_mcp::ServerOptions { db, context }, Some(loader))
        .map_err(|message| anyhow::anyhow!(message))?;
    Ok(ExitCode::SUCCESS)
}
