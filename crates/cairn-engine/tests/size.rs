//! Issue 6's size work through the engine: what the smaller brain must still do the same.

mod common;

use common::{engine_at, forty_words, found_anywhere as found};

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

/// How a record is stored: `(typeof(body), merged_into)`, read with plain SQLite.
fn stored(dir: &std::path::Path, id: i64) -> (String, Option<i64>) {
    let conn = rusqlite::Connection::open(dir.join("brain.db")).unwrap();
    conn.query_row(
        "SELECT typeof(body), merged_into FROM memories WHERE id = ?1",
        [id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

fn doctor_is_clean(engine: &mut Engine) {
    let report = engine.doctor(false).unwrap();
    assert!(report.ok, "{:#?}", report.checks);
}

/// Two captures a dream merges: A (older, merged away) into B. Returns (A, B, A's body).
fn merged_pair(dir: &std::path::Path) -> (Engine, i64, i64, String) {
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    let a = forty_words(&[(5, "onlyina")]);
    let b = forty_words(&[(5, "onlyinb")]);
    let mut engine = engine_at(dir, start);
    let id_a = capture(&mut engine, &a).id.unwrap();
    let mut engine = engine_at(dir, start + chrono::Duration::minutes(1));
    let id_b = capture(&mut engine, &b).id.unwrap();
    let mut engine = engine_at(dir, start + chrono::Duration::hours(1));
    dream_and_accept(&mut engine);
    assert_eq!(engine.get(id_a).unwrap().status, Status::Archived);
    (engine, id_a, id_b, a)
}

#[test]
fn a_merged_away_record_reads_whole_but_is_stored_as_changes_outside_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, id_a, id_b, a) = merged_pair(dir.path());
    assert_eq!(stored(dir.path(), id_a), ("blob".into(), Some(id_b)));
    assert_eq!(stored(dir.path(), id_b), ("text".into(), None));
    assert_eq!(engine.get(id_a).unwrap().body, a);
    // The words both share find the survivor only; A's own word finds nothing.
    assert_eq!(found(&mut engine, "word12x word30x"), vec![id_b]);
    assert_eq!(found(&mut engine, "onlyina"), Vec::<i64>::new());
    // Still a record of the brain: counted, though not indexed.
    assert_eq!(engine.stats().unwrap().records, 2);
    doctor_is_clean(&mut engine);

    // Restore: whole again, and in the index again.
    let restored = engine.restore(id_a).unwrap();
    assert_eq!(restored.body, a);
    assert_eq!(stored(dir.path(), id_a), ("text".into(), None));
    assert_eq!(found(&mut engine, "onlyina").first(), Some(&id_a));
    doctor_is_clean(&mut engine);
}

#[test]
fn a_survivor_that_changes_or_goes_keeps_its_merged_records_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, id_a, id_b, a) = merged_pair(dir.path());
    // The survivor's body changes: A is stored against the new body, and reads the same.
    let update = cairn_engine::UpdateRequest {
        body: Some(forty_words(&[(5, "onlyinb"), (30, "rewritten")])),
        ..Default::default()
    };
    engine.update(id_b, &update).unwrap();
    assert_eq!(engine.get(id_a).unwrap().body, a);
    assert_eq!(stored(dir.path(), id_a), ("blob".into(), Some(id_b)));
    doctor_is_clean(&mut engine);

    // The survivor is deleted for good: A is stored whole and found on its own again.
    engine.forget(id_b, true).unwrap();
    assert_eq!(engine.get(id_a).unwrap().body, a);
    assert_eq!(stored(dir.path(), id_a), ("text".into(), None));
    assert_eq!(found(&mut engine, "onlyina"), vec![id_a]);
    doctor_is_clean(&mut engine);
}

#[test]
fn a_survivor_merged_away_later_takes_its_merged_records_along() {
    let dir = tempfile::tempdir().unwrap();
    let (_, id_a, id_b, a) = merged_pair(dir.path());
    let b = forty_words(&[(5, "onlyinb")]);
    // A day later a third capture two words away from B; the dream keeps the newest, C.
    let later = Utc.with_ymd_and_hms(2026, 1, 2, 9, 0, 0).unwrap();
    let mut engine = engine_at(dir.path(), later);
    let id_c = capture(
        &mut engine,
        &forty_words(&[(5, "onlyinb"), (20, "onlyinc"), (33, "alsoinc")]),
    )
    .id
    .unwrap();
    let mut engine = engine_at(dir.path(), later + chrono::Duration::hours(1));
    dream_and_accept(&mut engine);
    assert_eq!(engine.get(id_b).unwrap().status, Status::Archived);
    // Every base is stored whole: A now points at C, like B.
    assert_eq!(stored(dir.path(), id_b), ("blob".into(), Some(id_c)));
    assert_eq!(stored(dir.path(), id_a), ("blob".into(), Some(id_c)));
    assert_eq!(engine.get(id_a).unwrap().body, a);
    assert_eq!(engine.get(id_b).unwrap().body, b);
    assert_eq!(found(&mut engine, "word12x"), vec![id_c]);
    doctor_is_clean(&mut engine);
}

/// A day of long near-duplicate captures: merging them frees space inside pages, and the
/// accept compacts the brain itself once that reaches 5 % of the file.
#[test]
fn an_accept_that_frees_enough_space_compacts_the_brain() {
    let dir = tempfile::tempdir().unwrap();
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    // Twelve words changed in 300: MinHash ≈ 0.8, under the capture's 0.9, over the dream's 0.7.
    let turn = |n: usize, edit: &str| {
        let mut words: Vec<String> = (0..300).map(|i| format!("t{n}w{i}")).collect();
        for at in (10..300).step_by(25) {
            words[at] = format!("{edit}{at}");
        }
        words.join(" ")
    };
    for n in 0..40 {
        let mut engine = engine_at(dir.path(), start + chrono::Duration::minutes(2 * n as i64));
        capture(&mut engine, &turn(n, "first"));
        let mut engine = engine_at(
            dir.path(),
            start + chrono::Duration::minutes(2 * n as i64 + 1),
        );
        capture(&mut engine, &turn(n, "second"));
    }
    let page_count = |dir: &std::path::Path| -> i64 {
        let conn = rusqlite::Connection::open(dir.join("brain.db")).unwrap();
        conn.query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap()
    };
    let before = page_count(dir.path());
    let mut engine = engine_at(dir.path(), start + chrono::Duration::hours(10));
    let outcome = dream_and_accept(&mut engine);
    let accepted = outcome.accepted.expect("accepted");
    assert_eq!(accepted.applied.len(), 40, "{:?}", accepted.skipped);
    let compacted = accepted.compacted.expect("the accept compacted the brain");
    assert!(compacted.starts_with("compacted the brain"), "{compacted}");
    assert!(
        outcome.message.contains("compacted the brain"),
        "{}",
        outcome.message
    );
    assert!(page_count(dir.path()) < before);
    let conn = rusqlite::Connection::open(dir.path().join("brain.db")).unwrap();
    let reclaimable: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'reclaimable_bytes'",
            [],
            |r| r.get(0),
        )
        .ok();
    assert_eq!(reclaimable, None);
    // Every merged-away turn still reads whole.
    for record in engine
        .list(&ListRequest {
            status: Some(Status::Archived),
            limit: 0,
            all_projects: true,
            ..ListRequest::default()
        })
        .unwrap()
    {
        assert!(record.body.contains("first"), "{}", record.body);
        assert_eq!(record.body.split(' ').count(), 300);
    }
    doctor_is_clean(&mut engine);
}
