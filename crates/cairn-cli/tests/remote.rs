//! The CLI with `CAIRN_URL`: the same commands against a real `cairn serve` (spawned, its token
//! made with `cairn token create`) instead of a file — one story body run on both backends with
//! their outputs compared, then every fault of the brief: a server that is down, a wrong or
//! revoked token, another project's record, an oversize body, a read token writing, a command
//! no endpoint serves, and `cairn mcp` forwarded to the server's `/mcp` (the official Python
//! SDK's stdio client).

mod common;
#[path = "../../cairn-embed/tests/support/https_server.rs"]
mod https_server;

use common::Brain;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The fixed clock both backends run on, so their answers carry the same times.
const NOW: &str = "2026-06-01T09:00:00Z";

/// The embedder of the story's backends: deterministic, instant, shares words not meaning.
const EMBEDDER: &str = "hash";

/// A text long enough that a one-word change of it is a near duplicate (refused, exit 3).
const BILLING: &str = "The billing queue retries failed webhook deliveries five times with exponential backoff starting at two seconds and then gives up and writes the event to the dead letter queue for manual replay by the on call engineer";

/// `cairn serve` over its own brain, spawned for one test.
struct Server {
    child: Child,
    brain: Brain,
    url: String,
    /// Everything the server wrote on stderr after its first line.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// A server listening on a loopback port (`socket`: on a Unix socket instead).
    fn start(args: &[&str], socket: bool) -> Server {
        Server::start_with(args, socket, "none")
    }

    /// A server whose embedder is `embedder` (`CAIRN_EMBEDDER`).
    fn start_with(args: &[&str], socket: bool, embedder: &str) -> Server {
        let brain = Brain::new();
        // Open the brain once so tokens can be made before the server starts.
        brain.json(&["stats"], 0);
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        // These tests compare the server's answers with the file's call by call, so each
        // recall's access record is written before it answers (not buffered, the default).
        cmd.args(["serve", "--no-buffer-accesses"]);
        if socket {
            cmd.arg("--socket").arg(brain.dir.path().join("cairn.sock"));
        } else {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(args)
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_NOW", NOW)
            .env("CAIRN_EMBEDDER", embedder)
            .env("XDG_DATA_HOME", brain.dir.path().join("data"))
            .env_remove("CAIRN_PROJECT")
            .env_remove("CAIRN_READ_ONLY")
            .env_remove("CAIRN_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("cairn serve starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("unix:"))
            .unwrap_or_else(|| panic!("no address in the server's first line: {first:?}"))
            .to_string();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            brain,
            url,
            log,
        }
    }

    /// `cairn token create` on the server's brain; the secret.
    /// (`project` `--all`: a token for every project.)
    fn token(&self, name: &str, project: &str, role: &str) -> String {
        let mut args = vec!["token", "create", "--name", name, "--role", role];
        if project == "--all" {
            args.push("--all");
        } else {
            args.extend(["--project", project]);
        }
        let created = self.brain.json(&args, 0);
        created["token"].as_str().unwrap().to_string()
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a story's commands go: a brain file, or a server through `CAIRN_URL`.
struct Backend {
    /// The client side: its working directory and the file it must never touch when remote.
    client: Brain,
    server: Option<(Server, String)>,
}

impl Backend {
    fn file() -> Backend {
        Backend {
            client: Brain::new(),
            server: None,
        }
    }

    fn server(socket: bool) -> Backend {
        let server = Server::start_with(&[], socket, EMBEDDER);
        // Named `cli`, the actor a local command writes as, so histories read the same; for
        // every project, as stats, doctor, export and import need (the client names its
        // project with CAIRN_PROJECT, sent as `Cairn-Project`).
        let token = server.token("cli", "--all", "admin");
        let backend = Backend {
            client: Brain::new(),
            server: Some((server, token)),
        };
        backend.embedder_ready();
        backend
    }

    /// Waits until the server's embedder has loaded in the background: a recall through the
    /// client stops saying `degraded`. It asks every 20 ms for at most 60 s — a condition
    /// with a deadline, not a guess at how long loading takes.
    fn embedder_ready(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let output = self.run(&["--json", "recall", "readiness", "--no-touch"], None);
            common::succeeded(&output);
            let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
            if answer["degraded"].is_null() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server's embedder did not load within 60 s: {answer}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn cmd(&self) -> assert_cmd::Command {
        let mut cmd = self.client.cmd();
        // Both backends embed with the deterministic test embedder, so recall is hybrid on
        // both and their answers can be compared.
        cmd.env("CAIRN_NOW", NOW).env("CAIRN_EMBEDDER", EMBEDDER);
        match &self.server {
            Some((server, token)) => {
                cmd.env("CAIRN_URL", &server.url).env("CAIRN_TOKEN", token);
            }
            None => {
                cmd.env_remove("CAIRN_URL").env_remove("CAIRN_TOKEN");
            }
        }
        cmd
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.cmd();
        cmd.args(args);
        if let Some(input) = stdin {
            cmd.write_stdin(input);
        }
        cmd.output().expect("cairn runs")
    }

    /// Checks a remote backend never created the client's brain file.
    fn assert_file_untouched(&self) {
        if self.server.is_some() {
            assert!(
                !self.client.db.exists(),
                "a command under CAIRN_URL opened the local brain file"
            );
        }
    }
}

/// One step of a story as printed: the command, its exit code, stdout, stderr.
fn transcript(args: &[&str], output: &Output) -> String {
    format!(
        "$ cairn {}\n[exit {}]\n{}{}",
        args.join(" "),
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .map(|line| format!("stderr: {line}\n"))
            .collect::<String>()
    )
}

/// What is bound to differ between two brain files and to a server's location: the place
/// (a path here, a URL there), the file's size and its write-ahead log's (the server's brain
/// also holds its tokens). Everything else must match.
fn redact_location(text: &str, backend: &Backend) -> String {
    let mut text = text.to_string();
    let mut places = vec![backend.client.dir.path().display().to_string()];
    if let Some((server, _)) = &backend.server {
        places.push(server.brain.db.display().to_string());
        places.push(server.url.clone());
        places.push(server.brain.dir.path().display().to_string());
    }
    for place in places {
        text = text.replace(&place, "<brain>");
    }
    text = text.replace("<brain>/brain.db", "<brain>");
    text = regex_lite(&text, "\"file_bytes\": ", ",");
    text = regex_lite(&text, "write-ahead log        ", " KiB");
    text = regex_lite(&text, "\"detail\": \"", " KiB");
    text.lines()
        .map(|line| {
            if line.starts_with("size       ") {
                "size       <sizes>".to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `--json import`'s answer without `embedding`: a local import embeds what it stored before
/// answering; a server's indexer embeds it in the background, so its answer says `null`
/// (docs/service.md).
fn without_embedding(args: &[&str], mut output: Output) -> Output {
    if args.starts_with(&["--json", "import"])
        && let Ok(mut answer) = serde_json::from_slice::<Value>(&output.stdout)
    {
        answer["embedding"] = Value::String("<embedded here or in the background>".into());
        output.stdout =
            format!("{}\n", serde_json::to_string_pretty(&answer).unwrap()).into_bytes();
    }
    output
}

/// `text` with whatever follows each `start` up to `end` replaced by `<n>`.
fn regex_lite(text: &str, start: &str, end: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(start) {
        out.push_str(&rest[..at + start.len()]);
        rest = &rest[at + start.len()..];
        let stop = rest.find(end).unwrap_or(rest.len());
        out.push_str("<n>");
        rest = &rest[stop..];
    }
    out.push_str(rest);
    out
}

/// The story: remember → recall → show → update → history → forget → restore → verify → list
/// → stats → export / import, in text and in `--json`, with a refusal and a missing record on
/// the way. Returns what each step printed.
fn story(backend: &Backend) -> Vec<String> {
    let export = backend.client.dir.path().join("export.jsonl");
    let export = export.display().to_string();
    let near = BILLING.replace("on call engineer", "on call engineers");
    let steps: Vec<(Vec<&str>, Option<&str>)> = vec![
        (
            vec![
                "remember",
                "--type",
                "decision",
                "--title",
                "Billing retries",
                "--body",
                BILLING,
                "--tags",
                "billing,queue",
            ],
            None,
        ),
        (
            vec![
                "--json",
                "remember",
                "--type",
                "gotcha",
                "--body",
                "The staging database resets every Sunday at 03:00",
                "--importance",
                "4",
            ],
            None,
        ),
        (
            vec![
                "remember",
                "--type",
                "note",
                "--body",
                "-",
                "--scope",
                "ops:deploy",
            ],
            Some("Deploys go through the canary first, then the full rollout"),
        ),
        // A near duplicate: refused with the ways out, exit 3.
        (
            vec!["remember", "--type", "decision", "--body", &near],
            None,
        ),
        (
            vec!["--json", "remember", "--type", "decision", "--body", &near],
            None,
        ),
        (vec!["recall", "billing webhook retries"], None),
        (
            vec!["--json", "recall", "staging database", "--limit", "3"],
            None,
        ),
        (
            vec!["recall", "--batch", "-"],
            Some(
                "{\"query\": \"canary rollout\"}\n{\"query\": \"billing\", \"limit\": 1}\nnot json\n{\"query\": \"x\", \"mode\": \"sideways\"}\n",
            ),
        ),
        (vec!["show", "1"], None),
        (vec!["--json", "show", "2"], None),
        (
            vec![
                "update",
                "1",
                "--importance",
                "5",
                "--tags",
                "billing,queue,events",
            ],
            None,
        ),
        (
            vec![
                "--json",
                "update",
                "2",
                "--summary",
                "staging resets weekly",
            ],
            None,
        ),
        (vec!["show", "1", "--history"], None),
        (vec!["--json", "show", "1", "--history"], None),
        (vec!["forget", "3"], None),
        (vec!["--json", "forget", "3"], None),
        (vec!["restore", "3"], None),
        (vec!["--json", "restore", "3"], None),
        (vec!["verify", "2", "--source", "checked by hand"], None),
        (
            vec!["--json", "verify", "1", "--source", "docs/billing.md"],
            None,
        ),
        (vec!["show", "999"], None),
        (vec!["--json", "show", "999"], None),
        // A newer version of #2, then a hard delete that would cut that history: refused,
        // exit 3, with what exists and the ways out.
        (
            vec![
                "remember",
                "--type",
                "gotcha",
                "--body",
                "The staging database now resets every Saturday at 04:00",
                "--supersedes",
                "2",
            ],
            None,
        ),
        (vec!["--json", "forget", "4", "--hard"], None),
        (vec!["forget", "4", "--hard"], None),
        (vec!["list"], None),
        (
            vec![
                "--json",
                "list",
                "--type",
                "decision,gotcha",
                "--limit",
                "5",
            ],
            None,
        ),
        (vec!["list", "--scope", "ops", "--status", "active"], None),
        (vec!["stats"], None),
        (vec!["--json", "stats"], None),
        (vec!["brief", "--budget", "2000"], None),
        (vec!["--json", "brief", "--section", "pinned"], None),
        (vec!["doctor"], None),
        (vec!["--json", "doctor"], None),
        (vec!["export", &export], None),
        (vec!["export"], None),
        (vec!["import", &export], None),
        (
            vec!["--json", "import", "-"],
            Some(
                "{\"kind\": \"memory\", \"type\": \"fact\", \"body\": \"Imported through standard input\"}\nnot a line\n",
            ),
        ),
        (vec!["forget", "5", "--hard"], None),
    ];
    let printed = steps
        .iter()
        .map(|(args, stdin)| {
            let output = without_embedding(args, backend.run(args, *stdin));
            redact_location(&transcript(args, &output), backend)
        })
        .collect();
    backend.assert_file_untouched();
    printed
}

/// The agent's own tables (tasks, measures, identity, awareness, the inbox, review, the log),
/// through every subcommand: the text and the `--json` of each step.
fn agent_story(backend: &Backend) -> Vec<String> {
    let inbox = concat!(
        r#"{"kind": "inbox", "row": {"id": 1, "project": "test-project", "kind": "fact", "suggested_type": "fact", "body": "The release train leaves every second Tuesday", "content_hash": "h1", "source": "session:s1", "trust": "observed", "created_at": "2026-05-30T10:00:00Z", "resolved_at": null, "resolution": null}}"#,
        "\n",
        r#"{"kind": "inbox", "row": {"id": 2, "project": "test-project", "kind": "fact", "suggested_type": "note", "body": "Someone mentioned the coffee machine", "content_hash": "h2", "source": "session:s1", "trust": "observed", "created_at": "2026-05-30T10:01:00Z", "resolved_at": null, "resolution": null}}"#,
        "\n",
    );
    let steps: Vec<(Vec<&str>, Option<&str>)> = vec![
        (vec!["task", "list"], None),
        (
            vec![
                "task",
                "add",
                "Rotate the staging keys",
                "--due",
                "2026-06-10",
            ],
            None,
        ),
        (
            vec![
                "--json",
                "task",
                "add",
                "Renew the certificate",
                "--personal",
            ],
            None,
        ),
        (vec!["task", "done", "1"], None),
        (vec!["task", "list"], None),
        (vec!["--json", "task", "list", "--all"], None),
        (vec!["measure", "show"], None),
        (
            vec!["measure", "record", "suite-seconds", "120", "--unit", "s"],
            None,
        ),
        (
            vec![
                "--json",
                "measure",
                "record",
                "suite-seconds",
                "95.5",
                "--unit",
                "s",
                "--note",
                "cached",
            ],
            None,
        ),
        (vec!["measure", "show", "suite-seconds"], None),
        (vec!["--json", "measure", "show"], None),
        (vec!["identity", "show"], None),
        (
            vec!["identity", "set", "I am the billing team's coding agent"],
            None,
        ),
        (
            vec!["--json", "identity", "set", "-"],
            Some("I keep the queue healthy"),
        ),
        (vec!["--json", "identity", "show"], None),
        (
            vec![
                "awareness",
                "add",
                "deploy freeze until Friday",
                "--expires",
                "2d",
            ],
            None,
        ),
        (vec!["--json", "awareness", "add", "pairing with Ana"], None),
        (vec!["awareness", "list"], None),
        (vec!["--json", "awareness", "drop", "1"], None),
        (vec!["awareness", "drop", "1"], None),
        (vec!["--json", "awareness", "list"], None),
        (vec!["inbox"], None),
        (vec!["import", "-"], Some(inbox)),
        (vec!["inbox", "list"], None),
        (
            vec!["--json", "inbox", "accept", "1", "--type", "decision"],
            None,
        ),
        (vec!["inbox", "dismiss", "2"], None),
        (vec!["--json", "inbox", "list", "--all"], None),
        (vec!["review"], None),
        (vec!["--json", "review", "--stale-days", "0"], None),
        (vec!["log", "--limit", "5"], None),
        (vec!["--json", "log", "--limit", "3"], None),
    ];
    let printed = steps
        .iter()
        .map(|(args, stdin)| {
            let output = without_embedding(args, backend.run(args, *stdin));
            redact_location(&transcript(args, &output), backend)
        })
        .collect();
    backend.assert_file_untouched();
    printed
}

#[test]
fn the_agents_tables_print_the_same_against_a_file_and_a_server() {
    let local = agent_story(&Backend::file());
    let remote = agent_story(&Backend::server(false));
    let all = local.concat();
    assert!(
        all.contains("task 1 done: Rotate the staging keys"),
        "{all}"
    );
    assert!(all.contains("suite-seconds: 95.5s"), "{all}");
    assert!(all.contains("I keep the queue healthy"), "{all}");
    assert!(all.contains("\"dropped\": true"), "{all}");
    assert!(all.contains("no live awareness item 1"), "{all}");
    assert!(all.contains("dismissed inbox item 2"), "{all}");
    assert!(all.contains("\"status\": \"added\""), "{all}");
    let differ = differences(&local, &remote, "server");
    assert!(differ.is_empty(), "the outputs differ:\n{differ}");
}

/// The knowledge graph and the lifecycle (decay, dreams), through every served subcommand; the
/// dream's id (a hash of what it proposes) is read from its own answer for the steps after.
fn graph_story(backend: &Backend) -> Vec<String> {
    let run = |args: &[&str]| {
        let output = backend.run(args, None);
        redact_location(&transcript(args, &output), backend)
    };
    let mut printed: Vec<String> = [
        &[
            "remember",
            "--type",
            "decision",
            "--body",
            "The billing worker in src/billing/worker.rs reads jobs from Redis",
        ][..],
        &[
            "remember",
            "--type",
            "gotcha",
            "--body",
            "Redis evicts keys under memory pressure unless maxmemory-policy is noeviction",
        ],
        &[
            "remember",
            "--type",
            "gotcha",
            "--allow-duplicate",
            "--body",
            "Redis evicts keys under memory pressure unless the maxmemory-policy is noeviction",
        ],
        &["relate", "#1", "requires", "#2"],
        &[
            "--json",
            "relate",
            "#1",
            "affects",
            "src/billing/worker.rs",
            "--allow-dangling",
        ],
        &["graph"],
        &["--json", "graph", "--limit", "2"],
        &["edges", "#1"],
        &["--json", "edges", "#1", "--history"],
        &["neighbors", "#2", "--direction", "in"],
        &["--json", "neighbors", "#1", "--depth", "1"],
        &["entities"],
        &["--json", "entities", "--limit", "3"],
        &[
            "entity", "add", "Kiln", "--type", "tool", "--alias", "kiln-box",
        ],
        &["--json", "entity", "add", "Glaze"],
        &["relation-type", "declare", "blocks", "--weight", "0.8"],
        &[
            "--json",
            "relation-type",
            "declare",
            "pairs_with",
            "--symmetric",
            "--description",
            "work done together",
        ],
        &["relation-type", "list"],
        &["--json", "relation-type", "list"],
        &["relate", "#2", "blocks", "#1"],
        &["entity", "relink"],
        &["--json", "entity", "relink"],
        &["clusters", "--min-size", "2"],
        &["--json", "clusters", "--min-size", "2"],
        &["unrelate", "#1", "requires", "#2"],
        &["--json", "unrelate", "#1", "requires", "#2"],
        &["decay", "--dry-run"],
        &["--json", "decay"],
        &["decay", "--explain", "2"],
        &["--json", "decay", "--explain", "#1"],
        &["dream", "list"],
        &["--json", "dream", "--no-llm"],
        &["dream", "list"],
    ]
    .iter()
    .map(|args| run(args))
    .collect();
    let listed = backend.run(&["--json", "dream", "list"], None);
    let answer: Value = serde_json::from_slice(&listed.stdout).expect("dream list --json");
    let id = answer["dreams"][0]["id"]
        .as_str()
        .expect("the dream made a proposal set")
        .to_string();
    for args in [
        &["dream", "show", &id][..],
        &["--json", "dream", "show", &id],
        &["--json", "dream", "accept", &id, "--only", "merge"],
        &["dream", "accept", &id],
        &["--json", "dream", "--no-llm"],
    ] {
        printed.push(run(args));
    }
    // An unknown dream: exit 1 on both, each naming the id (a server says it in its own words).
    let unknown = backend.run(&["dream", "reject", "no-such-dream"], None);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no dream \"no-such-dream\""),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
    backend.assert_file_untouched();
    // How long the dream took is the machine's, not the brain's.
    printed
        .into_iter()
        .map(|text| regex_lite(&text, "\"duration_ms\": ", ","))
        .collect()
}

#[test]
fn the_graph_and_the_lifecycle_print_the_same_against_a_file_and_a_server() {
    let local = graph_story(&Backend::file());
    let remote = graph_story(&Backend::server(false));
    let all = local.concat();
    assert!(all.contains("related: "), "{all}");
    assert!(all.contains("unrelated: "), "{all}");
    assert!(all.contains("\"status\": \"added\""), "{all}");
    assert!(all.contains("proposals"), "{all}");
    let differ = differences(&local, &remote, "server");
    assert!(differ.is_empty(), "the outputs differ:\n{differ}");
}

/// The brain's upkeep and settings: the model status, turns a hook hands over, their
/// extraction (by rules), the inbox it fills, and the settings, in text and in `--json`.
fn upkeep_story(backend: &Backend) -> Vec<String> {
    let run = |args: &[&str]| {
        let output = backend.run(args, None);
        let text = redact_location(&transcript(args, &output), backend);
        regex_lite(
            &regex_lite(&text, "\"elapsed_ms\": ", ","),
            "\"llm_ms\": ",
            "\n",
        )
    };
    let mut printed = vec![
        run(&["model", "status"]),
        run(&["--json", "model", "status"]),
    ];
    for (prompt, response) in [
        (
            "the deploy failed with error E1234 on the staging host",
            "Looking at the deploy logs.",
        ),
        (
            "any luck with it",
            "Fixed: the staging host was missing DEPLOY_KEY, exported it in deploy.sh.",
        ),
    ] {
        let payload = serde_json::json!({
            "session_id": "gem-1", "cwd": backend.client.dir.path(),
            "hook_event_name": "AfterAgent", "prompt": prompt, "prompt_response": response
        });
        let args = ["hook", "stop", "--client", "gemini"];
        let output = backend.run(&args, Some(&payload.to_string()));
        printed.push(transcript(&args, &output));
    }
    for args in [
        &["extract", "--no-llm", "--session", "gem-1"][..],
        &["--json", "extract", "--no-llm"],
        &["inbox", "list"],
        &["config", "list"],
        &["--json", "config", "list"],
        &["config", "get", "capture.extract"],
        &["--json", "config", "get", "dream.auto_accept"],
        &["config", "get", "no.such.key"],
    ] {
        printed.push(run(args));
    }
    backend.assert_file_untouched();
    printed
}

#[test]
fn extraction_settings_and_the_model_status_print_the_same_against_a_file_and_a_server() {
    let local = upkeep_story(&Backend::file());
    let remote = upkeep_story(&Backend::server(false));
    let all = local.concat();
    assert!(
        all.contains("2 turns of 1 sessions read (deterministic"),
        "{all}"
    );
    assert!(all.contains("provider   hash"), "{all}");
    assert!(all.contains("capture.extract"), "{all}");
    assert!(all.contains("unknown setting"), "{all}");
    let differ = differences(&local, &remote, "server");
    assert!(differ.is_empty(), "the outputs differ:\n{differ}");
}

#[test]
fn maintain_runs_on_the_server_and_its_status_says_who_embeds() {
    let server = Server::start(&[], false);
    let admin = server.token("root", "--all", "write");
    let project = server.token("laptop", "test-project", "write");
    let (brain, mut cmd) = client(&server.url, &admin);
    let output = cmd.args(["maintain"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        printed.contains("embed    skipped: left to the server's background indexer"),
        "{printed}"
    );
    assert!(printed.contains("dream    ok: "), "{printed}");
    let (_client, mut cmd) = client(&server.url, &admin);
    let status = cmd
        .args(["--json", "maintain", "--status"])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let answer: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(answer["steps"][3]["last"]["outcome"], "ok", "{answer}");
    assert_eq!(
        answer["steps"][1]["due"],
        "always: the server's background indexer"
    );
    // A project's token does not run the whole brain's maintenance.
    let (_client, mut cmd) = client(&server.url, &project);
    let refused = cmd.args(["maintain"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("every project"),
        "{}",
        stderr(&refused)
    );
    assert!(!brain.db.exists());
}

#[test]
fn tokens_are_made_listed_and_revoked_through_a_server_by_an_admin_only() {
    let server = Server::start(&[], false);
    let admin = server.token("root", "--all", "admin");
    let writer = server.token("w", "--all", "write");
    let project_admin = server.token("p", "test-project", "admin");
    for (token, says) in [
        (&writer, "role (write) does not allow token list"),
        (&project_admin, "every project"),
    ] {
        let (_client, mut cmd) = client(&server.url, token);
        let output = cmd.args(["token", "list"]).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
    }
    let (brain, mut cmd) = client(&server.url, &admin);
    let made = cmd
        .args([
            "token",
            "create",
            "--name",
            "bot",
            "--project",
            "test-project",
            "--role",
            "read",
        ])
        .output()
        .unwrap();
    assert_eq!(made.status.code(), Some(0), "{}", stderr(&made));
    let secret = String::from_utf8_lossy(&made.stdout).trim().to_string();
    assert!(
        secret.starts_with("cairn_") && secret.len() == 70,
        "{secret}"
    );
    assert!(
        stderr(&made).contains("shown once, not stored"),
        "{}",
        stderr(&made)
    );
    let (_client, mut cmd) = client(&server.url, &secret);
    cmd.args(["list"]).assert().success();
    let (_client, mut cmd) = client(&server.url, &admin);
    let listed = cmd.args(["token", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.contains("bot"), "{listed}");
    assert!(listed.contains("project test-project"), "{listed}");
    assert!(!listed.contains(&secret), "the secret is never shown again");
    // The same list as the server's own `cairn token list`.
    let (_client, mut cmd) = client(&server.url, &admin);
    let remote = cmd.args(["--json", "token", "list"]).output().unwrap();
    let remote: Value = serde_json::from_slice(&remote.stdout).unwrap();
    assert_eq!(remote, server.brain.json(&["token", "list"], 0));
    let (_client, mut cmd) = client(&server.url, &admin);
    let revoked = cmd
        .args(["--json", "token", "revoke", "bot"])
        .output()
        .unwrap();
    assert_eq!(revoked.status.code(), Some(0), "{}", stderr(&revoked));
    let revoked: Value = serde_json::from_slice(&revoked.stdout).unwrap();
    assert_eq!(revoked["status"], "revoked");
    assert_eq!(revoked["token"]["state"], "revoked");
    // At once.
    let (_client, mut cmd) = client(&server.url, &secret);
    let output = cmd.args(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("refused the credential (401)"),
        "{}",
        stderr(&output)
    );
    assert!(!brain.db.exists());
    assert!(!server.log().contains(&secret), "the token is never logged");
}

/// Every step whose output differs, both versions in full.
fn differences(local: &[String], remote: &[String], label: &str) -> String {
    assert_eq!(local.len(), remote.len());
    local
        .iter()
        .zip(remote)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("--- file:\n{a}\n+++ {label}:\n{b}\n"))
        .collect()
}

#[test]
fn the_story_prints_the_same_against_a_file_and_a_server() {
    let local = story(&Backend::file());
    let remote = story(&Backend::server(false));
    // A sanity check that the story did things, on the file.
    let all = local.concat();
    assert!(all.contains("[exit 3]"), "{all}");
    assert!(all.contains("no record #999"), "{all}");
    assert!(all.contains("exported"), "{all}");
    assert!(
        all.contains("\"existing\":2,\"status\":\"refused\""),
        "{all}"
    );
    assert!(all.contains("deleted #5 for good"), "{all}");
    let differ = differences(&local, &remote, "server");
    assert!(differ.is_empty(), "the outputs differ:\n{differ}");
}

#[test]
fn the_story_prints_the_same_over_a_unix_socket() {
    let local = story(&Backend::file());
    let remote = story(&Backend::server(true));
    let differ = differences(&local, &remote, "socket");
    assert!(differ.is_empty(), "the outputs differ:\n{differ}");
}

/// The client: `cairn` with `CAIRN_URL`/`CAIRN_TOKEN` and a brain file it must not create.
fn client(url: &str, token: &str) -> (Brain, assert_cmd::Command) {
    let brain = Brain::new();
    let mut cmd = brain.cmd();
    cmd.env("CAIRN_URL", url).env("CAIRN_TOKEN", token);
    (brain, cmd)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

#[test]
fn a_server_that_is_down_is_named_and_the_token_never_is() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    drop(listener);
    let token = format!("cairn_{}", "7".repeat(64));
    for args in [
        &["recall", "anything"][..],
        &["--json", "remember", "--type", "note", "--body", "x"],
    ] {
        let (brain, mut cmd) = client(&url, &token);
        let output = cmd.args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        let message = stderr(&output);
        assert!(
            message.contains(&format!("cannot reach the cairn server at {url}")),
            "{message}"
        );
        assert!(message.contains("unset CAIRN_URL"), "{message}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!message.contains(&token) && !stdout.contains(&token));
        if args[0] == "--json" {
            let error: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(error["status"], "error", "{stdout}");
        }
        assert!(!brain.db.exists(), "no local brain was made");
    }
}

#[test]
fn wrong_and_revoked_tokens_are_refused_with_what_to_do() {
    let server = Server::start(&[], false);
    let token = server.token("laptop", "test-project", "write");
    let (_client, mut cmd) = client(&server.url, &format!("cairn_{}", "0".repeat(64)));
    let output = cmd.args(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("refused the credential (401)"),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("CAIRN_TOKEN"),
        "{}",
        stderr(&output)
    );

    let (_client, mut cmd) = client(&server.url, &token);
    cmd.args(["list"]).assert().success();
    server.brain.json(&["token", "revoke", "laptop"], 0);
    let (_client, mut cmd) = client(&server.url, &token);
    let output = cmd.args(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("revoked"), "{}", stderr(&output));
    assert!(!server.log().contains(&token), "the token is never logged");
}

#[test]
fn another_projects_record_is_missing_like_one_that_does_not_exist() {
    let server = Server::start(&[], false);
    let alpha = server.token("alpha-bot", "alpha", "write");
    let beta = server.token("beta-bot", "beta", "write");
    let (_client, mut cmd) = client(&server.url, &alpha);
    let stored = cmd
        .env_remove("CAIRN_PROJECT")
        .args([
            "--json",
            "remember",
            "--type",
            "fact",
            "--body",
            "Alpha's build runs on the blue runners",
        ])
        .output()
        .unwrap();
    assert!(stored.status.success(), "{}", stderr(&stored));
    let id = serde_json::from_slice::<Value>(&stored.stdout).unwrap()["id"].clone();
    for (record, token) in [(id.to_string(), &beta), ("999".to_string(), &beta)] {
        let (_client, mut cmd) = client(&server.url, token);
        let output = cmd
            .env_remove("CAIRN_PROJECT")
            .args(["show", &record])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(
            stderr(&output).trim(),
            format!("cairn: no record #{record} in this brain")
        );
    }
    // Naming another project than the token's is answered like a project that is not there.
    let (_client, mut cmd) = client(&server.url, &alpha);
    let output = cmd.args(["--project", "beta", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no project \"beta\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_oversize_body_and_a_read_token_writing_are_refused() {
    let server = Server::start(&["--max-body", "2048"], false);
    let writer = server.token("writer", "test-project", "write");
    let reader = server.token("reader", "test-project", "read");
    let big = "x".repeat(10_000);
    let (_client, mut cmd) = client(&server.url, &writer);
    let output = cmd
        .args(["remember", "--type", "note", "--body", &big])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("over the limit of 2048 bytes"),
        "{}",
        stderr(&output)
    );

    let (_client, mut cmd) = client(&server.url, &reader);
    let output = cmd
        .args([
            "--json",
            "remember",
            "--type",
            "note",
            "--body",
            "a read token writing",
        ])
        .output()
        .unwrap();
    // A role that does not allow the write: an error (exit 1), like CAIRN_READ_ONLY locally —
    // not a refusal that needs a decision (exit 3).
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("role (read) does not allow remember"),
        "{}",
        stderr(&output)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["status"], "error");
    let (_client, mut cmd) = client(&server.url, &reader);
    cmd.args(["recall", "anything"]).assert().success();
}

#[test]
fn a_command_without_an_endpoint_is_refused_and_never_opens_a_file() {
    let server = Server::start(&[], false);
    let token = server.token("laptop", "test-project", "write");
    for (args, name) in [
        (&["scope", "list"][..], "scope list"),
        (&["doctor", "--recover-into", "new.db"], "doctor"),
    ] {
        let (brain, mut cmd) = client(&server.url, &token);
        let output = cmd.args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(
            message.contains(&format!(
                "`cairn {name}` is not served by a cairn server, and CAIRN_URL is set ({})",
                server.url
            )),
            "{message}"
        );
        assert!(message.contains("unset CAIRN_URL"), "{message}");
        assert!(!brain.db.exists(), "{args:?} opened the local file");
    }
    // Work that is inherently this machine's says why, and what to do instead.
    for (args, name, why) in [
        (&["codemap"][..], "codemap", "working tree"),
        (
            &["export", "wiki", "out"],
            "export wiki",
            "directory on this machine",
        ),
        (
            &["import", "wiki", "out"],
            "import wiki",
            "directory on this machine",
        ),
        (
            &["import", "claude-md", "CLAUDE.md"],
            "import claude-md",
            "on this machine",
        ),
        (
            &["import", "envelope", "e.json"],
            "import envelope",
            "on this machine",
        ),
        (
            &["share", "--zone", "outside_contact", "--ids", "1"],
            "share",
            "no endpoint",
        ),
        (&["reindex"], "reindex", "background indexer"),
        (
            &["config", "set", "llm.command", "true"],
            "config set|unset",
            "llm.command",
        ),
    ] {
        let (brain, mut cmd) = client(&server.url, &token);
        let output = cmd.args(args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(
            message.contains(&format!("`cairn {name}` is not served by a cairn server: ")),
            "{args:?}: {message}"
        );
        assert!(message.contains(why), "{args:?}: {message}");
        assert!(
            message.contains(&format!(
                "CAIRN_URL is set ({}): nothing was done and no local brain file was opened",
                server.url
            )),
            "{message}"
        );
        assert!(!brain.db.exists(), "{args:?} opened the local file");
    }
    // An unattended dream runs where the brain is, never through a server.
    let (brain, mut cmd) = client(&server.url, &token);
    let output = cmd.args(["dream", "--unattended"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("`cairn dream --unattended` is not served by a cairn server"),
        "{}",
        stderr(&output)
    );
    assert!(!brain.db.exists());
    // A bad address is said before anything is sent.
    let (_client, mut cmd) = client("ftp://example.com", &token);
    let output = cmd.args(["list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("is not a cairn server address"),
        "{}",
        stderr(&output)
    );
}

fn python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-test/bin/python")
}

#[test]
fn cairn_mcp_serves_the_servers_tools_to_the_official_python_sdk() {
    let python = python();
    assert!(
        python.exists(),
        "the MCP Python SDK is missing: run `bash scripts/setup.sh` (it creates .venv-test/ with the `mcp` package)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    // Both handshakes (the legacy `initialize` and the stateless `server/discover`), then the
    // graph tools — which have no `/v1` endpoint — each against a server of its own.
    for mode in [None, Some("graph")] {
        let server = Server::start(&[], false);
        let token = server.token("agent", "test-project", "write");
        if mode.is_none() {
            // What the script's brief check expects, stored through the server.
            let (_client, mut cmd) = client(&server.url, &token);
            cmd.args([
                "remember",
                "--type",
                "preference",
                "--body",
                "Prefer small commits with clear messages",
            ])
            .assert()
            .success();
        }
        let client_brain = Brain::new();
        let mut command = Command::new(&python);
        command
            .arg(&script)
            .arg(assert_cmd::cargo::cargo_bin("cairn"));
        if let Some(mode) = mode {
            command.arg(mode);
        }
        let output = command
            .current_dir(client_brain.dir.path())
            .env("CAIRN_DB", &client_brain.db)
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_PROJECT", "test-project")
            .env("CAIRN_URL", &server.url)
            .env("CAIRN_TOKEN", &token)
            .env_remove("CAIRN_READ_ONLY")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{mode:?}: {stdout}\n{}",
            stderr(&output)
        );
        match mode {
            None => {
                assert!(stdout.contains("legacy handshake ok"), "{stdout}");
                assert!(stdout.contains("discover ok"), "{stdout}");
            }
            Some(_) => assert!(stdout.contains("graph tools ok"), "{stdout}"),
        }
        assert!(!client_brain.db.exists(), "cairn mcp opened the local file");
        // What the tools wrote is in the server's brain.
        let listed = server
            .brain
            .json(&["--project", "test-project", "list", "--limit", "100"], 0);
        let listed = listed.as_array().unwrap();
        let wanted = if mode.is_none() {
            "SKIP LOCKED"
        } else {
            "src/session.rs"
        };
        assert!(
            listed
                .iter()
                .any(|m| m["body"].as_str().unwrap_or("").contains(wanted)),
            "{wanted} not in the server's brain: {listed:?}"
        );
    }
}

#[test]
fn cairn_mcp_answers_each_request_with_an_error_while_the_server_is_down() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    drop(listener);
    let (brain, mut cmd) = client(&url, "cairn_secret");
    let output = cmd
        .arg("mcp")
        .write_stdin(concat!(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let answers: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        answers.len(),
        2,
        "one error per request, none for the notification: {answers:?}"
    );
    for (answer, id) in answers.iter().zip([1, 2]) {
        assert_eq!(answer["id"], id);
        assert_eq!(answer["error"]["code"], -32000);
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("cannot reach the cairn server at {url}")),
            "{answer}"
        );
    }
    assert!(!stderr(&output).contains("cairn_secret"));
    assert!(!brain.db.exists());
}

#[test]
fn https_trusts_the_ca_file_and_says_what_to_do_without_it() {
    // A TLS server with a certificate of a CA made at test time: reached through the client's
    // rustls with CAIRN_CA_FILE, refused without it. (It is not a cairn server: it answers a
    // JSON error for any other path, which `show --json` prints as it came.)
    let server = https_server::HttpsServer::start();
    let (_client, mut cmd) = client(&server.url, "cairn_secret");
    let output = cmd
        .env("CAIRN_CA_FILE", server.ca_file())
        .args(["--json", "show", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["error"], "no such path /v1/records/1", "{answer}");
    assert_eq!(server.answered.load(std::sync::atomic::Ordering::SeqCst), 1);

    let (_client, mut cmd) = client(&server.url, "cairn_secret");
    let output = cmd
        .env_remove("CAIRN_CA_FILE")
        .env_remove("SSL_CERT_FILE")
        .args(["show", "1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains(&format!("cannot reach the cairn server at {}", server.url))
            && message.contains("TLS failed")
            && message.contains("CAIRN_CA_FILE"),
        "{message}"
    );
    assert!(!message.contains("cairn_secret"), "{message}");
}

#[test]
fn a_read_only_process_writes_nothing_through_a_server_that_would_let_it() {
    let server = Server::start(&[], false);
    let token = server.token("writer", "test-project", "write");
    let (_client, mut cmd) = client(&server.url, &token);
    let output = cmd
        .env("CAIRN_READ_ONLY", "1")
        .args([
            "remember",
            "--type",
            "note",
            "--body",
            "a read-only process writing",
        ])
        .output()
        .unwrap();
    // refused, exit 3, as a local read-only brain refuses it
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).contains("read-only") && stderr(&output).contains("remember was refused"),
        "{}",
        stderr(&output)
    );
    // Reads still go through.
    let (_client, mut cmd) = client(&server.url, &token);
    cmd.env("CAIRN_READ_ONLY", "1")
        .args(["recall", "anything"])
        .assert()
        .success();

    // `cairn mcp` answers a writing tool itself and forwards the reading ones.
    let (_client, mut cmd) = client(&server.url, &token);
    let output = cmd
        .env("CAIRN_READ_ONLY", "1")
        .arg("mcp")
        .write_stdin(concat!(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"remember\",\"arguments\":{\"type\":\"note\",\"body\":\"x\"}}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"recall\",\"arguments\":{\"query\":\"anything\"}}}\n"
        ))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let answers: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(
        answers[0]["result"]["serverInfo"]["name"], "cairn",
        "{answers:?}"
    );
    assert_eq!(answers[1]["result"]["isError"], true, "{answers:?}");
    assert_eq!(
        answers[1]["result"]["structuredContent"]["error"],
        "read-only"
    );
    assert_eq!(answers[2]["result"]["isError"], false, "{answers:?}");
    assert_eq!(
        server.brain.json(&["stats"], 0)["records"],
        0,
        "nothing was written"
    );
}

#[test]
fn a_refused_bodyless_request_is_answered_every_time() {
    // Regression: `restore` went out with a chunked empty body whose end was a second write;
    // a server that answered the refusal and closed first left the client with EPIPE, about
    // one call in two over a Unix socket.
    let server = Server::start(&[], true);
    let token = server.token("laptop", "test-project", "write");
    let (_client, mut cmd) = client(&server.url, &token);
    cmd.args(["remember", "--type", "note", "--body", "an active record"])
        .assert()
        .success();
    for _ in 0..12 {
        let (_client, mut cmd) = client(&server.url, &token);
        let output = cmd.args(["restore", "1"]).output().unwrap();
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(
            stderr(&output).trim(),
            "cairn: #1 is active, not archived; nothing to restore"
        );
    }
}
