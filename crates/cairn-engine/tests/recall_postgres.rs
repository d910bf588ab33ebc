//! Recall conformance across the two backends (issue 15): one brain written on SQLite, copied
//! to a PostgreSQL database of the test's own by `cairn migrate`'s code, and every request
//! below answered by both — the same JSON, field for field — and checked for what it must
//! hold (filters, supersession heads, forgotten records, query safety, hybrid ordering).
//! Each test's database is dropped when it ends; without a PostgreSQL server (and without
//! `CAIRN_TEST_PG_URL`) the tests say SKIPPED and pass.

#[path = "../../cairn-cli/tests/pg_support.rs"]
mod pg_support;

use cairn_core::record::{MemoryType, TrustZone};
use cairn_embed::HashEmbedder;
use cairn_engine::{
    Context, Engine, ErrorKind, Mode, RecallAnswer, RecallRequest, RememberRequest,
};
use cairn_store::migrate::{Endpoint, migrate};
use cairn_store::postgres::PgTarget;
use pg_support::TestDb;
use std::path::Path;

/// The clock every engine of these tests reads (recency depends on it).
const NOW: &str = "2026-06-01T00:00:00Z";

fn context(dir: &Path, project: &str) -> Context {
    Context {
        project: project.into(),
        cwd: dir.to_path_buf(),
        actor: "test".into(),
        read_only: false,
        now: Some(NOW.parse().unwrap()),
    }
}

fn remember(engine: &mut Engine, request: RememberRequest) -> i64 {
    let outcome = engine.remember(&request).unwrap();
    outcome
        .id
        .unwrap_or_else(|| panic!("not stored: {outcome:?}"))
}

fn note(memory_type: MemoryType, scope: &str, body: &str) -> RememberRequest {
    let mut request = RememberRequest::new(memory_type, body);
    request.scope = Some(scope.into());
    request.allow_duplicate = true;
    request
}

/// What the brain holds, by name.
struct Fixture {
    canary: i64,
    canary_staging: i64,
    decision: i64,
    other_project: i64,
    personal: i64,
    replaced: i64,
    replacement: i64,
    forgotten: i64,
    secret: i64,
    turns: Vec<i64>,
}

/// A SQLite brain with records of every kind recall tells apart, then the same brain on a
/// fresh PostgreSQL database. `None` when no server answers (skipped).
struct Both {
    sqlite: Engine,
    postgres: Engine,
    fixture: Fixture,
    url: String,
    _db: TestDb,
    _dir: tempfile::TempDir,
}

fn both(embedded: bool) -> Option<Both> {
    let db = TestDb::new()?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("brain.db");
    let mut engine = Engine::open(&path, context(dir.path(), "p")).unwrap();
    if embedded {
        engine.set_embedder(Box::new(HashEmbedder::new(64)));
    }
    let canary = remember(
        &mut engine,
        note(
            MemoryType::Note,
            "deploy",
            "rollback the canary release when errors rise",
        ),
    );
    let canary_staging = remember(
        &mut engine,
        note(
            MemoryType::Note,
            "deploy:staging",
            "the staging canary release waits an hour",
        ),
    );
    let decision = remember(
        &mut engine,
        note(
            MemoryType::Decision,
            "deploy",
            "we decided the canary gets five percent of traffic",
        ),
    );
    let personal = {
        let mut request = note(
            MemoryType::Preference,
            "global",
            "I like canary builds at night",
        );
        request.personal = true;
        remember(&mut engine, request)
    };
    let replaced = remember(
        &mut engine,
        note(
            MemoryType::Fact,
            "infra",
            "the database pool holds 20 connections",
        ),
    );
    let replacement = {
        let mut request = note(
            MemoryType::Fact,
            "infra",
            "the database pool holds 50 connections",
        );
        request.supersedes = Some(replaced);
        remember(&mut engine, request)
    };
    let forgotten = remember(
        &mut engine,
        note(
            MemoryType::Note,
            "infra",
            "the old database pool dashboard lives on grafana",
        ),
    );
    engine.forget(forgotten, false).unwrap();
    let secret = {
        let mut request = note(
            MemoryType::Note,
            "deploy",
            "the canary token rotates weekly",
        );
        request.trust_zone = Some(TrustZone::PrivateSelf);
        request.sensitivity = Some(cairn_core::record::Sensitivity::DoNotExport);
        remember(&mut engine, request)
    };
    // A conversation: turns a minute apart (conversation context and windows read them).
    let mut turns = Vec::new();
    for (n, body) in [
        "Caroline: did you see the lighthouse painting?",
        "Melanie: yes, I finished it last Saturday!",
        "Caroline: it looks wonderful, what colours did you use?",
        "Melanie: mostly blue and a little orange for the lamp",
    ]
    .iter()
    .enumerate()
    {
        let mut request = note(MemoryType::Episode, "chat", body);
        request.at = Some(format!("2026-05-01T10:0{n}:00Z"));
        turns.push(remember(&mut engine, request));
    }
    // Many records of the other project, so BM25 statistics are not trivial.
    let mut other = Engine::open(&path, context(dir.path(), "q")).unwrap();
    if embedded {
        other.set_embedder(Box::new(HashEmbedder::new(64)));
    }
    let other_project = remember(
        &mut other,
        note(
            MemoryType::Note,
            "deploy",
            "the canary of project q deploys on fridays",
        ),
    );
    for n in 0..40 {
        remember(
            &mut other,
            note(
                MemoryType::Note,
                "misc",
                &format!("filler record {n} about release trains and rollback number {n}"),
            ),
        );
    }
    drop(other);
    drop(engine);
    migrate(
        &Endpoint::Sqlite(path.clone()),
        &Endpoint::Postgres(PgTarget::parse(&db.url).unwrap()),
        500,
        &mut |_| {},
    )
    .unwrap();
    let mut sqlite = Engine::open(&path, context(dir.path(), "p")).unwrap();
    let mut postgres =
        Engine::open_postgres(PgTarget::parse(&db.url).unwrap(), context(dir.path(), "p")).unwrap();
    if embedded {
        sqlite.set_embedder(Box::new(HashEmbedder::new(64)));
        postgres.set_embedder(Box::new(HashEmbedder::new(64)));
    }
    Some(Both {
        sqlite,
        postgres,
        fixture: Fixture {
            canary,
            canary_staging,
            decision,
            other_project,
            personal,
            replaced,
            replacement,
            forgotten,
            secret,
            turns,
        },
        url: db.url.clone(),
        _db: db,
        _dir: dir,
    })
}

impl Both {
    /// `request` answered by both backends: the same JSON, returned once.
    fn recall(&mut self, request: &RecallRequest) -> RecallAnswer {
        let mut request = request.clone();
        request.touch = false;
        let on_sqlite = self.sqlite.recall(&request).unwrap();
        let on_postgres = self.postgres.recall(&request).unwrap();
        assert_eq!(
            serde_json::to_value(&on_sqlite).unwrap(),
            serde_json::to_value(&on_postgres).unwrap(),
            "SQLite and PostgreSQL answer {:?} differently",
            request.query
        );
        on_sqlite
    }
}

fn ids(answer: &RecallAnswer) -> Vec<i64> {
    answer.results.iter().map(|r| r.id).collect()
}

fn lexical(query: &str) -> RecallRequest {
    let mut request = RecallRequest::new(query);
    request.mode = Mode::Lexical;
    request
}

#[test]
fn filters_answer_alike_on_both_backends() {
    let Some(mut both) = both(false) else { return };
    let f = &both.fixture;
    let (canary, staging, decision, personal, other, secret) = (
        f.canary,
        f.canary_staging,
        f.decision,
        f.personal,
        f.other_project,
        f.secret,
    );
    // This project and personal records; not project q's.
    let all = ids(&both.recall(&lexical("canary")));
    for id in [canary, staging, decision, personal, secret] {
        assert!(all.contains(&id), "{id} missing from {all:?}");
    }
    assert!(!all.contains(&other), "{all:?}");
    // Another project, asked for by name.
    let mut request = lexical("canary");
    request.project = Some("q".into());
    assert!(ids(&both.recall(&request)).contains(&other));
    // A scope: itself and its ancestors, not its children.
    let mut request = lexical("canary");
    request.scope = Some("deploy".into());
    let scoped = ids(&both.recall(&request));
    assert!(
        scoped.contains(&canary) && !scoped.contains(&staging),
        "{scoped:?}"
    );
    let mut request = lexical("canary");
    request.scope = Some("deploy:staging".into());
    let child = ids(&both.recall(&request));
    assert!(
        child.contains(&staging) && child.contains(&canary),
        "{child:?}"
    );
    // A type.
    let mut request = lexical("canary");
    request.types = vec![MemoryType::Decision];
    assert_eq!(ids(&both.recall(&request)), vec![decision]);
    // A trust zone: a do-not-export record is not shown to a collaborator.
    let mut request = lexical("canary");
    request.zone = Some(TrustZone::TrustedCollaborator);
    assert!(!ids(&both.recall(&request)).contains(&secret));
    // A time window.
    let mut request = lexical("canary");
    request.until = Some("2026-01-01T00:00:00Z".into());
    assert!(both.recall(&request).results.is_empty());
}

#[test]
fn supersession_heads_and_forgotten_records_answer_alike() {
    let Some(mut both) = both(false) else { return };
    let (replaced, replacement, forgotten) = (
        both.fixture.replaced,
        both.fixture.replacement,
        both.fixture.forgotten,
    );
    // The old fact answers as its successor, saying where it came from.
    let answer = both.recall(&lexical("database pool 20 connections"));
    assert!(ids(&answer).contains(&replacement), "{:?}", ids(&answer));
    assert!(!ids(&answer).contains(&replaced), "{:?}", ids(&answer));
    assert!(!ids(&answer).contains(&forgotten), "{:?}", ids(&answer));
    // --all shows retired versions as they are, the forgotten one included.
    let mut request = lexical("database pool");
    request.all = true;
    let all = ids(&both.recall(&request));
    assert!(
        all.contains(&replaced) && all.contains(&forgotten),
        "{all:?}"
    );
    // A replay at the moment of the writes.
    let mut request = lexical("database pool 20 connections");
    request.as_of = Some(NOW.into());
    assert!(!both.recall(&request).results.is_empty());
}

#[test]
fn hostile_empty_and_long_queries_answer_alike() {
    let Some(mut both) = both(false) else { return };
    for query in [
        "canary AND NOT rollback",
        "\"canary",
        "canary* OR ^release NEAR(a b) title:canary -staging {x} (y) :",
        "'; DROP TABLE memories; --",
        "",
        "   ",
        "the of and",
    ] {
        let answer = both.recall(&lexical(query));
        if query.trim().is_empty() {
            assert!(
                answer.results.is_empty() && answer.note.is_some(),
                "{query:?}"
            );
        }
    }
    let long = "canary release rollback lighthouse painting ".repeat(400);
    let answer = both.recall(&lexical(&long));
    assert!(!answer.results.is_empty());
}

#[test]
fn hybrid_recall_orders_alike_with_conversation_context() {
    let Some(mut both) = both(true) else { return };
    let turns = both.fixture.turns.clone();
    for query in [
        "when did Melanie finish the lighthouse painting",
        "canary rollback",
        "database pool size",
    ] {
        let mut request = RecallRequest::new(query);
        request.mode = Mode::Hybrid;
        let answer = both.recall(&request);
        assert!(answer.degraded.is_none(), "{answer:?}");
        assert!(answer.results.iter().any(|r| r.why.vector_rank.is_some()));
    }
    let answer = both.recall(&RecallRequest::new("what colours for the lamp"));
    assert!(ids(&answer).contains(&turns[3]), "{:?}", ids(&answer));
}

#[test]
fn a_postgres_engine_refuses_everything_but_recall_with_a_typed_error() {
    let Some(mut both) = both(false) else { return };
    let error = both
        .postgres
        .remember(&note(MemoryType::Note, "deploy", "written nowhere"))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("not available on a PostgreSQL store yet"),
        "{text}"
    );
    assert!(both.postgres.get(both.fixture.canary).is_err());
    assert!(both.postgres.store().is_err());
    // The password of the URL is never in the message.
    let with_password = both.url.replacen("://postgres@", "://postgres:hunter2@", 1);
    let engine = Engine::open_postgres(
        PgTarget::parse(&with_password).unwrap(),
        context(Path::new("."), "p"),
    )
    .unwrap();
    let text = engine.store().err().unwrap().to_string();
    assert!(
        text.contains("not available on a PostgreSQL store yet") && !text.contains("hunter2"),
        "{text}"
    );
    // A database without a brain is refused at open, by name and without the password.
    let empty = TestDb::new().unwrap();
    let error = Engine::open_postgres(
        PgTarget::parse(
            &empty
                .url
                .replacen("://postgres@", "://postgres:hunter2@", 1),
        )
        .unwrap(),
        context(Path::new("."), "p"),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        error.contains("holds no cairn brain") && !error.contains("hunter2"),
        "{error}"
    );
}
