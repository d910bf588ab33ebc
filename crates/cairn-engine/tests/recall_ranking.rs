//! The bounded final score (docs/design.md §5.3, principle 2): what a record is breaks ties between
//! matches and never overrides what matched; scores are normalized to the top result and say
//! why; the same brain and query give the same answer byte for byte (principle 5).

use cairn_core::record::MemoryType;
use cairn_core::score::{RECENCY_FLOOR, RELEVANCE_MIN, STAKES_MAX, STAKES_MIN};
use cairn_engine::{Context, Engine, Mode, RecallAnswer, RecallRequest, RememberRequest};
use chrono::{DateTime, TimeZone, Utc};
use std::path::Path;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

fn open_brain(dir: &Path) -> Engine {
    Engine::open(
        &dir.join("brain.db"),
        Context {
            project: "p".into(),
            cwd: dir.to_path_buf(),
            actor: "test".into(),
            read_only: false,
            now: Some(now()),
        },
    )
    .expect("the brain opens")
}

/// Stores one record (never refused as a near duplicate) and returns its id.
fn store(engine: &mut Engine, memory_type: MemoryType, body: &str, at: Option<&str>) -> i64 {
    let mut request = RememberRequest::new(memory_type, body);
    request.at = at.map(str::to_string);
    request.allow_duplicate = true;
    let outcome = engine.remember(&request).expect("stored");
    outcome
        .id
        .unwrap_or_else(|| panic!("not stored: {outcome:?}"))
}

fn recall(engine: &mut Engine, query: &str, floor: Option<f64>) -> RecallAnswer {
    let request = RecallRequest {
        limit: 100,
        touch: false,
        mode: Mode::Lexical,
        floor,
        ..RecallRequest::new(query)
    };
    engine.recall(&request).expect("recall answers")
}

fn ids(answer: &RecallAnswer) -> Vec<i64> {
    answer.results.iter().map(|r| r.id).collect()
}

#[test]
fn an_equal_match_ranks_the_decision_above_the_note() {
    // Both insertion orders: the tie between equal matches is broken by what the record is,
    // not by which came first.
    for note_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = open_brain(dir.path());
        let note_body = "The ledger service keeps its journal in postgres, cluster amber.";
        let decision_body = "The ledger service keeps its journal in postgres, cluster coral.";
        let (note, decision) = if note_first {
            let note = store(&mut engine, MemoryType::Note, note_body, None);
            (
                note,
                store(&mut engine, MemoryType::Decision, decision_body, None),
            )
        } else {
            let decision = store(&mut engine, MemoryType::Decision, decision_body, None);
            (
                store(&mut engine, MemoryType::Note, note_body, None),
                decision,
            )
        };
        let answer = recall(&mut engine, "ledger journal postgres", None);
        assert_eq!(ids(&answer), [decision, note], "note first: {note_first}");
        let (top, second) = (&answer.results[0], &answer.results[1]);
        assert!(top.why.stakes > second.why.stakes, "{answer:?}");
        assert_eq!((top.why.recency, second.why.recency), (1.0, 1.0));
    }
}

#[test]
fn a_much_better_old_match_beats_a_weak_recent_one() {
    // One query word, "postgres". The old record has it in its title and twice in a short body;
    // thirty middling records have it once in a medium body; the recent record has it once in
    // a very long body, so it matches far worse than everything else (its relevance is far
    // below the top's). Recency favours the recent record; it must not lift it over the old one.
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path());
    let two_years_ago = Some("2024-11-30");
    let mut request = RememberRequest::new(
        MemoryType::Fact,
        "Postgres holds the ledger; postgres replicas serve reads.",
    );
    request.title = Some("Postgres ledger".into());
    request.at = two_years_ago.map(str::to_string);
    let strong = engine.remember(&request).unwrap().id.unwrap();
    let words = ["amber", "basil", "cedar", "dune", "ember", "fern"];
    for n in 0..30 {
        let body = format!(
            "Middling note {n} mentions postgres among {} {} {} {} things.",
            words[n % 6],
            words[(n / 6) % 6],
            words[(n + 1) % 6],
            words[(n + 3) % 6]
        );
        store(&mut engine, MemoryType::Fact, &body, two_years_ago);
    }
    // Records that do not match keep every matching word's document frequency below half.
    for n in 0..40 {
        let body = format!("Unrelated record {n} about {} gardens.", words[n % 6]);
        store(&mut engine, MemoryType::Fact, &body, two_years_ago);
    }
    let padding: Vec<String> = (0..150).map(|n| format!("word{n}")).collect();
    let weak_body = format!(
        "{} and once postgres {}",
        padding[..75].join(" "),
        padding[75..].join(" ")
    );
    let weak = store(&mut engine, MemoryType::Fact, &weak_body, None);

    let answer = recall(&mut engine, "postgres", Some(0.0));
    assert_eq!(answer.results.len(), 32, "{:?}", ids(&answer));
    let position = |id: i64| answer.results.iter().position(|r| r.id == id).unwrap();
    let (strong_result, weak_result) = (
        &answer.results[position(strong)],
        &answer.results[position(weak)],
    );
    assert_eq!(strong_result.why.lexical_rank, Some(1));
    assert_eq!(weak_result.why.lexical_rank, Some(32));
    assert!(
        weak_result.why.recency > strong_result.why.recency,
        "the boost is there"
    );
    assert_eq!(position(strong), 0, "{:?}", ids(&answer));
    assert!(position(weak) > position(strong));
}

/// docs/design.md §1.2 with one candidate source (lexical-only): a match more than twice as
/// strong (BM25 1.57 against 0.71 here) at rank 1 must not lose to the weak match at rank 2
/// through recency. RRF alone keeps only ranks (relevance 1.0 vs 0.99), so a single source's
/// relevance comes from its own strength (`score::relevances`).
#[test]
fn a_much_better_match_at_the_next_rank_is_not_overridden_by_recency() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path());
    let mut request = RememberRequest::new(
        MemoryType::Fact,
        "Postgres holds the ledger; postgres replicas serve reads.",
    );
    request.title = Some("Postgres ledger".into());
    request.at = Some("2024-11-30".into());
    let strong = engine.remember(&request).unwrap().id.unwrap();
    for n in 0..6 {
        store(
            &mut engine,
            MemoryType::Fact,
            &format!("Unrelated record {n} about gardens."),
            None,
        );
    }
    let weak = store(
        &mut engine,
        MemoryType::Fact,
        "The staging stack runs many services, caches, queues, workers and, somewhere, postgres.",
        None,
    );
    let answer = recall(&mut engine, "postgres", None);
    assert_eq!(ids(&answer), [strong, weak], "{answer:#?}");
}

#[test]
fn scores_are_normalized_to_the_top_and_explain_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path());
    let records: [(MemoryType, &str, Option<&str>); 8] = [
        (
            MemoryType::Decision,
            "We deploy staging before production, always.",
            Some("2025-06-01"),
        ),
        (
            MemoryType::Gotcha,
            "Staging deploys fail when the cache volume is full.",
            Some("2026-10-01"),
        ),
        (
            MemoryType::Note,
            "Deploy day is Tuesday; staging freezes on Monday.",
            None,
        ),
        (
            MemoryType::State,
            "Staging is mid-deploy right now.",
            Some("2026-11-20"),
        ),
        (
            MemoryType::Infra,
            "The staging host is stg-01, deploys via ssh.",
            Some("2026-01-15"),
        ),
        (
            MemoryType::Episode,
            "Talked about the staging deploy pipeline for an hour.",
            Some("2026-11-29"),
        ),
        (
            MemoryType::Preference,
            "Announce every production deploy in the channel.",
            None,
        ),
        (MemoryType::Fact, "Lunch is at noon.", None),
    ];
    for (memory_type, body, at) in records {
        store(&mut engine, memory_type, body, at);
    }
    for mode in [Mode::Lexical, Mode::Hybrid] {
        let request = RecallRequest {
            limit: 20,
            touch: false,
            mode,
            floor: Some(0.0),
            ..RecallRequest::new("staging deploy")
        };
        let answer = engine.recall(&request).unwrap();
        let expect_degraded = (mode != Mode::Lexical).then(|| "lexical-only".to_string());
        assert_eq!(answer.degraded, expect_degraded, "{mode:?}");
        assert_eq!(answer.results.len(), 7, "everything but lunch matches");
        assert_eq!(answer.results[0].score_norm, 1.0);
        let mut lexical_ranks = Vec::new();
        for pair in answer.results.windows(2) {
            assert!(
                pair[0].score >= pair[1].score,
                "sorted by score: {answer:#?}"
            );
        }
        for result in &answer.results {
            assert!(
                result.score_norm > 0.0 && result.score_norm <= 1.0,
                "score_norm {} of #{}",
                result.score_norm,
                result.id
            );
            let why = &result.why;
            lexical_ranks.push(why.lexical_rank.expect("every result matched lexically"));
            assert_eq!(why.vector_rank, None);
            assert!((RELEVANCE_MIN..=1.0).contains(&why.relevance), "{why:?}");
            assert!((RECENCY_FLOOR..=1.0).contains(&why.recency), "{why:?}");
            assert!((STAKES_MIN..=STAKES_MAX).contains(&why.stakes), "{why:?}");
        }
        lexical_ranks.sort();
        assert_eq!(lexical_ranks, (1..=7).collect::<Vec<u32>>());
    }
}

/// A small brain with ties, ages, types and importance to make ordering non-trivial.
fn build_corpus(engine: &mut Engine) {
    let bodies: [(MemoryType, &str, Option<&str>, Option<u8>); 12] = [
        (
            MemoryType::Decision,
            "Postgres over MySQL for the ledger: row locks.",
            Some("2025-02-01"),
            Some(5),
        ),
        (
            MemoryType::Note,
            "The ledger nightly job reconciles postgres totals.",
            None,
            None,
        ),
        (
            MemoryType::Note,
            "The ledger nightly job reconciles redis totals.",
            None,
            None,
        ),
        (
            MemoryType::Fact,
            "Redis caches ledger balances for five minutes.",
            Some("2026-03-03"),
            None,
        ),
        (
            MemoryType::Gotcha,
            "Postgres vacuum stalls the ledger on Sundays.",
            Some("2026-09-09"),
            Some(4),
        ),
        (
            MemoryType::Procedure,
            "To rotate the ledger keys, run rotate.sh on the vault host.",
            None,
            Some(2),
        ),
        (
            MemoryType::State,
            "The ledger replica is catching up.",
            Some("2026-11-29"),
            None,
        ),
        (
            MemoryType::Episode,
            "We argued about postgres versus redis for an hour.",
            Some("2026-11-01"),
            None,
        ),
        (
            MemoryType::Infra,
            "Postgres primary: pg-01; replica: pg-02.",
            Some("2026-06-06"),
            None,
        ),
        (
            MemoryType::Incident,
            "Ledger outage: postgres disk full on pg-01.",
            Some("2025-12-24"),
            Some(5),
        ),
        (
            MemoryType::Note,
            "Cache keys are namespaced by tenant.",
            None,
            Some(1),
        ),
        (
            MemoryType::Preference,
            "Explain postgres query plans before changing indexes.",
            None,
            None,
        ),
    ];
    for (memory_type, body, at, importance) in bodies {
        let mut request = RememberRequest::new(memory_type, body);
        request.at = at.map(str::to_string);
        request.importance = importance;
        request.allow_duplicate = true;
        assert!(engine.remember(&request).unwrap().id.is_some());
    }
}

const QUERIES: [&str; 6] = [
    "postgres ledger",
    "redis",
    "ledger nightly totals",
    "what did we decide about postgres?",
    "pg-01 disk",
    "cache",
];

fn answers_json(engine: &mut Engine) -> Vec<String> {
    QUERIES
        .iter()
        .map(|query| {
            let request = RecallRequest {
                limit: 50,
                touch: false,
                ..RecallRequest::new(*query)
            };
            serde_json::to_string(&engine.recall(&request).unwrap()).unwrap()
        })
        .collect()
}

#[test]
fn identical_brains_answer_byte_for_byte_the_same() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut a, mut b) = (open_brain(dir_a.path()), open_brain(dir_b.path()));
    build_corpus(&mut a);
    build_corpus(&mut b);
    let first = answers_json(&mut a);
    assert!(
        first.iter().all(|json| json.contains("\"results\":[{")),
        "{first:#?}"
    );
    assert_eq!(first, answers_json(&mut b));
    assert_eq!(first, answers_json(&mut a), "asking twice changes nothing");
}

#[test]
fn insertion_order_does_not_change_the_answer() {
    // Brain B holds the same records with the same ids as brain A, inserted newest first
    // (an import of A's export in reverse order keeps every id).
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = open_brain(dir_a.path());
    build_corpus(&mut a);
    let mut export = Vec::new();
    a.export_jsonl(&mut export).unwrap();
    let mut lines: Vec<&str> = std::str::from_utf8(&export)
        .unwrap()
        .lines()
        .filter(|line| line.contains("\"kind\":\"memory\""))
        .collect();
    assert_eq!(lines.len(), 12);
    lines.reverse();
    let reversed = lines.join("\n");
    let mut b = open_brain(dir_b.path());
    let report = b
        .import_jsonl(&mut reversed.as_bytes(), &Default::default())
        .unwrap();
    let placed: Vec<Option<i64>> = report.lines.iter().map(|line| line.id).collect();
    assert_eq!(
        placed,
        (1..=12).rev().map(Some).collect::<Vec<_>>(),
        "{report:?}"
    );
    assert_eq!(answers_json(&mut a), answers_json(&mut b));
}

/// Stores a conversation turn at `at`, in `scope`.
fn turn(engine: &mut Engine, body: &str, at: &str, scope: Option<&str>) -> i64 {
    let mut request = RememberRequest::new(MemoryType::Episode, body);
    request.at = Some(at.to_string());
    request.scope = scope.map(str::to_string);
    request.allow_duplicate = true;
    engine
        .remember(&request)
        .expect("stored")
        .id
        .expect("an id")
}

/// Conversation context on the lexical side: a reply that shares no word with the query is
/// found through the question right before it, below the question itself; a turn of another
/// conversation (an hour later, or another scope) and a non-episode lend nothing.
#[test]
fn a_reply_is_found_through_the_question_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path());
    let question = turn(
        &mut engine,
        "Melanie: Did you go to the pottery workshop?",
        "2026-11-01T10:00:00Z",
        None,
    );
    let reply = turn(
        &mut engine,
        "Caroline: Yes, last Saturday!",
        "2026-11-01T10:00:05Z",
        None,
    );
    let later = turn(
        &mut engine,
        "Caroline: Anyway, see you.",
        "2026-11-01T11:30:00Z",
        None,
    );
    let elsewhere = turn(
        &mut engine,
        "Caroline: Sure thing.",
        "2026-11-01T10:00:06Z",
        Some("other"),
    );
    store(
        &mut engine,
        MemoryType::Note,
        "Kiln temperature notes.",
        None,
    );
    let answer = recall(&mut engine, "pottery workshop", Some(0.0));
    assert_eq!(ids(&answer), [question, reply], "{answer:#?}");
    assert!(!ids(&answer).contains(&later) && !ids(&answer).contains(&elsewhere));
    // The question keeps its own, stronger match: the reply scores a fraction of it.
    assert!(answer.results[1].score < answer.results[0].score);

    // Off: only what matched.
    let mut config = engine.semantic_config().clone();
    config.lexical_context_before = 0.0;
    config.lexical_context_after = 0.0;
    engine.set_semantic_config(config);
    assert_eq!(
        ids(&recall(&mut engine, "pottery workshop", Some(0.0))),
        [question]
    );
}

/// A query that names a speaker prefers that speaker's turns among equal matches, and says so.
#[test]
fn a_named_speaker_breaks_a_tie_between_equal_turns() {
    for caroline_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = open_brain(dir.path());
        // Each turn names both, so BM25 cannot tell them apart.
        let stored = |engine: &mut Engine, who: &str, at: &str| {
            let other = if who == "Caroline" {
                "Melanie"
            } else {
                "Caroline"
            };
            turn(
                engine,
                &format!("{who}: {other}, the adoption agency called back."),
                at,
                None,
            )
        };
        let (caroline, melanie) = if caroline_first {
            let c = stored(&mut engine, "Caroline", "2026-11-01T10:00:00Z");
            (c, stored(&mut engine, "Melanie", "2026-11-03T10:00:00Z"))
        } else {
            let m = stored(&mut engine, "Melanie", "2026-11-01T10:00:00Z");
            (stored(&mut engine, "Caroline", "2026-11-03T10:00:00Z"), m)
        };
        let answer = recall(
            &mut engine,
            "What did Caroline hear from the adoption agency?",
            None,
        );
        assert_eq!(ids(&answer), [caroline, melanie], "{answer:#?}");
        assert_eq!(answer.results[0].why.speaker.as_deref(), Some("Caroline"));
        assert_eq!(answer.results[1].why.speaker, None);
    }
}
