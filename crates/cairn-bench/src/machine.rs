//! What the numbers were measured on (cores, CPU model, load average, git tree), and the one set
//! of memory and CPU probes, all read from `/proc` (no dependency, no unsafe code).

use cairn_core::stats::status_kb;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

pub fn load_json() -> Value {
    match load_average() {
        Some([one, five, fifteen]) => json!([one, five, fifteen]),
        None => Value::Null,
    }
}

fn cpuinfo_field(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|line| line.starts_with(name))
        .and_then(|line| line.split_once(':'))
        .map(|(_, value)| value.trim().to_string())
}

fn meminfo_kb(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    status_kb(&text, name)
}

fn command_output(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    command_text(program, args, dir).map(|text| text.trim().to_string())
}

/// The untrimmed stdout of a successful command (`git status --porcelain` starts lines with a
/// meaningful space).
fn command_text(program: &str, args: &[&str], dir: Option<&Path>) -> Option<String> {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = command.output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The tree the numbers belong to: HEAD and the files changed on top of it.
pub fn git_json(root: &Path) -> Value {
    let commit = command_output("git", &["rev-parse", "HEAD"], Some(root));
    let changed: Vec<String> = command_text(
        "git",
        &["status", "--porcelain", "--untracked-files=no"],
        Some(root),
    )
    .map(|text| {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| line.get(3..).unwrap_or(line).to_string())
            .collect()
    })
    .unwrap_or_default();
    let untracked: Vec<String> = command_output(
        "git",
        &["ls-files", "--others", "--exclude-standard", "crates"],
        Some(root),
    )
    .map(|text| text.lines().map(str::to_string).collect())
    .unwrap_or_default();
    json!({
        "commit": commit,
        "dirty": !changed.is_empty() || !untracked.is_empty(),
        "modified": changed,
        "untracked_in_crates": untracked,
    })
}

pub fn machine_json() -> Value {
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu_model": cpuinfo_field("model name"),
        "cpu_flags_avx2": cpuinfo_field("flags").map(|f| f.split_whitespace().any(|x| x == "avx2")),
        "mem_total_mb": meminfo_kb("MemTotal:").map(|kb| kb / 1024),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        "os": std::fs::read_to_string("/etc/os-release").ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        }),
        "rustc": command_output("rustc", &["--version"], None),
    })
}

/// Peak resident set of this process (VmHWM) in MB, to one decimal.
pub fn peak_rss_mb() -> Option<f64> {
    peak_rss_kb().map(|kb| (kb as f64 / 1024.0 * 10.0).round() / 10.0)
}

/// Peak resident set of this process (VmHWM), in KiB.
pub fn peak_rss_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    status_kb(&text, "VmHWM:")
}

/// Current resident set of this process (VmRSS), in KiB.
pub fn rss_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    status_kb(&text, "VmRSS:")
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0: `echo 5 > /proc/self/clear_refs`), so the next
/// `peak_rss_kb` is the peak of what runs in between. False when the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU time this thread has run, in nanoseconds (`/proc/thread-self/schedstat`). Updated at
/// scheduler events, so use it over many operations, not one.
pub fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Clock ticks per second for `/proc/*/stat` times.
pub fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        command_output("getconf", &["CLK_TCK"], None)
            .and_then(|t| t.parse().ok())
            .unwrap_or(100.0)
    })
}

/// User + system CPU time of this process so far (all its threads), in clock ticks
/// (`utime + stime` of `/proc/self/stat`).
pub fn process_cpu_ticks() -> Option<u64> {
    stat_fields_sum(11, 12)
}

/// `process_cpu_ticks` in seconds.
pub fn process_cpu_seconds() -> Option<f64> {
    process_cpu_ticks().map(|t| t as f64 / clock_ticks())
}

/// `children_cpu_ticks` in seconds.
pub fn children_cpu_seconds() -> Option<f64> {
    children_cpu_ticks().map(|t| t as f64 / clock_ticks())
}

/// Two numeric fields of `/proc/self/stat` summed; indexes count from the field after the
/// command name (the state, field 3 of proc(5), is index 0).
fn stat_fields_sum(a: usize, b: usize) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let first: u64 = fields.get(a)?.parse().ok()?;
    let second: u64 = fields.get(b)?.parse().ok()?;
    Some(first + second)
}

/// User + system CPU time of every waited-for child so far, in clock ticks (`cutime + cstime`
/// of `/proc/self/stat`). The difference around one child is that child's CPU time; summed over
/// many children it is exact to one tick.
pub fn children_cpu_ticks() -> Option<u64> {
    // utime and stime are fields 14 and 15 of proc(5), cutime and cstime 16 and 17.
    stat_fields_sum(13, 14)
}

pub fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

pub fn version_of(program: &str, flag: &str) -> Option<String> {
    command_output(program, &[flag], None).map(|v| v.lines().next().unwrap_or("").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_probes_answer_on_linux() {
        if !Path::new("/proc/self/status").exists() {
            return;
        }
        assert!(peak_rss_kb().is_some_and(|kb| kb > 0));
        assert!(load_average().is_some());
        assert!(children_cpu_ticks().is_some());
        assert!(thread_cpu_ns().is_some());
        // Burn a little CPU: the process's own time must be counted, and never go backwards.
        let before = process_cpu_ticks().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(process_cpu_ticks().unwrap() >= before);
        assert!(process_cpu_seconds().unwrap() > 0.0);
    }
}
