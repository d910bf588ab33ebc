//! One module per area of the command line, each with its own subcommand enum (flattened into
//! the one list in `cli.rs`) and one `run(&Settings, &command)`. A command module never
//! imports the dispatcher: they depend on `settings`, `output`, `values` and the engine only.

pub mod agent;
pub mod exchange;
pub mod graph;
pub mod install;
pub mod lifecycle;
pub mod maintenance;
pub mod mcp;
pub mod recall;
pub mod records;
pub mod semantic;
