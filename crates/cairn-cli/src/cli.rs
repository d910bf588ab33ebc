//! The command line of docs/cli.md: the global flags and the list of commands, each area's commands
//! flattened into one list, and the dispatch to each area's `run`.

use crate::commands::{
    agent, codemap, exchange, graph, install, lifecycle, maintenance, mcp, records, semantic, serve,
};
use crate::remote::commands::Route;
use crate::settings::{GlobalArgs, Settings};
use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Long-term memory for AI agents: remember, recall, brief.",
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(flatten)]
    Records(records::RecordsCommand),
    #[command(flatten)]
    Exchange(exchange::ExchangeCommand),
    #[command(flatten)]
    Maintenance(maintenance::MaintenanceCommand),
    #[command(flatten)]
    Graph(graph::GraphCommand),
    #[command(flatten)]
    Agent(agent::AgentCommand),
    #[command(flatten)]
    Lifecycle(lifecycle::LifecycleCommand),
    /// Agent hook: reads the client's hook JSON on stdin; always exits 0.
    Hook(crate::hook::HookArgs),
    /// MCP server on stdio.
    Mcp,
    /// HTTP JSON API over this brain (docs/service.md): loopback by default, bearer tokens.
    Serve(serve::ServeArgs),
    /// The web UI on this brain: a loopback server and a one-time sign-in link (docs/ui.md).
    Ui(serve::UiArgs),
    /// Access tokens of `cairn serve`.
    Token {
        #[command(subcommand)]
        command: serve::TokenCommand,
    },
    /// Write hook and MCP configuration for claude-code, codex, cursor or gemini.
    Install(install::InstallArgs),
    #[command(flatten)]
    Semantic(semantic::SemanticCommand),
    #[command(flatten)]
    Codemap(codemap::CodemapCommand),
    /// Copy a whole brain between a brain file and PostgreSQL, either way (docs/postgres.md).
    Migrate(crate::commands::migrate::MigrateArgs),
    /// Retrieval evaluations (a program, not a test).
    Eval {
        #[command(subcommand)]
        command: crate::eval_cmd::EvalCommand,
    },
}

/// Runs `command` (`name`: its words, as `dream accept`, for messages). With `CAIRN_URL` set,
/// the server answers every command it serves and every other brain command is refused
/// (`remote::commands::route`).
pub fn run(settings: &Settings, command: &Command, name: &str) -> Result<ExitCode> {
    // A PostgreSQL store can hold a migrated brain; recall reads it, no other command yet.
    if let Some(url) = &settings.store_url {
        match command {
            Command::Migrate(args) => return crate::commands::migrate::run(settings, args),
            Command::Records(records::RecordsCommand::Recall(args)) => {
                return crate::commands::recall::run(settings, args);
            }
            Command::Eval { command } => return crate::eval_cmd::run(settings, command),
            Command::Hook(_) => {
                // The hooks always exit 0: they say why they did nothing, and do nothing.
                eprintln!(
                    "cairn: {}",
                    crate::settings::PostgresNotServed::new(url, name)
                );
                return Ok(ExitCode::SUCCESS);
            }
            _ => return Err(crate::settings::PostgresNotServed::new(url, name).into()),
        }
    }
    if let Some(remote) = &settings.remote {
        match crate::remote::commands::route(command) {
            Route::Server(handler) => {
                return handler(&crate::remote::commands::configured(settings, remote)?);
            }
            Route::Missing => return Err(crate::remote::commands::no_endpoint(name, remote)),
            Route::Here => {}
        }
    }
    // The warm local daemon answers the hot commands when it runs (crate::daemon).
    if let Some(answered) = crate::daemon::answer(settings, command) {
        return answered;
    }
    match command {
        Command::Records(command) => records::run(settings, command),
        Command::Exchange(command) => exchange::run(settings, command),
        Command::Maintenance(command) => maintenance::run(settings, command),
        Command::Graph(command) => graph::run(settings, command),
        Command::Agent(command) => agent::run(settings, command),
        Command::Lifecycle(command) => lifecycle::run(settings, command),
        Command::Hook(hook) => Ok(crate::hook::run_hook(settings, hook)),
        Command::Mcp => mcp::run(settings),
        Command::Serve(args) => serve::run_serve(settings, args),
        Command::Ui(args) => serve::run_ui(settings, args),
        Command::Token { command } => serve::run_token(settings, command),
        Command::Install(install) => install::run(settings, install),
        Command::Semantic(command) => semantic::run(settings, command),
        Command::Codemap(command) => codemap::run(settings, command),
        Command::Eval { command } => crate::eval_cmd::run(settings, command),
        Command::Migrate(args) => crate::commands::migrate::run(settings, args),
    }
}
