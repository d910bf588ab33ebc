//! `cairn recall … | head`: when the reader of stdout goes away, cairn stops quietly with the
//! status of a process killed by SIGPIPE (141) — no panic, no message — whether it was printing
//! answers line by line or streaming an export.

mod common;

use common::Brain;
use std::process::Stdio;

fn fill(brain: &Brain) {
    let lines: String = (0..400)
        .map(|i| {
            format!(
                "{{\"type\":\"note\",\"body\":\"Harbour crane number {i} lifts containers for berth {i}.\"}}\n"
            )
        })
        .collect();
    let input = brain.dir.path().join("in.jsonl");
    std::fs::write(&input, lines).unwrap();
    brain
        .cmd()
        .args(["import", input.to_str().unwrap()])
        .assert()
        .success();
}

/// Runs cairn with stdout a pipe whose reading end is already closed.
fn run_into_closed_pipe(brain: &Brain, args: &[&str]) -> (Option<i32>, String) {
    #[allow(deprecated)] // cargo_bin: the binary of this package, as `Brain::cmd` uses
    let cairn = assert_cmd::cargo::cargo_bin("cairn");
    let mut child = std::process::Command::new(cairn)
        .current_dir(brain.dir.path())
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_DAEMON", "off")
        .env("CAIRN_PROJECT", "test-project")
        .env("CAIRN_EMBEDDER", "none")
        .env("XDG_DATA_HOME", brain.dir.path().join("data"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cairn starts");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("cairn ends");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    let brain = Brain::new();
    fill(&brain);
    for args in [
        &["recall", "--limit", "400", "--no-touch", "crane containers"][..],
        &["--json", "recall", "--limit", "400", "--no-touch", "crane"][..],
        &["list", "--limit", "400"][..],
        &["export"][..],
    ] {
        let (code, stderr) = run_into_closed_pipe(&brain, args);
        assert_eq!(code, Some(141), "cairn {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "cairn {args:?}: {stderr}");
        assert!(stderr.trim().is_empty(), "cairn {args:?} said: {stderr}");
    }
}
