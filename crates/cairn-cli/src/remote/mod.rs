//! Remote brains: the CLI talking to a cairn server (`cairn serve`, or the local daemon on its
//! Unix socket) instead of opening a file. `client` is the transport (one JSON request, one
//! answer or a problem turned into an error with the CLI's exit code); `unix` carries ureq's
//! HTTP over a Unix socket; `commands` is the table of which command a server answers and how
//! (`CAIRN_URL`), `agent` its handlers for the agent's own tables, `graph` those of the graph and the lifecycle (decay, dreams), `admin` the upkeep and administration (maintain, extract, model status, tokens, settings); `mcp` forwards `cairn mcp`'s JSON-RPC to the server's `/mcp`.

mod admin;
mod agent;
mod client;
pub mod commands;
mod graph;
mod mcp;
mod unix;

#[cfg(test)]
mod tests;

pub use client::{Client, ClientOptions, RemoteError, Secret, Target};
