//! cairn's benchmark library: what every benchmark program shares, so two result files mean
//! the same thing by every number they share (STYLE §Benchmarks).
//!
//! - [`rng`]: the one seeded generator (and Zipf / weighted sampling);
//! - [`stats`]: latency summaries with the one percentile definition (nearest rank);
//! - [`machine`]: cores, CPU model, load average, git tree, CPU time and peak-RSS probes;
//! - [`corpus`]: the seeded synthetic corpus and query set of `core`;
//! - [`process`]: the `cairn` binary under test, a child's wall/CPU time and peak RSS;
//! - [`mcp`]: a small MCP client over a real `cairn mcp` stdio process;
//! - [`results`]: the result writer (`bench/results/<name>-<stamp>.{json,md}`);
//! - [`work`]: the work directory (temporary unless given; `--keep`).
//!
//! The programs themselves are the subcommands of the `cairn-bench` binary.

pub mod corpus;
pub mod machine;
pub mod mcp;
pub mod process;
pub mod results;
pub mod rng;
pub mod stats;
pub mod work;
