//! `cairn-bench`: cairn's benchmark programs, one subcommand each (STYLE §Benchmarks): seeded
//! data, a fixed `now`, latencies as nearest-rank p50/p95, throughput, memory, the load
//! average and CPU time, and the numbers kept in `bench/results/`.
//!
//! Run with a release build: `cargo run --release -p cairn-bench -- <subcommand>`.

mod commands;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cairn-bench",
    about = "cairn's benchmark programs (results in bench/results/; see bench/README.md)",
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
    Core(commands::core::CoreArgs),
    /// Semantic recall at N records with the local model: model vs ingest throughput, vector
    /// scans and the IVF index, hybrid recall in process, whole process and over MCP, peak RSS.
    Semantic(commands::semantic::SemanticArgs),
    /// The knowledge graph at N memories and M edges: write with extraction, `neighbors`
    /// depth 3, `graph --as-of`, doctor's full fold, clustering, peak RSS.
    Graph(commands::graph::GraphArgs),
    /// Times `neighbors` in one process on an existing brain, each origin cold then warm.
    GraphProbe(commands::graph::ProbeArgs),
    /// The lifecycle: dream at 100k without an LLM, LSH recall against exact all-pairs, a
    /// simulated month of captures with a daily dream (file size against live text).
    Lifecycle(commands::lifecycle::LifecycleArgs),
    /// The Markdown wiki at N records: full export, unchanged and incremental re-export, import
    /// into the same and into a fresh brain.
    Wiki(commands::wiki::WikiArgs),
    /// Agent surfaces, whole process: the hooks (user-prompt-submit, session-start, stop) and
    /// the warm MCP `recall` round trip, at 10k and 100k memories.
    Agent(commands::agent::AgentArgs),
    /// `cairn serve` under load: wrk with 32 keep-alive clients, 90 % lexical recall and 10 %
    /// remember, at 100,000 memories: requests/s, p99, errors, server CPU.
    Serve(commands::serve::ServeArgs),
    /// The web UI at 100,000 memories: every page's time (p95), a search keystroke's round
    /// trip, and the first page's transfer with its assets.
    Ui(commands::ui::UiArgs),
    /// The code map on a tree of real code (5,000 files): the first full map and its peak RSS,
    /// an up-to-date map, the map after one file changed, `hook session-start` with the code
    /// map section, and whether the same input gives a byte-identical map.
    Codemap(commands::codemap::CodemapArgs),
    /// Lexical search on SQLite (FTS5) and PostgreSQL (cairn's BM25 index) side by side at N
    /// records: p50/p95, identical answers, `cairn migrate` throughput, disk bytes per record.
    PgSearch(commands::pg_search::PgSearchArgs),
    /// The warm local daemon, whole process: CLI remember (latency, peak RSS), hybrid recall
    /// and the prompt hook through its socket, and the daemon's RSS, at 100k memories.
    Daemon(commands::daemon::DaemonArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        Command::Core(args) => commands::core::run(args),
        Command::Semantic(args) => commands::semantic::run(args),
        Command::Graph(args) => commands::graph::run(args),
        Command::GraphProbe(args) => commands::graph::probe(args),
        Command::Lifecycle(args) => commands::lifecycle::run(args),
        Command::Wiki(args) => commands::wiki::run(args),
        Command::Agent(args) => commands::agent::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Ui(args) => commands::ui::run(args),
        Command::Codemap(args) => commands::codemap::run(args),
        Command::Daemon(args) => commands::daemon::run(args),
        Command::PgSearch(args) => commands::pg_search::run(args),
    }
}
