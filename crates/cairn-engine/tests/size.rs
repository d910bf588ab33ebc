//! Issue 6's size work through the engine: what the smaller brain must still do the same.

mod common;

use common::{engine_at, forty_words};

use cairn_core::record::{MemoryType, Status};
use cairn_engine::lifecycle::DreamOptions;
use cairn_engine::{Engine, ListRequest, RememberRequest, RememberStatus};
use chrono::{TimeZone, Utc};

fn capture(engine: &mut Engine, body: &str) -> cairn_engine::RememberOutcome {
    let mut request = RememberRequest::new(MemoryType::Episode, body.to_string());
    request.capture = true;
    engine.remember(&request).unwrap()
}

fn dream_and_accept(engine: &mut Engine) -> cairn_engine::lifecycle::DreamOutcome {
    engine
        .dream(&DreamOptions {
            accept: true,
            ..DreamOptions::default()
        })
        .unwrap()
}

fn record_count(engine: &Engine) -> usize {
    engine
        .list(&ListRequest {
            limit: 0,
            all_projects: true,
            ..ListRequest::default()
        })
        .unwrap()
        .len()
}

#[test]
fn an_exact_repeat_of_a_merged_away_capture_is_a_noop_on_its_survivor() {
    let (a, b, c) = (
        forty_words(&[]),
        forty_words(&[(5, "alpha")]),
        forty_words(&[(5, "alpha"), (20, "beta")]),
    );
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    let mut engine = engine_at(dir.path(), start);
    let id_a = capture(&mut engine, &a).id.unwrap();
    let mut engine = engine_at(dir.path(), start + chrono::Duration::minutes(1));
    let id_b = capture(&mut engine, &b).id.unwrap();
    // The newer record survives: A is merged into B.
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(1));
    dream_and_accept(&mut engine);
    assert_eq!(engine.get(id_a).unwrap().status, Status::Archived);

    let uses = engine.get(id_b).unwrap().use_count;
    let repeat = capture(&mut engine, &a);
    assert_eq!(repeat.status, RememberStatus::Noop, "{repeat:?}");
    assert_eq!(repeat.id, Some(id_b));
    assert_eq!(record_count(&engine), 2);
    assert_eq!(engine.get(id_b).unwrap().use_count, uses + 1);

    // Merges of merges: B goes into a newer C; A's text now lands on C.
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(2));
    let id_c = capture(&mut engine, &c).id.unwrap();
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(3));
    dream_and_accept(&mut engine);
    assert_eq!(engine.get(id_b).unwrap().status, Status::Archived);
    let repeat = capture(&mut engine, &a);
    assert_eq!(repeat.status, RememberStatus::Noop, "{repeat:?}");
    assert_eq!(repeat.id, Some(id_c));
    assert_eq!(record_count(&engine), 3);

    // The archived wording is still there, and restore brings it back as it was.
    engine.restore(id_a).unwrap();
    let restored = engine.get(id_a).unwrap();
    assert_eq!(
        (restored.status, restored.body.as_str()),
        (Status::Active, a.as_str())
    );
}

#[test]
fn history_reads_whole_snapshots_across_merge_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    let mut engine = engine_at(dir.path(), start);
    let id_a = capture(&mut engine, &forty_words(&[])).id.unwrap();
    let mut engine = engine_at(dir.path(), start + chrono::Duration::minutes(1));
    capture(&mut engine, &forty_words(&[(5, "alpha")]));
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(1));
    let before_merge = engine.get(id_a).unwrap();
    let outcome = dream_and_accept(&mut engine);
    // Labels are not stored but shown, from the live records.
    let merge = outcome
        .dream
        .proposals
        .iter()
        .find(|p| p.kind == "merge")
        .unwrap();
    assert!(
        merge.payload["merged"][0]["label"]
            .as_str()
            .unwrap()
            .starts_with(&format!("#{id_a} word0x")),
        "{:#?}",
        merge.payload
    );
    let archived = engine.get(id_a).unwrap();
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(2));
    engine.restore(id_a).unwrap();

    let history = engine.history(id_a).unwrap();
    let snapshots: Vec<serde_json::Value> = history.iter().map(|h| h.snapshot.clone()).collect();
    assert_eq!(
        snapshots,
        vec![
            serde_json::to_value(&before_merge).unwrap(),
            serde_json::to_value(&archived).unwrap()
        ]
    );
    assert_eq!(
        history.iter().map(|h| h.op.as_str()).collect::<Vec<_>>(),
        ["merge", "restore"]
    );
}
