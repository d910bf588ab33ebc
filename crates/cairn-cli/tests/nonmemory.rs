//! What is not a memory (docs/design.md §9) on the real binary: tasks, measures, the activity log, the
//! identity, awareness — each reachable from the CLI, none of them ever in recall ranking.

mod common;

use common::Brain;
use serde_json::Value;

#[test]
fn task_due_as_an_age_counts_forward() {
    // Regression: `--due 7d` was read as seven days ago.
    let brain = Brain::new();
    let output = brain
        .cmd()
        .env("CAIRN_NOW", "2026-03-01T12:00:00Z")
        .args(["--json", "task", "add", "ship the beta", "--due", "7d"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let task: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(task["due_at"], "2026-03-08T12:00:00Z", "{task}");
    // a date stays that date
    let dated = brain.json(&["task", "add", "renew", "--due", "2030-02-01"], 0);
    assert_eq!(dated["due_at"], "2030-02-01T00:00:00Z", "{dated}");
}

#[test]
fn awareness_expires_as_an_age_counts_forward_and_a_past_time_is_refused() {
    let brain = Brain::new();
    let add = |expires: &str| {
        brain
            .cmd()
            .env("CAIRN_NOW", "2026-03-01T12:00:00Z")
            .args([
                "--json",
                "awareness",
                "add",
                "pairing",
                "--expires",
                expires,
            ])
            .output()
            .unwrap()
    };
    let output = add("2h");
    assert!(output.status.success(), "{output:?}");
    let added: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        added["item"]["expires_at"], "2026-03-01T14:00:00Z",
        "{added}"
    );
    let output = add("2026-02-01");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("already past"),
        "{output:?}"
    );
}

#[test]
fn tasks_are_owed_until_done() {
    let brain = Brain::new();
    let task = brain.json(
        &[
            "task",
            "add",
            "migrate the queue to Postgres",
            "--due",
            "2030-02-01",
        ],
        0,
    );
    assert_eq!(task["status"], "open");
    brain.json(&["task", "add", "renew my passport", "--personal"], 0);
    let open = brain.json(&["task", "list"], 0);
    assert_eq!(open.as_array().unwrap().len(), 2);
    assert_eq!(
        open[0]["title"], "migrate the queue to Postgres",
        "due ones first"
    );
    let done = brain.json(&["task", "done", "1"], 0);
    assert_eq!(done["status"], "done");
    assert!(done["done_at"].is_string());
    // done twice is still done, not an error
    brain.json(&["task", "done", "1"], 0);
    assert_eq!(
        brain.json(&["task", "list"], 0).as_array().unwrap().len(),
        1
    );
    assert_eq!(
        brain
            .json(&["task", "list", "--all"], 0)
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let missing = brain.json(&["task", "done", "99"], 1);
    assert!(missing["error"].as_str().unwrap().contains("no task 99"));
    // a secret typed into a task is redacted like anywhere else
    let secret = brain.json(
        &[
            "task",
            "add",
            "use token ghp_abcdefghijklmnopqrstuvwxyz0123456789 for the bot",
        ],
        0,
    );
    assert!(
        !secret["title"].as_str().unwrap().contains("ghp_abc"),
        "{secret}"
    );
}

#[test]
fn measures_keep_the_last_value_and_the_trend() {
    let brain = Brain::new();
    for value in ["120", "118", "95"] {
        brain.json(
            &[
                "measure",
                "record",
                "test-suite-seconds",
                value,
                "--unit",
                "s",
            ],
            0,
        );
    }
    let summary = brain.json(&["measure", "record", "coverage", "81.5", "--unit", "%"], 0);
    assert_eq!(summary["trend"], "first reading");
    let all = brain.json(&["measure", "show"], 0);
    let suite = all
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "test-suite-seconds")
        .unwrap()
        .clone();
    assert_eq!(suite["last"], 95.0);
    assert_eq!(suite["previous"], 118.0);
    assert_eq!(suite["trend"], "falling");
    assert_eq!(suite["readings"], 3);
    let negative = brain.json(&["measure", "record", "balance", "-3.5"], 0);
    assert_eq!(negative["last"], -3.5);
    let text = brain
        .cmd()
        .args(["measure", "show", "test-suite-seconds"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("test-suite-seconds: 95s"), "{text}");
    assert!(text.contains("falling"), "{text}");
}

#[test]
fn identity_is_one_short_text() {
    let brain = Brain::new();
    assert_eq!(brain.json(&["identity", "show"], 0), Value::Null);
    brain.json(
        &[
            "identity",
            "set",
            "I am the release agent of this repository.",
        ],
        0,
    );
    let identity = brain.json(&["identity", "set", "I am the build agent."], 0);
    assert_eq!(identity["body"], "I am the build agent.");
    assert_eq!(
        brain.json(&["identity", "show"], 0)["body"],
        "I am the build agent."
    );
    let long = "word ".repeat(600);
    let refused = brain.json(&["identity", "set", &long], 1);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("over the limit of 2000"),
        "{refused}"
    );
}

#[test]
fn awareness_holds_at_most_ten_live_items_with_expiry() {
    let brain = Brain::new();
    for i in 0..10 {
        brain.json(
            &[
                "awareness",
                "add",
                &format!("item {i}"),
                "--expires",
                &format!("{}h", i + 1),
            ],
            0,
        );
    }
    let added = brain.json(&["awareness", "add", "the eleventh"], 0);
    assert_eq!(
        added["dropped"]["body"], "item 0",
        "the one expiring soonest goes: {added}"
    );
    let live = brain.json(&["awareness", "list"], 0);
    assert_eq!(live.as_array().unwrap().len(), 10);
    // an item whose time has passed is not live
    let expired = brain
        .cmd()
        .env("CAIRN_PROJECT", "test-project")
        .args([
            "--json",
            "awareness",
            "add",
            "already gone",
            "--expires",
            "2001-01-01",
        ])
        .output()
        .unwrap();
    assert_eq!(expired.status.code(), Some(1), "a past time is refused");
    let dropped = brain.json(&["awareness", "drop", "2"], 0);
    assert_eq!(dropped["dropped"], true);
    assert_eq!(
        brain
            .json(&["awareness", "list"], 0)
            .as_array()
            .unwrap()
            .len(),
        9
    );
}

#[test]
fn the_log_tells_what_the_last_session_did() {
    let brain = Brain::new();
    brain.remember("note", None, "before the session");
    let start = format!(
        "{{\"session_id\":\"s1\",\"cwd\":\"{}\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\"}}",
        brain.dir.path().display()
    );
    let output = brain
        .cmd()
        .args(["hook", "session-start"])
        .write_stdin(start)
        .output()
        .unwrap();
    assert!(output.status.success());
    brain.remember(
        "gotcha",
        Some("flaky test"),
        "test_upload is flaky under load; retry once",
    );
    brain.json(&["task", "add", "fix test_upload"], 0);
    let session = brain.json(&["log", "--last-session"], 0);
    let ops: Vec<&str> = session
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        vec!["session_start", "remember", "task_add"],
        "{session}"
    );
    let text = brain
        .cmd()
        .args(["log", "--last-session"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("remember #2 flaky test"), "{text}");
    assert!(text.contains("task_add task 1: fix test_upload"), "{text}");
}

#[test]
fn nothing_that_is_not_a_memory_enters_recall() {
    let brain = Brain::new();
    let word = "zanzibarquokka";
    brain.json(&["task", "add", &format!("{word} task")], 0);
    brain.json(&["measure", "record", &format!("{word}-measure"), "1"], 0);
    brain.json(&["identity", "set", &format!("{word} identity")], 0);
    brain.json(&["awareness", "add", &format!("{word} awareness")], 0);
    let answer = brain.json(&["recall", word], 0);
    assert_eq!(answer["results"].as_array().unwrap().len(), 0, "{answer}");
    // a memory with the word is found, alone
    brain.remember("note", None, &format!("{word} in a real memory"));
    let answer = brain.json(&["recall", word], 0);
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{answer}");
    assert_eq!(results[0]["type"], "note");
    assert_eq!(brain.json(&["stats"], 0)["records"], 1);
}

#[test]
fn review_lists_due_records_and_open_conflicts() {
    let brain = Brain::new();
    assert_eq!(
        brain.json(&["review"], 0)["due"].as_array().unwrap().len(),
        0
    );
    brain.json(
        &[
            "remember",
            "--type",
            "access",
            "--title",
            "db creds",
            "--body",
            "The DB password lives in the vault under db/prod",
            "--review",
            "2021-05-01",
        ],
        0,
    );
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "Dark mode is enabled by default.",
        ],
        0,
    );
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "Dark mode is disabled by default.",
        ],
        0,
    );
    let review = brain.json(&["review"], 0);
    assert_eq!(review["due"][0]["id"], 1, "{review}");
    assert_eq!(review["conflicts"].as_array().unwrap().len(), 1, "{review}");
    // inbox commands on an empty inbox
    assert_eq!(brain.json(&["inbox"], 0).as_array().unwrap().len(), 0);
    let missing = brain.json(&["inbox", "accept", "7"], 1);
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("no inbox item 7")
    );
}
