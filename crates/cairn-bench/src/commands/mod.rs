//! The benchmark programs, one module per subcommand; what they share is the `cairn_bench`
//! library.

pub mod agent;
pub mod codemap;
pub mod core;
pub mod daemon;
pub mod embed_ingest;
pub mod graph;
pub mod lifecycle;
pub mod pg_search;
pub mod semantic;
pub mod serve;
pub mod ui;
pub mod wiki;
