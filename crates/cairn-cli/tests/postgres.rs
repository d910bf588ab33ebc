//! `cairn migrate` between a brain file and PostgreSQL, and `--store postgres://…`, end to end:
//! the real binary, the real server, a database of each test's own (dropped after; see
//! pg_support.rs). docs/postgres.md.

mod common;
mod pg_support;

use common::Brain;
use pg_support::TestDb;
use serde_json::Value;
use std::path::Path;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/brain-v18.db");

/// A copy of the newest fixture brain: every table has rows.
fn fixture_brain() -> Brain {
    let brain = Brain::new();
    std::fs::copy(FIXTURE, &brain.db).expect("copy the fixture");
    brain
}

fn migrate(brain: &Brain, from: &str, to: &str, extra: &[&str]) -> std::process::Output {
    brain
        .cmd()
        .args(["migrate", "--from", from, "--to", to])
        .args(extra)
        .output()
        .expect("run cairn migrate")
}

fn ok_json(output: &std::process::Output) -> Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON summary")
}

fn export(brain: &Brain, db: &Path) -> String {
    let output = brain
        .cmd()
        .env("CAIRN_DB", db)
        .arg("export")
        .output()
        .expect("cairn export");
    common::succeeded(&output);
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Every table's rows, sorted, as `sqlite3` prints them (the FTS index, its change log
/// `fts_changes` — derived, each brain keeps its own — and the migration's own
/// `meta.migrated_from` left out).
fn dump(db: &Path) -> String {
    let sql = |statement: &str| {
        let output = std::process::Command::new("sqlite3")
            .arg("-quote")
            .arg(db)
            .arg(statement)
            .output()
            .expect("sqlite3");
        common::succeeded(&output);
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    let tables = sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'memories_fts%' AND name <> 'fts_changes' ORDER BY name",
    );
    let mut out = String::new();
    for table in tables.lines().map(|t| t.trim_matches('\'')) {
        let filter = if table == "meta" {
            " WHERE key <> 'migrated_from'"
        } else {
            ""
        };
        out.push_str(&format!("== {table}\n"));
        let mut rows: Vec<String> = sql(&format!("SELECT * FROM \"{table}\"{filter}"))
            .lines()
            .map(str::to_string)
            .collect();
        rows.sort();
        out.push_str(&rows.join("\n"));
        out.push('\n');
    }
    out
}

fn typed_dump(db: &Path) -> String {
    // The storage class of every value too (a TEXT column holding BLOBs must stay BLOBs).
    let output = std::process::Command::new("sqlite3")
        .arg(db)
        .arg("SELECT typeof(body), typeof(content_hash), hex(content_hash) FROM memories ORDER BY id; SELECT typeof(receipt), hex(receipt) FROM events ORDER BY id; SELECT hex(vector) FROM vectors ORDER BY memory_id; SELECT * FROM sqlite_sequence;")
        .output()
        .expect("sqlite3");
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn table_counts(summary: &Value) -> Vec<(String, u64)> {
    summary["migration"]["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_string(),
                t["rows"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_brain_goes_to_postgres_and_back_with_nothing_lost() {
    let Some(pg) = TestDb::new() else { return };
    let brain = fixture_brain();
    let src = brain.db.to_str().unwrap().to_string();
    let there = ok_json(&migrate(&brain, &src, &pg.url, &["--json"]));
    let counts = table_counts(&there);
    assert!(counts.len() >= 25, "{counts:?}");
    for (table, rows) in &counts {
        assert!(*rows > 0, "the fixture has rows in every table: {table}");
    }
    // On the server: the same counts, the vectors as pgvector values, the schema version.
    let mut client = pg.client();
    for (table, rows) in &counts {
        let name = if table == "sqlite_sequence" {
            "cairn_autoincrement"
        } else {
            table
        };
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM \"{name}\""), &[])
            .unwrap()
            .get(0);
        assert_eq!(n as u64, *rows, "{table}");
    }
    let kind: String = client
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'vectors'::regclass AND attname = 'vector'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(kind, "vector");
    let version: String = client
        .query_one(
            "SELECT value FROM cairn_pg_meta WHERE key = 'schema_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, "18");

    let back = brain.dir.path().join("back.db");
    let home = ok_json(&migrate(
        &brain,
        &pg.url,
        back.to_str().unwrap(),
        &["--json"],
    ));
    assert_eq!(table_counts(&home), counts);
    assert_eq!(export(&brain, &brain.db), export(&brain, &back));
    assert_eq!(dump(&brain.db), dump(&back));
    assert_eq!(typed_dump(&brain.db), typed_dump(&back));
    // Running the same command again: already complete, nothing copied twice.
    let again = ok_json(&migrate(&brain, &src, &pg.url, &["--json"]));
    assert_eq!(again["migration"]["already_complete"], true);
    let n: i64 = client
        .query_one("SELECT count(*) FROM memories", &[])
        .unwrap()
        .get(0);
    assert_eq!(n as u64, counts[0].1);
    // The full-text index was rebuilt on arrival: the same search finds the same records.
    let recall = |db: &Path| {
        let output = brain
            .cmd()
            .env("CAIRN_DB", db)
            .args(["--json", "recall", "the", "--limit", "50"])
            .output()
            .unwrap();
        common::succeeded(&output);
        let value: Value = serde_json::from_slice(&output.stdout).unwrap();
        let mut ids: Vec<i64> = value["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_i64())
            .collect();
        ids.sort();
        ids
    };
    let before = recall(&brain.db);
    assert!(!before.is_empty());
    assert_eq!(before, recall(&back));
}

#[test]
fn a_killed_migration_continues_where_it_stopped() {
    let Some(pg) = TestDb::new() else { return };
    let brain = fixture_brain();
    let src = brain.db.to_str().unwrap().to_string();
    // One row per batch, 150 ms after each: about 10 s in all, killed after the first batches.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["migrate", "--from", &src, "--to", &pg.url, "--batch", "1"])
        .env("CAIRN_TEST_MIGRATE_PAUSE_MS", "150")
        .env("CAIRN_DAEMON", "off")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut client = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the migration never started copying"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the migration ended before the kill"
        );
        let c = client.get_or_insert_with(|| pg.client());
        let copied: i64 = c
            .query_opt("SELECT count(*) FROM memories WHERE to_regclass('cairn_migration_progress') IS NOT NULL", &[])
            .ok()
            .flatten()
            .map_or(0, |row| row.get(0));
        if copied >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let mut client = pg.client();
    let partial: i64 = client
        .query_one("SELECT count(*) FROM memories", &[])
        .unwrap()
        .get(0);
    let events: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .unwrap()
        .get(0);
    assert!(partial >= 3, "{partial}");
    assert_eq!(events, 0, "killed while copying the first table");

    let resumed = ok_json(&migrate(&brain, &src, &pg.url, &["--json", "--batch", "1"]));
    assert_eq!(resumed["migration"]["resumed"], true);
    let memories = &resumed["migration"]["tables"][0];
    assert_eq!(memories["table"], "memories");
    assert_eq!(
        memories["copied"].as_u64().unwrap() + partial as u64,
        memories["rows"].as_u64().unwrap(),
        "the rows copied before the kill are not copied again"
    );
    for (table, rows) in table_counts(&resumed) {
        let name = if table == "sqlite_sequence" {
            "cairn_autoincrement".to_string()
        } else {
            table.clone()
        };
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM \"{name}\""), &[])
            .unwrap()
            .get(0);
        assert_eq!(n as u64, rows, "{table}");
    }
    let back = brain.dir.path().join("back.db");
    ok_json(&migrate(
        &brain,
        &pg.url,
        back.to_str().unwrap(),
        &["--json"],
    ));
    assert_eq!(export(&brain, &brain.db), export(&brain, &back));
    assert_eq!(dump(&brain.db), dump(&back));
}

#[test]
fn a_brain_from_a_newer_cairn_is_refused() {
    let Some(pg) = TestDb::new() else { return };
    let brain = fixture_brain();
    let src = brain.db.to_str().unwrap().to_string();
    ok_json(&migrate(&brain, &src, &pg.url, &["--json"]));
    pg.client()
        .execute(
            "UPDATE cairn_pg_meta SET value = '99' WHERE key = 'schema_version'",
            &[],
        )
        .unwrap();
    let back = brain.dir.path().join("back.db");
    for output in [
        migrate(&brain, &pg.url, back.to_str().unwrap(), &[]),
        migrate(&brain, &src, &pg.url, &[]),
    ] {
        common::refused(
            &output,
            1,
            "has schema version 99, newer than this cairn understands (18)",
        );
    }
    assert!(!back.exists() || std::fs::metadata(&back).unwrap().len() == 0);
}

#[test]
fn a_server_that_is_down_is_named_without_the_password() {
    let brain = fixture_brain();
    let src = brain.db.to_str().unwrap().to_string();
    // Port 1: nothing listens there.
    let url = "postgres://postgres:hunter2-s3cret@127.0.0.1:1/cairn?password=other-s3cret";
    for (from, to, json) in [
        (src.as_str(), url, false),
        (url, "out.db", false),
        (src.as_str(), url, true),
    ] {
        let extra: &[&str] = if json { &["--json"] } else { &[] };
        let output = migrate(&brain, from, to, extra);
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stderr.contains("PostgreSQL at postgres://postgres@127.0.0.1:1/cairn: cannot connect"),
            "{stderr}"
        );
        assert!(
            !stderr.contains("s3cret") && !stdout.contains("s3cret"),
            "{stderr}{stdout}"
        );
    }
    // TLS is not supported yet: said plainly, still without the password.
    let output = migrate(
        &brain,
        &src,
        "postgres://u:hunter2-s3cret@h/db?sslmode=require",
        &[],
    );
    let stderr = common::refused(&output, 1, "sslmode=require is not supported yet");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn a_destination_holding_another_brain_is_refused() {
    let Some(pg) = TestDb::new() else { return };
    let brain = fixture_brain();
    let src = brain.db.to_str().unwrap().to_string();
    ok_json(&migrate(
        &brain,
        &src,
        &pg.url_with_password("pw-s3cret"),
        &["--json"],
    ));

    // Another brain into the same database.
    let other = Brain::new();
    other.remember("note", Some("other"), "a different brain");
    let output = migrate(
        &other,
        other.db.to_str().unwrap(),
        &pg.url_with_password("pw-s3cret"),
        &[],
    );
    let stderr = common::refused(&output, 1, "already holds a brain");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let n: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM memories", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 9, "nothing of the other brain was written");

    // The PostgreSQL brain into a file holding another brain.
    let before = export(&other, &other.db);
    let output = migrate(&other, &pg.url, other.db.to_str().unwrap(), &[]);
    common::refused(&output, 1, "already holds a brain");
    assert_eq!(export(&other, &other.db), before);

    // A database with tables of something else.
    let foreign = TestDb::new().unwrap();
    foreign
        .client()
        .batch_execute("CREATE TABLE invoices (id int)")
        .unwrap();
    let output = migrate(&brain, &src, &foreign.url, &[]);
    common::refused(&output, 1, "already has tables but no cairn brain");
}

#[test]
fn recall_on_postgres_answers_the_json_of_the_brain_file() {
    let Some(pg) = TestDb::new() else { return };
    let brain = Brain::new();
    let cmd = || {
        let mut cmd = brain.cmd();
        cmd.env("CAIRN_NOW", "2026-06-01T00:00:00Z");
        cmd
    };
    for (memory_type, scope, body) in [
        (
            "note",
            "deploy",
            "rollback the canary release when errors rise",
        ),
        (
            "decision",
            "deploy",
            "the canary gets five percent of traffic",
        ),
        ("fact", "infra", "the database pool holds 50 connections"),
        (
            "note",
            "deploy:staging",
            "staging canary waits an hour before promotion",
        ),
    ] {
        let output = cmd()
            .args([
                "remember",
                "--type",
                memory_type,
                "--scope",
                scope,
                "--body",
                body,
            ])
            .output()
            .unwrap();
        common::succeeded(&output);
    }
    let src = brain.db.to_str().unwrap().to_string();
    ok_json(&migrate(&brain, &src, &pg.url, &["--json"]));
    let url = pg.url_with_password("hunter2-s3cret");
    for query in [
        vec!["canary"],
        vec!["canary", "--scope", "deploy", "--type", "note"],
        vec!["\"canary* AND NEAR(pool"],
        vec!["database pool", "--mode", "hybrid"],
    ] {
        let on_file = cmd()
            .args(["--json", "recall", "--no-touch"])
            .args(&query)
            .output()
            .unwrap();
        let on_flag = cmd()
            .args(["--json", "--store", &url, "recall", "--no-touch"])
            .args(&query)
            .output()
            .unwrap();
        let on_env = cmd()
            .env("CAIRN_STORE", &url)
            .args(["--json", "recall", "--no-touch"])
            .args(&query)
            .output()
            .unwrap();
        let expected = ok_json(&on_file);
        assert_eq!(ok_json(&on_flag), expected, "{query:?}");
        assert_eq!(ok_json(&on_env), expected, "{query:?}");
    }
    let answer = ok_json(
        &cmd()
            .args(["--json", "--store", &url, "recall", "canary"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        answer["results"].as_array().map(Vec::len),
        Some(3),
        "{answer}"
    );
    // A database without a brain: said so, by address, without the password.
    let empty = TestDb::new().unwrap();
    let output = cmd()
        .args([
            "--store",
            &empty.url_with_password("hunter2-s3cret"),
            "recall",
            "canary",
        ])
        .output()
        .unwrap();
    let stderr = common::refused(&output, 1, "this database holds no cairn brain");
    assert!(
        stderr.contains(&empty.name) && !stderr.contains("s3cret"),
        "{stderr}"
    );
}

#[test]
fn a_postgres_store_is_refused_by_every_command_but_recall() {
    let brain = fixture_brain();
    let url = "postgres://postgres:hunter2-s3cret@127.0.0.1:5432/cairn";
    let check = |output: std::process::Output| {
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(
                "cannot use the PostgreSQL store postgres://postgres@127.0.0.1:5432/cairn yet"
            ),
            "{stderr}"
        );
        assert!(
            stderr.contains("cairn migrate --from <url> --to <file>"),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{stderr}");
    };
    check(
        brain
            .cmd()
            .env("CAIRN_STORE", url)
            .args(["remember", "--type", "note", "--body", "x"])
            .output()
            .unwrap(),
    );
    check(
        brain
            .cmd()
            .args(["--store", url, "stats"])
            .output()
            .unwrap(),
    );
    check(
        brain
            .cmd()
            .args(["serve", "--store", url, "--listen", "127.0.0.1:0"])
            .output()
            .unwrap(),
    );
    // The hooks always exit 0: they say why and do nothing.
    let output = brain
        .cmd()
        .env("CAIRN_STORE", url)
        .args(["hook", "session-start"])
        .write_stdin("{}")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("s3cret"));
    // A path in CAIRN_STORE is the brain file, like CAIRN_DB.
    let output = brain
        .cmd()
        .env_remove("CAIRN_DB")
        .env("CAIRN_STORE", &brain.db)
        .args(["--json", "stats"])
        .output()
        .unwrap();
    common::succeeded(&output);
}
