//! cairn-bench: cairn's benchmark programs (STYLE §Benchmarks): seeded data, a fixed `now`,
//! latencies as p50/p95, throughput, memory, and the numbers kept in `bench/results/`.
//!
//! Run with a release build: `cargo run --release -p cairn-bench -- core`.

mod core_bench;
mod corpus;
mod machine;
mod rng;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cairn-bench",
    about = "cairn's benchmark programs",
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The core engine at N records: import throughput, in-process recall latency, whole-process
    /// `cairn recall` against the bare sqlite3 CLI, peak RSS.
    Core(core_bench::CoreArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Core(args) => core_bench::run(args),
    }
}
