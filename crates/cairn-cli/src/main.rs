//! The `cairn` binary: parses the command line, opens the brain, calls the engine, prints.
//!
//! Glue only: every rule lives in `cairn-engine`. Human output goes to stdout, errors to stderr;
//! `--json` prints the JSON contract of docs/cli.md instead.
//!
//! Everything printed to stdout goes through `outln!` / `out!` (not `println!`, which panics
//! when the reader went away): `cairn recall … | head` ends quietly with the exit status a
//! process killed by SIGPIPE has (141), see `output::stdout_failed`.

/// `println!` to stdout that ends the process quietly when stdout is a closed pipe.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to stdout that ends the process quietly when stdout is a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}

mod cli;
mod commands;
mod daemon;
mod embed_cache;
mod embedder;
mod eval_cmd;
mod hook;
mod hook_server;
mod ojson;
mod output;
mod remote;
mod settings;
mod values;

use clap::{CommandFactory as _, FromArgMatches as _};
use std::process::ExitCode;

fn main() -> ExitCode {
    let matches = cli::Cli::command().get_matches();
    let cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let settings = settings::Settings::new(&cli.globals);
    match cli::run(&settings, &cli.command, &command_name(&matches)) {
        Ok(code) => code,
        Err(error) if output::is_broken_pipe(&error) => ExitCode::from(output::BROKEN_PIPE),
        Err(error) => {
            let code = output::exit_code(&error);
            output::print_error(&error, settings.json);
            code
        }
    }
}

/// The words naming the command that runs (`recall`, `dream accept`), for messages.
fn command_name(matches: &clap::ArgMatches) -> String {
    let mut words = Vec::new();
    let mut current = matches;
    while let Some((name, inner)) = current.subcommand() {
        words.push(name.to_string());
        current = inner;
    }
    words.join(" ")
}
