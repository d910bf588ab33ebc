//! Shared helpers for the engine's integration tests: a brain in a temporary directory under a
//! fixed project, actor and clock.

#![allow(dead_code)]

use cairn_engine::{Context, Engine, Mode, RecallRequest};
use chrono::{DateTime, TimeZone, Utc};
use std::path::Path;

/// The clock most tests run at.
pub fn test_now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// The brain in `dir` (project `p`, actor `test`), its clock at `now`.
pub fn engine_at(dir: &Path, now: DateTime<Utc>) -> Engine {
    let context = Context {
        project: "p".into(),
        cwd: dir.to_path_buf(),
        actor: "test".into(),
        read_only: false,
        now: Some(now),
    };
    Engine::open(&dir.join("brain.db"), context).expect("the brain opens")
}

/// 40 distinct words with `edits` (position, replacement) applied in order: one edit keeps a
/// MinHash similarity of about 0.85.
pub fn forty_words(edits: &[(usize, &str)]) -> String {
    let mut words: Vec<String> = (0..40).map(|i| format!("word{i}x")).collect();
    for (at, replacement) in edits {
        words[*at] = (*replacement).to_string();
    }
    words.join(" ")
}

/// Ids a lexical recall over every status finds for `query` (no floor, no touch), sorted.
pub fn found_anywhere(engine: &mut Engine, query: &str) -> Vec<i64> {
    let request = RecallRequest {
        limit: 50,
        touch: false,
        mode: Mode::Lexical,
        all: true,
        floor: Some(0.0),
        ..RecallRequest::new(query)
    };
    let mut ids: Vec<i64> = engine
        .recall(&request)
        .expect("recall")
        .results
        .iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    ids
}
