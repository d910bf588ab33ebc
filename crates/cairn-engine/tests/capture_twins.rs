//! Near duplicates of captures (docs/design.md §4 step 4, automatic capture): a captured turn that
//! nearly repeats an earlier capture (MinHash Jaccard ≥ 0.9) updates it when longer and is a
//! no-op otherwise; an exact repeat is a no-op; anything else is a new episode. Checked on a real
//! brain crowded with records that share the turns' words, for turns handed over one at a time
//! (`capture_turn`) and for turns captured together from one transcript, where the twin was
//! stored by the same transaction. And a backlog longer than one capture takes is taken over
//! several, each turn once; and when every word of a turn is in more records than a capture
//! reads, the full-text index finds the twin.

mod common;

use common::{engine_at, test_now};

use cairn_core::minhash::signature;
use cairn_core::record::{MemoryType, Status};
use cairn_engine::{CaptureReport, Engine, ListRequest, MAX_CAPTURE_TURNS, RememberRequest};
use chrono::{TimeZone, Utc};

/// The words of the corpus: the turns below are made of them, and so is the crowd.
const WORDS: [&str; 24] = [
    "deploy",
    "staging",
    "postgres",
    "vacuum",
    "lockfile",
    "pnpm",
    "runner",
    "cache",
    "docker",
    "image",
    "rollback",
    "canary",
    "migration",
    "index",
    "replica",
    "backup",
    "cron",
    "queue",
    "worker",
    "retry",
    "timeout",
    "gateway",
    "schema",
    "tenant",
];

fn brain(crowd: usize) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut engine = engine_at(dir.path(), test_now());
    // Records sharing the turns' words, so every word of a turn is common in the brain.
    let mut state = 0x5eed_u64;
    for index in 0..crowd {
        let body: Vec<&str> = (0..12)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                WORDS[(state >> 33) as usize % WORDS.len()]
            })
            .collect();
        let mut request =
            RememberRequest::new(MemoryType::Note, format!("{} ({index})", body.join(" ")));
        request.allow_duplicate = true;
        engine.remember(&request).expect("stored");
    }
    (dir, engine)
}

fn episodes(engine: &Engine) -> Vec<String> {
    engine
        .list(&ListRequest {
            types: vec![MemoryType::Episode],
            status: Some(Status::Active),
            limit: 1000,
            ..ListRequest::default()
        })
        .expect("listed")
        .into_iter()
        .map(|m| m.body)
        .collect()
}

const USER: &str = "The staging deploy failed on the pnpm lockfile again; what do we do with the runner cache and the docker image before the canary rollback?";
const ANSWER: &str = "Pin pnpm in the runner image, clear the docker cache on the staging runner, rerun the migration against the replica, and only then start the canary; a rollback restores the backup taken by the nightly cron before the schema change, so check that the backup exists first.";
const MORE: &str = " Watch the retry queue.";

fn turn(engine: &mut Engine, user: &str, answer: &str) -> CaptureReport {
    engine.capture_turn("s", user, answer).expect("captured")
}

/// The episode body a turn is stored as (`Turn::episode_body`).
fn body(user: &str, answer: &str) -> String {
    format!("User: {user}\nAssistant: {answer}")
}

fn jaccard(a: &str, b: &str) -> f64 {
    signature(a).jaccard(&signature(b))
}

#[test]
fn a_longer_repeat_replaces_a_capture_and_a_shorter_one_changes_nothing() {
    let longer = format!("{ANSWER}{MORE}");
    assert!(jaccard(&body(USER, ANSWER), &body(USER, &longer)) >= 0.9);
    for crowd in [0, 400] {
        let (_dir, mut engine) = brain(crowd);
        let first = turn(&mut engine, USER, ANSWER);
        assert_eq!(first.episodes_added, 1, "crowd {crowd}");
        // The same turn with a sentence more: Jaccard ≥ 0.9, longer — the capture is updated.
        let report = turn(&mut engine, USER, &longer);
        assert_eq!(
            (report.episodes_added, report.episodes_merged),
            (0, 1),
            "crowd {crowd}"
        );
        let stored = episodes(&engine);
        assert_eq!(stored.len(), 1, "crowd {crowd}: {stored:#?}");
        assert!(stored[0].ends_with(MORE.trim()), "the longer version won");
        // The first version again: near-identical and shorter — nothing changes.
        let report = turn(&mut engine, USER, ANSWER);
        assert_eq!((report.episodes_added, report.episodes_merged), (0, 1));
        // An exact repeat of the survivor: nothing changes.
        let report = turn(&mut engine, USER, &longer);
        assert_eq!((report.episodes_added, report.episodes_merged), (0, 1));
        assert_eq!(episodes(&engine), stored, "crowd {crowd}");
        // Another turn sharing many of the words is a new episode.
        let (user, answer) = (
            "Why did the canary deploy on staging time out at the gateway?",
            "The worker queue was full: the retry timeout on the gateway was shorter than the migration of the tenant schema.",
        );
        assert!(jaccard(&body(USER, &longer), &body(user, answer)) < 0.9);
        let report = turn(&mut engine, user, answer);
        assert_eq!(report.episodes_added, 1, "crowd {crowd}");
        assert_eq!(episodes(&engine).len(), 2);
    }
}

#[test]
fn twins_inside_one_transcript_capture_are_merged_too() {
    let (dir, mut engine) = brain(400);
    // Words the brain has never seen, so only the capture's own transaction knows them.
    let fresh = "zorblax quindle frambozen";
    let line = |role: &str, text: &str| {
        let message = if role == "user" {
            serde_json::json!({"type": "user", "message": {"role": "user", "content": text}})
        } else {
            serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
        };
        format!("{message}\n")
    };
    let answer_fresh = format!("{ANSWER} Then {fresh} as usual.");
    let answer_more = format!("{answer_fresh}{MORE}");
    assert!(jaccard(&body(USER, &answer_fresh), &body(USER, &answer_more)) >= 0.9);
    let transcript = [
        line("user", USER),
        line("assistant", &answer_fresh),
        line(
            "user",
            "Something else entirely: which port does the cache use?",
        ),
        line("assistant", "Port 6380 on the staging cache."),
        line("user", USER),
        line("assistant", &answer_more),
    ]
    .concat();
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, transcript).unwrap();
    let report = engine.capture_transcript("t", &path).expect("captured");
    assert_eq!(report.turns, 3);
    assert_eq!(
        (report.episodes_added, report.episodes_merged),
        (2, 1),
        "{report:?}"
    );
    let stored = episodes(&engine);
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert!(
        stored
            .iter()
            .any(|b| b.contains(fresh) && b.ends_with(MORE.trim())),
        "the longer version won: {stored:#?}"
    );
}

#[test]
fn a_long_backlog_is_captured_over_several_captures_each_turn_once() {
    let (dir, mut engine) = brain(0);
    let turns = MAX_CAPTURE_TURNS + 50;
    let transcript: String = (0..turns)
        .map(|i| {
            let user = serde_json::json!({"type": "user", "message": {"role": "user", "content": format!("question {i} about alpha{i}")}});
            let answer = serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": format!("answer {i} is beta{i}")}]}});
            format!("{user}\n{answer}\n")
        })
        .collect();
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, &transcript).unwrap();
    let first = engine.capture_transcript("long", &path).expect("captured");
    assert_eq!(first.episodes_added, MAX_CAPTURE_TURNS);
    assert!(first.offset_after < transcript.len() as u64);
    assert!(first.more, "the first capture says turns are left");
    let second = engine.capture_transcript("long", &path).expect("captured");
    assert_eq!(second.offset_before, first.offset_after);
    assert_eq!(second.episodes_added, 50);
    assert_eq!(second.offset_after, transcript.len() as u64);
    assert!(!second.more);
    let third = engine.capture_transcript("long", &path).expect("captured");
    assert_eq!(third.turns, 0);
    assert_eq!(episodes(&engine).len(), turns);
}

/// Every word of the turn is in more than 1,000 records (more than a capture reads per word):
/// the full-text index answers, and still finds the twin.
#[test]
fn twins_are_found_when_every_word_is_in_over_a_thousand_records() {
    let (_dir, mut engine) = brain(0);
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let words = "alpha beta gamma delta epsilon zeta";
    engine
        .store_mut()
        .unwrap()
        .write(|tx| {
            for index in 0..1_100 {
                let request =
                    RememberRequest::new(MemoryType::Note, format!("{words} crowd {index}"));
                let prepared =
                    cairn_engine::remember::prepare(&request, Some("p".into()), now, None)
                        .expect("valid");
                tx.insert_memory(&prepared.memory, prepared.title_norm.as_deref())?;
            }
            Ok::<_, cairn_store::StoreError>(())
        })
        .expect("seeded");
    let user = format!("{words} {words}");
    let answer = format!("{words} zeta epsilon delta gamma beta alpha {words}");
    let longer = format!("{answer} alpha");
    assert!(jaccard(&body(&user, &answer), &body(&user, &longer)) >= 0.9);
    assert_eq!(turn(&mut engine, &user, &answer).episodes_added, 1);
    let report = turn(&mut engine, &user, &longer);
    assert_eq!((report.episodes_added, report.episodes_merged), (0, 1));
    let stored = episodes(&engine);
    assert_eq!(stored, vec![body(&user, &longer)]);
}
