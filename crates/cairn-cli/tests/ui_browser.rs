//! The web UI in a real browser: Debian's Chromium, headless, driven by playwright-core
//! (`tests/ui-browser/story.mjs`) over `cairn ui` on a seeded brain — one story per page and
//! an axe-core scan of each (no serious or critical violation), any console error (a CSP
//! violation included) a failure. Chromium, node and the npm packages are installed by
//! scripts/setup.sh (scripts/install-browser.sh); without them this test fails, saying so.
//! With `CAIRN_UI_SCREENSHOTS=DIR` the story saves a picture of every page in DIR
//! (scripts/ui-screenshots.sh refreshes docs/ui/ that way).

mod common;

use common::Brain;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui-browser")
}

fn require_tools() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/setup.sh (it installs Debian's chromium)"
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is missing: run scripts/setup.sh"
    );
    for package in ["playwright-core/package.json", "axe-core/axe.min.js"] {
        assert!(
            browser_dir().join("node_modules").join(package).exists(),
            "{package} is not installed in tests/ui-browser: run scripts/setup.sh"
        );
    }
}

/// Waits (at most two minutes) until the server's model is no longer loading (`/healthz`):
/// ready, or off when this machine has none (the pictures then show the degraded banner).
fn wait_for_the_model(url: &str) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let model = agent
            .get(format!("{url}/healthz"))
            .call()
            .ok()
            .and_then(|mut answer| answer.body_mut().read_to_string().ok())
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|health| health["model"].as_str().map(str::to_string));
        match model.as_deref() {
            Some("ready") => return,
            Some("off") => {
                eprintln!(
                    "no embedding model on this machine: the pictures show the degraded banner"
                );
                return;
            }
            _ if std::time::Instant::now() > deadline => {
                panic!("the model was still loading after two minutes ({model:?})")
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(250)),
        }
    }
}

#[test]
fn every_page_works_in_chromium_and_passes_an_accessibility_scan() {
    require_tools();
    let brain = Brain::new();
    let seeded = brain.remember(
        "decision",
        Some("Deployments go through the staging cluster"),
        "Every release is deployed to staging first and promoted after the smoke tests pass.",
    );
    let id = seeded["id"].as_i64().unwrap();
    brain.remember(
        "gotcha",
        Some("The build cache is per branch"),
        "CI keeps one cache per branch; a new branch starts cold.",
    );
    let nodes = brain.remember(
        "fact",
        Some("Staging runs on two nodes"),
        "The staging cluster has two nodes behind one load balancer.",
    )["id"]
        .as_i64()
        .unwrap();
    // Two near-duplicates the dream proposes to merge.
    let queue =
        "releases go out through the canary pool and get promoted after the smoke tests pass";
    let twin_a = brain.json(
        &[
            "remember",
            "--type",
            "note",
            "--body",
            &format!("{queue} on fridays, see src/release.rs"),
        ],
        0,
    )["id"]
        .as_i64()
        .unwrap();
    let twin_b = brain.json(
        &[
            "remember",
            "--type",
            "note",
            "--body",
            &format!("{queue} on mondays, see src/release.rs"),
            "--allow-duplicate",
        ],
        0,
    )["id"]
        .as_i64()
        .unwrap();
    let dream = brain.json(&["dream", "--no-llm"], 0);
    let dream_id = dream["dream"]["id"].as_str().unwrap().to_string();
    // A neighbourhood: the decision requires the fact, which affects a note.
    brain.json(
        &[
            "relate",
            &format!("#{id}"),
            "requires",
            &format!("#{nodes}"),
        ],
        0,
    );
    brain.json(
        &[
            "relate",
            &format!("#{nodes}"),
            "affects",
            &format!("#{twin_a}"),
        ],
        0,
    );
    brain.json(
        &[
            "task",
            "add",
            "Rotate the staging keys",
            "--due",
            "2020-01-01",
        ],
        0,
    );
    for value in ["180", "150", "165", "120"] {
        brain.json(&["measure", "record", "deploy_minutes", value], 0);
    }
    // The pictures show the brain as a user has it: with the embedding model when this machine
    // has one installed (no degraded banner), so the server then loads the default model.
    // The stories themselves run lexically, as everywhere else in the suite.
    let screenshots = std::env::var("CAIRN_UI_SCREENSHOTS").ok();
    let mut server = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    if screenshots.is_none() {
        server.env("CAIRN_EMBEDDER", "none");
    } else {
        server
            .env_remove("CAIRN_EMBEDDER")
            .env_remove("CAIRN_MODEL");
    }
    let mut child = server
        .args(["ui", "--no-open"])
        .current_dir(brain.dir.path())
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_PROJECT", "test-project")
        .env("CAIRN_DAEMON", "off")
        .env_remove("CAIRN_URL")
        .env("XDG_DATA_HOME", brain.dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn ui starts");
    let mut link = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut link)
        .unwrap();
    let link = link.trim().to_string();
    let url = link.split("/ui/").next().unwrap().to_string();
    if screenshots.is_some() {
        wait_for_the_model(&url);
    }
    let mut story = Command::new("node");
    story
        .arg("story.mjs")
        .current_dir(browser_dir())
        .env("LINK", &link)
        .env("URL", &url)
        .env("RECORD", id.to_string())
        .env("QUERY", "staging deployments")
        .env("TITLE", "Deployments go through the staging cluster")
        .env("DREAM", &dream_id);
    if let Some(dir) = &screenshots {
        std::fs::create_dir_all(dir).unwrap();
        story.env("SCREENSHOTS", dir);
    }
    let output = story.output().expect("node runs");
    let _ = child.kill();
    let _ = child.wait();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the browser stories failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("browser stories: ok"), "{stdout}");
    for story in [
        "search", "record", "tending", "graph", "tasks", "timeline", "health",
    ] {
        assert!(
            stdout.contains(&format!("story {story}: ok")),
            "{story}: {stdout}"
        );
    }
    // The merge accepted in the browser is applied: one of the twins is merged into the other.
    let merged = [twin_a, twin_b]
        .iter()
        .filter(|id| !brain.json(&["show", &id.to_string()], 0)["merged_into"].is_null())
        .count();
    assert_eq!(merged, 1, "the dream's merge was applied");
    // The edit made in the browser went through the engine.
    let shown = brain.json(&["show", &id.to_string()], 0);
    assert!(
        shown["body"]
            .as_str()
            .unwrap()
            .ends_with("Edited in the browser."),
        "{shown}"
    );
}
