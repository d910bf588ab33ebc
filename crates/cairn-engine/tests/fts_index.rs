//! The full-text index follows every write (schema v5: the write path inserts a record's FTS
//! row itself; updates and deletes go through triggers that fire only when indexed text
//! changes). After each step the index must hold exactly the records' current text: FTS5's own
//! integrity check passes, `doctor` agrees, and recall finds the new words and not the old.

mod common;

use common::{engine_at, found_anywhere as found, test_now};

use cairn_core::record::MemoryType;
use cairn_engine::{
    Engine, GitSource, GroupedRemember, LexicalIndex, RememberRequest, UpdateRequest,
};
use std::path::Path;
use std::sync::Arc;

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

/// Vocabulary of the large brain below: `v0q` … `v499q`, drawn Zipf-like (early words often),
/// so a record holds both common and rare words.
struct Words(u64);

impl Words {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize % n
    }

    fn text(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| {
                let (a, b) = (self.below(500), self.below(500));
                format!("v{}q", a.min(b))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `text` with its last word replaced: a near duplicate (40 words, one changed).
fn edited(text: &str, last: &str) -> String {
    let mut words: Vec<&str> = text.split(' ').collect();
    *words.last_mut().unwrap() = last;
    words.join(" ")
}

fn outcome_of(result: cairn_engine::Result<cairn_engine::RememberOutcome>) -> String {
    match result {
        Ok(o) => format!(
            "{:?} id {:?} existing {:?} conflicts {:?}: {}",
            o.status, o.id, o.existing, o.conflicts, o.message
        ),
        Err(error) => format!("error: {error}"),
    }
}

/// A long-lived process keeps the full-text index in memory (`Engine::set_shared_lexical_index`)
/// and the write path counts words and searches for near duplicates there (issue 14: most of a
/// remember's CPU in the daemon was FTS5's BM25). On a brain large enough that the `global`
/// scope filter is ranked in memory, every remember — alone, right after another with no recall
/// between, or in a group whose later members see the earlier ones — gets exactly the answer
/// of the same brain without the index.
#[test]
fn remembers_with_the_index_in_memory_answer_as_with_fts5() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut words = Words(7);
    let seeded: Vec<String> = (0..2_100).map(|_| words.text(40)).collect();
    // One record through the engine, as the template of the others, written straight into
    // the store in one transaction (the whole write path for each took most of a minute in a
    // debug build).
    let template = {
        let mut engine = open_brain(dirs[0].path());
        let id = store(&mut engine, &seeded[0], None);
        engine.store().unwrap().reader().get(id).unwrap().unwrap()
    };
    let mut store = cairn_store::Store::open(&dirs[0].path().join("brain.db")).unwrap();
    store
        .write(|tx| {
            for (n, body) in seeded.iter().enumerate().skip(1) {
                let mut memory = template.clone();
                memory.id = 0;
                memory.body = body.clone();
                memory.content_hash = format!("seeded-{n}");
                tx.insert_memory(&memory, None)?;
            }
            Ok::<_, cairn_store::StoreError>(())
        })
        .unwrap();
    drop(store);
    for entry in std::fs::read_dir(dirs[0].path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dirs[1].path().join(entry.file_name())).unwrap();
    }
    let mut with_index = open_brain(dirs[0].path());
    let index = Arc::new(LexicalIndex::new());
    with_index.set_shared_lexical_index(Arc::clone(&index));
    assert!(
        index
            .prepare(&with_index.store().unwrap().reader())
            .unwrap()
    );
    let mut without = open_brain(dirs[1].path());

    let mut answers = Vec::new();
    let mut fresh = Vec::new();
    for step in 0..24 {
        let body = match step % 4 {
            // A near duplicate of a seeded record.
            0 => edited(&seeded[words.below(seeded.len())], "zzfirst"),
            // A new text, then (next step) its near duplicate, with no recall between.
            1 => {
                fresh.push(words.text(40));
                fresh.last().unwrap().clone()
            }
            2 => edited(fresh.last().unwrap(), "zzsecond"),
            _ => words.text(40),
        };
        let request = RememberRequest::new(MemoryType::Note, &body);
        let got = outcome_of(with_index.remember(&request));
        assert_eq!(got, outcome_of(without.remember(&request)), "step {step}");
        answers.push(got);
    }
    // Groups: a seeded record's near duplicate, a new text and its near duplicate together.
    for round in 0..4 {
        let new = words.text(40);
        let bodies = [
            edited(&seeded[words.below(seeded.len())], "zzgroup"),
            new.clone(),
            edited(&new, &format!("zzround{round}")),
        ];
        let group = |engine: &Engine| -> Vec<GroupedRemember> {
            bodies
                .iter()
                .map(|body| GroupedRemember {
                    context: engine.context().clone(),
                    git: GitSource::default(),
                    request: RememberRequest::new(MemoryType::Note, body),
                })
                .collect()
        };
        let got: Vec<String> = with_index
            .remember_group(&group(&with_index))
            .into_iter()
            .map(outcome_of)
            .collect();
        let want: Vec<String> = without
            .remember_group(&group(&without))
            .into_iter()
            .map(outcome_of)
            .collect();
        assert_eq!(got, want, "group {round}");
        answers.extend(got);
    }
    let caught = answers.iter().filter(|a| !a.starts_with("Added")).count();
    assert!(
        caught >= 12,
        "the near duplicates were found ({caught} of {}): {answers:#?}",
        answers.len()
    );
    assert!(index.is_built(), "the index is still kept in memory");
}
