//! The warm local daemon end to end: the real binary, `cairn serve --local` on a real Unix
//! socket, started by the CLI on first need, spoken to with `curl --unix-socket` and by the CLI
//! and hooks themselves. Each test that lets a daemon start stops it at the end ([`Daemon`]).
//!
//! Waiting for a daemon the CLI started in the background is polling a condition (the socket
//! answers, a vector exists) under a generous deadline the test sets: never a fixed sleep.

mod common;

use common::Brain;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The generous bound every wait here has (a loaded 2-core machine, a debug build).
const PATIENCE: Duration = Duration::from_secs(90);

fn socket_of(brain: &Brain) -> PathBuf {
    let dir = std::fs::canonicalize(brain.dir.path()).unwrap();
    dir.join("brain.db.sock")
}

fn log_of(brain: &Brain) -> PathBuf {
    std::fs::canonicalize(brain.dir.path())
        .unwrap()
        .join("brain.db.daemon.log")
}

/// `cairn` with the daemon allowed (the shared harness, `Brain::cmd`, turns it off).
fn cmd(brain: &Brain) -> assert_cmd::Command {
    let mut cmd = brain.cmd();
    cmd.env_remove("CAIRN_DAEMON").env_remove("CAIRN_URL");
    cmd
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < PATIENCE,
            "gave up after {} s waiting for {what}",
            PATIENCE.as_secs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn live(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// `curl --unix-socket`: the status and the body as JSON.
fn curl(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[&str],
) -> (u16, Value) {
    let mut command = Command::new("curl");
    command
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket"])
        .arg(socket)
        .args(["-X", method]);
    for header in headers {
        command.args(["-H", header]);
    }
    if let Some(body) = body {
        command.args([
            "-H",
            "content-type: application/json",
            "--data-binary",
            body,
        ]);
    }
    let output = command
        .arg(format!("http://localhost{path}"))
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        status.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or(Value::String(body.to_string())),
    )
}

/// The child's first stderr line; the rest is read (and dropped) by a thread, so the daemon's
/// later lines (its stop) never meet a closed pipe.
fn first_line_then_drain(child: &mut Child) -> String {
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    first
}

/// A daemon this test caused (started by hand or by the CLI): stopped with SIGTERM at the end.
struct Daemon {
    pid: u32,
    child: Option<Child>,
    first_line: String,
}

impl Daemon {
    /// `cairn serve --local`, waiting for its "listening" line.
    fn start(brain: &Brain, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_with(brain, &[], env)
    }

    /// `cairn serve --local ARGS…`, waiting for its "listening" line.
    fn start_with(brain: &Brain, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        command
            .args(["serve", "--local"])
            .args(args)
            .current_dir(brain.dir.path())
            .env("CAIRN_DB", &brain.db)
            .env_remove("CAIRN_PROJECT")
            .env_remove("CAIRN_DAEMON")
            .env("CAIRN_EMBEDDER", "none")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("cairn serve --local starts");
        let first_line = first_line_then_drain(&mut child);
        assert!(
            first_line.contains("listening on unix:"),
            "not listening: {first_line:?}"
        );
        Daemon {
            pid: child.id(),
            child: Some(child),
            first_line,
        }
    }

    /// The daemon the CLI started for `brain`: found by the pid in its log.
    fn started_by_cli(brain: &Brain) -> Daemon {
        let socket = socket_of(brain);
        let listening = || {
            std::fs::read_to_string(log_of(brain))
                .is_ok_and(|log| log.contains("listening on unix:"))
        };
        wait_for("the daemon the CLI started to answer", || {
            live(&socket) && listening()
        });
        let log = std::fs::read_to_string(log_of(brain)).unwrap();
        let line = log
            .lines()
            .rfind(|l| l.contains("listening on unix:"))
            .unwrap_or_else(|| panic!("no listening line in the daemon's log: {log}"))
            .to_string();
        let pid = line
            .rsplit_once("as pid ")
            .and_then(|(_, pid)| pid.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid in {line:?}"));
        Daemon {
            pid,
            child: None,
            first_line: line,
        }
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status();
    }

    fn running(&self) -> bool {
        Path::new(&format!("/proc/{}", self.pid)).exists()
            && !std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
                .is_ok_and(|stat| stat.split_whitespace().nth(2) == Some("Z"))
    }

    /// SIGTERM, and waits until it is gone.
    fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.signal("-TERM");
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        } else {
            let started = Instant::now();
            while self.running() && started.elapsed() < PATIENCE {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() || self.running() {
            self.stop_now();
        }
    }
}

#[test]
fn serve_local_listens_beside_the_brain_mode_0600_without_a_token() {
    let brain = Brain::new();
    let daemon = Daemon::start(&brain, &[]);
    let socket = socket_of(&brain);
    assert!(
        daemon.first_line.contains(&socket.display().to_string()),
        "{}",
        daemon.first_line
    );
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600, "the socket is the owner's only");
    let (status, health) = curl(&socket, "GET", "/healthz", None, &[]);
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["local"], true);
    // No token: the owner's rights; git is asked in the directory the client names.
    let cwd = format!("cairn-cwd: {}", brain.dir.path().display());
    let (status, stored) = curl(
        &socket,
        "POST",
        "/v1/remember",
        Some(r#"{"type":"note","body":"the daemon listens on a unix socket"}"#),
        &[&cwd, "cairn-project: p1"],
    );
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["status"], "added");
    let (status, found) = curl(
        &socket,
        "POST",
        "/v1/recall",
        Some(r#"{"query":"unix socket"}"#),
        &[&cwd, "cairn-project: p1"],
    );
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["results"][0]["id"], stored["id"]);
    // Without the caller's directory the daemon cannot answer as the CLI would: a clear 400.
    let (status, problem) = curl(
        &socket,
        "POST",
        "/v1/recall",
        Some(r#"{"query":"unix"}"#),
        &[],
    );
    assert_eq!(status, 400, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("cairn-cwd"),
        "{problem}"
    );
    daemon.stop();
    assert!(!socket.exists(), "the socket goes with the daemon");
}

/// The local daemon reads the brain with plain reads unless given `--mmap-mib` (a map's pages
/// count in its RSS): after a recall, no mapping of the brain file is in its address space; with
/// `--mmap-mib 64` there is one.
#[test]
fn the_local_daemon_maps_the_brain_only_when_told() {
    let brain = Brain::new();
    for n in 0..20 {
        cmd(&brain)
            .env("CAIRN_DAEMON", "off")
            .args(["remember", "--type", "note", "--body"])
            .arg(format!("mapped pages note {n} about the ledger service"))
            .assert()
            .success();
    }
    // Every page in the brain file itself, none left in the write-ahead log only.
    let checkpoint = Command::new("sqlite3")
        .arg(&brain.db)
        .arg("PRAGMA wal_checkpoint(TRUNCATE);")
        .output()
        .expect("sqlite3 runs (scripts/setup.sh installs it)");
    assert!(checkpoint.status.success(), "{checkpoint:?}");
    let cwd = format!("cairn-cwd: {}", brain.dir.path().display());
    let mapped = |args: &[&str]| {
        let daemon = Daemon::start_with(&brain, args, &[]);
        let (status, found) = curl(
            &socket_of(&brain),
            "POST",
            "/v1/recall",
            Some(r#"{"query":"ledger service"}"#),
            &[&cwd, "cairn-project: test-project"],
        );
        assert_eq!(status, 200, "{found}");
        assert!(!found["results"].as_array().unwrap().is_empty(), "{found}");
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", daemon.pid)).unwrap();
        let brain_file = brain.db.display().to_string();
        let mapped = maps.lines().any(|line| line.ends_with(&brain_file));
        daemon.stop();
        mapped
    };
    assert!(!mapped(&[]), "the local daemon maps the brain by default");
    assert!(mapped(&["--mmap-mib", "64"]), "--mmap-mib 64 maps nothing");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_daemon_is_refused() {
    let brain = Brain::new();
    let socket = socket_of(&brain);
    // A daemon that died without cleaning up: the file is there, nobody listens.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists() && !live(&socket));
    let daemon = Daemon::start(&brain, &[]);
    assert!(live(&socket), "the stale file was replaced");
    // A second daemon for the same brain stops before loading anything.
    let second = cmd(&brain).args(["serve", "--local"]).output().unwrap();
    common::refused(&second, 1, "already running or starting");
    // And a plain server on the live socket is refused too.
    let third = cmd(&brain)
        .args(["serve", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    common::refused(&third, 1, "socket of a running server");
    assert!(live(&socket), "the running daemon kept its socket");
    daemon.stop();
}

/// nobody's uid and gid (65534 on Debian).
const NOBODY: &str = "65534:65534";

#[test]
fn a_socket_or_directory_of_another_user_is_refused() {
    let brain = Brain::new();
    let socket = socket_of(&brain);
    // Another user's socket where ours would be.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(
        Command::new("chown")
            .arg(NOBODY)
            .arg(&socket)
            .status()
            .unwrap()
            .success()
    );
    let refused = cmd(&brain).args(["serve", "--local"]).output().unwrap();
    common::refused(&refused, 1, "belongs to user 65534");
    assert!(socket.exists(), "another user's file is left alone");
    // The CLI does not talk to it either: it answers from the file and says why.
    let output = cmd(&brain)
        .args(["remember", "--type", "note", "--body", "kept in the file"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("belongs to user 65534") && stderr.contains("answered from the file"),
        "{stderr}"
    );
    std::fs::remove_file(&socket).unwrap();

    // A socket directory of another user.
    let foreign = tempfile::tempdir().unwrap();
    let db = foreign.path().join("brain.db");
    assert!(
        Command::new("chown")
            .arg(NOBODY)
            .arg(foreign.path())
            .status()
            .unwrap()
            .success()
    );
    let refused = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["serve", "--local"])
        .env("CAIRN_DB", &db)
        .env_remove("CAIRN_DAEMON")
        .env("CAIRN_EMBEDDER", "none")
        .output()
        .unwrap();
    common::refused(&refused, 1, "belongs to user 65534, not to you");
}

#[test]
fn the_daemon_exits_after_its_idle_time_and_removes_its_socket() {
    let brain = Brain::new();
    let mut daemon = Daemon::start(&brain, &[("CAIRN_DAEMON_IDLE_SECS", "1")]);
    let socket = socket_of(&brain);
    let status = daemon.child.take().unwrap().wait().unwrap();
    assert_eq!(status.code(), Some(0), "an idle exit is a clean exit");
    assert!(!socket.exists(), "the socket went with it");
    // A bad idle setting is refused before anything starts.
    let output = cmd(&brain)
        .args(["serve", "--local"])
        .env("CAIRN_DAEMON_IDLE_SECS", "soon")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("CAIRN_DAEMON_IDLE_SECS"));
}

fn vectors(brain: &Brain) -> i64 {
    brain.sql("SELECT count(*) FROM vectors").parse().unwrap()
}

#[test]
fn a_remember_answered_while_the_daemon_starts_leaves_the_embedding_to_it() {
    let brain = Brain::new();
    // Another process is starting the daemon (it holds the start lock): this CLI answers from
    // the file at once, without the model — no daemon exists yet to embed anything.
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(format!("{}.lock", socket_of(&brain).display()))
        .unwrap();
    lock.try_lock().unwrap();
    let output = cmd(&brain)
        .env("CAIRN_EMBEDDER", "hash")
        .args([
            "remember",
            "--type",
            "note",
            "--body",
            "the cache listens on port 7000",
        ])
        .output()
        .unwrap();
    common::succeeded(&output);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "stored as #1"
    );
    assert_eq!(vectors(&brain), 0, "the CLI did not load the model");
    assert!(!log_of(&brain).exists(), "nobody started a second daemon");
    drop(lock);
    // The next call starts the daemon (this one answered from the file too) ...
    cmd(&brain)
        .env("CAIRN_EMBEDDER", "hash")
        .args(["recall", "cache port"])
        .assert()
        .success();
    // ... whose indexer embeds the record as soon as its model is loaded.
    let daemon = Daemon::started_by_cli(&brain);
    wait_for("the daemon's indexer to embed #1", || vectors(&brain) == 1);
    daemon.stop();
    assert!(!socket_of(&brain).exists());
}

#[test]
fn eight_clis_at_once_start_one_daemon() {
    let brain = Brain::new();
    let binary = assert_cmd::cargo::cargo_bin("cairn");
    let children: Vec<Child> = (0..8)
        .map(|n| {
            Command::new(&binary)
                .args(["remember", "--type", "note", "--body"])
                .arg(format!("concurrent note number {n} about the daemon"))
                .current_dir(brain.dir.path())
                .env("CAIRN_DB", &brain.db)
                .env("CAIRN_PROJECT", "test-project")
                .env("CAIRN_EMBEDDER", "none")
                .env_remove("CAIRN_DAEMON")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let daemon = Daemon::started_by_cli(&brain);
    let log = std::fs::read_to_string(log_of(&brain)).unwrap();
    // One daemon serves; one started in the instant between two holders of the start lock
    // would have stopped before loading anything, saying so.
    assert_eq!(log.matches("listening on unix:").count(), 1, "{log}");
    assert_eq!(
        brain.sql("SELECT count(*) FROM memories"),
        "8",
        "every CLI stored its note"
    );
    daemon.stop();
}

#[test]
fn cairn_daemon_off_starts_nothing() {
    let brain = Brain::new();
    cmd(&brain)
        .env("CAIRN_DAEMON", "off")
        .args(["remember", "--type", "note", "--body", "no daemon here"])
        .assert()
        .success();
    cmd(&brain)
        .env("CAIRN_DAEMON", "off")
        .args(["recall", "daemon"])
        .assert()
        .success();
    assert!(!socket_of(&brain).exists());
    assert!(!log_of(&brain).exists(), "nothing was started");
}

#[test]
fn a_long_brain_path_gets_a_short_private_socket() {
    let brain = Brain::new();
    let deep = brain.dir.path().join("d".repeat(70)).join("e".repeat(40));
    std::fs::create_dir_all(&deep).unwrap();
    let db = deep.join("brain.db");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["serve", "--local"])
        .env("CAIRN_DB", &db)
        .env_remove("CAIRN_DAEMON")
        .env("CAIRN_EMBEDDER", "none")
        .env("XDG_RUNTIME_DIR", brain.dir.path())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line_then_drain(&mut child);
    let dir = brain.dir.path().join("cairn");
    assert!(line.contains(&dir.display().to_string()), "{line}");
    let meta = std::fs::metadata(&dir).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

fn healthz(socket: &Path) -> Value {
    let (status, health) = curl(socket, "GET", "/healthz", None, &[]);
    assert_eq!(status, 200, "{health}");
    health
}

/// A daemon with the test embedder, its model loaded (`/healthz` says `ready`).
fn warm_daemon(brain: &Brain) -> Daemon {
    let daemon = Daemon::start(brain, &[("CAIRN_EMBEDDER", "hash")]);
    let socket = socket_of(brain);
    wait_for("the daemon's model", || {
        healthz(&socket)["model"] == "ready"
    });
    daemon
}

#[test]
fn a_cli_with_a_live_daemon_goes_through_it_with_the_same_output() {
    let brain = Brain::new();
    let daemon = warm_daemon(&brain);
    let socket = socket_of(&brain);
    let before = healthz(&socket)["requests"].as_u64().unwrap();
    // This CLI has no embedder of its own: a hybrid answer can only come from the daemon.
    let stored = cmd(&brain)
        .args([
            "remember",
            "--type",
            "gotcha",
            "--body",
            "the staging queue stalls when the WAL grows",
        ])
        .output()
        .unwrap();
    common::succeeded(&stored);
    assert_eq!(
        String::from_utf8_lossy(&stored.stdout).trim(),
        "stored as #1"
    );
    // Acknowledged once stored; the daemon's indexer embeds it right after.
    wait_for("the daemon's indexer embeds it", || vectors(&brain) == 1);
    let answer: Value = serde_json::from_slice(
        &cmd(&brain)
            .args(["--json", "recall", "staging queue"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        answer["degraded"].is_null(),
        "hybrid through the daemon: {answer}"
    );
    assert_eq!(answer["results"][0]["id"], 1);
    assert!(
        answer["results"][0]["why"]["vector_rank"].is_number(),
        "{answer}"
    );
    // Two calls went to the daemon (and the two /healthz reads).
    assert_eq!(healthz(&socket)["requests"].as_u64().unwrap(), before + 3);
    // The same record and actor as a local remember would make.
    let history = brain.json(&["show", "1", "--history"], 0);
    assert_eq!(history["project"], "test-project");
    // A refused near duplicate exits 3 through the daemon too, with the same message.
    let body = "The billing service retries failed webhook deliveries five times with exponential backoff starting at two seconds and then gives up and writes the event to the dead letter queue for manual replay by the on call engineer";
    cmd(&brain)
        .args(["remember", "--type", "fact", "--body", body])
        .assert()
        .success();
    let near = body.replace("on call engineer", "on call engineers");
    let again = ["remember", "--type", "fact", "--body", near.as_str()];
    let through = cmd(&brain).args(again).output().unwrap();
    let local = cmd(&brain)
        .env("CAIRN_DAEMON", "off")
        .args(again)
        .output()
        .unwrap();
    assert_eq!(
        through.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&through.stderr)
    );
    assert_eq!(local.status.code(), Some(3));
    assert_eq!(through.stdout, local.stdout);
    // Text output is the local command's: the same lines but for the score (lexical-only
    // here) and the why line.
    let text = cmd(&brain)
        .args(["recall", "staging queue"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with("#1 gotcha · global · test-project · score"),
        "{text}"
    );
    assert!(text.contains("why: lexical #1 · vector #1"), "{text}");
    daemon.stop();
}

#[test]
fn a_daemon_killed_mid_write_loses_nothing_it_acknowledged() {
    let brain = Brain::new();
    let daemon = warm_daemon(&brain);
    let acknowledged = brain.dir.path().join("acknowledged.txt");
    // One writer after another through the daemon; each line it prints is an acknowledged write.
    let script = "for n in $(seq 1 400); do \"$CAIRN_BIN\" remember --type note --body \"kill nine note $n of the test\" >/dev/null 2>&1 && echo \"$n\" >> \"$ACK\"; done";
    let mut writer = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(brain.dir.path())
        .env("CAIRN_BIN", assert_cmd::cargo::cargo_bin("cairn"))
        .env("ACK", &acknowledged)
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_PROJECT", "test-project")
        .env("CAIRN_EMBEDDER", "none")
        // The daemons later calls start after the kill leave by themselves soon.
        .env("CAIRN_DAEMON_IDLE_SECS", "3")
        .env_remove("CAIRN_DAEMON")
        .spawn()
        .unwrap();
    wait_for("20 acknowledged writes", || {
        std::fs::read_to_string(&acknowledged).is_ok_and(|t| t.lines().count() >= 20)
    });
    daemon.signal("-KILL");
    assert!(writer.wait().unwrap().success());
    let acknowledged = std::fs::read_to_string(&acknowledged).unwrap();
    let count = acknowledged.lines().count();
    assert!(count >= 20, "{count}");
    for n in acknowledged.lines() {
        let stored = brain.sql(&format!(
            "SELECT count(*) FROM memories WHERE body = 'kill nine note {n} of the test'"
        ));
        assert_eq!(stored, "1", "acknowledged write {n} is in the brain");
    }
    let integrity = brain.sql("PRAGMA integrity_check");
    assert_eq!(integrity, "ok");
    drop(daemon);
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hooks")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn payload(name: &str, brain: &Brain, transcript: &Path, prompt: &str) -> String {
    fixture(name)
        .replace("TRANSCRIPT", &transcript.display().to_string())
        .replace("CWD", &brain.dir.path().display().to_string())
        .replace("PROMPT", prompt)
}

fn hook(brain: &Brain, event: &str, stdin: &str, env: &[(&str, &str)]) -> (String, Duration) {
    let mut command = cmd(brain);
    command.args(["hook", event]).write_stdin(stdin.to_string());
    for (key, value) in env {
        command.env(key, value);
    }
    let started = Instant::now();
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "a hook always exits 0");
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        started.elapsed(),
    )
}

fn hook_log(brain: &Brain) -> String {
    std::fs::read_to_string(brain.dir.path().join("hook-errors.log")).unwrap_or_default()
}

#[test]
fn the_prompt_hook_recalls_through_the_daemon_and_fails_open_without_it() {
    let brain = Brain::new();
    let daemon = warm_daemon(&brain);
    let socket = socket_of(&brain);
    cmd(&brain)
        .args([
            "remember",
            "--type",
            "gotcha",
            "--body",
            "pnpm install fails on an outdated lockfile in CI",
        ])
        .assert()
        .success();
    let prompt = payload(
        "claude-user-prompt-submit.json",
        &brain,
        Path::new("/nonexistent"),
        "why does pnpm install fail on the lockfile",
    );
    let before = healthz(&socket)["requests"].as_u64().unwrap();
    let (through, _) = hook(&brain, "user-prompt-submit", &prompt, &[]);
    assert!(through.contains("outdated lockfile"), "{through}");
    assert_eq!(
        healthz(&socket)["requests"].as_u64().unwrap(),
        before + 2,
        "the hook's recall was the daemon's"
    );
    assert_eq!(hook_log(&brain), "");
    // The same injection the file gives (one record: no ranking to differ).
    let (local, _) = hook(
        &brain,
        "user-prompt-submit",
        &prompt,
        &[("CAIRN_DAEMON", "off")],
    );
    assert_eq!(through, local);
    // The daemon is killed: a dead socket. The hook answers from the file, starts a new
    // daemon in the background without waiting for it, and exits 0.
    daemon.signal("-KILL");
    // (The last of its threads closes the listener, maybe after the process shows as a zombie.)
    wait_for("the killed daemon's socket to stop answering", || {
        !live(&socket)
    });
    assert!(socket.exists(), "a killed daemon leaves its socket file");
    let (answered, _) = hook(
        &brain,
        "user-prompt-submit",
        &prompt,
        &[("CAIRN_DAEMON_IDLE_SECS", "3")],
    );
    assert!(answered.contains("outdated lockfile"), "{answered}");
    drop(daemon);
}

#[test]
fn a_daemon_that_never_answers_costs_the_hook_at_most_its_deadline() {
    let brain = Brain::new();
    cmd(&brain)
        .env("CAIRN_DAEMON", "off")
        .args([
            "remember",
            "--type",
            "gotcha",
            "--body",
            "pnpm install fails on an outdated lockfile in CI",
        ])
        .assert()
        .success();
    // A socket that accepts connections (the kernel's backlog) and never reads or answers.
    let socket = socket_of(&brain);
    let _silent = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // The owner's alone, as a daemon's socket is (any other mode is refused, not waited on).
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    let prompt = payload(
        "claude-user-prompt-submit.json",
        &brain,
        Path::new("/nonexistent"),
        "why does pnpm install fail on the lockfile",
    );
    let (answered, took) = hook(
        &brain,
        "user-prompt-submit",
        &prompt,
        &[("CAIRN_HOOK_DEADLINE_MS", "3000")],
    );
    // Half the deadline went to the daemon; the file answered in the other half.
    assert!(answered.contains("outdated lockfile"), "{answered}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    let log = hook_log(&brain);
    assert!(
        log.contains("the daemon did not answer") && log.contains("recalled from the file"),
        "{log}"
    );
}

/// `cairn serve` on a loopback port with a write token for `test-project`: (server, url, token).
fn remote_server(brain: &Brain) -> (Child, String, String) {
    let token = brain.json(
        &[
            "token",
            "create",
            "--name",
            "laptop",
            "--project",
            "test-project",
            "--role",
            "write",
        ],
        0,
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(brain.dir.path())
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_EMBEDDER", "none")
        .env_remove("CAIRN_PROJECT")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = first_line_then_drain(&mut child);
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    (child, url, token)
}

#[test]
fn with_cairn_url_every_hook_talks_to_the_server() {
    let server_brain = Brain::new();
    let (mut server, url, token) = remote_server(&server_brain);
    // The client's side: its own directory, a transcript, and no brain file at all.
    let client = Brain::new();
    let remote = [("CAIRN_URL", url.as_str()), ("CAIRN_TOKEN", token.as_str())];
    let transcript = client.dir.path().join("session.jsonl");
    std::fs::write(&transcript, fixture("claude-transcript.jsonl")).unwrap();
    let stop = payload("claude-stop.json", &client, &transcript, "");
    let (out, _) = hook(&client, "stop", &stop, &remote);
    assert_eq!(out, "");
    assert_eq!(hook_log(&client), "");
    let episodes = server_brain.sql("SELECT count(*) FROM memories WHERE type = 'episode'");
    assert_eq!(
        episodes, "2",
        "the transcript's turns were captured on the server"
    );
    // Again: nothing new, nothing stored twice.
    hook(&client, "stop", &stop, &remote);
    assert_eq!(
        server_brain.sql("SELECT count(*) FROM memories WHERE type = 'episode'"),
        "2"
    );
    // The transcript grows: only the new turn goes.
    let mut more = std::fs::read_to_string(&transcript).unwrap();
    more.push_str(
        &fixture("claude-transcript.jsonl")
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
            .replace("7f3c2a10", "8a4d3b21"),
    );
    more.push('\n');
    std::fs::write(&transcript, &more).unwrap();
    hook(&client, "stop", &stop, &remote);
    assert_eq!(hook_log(&client), "");
    let offset = server_brain.sql("SELECT byte_offset FROM capture_offsets");
    assert!(offset.parse::<usize>().unwrap() > 0, "{offset}");
    // Prompt and session start are the server's brief and recall.
    cmd(&server_brain)
        .env("CAIRN_DAEMON", "off")
        .args([
            "remember",
            "--type",
            "gotcha",
            "--body",
            "the deploy key rotates every Monday",
        ])
        .assert()
        .success();
    let prompt = payload(
        "claude-user-prompt-submit.json",
        &client,
        &transcript,
        "when does the deploy key rotate",
    );
    let (injected, _) = hook(&client, "user-prompt-submit", &prompt, &remote);
    assert!(
        injected.contains("deploy key rotates every Monday"),
        "{injected}"
    );
    let start = payload("claude-session-start.json", &client, &transcript, "");
    let (brief, _) = hook(&client, "session-start", &start, &remote);
    assert!(brief.contains("cairn brief for project"), "{brief}");
    assert!(!client.db.exists(), "no local brain was opened");
    // An offset that is not the stored one is refused (409) and nothing is captured.
    let (status, problem) = curl_tcp(
        &url,
        &token,
        "/v1/hooks/capture",
        r#"{"session":"7f3c2a10-5b1e-4c8e-9f7a-2d4b6c8e0a11","transcript":"elsewhere","offset":7,"text":"{}\n"}"#,
    );
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("send it again from byte 0"),
        "{problem}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    server.wait().unwrap();
    // The server is down: every hook fails open within its deadline and says why in the log.
    let (out, took) = hook(&client, "user-prompt-submit", &prompt, &remote);
    assert_eq!(out, "");
    assert!(took < Duration::from_secs(60));
    let log = hook_log(&client);
    assert!(log.contains("cannot reach the cairn server"), "{log}");
    assert!(!log.contains(&token), "the token is never logged");
}

fn curl_tcp(url: &str, token: &str, path: &str, body: &str) -> (u16, Value) {
    let output = Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", "-H"])
        .arg(format!("authorization: Bearer {token}"))
        .args([
            "-H",
            "content-type: application/json",
            "--data-binary",
            body,
        ])
        .arg(format!("{url}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (
        status.trim().parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// The target of `/proc/PID/fd/FD`.
fn fd_target(pid: u32, fd: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|target| target.display().to_string())
        .unwrap_or_default()
}

#[test]
fn the_cli_starts_the_daemon_detached_and_answers_without_waiting() {
    let brain = Brain::new();
    // `output()` waits for the CLI's stdout and stderr to reach EOF: a daemon holding either
    // pipe would hang this call.
    let output = cmd(&brain)
        .args([
            "remember",
            "--type",
            "note",
            "--body",
            "first need starts it",
        ])
        .output()
        .unwrap();
    common::succeeded(&output);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "stored as #1"
    );
    let daemon = Daemon::started_by_cli(&brain);
    // Its own session, stdin from /dev/null, stdout and stderr to its log, nothing else
    // inherited: every other descriptor is one it opened itself (the brain, its socket, the
    // lock, the log, its runtime's own).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", daemon.pid)).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    assert_eq!(
        fields[3],
        daemon.pid.to_string(),
        "a session leader: {stat}"
    );
    assert_eq!(fd_target(daemon.pid, 0), "/dev/null");
    let log = log_of(&brain).display().to_string();
    assert_eq!(fd_target(daemon.pid, 1), log);
    assert_eq!(fd_target(daemon.pid, 2), log);
    for entry in std::fs::read_dir(format!("/proc/{}/fd", daemon.pid)).unwrap() {
        let target = std::fs::read_link(entry.unwrap().path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        assert!(
            !target.starts_with("pipe:"),
            "the daemon holds a pipe ({target}): a caller's output could be kept open"
        );
    }
    // The next call goes through it.
    let socket = socket_of(&brain);
    let before = healthz(&socket)["requests"].as_u64().unwrap();
    cmd(&brain)
        .args(["recall", "first need"])
        .assert()
        .success()
        .stdout(predicates::str::contains("first need starts it"));
    assert_eq!(healthz(&socket)["requests"].as_u64().unwrap(), before + 2);
    daemon.stop();
}

#[test]
fn the_daemon_exits_when_its_brain_is_gone() {
    let brain = Brain::new();
    cmd(&brain).args(["recall", "anything"]).assert().success();
    let daemon = Daemon::started_by_cli(&brain);
    let socket = socket_of(&brain);
    assert!(daemon.running());
    // The temporary directory's brain is deleted (as a test's TempDir is at its end).
    std::fs::remove_file(&brain.db).unwrap();
    wait_for("the daemon to notice its brain is gone", || {
        !daemon.running()
    });
    assert!(!socket.exists(), "it removed its socket");
    let log = std::fs::read_to_string(log_of(&brain)).unwrap();
    assert!(log.contains("is gone or was replaced; exiting"), "{log}");
}

#[test]
fn a_socket_open_to_others_is_not_used() {
    let brain = Brain::new();
    let socket = socket_of(&brain);
    // A listening socket of ours, but mode 0666: no cairn daemon makes one.
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let output = cmd(&brain)
        .args(["remember", "--type", "note", "--body", "kept in the file"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("open to other users (mode 666)")
            && stderr.contains("answered from the file"),
        "{stderr}"
    );
    assert_eq!(brain.sql("SELECT count(*) FROM memories"), "1");
    drop(listener);
    assert!(!log_of(&brain).exists(), "no daemon was started beside it");
}
