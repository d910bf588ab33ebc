//! Issue 6, "brain stays small": a dream deletes the proposal rows of sets decided more than
//! `dream.keep_decided_days` before it (what they applied is in the event log), never those of
//! undecided sets; a pruned set still shows its header and says where its details went.

mod common;

use common::{engine_at, forty_words};

use cairn_core::record::{MemoryType, Status};
use cairn_engine::lifecycle::{DreamOptions, DreamOutcome, KEEP_DECIDED_DAYS};
use cairn_engine::{Engine, EngineError, RememberRequest};
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::path::Path;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap()
}

fn capture(engine: &mut Engine, body: &str) -> i64 {
    let mut request = RememberRequest::new(MemoryType::Episode, body.to_string());
    request.capture = true;
    engine.remember(&request).unwrap().id.unwrap()
}

fn dream(dir: &Path, at: DateTime<Utc>, accept: bool, keep: u32) -> DreamOutcome {
    let mut engine = engine_at(dir, at);
    // A fresh record each time: every dream sees a new snapshot, so it writes a new set.
    let mut request = RememberRequest::new(
        MemoryType::Note,
        format!("a note written at {at} about something else entirely"),
    );
    request.allow_duplicate = true;
    engine.remember(&request).unwrap();
    engine
        .dream(&DreamOptions {
            accept,
            keep_decided_days: keep,
            ..DreamOptions::default()
        })
        .unwrap()
}

fn proposal_rows(dir: &Path, id: &str) -> usize {
    engine_at(dir, start())
        .store()
        .unwrap()
        .reader()
        .dream_proposals(id)
        .unwrap()
        .len()
}

/// Two near duplicates, merged by an accepted dream an hour after the start.
fn merged_brain(dir: &Path) -> (i64, i64, String) {
    let mut engine = engine_at(dir, start());
    let a = capture(&mut engine, &forty_words(&[]));
    let mut engine = engine_at(dir, start() + Duration::minutes(1));
    let b = capture(&mut engine, &forty_words(&[(5, "alpha")]));
    let accepted = dream(dir, start() + Duration::hours(1), true, KEEP_DECIDED_DAYS);
    assert_eq!(accepted.accepted.as_ref().unwrap().status, "accepted");
    assert_eq!(
        engine_at(dir, start()).get(a).unwrap().status,
        Status::Archived,
        "the older copy is merged into the newer"
    );
    (a, b, accepted.dream.id)
}

#[test]
fn a_decided_set_is_pruned_after_keep_decided_days_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, first) = merged_brain(dir.path());
    let rows = proposal_rows(dir.path(), &first);
    assert!(rows >= 1);

    // Six days later: kept. A set left undecided.
    let early = dream(dir.path(), start() + Duration::days(6), false, 7);
    assert!(early.new);
    assert_eq!(early.pruned.sets, 0);
    assert_eq!(early.dream.report["pruned"]["sets"], 0);
    assert!(!early.message.contains("pruned"), "{}", early.message);
    assert_eq!(proposal_rows(dir.path(), &first), rows);
    let undecided = early.dream.id.clone();
    let undecided_rows = proposal_rows(dir.path(), &undecided);

    // Seven days and two hours after the decision: pruned, the undecided set kept.
    let later = dream(
        dir.path(),
        start() + Duration::days(7) + Duration::hours(3),
        false,
        7,
    );
    assert!(later.new);
    assert_eq!(later.pruned.sets, 1, "{:?}", later.pruned);
    assert_eq!(later.pruned.ids, vec![first.clone()]);
    assert_eq!(later.pruned.proposals, rows as i64);
    assert_eq!(later.dream.report["pruned"]["sets"], 1);
    assert_eq!(later.dream.report["pruned"]["proposals"], rows as i64);
    assert_eq!(later.dream.report["pruned"]["keep_decided_days"], 7);
    assert!(
        later
            .message
            .contains("pruned the proposal details of 1 decided set"),
        "{}",
        later.message
    );
    assert_eq!(proposal_rows(dir.path(), &first), 0);
    assert_eq!(proposal_rows(dir.path(), &undecided), undecided_rows);

    // The set is still there: status, decision, report, and where its details went.
    let engine = engine_at(dir.path(), start() + Duration::days(8));
    let shown = engine.dream_show(&first).unwrap();
    assert_eq!(shown.status, "accepted");
    assert!(shown.proposals.is_empty());
    assert_eq!(shown.decided_at.as_deref(), Some("2026-01-01T10:00:00Z"));
    let decision = shown.decision.as_ref().unwrap();
    assert_eq!(decision["applied"], rows as i64);
    assert_eq!(decision["pruned_proposals"], rows as i64);
    assert!(shown.report["proposals"]["merge"].as_i64().unwrap() >= 1);
    let pruned = shown.pruned.as_ref().unwrap();
    assert_eq!(pruned.at, "2026-01-08T12:00:00Z");
    assert_eq!(pruned.proposals, rows as i64);
    assert_eq!(pruned.keep_decided_days, Some(7));
    let records = pruned.records.as_ref().unwrap();
    assert!(records.contains(&a) && records.contains(&b), "{records:?}");
    assert!(
        pruned.note.contains("pruned on 2026-01-08")
            && pruned.note.contains(&format!("`cairn show {a} --history`")),
        "{}",
        pruned.note
    );
    // The list carries the marker too (without the event-log lookup).
    let listed = engine.dream_list(0).unwrap();
    let entry = listed.iter().find(|d| d.id == first).unwrap();
    assert!(entry.pruned.as_ref().unwrap().records.is_none());

    // Deciding it again is refused for what it is: already accepted.
    let mut engine = engine_at(dir.path(), start() + Duration::days(8));
    for result in [
        engine.dream_accept(&first, &[]).map(|_| ()),
        engine.dream_reject(&first).map(|_| ()),
    ] {
        match result {
            Err(EngineError::Refused { message, .. }) => {
                assert!(message.contains("already accepted"), "{message}")
            }
            other => panic!("not refused: {other:?}"),
        }
    }
    // A later run has nothing more to prune.
    let again = dream(dir.path(), start() + Duration::days(9), false, 7);
    assert_eq!(again.pruned.sets, 0);
}

#[test]
fn keep_decided_days_zero_prunes_every_decided_set_at_the_next_run_but_never_an_undecided_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, first) = merged_brain(dir.path());
    // Two more near duplicates: the next sets propose a merge.
    let other = |edit: &str| {
        (0..40)
            .map(|i| {
                if i == 9 {
                    edit.to_string()
                } else {
                    format!("other{i}y")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let at = start() + Duration::hours(2);
    let mut engine = engine_at(dir.path(), at);
    capture(&mut engine, &other("one"));
    let mut engine = engine_at(dir.path(), at + Duration::minutes(1));
    capture(&mut engine, &other("two"));
    let proposed = dream(dir.path(), at + Duration::minutes(2), false, 7)
        .dream
        .id;
    let rejected = dream(dir.path(), at + Duration::minutes(3), false, 7)
        .dream
        .id;
    assert!(proposal_rows(dir.path(), &proposed) > 0);
    let rejected_rows = proposal_rows(dir.path(), &rejected);
    assert!(rejected_rows > 0);
    let now = at + Duration::minutes(4);
    engine_at(dir.path(), now).dream_reject(&rejected).unwrap();

    // Decided at this very minute, pruned at the next run all the same.
    let run = dream(dir.path(), now, false, 0);
    let mut ids = run.pruned.ids.clone();
    ids.sort();
    let mut expected = vec![first.clone(), rejected.clone()];
    expected.sort();
    assert_eq!(ids, expected);
    assert_eq!(run.dream.report["pruned"]["keep_decided_days"], 0);
    assert_eq!(run.dream.report["pruned"]["sets"], 2);
    assert!(run.message.contains("2 decided sets"), "{}", run.message);
    assert_eq!(proposal_rows(dir.path(), &first), 0);
    assert_eq!(proposal_rows(dir.path(), &rejected), 0);
    assert!(
        proposal_rows(dir.path(), &proposed) > 0,
        "never an undecided set"
    );
    assert!(
        proposal_rows(dir.path(), &run.dream.id) > 0,
        "nor the new one"
    );

    let engine = engine_at(dir.path(), now);
    let shown = engine.dream_show(&proposed).unwrap();
    assert_eq!(shown.status, "proposed");
    assert!(shown.pruned.is_none());
    let shown = engine.dream_show(&rejected).unwrap();
    assert_eq!(shown.status, "rejected");
    let pruned = shown.pruned.unwrap();
    assert_eq!(pruned.proposals, rejected_rows as i64);
    assert_eq!(pruned.keep_decided_days, Some(0));
    assert!(
        pruned.note.contains("nothing was applied"),
        "{}",
        pruned.note
    );
    let mut engine = engine_at(dir.path(), now);
    match engine.dream_accept(&rejected, &[]) {
        Err(EngineError::Refused { message, .. }) => {
            assert!(message.contains("was rejected"), "{message}")
        }
        other => panic!("not refused: {other:?}"),
    }
}
