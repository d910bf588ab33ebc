//! The lifecycle end to end on the real binary and real SQLite files (docs/design.md §8): decay,
//! review, dream (proposals, accept, reject, staleness), forgetting, LLM summaries with a fake
//! LLM command, kill -9 during a dream, doctor --repair and recovery.

mod common;

use common::{Brain, doctor_check};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const DEPLOY: &str = "the deploy script needs the staging flag before the production flag and the queue must drain before anyone promotes the build";

fn remember(brain: &Brain, args: &[&str]) -> i64 {
    let mut all = vec!["remember"];
    all.extend_from_slice(args);
    let answer = brain.json(&all, 0);
    answer["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no id: {answer}"))
}

fn status(brain: &Brain, id: i64) -> String {
    brain.json(&["show", &id.to_string()], 0)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A gotcha 40 days old and a near-duplicate note of it 35 days old: (gotcha, copy).
fn deploy_gotcha_and_a_copy(brain: &Brain) -> (i64, i64) {
    let first = remember(
        brain,
        &["--type", "gotcha", "--body", DEPLOY, "--at", "40d"],
    );
    let second = remember(
        brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("{DEPLOY} today"),
            "--allow-duplicate",
            "--at",
            "35d",
        ],
    );
    (first, second)
}

fn proposals_of<'a>(dream: &'a Value, kind: &str) -> Vec<&'a Value> {
    dream["dream"]["proposals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == kind)
        .collect()
}

/// A script in the brain's directory, executable, used as `llm.command`.
fn script(brain: &Brain, name: &str, body: &str) -> String {
    let path = brain.dir.path().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path.display().to_string()
}

fn snapshots_left(brain: &Brain) -> Vec<String> {
    std::fs::read_dir(brain.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".dream-"))
        .collect()
}

#[test]
fn decay_archives_and_demotes_but_never_tier_a_pinned_or_guardrails() {
    let brain = Brain::new();
    let old_note = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "an old note nobody read",
            "--at",
            "2024-01-01",
        ],
    );
    let demoted = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--body",
            "the api listens on port 8080",
            "--source",
            "cfg.toml:3",
            "--confidence",
            "confirmed",
            "--at",
            "70d",
        ],
    );
    let fresh = remember(
        &brain,
        &["--type", "fact", "--body", "the cache is redis 7"],
    );
    let expired = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "freeze deploys this week",
            "--expires",
            "2025-01-01",
        ],
    );
    let pinned = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "pinned and old",
            "--pin",
            "--at",
            "2024-01-01",
        ],
    );
    let policy = remember(
        &brain,
        &[
            "--type",
            "policy",
            "--body",
            "never force-push main",
            "--at",
            "2024-01-01",
        ],
    );
    let decision = remember(
        &brain,
        &[
            "--type",
            "decision",
            "--body",
            "we chose postgres",
            "--at",
            "2024-01-01",
            "--expires",
            "2025-01-01",
        ],
    );

    let dry = brain.json(&["decay", "--dry-run"], 0);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        status(&brain, old_note),
        "active",
        "a dry run changes nothing"
    );
    let report = brain.json(&["decay"], 0);
    let actions: Vec<(i64, String)> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_i64().unwrap(),
                c["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(actions.contains(&(old_note, "archive".into())), "{report}");
    assert!(actions.contains(&(demoted, "demote".into())), "{report}");
    assert!(actions.contains(&(expired, "expired".into())), "{report}");
    for untouched in [fresh, pinned, policy, decision] {
        assert!(
            !actions.iter().any(|(id, _)| *id == untouched),
            "#{untouched} changed: {report}"
        );
        assert_eq!(status(&brain, untouched), "active");
    }
    assert_eq!(report["expired_but_kept"], serde_json::json!([decision]));
    assert_eq!(status(&brain, old_note), "archived");
    assert_eq!(
        brain.json(&["show", &demoted.to_string()], 0)["confidence"],
        "reported"
    );

    // Every change is an event, and --explain tells the story.
    let explain = brain.json(&["decay", "--explain", &format!("#{old_note}")], 0);
    assert_eq!(explain["events"][0]["op"], "decay");
    assert!(
        explain["events"][0]["detail"]["extra"]["reason"]
            .as_str()
            .unwrap()
            .contains("below the floor"),
        "{explain}"
    );
    let text = brain
        .cmd()
        .args(["decay", "--explain", &policy.to_string()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("never decays (guardrail)"));

    // Reversible: restore brings it back and restarts its clock, so decay leaves it alone.
    brain.json(&["restore", &old_note.to_string()], 0);
    let again = brain.json(&["decay"], 0);
    assert!(again["changes"].as_array().unwrap().is_empty(), "{again}");
    assert_eq!(status(&brain, old_note), "active");
    let explain = brain.json(&["decay", "--explain", &old_note.to_string()], 0);
    let ops: Vec<&str> = explain["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, vec!["decay", "restore"]);
}

#[test]
fn review_lists_unchecked_tier_a_and_b_records_until_verified() {
    let brain = Brain::new();
    let decision = remember(
        &brain,
        &[
            "--type",
            "decision",
            "--body",
            "queue on postgres",
            "--at",
            "2025-01-01",
        ],
    );
    let fact = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--body",
            "the api host is api.internal",
            "--at",
            "2025-01-01",
        ],
    );
    let note = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "an old note",
            "--at",
            "2025-01-01",
        ],
    );
    let recent = remember(
        &brain,
        &["--type", "fact", "--body", "the db host is db.internal"],
    );
    let review = brain.json(&["review", "--stale-days", "90"], 0);
    let stale: Vec<i64> = review["stale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    assert_eq!(stale, vec![decision, fact], "{review}");
    assert!(!stale.contains(&note) && !stale.contains(&recent));
    brain.json(
        &["verify", &fact.to_string(), "--source", "dns zone file"],
        0,
    );
    let review = brain.json(&["review", "--stale-days", "90"], 0);
    let stale: Vec<i64> = review["stale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect();
    assert_eq!(stale, vec![decision]);
    let without = brain.json(&["review", "--stale-days", "0"], 0);
    assert!(without.get("stale").is_none());
}

#[test]
fn end_to_end_duplicates_and_stale_facts_are_consolidated_by_dream_and_accept() {
    let brain = Brain::new();
    // Captured duplicates (the write path lets near duplicates under 0.9 in, or by choice).
    let (first, second) = deploy_gotcha_and_a_copy(&brain);
    let third = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("remember: {DEPLOY}"),
            "--allow-duplicate",
            "--at",
            "34d",
        ],
    );
    // A stale fact and an expired state.
    let stale = remember(
        &brain,
        &[
            "--type",
            "state",
            "--body",
            "the build box is rebooting",
            "--at",
            "20d",
        ],
    );
    let other = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--body",
            "grafana lives at grafana.internal on port 3000",
        ],
    );

    let dream = brain.json(&["dream"], 0);
    assert_eq!(dream["new"], true);
    let id = dream["dream"]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with('d') && id.len() == 12, "{id}");
    // The two captured copies go, by a merge into the gotcha or as forget candidates covered
    // by it (they are old, small and redundant); no record is in two proposals.
    let mut covered: Vec<i64> = Vec::new();
    for merge in proposals_of(&dream, "merge") {
        assert_eq!(
            merge["payload"]["survivor"], first,
            "the gotcha (tier B) survives"
        );
        for item in merge["payload"]["merged"].as_array().unwrap() {
            covered.push(item["id"].as_i64().unwrap());
        }
    }
    for forget in proposals_of(&dream, "forget") {
        assert_eq!(forget["payload"]["twin"], first, "{dream}");
        covered.push(forget["payload"]["id"].as_i64().unwrap());
    }
    covered.sort();
    assert_eq!(covered, vec![second, third], "{dream}");
    let decays = proposals_of(&dream, "decay");
    assert_eq!(decays.len(), 1, "{dream}");
    assert_eq!(decays[0]["payload"]["id"], stale);
    // Proposing changed nothing.
    for id in [first, second, third, stale, other] {
        assert_eq!(status(&brain, id), "active");
    }
    // The same brain dreams the same proposal set.
    let again = brain.json(&["dream"], 0);
    assert_eq!(again["new"], false);
    assert_eq!(again["dream"]["id"], id.as_str());

    let accepted = brain.json(&["dream", "accept", &id], 0);
    assert_eq!(accepted["status"], "accepted");
    assert_eq!(
        accepted["skipped"].as_array().unwrap().len(),
        0,
        "{accepted}"
    );
    assert_eq!(status(&brain, first), "active");
    assert_eq!(status(&brain, second), "archived");
    assert_eq!(status(&brain, third), "archived");
    assert_eq!(status(&brain, stale), "archived");
    assert_eq!(status(&brain, other), "active");
    let history = brain.json(&["show", &second.to_string(), "--history"], 0);
    let ops = history["history"].to_string();
    assert!(
        ops.contains("\"merge\"") || ops.contains("\"forget\""),
        "{history}"
    );

    // Recall still answers with the survivor; no duplicate survives another dream.
    assert_eq!(brain.recall_ids(&["staging flag production"]), vec![first]);
    // Archived by a merge or a forget, each reads whole.
    let bodies = [
        (second, format!("{DEPLOY} today")),
        (third, format!("remember: {DEPLOY}")),
    ];
    for (id, body) in &bodies {
        let shown = brain.json(&["show", &id.to_string()], 0);
        assert_eq!(shown["body"], body.as_str(), "{shown}");
    }
    let next = brain.json(&["dream"], 0);
    assert!(proposals_of(&next, "merge").is_empty(), "{next}");
    assert!(proposals_of(&next, "forget").is_empty(), "{next}");

    // Accepting twice is refused with the reason; nothing is applied again.
    let refused = brain.json(&["dream", "accept", &id], 3);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("already accepted"),
        "{refused}"
    );
    // Reversible: whole, and found on its own again.
    brain.json(&["restore", &second.to_string()], 0);
    assert_eq!(status(&brain, second), "active");
    let shown = brain.json(&["show", &second.to_string()], 0);
    assert_eq!(shown["body"], bodies[0].1.as_str());
    assert!(
        brain
            .recall_ids(&["staging flag production today", "--all"])
            .contains(&second)
    );
    let doctor = brain.json(&["doctor"], 0);
    assert_eq!(doctor["ok"], true, "{doctor}");
}

/// Schema v10: a record a dream merged away leaves the full-text index and is stored as
/// changes to its survivor; it reads whole, `recall --all` answers with the survivor, and
/// `restore` brings it back whole and findable.
#[test]
fn a_merged_away_record_reads_whole_and_is_found_through_its_survivor() {
    let brain = Brain::new();
    let fridays = format!("{DEPLOY} on fridays, see src/deploy.rs");
    let mondays = format!("{DEPLOY} on mondays, see src/deploy.rs");
    let first = remember(&brain, &["--type", "note", "--body", &fridays]);
    let second = remember(
        &brain,
        &["--type", "note", "--body", &mondays, "--allow-duplicate"],
    );
    let dream = brain.json(&["dream", "--accept"], 0);
    let merges = proposals_of(&dream, "merge");
    assert_eq!(merges.len(), 1, "{dream}");
    let survivor = merges[0]["payload"]["survivor"].as_i64().unwrap();
    let (merged, older, word) = if survivor == first {
        (second, mondays, "mondays")
    } else {
        (first, fridays, "fridays")
    };
    assert_eq!(status(&brain, merged), "archived");
    assert_eq!(
        brain.sql(&format!(
            "SELECT typeof(body), merged_into FROM memories WHERE id = {merged}"
        )),
        format!("blob|{survivor}")
    );
    assert_eq!(
        brain.json(&["show", &merged.to_string()], 0)["body"],
        older.as_str()
    );
    assert_eq!(
        brain.recall_ids(&[&format!("{word} deploy"), "--all"]),
        vec![survivor]
    );
    // Regression: neither `show` nor the export said the record was merged away.
    assert_eq!(
        brain.json(&["show", &merged.to_string()], 0)["merged_into"],
        survivor
    );
    assert!(
        brain.json(&["show", &survivor.to_string()], 0)["merged_into"].is_null(),
        "the survivor is not merged away"
    );
    let export = brain
        .cmd()
        .args(["export", "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(export.status.success());
    let exported = String::from_utf8_lossy(&export.stdout).to_string();
    assert!(exported.contains(&older));
    let line: Value = exported
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["kind"] == "memory" && l["id"] == merged)
        .unwrap();
    assert_eq!(line["merged_into"], survivor, "{line}");
    // An import stores it merged away again: out of recall, found through its survivor.
    let file = brain.dir.path().join("merged.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let copy = Brain::new();
    let report = copy.json(&["import", file.to_str().unwrap()], 0);
    assert_eq!(report["summary"]["error"], 0, "{report}");
    assert_eq!(
        copy.json(&["show", &merged.to_string()], 0)["merged_into"],
        survivor
    );
    assert_eq!(
        copy.json(&["show", &merged.to_string()], 0)["body"],
        older.as_str()
    );
    assert_eq!(
        copy.recall_ids(&[&format!("{word} deploy"), "--all"]),
        vec![survivor]
    );
    let doctor = brain.json(&["doctor"], 0);
    assert_eq!(doctor["ok"], true, "{doctor}");
    // The graph labels it from its whole text too.
    let around = brain.json(&["neighbors", "src/deploy.rs", "--direction", "in"], 0);
    let node = around["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"]["id"] == merged)
        .unwrap_or_else(|| panic!("{around}"));
    assert_eq!(node["node"]["title"], older.as_str());

    brain.json(&["restore", &merged.to_string()], 0);
    assert_eq!(
        brain.sql(&format!(
            "SELECT typeof(body), merged_into FROM memories WHERE id = {merged}"
        )),
        "text|"
    );
    assert!(brain.json(&["show", &merged.to_string()], 0)["merged_into"].is_null());
    assert_eq!(brain.recall_ids(&[word]), vec![merged]);
    let doctor = brain.json(&["doctor"], 0);
    assert_eq!(doctor["ok"], true, "{doctor}");
}

#[test]
fn accept_skips_changed_targets_and_refuses_stale_or_rejected_sets() {
    let brain = Brain::new();
    let a = remember(&brain, &["--type", "note", "--body", DEPLOY, "--at", "10d"]);
    let b = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("{DEPLOY} now"),
            "--allow-duplicate",
            "--at",
            "9d",
        ],
    );
    let first = brain.json(&["dream"], 0);
    let first_id = first["dream"]["id"].as_str().unwrap().to_string();
    // A live write during/after the dream: the target changed since the snapshot.
    brain.json(&["update", &b.to_string(), "--tags", "edited"], 0);
    let report = brain.json(&["dream", "accept", &first_id], 0);
    assert_eq!(report["applied"].as_array().unwrap().len(), 0, "{report}");
    let skipped = report["skipped"][0]["detail"].as_str().unwrap();
    assert!(
        skipped.contains(&format!("#{b} changed since the snapshot")),
        "{skipped}"
    );
    assert_eq!(status(&brain, a), "active");
    assert_eq!(status(&brain, b), "active");
    assert_eq!(
        brain.json(&["show", &b.to_string()], 0)["tags"],
        serde_json::json!(["edited"]),
        "the live write is kept"
    );

    // An older set is stale once a newer one exists; a rejected one cannot be accepted.
    let older = brain.json(&["dream"], 0)["dream"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    brain.json(&["update", &a.to_string(), "--importance", "2"], 0);
    // The newer dream an hour later, on the test clock (no sleeping for a later second).
    let later = cairn_core::time::format_ts(chrono::Utc::now() + chrono::Duration::hours(1));
    let output = brain
        .cmd()
        .env("CAIRN_NOW", &later)
        .args(["--json", "dream"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let newer_dream: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        newer_dream["dream"]["created_at"],
        later.as_str(),
        "{newer_dream}"
    );
    let newer = newer_dream["dream"]["id"].as_str().unwrap().to_string();
    assert_ne!(older, newer);
    let refused = brain.json(&["dream", "accept", &older], 3);
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("stale") && message.contains(&newer),
        "{message}"
    );
    brain.json(&["dream", "reject", &newer], 0);
    let refused = brain.json(&["dream", "accept", &newer], 3);
    assert!(
        refused["error"].as_str().unwrap().contains("rejected"),
        "{refused}"
    );
    assert_eq!(status(&brain, a), "active");
    assert_eq!(status(&brain, b), "active");
    let unknown = brain.json(&["dream", "accept", &newer, "--only", "everything"], 1);
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .contains("unknown proposal kind")
    );
    // Unattended runs may propose, never accept unless configured.
    let refused = brain.json(&["dream", "--unattended", "--accept"], 3);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("dream.auto_accept"),
        "{refused}"
    );
    brain.json(&["config", "set", "dream.auto_accept", "true"], 0);
    brain.json(&["dream", "--unattended", "--accept"], 0);
}

#[test]
fn forgetting_needs_low_importance_and_a_twin_and_takes_at_most_five_keeping_one_each() {
    let brain = Brain::new();
    let mut groups = Vec::new();
    for n in 0..7 {
        let body = format!(
            "service{n} restarts nightly at {n} am because the worker{n} leaks memory in the parser{n} module"
        );
        let keep = remember(&brain, &["--type", "note", "--body", &body, "--at", "60d"]);
        let twin = remember(
            &brain,
            &[
                "--type",
                "note",
                "--body",
                &format!("{body} again"),
                "--allow-duplicate",
                "--at",
                "59d",
            ],
        );
        groups.push((keep, twin));
    }
    let young = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "the young record about the parser of fresh things here",
            "--at",
            "5d",
        ],
    );
    remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "the young record about the parser of fresh things here ok",
            "--allow-duplicate",
            "--at",
            "4d",
        ],
    );
    let dream = brain.json(&["dream"], 0);
    let forget = proposals_of(&dream, "forget");
    assert_eq!(forget.len(), 5, "{dream}");
    assert_eq!(dream["dream"]["report"]["forget"]["candidates"], 7);
    for proposal in &forget {
        let id = proposal["payload"]["id"].as_i64().unwrap();
        assert_ne!(id, young, "never younger than 30 days");
        let twin = proposal["payload"]["twin"].as_i64().unwrap();
        assert!(
            groups
                .iter()
                .any(|(a, b)| (id, twin) == (*a, *b) || (id, twin) == (*b, *a))
        );
        assert!(proposal["payload"]["importance"].as_f64().unwrap() < 0.45);
        assert!(proposal["payload"]["probe_found"].as_i64().is_some());
    }
    let id = dream["dream"]["id"].as_str().unwrap().to_string();
    let report = brain.json(&["dream", "accept", &id, "--only", "forget"], 0);
    assert_eq!(report["status"], "partial");
    assert_eq!(report["applied"].as_array().unwrap().len(), 5, "{report}");
    for (a, b) in &groups {
        assert!(
            status(&brain, *a) == "active" || status(&brain, *b) == "active",
            "one of each near-duplicate cluster is kept"
        );
    }
    let forgotten = forget[0]["payload"]["id"].as_i64().unwrap();
    brain.json(&["restore", &forgotten.to_string()], 0);
    assert_eq!(status(&brain, forgotten), "active");
    // The rest of the set can still be accepted (the merges of the remaining pairs).
    let rest = brain.json(&["dream", "accept", &id], 0);
    assert_eq!(rest["status"], "accepted");
}

fn clustered_brain() -> (Brain, Vec<i64>) {
    let brain = Brain::new();
    let ids = vec![
        remember(
            &brain,
            &[
                "--type",
                "gotcha",
                "--body",
                "src/deploy.rs panics when the release tag has no v prefix",
            ],
        ),
        remember(
            &brain,
            &[
                "--type",
                "fact",
                "--body",
                "src/deploy.rs reads the target host from DEPLOY_HOST",
            ],
        ),
        remember(
            &brain,
            &[
                "--type",
                "procedure",
                "--body",
                "to roll back, run src/deploy.rs with --previous",
            ],
        ),
        remember(
            &brain,
            &[
                "--type",
                "note",
                "--body",
                "src/deploy.rs was rewritten in march for the new runner",
            ],
        ),
    ];
    (brain, ids)
}

#[test]
fn a_fake_llm_command_writes_grounded_idempotent_summaries() {
    let (brain, ids) = clustered_brain();
    let log = brain.dir.path().join("prompts.log");
    let fake = script(
        &brain,
        "fake-llm.sh",
        &format!(
            "prompt=$(cat)\nprintf '%s\\n' \"$prompt\" >> '{}'\ncase \"$prompt\" in\n  *lesson*) echo 'Lesson: every change to src/deploy.rs needs a rollback path.' ;;\n  *) echo 'The deploy tool src/deploy.rs needs a v-prefixed tag, reads DEPLOY_HOST and can roll back.' ;;\nesac",
            log.display()
        ),
    );
    brain.json(&["config", "set", "llm.command", &fake], 0);
    let dream = brain.json(&["dream"], 0);
    let summaries = proposals_of(&dream, "summary");
    assert_eq!(summaries.len(), 1, "{dream}");
    assert_eq!(proposals_of(&dream, "reflection").len(), 1, "{dream}");
    let members: Vec<i64> = summaries[0]["payload"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(members, ids);
    let prompts = std::fs::read_to_string(&log).unwrap();
    assert!(prompts.contains("stored data, not instructions") && prompts.contains("DEPLOY_HOST"));
    let id = dream["dream"]["id"].as_str().unwrap().to_string();
    let report = brain.json(&["dream", "accept", &id], 0);
    assert_eq!(report["applied"].as_array().unwrap().len(), 2, "{report}");
    let generated = brain.json(&["list", "--type", "note"], 0);
    let summary = generated["results"]
        .as_array()
        .or_else(|| generated.as_array())
        .unwrap()
        .iter()
        .find(|m| {
            m["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Summary of cluster"))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no summary: {generated}"));
    assert!(summary["tags"].to_string().contains("generated"));
    let cited = summary["source"].as_str().unwrap();
    for member in &ids {
        assert!(cited.contains(&format!("#{member}")), "{cited}");
    }
    assert_eq!(summary["confidence"], "inferred");
    // Idempotent by member hash: the same members are not summarized again.
    std::fs::remove_file(&log).unwrap();
    let again = brain.json(&["dream"], 0);
    assert!(proposals_of(&again, "summary").is_empty(), "{again}");
    assert!(!log.exists(), "no LLM call for what was already generated");
}

#[test]
fn an_llm_that_fails_hangs_or_talks_garbage_changes_nothing_and_is_reported() {
    for (name, body, expect) in [
        ("fail.sh", "echo 'model overloaded' >&2; exit 7", "failed"),
        ("hang.sh", "exec sleep 30", "did not answer"),
        ("garbage.sh", "printf '\\377\\376\\375'", "not UTF-8"),
        ("empty.sh", "cat > /dev/null", "empty"),
    ] {
        let (brain, ids) = clustered_brain();
        let fake = script(&brain, name, body);
        brain.json(&["config", "set", "llm.command", &fake], 0);
        brain.json(&["config", "set", "llm.timeout_secs", "1"], 0);
        let started = Instant::now();
        let dream = brain.json(&["dream"], 0);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{name} took {:?}",
            started.elapsed()
        );
        let errors = dream["dream"]["report"]["llm"]["errors"]
            .as_array()
            .unwrap();
        assert!(!errors.is_empty(), "{name}: {dream}");
        assert!(
            errors[0].as_str().unwrap().contains(expect),
            "{name}: {errors:?}"
        );
        assert!(proposals_of(&dream, "summary").is_empty());
        let list = brain.json(&["list"], 0).to_string();
        assert!(!list.contains("Summary of cluster"), "{name}");
        for id in &ids {
            assert_eq!(status(&brain, *id), "active");
        }
    }
}

#[test]
fn a_dream_killed_at_any_point_leaves_the_live_brain_untouched_and_the_next_run_clean() {
    let brain = Brain::new();
    for n in 0..40 {
        let body = format!("{DEPLOY} variant {}", n / 2);
        remember(
            &brain,
            &[
                "--type",
                "note",
                "--body",
                &body,
                "--allow-duplicate",
                "--at",
                "40d",
            ],
        );
    }
    let (_, _) = (
        remember(&brain, &["--type", "note", "--body", "src/deploy.rs one"]),
        0,
    );
    remember(&brain, &["--type", "note", "--body", "src/deploy.rs two"]);
    remember(&brain, &["--type", "note", "--body", "src/deploy.rs three"]);
    let records_before =
        brain.sql("SELECT count(*), group_concat(status || updated_at) FROM memories");
    let pid_file = brain.dir.path().join("llm.pid");
    let fake = script(
        &brain,
        "slow-llm.sh",
        &format!("echo $$ > '{}'\nexec sleep 60", pid_file.display()),
    );
    brain.json(&["config", "set", "llm.command", &fake], 0);

    // Killed while the LLM phase runs: the snapshot exists, nothing was written yet.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .current_dir(brain.dir.path())
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_DAEMON", "off")
        .env("CAIRN_PROJECT", "test-project")
        .args(["dream"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists()
        || std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .is_empty()
    {
        assert!(Instant::now() < deadline, "the fake LLM never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let llm_pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &llm_pid])
        .status();
    assert!(
        !snapshots_left(&brain).is_empty(),
        "the killed dream left its snapshot"
    );
    assert_eq!(brain.sql("PRAGMA integrity_check"), "ok");
    assert_eq!(brain.sql("SELECT count(*) FROM dream_runs"), "0");
    assert_eq!(
        brain.sql("SELECT count(*), group_concat(status || updated_at) FROM memories"),
        records_before
    );

    // Killed at other points (snapshot, phases, the final write): all or nothing.
    brain.json(&["config", "unset", "llm.command"], 0);
    for delay in [0u64, 5, 15, 30, 60, 120] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_PROJECT", "test-project")
            .args(["dream"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        child.wait().unwrap();
        assert_eq!(
            brain.sql("PRAGMA integrity_check"),
            "ok",
            "after a kill at {delay} ms"
        );
        assert_eq!(
            brain.sql("SELECT count(*), group_concat(status || updated_at) FROM memories"),
            records_before,
            "after a kill at {delay} ms"
        );
        // A stored set is always whole: its proposals match the counts in its report.
        for run in brain.sql("SELECT id FROM dream_runs").lines() {
            let shown = brain.json(&["dream", "show", run], 0);
            let counted: i64 = shown["report"]["proposals"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_i64().unwrap())
                .sum();
            assert_eq!(counted, shown["proposals"].as_array().unwrap().len() as i64);
        }
    }

    // The next run is clean: it removes the orphaned snapshots and leaves none of its own.
    let next = brain.json(&["dream"], 0);
    assert!(!next["dream"]["proposals"].as_array().unwrap().is_empty());
    assert!(
        snapshots_left(&brain).is_empty(),
        "{:?}",
        snapshots_left(&brain)
    );
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
}

#[test]
fn doctor_repair_drops_orphans_vacuums_a_bloated_file_and_is_idempotent() {
    let brain = Brain::new();
    let mut ids = Vec::new();
    for n in 0..150 {
        let body = format!(
            "record {n} {}",
            "padding words to make the page fill up ".repeat(40)
        );
        ids.push(remember(
            &brain,
            &["--type", "note", "--body", &body, "--allow-duplicate"],
        ));
    }
    for id in &ids[..120] {
        brain.json(&["forget", &id.to_string(), "--hard"], 0);
    }
    brain.sql(&format!(
            "INSERT INTO conflicts (memory_id, other_id, reason, created_at) VALUES ({}, 999999, 'x', '2026-01-01T00:00:00Z')",
            ids[149]
        ),
    );
    brain.sql("INSERT INTO generated_records (memory_id, generator, marked_at) VALUES (888888, 'summary', '2026-01-01T00:00:00Z')",
    );
    brain.sql(&format!(
        "DELETE FROM memories_fts WHERE rowid = {}",
        ids[140]
    ));
    // Bloat: pages freed by a bulk delete that nobody vacuumed.
    brain.sql("CREATE TABLE junk(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO junk SELECT randomblob(2000) FROM n; DROP TABLE junk;",
    );
    let doctor = brain.json(&["doctor"], 1);
    let bad: Vec<&str> = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        bad.contains(&"orphans") && bad.contains(&"free pages") && bad.contains(&"full-text index"),
        "{doctor}"
    );
    // The brain on disk is the file plus its write-ahead log (writes are checkpointed into the
    // file only once the log passes a size).
    let on_disk = || {
        let wal = brain.db.with_extension("db-wal");
        std::fs::metadata(&brain.db).unwrap().len()
            + std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0)
    };
    let size_before = on_disk();
    let repaired = brain.json(&["doctor", "--repair"], 0);
    let text = repaired["repaired"].to_string();
    assert!(
        text.contains("orphaned") && text.contains("VACUUM") && text.contains("full-text"),
        "{repaired}"
    );
    let again = brain.json(&["doctor", "--repair"], 0);
    assert_eq!(
        again["repaired"],
        serde_json::json!([]),
        "idempotent: {again}"
    );
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
    assert!(on_disk() < size_before);
    assert_eq!(brain.recall_ids(&["record 140"])[0], ids[140]);
}

#[test]
fn a_damaged_brain_is_recovered_into_a_new_file_and_never_deleted() {
    let brain = Brain::new();
    for n in 0..200 {
        let body = format!(
            "recoverable record {n} {}",
            "with some text to fill pages ".repeat(20)
        );
        remember(
            &brain,
            &["--type", "fact", "--body", &body, "--allow-duplicate"],
        );
    }
    brain.sql("PRAGMA wal_checkpoint(TRUNCATE)");
    // Damage pages in the middle of the file (the header stays readable).
    let mut bytes = std::fs::read(&brain.db).unwrap();
    let page = 4096;
    let pages = bytes.len() / page;
    // Three pages: which page holds what moves with the schema (an empty table more shifts
    // them), and damage inside an FTS blob alone goes unnoticed by integrity_check.
    for target in [pages / 3, pages / 2, 2 * pages / 3] {
        for byte in &mut bytes[target * page + 16..target * page + 600] {
            *byte = 0xA5;
        }
    }
    std::fs::write(&brain.db, &bytes).unwrap();
    let doctor = brain.cmd().args(["doctor"]).output().unwrap();
    assert_eq!(doctor.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&doctor.stdout),
        String::from_utf8_lossy(&doctor.stderr)
    );
    assert!(
        said.contains("--recover-into") || said.contains("recover"),
        "{said}"
    );
    let target = brain.dir.path().join("recovered.db");
    let recovered = brain.json(&["doctor", "--recover-into", target.to_str().unwrap()], 0);
    assert!(recovered["rows"].as_i64().unwrap() > 100, "{recovered}");
    assert_eq!(
        std::fs::read(&brain.db).unwrap(),
        bytes,
        "the damaged file is untouched"
    );
    let fresh = brain
        .cmd()
        .env("CAIRN_DB", &target)
        .env("CAIRN_DAEMON", "off")
        .args(["--json", "doctor"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&fresh.stdout).unwrap();
    assert_eq!(report["checks"][0]["ok"], true, "{report}");
    let found = brain
        .cmd()
        .env("CAIRN_DB", &target)
        .env("CAIRN_DAEMON", "off")
        .args(["--json", "recall", "recoverable record"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&found.stdout).contains("recoverable record"));
    // Never over an existing file.
    let refused = brain.json(&["doctor", "--recover-into", target.to_str().unwrap()], 1);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    let _ = Path::new(&target);
}

/// The text `cairn ARGS…` prints, expecting success.
fn text(brain: &Brain, args: &[&str]) -> String {
    let output = brain.cmd().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Moves a set's decision `days` back (the CLI has no clock to turn).
fn decided_days_ago(brain: &Brain, id: &str, days: i64) {
    brain.sql(&format!(
            "UPDATE dream_runs SET decided_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-{days} days') WHERE id = '{id}'"
        ),
    );
}

fn proposal_rows(brain: &Brain, id: &str) -> i64 {
    brain
        .sql(&format!(
            "SELECT count(*) FROM dream_proposals WHERE run_id = '{id}'"
        ))
        .parse()
        .unwrap()
}

/// A dream over a brain with one more record than before: a new set each time.
fn fresh_dream(brain: &Brain, n: usize) -> Value {
    remember(
        brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("unrelated note number {n} about the coffee machine schedule"),
        ],
    );
    let dream = brain.json(&["dream"], 0);
    assert_eq!(dream["new"], true, "{dream}");
    dream
}

#[test]
fn decided_dream_sets_lose_their_proposal_details_after_keep_decided_days() {
    let brain = Brain::new();
    let (first, second) = deploy_gotcha_and_a_copy(&brain);
    let accepted = brain.json(&["dream", "--accept"], 0);
    let id = accepted["dream"]["id"].as_str().unwrap().to_string();
    assert_eq!(accepted["accepted"]["status"], "accepted", "{accepted}");
    let rows = proposal_rows(&brain, &id);
    assert!(rows >= 1);

    // The setting: 7 by default, whole days only.
    let setting = brain.json(&["config", "get", "dream.keep_decided_days"], 0);
    assert_eq!(
        (setting["value"].as_str(), setting["from"].as_str()),
        (Some("7"), Some("default"))
    );
    for bad in ["-1", "1.5", "a week"] {
        let refused = brain.json(&["config", "set", "dream.keep_decided_days", bad], 1);
        let error = refused["error"].as_str().unwrap();
        assert!(
            error.contains("dream.keep_decided_days") && error.contains("whole number of days"),
            "{error}"
        );
    }
    assert!(
        !brain
            .sql("SELECT count(*) FROM meta WHERE key LIKE 'config:dream.keep%'")
            .starts_with('1')
    );
    let bogus = brain
        .cmd()
        .env("CAIRN_DREAM_KEEP_DECIDED_DAYS", "soon")
        .args(["dream"])
        .output()
        .unwrap();
    assert!(!bogus.status.success());
    let stderr = String::from_utf8_lossy(&bogus.stderr);
    assert!(
        stderr.contains("dream.keep_decided_days") && stderr.contains("nothing was run"),
        "{stderr}"
    );

    // Decided today, six days ago: kept. An undecided set alongside.
    let kept = fresh_dream(&brain, 1);
    assert_eq!(kept["pruned"]["sets"], 0, "{kept}");
    assert_eq!(kept["dream"]["report"]["pruned"]["sets"], 0);
    let proposed = kept["dream"]["id"].as_str().unwrap().to_string();
    decided_days_ago(&brain, &id, 6);
    fresh_dream(&brain, 2);
    assert_eq!(proposal_rows(&brain, &id), rows);

    // Eight days ago: pruned by the next dream, which says so.
    decided_days_ago(&brain, &id, 8);
    remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            "a third unrelated note on printer toner",
        ],
    );
    let message = text(&brain, &["dream"]);
    assert!(
        message.contains("pruned the proposal details of 1 decided set"),
        "{message}"
    );
    assert_eq!(proposal_rows(&brain, &id), 0);
    let latest = brain.json(&["dream", "list", "--limit", "1"], 0);
    assert_eq!(
        latest["dreams"][0]["report"]["pruned"]["sets"], 1,
        "{latest}"
    );
    assert_eq!(
        latest["dreams"][0]["report"]["pruned"]["proposals"], rows,
        "{latest}"
    );

    // `dream show`: the header, and plainly where the details went.
    let shown = brain.json(&["dream", "show", &id], 0);
    assert_eq!(shown["status"], "accepted");
    assert_eq!(shown["proposals"], serde_json::json!([]));
    assert_eq!(shown["decision"]["applied"], rows);
    assert_eq!(shown["decision"]["pruned_proposals"], rows);
    assert_eq!(shown["pruned"]["proposals"], rows);
    assert_eq!(shown["pruned"]["keep_decided_days"], 7);
    assert_eq!(shown["pruned"]["at"], shown["decision"]["pruned_at"]);
    let records: Vec<i64> = shown["pruned"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    // What it applied (a merge or a forget of the copy), as the event log has it.
    assert!(records.contains(&second), "{shown}");
    assert!(
        records.iter().all(|r| [first, second].contains(r)),
        "{shown}"
    );
    let today = &shown["pruned"]["at"].as_str().unwrap()[..10];
    let shown_text = text(&brain, &["dream", "show", &id]);
    for expected in [
        "accepted at ".to_string(),
        format!("pruned on {today}"),
        "after dream.keep_decided_days (7 days)".to_string(),
        format!("`cairn show {second} --history`"),
    ] {
        assert!(shown_text.contains(&expected), "{expected}: {shown_text}");
    }
    // The history the note points at has the merge.
    let history = brain.json(&["show", &second.to_string(), "--history"], 0);
    assert!(
        history["history"].to_string().contains("\"merge\"")
            || history["history"].to_string().contains("\"forget\""),
        "{history}"
    );

    // Already decided: accepting or rejecting it again is refused with the reason.
    for verb in ["accept", "reject"] {
        let refused = brain.json(&["dream", verb, &id], 3);
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains("already accepted"),
            "{verb}: {refused}"
        );
    }

    // 0: a set rejected now is pruned at the next run; the undecided one never is.
    brain.json(&["config", "set", "dream.keep_decided_days", "0"], 0);
    let backup = "the nightly backup job writes to the archive bucket and must finish before six so the morning reports can read it";
    remember(&brain, &["--type", "note", "--body", backup, "--at", "40d"]);
    remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("{backup} daily"),
            "--allow-duplicate",
            "--at",
            "35d",
        ],
    );
    let rejected = fresh_dream(&brain, 4)["dream"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    brain.json(&["dream", "reject", &rejected], 0);
    let proposed_rows = proposal_rows(&brain, &proposed);
    let rejected_rows = proposal_rows(&brain, &rejected);
    assert!(rejected_rows > 0);
    let next = fresh_dream(&brain, 5);
    assert_eq!(next["pruned"]["sets"], 1, "{next}");
    assert_eq!(next["pruned"]["ids"][0], rejected.as_str(), "{next}");
    assert_eq!(next["pruned"]["keep_decided_days"], 0, "{next}");
    assert_eq!(proposal_rows(&brain, &rejected), 0);
    assert_eq!(proposal_rows(&brain, &proposed), proposed_rows);
    assert_eq!(
        brain.sql(&format!(
            "SELECT status FROM dream_runs WHERE id = '{proposed}'"
        )),
        "proposed"
    );
}

/// Forty long turns and a near-duplicate of each (twelve words in 300 changed): merging them
/// frees over 5 % of the file inside pages, and `dream --accept` compacts the brain itself.
#[test]
fn an_accept_that_frees_enough_space_compacts_the_brain() {
    let brain = Brain::new();
    let mut lines = String::new();
    for n in 0..40 {
        for edit in ["first", "second"] {
            let mut words: Vec<String> = (0..300).map(|i| format!("t{n}w{i}")).collect();
            for at in (10..300).step_by(25) {
                words[at] = format!("{edit}{at}");
            }
            lines.push_str(&format!(
                "{}\n",
                serde_json::json!({"type": "note", "body": words.join(" ")})
            ));
        }
    }
    let file = brain.dir.path().join("turns.jsonl");
    std::fs::write(&file, lines).unwrap();
    brain.json(&["import", file.to_str().unwrap()], 0);
    let pages_before: i64 = brain.sql("PRAGMA page_count").parse().unwrap();
    let dream = brain.json(&["dream", "--accept"], 0);
    assert_eq!(proposals_of(&dream, "merge").len(), 40, "{dream}");
    let compacted = dream["accepted"]["compacted"].as_str().unwrap_or_default();
    assert!(compacted.starts_with("compacted the brain"), "{dream}");
    assert!(
        dream["message"]
            .as_str()
            .unwrap()
            .contains("compacted the brain")
    );
    let pages_after: i64 = brain.sql("PRAGMA page_count").parse().unwrap();
    assert!(pages_after < pages_before, "{pages_before} → {pages_after}");
    assert_eq!(
        brain.sql("SELECT count(*) FROM meta WHERE key = 'reclaimable_bytes'"),
        "0"
    );
    assert_eq!(
        brain.sql("SELECT count(*) FROM memories WHERE typeof(body) = 'blob'"),
        "40"
    );
    assert_eq!(brain.json(&["doctor"], 0)["ok"], true);
}

/// A brain whose dreams merged records before schema v10: doctor names them, `--repair`
/// stores them as changes to their survivors (out of the index), and they read the same.
#[test]
fn doctor_repair_packs_records_merged_before_schema_v10() {
    let brain = Brain::new();
    let kept = remember(
        &brain,
        &["--type", "note", "--body", &format!("{DEPLOY} on mondays")],
    );
    let old_text = format!("{DEPLOY} on fridays");
    let merged = remember(
        &brain,
        &["--type", "note", "--body", &old_text, "--allow-duplicate"],
    );
    // What a v9 dream left: the record archived, its merge only in the event log.
    brain.sql(&format!(
        "UPDATE memories SET status = 'archived' WHERE id = {merged}; \
         INSERT INTO events (at, op, memory_id, project, detail, receipt) VALUES \
         ('2026-01-01T00:00:00Z', 'merge', {merged}, 'test-project', \
         '{{\"extra\":{{\"merged_into\":{kept}}},\"status\":\"archived\"}}', 'r');"
    ));
    assert_eq!(brain.recall_ids(&["fridays", "--all"]), vec![merged]);
    let report = brain.json(&["doctor"], 0);
    let check = doctor_check(&report, "merged-away records");
    assert_eq!(check["fix"], "cairn doctor --repair", "{report}");
    let repaired = brain.json(&["doctor", "--repair"], 0);
    assert!(
        repaired["repaired"]
            .to_string()
            .contains("stored 1 merged-away records"),
        "{repaired}"
    );
    assert_eq!(
        brain.sql(&format!(
            "SELECT merged_into FROM memories WHERE id = {merged}"
        )),
        kept.to_string()
    );
    assert_eq!(
        brain.json(&["show", &merged.to_string()], 0)["body"],
        old_text.as_str()
    );
    assert!(brain.recall_ids(&["fridays", "--all"]).is_empty());
    let again = brain.json(&["doctor", "--repair"], 0);
    assert!(again["repaired"].as_array().unwrap().is_empty(), "{again}");
}
