//! End-to-end: JSONL export and import round-trip losslessly.

mod common;

use common::{Brain, doctor_check};
use serde_json::Value;

fn export_lines(brain: &Brain) -> Vec<Value> {
    let out = brain
        .cmd()
        .args(["export", "--format", "jsonl"])
        .output()
        .unwrap();
    common::succeeded(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn export_import_round_trips_records_history_links_and_events() {
    let source = Brain::new();
    let old = source.remember("decision", Some("Queue"), "Use Redis for the queue.");
    let old_id = old["id"].as_i64().unwrap().to_string();
    source.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Queue two",
            "--body",
            "Use Postgres for the queue.",
            "--supersedes",
            &old_id,
        ],
        0,
    );
    let fact = source.remember("fact", Some("Port"), "The API listens on 8080.");
    source.json(
        &[
            "update",
            &fact["id"].to_string(),
            "--body",
            "The API listens on 8081.",
        ],
        0,
    );
    source.json(
        &[
            "remember",
            "--type",
            "preference",
            "--personal",
            "--body",
            "Answer in English.",
            "--tags",
            "style,lang",
            "--external-id",
            "pref-1",
        ],
        0,
    );
    source.json(&["scope", "declare", "team:infra"], 0);
    let lines = export_lines(&source);
    assert_eq!(lines[0]["kind"], "header");
    let file = source.dir.path().join("export.jsonl");
    source
        .cmd()
        .args(["export", file.to_str().unwrap()])
        .assert()
        .success();

    let target = Brain::new();
    let report = target.json(&["import", file.to_str().unwrap()], 0);
    // 4 records + 1 scope, and the graph's lines: a file that carries the graph restores it
    // as it was rather than extracting entities again.
    let graph_lines = lines
        .iter()
        .filter(|l| {
            [
                "relation_type",
                "entity",
                "edge",
                "quarantined_edge",
                "generated",
            ]
            .contains(&l["kind"].as_str().unwrap_or(""))
        })
        .count();
    assert!(graph_lines > 0, "the records' entities are in the export");
    assert_eq!(report["summary"]["added"], 5 + graph_lines, "{report}");
    assert_eq!(report["summary"]["error"], 0);
    let again = export_lines(&target);
    let memories = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["kind"] == "memory")
            .cloned()
            .collect()
    };
    assert_eq!(
        memories(&lines),
        memories(&again),
        "records and their history survive the round trip"
    );
    let events = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|l| l["kind"] == "event")
            .map(|l| serde_json::json!([l["op"], l["receipt"], l["memory_id"]]))
            .collect()
    };
    let (before, after) = (events(&lines), events(&again));
    assert_eq!(
        after[..before.len()],
        before[..],
        "every event comes back with its receipt"
    );
    assert!(
        again
            .iter()
            .any(|l| l["kind"] == "scope" && l["scope"] == "team:infra")
    );

    // importing the same file again adds nothing: every line is a no-op
    let twice = target.json(&["import", file.to_str().unwrap()], 0);
    assert_eq!(twice["summary"]["added"], 0, "{twice}");
    assert_eq!(twice["summary"]["updated"], 0, "{twice}");
    assert_eq!(target.json(&["stats"], 0)["records"], 4);
}

#[test]
fn import_keeps_external_id_created_at_and_project() {
    let brain = Brain::new();
    let path = brain.dir.path().join("turns.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"episode\",\"body\":\"Caroline: I went to the support group yesterday.\",\"external_id\":\"D1:3\",\"created_at\":\"2023-05-08T13:56:00Z\",\"project\":\"conv-26\"}\n",
    )
    .unwrap();
    brain.json(&["import", path.to_str().unwrap()], 0);
    let answer = brain.json(
        &[
            "--project",
            "conv-26",
            "recall",
            "support group",
            "--as-of",
            "2023-06-01",
        ],
        0,
    );
    let first = &answer["results"][0];
    assert_eq!(first["external_id"], "D1:3");
    assert_eq!(first["created_at"], "2023-05-08T13:56:00Z");
    assert_eq!(first["project"], "conv-26");
    assert_eq!(first["type"], "episode");
}

#[test]
fn recall_batch_answers_each_line_in_order() {
    let brain = Brain::new();
    brain.remember("fact", None, "Apples are red.");
    brain.remember("fact", None, "Bananas are yellow.");
    let path = brain.dir.path().join("q.jsonl");
    std::fs::write(&path, "{\"query\":\"bananas\"}\n{\"query\":\"apples\",\"limit\":1}\n{\"bogus\":1}\n{\"query\":\"kiwis\"}\n").unwrap();
    let out = brain
        .cmd()
        .args(["recall", "--batch", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0]["query"], "bananas");
    assert!(
        answers[0]["results"][0]["body"]
            .as_str()
            .unwrap()
            .contains("yellow")
    );
    assert_eq!(answers[1]["results"].as_array().unwrap().len(), 1);
    assert_eq!(answers[2]["status"], "error");
    assert!(answers[3]["results"].as_array().unwrap().is_empty());
}

#[test]
fn doctor_repair_vacuums_when_space_was_freed_inside_pages() {
    let brain = Brain::new();
    brain.remember("fact", None, "Space freed inside pages is not a free page.");
    brain.sql("INSERT INTO meta (key, value) VALUES ('vacuum_due', 'a test freed space');");
    // Not a defect: doctor stays ok and says what --repair would do.
    let report = brain.json(&["doctor"], 0);
    assert_eq!(report["ok"], true);
    let pages = doctor_check(&report, "free pages");
    assert!(
        pages["detail"]
            .as_str()
            .unwrap()
            .contains("a test freed space"),
        "{pages}"
    );
    let repaired = brain.json(&["doctor", "--repair"], 0);
    assert!(
        repaired["repaired"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().starts_with("VACUUM")),
        "{repaired}"
    );
    let again = brain.json(&["doctor", "--repair"], 0);
    assert!(again["repaired"].as_array().unwrap().is_empty(), "{again}");
}

#[test]
fn doctor_reports_ok_and_repair_is_idempotent() {
    let brain = Brain::new();
    brain.remember("fact", None, "Doctor checks the index.");
    let report = brain.json(&["doctor"], 0);
    assert_eq!(report["ok"], true);
    // break the derived index behind cairn's back, then repair twice
    brain.sql("INSERT INTO memories_fts(memories_fts) VALUES('delete-all');");
    let broken = brain.json(&["doctor"], 1);
    assert_eq!(broken["ok"], false);
    let repaired = brain.json(&["doctor", "--repair"], 0);
    assert!(!repaired["repaired"].as_array().unwrap().is_empty());
    let again = brain.json(&["doctor", "--repair"], 0);
    assert!(again["repaired"].as_array().unwrap().is_empty());
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
    assert_eq!(brain.recall_ids(&["doctor"]).len(), 1);
}
