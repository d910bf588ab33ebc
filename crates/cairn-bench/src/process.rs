//! Child processes: the `cairn` binary under test, a child's wall and CPU time, and a child's
//! peak RSS (GNU `time -f %M`: the child's `ru_maxrss` from `wait4`, no unsafe code here).

use crate::machine;
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// GNU time, which reports a child's peak RSS.
pub const GNU_TIME: &str = "/usr/bin/time";

/// `explicit`, or the release `cairn` that `cargo build --release -p cairn-cli` reports — built
/// before any measurement so the build never runs beside one.
pub fn locate_cairn(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        if !path.is_file() {
            bail!("--cairn {} is not a file", path.display());
        }
        return Ok(std::fs::canonicalize(path)?);
    }
    eprintln!(
        "[cairn-bench] building the release cairn binary (cargo build --release -p cairn-cli)…"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "cairn-cli",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(crate::results::workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo (give the binary with --cairn PATH)")?;
    if !output.status.success() {
        bail!("cargo build --release -p cairn-cli failed (see above)");
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == "cairn")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .context("cargo built cairn-cli but reported no `cairn` executable")
}

/// Runs `command` to completion: its wall time in ms, its CPU time in clock ticks (the
/// children's `cutime + cstime` before and after), and its output. A failed child is an error
/// with its stderr.
pub fn timed(mut command: Command) -> Result<(f64, u64, Output)> {
    let cpu_before = machine::children_cpu_ticks().unwrap_or(0);
    let started = Instant::now();
    let output = command
        .output()
        .context("cannot start a measured process")?;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let cpu = machine::children_cpu_ticks()
        .unwrap_or(0)
        .saturating_sub(cpu_before);
    if !output.status.success() {
        bail!(
            "{:?} failed: {}",
            command,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok((elapsed, cpu, output))
}

/// Runs `inner` under GNU time and returns its output and peak RSS in MB (`None` when GNU time
/// is missing: then `inner` runs plainly). `scratch` is a file GNU time writes its report to.
pub fn with_peak_rss(inner: &Command, scratch: &Path) -> Result<(Output, Option<f64>)> {
    let time = Path::new(GNU_TIME);
    let mut command = if time.is_file() {
        let mut command = Command::new(time);
        command
            .args(["-f", "%M", "-o"])
            .arg(scratch)
            .arg(inner.get_program())
            .args(inner.get_args());
        command
    } else {
        let mut command = Command::new(inner.get_program());
        command.args(inner.get_args());
        command
    };
    if let Some(dir) = inner.get_current_dir() {
        command.current_dir(dir);
    }
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {:?}", inner.get_program()))?;
    if !output.status.success() {
        bail!(
            "{:?} failed: {}",
            inner,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    if !time.is_file() {
        return Ok((output, None));
    }
    let text = std::fs::read_to_string(scratch)
        .with_context(|| format!("GNU time wrote no report to {}", scratch.display()))?;
    let kb: f64 = text
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .with_context(|| format!("no %M in GNU time's report: {text:?}"))?;
    Ok((output, Some(kb / 1024.0)))
}
