//! `Engine::has_turns_to_extract` (what the session-end hook asks before it starts a
//! maintenance run) answers what reading the session's next turn answers: on sessions with no
//! turns, with pending turns, extracted, extracted and then captured again, and with a pending
//! turn forgotten. The store's newest-first probe is checked against the oldest-first read of
//! `session_turns` at every progress mark.

use cairn_engine::{Context, Engine, ExtractOptions, ExtractTarget};
use std::path::Path;

fn open(dir: &Path) -> Engine {
    let mut context = Context::for_directory(dir);
    context.project = "p".into();
    context.now = Some("2026-12-01T00:00:00Z".parse().unwrap());
    Engine::open(&dir.join("brain.db"), context).unwrap()
}

/// Captures one turn the salience rules keep (a path and a number in it); its episode id.
fn turn(engine: &mut Engine, session: &str, n: usize) -> i64 {
    let report = engine
        .capture_turn(
            session,
            &format!("Why does the build fail in src/module_{n}.rs at line {n}?"),
            &format!("The import of crate item_{n} was removed; restore it and run cargo build."),
        )
        .unwrap();
    assert_eq!(report.episodes_added, 1, "turn {n} of {session} was stored");
    newest_id(engine)
}

fn newest_id(engine: &Engine) -> i64 {
    engine
        .store()
        .unwrap()
        .reader()
        .session_turns("a", 0, usize::MAX >> 1)
        .unwrap()
        .into_iter()
        .chain(
            engine
                .store()
                .unwrap()
                .reader()
                .session_turns("b", 0, usize::MAX >> 1)
                .unwrap(),
        )
        .map(|(id, _)| id)
        .max()
        .unwrap_or(0)
}

fn extract(engine: &mut Engine, session: &str) {
    engine
        .extract(&ExtractOptions {
            session: Some(session.to_string()),
            llm: None,
            target: ExtractTarget::Inbox,
            max_calls: 10,
        })
        .unwrap();
}

/// The answer read the slow way: the session's first turn after its progress mark.
fn next_turn_exists(engine: &Engine, session: &str) -> bool {
    let reader = engine.store().unwrap().reader();
    let done: i64 = reader
        .meta(&format!("extract.done.{session}"))
        .unwrap()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    !reader.session_turns(session, done, 1).unwrap().is_empty()
}

/// Checks the engine's answer for each session, against the expectation and the slow read,
/// and the store's probe against the slow read at every mark from 0 past the newest id.
fn check(engine: &Engine, expect: &[(&str, bool)]) {
    for (session, pending) in expect {
        assert_eq!(
            engine.has_turns_to_extract(session).unwrap(),
            *pending,
            "session {session}"
        );
        assert_eq!(
            next_turn_exists(engine, session),
            *pending,
            "slow read of {session}"
        );
    }
    let reader = engine.store().unwrap().reader();
    // past the newest turn, and past the three notes a brain with no turn holds
    let top = newest_id(engine).max(3) + 1;
    for (session, _) in expect {
        for after in 0..=top {
            assert_eq!(
                reader.has_session_turns_after(session, after).unwrap(),
                !reader.session_turns(session, after, 1).unwrap().is_empty(),
                "session {session} after {after}"
            );
        }
    }
}

#[test]
fn has_turns_to_extract_answers_as_the_session_turns_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(dir.path());
    // a brain with other records around the sessions' turns
    for n in 0..3 {
        let mut request = cairn_engine::RememberRequest::new(
            cairn_core::record::MemoryType::Note,
            format!("note {n} about the deploy script on port {}", 8000 + n),
        );
        request.allow_duplicate = true;
        engine.remember(&request).unwrap();
    }
    check(&engine, &[("a", false), ("b", false), ("never", false)]);

    for n in 0..3 {
        turn(&mut engine, "a", n);
    }
    check(&engine, &[("a", true), ("b", false), ("never", false)]);

    extract(&mut engine, "a");
    check(&engine, &[("a", false), ("b", false)]);

    // another session's turns come after a's: a stays extracted
    for n in 10..13 {
        turn(&mut engine, "b", n);
    }
    check(&engine, &[("a", false), ("b", true)]);

    // half-extracted: a captures again after its extraction
    let late = turn(&mut engine, "a", 20);
    turn(&mut engine, "b", 21);
    check(&engine, &[("a", true), ("b", true)]);

    // a's only pending turn forgotten: nothing active waits
    engine.forget(late, false).unwrap();
    check(&engine, &[("a", false), ("b", true)]);

    extract(&mut engine, "b");
    turn(&mut engine, "a", 30);
    check(&engine, &[("a", true), ("b", false)]);
    extract(&mut engine, "a");
    check(&engine, &[("a", false), ("b", false), ("never", false)]);
}
