//! `cairn codemap`: the code map of the repository (docs/codemap.md) — files in rank order with
//! their top symbols' signature lines, cut to a token budget — and `cairn code-neighbors`.

use crate::output::print_json;
use crate::settings::Settings;
use anyhow::Result;
use cairn_engine::{CodeMapRequest, DEFAULT_CODEMAP_BUDGET};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum CodemapCommand {
    /// The code map: the files that matter (ranked toward the focus), each with its top
    /// symbols' signature lines, within a token budget (tokens = characters / 4).
    Codemap(CodemapArgs),
    /// What a file (or a symbol's files) uses and what uses it, in the code map's graph.
    CodeNeighbors(CodeNeighborsArgs),
}

#[derive(Debug, Args)]
pub struct CodemapArgs {
    /// Focus on these files (besides the working tree's changes and the files recent memories
    /// mention); each must be inside the repository.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub focus: Vec<PathBuf>,
    /// Token budget (characters / 4); the map never exceeds it.
    #[arg(long, value_name = "TOKENS", default_value_t = DEFAULT_CODEMAP_BUDGET)]
    pub budget: usize,
    /// How long the refresh may parse changed files (milliseconds); files it does not reach
    /// keep their stored parse and the map says `"stale": true`.
    #[arg(long, value_name = "MS", default_value_t = 20_000)]
    pub refresh_ms: u64,
}

#[derive(Debug, Args)]
pub struct CodeNeighborsArgs {
    /// A file (path inside the repository) or a symbol name.
    pub target: String,
}

pub fn run(settings: &Settings, command: &CodemapCommand) -> Result<ExitCode> {
    match command {
        CodemapCommand::Codemap(args) => codemap(settings, args),
        CodemapCommand::CodeNeighbors(args) => neighbors(settings, args),
    }
}

fn codemap(settings: &Settings, args: &CodemapArgs) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    let map = engine.code_map(&CodeMapRequest {
        focus: args.focus.clone(),
        budget: args.budget,
        refresh_bound: std::time::Duration::from_millis(args.refresh_ms),
        ..CodeMapRequest::default()
    })?;
    if settings.json {
        print_json(&map);
    } else {
        out!("{}", map.text);
        if map.stale {
            eprintln!(
                "cairn: the map is stale: {} changed files were not parsed within the time bound; run `cairn codemap` again",
                map.refresh.deferred
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn neighbors(settings: &Settings, args: &CodeNeighborsArgs) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    let answer = engine.code_neighbors(&args.target)?;
    if settings.json {
        print_json(&answer);
        return Ok(ExitCode::SUCCESS);
    }
    for file in &answer.files {
        outln!("{}", file.path);
        for n in &file.uses {
            outln!("  uses {} ({})", n.path, n.names.join(", "));
        }
        for n in &file.used_by {
            outln!("  used by {} ({})", n.path, n.names.join(", "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
