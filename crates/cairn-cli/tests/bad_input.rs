//! End-to-end: bad input gets a clear error and loses nothing.

mod common;

use common::Brain;
use predicates::prelude::*;
use std::os::unix::ffi::OsStrExt;

fn record_count(brain: &Brain) -> i64 {
    brain.json(&["stats"], 0)["records"].as_i64().unwrap()
}

#[test]
fn oversize_body_names_the_limit() {
    let brain = Brain::new();
    brain.remember("note", None, "keep me");
    let huge = "word ".repeat(20_000);
    let path = brain.dir.path().join("huge.txt");
    std::fs::write(&path, &huge).unwrap();
    brain
        .cmd()
        .args(["remember", "--type", "note", "--body-file"])
        .arg(&path)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("over the limit of 65536 bytes")
                .and(predicate::str::contains("nothing was stored")),
        );
    assert_eq!(record_count(&brain), 1);
}

#[test]
fn empty_and_whitespace_bodies_are_refused() {
    let brain = Brain::new();
    for body in ["", "   \n\t "] {
        brain
            .cmd()
            .args(["remember", "--type", "note", "--body", body])
            .assert()
            .code(1)
            .stderr(predicate::str::contains("the body is empty"));
    }
    brain
        .cmd()
        .args(["remember", "--type", "note"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no body"));
}

#[test]
fn invalid_utf8_and_nul_are_refused() {
    let brain = Brain::new();
    let bad = std::ffi::OsStr::from_bytes(b"caf\xff latte");
    brain
        .cmd()
        .args(["remember", "--type", "note", "--body"])
        .arg(bad)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("UTF-8"));
    let path = brain.dir.path().join("nul.txt");
    std::fs::write(&path, b"before\0after").unwrap();
    brain
        .cmd()
        .args(["remember", "--type", "note", "--body-file"])
        .arg(&path)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("NUL"));
    assert_eq!(record_count(&brain), 0);
}

#[test]
fn hidden_unicode_is_stripped_and_reported() {
    let brain = Brain::new();
    let sneaky = "Run the tests\u{200B} first\u{E0041}\u{E0042}\u{202E} always";
    let out = brain.remember("procedure", None, sneaky);
    assert!(out["warnings"].to_string().contains("invisible"), "{out}");
    let body = brain.json(&["show", &out["id"].to_string()], 0)["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(body, "Run the tests first always");
}

#[test]
fn fts_syntax_in_queries_never_errors() {
    let brain = Brain::new();
    brain.remember(
        "note",
        None,
        "The \"quoted\" AND NOT (grouped) text with col:umn and star* and NEAR words",
    );
    for query in [
        "\"",
        "AND",
        "NOT OR",
        "(",
        "col:umn",
        "star*",
        "NEAR(a b)",
        "^start",
        "-x +y",
        "\"unbalanced",
        "'; DROP TABLE memories; --",
        "{}[]",
        "a\"b\"c",
    ] {
        // `--` ends the options, so a query may start with `-`
        let answer = brain.json(&["recall", "--no-touch", "--", query], 0);
        assert!(answer["results"].is_array(), "{query}: {answer}");
    }
    // words inside operator soup are still found, not a false "nothing found"
    assert_eq!(
        brain.json(&["recall", "(grouped) AND \"quoted\"", "--no-touch"], 0)["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        brain.json(&["recall", "star*", "--no-touch"], 0)["results"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn unknown_vocabulary_is_refused_with_the_allowed_values() {
    let brain = Brain::new();
    brain
        .cmd()
        .args(["remember", "--type", "lore", "--body", "x"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("invalid value 'lore'")
                .and(predicate::str::contains("gotcha")),
        );
    brain
        .cmd()
        .args([
            "remember",
            "--type",
            "fact",
            "--confidence",
            "sure",
            "--body",
            "x",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("confirmed, reported, inferred"));
    brain
        .cmd()
        .args([
            "remember",
            "--type",
            "fact",
            "--trust-zone",
            "everyone",
            "--body",
            "x",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "private_self, trusted_collaborator",
        ));
    brain
        .cmd()
        .args([
            "remember", "--type", "fact", "--scope", "a::b", "--body", "x",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("invalid scope"));
    brain
        .cmd()
        .args([
            "remember",
            "--type",
            "fact",
            "--importance",
            "9",
            "--body",
            "x",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("importance 9"));
    brain
        .cmd()
        .args(["recall", "x", "--mode", "psychic"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("hybrid, lexical, semantic"));
    // the exchange format is a vocabulary too: a usage error naming `jsonl`, nothing written
    for command in ["export", "import"] {
        brain
            .cmd()
            .args([command, "--format", "csv", "-"])
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("invalid value 'csv'")
                    .and(predicate::str::contains("jsonl")),
            );
        brain
            .cmd()
            .args([command, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("[possible values: jsonl]"));
    }
    // a usage error is the argument parser's: exit 2 and a message on stderr, even with --json
    brain
        .cmd()
        .args(["--json", "remember", "--type", "lore", "--body", "x"])
        .assert()
        .code(2)
        .stdout("");
    assert_eq!(record_count(&brain), 0);
}

#[test]
fn read_only_mode_refuses_writes_and_keeps_reads() {
    let brain = Brain::new();
    brain.remember("fact", None, "The cache TTL is 300 seconds.");
    brain
        .cmd()
        .env("CAIRN_READ_ONLY", "1")
        .args(["remember", "--type", "fact", "--body", "another"])
        .assert()
        .code(3)
        .stderr(
            predicate::str::contains("read-only")
                .and(predicate::str::contains("nothing was written")),
        );
    let refused = brain
        .cmd()
        .env("CAIRN_READ_ONLY", "1")
        .args(["--json", "forget", "1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "docs/cli.md: a refusal");
    let answer: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(answer["status"], "refused", "{answer}");
    let out = brain
        .cmd()
        .env("CAIRN_READ_ONLY", "1")
        .args(["--json", "recall", "cache TTL"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(record_count(&brain), 1);
}

#[test]
fn a_locked_brain_says_so_and_loses_nothing() {
    let brain = Brain::new();
    brain.remember("fact", None, "first record before the lock");
    // Another process holds the write lock (it says so once it has it).
    let holder = common::LockHolder::hold(&brain.db);
    brain
        .cmd()
        .env("CAIRN_BUSY_TIMEOUT_MS", "300")
        .args([
            "remember",
            "--type",
            "fact",
            "--body",
            "second record during the lock",
        ])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("locked by another process")
                .and(predicate::str::contains("nothing was written")),
        );
    holder.release();
    brain.remember("fact", None, "second record after the lock");
    assert_eq!(record_count(&brain), 2);
}

#[test]
fn a_corrupted_file_names_doctor_and_is_not_touched() {
    let brain = Brain::new();
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&brain.db, &garbage).unwrap();
    brain
        .cmd()
        .args(["recall", "anything"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("cairn doctor")
                .and(predicate::str::contains("nothing was changed or deleted")),
        );
    brain
        .cmd()
        .args(["remember", "--type", "note", "--body", "x"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cairn doctor"));
    brain
        .cmd()
        .args(["doctor"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(".recover"));
    assert_eq!(std::fs::read(&brain.db).unwrap(), garbage);
}

#[test]
fn a_newer_schema_is_refused_untouched() {
    let brain = Brain::new();
    brain.remember("fact", None, "made by this version");
    brain.sql("PRAGMA user_version = 99;");
    let before = std::fs::read(&brain.db).unwrap();
    brain
        .cmd()
        .args(["recall", "version"])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("schema version 99")
                .and(predicate::str::contains("upgrade cairn")),
        );
    assert_eq!(std::fs::read(&brain.db).unwrap(), before);
}

#[test]
fn a_malformed_import_line_is_reported_and_the_rest_imported() {
    let brain = Brain::new();
    let path = brain.dir.path().join("in.jsonl");
    std::fs::write(
        &path,
        concat!(
            "{\"type\":\"fact\",\"body\":\"line one is fine\"}\n",
            "{not json\n",
            "{\"type\":\"wizardry\",\"body\":\"unknown type\"}\n",
            "{\"type\":\"note\"}\n",
            "\n",
            "{\"type\":\"note\",\"body\":\"line six is fine\",\"tags\":[\"a\"]}\n",
        ),
    )
    .unwrap();
    // exit 1: some lines failed; the others are stored and the report names the failures
    let report = brain.json(&["import", path.to_str().unwrap()], 1);
    assert_eq!(report["summary"]["added"], 2);
    assert_eq!(report["summary"]["error"], 3);
    let errors: Vec<i64> = report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["status"] == "error")
        .map(|l| l["line"].as_i64().unwrap())
        .collect();
    assert_eq!(errors, [2, 3, 4]);
    assert!(
        report["lines"][1]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(record_count(&brain), 2);
    // imported records are stamped `imported`
    let listed = brain.json(&["list"], 0);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["trust"] == "imported")
    );
}

#[test]
fn enclosed_letters_find_their_word_and_a_lone_mark_says_why_nothing_was_searched() {
    // Regression: a query term in which the full-text index finds no token (a circled word, a
    // combining mark typed alone) matched nothing, without a word of why.
    let brain = Brain::new();
    let stored = brain.remember("fact", None, "We deploy on Tuesdays.");
    assert_eq!(
        brain.recall_ids(&["ⓓⓔⓟⓛⓞⓨ"]),
        vec![stored["id"].as_i64().unwrap()]
    );
    let answer = brain.json(&["recall", "\u{93f}"], 0);
    assert_eq!(answer["results"], serde_json::json!([]), "{answer}");
    assert!(
        answer["note"]
            .as_str()
            .unwrap_or("")
            .contains("combining marks"),
        "{answer}"
    );
}
