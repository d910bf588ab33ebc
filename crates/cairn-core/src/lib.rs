//! cairn-core: the pure domain of cairn.
//!
//! Everything here is a function over plain data: no files, no database, no clock (callers pass
//! `now`), no network. That keeps scoring, the text pipeline and the record rules testable with
//! five-line cases and makes the engine deterministic.

pub mod brief;
pub mod capture;
pub mod delta;
pub mod extraction;
pub mod graph;
pub mod hook_payload;
pub mod lifecycle;
pub mod memory;
pub mod minhash;
pub mod polarity;
pub mod query;
pub mod receipt;
pub mod record;
pub mod scope;
pub mod score;
pub mod secrets;
pub mod stats;
pub mod text;
pub mod time;
pub mod transcript;
pub mod vector;
