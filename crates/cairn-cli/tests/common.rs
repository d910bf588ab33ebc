//! Shared helpers for the end-to-end tests: a temporary brain and the real `cairn` binary.

#![allow(dead_code, clippy::new_without_default)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use tempfile::TempDir;

pub struct Brain {
    pub dir: TempDir,
    pub db: PathBuf,
}

impl Default for Brain {
    fn default() -> Self {
        Brain::new()
    }
}

impl Brain {
    pub fn new() -> Brain {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("brain.db");
        Brain { dir, db }
    }

    /// `cairn` with this brain, a fixed project, and the working directory inside the temp dir.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("cairn").expect("the cairn binary is built");
        cmd.current_dir(self.dir.path())
            .env("CAIRN_DB", &self.db)
            // No warm local daemon (`cairn serve --local`) unless a test is about it
            // (tests/daemon.rs removes this): every other test is about the file alone, and
            // must not leave a daemon behind in its temporary directory.
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_PROJECT", "test-project")
            .env_remove("CAIRN_READ_ONLY")
            // Lexical unless a test asks for an embedder: loading a model in every process
            // would slow the suite and these tests are about everything else.
            .env("CAIRN_EMBEDDER", "none")
            .env_remove("CAIRN_MODEL")
            .env_remove("CAIRN_EMBED_URL")
            .env("XDG_DATA_HOME", self.dir.path().join("data"));
        cmd
    }

    /// Runs `statement` on the brain with the `sqlite3` CLI (installed by scripts/setup.sh),
    /// behind cairn's back, and returns its trimmed output.
    pub fn sql(&self, statement: &str) -> String {
        let output = std::process::Command::new("sqlite3")
            .arg(&self.db)
            .arg(statement)
            .output()
            .expect("sqlite3 is installed (scripts/setup.sh)");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Runs `cairn --json ARGS…` expecting `code`, and parses stdout.
    pub fn json(&self, args: &[&str], code: i32) -> Value {
        let output = self
            .cmd()
            .arg("--json")
            .args(args)
            .output()
            .expect("cairn runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(code),
            "cairn {args:?}\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }

    pub fn remember(&self, memory_type: &str, title: Option<&str>, body: &str) -> Value {
        let mut args = vec!["remember", "--type", memory_type, "--body", body];
        if let Some(title) = title {
            args.extend(["--title", title]);
        }
        self.json(&args, 0)
    }

    pub fn recall_ids(&self, args: &[&str]) -> Vec<i64> {
        let mut all = vec!["recall"];
        all.extend_from_slice(args);
        let answer = self.json(&all, 0);
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    }
}

/// The check called `name` in a `doctor --json` report.
pub fn doctor_check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

/// Another process (the `sqlite3` shell) holding a brain's write lock: `BEGIN IMMEDIATE` and a
/// write, then it prints `locked`, which [`LockHolder::hold`] waits for — the lock is held
/// when it returns, however slow the machine. The lock goes with [`LockHolder::release`] or
/// when the holder is dropped.
pub struct LockHolder {
    child: std::process::Child,
}

impl LockHolder {
    pub fn hold(db: &std::path::Path) -> LockHolder {
        use std::io::{BufRead, Write};
        let mut child = std::process::Command::new("sqlite3")
            // Stop at the first error: a lock not taken closes stdout instead of saying `locked`.
            .arg("-bail")
            .arg(db)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sqlite3 is installed (scripts/setup.sh)");
        let stdin = child.stdin.as_mut().expect("piped stdin");
        writeln!(
            stdin,
            ".timeout 60000\nBEGIN IMMEDIATE; INSERT INTO meta VALUES ('lock', 'held'); SELECT 'locked';"
        )
        .expect("sqlite3 reads its input");
        stdin.flush().expect("sqlite3 reads its input");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().expect("piped stdout"))
            .read_line(&mut line)
            .expect("sqlite3 answers");
        assert_eq!(
            line.trim(),
            "locked",
            "the lock holder did not get the lock"
        );
        LockHolder { child }
    }

    /// Rolls the holder's transaction back and waits for it to exit.
    pub fn release(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        use std::io::Write;
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = writeln!(stdin, "ROLLBACK;");
        }
        let _ = self.child.wait();
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Asserts that a command ended with exit code `code` and said `needle` on stderr, and answers
/// its stderr (for the further checks some tests make).
#[track_caller]
pub fn refused(output: &std::process::Output, code: i32, needle: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    stderr
}

/// Asserts that a command succeeded, showing its stderr when it did not.
#[track_caller]
pub fn succeeded(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
