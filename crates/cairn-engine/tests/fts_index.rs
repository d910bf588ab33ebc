//! The full-text index follows every write (schema v5: the write path inserts a record's FTS
//! row itself; updates and deletes go through triggers that fire only when indexed text
//! changes). After each step the index must hold exactly the records' current text: FTS5's own
//! integrity check passes, `doctor` agrees, and recall finds the new words and not the old.

mod common;

use common::{engine_at, found_anywhere as found, test_now};

use cairn_core::record::MemoryType;
use cairn_engine::{Engine, RememberRequest, UpdateRequest};
use std::path::Path;

fn open_brain(dir: &Path) -> Engine {
    engine_at(dir, test_now())
}

fn store(engine: &mut Engine, body: &str, title: Option<&str>) -> i64 {
    let mut request = RememberRequest::new(MemoryType::Note, body);
    request.title = title.map(str::to_string);
    request.tags = vec!["harbour".into()];
    request.allow_duplicate = true;
    engine
        .remember(&request)
        .expect("stored")
        .id
        .expect("an id")
}

fn assert_consistent(engine: &mut Engine, step: &str) {
    assert_eq!(
        engine.store().unwrap().fts_integrity_check().unwrap(),
        None,
        "FTS5 integrity after {step}"
    );
    let gaps = engine.store().unwrap().reader().index_gaps().unwrap();
    assert_eq!(
        gaps.records, gaps.fts_rows,
        "one FTS row per record after {step}"
    );
    let report = engine.doctor(false).unwrap();
    assert!(report.ok, "doctor after {step}: {report:?}");
}

#[test]
fn the_full_text_index_follows_insert_update_forget_restore_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path());
    let lighthouse = store(
        &mut engine,
        "The lighthouse keeper logs the fog signal.",
        Some("Fog log"),
    );
    let ferry = store(&mut engine, "The ferry timetable changes in winter.", None);
    assert_consistent(&mut engine, "insert");
    assert_eq!(found(&mut engine, "lighthouse"), [lighthouse]);
    assert_eq!(
        found(&mut engine, "harbour"),
        [lighthouse, ferry],
        "tags are indexed"
    );
    assert_eq!(
        found(&mut engine, "fog"),
        [lighthouse],
        "titles are indexed"
    );

    // Text changes: the old words leave the index, the new ones enter.
    let update = UpdateRequest {
        body: Some("The pilot boat waits at the breakwater.".into()),
        title: Some("Pilot boat".into()),
        tags: Some(vec!["marina".into()]),
        ..UpdateRequest::default()
    };
    engine.update(lighthouse, &update).unwrap();
    assert_consistent(&mut engine, "a text update");
    assert!(found(&mut engine, "lighthouse").is_empty());
    assert_eq!(found(&mut engine, "breakwater"), [lighthouse]);
    assert_eq!(found(&mut engine, "marina"), [lighthouse]);
    assert_eq!(found(&mut engine, "harbour"), [ferry]);

    // A change that leaves the text alone does not touch the index (and keeps it right).
    let importance = UpdateRequest {
        importance: Some(5),
        ..UpdateRequest::default()
    };
    engine.update(ferry, &importance).unwrap();
    assert_consistent(&mut engine, "an update without text");
    assert_eq!(found(&mut engine, "ferry"), [ferry]);

    // Archive and restore keep the row; a hard delete removes it.
    engine.forget(ferry, false).unwrap();
    assert_consistent(&mut engine, "forget");
    engine.restore(ferry).unwrap();
    assert_consistent(&mut engine, "restore");
    assert_eq!(found(&mut engine, "timetable"), [ferry]);
    engine.forget(ferry, true).unwrap();
    assert_consistent(&mut engine, "a hard delete");
    assert!(found(&mut engine, "timetable").is_empty());

    // Bulk import writes its rows the same way.
    let lines: String = (0..40)
        .map(|i| format!("{{\"type\":\"fact\",\"body\":\"Quay number {i} holds crane {i}.\"}}\n"))
        .collect();
    engine
        .import_jsonl(&mut lines.as_bytes(), &Default::default())
        .unwrap();
    assert_consistent(&mut engine, "an import");
    assert_eq!(found(&mut engine, "crane").len(), 40);
}
