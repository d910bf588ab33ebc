//! `cairn hook <event>` end to end on the real binary, fed payloads in the shapes the clients
//! send (tests/fixtures/hooks, built from research/agent-integration.md and the clients' docs).

mod common;

use common::Brain;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn payload(name: &str, brain: &Brain, transcript: &Path, prompt: &str) -> String {
    fixture(name)
        .replace("TRANSCRIPT", &transcript.display().to_string())
        .replace("CWD", &brain.dir.path().display().to_string())
        .replace("PROMPT", prompt)
}

/// A hook deadline no test build on a loaded machine misses, for tests whose verdict is about
/// how much work a hook does rather than how fast.
const GENEROUS_DEADLINE_MS: &str = "120000";

fn hook(brain: &Brain, args: &[&str], stdin: &str) -> Output {
    hook_with(brain, args, stdin, &[])
}

fn hook_with(brain: &Brain, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = brain.cmd();
    cmd.arg("hook").args(args);
    // Every test asserts what the hook did, so none may depend on the machine's speed: the
    // generous deadline unless the test is about the deadline and sets its own.
    cmd.env("CAIRN_HOOK_DEADLINE_MS", GENEROUS_DEADLINE_MS);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.write_stdin(stdin.to_string());
    let output = cmd.output().expect("cairn runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "a hook always exits 0: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout_json(output: &Output) -> Value {
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn error_log(brain: &Brain) -> String {
    std::fs::read_to_string(brain.dir.path().join("hook-errors.log")).unwrap_or_default()
}

fn transcript_copy(brain: &Brain) -> PathBuf {
    let path = brain.dir.path().join("session.jsonl");
    std::fs::write(&path, fixture("claude-transcript.jsonl")).unwrap();
    path
}

fn records(brain: &Brain, memory_type: &str) -> Vec<Value> {
    brain
        .json(&["list", "--type", memory_type, "--limit", "0"], 0)
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn session_start_injects_the_brief_as_additional_context() {
    let brain = Brain::new();
    brain.remember(
        "preference",
        None,
        "Prefer small commits with clear messages",
    );
    brain.remember("policy", Some("no force push"), "Never force-push to main");
    let t = brain.dir.path().join("none.jsonl");
    let output = hook(
        &brain,
        &["session-start"],
        &payload("claude-session-start.json", &brain, &t, ""),
    );
    let answer = stdout_json(&output);
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "SessionStart"
    );
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.starts_with("<cairn-context kind=\"brief\">"),
        "{context}"
    );
    assert!(context.contains("Prefer small commits"), "{context}");
    assert!(context.contains("trust stated"), "{context}");
    assert!(context.contains("<stored-data"), "{context}");
    assert!(context.len() <= 9_000);
    // the session start is in the activity log
    let log = brain.json(&["log"], 0);
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .any(|e| e["op"] == "session_start"),
        "{log}"
    );
}

#[test]
fn user_prompt_submit_injects_only_records_that_match_within_the_budget() {
    let brain = Brain::new();
    brain.remember(
        "gotcha",
        Some("pnpm lockfile drift"),
        "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; run pnpm install.",
    );
    brain.remember(
        "note",
        None,
        "The office coffee machine is on the third floor.",
    );
    let t = brain.dir.path().join("none.jsonl");
    let output = hook(
        &brain,
        &["user-prompt-submit"],
        &payload(
            "claude-user-prompt-submit.json",
            &brain,
            &t,
            "why is CI failing on the pnpm lockfile again?",
        ),
    );
    let answer = stdout_json(&output);
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains("pnpm lockfile drift"), "{context}");
    assert!(!context.contains("coffee"), "{context}");
    assert!(context.contains("trust stated"), "{context}");
    assert!(context.len() <= 2048, "{} bytes", context.len());

    // a prompt that shares only one word with a record injects nothing
    let output = hook(
        &brain,
        &["user-prompt-submit"],
        &payload(
            "claude-user-prompt-submit.json",
            &brain,
            &t,
            "please refactor the floor plan renderer module",
        ),
    );
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );

    // trivial prompts are skipped without a recall
    for prompt in ["ok", "thanks!", "/compact", "continue"] {
        let output = hook(
            &brain,
            &["user-prompt-submit"],
            &payload("claude-user-prompt-submit.json", &brain, &t, prompt),
        );
        assert!(output.stdout.is_empty(), "{prompt}");
    }
    // recall from a hook does not count as a use
    let shown = brain.json(&["show", "1"], 0);
    assert_eq!(shown["use_count"], 0);
}

#[test]
fn a_small_budget_is_respected() {
    let brain = Brain::new();
    for i in 0..20 {
        brain.remember(
            "fact",
            Some(&format!("deploy pipeline fact {i}")),
            &format!(
                "The deploy pipeline for service {i} runs on the staging cluster first; {}",
                "detail ".repeat(30)
            ),
        );
    }
    let t = brain.dir.path().join("none.jsonl");
    let output = hook(
        &brain,
        &["user-prompt-submit", "--budget", "1200"],
        &payload(
            "claude-user-prompt-submit.json",
            &brain,
            &t,
            "how does the deploy pipeline reach the staging cluster",
        ),
    );
    let answer = stdout_json(&output);
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.len() <= 1200, "{} bytes", context.len());
    let items = context.matches("\n- #").count();
    assert!(
        (1..8).contains(&items),
        "some, not all, of the matches fit: {context}"
    );
}

#[test]
fn stop_captures_turns_once_and_never_our_own_injections() {
    let brain = Brain::new();
    let transcript = transcript_copy(&brain);
    let stop = payload("claude-stop.json", &brain, &transcript, "");
    let output = hook(&brain, &["stop"], &stop);
    assert!(output.stdout.is_empty());
    assert_eq!(error_log(&brain), "");
    let episodes = records(&brain, "episode");
    assert_eq!(episodes.len(), 2, "{episodes:#?}");
    for episode in &episodes {
        assert_eq!(episode["trust"], "captured");
        let body = episode["body"].as_str().unwrap();
        assert!(!body.contains("INJECTED"), "{body}");
        assert!(
            !body.contains("Lockfile is up to date"),
            "tool output is not a turn: {body}"
        );
    }
    assert!(episodes.iter().any(|e| {
        e["body"]
            .as_str()
            .unwrap()
            .contains("ERR_PNPM_OUTDATED_LOCKFILE")
    }));
    // candidate facts went to the inbox, with trust captured
    let inbox = brain.json(&["inbox", "list"], 0);
    let bodies: Vec<&str> = inbox
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["body"].as_str().unwrap())
        .collect();
    assert!(
        bodies.iter().any(|b| b.contains("We decided to pin pnpm")),
        "{inbox}"
    );
    assert!(
        bodies
            .iter()
            .any(|b| b.starts_with("Always run pnpm install")),
        "{inbox}"
    );
    assert!(
        inbox
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["trust"] == "captured")
    );
    // the brief shows the inbox
    let brief = brain.cmd().args(["brief"]).output().unwrap();
    let brief = String::from_utf8_lossy(&brief.stdout);
    assert!(brief.contains("## Inbox"), "{brief}");
    assert!(brief.contains("trust captured"), "{brief}");

    // repeats (Stop, then PreCompact, then Stop) capture nothing new
    hook(
        &brain,
        &["pre-compact"],
        &payload("claude-pre-compact.json", &brain, &transcript, ""),
    );
    hook(&brain, &["stop"], &stop);
    assert_eq!(records(&brain, "episode").len(), 2);

    // the transcript grows: only the new turn is captured
    let mut more = std::fs::read_to_string(&transcript).unwrap();
    more.push_str(&serde_json::json!({"type": "user", "message": {"role": "user", "content": "What port does staging Postgres use?"}}).to_string());
    more.push('\n');
    std::fs::write(&transcript, &more).unwrap();
    hook(&brain, &["stop"], &stop);
    assert_eq!(
        records(&brain, "episode").len(),
        2,
        "an unanswered prompt waits"
    );
    more.push_str(&serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Port 5433."}]}}).to_string());
    more.push('\n');
    std::fs::write(&transcript, &more).unwrap();
    hook(&brain, &["stop"], &stop);
    let episodes = records(&brain, "episode");
    assert_eq!(episodes.len(), 3);
    assert!(
        episodes
            .iter()
            .any(|e| e["body"].as_str().unwrap().contains("Port 5433"))
    );
    // the log says what the session did
    let log = brain.json(&["log", "--limit", "100"], 0);
    assert!(log.as_array().unwrap().iter().any(|e| e["op"] == "capture"));
}

#[test]
fn fifty_concurrent_stop_hooks_capture_each_turn_once() {
    let brain = Brain::new();
    brain.remember("note", None, "warm up the schema");
    let transcript = transcript_copy(&brain);
    let stop = payload("claude-stop.json", &brain, &transcript, "");
    let binary = assert_cmd::cargo::cargo_bin("cairn");
    let children: Vec<_> = (0..50)
        .map(|_| {
            let mut child = Command::new(&binary)
                .args(["hook", "stop"])
                .current_dir(brain.dir.path())
                .env("CAIRN_DB", &brain.db)
                .env("CAIRN_DAEMON", "off")
                .env("CAIRN_PROJECT", "test-project")
                .env("CAIRN_HOOK_DEADLINE_MS", "30000")
                .env("CAIRN_BUSY_TIMEOUT_MS", "30000")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(stop.as_bytes())
                .unwrap();
            child
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0));
        assert!(output.stdout.is_empty());
    }
    assert_eq!(error_log(&brain), "", "no hook failed");
    assert_eq!(records(&brain, "episode").len(), 2);
    let inbox = brain.json(&["inbox", "list"], 0);
    assert_eq!(inbox.as_array().unwrap().len(), 2, "{inbox}");
}

#[test]
fn bad_input_never_fails_the_agent_and_is_logged() {
    let brain = Brain::new();
    for (args, stdin) in [
        (vec!["session-start"], ""),
        (vec!["session-start"], "{not json"),
        (vec!["user-prompt-submit"], "[1, 2]"),
        (
            vec!["stop"],
            r#"{"session_id": "s", "transcript_path": "/nonexistent/t.jsonl"}"#,
        ),
        (vec!["no-such-event"], "{}"),
        (vec!["stop", "--client", "nobody"], "{}"),
    ] {
        let output = hook(&brain, &args, stdin);
        assert!(
            output.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    let log = error_log(&brain);
    assert!(log.contains("no hook JSON on stdin"), "{log}");
    assert!(log.contains("does not parse"), "{log}");
    assert!(log.contains("not an object"), "{log}");
    assert!(log.contains("/nonexistent/t.jsonl"), "{log}");
    assert!(log.contains("unknown event or client"), "{log}");

    // a truncated transcript (a half-written last line) is read up to its last whole line
    let transcript = brain.dir.path().join("cut.jsonl");
    let full = fixture("claude-transcript.jsonl");
    let cut = full
        .find("Committed as")
        .expect("the last answer is in the fixture");
    std::fs::write(&transcript, &full[..cut]).unwrap();
    hook(
        &brain,
        &["stop"],
        &payload("claude-stop.json", &brain, &transcript, ""),
    );
    assert_eq!(records(&brain, "episode").len(), 1);
}

#[test]
fn a_locked_brain_costs_the_agent_at_most_the_deadline() {
    let brain = Brain::new();
    brain.remember("note", None, "a record so the schema exists");
    let transcript = transcript_copy(&brain);
    // another process holds the write lock until the hook has answered
    let holder = common::LockHolder::hold(&brain.db);
    let started = Instant::now();
    let output = hook_with(
        &brain,
        &["stop"],
        &payload("claude-stop.json", &brain, &transcript, ""),
        &[
            ("CAIRN_HOOK_DEADLINE_MS", "800"),
            ("CAIRN_BUSY_TIMEOUT_MS", "600000"),
        ],
    );
    // The lock is still held: a hook that waited for it would wait the whole busy timeout
    // (10 minutes). Its own deadline answers long before; the bound is generous on purpose.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(120), "took {took:?}");
    assert!(output.stdout.is_empty());
    assert!(
        error_log(&brain).contains("internal deadline"),
        "{}",
        error_log(&brain)
    );
    holder.release();
    // once the lock is gone the next capture gets everything
    hook(
        &brain,
        &["stop"],
        &payload("claude-stop.json", &brain, &transcript, ""),
    );
    assert_eq!(records(&brain, "episode").len(), 2);
}

#[test]
fn read_only_brains_still_brief_and_never_write() {
    let brain = Brain::new();
    brain.remember("preference", None, "Prefer tabs over spaces in Makefiles");
    let transcript = transcript_copy(&brain);
    let env = [("CAIRN_READ_ONLY", "1")];
    let output = hook_with(
        &brain,
        &["session-start"],
        &payload("claude-session-start.json", &brain, &transcript, ""),
        &env,
    );
    let context = stdout_json(&output)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(context.contains("Prefer tabs"));
    let output = hook_with(
        &brain,
        &["stop"],
        &payload("claude-stop.json", &brain, &transcript, ""),
        &env,
    );
    assert!(output.stdout.is_empty());
    assert!(
        error_log(&brain).contains("read-only"),
        "{}",
        error_log(&brain)
    );
    assert_eq!(records(&brain, "episode").len(), 0);
}

#[test]
fn gemini_and_cursor_get_their_own_shapes() {
    let brain = Brain::new();
    brain.remember(
        "gotcha",
        Some("staging postgres port"),
        "Staging Postgres listens on 5433, not 5432.",
    );
    let t = brain.dir.path().join("gemini-session.json");
    std::fs::write(&t, "{\"messages\": []}").unwrap();
    // BeforeAgent → hookSpecificOutput with Gemini's event name
    let output = hook(
        &brain,
        &["BeforeAgent", "--client", "gemini"],
        &payload(
            "gemini-before-agent.json",
            &brain,
            &t,
            "which port does staging postgres use",
        ),
    );
    let answer = stdout_json(&output);
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "BeforeAgent");
    assert!(
        answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("5433")
    );
    // AfterAgent hands the turn over directly; repeating it adds nothing
    for _ in 0..2 {
        hook(
            &brain,
            &["stop", "--client", "gemini"],
            &payload("gemini-after-agent.json", &brain, &t, ""),
        );
    }
    let episodes = records(&brain, "episode");
    assert_eq!(episodes.len(), 1, "{episodes:#?}");
    assert!(
        episodes[0]["body"]
            .as_str()
            .unwrap()
            .contains("Noted: staging Postgres")
    );
    let inbox = brain.json(&["inbox", "list"], 0);
    assert_eq!(inbox[0]["suggested_type"], "fact", "{inbox}");
    // Cursor: sessionStart answers with additional_context; afterAgentResponse is captured
    let output = hook(
        &brain,
        &["session-start", "--client", "cursor"],
        &payload("cursor-session-start.json", &brain, &t, ""),
    );
    assert!(
        stdout_json(&output)["additional_context"]
            .as_str()
            .unwrap()
            .contains("cairn brief")
    );
    hook(
        &brain,
        &["afterAgentResponse", "--client", "cursor"],
        &payload("cursor-after-agent-response.json", &brain, &t, ""),
    );
    assert_eq!(records(&brain, "episode").len(), 2);
}

#[test]
fn output_never_exceeds_the_client_cap() {
    let brain = Brain::new();
    for i in 0..60 {
        brain.remember(
            "policy",
            Some(&format!("rule number {i}")),
            &format!("Rule {i}: {}", "a long binding rule text ".repeat(10)),
        );
    }
    let t = brain.dir.path().join("none.jsonl");
    let output = hook(
        &brain,
        &["session-start", "--budget", "50000"],
        &payload("claude-session-start.json", &brain, &t, ""),
    );
    let context = stdout_json(&output)["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(context.len() <= 9_000, "{}", context.len());
    assert!(context.trim_end().ends_with("</cairn-context>"));
    let session_end = hook(
        &brain,
        &["session-end"],
        &payload("claude-session-end.json", &brain, &t, ""),
    );
    assert!(session_end.stdout.is_empty());
}

/// A transcript of `turns` answered turns in Claude Code's JSONL shape.
fn long_transcript(brain: &Brain, name: &str, turns: usize) -> PathBuf {
    let text: String = (0..turns)
        .map(|i| {
            let user = serde_json::json!({"type": "user", "message": {"role": "user", "content": format!("question {i} about alpha{i}")}});
            let answer = serde_json::json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": format!("answer {i} is beta{i}")}]}});
            format!("{user}\n{answer}\n")
        })
        .collect();
    let path = brain.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A backlog longer than one capture (200 turns) is taken by the same Stop, capture after
/// capture, within the hook's deadline.
#[test]
fn one_stop_catches_up_a_backlog_longer_than_one_capture() {
    let brain = Brain::new();
    let t = long_transcript(&brain, "long.jsonl", 450);
    // The verdict is about the loop, not the machine's speed: a deadline no test build misses.
    hook_with(
        &brain,
        &["stop"],
        &payload("claude-stop.json", &brain, &t, ""),
        &[("CAIRN_HOOK_DEADLINE_MS", GENEROUS_DEADLINE_MS)],
    );
    assert_eq!(
        records(&brain, "episode").len(),
        450,
        "{}",
        error_log(&brain)
    );
}

/// SessionEnd takes what the session's Stops left (its last chance: no later Stop reads this
/// transcript) and records what it could not take in its time.
#[test]
fn session_end_captures_the_backlog_and_records_what_is_left() {
    let brain = Brain::new();
    let t = long_transcript(&brain, "ended.jsonl", 300);
    hook_with(
        &brain,
        &["session-end"],
        &payload("claude-session-end.json", &brain, &t, ""),
        &[("CAIRN_HOOK_DEADLINE_MS", GENEROUS_DEADLINE_MS)],
    );
    assert_eq!(
        records(&brain, "episode").len(),
        300,
        "{}",
        error_log(&brain)
    );
    let session_end = |brain: &Brain| -> Value {
        brain
            .json(&["log", "--limit", "100"], 0)
            .as_array()
            .unwrap()
            .iter()
            .rfind(|e| e["op"] == "session_end")
            .cloned()
            .expect("a session_end event")
    };
    assert!(
        session_end(&brain)["detail"]
            .get("uncaptured_bytes")
            .is_none(),
        "{}",
        session_end(&brain)
    );

    // A backlog longer than the loop's time: with no time for more than the first capture, one
    // capture (200 turns) is taken and what is left is recorded with the session's end.
    let other = Brain::new();
    let t = long_transcript(&other, "huge.jsonl", 1_000);
    hook_with(
        &other,
        &["session-end"],
        &payload("claude-session-end.json", &other, &t, ""),
        &[
            ("CAIRN_HOOK_DEADLINE_MS", GENEROUS_DEADLINE_MS),
            ("CAIRN_HOOK_BACKLOG_MS", "0"),
        ],
    );
    let captured = records(&other, "episode").len();
    assert_eq!(captured, 200, "{}", error_log(&other));
    let end = session_end(&other);
    assert!(
        end["detail"]["uncaptured_bytes"].as_u64().unwrap_or(0) > 0,
        "{end}"
    );
}
