//! Model-based property test of the write path (docs/design.md §4, STYLE.md §Tests).
//!
//! Random sequences of remember, update, supersede, forget, forget --hard and restore run
//! against a real brain (a SQLite file in a temporary directory) and against a small in-memory
//! model of what docs/design.md says each operation does. After every operation the outcome (status,
//! id, the existing record named) must agree; after the sequence every record's status, links
//! and history depth must agree, and recall of each text's unique marker token must return
//! exactly the current head of every record holding that text, never an archived one.
//!
//! The texts come from a fixed universe built so that the write path's fuzzy checks have crisp
//! answers: bodies of one family are near duplicates of each other (MinHash Jaccard well above
//! 0.9) and bodies of different families are far apart; two long titles overlap by 80 % and
//! two short titles normalize to the same identity. `the_text_universe_has_the_designed_shape`
//! checks those relations against cairn-core, so the model can state them as facts.

use cairn_core::minhash;
use cairn_core::record::{MemoryType, Status};
use cairn_core::text;
use cairn_engine::{
    Context, Engine, EngineError, ListRequest, Mode, RecallRequest, RememberRequest,
    RememberStatus, UpdateRequest,
};
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// The text universe.

/// Neutral words: no stop words, no polarity or negation words (so no contradiction is ever
/// flagged), nothing that looks like a secret.
const POOL: [&str; 24] = [
    "granite", "harbor", "lantern", "meadow", "copper", "violet", "thistle", "saddle", "orchard",
    "pebble", "falcon", "cinder", "juniper", "marble", "quiver", "tundra", "walnut", "basalt",
    "canyon", "ember", "glacier", "heron", "jasper", "lichen",
];
const FAMILIES: usize = 4;
/// Versions of one family differ only in their marker: near duplicates of each other.
const VERSIONS: usize = 2;
const TEXTS: usize = FAMILIES * VERSIONS;
const FAMILY_WORDS: usize = 60;

const TITLES: [&str; 5] = [
    "Deploy notes",
    "deploy:  NOTES",
    "Cache layout",
    "Alpha bravo charlie delta echo",
    "alpha bravo charlie delta foxtrot",
];
/// Titles with the same key share an identity (scope + normalized title).
const TITLE_KEY: [usize; 5] = [0, 0, 2, 3, 4];
/// Titles of five or more tokens take part in the title-overlap check (docs/design.md §4 step 4); the
/// two long titles here overlap by 4/5.
const LONG_TITLE: [bool; 5] = [false, false, false, true, true];

/// Scope 0 is the default (no scope given: `global`).
const SCOPES: [&str; 3] = ["global", "alpha", "alpha:beta"];

fn family(text: usize) -> usize {
    text / VERSIONS
}

fn marker(text: usize) -> String {
    format!("qv{}x{}z", family(text), text % VERSIONS)
}

fn body(text: usize) -> String {
    let mut state =
        0x9e37_79b9_7f4a_7c15u64 ^ (family(text) as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut words: Vec<String> = Vec::with_capacity(FAMILY_WORDS + 1);
    for _ in 0..FAMILY_WORDS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        words.push(POOL[(state >> 33) as usize % POOL.len()].to_string());
    }
    words.push(marker(text));
    words.join(" ")
}

// ---------------------------------------------------------------------------------------------
// Operations.

/// Which record an operation is about.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Chosen from the model's state when the operation runs (generated sequences).
    Pick(u8),
    /// Exactly this id (written-out sequences).
    Id(i64),
}

#[derive(Debug, Clone)]
enum Op {
    Remember {
        text: usize,
        title: Option<usize>,
        scope: usize,
    },
    /// `remember … --supersedes ID [--fork-ok]`.
    Supersede {
        target: Target,
        text: usize,
        title: Option<usize>,
        scope: usize,
        fork_ok: bool,
    },
    /// `update ID --body …`.
    Update {
        target: Target,
        text: usize,
    },
    Forget {
        target: Target,
    },
    ForgetHard {
        target: Target,
    },
    Restore {
        target: Target,
    },
}

fn target() -> impl Strategy<Value = Target> {
    any::<u8>().prop_map(Target::Pick)
}

fn op() -> impl Strategy<Value = Op> {
    let text = 0..TEXTS;
    let title = proptest::option::weighted(0.5, 0..TITLES.len());
    // The default scope twice as often as the others, so records collide often.
    let scope = prop_oneof![2 => Just(0usize), 1 => 1..SCOPES.len()];
    prop_oneof![
        5 => (text.clone(), title.clone(), scope.clone())
            .prop_map(|(text, title, scope)| Op::Remember { text, title, scope }),
        3 => (target(), text.clone(), title, scope, any::<bool>()).prop_map(
            |(target, text, title, scope, fork_ok)| Op::Supersede { target, text, title, scope, fork_ok }
        ),
        2 => (target(), text).prop_map(|(target, text)| Op::Update { target, text }),
        2 => target().prop_map(|target| Op::Forget { target }),
        1 => target().prop_map(|target| Op::ForgetHard { target }),
        2 => target().prop_map(|target| Op::Restore { target }),
    ]
}

/// What an operation answered, reduced to what the model predicts.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Remember {
        status: RememberStatus,
        id: Option<i64>,
        existing: Option<i64>,
    },
    Done,
    NotFound,
    Refused,
    NotArchived,
    Failed(String),
}

fn remembered(status: RememberStatus, id: Option<i64>, existing: Option<i64>) -> Outcome {
    Outcome::Remember {
        status,
        id,
        existing,
    }
}

// ---------------------------------------------------------------------------------------------
// The model: what docs/design.md §3–§4 says happens.

#[derive(Debug, Clone, PartialEq)]
struct ModelRecord {
    text: usize,
    title: Option<usize>,
    scope: usize,
    status: Status,
    supersedes: Option<i64>,
    superseded_by: Option<i64>,
}

#[derive(Debug, Default)]
struct Model {
    records: BTreeMap<i64, ModelRecord>,
    /// Previous versions kept per id; a hard-deleted record keeps its history.
    history: BTreeMap<i64, usize>,
    /// The highest id ever handed out: an id names one record for good.
    last_id: i64,
}

impl Model {
    /// Mostly a stored record; one time in eight any id up to one past the last handed out
    /// (deleted ones included, and one that names no record).
    fn resolve(&self, target: Target) -> i64 {
        let target = match target {
            Target::Id(id) => return id,
            Target::Pick(pick) => pick,
        };
        let stored: Vec<i64> = self.records.keys().copied().collect();
        if target % 8 == 0 || stored.is_empty() {
            return 1 + i64::from(target / 8) % (self.last_id + 1);
        }
        stored[usize::from(target) % stored.len()]
    }

    fn changed(&mut self, id: i64) {
        *self.history.entry(id).or_default() += 1;
    }

    /// Active records of one partition (only the scope varies here), lowest id first.
    fn active_in(&self, scope: usize) -> impl Iterator<Item = (i64, &ModelRecord)> {
        self.records
            .iter()
            .filter(move |(_, r)| r.status == Status::Active && r.scope == scope)
            .map(|(&id, r)| (id, r))
    }

    /// The acceptable outcomes of one `remember` (one, except where docs/design.md leaves the choice
    /// between equally good existing records open).
    fn remember(
        &mut self,
        text: usize,
        title: Option<usize>,
        scope: usize,
        supersedes: Option<i64>,
        fork_ok: bool,
    ) -> Vec<Outcome> {
        // Step 6, checked first: the target must exist, and a target that already has a
        // successor needs --fork-ok.
        if let Some(old) = supersedes {
            let Some(old) = self.records.get(&old) else {
                return vec![Outcome::NotFound];
            };
            if let Some(successor) = old.superseded_by
                && !fork_ok
            {
                return vec![remembered(RememberStatus::Refused, None, Some(successor))];
            }
        }
        // Step 2: identity — same scope and normalized title as an active record → update in
        // place (or nothing, when nothing would change). Superseding moves the identity
        // instead, so it never updates in place.
        let identity = title.filter(|_| supersedes.is_none()).and_then(|title| {
            self.active_in(scope)
                .find(|(_, r)| r.title.map(|t| TITLE_KEY[t]) == Some(TITLE_KEY[title]))
                .map(|(id, r)| (id, title, r.title == Some(title) && r.text == text))
        });
        if let Some((id, title, same)) = identity {
            if same {
                return vec![remembered(RememberStatus::Noop, Some(id), Some(id))];
            }
            let record = self.records.get_mut(&id).expect("found above");
            record.title = Some(title);
            record.text = text;
            self.changed(id);
            return vec![remembered(RememberStatus::Updated, Some(id), Some(id))];
        }
        // Step 3: exact duplicate in the same partition → NOOP. docs/design.md does not say whether
        // retired records count or whether `--supersedes` skips this step; the model reads
        // both the way the steps are listed: active records only, and a superseding write of
        // text already stored is a NOOP that supersedes nothing.
        if let Some((id, _)) = self.active_in(scope).find(|(_, r)| r.text == text) {
            return vec![remembered(RememberStatus::Noop, Some(id), Some(id))];
        }
        // Step 4: near duplicates are refused, naming the existing record (bodies first, then
        // titles). `--supersedes` is one of the ways out, so it skips this step.
        if supersedes.is_none() {
            if let Some((id, _)) = self
                .active_in(scope)
                .find(|(_, r)| family(r.text) == family(text))
            {
                return vec![remembered(RememberStatus::Refused, None, Some(id))];
            }
            if let Some(title) = title.filter(|&t| LONG_TITLE[t]) {
                let twins: Vec<Outcome> = self
                    .active_in(scope)
                    .filter(|(_, r)| {
                        r.title
                            .is_some_and(|t| LONG_TITLE[t] && TITLE_KEY[t] != TITLE_KEY[title])
                    })
                    .map(|(id, _)| remembered(RememberStatus::Refused, None, Some(id)))
                    .collect();
                if !twins.is_empty() {
                    return twins;
                }
            }
        }
        // Store it; the superseded record keeps its place in history and links forward (to the
        // newest successor, after a fork).
        self.last_id += 1;
        let id = self.last_id;
        self.records.insert(
            id,
            ModelRecord {
                text,
                title,
                scope,
                status: Status::Active,
                supersedes,
                superseded_by: None,
            },
        );
        if let Some(old) = supersedes {
            let record = self.records.get_mut(&old).expect("checked above");
            record.superseded_by = Some(id);
            if record.status == Status::Active {
                record.status = Status::Superseded;
            }
            self.changed(old);
        }
        vec![remembered(RememberStatus::Added, Some(id), None)]
    }

    fn update(&mut self, id: i64, text: usize) -> Outcome {
        let Some(record) = self.records.get_mut(&id) else {
            return Outcome::NotFound;
        };
        if record.text != text {
            record.text = text;
            self.changed(id);
        }
        Outcome::Done
    }

    fn forget(&mut self, id: i64) -> Outcome {
        let Some(record) = self.records.get_mut(&id) else {
            return Outcome::NotFound;
        };
        if record.status != Status::Archived {
            record.status = Status::Archived;
            self.changed(id);
        }
        Outcome::Done
    }

    /// `forget --hard` refuses a record that supersedes others (docs/design.md §4 step 6).
    fn forget_hard(&mut self, id: i64) -> Outcome {
        let Some(record) = self.records.get(&id) else {
            return Outcome::NotFound;
        };
        if record.supersedes.is_some() {
            return Outcome::Refused;
        }
        // Its successor drops the link to a record that no longer exists (kept in history).
        if let Some(successor) = record.superseded_by
            && let Some(next) = self.records.get_mut(&successor)
            && next.supersedes == Some(id)
        {
            next.supersedes = None;
            self.changed(successor);
        }
        self.records.remove(&id);
        self.changed(id);
        Outcome::Done
    }

    fn restore(&mut self, id: i64) -> Outcome {
        let Some(record) = self.records.get_mut(&id) else {
            return Outcome::NotFound;
        };
        if record.status != Status::Archived {
            return Outcome::NotArchived;
        }
        record.status = if record.superseded_by.is_some() {
            Status::Superseded
        } else {
            Status::Active
        };
        self.changed(id);
        Outcome::Done
    }

    /// The record a match on `id` answers as (docs/design.md §5.4): itself when active, else its
    /// newest successor; nothing when the chain ends in an archived record.
    fn head(&self, mut id: i64) -> Option<i64> {
        for _ in 0..=self.records.len() {
            let record = self.records.get(&id)?;
            if record.status == Status::Active {
                return Some(id);
            }
            id = record.superseded_by?;
        }
        None
    }
}

// ---------------------------------------------------------------------------------------------
// The real brain.

fn fixed_now() -> DateTime<Utc> {
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
            now: Some(fixed_now()),
        },
    )
    .expect("the brain opens")
}

fn request(
    text: usize,
    title: Option<usize>,
    scope: usize,
    supersedes: Option<i64>,
    fork_ok: bool,
) -> RememberRequest {
    let mut request = RememberRequest::new(MemoryType::Fact, body(text));
    request.title = title.map(|t| TITLES[t].to_string());
    request.scope = (scope != 0).then(|| SCOPES[scope].to_string());
    request.supersedes = supersedes;
    request.fork_ok = fork_ok;
    request
}

fn seen<T>(result: Result<T, EngineError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Done,
        Err(EngineError::NotFound { .. }) => Outcome::NotFound,
        Err(EngineError::Refused { .. }) => Outcome::Refused,
        Err(EngineError::Invalid(_)) => Outcome::NotArchived,
        Err(other) => Outcome::Failed(other.to_string()),
    }
}

fn seen_remember(result: Result<cairn_engine::RememberOutcome, EngineError>) -> Outcome {
    match result {
        Ok(outcome) => remembered(outcome.status, outcome.id, outcome.existing),
        Err(error) => seen::<()>(Err(error)),
    }
}

/// Runs `op` on both sides; returns (acceptable outcomes, what the engine answered, a line for
/// the failure trace).
fn step(model: &mut Model, engine: &mut Engine, op: &Op) -> (Vec<Outcome>, Outcome, String) {
    match *op {
        Op::Remember { text, title, scope } => {
            let expected = model.remember(text, title, scope, None, false);
            let got = seen_remember(engine.remember(&request(text, title, scope, None, false)));
            let line = format!(
                "remember text {text} title {title:?} scope {}",
                SCOPES[scope]
            );
            (expected, got, line)
        }
        Op::Supersede {
            target,
            text,
            title,
            scope,
            fork_ok,
        } => {
            let id = model.resolve(target);
            let expected = model.remember(text, title, scope, Some(id), fork_ok);
            let got =
                seen_remember(engine.remember(&request(text, title, scope, Some(id), fork_ok)));
            let line = format!(
                "remember text {text} title {title:?} scope {} --supersedes {id}{}",
                SCOPES[scope],
                if fork_ok { " --fork-ok" } else { "" }
            );
            (expected, got, line)
        }
        Op::Update { target, text } => {
            let id = model.resolve(target);
            let expected = vec![model.update(id, text)];
            let got = seen(engine.update(
                id,
                &UpdateRequest {
                    body: Some(body(text)),
                    ..UpdateRequest::default()
                },
            ));
            (expected, got, format!("update {id} --body text {text}"))
        }
        Op::Forget { target } => {
            let id = model.resolve(target);
            let expected = vec![model.forget(id)];
            (
                expected,
                seen(engine.forget(id, false)),
                format!("forget {id}"),
            )
        }
        Op::ForgetHard { target } => {
            let id = model.resolve(target);
            let expected = vec![model.forget_hard(id)];
            (
                expected,
                seen(engine.forget(id, true)),
                format!("forget {id} --hard"),
            )
        }
        Op::Restore { target } => {
            let id = model.resolve(target);
            let expected = vec![model.restore(id)];
            (expected, seen(engine.restore(id)), format!("restore {id}"))
        }
    }
}

fn lexical(query: String) -> RecallRequest {
    RecallRequest {
        limit: 50,
        touch: false,
        mode: Mode::Lexical,
        floor: Some(0.0),
        ..RecallRequest::new(query)
    }
}

/// Compares every record, history depth and recall answer with the model.
fn compare_final_state(model: &Model, engine: &mut Engine) -> Result<(), String> {
    let text_of: HashMap<String, usize> = (0..TEXTS).map(|t| (body(t), t)).collect();
    let stored: BTreeMap<i64, ModelRecord> = engine
        .list(&ListRequest::default())
        .map_err(|e| format!("list failed: {e}"))?
        .into_iter()
        .map(|m| {
            let record = ModelRecord {
                text: text_of.get(&m.body).copied().unwrap_or(usize::MAX),
                title: m.title.as_deref().map(|t| {
                    TITLES
                        .iter()
                        .position(|known| *known == t)
                        .unwrap_or(usize::MAX)
                }),
                scope: SCOPES
                    .iter()
                    .position(|s| *s == m.scope)
                    .unwrap_or(usize::MAX),
                status: m.status,
                supersedes: m.supersedes,
                superseded_by: m.superseded_by,
            };
            (m.id, record)
        })
        .collect();
    if stored != model.records {
        return Err(format!(
            "records differ\n  engine: {stored:?}\n  model:  {:?}",
            model.records
        ));
    }
    for id in 1..=model.last_id + 1 {
        let versions = engine
            .store()
            .unwrap()
            .reader()
            .history(id)
            .map_err(|e| format!("history of #{id} failed: {e}"))?
            .len();
        let expected = model.history.get(&id).copied().unwrap_or(0);
        if versions != expected {
            return Err(format!(
                "#{id} has {versions} history versions, the model {expected}"
            ));
        }
    }
    for text in 0..TEXTS {
        let expected: BTreeSet<i64> = model
            .records
            .iter()
            .filter(|(_, r)| r.text == text && r.status != Status::Archived)
            .filter_map(|(&id, _)| model.head(id))
            .collect();
        let answer = engine
            .recall(&lexical(marker(text)))
            .map_err(|e| format!("recall of {} failed: {e}", marker(text)))?;
        let found: BTreeSet<i64> = answer.results.iter().map(|r| r.id).collect();
        if found != expected {
            return Err(format!(
                "recall of {} (text {text}) returned {found:?}, the model expects {expected:?}",
                marker(text)
            ));
        }
        if let Some(archived) = answer.results.iter().find(|r| r.status == Status::Archived) {
            return Err(format!(
                "recall of {} returned archived #{}",
                marker(text),
                archived.id
            ));
        }
    }
    Ok(())
}

/// Runs a whole sequence; `Err` carries the trace of what was done up to the disagreement.
fn run(ops: &[Op]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut engine = open_brain(dir.path());
    let mut model = Model::default();
    let mut trace: Vec<String> = Vec::new();
    for op in ops {
        let (expected, got, line) = step(&mut model, &mut engine, op);
        trace.push(line);
        if !expected.contains(&got) {
            return Err(format!(
                "{}\n  engine: {got:?}\n  model:  {expected:?}",
                trace.join("\n")
            ));
        }
    }
    compare_final_state(&model, &mut engine).map_err(|e| format!("{}\n{e}", trace.join("\n")))
}

proptest! {
    #![proptest_config(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn the_write_path_behaves_like_the_model(ops in proptest::collection::vec(op(), 1..=40)) {
        if let Err(disagreement) = run(&ops) {
            return Err(TestCaseError::fail(disagreement));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The universe's designed relations, and the sequences that once disagreed.

#[test]
fn the_text_universe_has_the_designed_shape() {
    let signatures: Vec<minhash::Signature> =
        (0..TEXTS).map(|t| minhash::signature(&body(t))).collect();
    for a in 0..TEXTS {
        assert_eq!(
            text::word_tokens(&body(a)).last().map(String::as_str),
            Some(marker(a).as_str())
        );
        for b in a + 1..TEXTS {
            let jaccard = signatures[a].jaccard(&signatures[b]);
            if family(a) == family(b) {
                assert!(jaccard >= 0.92, "texts {a} and {b}: {jaccard}");
            } else {
                assert!(jaccard < 0.5, "texts {a} and {b}: {jaccard}");
            }
            assert_eq!(
                cairn_core::polarity::contradiction(&body(a), &body(b)),
                None
            );
        }
    }
    for a in 0..TITLES.len() {
        assert_eq!(
            text::title_tokens(TITLES[a]).len() >= text::MIN_OVERLAP_TOKENS,
            LONG_TITLE[a]
        );
        for b in 0..TITLES.len() {
            assert_eq!(
                text::normalize_title(TITLES[a]) == text::normalize_title(TITLES[b]),
                TITLE_KEY[a] == TITLE_KEY[b],
                "titles {a} and {b}"
            );
        }
    }
    let overlap = text::title_overlap(TITLES[3], TITLES[4]).expect("both are long");
    assert!((0.5..1.0).contains(&overlap), "{overlap}");
}

/// Runs a written-out sequence and fails with the trace when the engine and the model disagree.
fn check(ops: &[Op]) {
    if let Err(disagreement) = run(ops) {
        panic!("{disagreement}");
    }
}

fn remember(text: usize, title: Option<usize>, scope: usize) -> Op {
    Op::Remember { text, title, scope }
}

fn supersede(id: i64, text: usize, title: Option<usize>, fork_ok: bool) -> Op {
    Op::Supersede {
        target: Target::Id(id),
        text,
        title,
        scope: 0,
        fork_ok,
    }
}

#[test]
fn a_hard_deleted_id_is_never_handed_out_again() {
    // The newest record is deleted for good, then a new one is stored: the new record must get
    // a fresh id, not inherit #1 with the deleted record's history and events.
    check(&[
        remember(0, None, 0),
        Op::ForgetHard {
            target: Target::Id(1),
        },
        remember(2, None, 0),
    ]);
}

#[test]
fn supersession_forks_refusals_and_restores_follow_the_design() {
    check(&[
        remember(0, Some(0), 0),
        // #2 supersedes #1; superseding #1 again needs --fork-ok (#3).
        supersede(1, 2, Some(1), false),
        supersede(1, 4, None, false),
        supersede(1, 4, None, true),
        // #3 supersedes #1: it cannot be deleted, only archived and restored (once).
        Op::ForgetHard {
            target: Target::Id(3),
        },
        Op::Forget {
            target: Target::Id(3),
        },
        Op::Restore {
            target: Target::Id(3),
        },
        Op::Restore {
            target: Target::Id(3),
        },
        // The same title, spelled differently, in the same scope: #2 is updated in place.
        remember(3, Some(0), 0),
        remember(3, Some(1), 0),
        remember(3, Some(1), 0),
        // A near duplicate of #3's body is refused in its scope and stored in another (#4).
        remember(5, None, 0),
        remember(5, None, 1),
        // A title overlapping #5's by 80 % is refused in the same scope.
        remember(6, Some(3), 1),
        remember(0, Some(4), 1),
        // An exact repeat is a no-op; supersession skips the near-duplicate check (#6).
        remember(6, None, 1),
        supersede(5, 7, None, false),
        // Archiving #2 hides its text from recall; #1 supersedes nothing, so it may be
        // deleted (its successors keep their backward links).
        Op::Forget {
            target: Target::Id(2),
        },
        Op::ForgetHard {
            target: Target::Id(1),
        },
        Op::Update {
            target: Target::Id(4),
            text: 1,
        },
    ]);
}
