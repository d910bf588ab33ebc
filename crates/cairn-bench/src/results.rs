//! The one result writer: every benchmark's numbers go to `bench/results/<name>-<stamp>.json`
//! and `.md` in one envelope — what ran (command, parameters, build profile, git tree), on what
//! (machine), under what load (the load average at the start, at each phase and at the end),
//! and the CPU time the benchmark and its children used — so two result files mean the same
//! thing by every field they share.

use crate::machine;
use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The workspace root (results and relative `--out` paths are taken from it).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest.to_path_buf())
}

/// `out` as given, or taken from the workspace root when relative.
pub fn resolve_out(out: &Path) -> PathBuf {
    if out.is_absolute() {
        out.to_path_buf()
    } else {
        workspace_root().join(out)
    }
}

pub fn progress(name: &str, message: &str) {
    eprintln!("[cairn-bench {name}] {message}");
}

/// One benchmark run, from its start to its result files.
#[derive(Debug)]
pub struct Run {
    name: String,
    started_at: DateTime<Utc>,
    started: Instant,
    load_start: Value,
    phases: Vec<Value>,
    cpu_start: Option<f64>,
    children_cpu_start: Option<f64>,
}

/// Where a run's files went.
#[derive(Debug, Clone)]
pub struct Written {
    pub json: PathBuf,
    pub markdown: PathBuf,
}

impl Run {
    /// Starts the clock and samples the load; `name` is the file name's stem (`core`,
    /// `lifecycle-month`, …).
    pub fn start(name: &str) -> Run {
        Run {
            name: name.to_string(),
            started_at: Utc::now(),
            started: Instant::now(),
            load_start: machine::load_json(),
            phases: Vec::new(),
            cpu_start: machine::process_cpu_seconds(),
            children_cpu_start: machine::children_cpu_seconds(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Marks the start of a phase: samples the load average and says so on stderr.
    pub fn phase(&mut self, phase: &str) {
        let load = machine::load_json();
        progress(&self.name, &format!("{phase} (load {})", load_text(&load)));
        self.phases.push(json!({
            "phase": phase,
            "at_seconds": crate::stats::round1(self.started.elapsed().as_secs_f64()),
            "load_average": load,
        }));
    }

    pub fn say(&self, message: &str) {
        progress(&self.name, message);
    }

    /// Writes `<out>/<name>-<stamp>.json` and `.md` (a later run in the same minute gets a
    /// `b`, `c`, … suffix: a result file is never overwritten). `results` is the benchmark's
    /// own numbers; `body` its Markdown after the common header.
    pub fn finish(
        self,
        out: &Path,
        parameters: Value,
        results: Value,
        body: &str,
    ) -> Result<Written> {
        let finished_at = Utc::now();
        let load_end = machine::load_json();
        let cpu = |start: Option<f64>, now: Option<f64>| match (start, now) {
            (Some(a), Some(b)) => json!(crate::stats::round3(b - a)),
            _ => Value::Null,
        };
        let process_cpu = cpu(self.cpu_start, machine::process_cpu_seconds());
        let children_cpu = cpu(self.children_cpu_start, machine::children_cpu_seconds());
        let wall = self.started.elapsed().as_secs_f64();
        let root = workspace_root();
        let report = json!({
            "benchmark": self.name,
            "started_at": stamp_rfc3339(self.started_at),
            "finished_at": stamp_rfc3339(finished_at),
            "wall_seconds": crate::stats::round1(wall),
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "build_profile": if cfg!(debug_assertions) { "debug" } else { "release" },
            "percentile": "nearest rank: the value at 1-based rank ceil(p/100 * n) of the sorted samples",
            "machine": machine::machine_json(),
            "load_average": {"start": self.load_start, "end": load_end, "by_phase": self.phases},
            "cpu_seconds": {"process": process_cpu, "children": children_cpu},
            "git": machine::git_json(&root),
            "parameters": parameters,
            "results": results,
        });
        let dir = resolve_out(out);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let stem = free_stem(
            &dir,
            &format!("{}-{}", self.name, self.started_at.format("%Y-%m-%dT%H%MZ")),
        );
        let json_path = dir.join(format!("{stem}.json"));
        let md_path = dir.join(format!("{stem}.md"));
        std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", json_path.display()))?;
        let shown = json_path
            .strip_prefix(&root)
            .unwrap_or(&json_path)
            .display()
            .to_string();
        let markdown = header(&report, &shown) + body;
        std::fs::write(&md_path, &markdown)
            .with_context(|| format!("cannot write {}", md_path.display()))?;
        println!("{markdown}");
        progress(
            &self.name,
            &format!("wrote {} and {}", json_path.display(), md_path.display()),
        );
        Ok(Written {
            json: json_path,
            markdown: md_path,
        })
    }
}

fn stamp_rfc3339(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `stem`, or `stem` + `b`, `c`, … — the first whose `.json` and `.md` are both free.
fn free_stem(dir: &Path, stem: &str) -> String {
    std::iter::once(String::new())
        .chain(('b'..='z').map(String::from))
        .chain((2..).map(|n| format!("-{n}")))
        .map(|suffix| format!("{stem}{suffix}"))
        .find(|candidate| {
            !dir.join(format!("{candidate}.json")).exists()
                && !dir.join(format!("{candidate}.md")).exists()
        })
        .expect("an unbounded sequence of names")
}

/// A load-average triple as `1.23 / 1.10 / 0.90`.
pub fn load_text(load: &Value) -> String {
    load.as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_f64().map_or("?".into(), |v| format!("{v:.2}")))
                .collect::<Vec<_>>()
                .join(" / ")
        })
        .unwrap_or_else(|| "unknown".into())
}

fn header(report: &Value, json_shown: &str) -> String {
    let mut s = String::new();
    let git = &report["git"];
    let commit = git["commit"].as_str().unwrap_or("unknown");
    let short = commit.get(..10).unwrap_or(commit);
    let dirty = if git["dirty"].as_bool() == Some(true) {
        " (with uncommitted changes)"
    } else {
        ""
    };
    let machine = &report["machine"];
    let load = &report["load_average"];
    let seconds = |v: &Value| v.as_f64().map_or("?".to_string(), |v| format!("{v:.1} s"));
    let _ = writeln!(
        s,
        "# cairn-bench {}, {}\n",
        report["benchmark"].as_str().unwrap_or(""),
        report["started_at"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "- **Tree:** `{short}`{dirty}, {} build",
        report["build_profile"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "- **Command:** `{}`",
        report["command"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "- **Machine:** {}, {} cores; load average (1 / 5 / 15 min) {} at the start, {} at the end",
        machine["cpu_model"].as_str().unwrap_or("unknown CPU"),
        machine["nproc"],
        load_text(&load["start"]),
        load_text(&load["end"]),
    );
    let _ = writeln!(
        s,
        "- **Time:** {} wall; CPU {} in the benchmark process, {} in its children",
        seconds(&report["wall_seconds"]),
        seconds(&report["cpu_seconds"]["process"]),
        seconds(&report["cpu_seconds"]["children"]),
    );
    let _ = writeln!(s, "- **Percentiles:** nearest rank (bench/README.md)");
    let _ = writeln!(s, "- **Full record:** `{json_shown}`\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_envelope_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let mut run = Run::start("unit");
        run.phase("only phase");
        let first = run
            .finish(
                dir.path(),
                json!({"records": 3}),
                json!({"latency": crate::stats::ms_json(&[1.0, 2.0, 3.0])}),
                "| a | b |\n",
            )
            .unwrap();
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&first.json).unwrap()).unwrap();
        assert_eq!(report["benchmark"], "unit");
        assert_eq!(report["parameters"]["records"], 3);
        assert_eq!(report["results"]["latency"]["p50_ms"], 2.0);
        assert_eq!(report["load_average"]["by_phase"][0]["phase"], "only phase");
        assert!(report["machine"]["nproc"].as_u64().unwrap() >= 1);
        assert!(report["started_at"].as_str().unwrap().ends_with('Z'));
        let name = first
            .json
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            name.starts_with("unit-") && name.ends_with("Z.json"),
            "{name}"
        );
        let markdown = std::fs::read_to_string(&first.markdown).unwrap();
        assert!(markdown.starts_with("# cairn-bench unit, "), "{markdown}");
        assert!(markdown.contains("load average"));
        assert!(markdown.ends_with("| a | b |\n"));

        // Same name, same minute (or not): a new pair of files, the first left as it was.
        let before = std::fs::read_to_string(&first.json).unwrap();
        let mut stems = vec![first.json.clone()];
        for _ in 0..2 {
            let again = Run::start("unit")
                .finish(dir.path(), json!({}), json!({}), "")
                .unwrap();
            assert!(!stems.contains(&again.json), "{}", again.json.display());
            stems.push(again.json);
        }
        assert_eq!(std::fs::read_to_string(&first.json).unwrap(), before);
    }

    #[test]
    fn free_stem_takes_the_next_letter() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(free_stem(dir.path(), "x"), "x");
        std::fs::write(dir.path().join("x.md"), "").unwrap();
        assert_eq!(free_stem(dir.path(), "x"), "xb");
        std::fs::write(dir.path().join("xb.json"), "").unwrap();
        assert_eq!(free_stem(dir.path(), "x"), "xc");
    }
}
