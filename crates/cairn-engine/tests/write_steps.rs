//! The write path's store-free steps (docs/design.md §3–§4: sanitize, validate, defaults, stamp), one
//! data-driven `check` per rule over `cairn_engine::remember::prepare`, plus the two rules that
//! need the outside world through `Engine::remember`: commit stamping against a real git
//! repository, and title identity against a real brain.

use cairn_core::record::{Confidence, MemoryType, Status, Trust};
use cairn_engine::remember::{Prepared, Review, clean_tags, prepare};
use cairn_engine::{Context, Engine, EngineError, RememberRequest, RememberStatus};
use chrono::{DateTime, TimeZone, Utc};
use std::path::Path;
use std::process::Command;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

fn fact(body: &str) -> RememberRequest {
    RememberRequest::new(MemoryType::Fact, body)
}

/// `prepare` as `Engine::remember` calls it, with a commit on hand for the stamped types.
fn prepared(request: &RememberRequest) -> Prepared {
    prepare(request, Some("p".into()), now(), Some(COMMIT.into()))
        .unwrap_or_else(|error| panic!("{request:?} was refused: {error}"))
}

fn refused(request: &RememberRequest) -> EngineError {
    match prepare(request, Some("p".into()), now(), Some(COMMIT.into())) {
        Ok(prepared) => panic!("{request:?} was accepted: {:?}", prepared.memory),
        Err(error) => error,
    }
}

#[test]
fn each_type_gets_its_review_date_and_commit_stamp() {
    fn check(memory_type: MemoryType, review_at: Option<&str>, stamped: bool) {
        let prepared = prepared(&RememberRequest::new(memory_type, "The body."));
        let memory = &prepared.memory;
        assert_eq!(memory.review_at.as_deref(), review_at, "{memory_type}");
        assert_eq!(memory.commit.is_some(), stamped, "{memory_type}");
        assert_eq!(memory.expires_at, None, "{memory_type}");
        let warned = prepared
            .warnings
            .iter()
            .any(|w| w.starts_with("review on "));
        assert_eq!(
            warned,
            review_at.is_some(),
            "{memory_type}: {:?}",
            prepared.warnings
        );
    }
    use MemoryType::*;
    let in_30_days = Some("2026-12-30T12:00:00Z");
    check(Policy, None, false);
    check(Constraint, None, false);
    check(Preference, None, false);
    check(Decision, None, false);
    check(Incident, None, true);
    check(Fact, None, false);
    check(Procedure, None, false);
    check(Gotcha, None, true);
    check(Infra, in_30_days, false);
    check(Access, in_30_days, false);
    check(Note, None, false);
    check(Episode, None, false);
    check(State, None, true);
    assert_eq!(MemoryType::ALL.len(), 13, "a new type needs a line above");
}

#[test]
fn review_dates_can_be_set_or_refused_and_count_from_when_it_happened() {
    fn check(memory_type: MemoryType, review: Review, at: Option<&str>, expect: Option<&str>) {
        let mut request = RememberRequest::new(memory_type, "The gateway is at 10.0.0.1.");
        request.review = review.clone();
        request.at = at.map(str::to_string);
        let memory = prepared(&request).memory;
        assert_eq!(
            memory.review_at.as_deref(),
            expect,
            "{memory_type} {review:?} {at:?}"
        );
    }
    use MemoryType::*;
    check(Infra, Review::Never, None, None);
    check(
        Access,
        Review::At("2027-03-01".into()),
        None,
        Some("2027-03-01T00:00:00Z"),
    );
    check(
        Fact,
        Review::At("2027-03-01T08:30:00+02:00".into()),
        None,
        Some("2027-03-01T06:30:00Z"),
    );
    check(
        Infra,
        Review::Default,
        Some("2026-01-01"),
        Some("2026-01-31T00:00:00Z"),
    );
    check(Fact, Review::Default, Some("2026-01-01"), None);
}

#[test]
fn the_review_warning_names_the_date_and_the_default() {
    let prepared = prepared(&RememberRequest::new(MemoryType::Infra, "db is db01"));
    assert_eq!(
        prepared.warnings,
        ["review on 2026-12-30 (default for infra, 30d)"]
    );
}

#[test]
fn commit_is_stamped_only_for_gotcha_state_and_incident_from_the_real_tree() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| -> String {
        let output = Command::new("git")
            .current_dir(dir.path())
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "empty"]);
    let head = git(&["rev-parse", "HEAD"]);
    let mut engine = open_brain(dir.path(), dir.path());
    for memory_type in MemoryType::ALL {
        let request = RememberRequest::new(
            *memory_type,
            format!("A claim recorded as a {memory_type} against this tree."),
        );
        let outcome = engine.remember(&request).unwrap();
        assert_eq!(outcome.status, RememberStatus::Added, "{outcome:?}");
        let stored = engine.get(outcome.id.unwrap()).unwrap();
        let expect = memory_type.stamped_with_commit().then_some(head.as_str());
        assert_eq!(stored.commit.as_deref(), expect, "{memory_type}");
    }
    assert!(
        MemoryType::ALL
            .iter()
            .filter(|t| t.stamped_with_commit())
            .eq([MemoryType::Incident, MemoryType::Gotcha, MemoryType::State].iter())
    );
}

#[test]
fn outside_a_repository_nothing_is_stamped_and_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path(), dir.path());
    let outcome = engine
        .remember(&RememberRequest::new(
            MemoryType::Gotcha,
            "The build cache lies.",
        ))
        .unwrap();
    assert_eq!(engine.get(outcome.id.unwrap()).unwrap().commit, None);
}

#[test]
fn confirmed_needs_a_source_or_is_stored_as_reported() {
    fn check(
        confidence: Option<Confidence>,
        source: Option<&str>,
        expect: Confidence,
        warned: bool,
    ) {
        let mut request = fact("Port 5432 is Postgres.");
        request.confidence = confidence;
        request.source = source.map(str::to_string);
        let prepared = prepared(&request);
        assert_eq!(
            prepared.memory.confidence, expect,
            "{confidence:?} {source:?}"
        );
        let warning = prepared
            .warnings
            .iter()
            .any(|w| w.contains("stored as `reported`"));
        assert_eq!(
            warning, warned,
            "{confidence:?} {source:?}: {:?}",
            prepared.warnings
        );
    }
    use Confidence::*;
    check(None, None, Reported, false);
    check(Some(Confirmed), None, Reported, true);
    check(Some(Confirmed), Some("   "), Reported, true);
    check(
        Some(Confirmed),
        Some("docker-compose.yml:12"),
        Confirmed,
        false,
    );
    check(Some(Inferred), None, Inferred, false);
    check(Some(Reported), Some("stated by the user"), Reported, false);
    assert_eq!("high".parse::<Confidence>().unwrap(), Confirmed);
}

#[test]
fn expiry_is_read_as_a_time_and_defaults_only_for_captured_state() {
    fn check(memory_type: MemoryType, capture: bool, expires: Option<&str>, expect: Option<&str>) {
        let mut request = RememberRequest::new(memory_type, "The box is rebooting.");
        request.capture = capture;
        request.expires_at = expires.map(str::to_string);
        let memory = prepared(&request).memory;
        assert_eq!(
            memory.expires_at.as_deref(),
            expect,
            "{memory_type} capture {capture} {expires:?}"
        );
    }
    use MemoryType::*;
    check(Fact, false, None, None);
    check(State, false, None, None);
    check(State, true, None, Some("2026-12-14T12:00:00Z"));
    check(Episode, true, None, None);
    check(
        State,
        true,
        Some("2026-12-01"),
        Some("2026-12-01T00:00:00Z"),
    );
    check(
        Note,
        false,
        Some("2027-01-01T10:00:00+02:00"),
        Some("2027-01-01T08:00:00Z"),
    );
    check(
        Note,
        false,
        Some("2027-01-01 09:15"),
        Some("2027-01-01T09:15:00Z"),
    );

    let mut request = fact("The box is rebooting.");
    request.expires_at = Some("next tuesday".into());
    assert!(
        matches!(refused(&request), EngineError::Time(_)),
        "an unreadable expiry is refused"
    );
}

#[test]
fn captured_records_carry_captured_trust_and_stated_is_the_default() {
    fn check(capture: bool, trust: Option<Trust>, expect: Trust) {
        let mut request = fact("The deploy takes ten minutes.");
        request.capture = capture;
        request.trust = trust;
        assert_eq!(
            prepared(&request).memory.trust,
            expect,
            "{capture} {trust:?}"
        );
    }
    check(false, None, Trust::Stated);
    check(true, None, Trust::Captured);
    check(false, Some(Trust::External), Trust::External);
    check(true, Some(Trust::Imported), Trust::Imported);
}

#[test]
fn importance_is_one_to_five_and_three_by_default() {
    fn check(importance: Option<u8>, expect: Option<u8>) {
        let mut request = fact("The queue holds 10k jobs.");
        request.importance = importance;
        match prepare(&request, Some("p".into()), now(), None) {
            Ok(prepared) => assert_eq!(Some(prepared.memory.importance), expect, "{importance:?}"),
            Err(EngineError::Invalid(message)) => {
                assert_eq!(expect, None, "{importance:?} refused: {message}");
                assert!(message.contains("1") && message.contains("5"), "{message}");
            }
            Err(other) => panic!("{importance:?}: unexpected error {other}"),
        }
    }
    check(None, Some(3));
    check(Some(1), Some(1));
    check(Some(5), Some(5));
    check(Some(0), None);
    check(Some(6), None);
    check(Some(255), None);
}

#[test]
fn tags_are_cleaned_deduplicated_and_sorted() {
    fn check(tags: &[&str], expect: &[&str]) {
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        assert_eq!(clean_tags(&tags).unwrap(), expect, "{tags:?}");
        let mut request = fact("Tagged.");
        request.tags = tags.clone();
        assert_eq!(
            prepared(&request).memory.tags,
            expect,
            "{tags:?} through prepare"
        );
    }
    check(&[], &[]);
    check(&["Deploy", "#ops", "ops"], &["deploy", "ops"]);
    check(&["b,a", " c ", "a"], &["a", "b", "c"]);
    check(&["two  words", "Two Words"], &["two-words"]);
    check(&["", " , ", "#"], &[]);
    check(&["ta\u{200b}g", "TAG"], &["tag"]);
    check(&["Café", "cafe\u{301}"], &["café"]);
    check(&["snake_case", "kebab-case"], &["kebab-case", "snake_case"]);
}

#[test]
fn too_many_or_too_long_tags_are_refused() {
    let long = "t".repeat(65);
    let at_limit = "t".repeat(64);
    assert_eq!(
        clean_tags(std::slice::from_ref(&at_limit)).unwrap(),
        [at_limit]
    );
    assert!(matches!(
        clean_tags(&[long]),
        Err(EngineError::TooLarge {
            what: "a tag",
            actual: 65,
            limit: 64,
            ..
        })
    ));
    let tags = |n: usize| (0..n).map(|i| format!("tag{i}")).collect::<Vec<_>>();
    assert_eq!(clean_tags(&tags(32)).unwrap().len(), 32);
    assert!(matches!(
        clean_tags(&tags(33)),
        Err(EngineError::TooLarge {
            what: "the tag list",
            actual: 33,
            limit: 32,
            ..
        })
    ));
    // Duplicates are counted once.
    let mut repeated = tags(32);
    repeated.extend(tags(32));
    assert_eq!(clean_tags(&repeated).unwrap().len(), 32);
}

#[test]
fn titles_normalize_to_one_identity_key() {
    fn check(a: &str, b: &str, same: bool) {
        let key = |title: &str| {
            let mut request = fact("Body.");
            request.title = Some(title.to_string());
            prepared(&request).title_norm
        };
        let (key_a, key_b) = (key(a), key(b));
        assert!(key_a.is_some() && key_b.is_some(), "{a:?} {b:?}");
        assert_eq!(key_a == key_b, same, "{a:?} → {key_a:?}, {b:?} → {key_b:?}");
    }
    check("Deploy: Staging  DB", "deploy staging db", true);
    check("deploy-staging", "Deploy staging", true);
    check("ＡＰＩ keys", "api keys", true);
    check("Café menu", "cafe\u{301} MENU", true);
    check("pass\u{200b}word rotation", "password rotation", true);
    check("  Deploy notes  ", "deploy notes", true);
    check("deploy staging", "staging deploy", false);
    check("deploy staging", "deploy staging db", false);
    check("v1.2", "v12", false);
    check("🚀", "🛸", false);
}

#[test]
fn a_blank_title_or_summary_is_no_title_or_summary() {
    let mut request = fact("Body.");
    request.title = Some(" \u{200b} ".into());
    request.summary = Some("\n\t".into());
    let prepared = prepared(&request);
    assert_eq!(prepared.memory.title, None);
    assert_eq!(prepared.title_norm, None);
    assert_eq!(prepared.memory.summary, None);
}

#[test]
fn same_normalized_title_in_the_same_scope_updates_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open_brain(dir.path(), dir.path());
    let remember = |engine: &mut Engine, title: &str, body: &str, scope: Option<&str>| {
        let mut request = fact(body);
        request.title = Some(title.to_string());
        request.scope = scope.map(str::to_string);
        engine.remember(&request).unwrap()
    };
    let first = remember(
        &mut engine,
        "Deploy: Staging  DB",
        "Staging DB is db-staging-01.",
        None,
    );
    assert_eq!(first.status, RememberStatus::Added);
    let id = first.id.unwrap();
    let second = remember(
        &mut engine,
        "deploy staging db",
        "Staging DB moved to db-staging-02.",
        None,
    );
    assert_eq!(
        (second.status, second.id),
        (RememberStatus::Updated, Some(id))
    );
    let stored = engine.get(id).unwrap();
    assert_eq!(stored.title.as_deref(), Some("deploy staging db"));
    assert_eq!(stored.body, "Staging DB moved to db-staging-02.");
    assert_eq!(stored.status, Status::Active);
    assert_eq!(engine.history(id).unwrap().len(), 1);
    // Another scope is another identity.
    let elsewhere = remember(
        &mut engine,
        "Deploy staging DB",
        "Staging DB is db-staging-03.",
        Some("ops"),
    );
    assert_eq!(elsewhere.status, RememberStatus::Added);
    assert_ne!(elsewhere.id, Some(id));
}

#[test]
fn summary_and_title_lengths_are_limited_in_characters() {
    fn check(title: usize, summary: usize, refused_what: Option<&str>) {
        let mut request = fact("Body.");
        request.title = Some("é".repeat(title));
        request.summary = Some("ü".repeat(summary));
        match (
            prepare(&request, Some("p".into()), now(), None),
            refused_what,
        ) {
            (Ok(prepared), None) => {
                assert_eq!(prepared.memory.title.unwrap().chars().count(), title);
                assert_eq!(prepared.memory.summary.unwrap().chars().count(), summary);
            }
            (
                Err(EngineError::TooLarge {
                    what,
                    actual,
                    limit,
                    unit,
                }),
                Some(expect),
            ) => {
                assert_eq!(what, expect);
                assert_eq!(unit, "characters");
                assert!(actual > limit, "{actual} > {limit}");
            }
            (outcome, expect) => {
                panic!("title {title}, summary {summary}: {outcome:?}, expected {expect:?}")
            }
        }
    }
    check(200, 500, None);
    check(201, 500, Some("the title"));
    check(200, 501, Some("the summary"));
    check(1, 1, None);
}

#[test]
fn a_summary_is_one_line() {
    let mut request = fact("Body.");
    request.summary = Some("  first line\nsecond line  ".into());
    assert_eq!(
        prepared(&request).memory.summary.as_deref(),
        Some("first line second line")
    );
}

#[test]
fn timestamps_come_from_now_or_from_when_it_happened() {
    fn check(at: Option<&str>, created: &str, updated: &str) {
        let mut request = fact("It happened.");
        request.at = at.map(str::to_string);
        let memory = prepared(&request).memory;
        assert_eq!(memory.created_at, created, "{at:?}");
        assert_eq!(memory.valid_from, created, "{at:?}");
        assert_eq!(memory.updated_at, updated, "{at:?}");
        assert_eq!(memory.status, Status::Active);
    }
    check(None, "2026-11-30T12:00:00Z", "2026-11-30T12:00:00Z");
    check(
        Some("2026-01-02"),
        "2026-01-02T00:00:00Z",
        "2026-11-30T12:00:00Z",
    );
    check(
        Some("2026-01-02T03:04:05-01:00"),
        "2026-01-02T04:04:05Z",
        "2026-11-30T12:00:00Z",
    );
}

fn open_brain(dir: &Path, cwd: &Path) -> Engine {
    Engine::open(
        &dir.join("brain.db"),
        Context {
            project: "p".into(),
            cwd: cwd.to_path_buf(),
            actor: "test".into(),
            read_only: false,
            now: Some(now()),
        },
    )
    .expect("the brain opens")
}
