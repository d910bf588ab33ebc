//! One module per area of the command line, each with its own subcommand enum (flattened into
//! the one list in `cli.rs`) and one `run(&Settings, &command)`. A command module never
//! imports the dispatcher: it depends on the shared helpers (`settings`, `output`, `values`,
//! `embedder`, `ojson`) and the engine; `records` hands `recall` to its sibling.

pub mod agent;
pub mod codemap;
pub mod exchange;
pub mod graph;
pub mod install;
pub mod lifecycle;
pub mod maintenance;
pub mod mcp;
pub mod migrate;
pub mod recall;
pub mod records;
pub mod semantic;
pub mod serve;
