//! Old data must still open: each schema version's brain file under tests/fixtures/ is copied
//! and used by the current binary.

mod common;

use common::Brain;

#[test]
fn a_schema_v1_brain_opens_and_answers() {
    let brain = Brain::new();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/brain-v1.db");
    std::fs::copy(&fixture, &brain.db).expect("fixture present");
    let answer = brain.json(
        &[
            "--project",
            "fixture-project",
            "recall",
            "lighthouse keeper",
            "--no-touch",
        ],
        0,
    );
    assert_eq!(answer["results"][0]["id"], 2);
    let current = brain.json(
        &[
            "--project",
            "fixture-project",
            "recall",
            "SQLite brain",
            "--no-touch",
        ],
        0,
    );
    assert_eq!(current["results"][0]["id"], 3);
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
}

#[test]
fn the_project_key_comes_from_the_git_origin() {
    let brain = Brain::new();
    let repo = brain.dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    for args in [
        vec!["init", "-q"],
        vec!["remote", "add", "origin", "git@github.com:Acme/Shop.git"],
    ] {
        assert!(
            std::process::Command::new("git")
                .current_dir(&repo)
                .args(&args)
                .status()
                .unwrap()
                .success()
        );
    }
    let out = brain
        .cmd()
        .current_dir(&repo)
        .env_remove("CAIRN_PROJECT")
        .args([
            "--json",
            "remember",
            "--type",
            "fact",
            "--body",
            "origin derived",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = brain.json(&["show", "1"], 0);
    assert_eq!(shown["project"], "github.com/acme/shop");
}

/// Opens a copy of `brain-vN.db` (written by `scripts/fixture-brains.sh`) with the current
/// binary, which migrates it, and checks that what that version held survived: records and
/// their supersession, history, a personal stamped record, search, and a healthy `doctor`.
fn check_fixture(version: u32) {
    let brain = Brain::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/brain-v{version}.db"));
    std::fs::copy(&fixture, &brain.db).expect("fixture present");
    let recall = |query: &str| {
        brain.json(
            &[
                "--project",
                "fixture-project",
                "recall",
                query,
                "--no-touch",
            ],
            0,
        )
    };
    let doctor = brain.json(&["doctor"], 0);
    assert_eq!(doctor["ok"], true, "v{version}: {doctor}");
    assert_eq!(
        doctor["schema_version"].as_i64(),
        Some(i64::from(cairn_store_schema_version())),
        "v{version}: {doctor}"
    );
    assert_eq!(
        brain.sql("PRAGMA user_version"),
        cairn_store_schema_version().to_string()
    );

    let tides = recall("lighthouse tides");
    assert_eq!(tides["results"][0]["id"], 2, "v{version}: {tides}");
    // The superseded decision answers as the record that replaced it.
    let wal = recall("SQLite brain");
    assert_eq!(wal["results"][0]["id"], 3, "v{version}: {wal}");
    let old = brain.json(&["show", "1", "--history"], 0);
    assert_eq!(old["status"], "superseded", "v{version}: {old}");
    assert_eq!(old["superseded_by"], 3);
    assert_eq!(
        old["history"][0]["snapshot"]["body"], "Use SQLite for the brain.",
        "v{version}: {old}"
    );
    let personal = brain.json(&["show", "4"], 0);
    assert!(personal["project"].is_null(), "v{version}: {personal}");
    assert_eq!(
        personal["commit"],
        "abcdef1234567890abcdef1234567890abcdef12"
    );
    let count = |table: &str| brain.sql(&format!("SELECT count(*) FROM {table}"));
    // remember ×2 and supersede (v1), a summary (v2), an episode (v3), a note (v7), an update
    // (v8), a session start (v16).
    let events = [3, 4, 5, 5, 5, 5, 6, 7, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8][version as usize - 1];
    assert_eq!(count("events"), events.to_string(), "v{version}");
    assert_eq!(count("conflicts"), "1");
    assert_eq!(count("scopes"), "1");
    if version >= 2 {
        let edges = brain.json(&["--project", "fixture-project", "edges", "#3"], 0);
        assert!(
            edges.to_string().contains("mentions"),
            "v{version}: {edges}"
        );
        assert_eq!(count("edge_log"), "3");
        assert_eq!(count("edge_quarantine"), "1");
    }
    if version >= 3 {
        for table in [
            "tasks",
            "measures",
            "identity",
            "awareness",
            "capture_offsets",
            "inbox",
        ] {
            assert_eq!(count(table), "1", "v{version}: {table}");
        }
        let episode = recall("logbook");
        assert_eq!(episode["results"][0]["id"], 6, "v{version}: {episode}");
    }
    if version >= 4 {
        assert!(count("vectors").parse::<i64>().unwrap() >= 1, "v{version}");
    }
    if version >= 5 {
        assert_eq!(
            count("dream_proposals"),
            if version >= 10 { "2" } else { "1" }
        );
    }
    if version >= 7 {
        let kiln = recall("kiln cone");
        assert_eq!(kiln["results"][0]["id"], 7, "v{version}: {kiln}");
    }
    if version >= 11 {
        // the service's tokens: kept hashed, never usable from a fixture
        assert_eq!(count("service_tokens"), "3", "v{version}");
    }
    if version >= 12 {
        let surfaced = brain.json(&["show", "1"], 0);
        assert_eq!(
            surfaced["surfaced_at"], "2026-01-07T10:00:00Z",
            "v{version}"
        );
    }
    if version >= 15 {
        // The code map one file at a time: the file's row, its parse in two parts (the graph
        // part in the codemap crate's binary form), the project's bookkeeping.
        assert_eq!(count("codemap_files"), "1", "v{version}");
        assert_eq!(count("codemap_project"), "1", "v{version}");
        assert_eq!(
            brain.sql(
                "SELECT hex(substr(graph, 1, 4)) || ' ' || hex(substr(detail, 1, 4)) FROM codemap_parses"
            ),
            "434D4732 434D4432",
            "v{version}"
        );
    } else {
        // Migrated to v15: the code map of v13 and v14 is let go (derived data: the next map
        // parses the tree again), the tables are there and empty.
        assert_eq!(count("codemap_files"), "0", "v{version}");
        assert_eq!(count("codemap_parses"), "0", "v{version}");
        assert_eq!(count("codemap_project"), "0", "v{version}");
    }
    if version >= 13 {
        assert_eq!(count("codemap_state"), "1", "v{version}");
    }
    // Who wrote each event (v16): the session start is the hook's; the events written before
    // v16 name nobody (never guessed), and `cairn log --actor` finds one actor's.
    let log = brain.json(
        &["--project", "fixture-project", "log", "--limit", "100"],
        0,
    );
    let actors: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = (0..actors.len())
        .map(|i| {
            if version >= 16 && i + 1 == actors.len() {
                "hook"
            } else {
                ""
            }
        })
        .collect();
    assert!(actors.len() >= 3, "v{version}: {log}");
    assert_eq!(actors, expected, "v{version}: {log}");
    let hook = brain.json(
        &["--project", "fixture-project", "log", "--actor", "hook"],
        0,
    );
    assert_eq!(
        hook.as_array().unwrap().len(),
        usize::from(version >= 16),
        "v{version}: {hook}"
    );
    if version >= 16 {
        assert_eq!(hook[0]["op"], "session_start");
        assert_eq!(hook[0]["detail"]["session"], "fixture-session");
    }
    if version >= 8 {
        let updated = brain.json(&["show", "2", "--history"], 0);
        assert!(
            updated["body"].as_str().unwrap().contains("every evening"),
            "v{version}: {updated}"
        );
        assert_eq!(
            updated["history"][0]["snapshot"]["body"],
            "The lighthouse keeper logs the tides every morning.",
            "v{version}: {updated}"
        );
        let gate = recall("harbour gate");
        assert_eq!(gate["results"][0]["id"], 8, "v{version}: {gate}");
    }
    if version >= 10 {
        // Merged away: the whole text reads back from its delta, and it is out of search.
        let twin = brain.json(&["show", "9"], 0);
        assert_eq!(
            twin["body"], "Kiln firing takes nine hours at cone six, ten when the kiln is full.",
            "{twin}"
        );
        assert_eq!(twin["status"], "archived");
        let kiln = recall("kiln full");
        assert!(
            kiln["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["id"] != 9),
            "{kiln}"
        );
    }
    // Still writable after the migration, and searchable.
    brain.json(
        &[
            "--project",
            "fixture-project",
            "remember",
            "--type",
            "fact",
            "--body",
            "The migrated brain accepts new records about anemometers.",
        ],
        0,
    );
    assert!(recall("anemometers")["results"][0]["id"].as_i64().is_some());
}

fn cairn_store_schema_version() -> u32 {
    // The version the binary writes, as doctor reports it on a fresh brain.
    let brain = Brain::new();
    brain.remember("note", None, "schema probe");
    brain.json(&["doctor"], 0)["schema_version"]
        .as_u64()
        .expect("a schema version") as u32
}

#[test]
fn a_schema_v3_brain_opens_and_answers() {
    check_fixture(3);
}

#[test]
fn a_schema_v4_brain_opens_and_answers() {
    check_fixture(4);
}

#[test]
fn a_schema_v5_brain_opens_and_answers() {
    check_fixture(5);
}

#[test]
fn a_schema_v6_brain_opens_and_answers() {
    check_fixture(6);
}

#[test]
fn a_schema_v7_brain_opens_and_answers() {
    check_fixture(7);
}

#[test]
fn a_schema_v8_brain_opens_and_answers() {
    check_fixture(8);
}

#[test]
fn a_schema_v9_brain_opens_and_answers() {
    check_fixture(9);
}

#[test]
fn a_schema_v10_brain_opens_and_answers() {
    check_fixture(10);
}

#[test]
fn a_schema_v11_brain_opens_and_answers() {
    check_fixture(11);
}

#[test]
fn a_schema_v12_brain_opens_and_answers() {
    check_fixture(12);
}

#[test]
fn a_schema_v13_brain_opens_and_answers() {
    check_fixture(13);
}

#[test]
fn a_schema_v14_brain_opens_and_answers() {
    check_fixture(14);
}

#[test]
fn a_schema_v15_brain_opens_and_answers() {
    check_fixture(15);
}

#[test]
fn a_schema_v16_brain_opens_and_answers() {
    check_fixture(16);
}

#[test]
fn a_schema_v17_brain_opens_and_answers() {
    check_fixture(17);
}

#[test]
fn a_schema_v18_brain_opens_and_answers() {
    check_fixture(18);
}

#[test]
fn every_schema_version_has_a_fixture() {
    let version = cairn_store_schema_version();
    for n in 1..=version {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/brain-v{n}.db"));
        assert!(
            path.exists(),
            "no fixture for schema v{n}: run scripts/fixture-brains.sh (see its header) and add its test here"
        );
    }
}
