//! End-to-end: the knowledge graph through the real binary — extraction on write, relate /
//! unrelate over time, blast radius, clusters, and the bad input of issue 5.

mod common;

use common::{Brain, doctor_check};
use serde_json::Value;

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .expect("an array")
        .iter()
        .map(|v| v[field].as_str().unwrap_or_default().to_string())
        .collect()
}

fn add_entity(brain: &Brain, name: &str, kind: &str) {
    let added = brain.json(&["entity", "add", name, "--type", kind], 0);
    assert_eq!(added["status"], "added", "{added}");
}

#[test]
fn remember_links_the_entities_its_text_mentions() {
    let brain = Brain::new();
    let stored = brain.remember(
        "gotcha",
        Some("pnpm lockfile drift"),
        "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; ask @maria. #ci",
    );
    let id = stored["id"].as_i64().unwrap();
    let entities = brain.json(&["entities"], 0);
    let mut found = names(&entities, "name");
    found.sort();
    assert_eq!(
        found,
        vec![
            "#ci",
            "@maria",
            "ERR_PNPM_OUTDATED_LOCKFILE",
            "pnpm-lock.yaml"
        ]
    );
    assert!(
        entities
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["mentions"] == 1)
    );
    let edges = brain.json(&["edges", &format!("#{id}")], 0);
    let relations: Vec<String> = names(&edges["edges"], "relation");
    assert_eq!(relations.iter().filter(|r| *r == "mentions").count(), 4);
    // the file knows which record talks about it
    let around = brain.json(&["neighbors", "pnpm-lock.yaml", "--direction", "in"], 0);
    assert_eq!(around["neighbors"][0]["node"]["id"], id);
    assert_eq!(around["neighbors"][0]["relation"], "mentions");
    // co-occurring entities are related with low confidence, each to the next one mentioned
    let graph = brain.json(&["graph", "--relation", "relates", "--limit", "0"], 0);
    assert_eq!(graph["edges"], 3);
    assert_eq!(graph["listed"][0]["confidence"], 0.3);
}

#[test]
fn an_update_that_drops_a_mention_invalidates_it_and_history_keeps_it() {
    let brain = Brain::new();
    let stored = brain.remember(
        "note",
        Some("db config"),
        "Settings live in config/db.toml.",
    );
    let id = stored["id"].as_i64().unwrap().to_string();
    brain.json(
        &[
            "update",
            &id,
            "--body",
            "Settings live in config/database.yaml now.",
        ],
        0,
    );
    let edges = brain.json(&["edges", &id, "--history"], 0);
    let current: Vec<String> = edges["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["dst"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(current, vec!["config/database.yaml"]);
    let ops: Vec<String> = names(&edges["history"], "op");
    assert_eq!(ops, vec!["assert", "invalidate", "assert"]);
    assert_eq!(edges["intervals"].as_array().unwrap().len(), 2);
}

#[test]
fn blast_radius_scores_by_type_and_hop_and_cycles_terminate() {
    let brain = Brain::new();
    for (name, kind) in [
        ("postgres", "service"),
        ("api", "service"),
        ("web", "service"),
        ("billing", "service"),
    ] {
        add_entity(&brain, name, kind);
    }
    brain.json(&["relate", "api", "requires", "postgres"], 0);
    brain.json(&["relate", "web", "requires", "api"], 0);
    brain.json(&["relate", "billing", "part_of", "api"], 0);
    // a cycle back to the start
    brain.json(&["relate", "postgres", "affects", "web"], 0);
    let radius = brain.json(
        &["neighbors", "postgres", "--direction", "in", "--depth", "5"],
        0,
    );
    let got: Vec<(String, i64, f64)> = radius["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"]["name"].as_str().unwrap().to_string(),
                n["hop"].as_i64().unwrap(),
                n["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("api".to_string(), 1, 1.0),
            ("web".to_string(), 2, 0.3),
            ("billing".to_string(), 2, 0.24),
        ]
    );
    assert_eq!(radius["truncated"], false);
    // out: what postgres affects, then what that requires
    let out = brain.json(
        &[
            "neighbors",
            "postgres",
            "--direction",
            "out",
            "--depth",
            "1",
        ],
        0,
    );
    assert_eq!(
        names(
            &out["neighbors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["node"].clone())
                .collect::<Value>(),
            "name"
        ),
        vec!["web"]
    );
    let text = brain
        .cmd()
        .args(["neighbors", "postgres", "--direction", "in"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("what depends on it"), "{text}");
    assert!(
        text.contains("1.000  hop 1  api (service)   via: api requires postgres"),
        "{text}"
    );
}

#[test]
fn edges_are_bi_temporal_and_any_past_state_is_queryable() {
    let brain = Brain::new();
    add_entity(&brain, "queue", "service");
    add_entity(&brain, "redis", "service");
    let first = brain.json(
        &[
            "relate",
            "queue",
            "requires",
            "redis",
            "--from",
            "2025-01-01",
        ],
        0,
    );
    assert_eq!(first["status"], "asserted");
    // asserting an open edge again changes nothing
    assert_eq!(
        brain.json(&["relate", "queue", "requires", "redis"], 0)["status"],
        "already_asserted"
    );
    let ended = brain.json(
        &[
            "unrelate",
            "queue",
            "requires",
            "redis",
            "--at",
            "2025-06-01",
        ],
        0,
    );
    assert_eq!(ended["status"], "invalidated");
    assert_eq!(ended["edge"]["valid_to"], "2025-06-01T00:00:00Z");
    // nothing open any more: a no-op, reported
    let again = brain.json(&["unrelate", "queue", "requires", "redis"], 0);
    assert_eq!(again["status"], "nothing_open");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("nothing changed")
    );
    let at = |time: &str| {
        brain.json(&["graph", "--as-of", time], 0)["edges"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(at("2024-12-31"), 0);
    assert_eq!(at("2025-01-01"), 1);
    assert_eq!(at("2025-05-31T23:59:59Z"), 1);
    assert_eq!(at("2025-06-01"), 0, "validity is half-open [from, to)");
    // a fresh assert opens a new interval; history shows both
    brain.json(
        &[
            "relate",
            "queue",
            "requires",
            "redis",
            "--from",
            "2025-09-01",
            "--to",
            "2025-10-01",
        ],
        0,
    );
    assert_eq!(at("2025-09-15"), 1);
    assert_eq!(at("2025-10-01"), 0);
    let history = brain.json(&["edges", "queue", "--history"], 0);
    assert_eq!(
        names(&history["history"], "op"),
        vec!["assert", "invalidate", "assert", "invalidate"]
    );
    // before anything at all
    let early = brain.json(&["graph", "--as-of", "1999-01-01"], 0);
    assert_eq!(early["edges"], 0);
    assert!(
        early["note"]
            .as_str()
            .unwrap()
            .contains("earliest edge is valid from 2025-01-01")
    );
    let early = brain.json(&["neighbors", "queue", "--as-of", "1999-01-01"], 0);
    assert_eq!(early["reached"], 0);
    assert!(early["note"].is_string());
}

#[test]
fn superseding_a_record_records_a_supersedes_edge() {
    let brain = Brain::new();
    let old = brain.remember(
        "decision",
        Some("queue backend"),
        "We use Redis for the job queue.",
    );
    let old_id = old["id"].as_i64().unwrap().to_string();
    let new = brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "queue backend v2",
            "--body",
            "We use Postgres SKIP LOCKED for the job queue.",
            "--supersedes",
            &old_id,
        ],
        0,
    );
    let new_id = new["id"].as_i64().unwrap();
    let edges = brain.json(&["edges", &old_id], 0);
    let supersedes: Vec<&Value> = edges["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["relation"] == "supersedes")
        .collect();
    assert_eq!(supersedes.len(), 1);
    assert_eq!(supersedes[0]["src"]["id"], new_id);
    assert_eq!(supersedes[0]["dst"]["status"], "superseded");
}

#[test]
fn unknown_endpoints_are_refused_or_quarantined_until_they_exist() {
    let brain = Brain::new();
    add_entity(&brain, "api", "service");
    let refused = brain.json(&["relate", "api", "requires", "vault"], 3);
    assert_eq!(refused["status"], "refused");
    let message = refused["error"].as_str().unwrap();
    assert!(message.contains("\"vault\""), "{message}");
    assert!(message.contains("--allow-dangling"), "{message}");
    let missing_record = brain.json(&["relate", "#99", "relates", "api"], 3);
    assert!(
        missing_record["error"]
            .as_str()
            .unwrap()
            .contains("no record #99")
    );
    let kept = brain.json(
        &["relate", "api", "requires", "vault", "--allow-dangling"],
        0,
    );
    assert_eq!(kept["status"], "quarantined");
    assert_eq!(brain.json(&["graph"], 0)["edges"], 0);
    // the doctor mentions what waits in quarantine
    let doctor = brain.json(&["doctor"], 0);
    let graph_check = doctor_check(&doctor, "graph");
    assert!(
        graph_check["detail"]
            .as_str()
            .unwrap()
            .contains("1 edge(s) wait in quarantine")
    );
    let added = brain.json(
        &[
            "entity",
            "add",
            "Vault",
            "--type",
            "service",
            "--alias",
            "hashicorp vault",
        ],
        0,
    );
    assert_eq!(added["promoted_from_quarantine"], 1);
    let radius = brain.json(&["neighbors", "hashicorp vault", "--direction", "in"], 0);
    assert_eq!(radius["neighbors"][0]["node"]["name"], "api");
}

#[test]
fn unknown_relation_types_are_refused_unless_declared() {
    let brain = Brain::new();
    add_entity(&brain, "api", "service");
    add_entity(&brain, "alice", "person");
    let refused = brain.json(&["relate", "alice", "owns", "api"], 3);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("cairn relation-type declare owns")
    );
    brain.json(&["relation-type", "declare", "owns", "--weight", "0.9"], 0);
    assert_eq!(
        brain.json(&["relate", "alice", "owns", "api"], 0)["status"],
        "asserted"
    );
    let radius = brain.json(&["neighbors", "api", "--direction", "in"], 0);
    assert_eq!(radius["neighbors"][0]["score"], 0.9);
    let types = brain.json(&["relation-type", "list"], 0);
    assert_eq!(types.as_array().unwrap().len(), 7);
    // built-ins keep their weights
    let builtin = brain.json(
        &["relation-type", "declare", "requires", "--weight", "0.1"],
        1,
    );
    assert!(builtin["error"].as_str().unwrap().contains("built-in"));
}

#[test]
fn bad_graph_input_says_what_is_wrong() {
    let brain = Brain::new();
    add_entity(&brain, "api", "service");
    add_entity(&brain, "db", "service");
    let check = |args: &[&str], code: i32, needle: &str| {
        let answer = brain.json(args, code);
        let error = answer["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains(needle), "{args:?}: {error}");
    };
    check(
        &["relate", "api", "requires", "api"],
        1,
        "two different ends",
    );
    check(
        &[
            "relate",
            "api",
            "requires",
            "db",
            "--from",
            "2025-02-01",
            "--to",
            "2025-01-01",
        ],
        1,
        "not after --from",
    );
    check(
        &["relate", "api", "requires", "db", "--confidence", "2"],
        1,
        "out of range",
    );
    check(
        &["relate", "api", "re/quires", "db"],
        1,
        "cannot be a relation type",
    );
    check(
        &["relate", "api", "requires", "db", "--from", "someday"],
        1,
        "cannot read",
    );
    check(&["relate", "", "requires", "db"], 1, "empty");
    check(
        &["neighbors", "nowhere"],
        1,
        "nothing in this brain is called",
    );
    // a wrong direction is a usage error (exit 2, on stderr) naming the allowed words
    let sideways = brain
        .cmd()
        .args(["--json", "neighbors", "api", "--direction", "sideways"])
        .output()
        .unwrap();
    assert_eq!(sideways.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&sideways.stderr).contains("in, out, both"));
    check(
        &["entity", "add", "42", "--type", "service"],
        1,
        "looks like a record id",
    );
    check(
        &["entity", "add", "x", "--type", "Not A Type"],
        1,
        "cannot be an entity type",
    );
    brain.json(
        &["relate", "api", "requires", "db", "--from", "2025-03-01"],
        0,
    );
    check(
        &["unrelate", "api", "requires", "db", "--at", "2025-01-01"],
        1,
        "before it started",
    );
    // nothing was written by the refusals
    assert_eq!(brain.json(&["graph"], 0)["edges"], 1);
}

#[test]
fn a_hard_forget_invalidates_the_records_edges() {
    let brain = Brain::new();
    let stored = brain.remember("note", None, "The deploy script is scripts/deploy.sh.");
    let id = stored["id"].as_i64().unwrap().to_string();
    assert_eq!(brain.json(&["graph"], 0)["edges"], 1);
    brain.json(&["forget", &id, "--hard"], 0);
    assert_eq!(brain.json(&["graph"], 0)["edges"], 0);
    let file = brain.json(&["edges", "scripts/deploy.sh", "--history"], 0);
    assert_eq!(names(&file["history"], "op"), vec!["assert", "invalidate"]);
}

#[test]
fn records_of_another_project_stay_out_of_the_graph() {
    let brain = Brain::new();
    brain.json(
        &[
            "--project",
            "other",
            "remember",
            "--type",
            "note",
            "--body",
            "Secret plan in plans/secret.md",
        ],
        0,
    );
    assert_eq!(brain.json(&["graph"], 0)["edges"], 0);
    let refused = brain.json(&["neighbors", "#1"], 1);
    assert!(refused["error"].as_str().unwrap().contains("no record #1"));
    let file = brain.json(&["neighbors", "plans/secret.md"], 0);
    assert_eq!(file["reached"], 0);
}

fn cluster_brain(order: &[usize]) -> (Brain, String) {
    let brain = Brain::new();
    for i in 0..10 {
        brain.json(
            &[
                "remember",
                "--type",
                "note",
                "--title",
                &format!("note {i}"),
                "--body",
                &format!("plain words number {i} of ten"),
                "--allow-duplicate",
            ],
            0,
        );
    }
    // two groups: 1..=5 (a chain plus chords) and 6..=10
    let edges = [
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 5),
        (1, 3),
        (2, 4),
        (3, 5),
        (6, 7),
        (7, 8),
        (8, 9),
        (9, 10),
        (6, 8),
        (7, 9),
        (8, 10),
        (5, 6),
    ];
    for &i in order {
        let (a, b) = edges[i];
        brain.json(&["relate", &a.to_string(), "relates", &b.to_string()], 0);
    }
    let output = brain
        .cmd()
        .args(["--json", "clusters", "--min-size", "3"])
        .output()
        .unwrap();
    assert!(output.status.success());
    (brain, String::from_utf8(output.stdout).unwrap())
}

#[test]
fn clusters_are_byte_identical_whatever_the_insertion_order() {
    let forward: Vec<usize> = (0..15).collect();
    let shuffled = vec![9, 3, 14, 0, 7, 12, 5, 1, 11, 8, 2, 13, 6, 10, 4];
    let (_brain, first) = cluster_brain(&forward);
    let (_other, second) = cluster_brain(&shuffled);
    assert_eq!(first, second);
    let answer: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(answer["converged"], true);
    let members: Vec<Vec<i64>> = answer["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_i64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(members, vec![vec![1, 2, 3, 4, 5], vec![6, 7, 8, 9, 10]]);
    assert_eq!(answer["clusters"][0]["id"], 1);
    assert_eq!(
        answer["clusters"][0]["member_hash"].as_str().unwrap().len(),
        64
    );
}

#[test]
fn the_doctor_rebuilds_tampered_edge_intervals_from_the_log() {
    let brain = Brain::new();
    brain.remember("note", None, "Touches src/app.rs and src/db.rs.");
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
    brain.sql(
        "DELETE FROM edges WHERE relation = 'relates'; UPDATE edges SET valid_from = '2000-01-01T00:00:00Z';",
    );
    let sick = brain.json(&["doctor"], 1);
    assert_eq!(sick["ok"], false);
    let repaired = brain.json(&["doctor", "--repair"], 0);
    assert!(
        repaired["repaired"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("edge intervals"))
    );
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
    assert_eq!(brain.json(&["graph"], 0)["edges"], 3);
}

#[test]
fn human_output_reads_well() {
    let brain = Brain::new();
    add_entity(&brain, "api", "service");
    let stored = brain.remember(
        "decision",
        Some("API needs Postgres"),
        "The api service requires postgres 16.",
    );
    let id = stored["id"].as_i64().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = brain.cmd().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let related = run(&["relate", &id, "affects", "api"]);
    assert!(
        related.starts_with(&format!("related: #{id} affects api, valid from ")),
        "{related}"
    );
    let graph = run(&["graph"]);
    assert!(
        graph.contains("edges between 1 records and 1 entities"),
        "{graph}"
    );
    assert!(graph.contains("API needs Postgres"), "{graph}");
    let entities = run(&["entities"]);
    assert!(entities.contains("api"), "{entities}");
    let types = run(&["relation-type", "list"]);
    assert!(
        types.contains("requires       weight 1.0 built-in"),
        "{types}"
    );
}

fn fixture(brain: &Brain, name: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::copy(&path, &brain.db).expect("fixture present");
}

#[test]
fn a_schema_v1_brain_migrates_to_the_graph_schema() {
    let brain = Brain::new();
    fixture(&brain, "brain-v1.db");
    let doctor = brain.json(&["--project", "fixture-project", "doctor"], 0);
    assert_eq!(doctor["schema_version"], 11);
    assert_eq!(doctor["ok"], true);
    assert_eq!(brain.json(&["graph"], 0)["edges"], 0);
    // records from before the graph are linked once by relink; a second run changes nothing
    let relinked = brain.json(&["entity", "relink"], 0);
    assert!(relinked["records"].as_i64().unwrap() > 0);
    assert_eq!(brain.json(&["entity", "relink"], 0)["edges_written"], 0);
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
    // the migrated brain takes graph writes
    let stored = brain.json(
        &[
            "--project",
            "fixture-project",
            "remember",
            "--type",
            "note",
            "--body",
            "After the migration src/main.rs changed.",
        ],
        0,
    );
    let id = stored["id"].as_i64().unwrap().to_string();
    let edges = brain.json(&["--project", "fixture-project", "edges", &id], 0);
    assert_eq!(edges["edges"][0]["dst"]["name"], "src/main.rs");
}

#[test]
fn a_schema_v2_brain_opens_with_its_graph() {
    let brain = Brain::new();
    fixture(&brain, "brain-v2.db");
    let project = ["--project", "fixture-project"];
    let run = |args: &[&str], code: i32| {
        let mut all = project.to_vec();
        all.extend_from_slice(args);
        brain.json(&all, code)
    };
    assert_eq!(run(&["doctor"], 0)["ok"], true);
    // api requires postgres held in [2025-01-01, 2025-06-01) and again from 2025-07-01
    let then = run(
        &[
            "neighbors",
            "pg",
            "--direction",
            "in",
            "--as-of",
            "2025-03-01",
        ],
        0,
    );
    assert_eq!(then["neighbors"][0]["node"]["name"], "api");
    let gap = run(
        &[
            "neighbors",
            "postgres",
            "--direction",
            "in",
            "--depth",
            "1",
            "--as-of",
            "2025-06-15",
        ],
        0,
    );
    assert_eq!(gap["reached"], 0);
    let history = run(&["edges", "api", "--history"], 0);
    assert_eq!(history["history"].as_array().unwrap().len(), 5);
    let entities = run(&["entities", "--type", "service"], 0);
    assert_eq!(names(&entities, "name"), vec!["api", "postgres"]);
    // the quarantined edge resolves once its endpoint exists
    let added = run(&["entity", "add", "vault", "--type", "service"], 0);
    assert_eq!(added["promoted_from_quarantine"], 1);
    assert_eq!(
        run(&["recall", "lighthouse keeper", "--no-touch"], 0)["results"][0]["id"],
        3
    );
}

#[test]
fn the_graph_survives_export_and_import() {
    let brain = Brain::new();
    let stored = brain.remember(
        "decision",
        Some("api store"),
        "The api keeps its state in config/state.toml.",
    );
    let id = stored["id"].as_i64().unwrap().to_string();
    brain.json(
        &[
            "entity",
            "add",
            "api",
            "--type",
            "service",
            "--alias",
            "api-server",
        ],
        0,
    );
    add_entity(&brain, "postgres", "service");
    brain.json(&["relation-type", "declare", "owns", "--weight", "0.9"], 0);
    add_entity(&brain, "team-a", "team");
    brain.json(&["relate", "team-a", "owns", "api"], 0);
    brain.json(
        &[
            "relate",
            "api",
            "requires",
            "postgres",
            "--from",
            "2025-01-01",
            "--to",
            "2025-06-01",
        ],
        0,
    );
    brain.json(&["relate", &id, "affects", "api"], 0);
    brain.json(
        &["relate", "api", "requires", "vault", "--allow-dangling"],
        0,
    );
    let file = brain.dir.path().join("backup.jsonl");
    brain.json(&["export", file.to_str().unwrap()], 0);

    let other = Brain::new();
    let report = other.json(&["import", file.to_str().unwrap()], 0);
    assert_eq!(report["summary"]["error"], 0, "{report}");
    for args in [
        vec!["graph", "--limit", "0"],
        vec!["graph", "--as-of", "2025-03-01", "--limit", "0"],
        vec!["entities", "--type", "service"],
        vec!["relation-type", "list"],
    ] {
        let mut a = brain.json(&args, 0);
        let mut b = other.json(&args, 0);
        // the import run's own clock differs; the edges and their validity must not
        for value in [&mut a, &mut b] {
            if let Some(object) = value.as_object_mut() {
                object.remove("as_of");
            }
            if let Some(list) = value.as_array_mut() {
                for item in list {
                    if let Some(object) = item.as_object_mut() {
                        object.remove("declared_at");
                        object.remove("created_at");
                    }
                }
            }
        }
        assert_eq!(a, b, "{args:?}");
    }
    // the quarantined edge came along and still resolves later
    let added = other.json(&["entity", "add", "vault", "--type", "service"], 0);
    assert_eq!(added["promoted_from_quarantine"], 1);
    let radius = other.json(
        &[
            "neighbors",
            "api-server",
            "--direction",
            "in",
            "--depth",
            "1",
        ],
        0,
    );
    assert_eq!(radius["reached"], 2);
}
