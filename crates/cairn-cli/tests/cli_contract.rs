//! The JSON contract of docs/cli.md, command by command: every command runs with `--json` through the
//! real binary on a small seeded brain, and its exit code and output are insta snapshots under
//! `tests/snapshots/cli_contract__*.snap`. A changed field name, a dropped field or a new exit
//! code shows up as a snapshot diff. The file also holds the command line's own promises: help
//! that lists allowed values, usage errors for wrong ones, text output that keeps its word.
//!
//! What varies from run to run is redacted in the snapshot text: times and dates, SHA-256
//! values (receipts, content hashes), temporary directories, dream set ids, durations. Record
//! ids are kept: a fresh brain numbers its records 1, 2, 3… in the order of the scenario, and
//! which id an answer names is part of what it says.

mod common;

use common::Brain;
use serde_json::{Value, json};
use std::path::Path;

/// Runs `cairn --json ARGS…` with extra environment, expecting `code`; stdout parsed as one JSON
/// document, or as JSON lines when it holds several (batch recall, export to stdout).
fn run_json(brain: &Brain, args: &[&str], code: i32, env: &[(&str, &str)]) -> Value {
    let mut cmd = brain.cmd();
    cmd.env("HOME", brain.dir.path().join("home"));
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = cmd.arg("--json").args(args).output().expect("cairn runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(code),
        "cairn {args:?}\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    match serde_json::from_str::<Value>(&stdout) {
        Ok(value) => value,
        Err(_) => Value::Array(
            stdout
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| {
                    serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("cairn {args:?}: not JSON ({e}): {line}"))
                })
                .collect(),
        ),
    }
}

/// The regex that matches `text` literally.
fn literal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            out.push('\\');
            out.push(c);
        }
    }
    out
}

/// Snapshots `{args, exit, output}` of one command, with what varies between runs redacted.
fn snap_with(brain: &Brain, name: &str, args: &[&str], code: i32, env: &[(&str, &str)]) -> Value {
    let output = run_json(brain, args, code, env);
    let document = json!({"args": args, "exit": code, "output": output});
    redacted(brain).bind(|| insta::assert_json_snapshot!(name, document));
    output
}

/// The insta settings that redact what varies between runs of a scenario on `brain`.
fn redacted(brain: &Brain) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(true);
    let dir = brain.dir.path().display().to_string();
    settings.add_filter(&literal(&dir), "[dir]");
    if let Ok(real) = brain.dir.path().canonicalize() {
        settings.add_filter(&literal(&real.display().to_string()), "[dir]");
    }
    // other brains' directories (an import reads a file another brain exported)
    let temp = std::env::temp_dir().display().to_string();
    settings.add_filter(
        &format!(
            r"{}/?\.tmp[A-Za-z0-9]+",
            literal(temp.trim_end_matches('/'))
        ),
        "[dir]",
    );
    // the checkout's own fixtures (an importer reads them in place): the clone's path varies
    settings.add_filter(&literal(env!("CARGO_MANIFEST_DIR")), "[crate]");
    settings.add_filter(r#""([a-z_]*_ms)": \d+"#, r#""$1": "[ms]""#);
    // the evaluation's clocks and memory: seconds, rates, latency percentiles, peak RSS
    settings.add_filter(
        r#""([a-z_]*(_secs|_per_sec|_mb|_ms_p\d+))": [0-9.e-]+"#,
        r#""$1": "[measured]""#,
    );
    // decay's strength right now: a function of the seconds since the record was written
    settings.add_filter(r#""strength": [0-9.e-]+"#, r#""strength": "[strength]""#);
    settings.add_filter(
        r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?",
        "[time]",
    );
    settings.add_filter(r"\b\d{4}-\d\d-\d\d\b", "[date]");
    settings.add_filter(r"\b[0-9a-f]{64}\b", "[sha256]");
    // `cairn token create`'s secret
    settings.add_filter(r"\bcairn_[0-9a-f]{64}\b", "[token]");
    // dream proposal set ids
    settings.add_filter(r"\b[0-9a-f]{12}\b", "[dream id]");
    settings
}

fn snap(brain: &Brain, name: &str, args: &[&str], code: i32) -> Value {
    snap_with(brain, name, args, code, &[])
}

/// What `cairn ARGS…` prints on stdout, expecting exit 0.
fn stdout_of(brain: &Brain, args: &[&str]) -> String {
    let output = brain.cmd().args(args).output().expect("cairn runs");
    assert_eq!(output.status.code(), Some(0), "cairn {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

#[test]
fn records_remember_recall_show_update_forget() {
    let brain = Brain::new();
    let deploy = [
        "remember",
        "--type",
        "fact",
        "--title",
        "Deploy target",
        "--body",
        "We deploy to fly.io in region ams.",
        "--tags",
        "ops,deploy",
        "--source",
        "runbook",
    ];
    snap(&brain, "remember_added", &deploy, 0);
    snap(&brain, "remember_noop", &deploy, 0);
    snap(
        &brain,
        "remember_updated",
        &[
            "remember",
            "--type",
            "fact",
            "--title",
            "deploy  target!",
            "--body",
            "We deploy to fly.io in region fra.",
        ],
        0,
    );
    let billing = "The billing service retries failed webhook deliveries five times with exponential backoff starting at two seconds and then gives up and writes the event to the dead letter queue for manual replay by the on call engineer";
    brain.remember("fact", None, billing);
    snap(
        &brain,
        "remember_refused",
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            &billing.replace("on call engineer", "on call engineers"),
        ],
        3,
    );
    brain.remember(
        "fact",
        None,
        "Feature flag new-checkout is enabled in production.",
    );
    snap(
        &brain,
        "remember_flagged",
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            "Feature flag new-checkout is disabled in production.",
        ],
        0,
    );
    brain.remember(
        "decision",
        Some("Job queue"),
        "Use RabbitMQ for the job queue.",
    );
    snap(
        &brain,
        "remember_superseding",
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "Use SQS for the job queue: managed, and the team knows it.",
            "--supersedes",
            "5",
            "--fork-ok",
        ],
        0,
    );
    snap(
        &brain,
        "remember_with_options",
        &[
            "remember",
            "--type",
            "preference",
            "--body",
            "Answer in short paragraphs, no bullet lists.",
            "--scope",
            "style",
            "--importance",
            "4",
            "--confidence",
            "high",
            "--trust-zone",
            "trusted_collaborator",
            "--sensitivity",
            "public_safe",
            "--pin",
            "--personal",
        ],
        0,
    );
    snap(&brain, "show", &["show", "1", "--history"], 0);
    snap(&brain, "show_with_conflicts", &["show", "4"], 0);
    snap(&brain, "show_missing", &["show", "999"], 1);
    snap(
        &brain,
        "update",
        &["update", "1", "--importance", "4", "--tags", "ops", "--pin"],
        0,
    );
    snap(
        &brain,
        "recall",
        &["recall", "deploy region", "--no-touch"],
        0,
    );
    snap(
        &brain,
        "recall_follows_supersession",
        &["recall", "RabbitMQ job queue", "--no-touch"],
        0,
    );
    snap(
        &brain,
        "recall_all_versions",
        &[
            "recall",
            "job queue",
            "--all",
            "--no-touch",
            "--type",
            "decision",
        ],
        0,
    );
    let batch = brain.dir.path().join("queries.jsonl");
    std::fs::write(
        &batch,
        "{\"query\": \"deploy\"}\n{\"query\": \"new-checkout enabled\", \"limit\": 1, \"mode\": \"lexical\"}\n{\"nope\": 1}\n",
    )
    .unwrap();
    snap(
        &brain,
        "recall_batch",
        &["recall", "--batch", batch.to_str().unwrap(), "--no-touch"],
        0,
    );
    snap(
        &brain,
        "verify",
        &["verify", "1", "--source", "checked the fly.io dashboard"],
        0,
    );
    snap(&brain, "forget", &["forget", "2"], 0);
    snap(&brain, "restore", &["restore", "2"], 0);
    snap(&brain, "forget_hard_refused", &["forget", "6", "--hard"], 3);
    snap(&brain, "forget_hard", &["forget", "2", "--hard"], 0);
    snap(&brain, "list", &["list"], 0);
    snap(
        &brain,
        "list_filtered",
        &["list", "--type", "decision", "--status", "superseded"],
        0,
    );
    snap(&brain, "stats", &["stats"], 0);
    snap(&brain, "extract", &["extract", "--no-llm"], 0);
    snap(
        &brain,
        "scope_declare",
        &["scope", "declare", "style", "--description", "how to write"],
        0,
    );
    snap(&brain, "scope_list", &["scope", "list"], 0);
    snap(&brain, "scope_map", &["scope", "map"], 0);
    snap(&brain, "doctor", &["doctor"], 0);
    snap(&brain, "doctor_repair", &["doctor", "--repair"], 0);
    let recovered = brain.dir.path().join("recovered.db");
    snap(
        &brain,
        "doctor_recover_into",
        &["doctor", "--recover-into", recovered.to_str().unwrap()],
        0,
    );
    snap(&brain, "maintain", &["maintain"], 0);
    snap(&brain, "maintain_status", &["maintain", "--status"], 0);
}

#[test]
fn a_damaged_brain_gets_the_doctor_advice() {
    let brain = Brain::new();
    std::fs::write(&brain.db, vec![0x5a_u8; 8192]).unwrap();
    snap(&brain, "doctor_damaged", &["doctor"], 1);
}

#[test]
fn agent_commands() {
    let brain = Brain::new();
    brain.remember(
        "constraint",
        None,
        "Never run migrations against production from a laptop.",
    );
    brain.remember(
        "preference",
        None,
        "Prefer small commits with plain messages.",
    );
    snap(
        &brain,
        "identity_set",
        &[
            "identity",
            "set",
            "A careful build engineer for the kiln project.",
        ],
        0,
    );
    snap(&brain, "identity_show", &["identity", "show"], 0);
    snap(
        &brain,
        "task_add",
        &[
            "task",
            "add",
            "Rotate the deploy keys",
            "--detail",
            "before Friday",
        ],
        0,
    );
    brain.json(&["task", "add", "Write the release notes"], 0);
    snap(&brain, "task_done", &["task", "done", "2"], 0);
    snap(&brain, "task_list", &["task", "list", "--all"], 0);
    snap(
        &brain,
        "measure_record",
        &[
            "measure",
            "record",
            "build_minutes",
            "12.5",
            "--unit",
            "min",
        ],
        0,
    );
    brain.json(&["measure", "record", "build_minutes", "10"], 0);
    snap(&brain, "measure_show", &["measure", "show"], 0);
    snap(
        &brain,
        "awareness_add",
        &[
            "awareness",
            "add",
            "deploy freeze until the release is cut",
            "--expires",
            "2099-01-01",
        ],
        0,
    );
    brain.json(&["awareness", "add", "pairing with Ana today"], 0);
    snap(&brain, "awareness_drop", &["awareness", "drop", "2"], 0);
    snap(&brain, "awareness_list", &["awareness", "list"], 0);
    // the inbox is filled by a Stop hook capturing a transcript
    let transcript = brain.dir.path().join("session.jsonl");
    std::fs::write(&transcript, read_fixture("hooks/claude-transcript.jsonl")).unwrap();
    let stop = read_fixture("hooks/claude-stop.json")
        .replace("TRANSCRIPT", &transcript.display().to_string())
        .replace("CWD", &brain.dir.path().display().to_string());
    let hook = brain
        .cmd()
        .args(["hook", "stop"])
        .write_stdin(stop)
        .output()
        .unwrap();
    assert_eq!(hook.status.code(), Some(0));
    let inbox = snap(&brain, "inbox_list", &["inbox", "list"], 0);
    let ids: Vec<String> = inbox
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].to_string())
        .collect();
    assert!(ids.len() >= 2, "{inbox}");
    snap(
        &brain,
        "inbox_accept",
        &["inbox", "accept", &ids[0], "--type", "fact"],
        0,
    );
    snap(&brain, "inbox_dismiss", &["inbox", "dismiss", &ids[1]], 0);
    snap(&brain, "inbox_all", &["inbox", "list", "--all"], 0);
    snap(&brain, "brief", &["brief", "--budget", "0"], 0);
    snap(
        &brain,
        "brief_sections",
        &["brief", "--section", "guardrails,identity"],
        0,
    );
    snap(&brain, "review", &["review"], 0);
    snap(&brain, "log", &["log", "--limit", "5"], 0);
    snap(&brain, "log_last_session", &["log", "--last-session"], 0);
}

fn read_fixture(path: &str) -> String {
    std::fs::read_to_string(fixture(path)).unwrap()
}

#[test]
fn graph_commands() {
    let brain = Brain::new();
    brain.remember(
        "fact",
        Some("API storage"),
        "The api service stores sessions in postgres (see src/api/db.rs).",
    );
    brain.remember("fact", None, "The web frontend calls the api over HTTPS.");
    snap(
        &brain,
        "entity_add",
        &[
            "entity", "add", "postgres", "--type", "service", "--alias", "pg,psql",
        ],
        0,
    );
    brain.json(&["entity", "add", "api", "--type", "service"], 0);
    brain.json(&["entity", "add", "web", "--type", "service"], 0);
    snap(
        &brain,
        "relate",
        &["relate", "api", "requires", "postgres"],
        0,
    );
    brain.json(&["relate", "web", "requires", "api"], 0);
    brain.json(&["relate", "#2", "relates", "#1"], 0);
    snap(
        &brain,
        "relate_again_noop",
        &["relate", "api", "requires", "postgres"],
        0,
    );
    snap(
        &brain,
        "relate_dangling_refused",
        &["relate", "nowhere", "requires", "postgres"],
        3,
    );
    snap(
        &brain,
        "unrelate",
        &["unrelate", "web", "requires", "api"],
        0,
    );
    snap(&brain, "graph", &["graph"], 0);
    snap(&brain, "edges", &["edges", "api"], 0);
    snap(&brain, "edges_history", &["edges", "web", "--history"], 0);
    snap(
        &brain,
        "neighbors",
        &["neighbors", "postgres", "--direction", "in", "--depth", "3"],
        0,
    );
    snap(&brain, "entities", &["entities"], 0);
    snap(&brain, "entity_relink", &["entity", "relink"], 0);
    snap(
        &brain,
        "relation_type_declare",
        &[
            "relation-type",
            "declare",
            "mirrors",
            "--weight",
            "0.4",
            "--symmetric",
        ],
        0,
    );
    snap(&brain, "relation_type_list", &["relation-type", "list"], 0);
    snap(&brain, "clusters", &["clusters", "--min-size", "2"], 0);
}

/// A fact and its near-duplicate, for a dream to propose a merge. Both are written at one
/// moment (the test clock): the dream's survivor prefers the later update, so two writes that
/// straddled a second boundary would swap survivor and merged record from run to run; at one
/// moment the tie goes to the smaller id.
fn backup_fact_twice(brain: &Brain, body: &str) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let at_now = [("CAIRN_NOW", now.as_str())];
    run_json(
        brain,
        &["remember", "--type", "fact", "--body", body],
        0,
        &at_now,
    );
    run_json(
        brain,
        &[
            "remember",
            "--type",
            "fact",
            "--body",
            &format!("{body}."),
            "--allow-duplicate",
        ],
        0,
        &at_now,
    );
}

#[test]
fn lifecycle_commands() {
    let brain = Brain::new();
    let body = "The nightly backup job copies the brain to the NAS at two in the morning and keeps fourteen days of copies";
    backup_fact_twice(&brain, body);
    brain.remember("note", None, "Ephemeral note that expired long ago.");
    snap(&brain, "decay_dry_run", &["decay", "--dry-run"], 0);
    snap(&brain, "decay", &["decay"], 0);
    snap(&brain, "decay_explain", &["decay", "--explain", "1"], 0);
    let dream = snap(&brain, "dream", &["dream", "--no-llm"], 0);
    let id = dream["dream"]["id"]
        .as_str()
        .expect("a dream id")
        .to_string();
    snap(&brain, "dream_list", &["dream", "list"], 0);
    snap(&brain, "dream_show", &["dream", "show", &id], 0);
    snap(&brain, "dream_reject", &["dream", "reject", &id], 0);
    // the same records in another brain, whose dream is accepted
    let other = Brain::new();
    backup_fact_twice(&other, body);
    let dream = run_json(&other, &["dream", "--no-llm"], 0, &[]);
    let id = dream["dream"]["id"]
        .as_str()
        .expect("a second dream id")
        .to_string();
    snap(&other, "dream_accept", &["dream", "accept", &id], 0);
    snap(
        &brain,
        "config_set",
        &["config", "set", "dream.auto_accept", "true"],
        0,
    );
    snap(
        &brain,
        "config_get",
        &["config", "get", "dream.auto_accept"],
        0,
    );
    snap(&brain, "config_list", &["config", "list"], 0);
    snap(
        &brain,
        "config_unset",
        &["config", "unset", "dream.auto_accept"],
        0,
    );
}

#[test]
fn exchange_commands() {
    let brain = Brain::new();
    brain.remember(
        "fact",
        Some("Deploy target"),
        "We deploy to fly.io in region ams.",
    );
    brain.json(
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "The release train leaves every second Tuesday.",
            "--trust-zone",
            "trusted_collaborator",
        ],
        0,
    );
    let file = brain.dir.path().join("export.jsonl");
    snap(
        &brain,
        "export_file",
        &["export", file.to_str().unwrap()],
        0,
    );
    snap(&brain, "export_stdout", &["export"], 0);
    let other = Brain::new();
    snap(
        &other,
        "import_jsonl",
        &["import", file.to_str().unwrap()],
        0,
    );
    // With an embedder: how many records the import embedded and how many are still pending.
    let embedded = Brain::new();
    snap_with(
        &embedded,
        "import_jsonl_embedded",
        &["import", file.to_str().unwrap()],
        0,
        &[("CAIRN_EMBEDDER", "hash-64")],
    );
    let envelope = brain.dir.path().join("envelope.json");
    snap(
        &brain,
        "share",
        &[
            "share",
            "--zone",
            "trusted_collaborator",
            "--ids",
            "1,2",
            "--include-content",
            "--out",
            envelope.to_str().unwrap(),
        ],
        0,
    );
    snap(
        &brain,
        "share_stdout",
        &["share", "--zone", "outside_contact", "--query", "deploy"],
        0,
    );
    let third = Brain::new();
    snap(
        &third,
        "import_envelope",
        &["import", "envelope", envelope.to_str().unwrap()],
        0,
    );
    let wiki = brain.dir.path().join("wiki");
    snap(
        &brain,
        "export_wiki",
        &["export", "wiki", wiki.to_str().unwrap()],
        0,
    );
    let page = std::fs::read_dir(wiki.join("fact"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "md"))
        .expect("a fact page");
    let text = std::fs::read_to_string(&page).unwrap();
    std::fs::write(&page, text.replace("region ams", "region fra")).unwrap();
    snap(
        &brain,
        "import_wiki",
        &["import", "wiki", wiki.to_str().unwrap()],
        0,
    );
    snap(
        &other,
        "import_claude_md",
        &[
            "import",
            "claude-md",
            &fixture("importers/claude-code/repo"),
        ],
        0,
    );
    snap(
        &other,
        "import_agents_md",
        &["import", "agents-md", &fixture("importers/AGENTS.md")],
        0,
    );
    snap(
        &other,
        "import_mcp_memory",
        &["import", "mcp-memory", &fixture("importers/memory.jsonl")],
        0,
    );
    snap(
        &other,
        "import_markdown",
        &["import", "markdown", &fixture("importers/basic-memory")],
        0,
    );
    snap(
        &other,
        "import_mem0",
        &["import", "mem0", &fixture("importers/mem0-export.json")],
        0,
    );
}

#[test]
fn semantic_and_install_commands() {
    let brain = Brain::new();
    let hash = [("CAIRN_EMBEDDER", "hash-64")];
    brain.remember("fact", None, "Kiln firing takes nine hours.");
    brain.remember("fact", None, "Glaze recipes live in the studio binder.");
    snap_with(&brain, "model_status", &["model", "status"], 0, &hash);
    snap_with(
        &brain,
        "eval_locomo",
        &[
            "eval",
            "locomo",
            "--data",
            &fixture("locomo-tiny.json"),
            "--mode",
            "lexical",
            "--k",
            "1,5",
        ],
        0,
        &[],
    );
    snap_with(&brain, "reindex", &["reindex"], 0, &hash);
    snap_with(&brain, "reindex_full", &["reindex", "--full"], 0, &hash);
    snap_with(
        &brain,
        "recall_hybrid",
        &["recall", "kiln firing", "--no-touch"],
        0,
        &hash,
    );
    snap(
        &brain,
        "install_dry_run",
        &[
            "install",
            "claude-code",
            "--dry-run",
            "--command",
            "/usr/local/bin/cairn",
        ],
        0,
    );
}

#[test]
fn recall_in_text_mode_prints_the_notes_it_points_to() {
    let brain = Brain::new();
    brain.remember("fact", None, "Kiln firing takes nine hours.");
    let text = stdout_of(&brain, &["recall", "kiln", "--no-touch"]);
    assert!(text.contains("Kiln firing takes nine hours."), "{text}");
    // lexical-only because no embedder is configured: the text says why, and never points to
    // notes it does not print
    assert!(text.contains("lexical-only"), "{text}");
    assert!(
        !text.contains("see the notes below") || text.contains("\nnote: "),
        "{text}"
    );
    // an answer with no results still prints the notes its first line points to
    let empty = brain
        .cmd()
        .args(["recall", "zeppelin", "--no-touch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&empty.stdout);
    assert_eq!(empty.status.code(), Some(0), "{text}");
    assert!(text.contains("see the notes below"), "{text}");
    assert!(text.contains("\nnote: no embedder is configured"), "{text}");
}

#[test]
fn codemap_commands() {
    let brain = Brain::new();
    let dir = brain.dir.path();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/kiln.rs"),
        "pub struct Kiln {\n    pub cone: u8,\n}\n\npub fn fire_kiln(kiln: &Kiln) -> u32 {\n    glaze_hours(kiln.cone)\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/glaze.rs"),
        "pub const MAX_CONE: u8 = 10;\n\npub fn glaze_hours(cone: u8) -> u32 {\n    u32::from(cone.min(MAX_CONE)) * 2\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/notes.py"),
        "def unrelated_notes():\n    return []\n",
    )
    .unwrap();
    snap(
        &brain,
        "codemap",
        &["codemap", "--focus", "src/kiln.rs", "--budget", "1024"],
        0,
    );
    snap(
        &brain,
        "codemap_cut",
        &["codemap", "--focus", "src/kiln.rs", "--budget", "20"],
        0,
    );
    snap(
        &brain,
        "code_neighbors",
        &["code-neighbors", "glaze_hours"],
        0,
    );
    snap(
        &brain,
        "codemap_outside",
        &["codemap", "--focus", "/etc/hostname"],
        1,
    );
}

#[test]
fn help_lists_the_allowed_values_of_enum_flags() {
    let brain = Brain::new();
    let help = brain.cmd().args(["remember", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for listed in [
        "possible values: policy, constraint, preference, decision",
        "possible values: confirmed, reported, inferred",
        "possible values: private_self, trusted_collaborator, outside_contact, paid_public",
        "possible values: public_safe, normal, do_not_export",
    ] {
        assert!(text.contains(listed), "{listed:?} missing from:\n{text}");
    }
    let help = brain.cmd().args(["recall", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("possible values: hybrid, lexical, semantic"),
        "{text}"
    );
}

#[test]
fn eval_help_keeps_its_own_options_apart_and_says_which_global_ones_apply() {
    // Regression: `eval locomo --help` listed --db, --project, --json and --model-dir among its
    // own options, though --db and --project do nothing there.
    let brain = Brain::new();
    let text = stdout_of(&brain, &["eval", "locomo", "--help"]);
    let global = text.find("Global options:").expect("a global heading");
    for own in ["--data", "--k", "--mode", "--fusion"] {
        let at = text
            .find(own)
            .unwrap_or_else(|| panic!("{own} missing:\n{text}"));
        assert!(
            at < global,
            "{own} is listed with the global options:\n{text}"
        );
    }
    for flag in ["--db", "--project", "--json", "--model-dir"] {
        let at = text
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} missing:\n{text}"));
        assert!(at > global, "{flag} is mixed into eval's options:\n{text}");
    }
    assert!(text.contains("--db and --project do not"), "{text}");
    assert!(
        text.contains("possible values: hybrid, lexical, semantic"),
        "{text}"
    );
}

#[test]
fn a_wrong_enum_value_is_a_usage_error_naming_the_allowed_values() {
    let brain = Brain::new();
    for (args, allowed) in [
        (
            vec!["remember", "--type", "rumour", "--body", "x"],
            "policy, constraint",
        ),
        (
            vec![
                "remember",
                "--type",
                "fact",
                "--body",
                "x",
                "--confidence",
                "sure",
            ],
            "confirmed, reported, inferred",
        ),
        (
            vec!["recall", "x", "--mode", "fuzzy"],
            "hybrid, lexical, semantic",
        ),
        (vec!["recall", "x", "--zone", "world"], "private_self"),
        (
            vec!["share", "--zone", "world", "--ids", "1"],
            "private_self",
        ),
        (
            vec!["list", "--status", "gone"],
            "active, superseded, archived",
        ),
        (vec!["neighbors", "x", "--direction", "up"], "in, out, both"),
        (vec!["brief", "--section", "weather"], "guardrails"),
        (
            vec!["install", "vim", "--dry-run"],
            "claude-code, codex, cursor, gemini",
        ),
    ] {
        let output = brain.cmd().arg("--json").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(allowed), "{args:?}: {stderr}");
    }
    // every spelling the vocabulary accepts stays valid: aliases, case, `-` for `_`
    let stored = brain.json(
        &[
            "remember",
            "--type",
            "FACT",
            "--body",
            "Aliases still parse.",
            "--confidence",
            "LOW",
            "--trust-zone",
            "trusted-collaborator",
            "--sensitivity",
            "Do-Not-Export",
        ],
        0,
    );
    let shown = brain.json(&["show", &stored["id"].to_string()], 0);
    assert_eq!(shown["type"], "fact");
    assert_eq!(shown["confidence"], "inferred");
    assert_eq!(shown["trust_zone"], "trusted_collaborator");
    assert_eq!(shown["sensitivity"], "do_not_export");
    brain.json(&["entity", "add", "api"], 0);
    brain.json(&["entity", "add", "postgres"], 0);
    brain.json(&["relate", "api", "requires", "postgres"], 0);
    let incoming = brain.json(&["neighbors", "postgres", "--direction", "incoming"], 0);
    assert_eq!(incoming["direction"], "in", "{incoming}");
}

/// Snapshots what `cairn hook ARGS…` prints for a payload of tests/fixtures/hooks (its
/// placeholders filled): `{args, exit, stdout}`, stdout as the client's JSON, or `""` when the
/// hook has nothing to say.
fn snap_hook(brain: &Brain, name: &str, args: &[&str], payload: &str, prompt: &str) {
    let transcript = brain.dir.path().join("session.jsonl");
    let stdin = std::fs::read_to_string(fixture(&format!("hooks/{payload}")))
        .unwrap()
        .replace("TRANSCRIPT", &transcript.display().to_string())
        .replace("CWD", &brain.dir.path().display().to_string())
        .replace("PROMPT", prompt);
    let output = brain
        .cmd()
        // a deadline no loaded machine misses: the snapshot is about what is printed
        .env("CAIRN_HOOK_DEADLINE_MS", "120000")
        .arg("hook")
        .args(args)
        .write_stdin(stdin)
        .output()
        .expect("cairn runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed = match stdout.trim() {
        "" => Value::String(String::new()),
        text => serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("hook {args:?}: stdout is not JSON ({e}): {text}")),
    };
    let document = json!({"args": args, "exit": output.status.code(), "stdout": printed});
    redacted(brain).bind(|| insta::assert_json_snapshot!(name, document));
}

#[test]
fn hook_outputs_per_event_and_client() {
    let brain = Brain::new();
    brain.remember(
        "gotcha",
        Some("pnpm lockfile drift"),
        "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; run pnpm install.",
    );
    brain.remember("policy", Some("no force push"), "Never force-push to main");
    std::fs::copy(
        fixture("hooks/claude-transcript.jsonl"),
        brain.dir.path().join("session.jsonl"),
    )
    .unwrap();
    let prompt = "why does CI fail with ERR_PNPM_OUTDATED_LOCKFILE?";
    snap_hook(
        &brain,
        "hook_session_start",
        &["session-start"],
        "claude-session-start.json",
        "",
    );
    snap_hook(
        &brain,
        "hook_user_prompt_submit",
        &["user-prompt-submit"],
        "claude-user-prompt-submit.json",
        prompt,
    );
    snap_hook(&brain, "hook_stop", &["stop"], "claude-stop.json", "");
    snap_hook(
        &brain,
        "hook_pre_compact",
        &["pre-compact"],
        "claude-pre-compact.json",
        "",
    );
    snap_hook(
        &brain,
        "hook_session_end",
        &["session-end"],
        "claude-session-end.json",
        "",
    );
    snap_hook(
        &brain,
        "hook_gemini_before_agent",
        &["BeforeAgent", "--client", "gemini"],
        "gemini-before-agent.json",
        prompt,
    );
    snap_hook(
        &brain,
        "hook_gemini_after_agent",
        &["AfterAgent", "--client", "gemini"],
        "gemini-after-agent.json",
        "",
    );
    snap_hook(
        &brain,
        "hook_cursor_session_start",
        &["session-start", "--client", "cursor"],
        "cursor-session-start.json",
        "",
    );
    snap_hook(
        &brain,
        "hook_cursor_after_agent_response",
        &["afterAgentResponse", "--client", "cursor"],
        "cursor-after-agent-response.json",
        "",
    );
}

/// A JSON-RPC-lines client of a real `cairn mcp` on `brain`: just enough to call tools.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next_id: i64,
}

impl Mcp {
    fn start(brain: &Brain) -> Mcp {
        use std::process::{Command, Stdio};
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
            .arg("mcp")
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_PROJECT", "test-project")
            .env("CAIRN_EMBEDDER", "none")
            .env_remove("CAIRN_READ_ONLY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cairn mcp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "contract", "version": "1"}}),
        );
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::BufRead;
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let value: Value = serde_json::from_str(line.trim()).unwrap();
            if value["id"] == json!(id) {
                return value;
            }
        }
    }

    /// Calls `tool` and snapshots `{tool, arguments, isError, structuredContent}`.
    fn snap(&mut self, brain: &Brain, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = &answer["result"];
        let document = json!({
            "tool": tool,
            "arguments": arguments,
            "isError": result["isError"],
            "structuredContent": result["structuredContent"],
        });
        redacted(brain).bind(|| insta::assert_json_snapshot!(format!("mcp_{tool}"), document));
        result["structuredContent"].clone()
    }

    fn stop(mut self) {
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn mcp_tool_results() {
    let brain = Brain::new();
    let mut mcp = Mcp::start(&brain);
    let stored = mcp.snap(
        &brain,
        "remember",
        json!({"type": "gotcha", "title": "pnpm lockfile drift", "body": "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when `pnpm-lock.yaml` is stale; run pnpm install.", "tags": ["ci"]}),
    );
    let id = stored["id"].as_i64().expect("an id");
    mcp.snap(&brain, "recall", json!({"query": "pnpm lockfile"}));
    mcp.snap(&brain, "show", json!({"id": id, "history": true}));
    mcp.snap(&brain, "update", json!({"id": id, "importance": 4}));
    let successor = mcp.snap(
        &brain,
        "supersede",
        json!({"id": id, "body": "CI runs pnpm install --frozen-lockfile; a stale lockfile fails fast."}),
    );
    let successor = successor["id"].as_i64().expect("the successor's id");
    mcp.snap(&brain, "forget", json!({"id": successor}));
    mcp.snap(&brain, "restore", json!({"id": successor}));
    mcp.snap(&brain, "brief", json!({"budget": 4000}));
    mcp.snap(&brain, "review", json!({}));
    let task = mcp.snap(
        &brain,
        "task_add",
        json!({"title": "rotate the staging credentials", "due": "2099-01-01"}),
    );
    mcp.snap(&brain, "tasks", json!({}));
    mcp.snap(&brain, "task_done", json!({"id": task["task"]["id"]}));
    mcp.snap(
        &brain,
        "measure_record",
        json!({"name": "build-seconds", "value": 41.5, "unit": "s"}),
    );
    mcp.snap(&brain, "measures", json!({}));
    mcp.snap(&brain, "activity", json!({"limit": 3}));
    mcp.snap(
        &brain,
        "identity_set",
        json!({"text": "I pair with the platform team."}),
    );
    mcp.snap(&brain, "identity", json!({}));
    let aware = mcp.snap(
        &brain,
        "awareness_add",
        json!({"text": "the release freeze starts Friday"}),
    );
    mcp.snap(&brain, "awareness", json!({}));
    mcp.snap(&brain, "awareness_drop", json!({"id": aware["item"]["id"]}));
    mcp.snap(&brain, "inbox", json!({"all": true}));
    mcp.snap(
        &brain,
        "entity_add",
        json!({"name": "ledger", "type": "service", "aliases": ["ledger-db"]}),
    );
    mcp.snap(
        &brain,
        "relate",
        json!({"src": "pnpm-lock.yaml", "relation": "affects", "dst": "ledger"}),
    );
    mcp.snap(
        &brain,
        "neighbors",
        json!({"node": "ledger", "direction": "in", "as_of": "2099-01-01"}),
    );
    mcp.snap(&brain, "edges", json!({"node": "ledger"}));
    mcp.snap(&brain, "entities", json!({}));
    mcp.snap(&brain, "entity_search", json!({"query": "ledger"}));
    mcp.snap(&brain, "graph", json!({"as_of": "2099-01-01"}));
    mcp.snap(&brain, "clusters", json!({"min_size": 2}));
    mcp.snap(
        &brain,
        "unrelate",
        json!({"src": "pnpm-lock.yaml", "relation": "affects", "dst": "ledger"}),
    );
    mcp.snap(&brain, "dream_list", json!({}));
    mcp.stop();
}

#[test]
fn token_commands() {
    let brain = Brain::new();
    let created = snap(
        &brain,
        "token_create",
        &[
            "token",
            "create",
            "--name",
            "laptop",
            "--project",
            "shop",
            "--role",
            "write",
            "--expires",
            "30d",
        ],
        0,
    );
    assert!(created["token"].as_str().unwrap().starts_with("cairn_"));
    snap(
        &brain,
        "token_create_all",
        &["token", "create", "--name", "ci", "--all", "--role", "read"],
        0,
    );
    snap(
        &brain,
        "token_create_twice",
        &["token", "create", "--name", "ci", "--all", "--role", "read"],
        1,
    );
    snap(&brain, "token_revoke", &["token", "revoke", "laptop"], 0);
    snap(
        &brain,
        "token_revoke_unknown",
        &["token", "revoke", "laptop"],
        1,
    );
    let listed = snap(&brain, "token_list", &["token", "list"], 0);
    assert!(
        !listed
            .to_string()
            .contains(created["token"].as_str().unwrap())
    );
}
