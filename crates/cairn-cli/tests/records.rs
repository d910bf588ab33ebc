//! End-to-end: the write path and record commands through the real binary.

mod common;

use common::Brain;
use predicates::prelude::*;

#[test]
fn remember_then_recall_finds_it_with_why_and_receipt() {
    let brain = Brain::new();
    let added = brain.remember(
        "gotcha",
        Some("pnpm needs the lockfile"),
        "CI fails when pnpm-lock.yaml is stale; run pnpm install before pushing.",
    );
    assert_eq!(added["status"], "added");
    assert_eq!(added["receipt"].as_str().unwrap().len(), 64);
    let id = added["id"].as_i64().unwrap();
    let answer = brain.json(&["recall", "stale lockfile pnpm"], 0);
    let first = &answer["results"][0];
    assert_eq!(first["id"].as_i64(), Some(id));
    assert_eq!(first["type"], "gotcha");
    assert_eq!(first["why"]["lexical_rank"], 1);
    assert_eq!(first["score_norm"], 1.0);
    assert_eq!(first["project"], "test-project");
    // no embedder is configured: the answer says so
    assert_eq!(answer["degraded"], "lexical-only");
}

#[test]
fn same_title_in_same_scope_updates_in_place_with_history() {
    let brain = Brain::new();
    let first = brain.remember(
        "fact",
        Some("Deploy target"),
        "We deploy to fly.io in region ams.",
    );
    let second = brain.remember(
        "fact",
        Some("deploy  target!"),
        "We deploy to fly.io in region fra.",
    );
    assert_eq!(second["status"], "updated");
    assert_eq!(second["id"], first["id"]);
    let id = first["id"].as_i64().unwrap().to_string();
    let shown = brain.json(&["show", &id, "--history"], 0);
    assert!(shown["body"].as_str().unwrap().contains("fra"));
    assert_eq!(shown["history"][0]["op"], "update");
    assert!(
        shown["history"][0]["snapshot"]["body"]
            .as_str()
            .unwrap()
            .contains("ams")
    );
}

#[test]
fn exact_duplicate_is_a_noop() {
    let brain = Brain::new();
    let first = brain.remember(
        "note",
        None,
        "The staging box reboots nightly at 03:00 UTC.",
    );
    let again = brain.remember(
        "note",
        None,
        "The  staging box reboots nightly at 03:00 UTC.  ",
    );
    assert_eq!(again["status"], "noop");
    assert_eq!(again["id"], first["id"]);
}

#[test]
fn near_duplicate_is_refused_with_three_ways_out_and_exit_3() {
    let brain = Brain::new();
    let body = "The billing service retries failed webhook deliveries five times with exponential backoff starting at two seconds and then gives up and writes the event to the dead letter queue for manual replay by the on call engineer";
    let first = brain.remember("fact", None, body);
    let id = first["id"].as_i64().unwrap();
    let near = body.replace("on call engineer", "on call engineers");
    let refused = brain.json(&["remember", "--type", "fact", "--body", &near], 3);
    assert_eq!(refused["status"], "refused");
    assert_eq!(refused["existing"].as_i64(), Some(id));
    let ways: Vec<&str> = refused["ways_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        ways,
        [
            format!("--supersedes {id}"),
            format!("cairn update {id}"),
            "--allow-duplicate".to_string()
        ]
    );
    // the human message says the same
    brain
        .cmd()
        .args(["remember", "--type", "fact", "--body", &near])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("--allow-duplicate"));
    let allowed = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            &near,
            "--allow-duplicate",
        ],
        0,
    );
    assert_eq!(allowed["status"], "added");
}

#[test]
fn overlapping_titles_are_refused() {
    let brain = Brain::new();
    brain.remember(
        "decision",
        Some("Use Postgres for the job queue service"),
        "Chosen for transactional enqueue.",
    );
    let refused = brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Postgres for the job queue in the billing service",
            "--body",
            "Another text entirely about queues.",
        ],
        3,
    );
    assert_eq!(refused["status"], "refused");
}

#[test]
fn supersession_moves_identity_and_recall_follows_forward() {
    let brain = Brain::new();
    let old = brain.remember(
        "decision",
        Some("Queue backend"),
        "Use Redis streams for the job queue.",
    );
    let old_id = old["id"].as_i64().unwrap().to_string();
    let new = brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--title",
            "Queue backend v2",
            "--body",
            "Use Postgres SKIP LOCKED for the job queue.",
            "--supersedes",
            &old_id,
        ],
        0,
    );
    assert_eq!(new["status"], "added");
    let new_id = new["id"].as_i64().unwrap();
    // the outdated wording answers with the current record, and says so
    let answer = brain.json(&["recall", "redis streams"], 0);
    assert_eq!(answer["results"][0]["id"].as_i64(), Some(new_id));
    assert_eq!(
        answer["results"][0]["superseded_from"].as_i64(),
        Some(old_id.parse().unwrap())
    );
    // --all shows the retired version itself
    let all = brain.json(&["recall", "redis streams", "--all"], 0);
    assert_eq!(
        all["results"][0]["id"].as_i64(),
        Some(old_id.parse::<i64>().unwrap())
    );
    assert_eq!(all["results"][0]["status"], "superseded");
    // superseding it again needs --fork-ok
    let fork = brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "Use SQS.",
            "--supersedes",
            &old_id,
        ],
        3,
    );
    assert_eq!(fork["existing"].as_i64(), Some(new_id));
    assert!(fork["ways_out"].to_string().contains("--fork-ok"));
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "Use SQS.",
            "--supersedes",
            &old_id,
            "--fork-ok",
        ],
        0,
    );
    // a record that supersedes others cannot be hard-deleted
    let refused = brain.json(&["forget", &new_id.to_string(), "--hard"], 3);
    assert_eq!(refused["status"], "refused");
    assert!(refused["error"].as_str().unwrap().contains("supersedes"));
}

#[test]
fn contradiction_is_stored_and_flagged() {
    let brain = Brain::new();
    let first = brain.remember(
        "fact",
        None,
        "Feature flag new-checkout is enabled in production.",
    );
    let second = brain.remember(
        "fact",
        None,
        "Feature flag new-checkout is disabled in production.",
    );
    assert_eq!(second["status"], "flagged");
    assert_eq!(second["conflicts"][0], first["id"]);
    let shown = brain.json(&["show", &second["id"].to_string()], 0);
    assert_eq!(shown["conflicts"][0]["other_id"], first["id"]);
}

#[test]
fn forget_archives_and_restore_brings_back() {
    let brain = Brain::new();
    let id = brain.remember("note", None, "Grafana lives at grafana.internal:3000.")["id"]
        .as_i64()
        .unwrap()
        .to_string();
    brain.json(&["forget", &id], 0);
    assert!(brain.recall_ids(&["grafana"]).is_empty());
    let answer = brain.json(&["recall", "grafana"], 0);
    assert!(answer["note"].as_str().unwrap().contains("nothing found"));
    assert_eq!(
        brain.recall_ids(&["grafana", "--all"]),
        [id.parse::<i64>().unwrap()]
    );
    brain.json(&["restore", &id], 0);
    assert_eq!(brain.recall_ids(&["grafana"]), [id.parse::<i64>().unwrap()]);
    brain.json(&["forget", &id, "--hard"], 0);
    brain
        .cmd()
        .args(["show", &id])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no record"));
}

#[test]
fn secrets_are_redacted_and_reported() {
    let brain = Brain::new();
    let out = brain.remember(
        "access",
        None,
        "Deploy token is ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 for the bot.",
    );
    assert_eq!(out["redacted"][0], "github-token");
    let shown = brain.json(&["show", &out["id"].to_string()], 0);
    let body = shown["body"].as_str().unwrap();
    assert!(body.contains("[REDACTED:github-token]"), "{body}");
    assert!(!body.contains("ghp_"));
    // access records get a review date by default
    assert!(shown["review_at"].is_string());
    assert!(out["warnings"].to_string().contains("review on"));
}

#[test]
fn confirmed_without_source_is_stored_as_reported() {
    let brain = Brain::new();
    let out = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "Node 22 is required.",
            "--confidence",
            "high",
        ],
        0,
    );
    let shown = brain.json(&["show", &out["id"].to_string()], 0);
    assert_eq!(shown["confidence"], "reported");
    let cited = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "Python 3.12 is required.",
            "--confidence",
            "high",
            "--source",
            "pyproject.toml:3",
        ],
        0,
    );
    assert_eq!(
        brain.json(&["show", &cited["id"].to_string()], 0)["confidence"],
        "confirmed"
    );
}

#[test]
fn scopes_nest_inward_only() {
    let brain = Brain::new();
    let global = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "deploy uses blue green switching",
        ],
        0,
    )["id"]
        .as_i64()
        .unwrap();
    let prod = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--scope",
            "channel:deploy:prod",
            "--body",
            "prod deploy needs two approvals",
        ],
        0,
    )["id"]
        .as_i64()
        .unwrap();
    let staging = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--scope",
            "channel:deploy:staging",
            "--body",
            "staging deploy is automatic",
        ],
        0,
    )["id"]
        .as_i64()
        .unwrap();
    let mut seen = brain.recall_ids(&["deploy", "--scope", "channel:deploy:prod"]);
    seen.sort();
    assert_eq!(seen, [global, prod]);
    let from_global = brain.recall_ids(&["deploy", "--scope", "global"]);
    assert_eq!(from_global, [global]);
    assert!(
        !brain
            .recall_ids(&["deploy", "--scope", "channel:deploy:staging"])
            .contains(&prod)
    );
    let _ = staging;
    brain.json(&["scope", "declare", "channel:deploy:prod"], 0);
    brain.json(&["scope", "declare", "channel:ops"], 0);
    let map = brain.json(&["scope", "map"], 0);
    assert_eq!(
        map["undeclared"],
        serde_json::json!(["channel:deploy:staging"])
    );
    assert_eq!(map["empty"], serde_json::json!(["channel:ops"]));
}

#[test]
fn personal_records_are_seen_from_every_project() {
    let brain = Brain::new();
    brain.json(
        &[
            "remember",
            "--type",
            "preference",
            "--personal",
            "--body",
            "Prefer small focused commits with imperative subjects.",
        ],
        0,
    );
    brain.json(
        &[
            "--project",
            "other",
            "remember",
            "--type",
            "fact",
            "--body",
            "The other project ships commits weekly.",
        ],
        0,
    );
    let answer = brain.json(&["--project", "third", "recall", "commits"], 0);
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0]["project"].is_null());
}

#[test]
fn as_of_replays_what_was_current_then() {
    let brain = Brain::new();
    let old = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--title",
            "api host",
            "--body",
            "The API host is api-1.example.net.",
            "--at",
            "2026-01-01T00:00:00Z",
        ],
        0,
    );
    let old_id = old["id"].as_i64().unwrap();
    // supersede "later" (now)
    let new = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--title",
            "api host new",
            "--body",
            "The API host is api-2.example.net.",
            "--supersedes",
            &old_id.to_string(),
        ],
        0,
    );
    let new_id = new["id"].as_i64().unwrap();
    assert_eq!(brain.recall_ids(&["API host", "--no-touch"]), [new_id]);
    assert_eq!(
        brain.recall_ids(&["API host", "--as-of", "2026-02-01"]),
        [old_id]
    );
    assert!(
        brain
            .recall_ids(&["API host", "--as-of", "2025-12-01"])
            .is_empty()
    );
}

#[test]
fn touch_counts_uses_and_no_touch_does_not() {
    let brain = Brain::new();
    let id = brain.remember("fact", None, "Redis runs on port 6380 here.")["id"]
        .as_i64()
        .unwrap()
        .to_string();
    brain.recall_ids(&["redis port"]);
    brain.recall_ids(&["redis port", "--no-touch"]);
    let shown = brain.json(&["show", &id], 0);
    assert_eq!(shown["use_count"], 1);
    assert!(shown["last_accessed_at"].is_string());
}

#[test]
fn list_filters_by_type_and_status() {
    let brain = Brain::new();
    brain.remember("fact", None, "Alpha fact text here.");
    brain.remember("note", None, "Beta note text here.");
    let listed = brain.json(&["list", "--type", "note"], 0);
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["type"], "note");
    assert_eq!(
        brain
            .json(&["list", "--status", "archived"], 0)
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn update_changes_fields_and_keeps_history() {
    let brain = Brain::new();
    let id = brain.remember("fact", Some("Build tool"), "We build with make.")["id"]
        .as_i64()
        .unwrap()
        .to_string();
    let updated = brain.json(
        &[
            "update",
            &id,
            "--body",
            "We build with just.",
            "--tags",
            "build,Tooling",
            "--importance",
            "4",
        ],
        0,
    );
    assert_eq!(updated["status"], "updated");
    let shown = brain.json(&["show", &id, "--history"], 0);
    assert_eq!(shown["tags"], serde_json::json!(["build", "tooling"]));
    assert_eq!(shown["importance"], 4);
    assert_eq!(shown["history"].as_array().unwrap().len(), 1);
    assert_eq!(brain.recall_ids(&["just"]), [id.parse::<i64>().unwrap()]);
    assert!(brain.recall_ids(&["make"]).is_empty());
}

#[test]
fn verify_confirms_and_renews_review() {
    let brain = Brain::new();
    let id = brain.remember("infra", None, "Postgres primary is db-1.internal.")["id"]
        .as_i64()
        .unwrap()
        .to_string();
    let verified = brain.json(&["verify", &id, "--source", "terraform/db.tf:12"], 0);
    assert_eq!(verified["status"], "verified");
    let shown = brain.json(&["show", &id], 0);
    assert_eq!(shown["confidence"], "confirmed");
    assert_eq!(shown["source"], "terraform/db.tf:12");
}

#[test]
fn stamped_types_carry_the_git_commit_and_a_freshness_verdict() {
    let brain = Brain::new();
    let repo = brain.dir.path();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .current_dir(repo)
            .args(args)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "one",
    ]);
    let out = brain.remember(
        "gotcha",
        None,
        "The flaky test is tests/net.rs; it needs a loopback alias.",
    );
    let shown = brain.json(&["show", &out["id"].to_string()], 0);
    assert_eq!(shown["commit"].as_str().unwrap().len(), 40);
    let answer = brain.json(&["recall", "flaky loopback", "--no-touch"], 0);
    assert!(
        answer["results"][0]["freshness"]
            .as_str()
            .unwrap()
            .starts_with("tree unchanged since stored")
    );
    git(&[
        "-c",
        "user.email=t@t",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "two",
    ]);
    let answer = brain.json(&["recall", "flaky loopback", "--no-touch"], 0);
    assert!(
        answer["results"][0]["freshness"]
            .as_str()
            .unwrap()
            .starts_with("1 commit since"),
        "{answer}"
    );
    // a note is not stamped
    let note = brain.remember("note", None, "Lunch is at noon.");
    assert!(brain.json(&["show", &note["id"].to_string()], 0)["commit"].is_null());
}

#[test]
fn review_due_is_flagged() {
    let brain = Brain::new();
    brain.json(
        &[
            "remember",
            "--type",
            "infra",
            "--body",
            "VPN endpoint is vpn.corp.example:1194.",
            "--review",
            "2020-01-01",
        ],
        0,
    );
    let answer = brain.json(&["recall", "vpn endpoint"], 0);
    assert_eq!(answer["results"][0]["review_due"], true);
}

#[test]
fn confidence_high_is_confirmed_with_a_source_and_says_why_it_is_reported_without() {
    // docs/design.md §3: `high` is another spelling of `confirmed`, which needs a source; without
    // one it is stored as `reported`. Regression: an update did that silently.
    let brain = Brain::new();
    let sourced = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "The API listens on 8080.",
            "--confidence",
            "high",
            "--source",
            "runbook",
        ],
        0,
    );
    let shown = brain.json(&["show", &sourced["id"].to_string()], 0);
    assert_eq!(shown["confidence"], "confirmed", "{shown}");
    assert_eq!(sourced["warnings"], serde_json::json!([]), "{sourced}");
    let bare = brain.json(
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "The web app listens on 3000.",
            "--confidence",
            "high",
        ],
        0,
    );
    let id = bare["id"].to_string();
    assert_eq!(brain.json(&["show", &id], 0)["confidence"], "reported");
    assert!(bare["warnings"].to_string().contains("`high`"), "{bare}");
    let updated = brain.json(&["update", &id, "--confidence", "high"], 0);
    assert_eq!(updated["record"]["confidence"], "reported", "{updated}");
    assert!(
        updated["warnings"].to_string().contains("needs a source"),
        "{updated}"
    );
    let updated = brain.json(
        &[
            "update",
            &id,
            "--confidence",
            "high",
            "--source",
            "load balancer config",
        ],
        0,
    );
    assert_eq!(updated["record"]["confidence"], "confirmed", "{updated}");
    assert_eq!(updated["warnings"], serde_json::json!([]), "{updated}");
}
