//! The `cairn` binary: parses the command line, opens the brain, calls the engine, prints.
//!
//! Glue only: every rule lives in `cairn-engine`. Human output goes to stdout, errors to stderr;
//! `--json` prints the JSON contract of CLI.md instead.

mod agent;
mod cli;
mod embed_cache;
mod eval_cmd;
mod graph_cmd;
mod hook;
mod import_cmd;
mod install;
mod lifecycle_cmd;
mod mcp;
mod ojson;
mod output;
mod semantic_cmd;
mod share_cmd;
mod wiki_cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let json = args.json;
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            let code = output::exit_code(&error);
            output::print_error(&error, json);
            code
        }
    }
}
