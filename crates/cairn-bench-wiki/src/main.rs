//! `cairn-bench-wiki`: the numbers of the Markdown wiki (issue 7).
//!
//! Builds a seeded brain of `--records` records (default 100,000; fixed `now`, fixed word
//! lists, a deterministic generator), then times, in one process and release mode:
//!
//! 1. a full `export wiki` into an empty directory (target ≤ 30 s for 100k),
//! 2. a re-export of the unchanged brain (must write nothing),
//! 3. a re-export after 10 records changed (target ≤ 1 s),
//! 4. an import of the exported wiki into the same brain (every page unchanged),
//! 5. an import of the exported wiki into a fresh brain (every page restored; target ≤ 60 s),
//!
//! and writes `bench/results/wiki-<date>.json` and `.md` (with `--out DIR`).
//!
//! Usage: `cargo run --release -p cairn-bench-wiki -- [--records N] [--out bench/results]`

use anyhow::{Context as _, Result, bail};
use cairn_engine::wiki::{WikiExportOptions, WikiImportOptions};
use cairn_engine::{Context, Engine, UpdateRequest};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

const WORDS: &[&str] = &[
    "queue",
    "postgres",
    "redis",
    "deploy",
    "staging",
    "billing",
    "invoice",
    "lockfile",
    "cache",
    "token",
    "rotation",
    "migration",
    "schema",
    "index",
    "latency",
    "budget",
    "replica",
    "backup",
    "restore",
    "pipeline",
    "runner",
    "artifact",
    "release",
    "rollback",
    "feature",
    "flag",
    "checkout",
    "payment",
    "webhook",
    "retry",
    "timeout",
    "circuit",
    "breaker",
    "worker",
    "cron",
    "nightly",
    "export",
    "parquet",
    "bucket",
    "storage",
    "gateway",
    "ingress",
    "certificate",
    "renewal",
    "dns",
    "zone",
    "cluster",
    "node",
    "pod",
    "quota",
    "alert",
    "pager",
    "runbook",
    "incident",
    "postmortem",
    "owner",
    "review",
    "lint",
    "format",
    "test",
    "fixture",
    "snapshot",
];
const TYPES: &[&str] = &[
    "fact",
    "note",
    "gotcha",
    "decision",
    "procedure",
    "episode",
    "preference",
    "infra",
];

/// A small deterministic generator (SplitMix64): the same seed gives the same brain.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn word(&mut self) -> &'static str {
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
        .expect("a fixed time")
        .with_timezone(&Utc)
}

fn open(db: &Path, cwd: &Path) -> Result<Engine> {
    let context = Context {
        project: "bench".into(),
        cwd: cwd.to_path_buf(),
        actor: "bench".into(),
        read_only: false,
        now: Some(now()),
    };
    Ok(Engine::open(db, context)?)
}

fn seed(engine: &mut Engine, records: usize) -> Result<()> {
    let mut rng = Rng(7);
    let mut lines = String::with_capacity(records * 400);
    for index in 0..records {
        let title: Vec<&str> = (0..4).map(|_| rng.word()).collect();
        let body: Vec<&str> = (0..40).map(|_| rng.word()).collect();
        let tags: Vec<&str> = (0..2).map(|_| rng.word()).collect();
        let line = json!({
            "type": TYPES[index % TYPES.len()],
            "title": format!("{} {index}", title.join(" ")),
            "body": format!("Record {index}: {}.", body.join(" ")),
            "tags": tags,
            "scope": if index % 10 == 0 { "channel:deploy" } else { "global" },
            "created_at": "2026-06-01T00:00:00Z",
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    let report = engine.import_jsonl(
        &mut std::io::Cursor::new(lines.into_bytes()),
        &cairn_engine::exchange::ImportOptions::default(),
    )?;
    if report.summary.added != records {
        bail!(
            "seeding added {} of {records} records",
            report.summary.added
        );
    }
    Ok(())
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn timed<T>(what: &str, work: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let start = Instant::now();
    let value = work().with_context(|| what.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    eprintln!("{what}: {seconds:.3} s");
    Ok((value, seconds))
}

fn main() -> Result<()> {
    let mut records = 100_000usize;
    let mut out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--records" => records = args.next().context("--records N")?.parse()?,
            "--out" => out = Some(PathBuf::from(args.next().context("--out DIR")?)),
            other => bail!("unknown argument {other:?}: use --records N, --out DIR"),
        }
    }
    let work = tempfile::tempdir()?;
    let db = work.path().join("brain.db");
    let wiki = work.path().join("wiki");
    let mut engine = open(&db, work.path())?;
    let (_, seed_s) = timed("seed (JSONL import)", || seed(&mut engine, records))?;

    let options = WikiExportOptions::default();
    let (full, export_s) = timed("export wiki, full", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    let (again, unchanged_s) = timed("export wiki, unchanged", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    if again.written != 0 {
        bail!("an unchanged re-export wrote {} files", again.written);
    }
    let mut rng = Rng(11);
    for _ in 0..10 {
        let id = 1 + (rng.next() % records as u64) as i64;
        engine.update(
            id,
            &UpdateRequest {
                body: Some(format!(
                    "Changed for the benchmark: {} {}.",
                    rng.word(),
                    rng.word()
                )),
                ..UpdateRequest::default()
            },
        )?;
    }
    let (incremental, incremental_s) = timed("export wiki, 10 changed", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    let (same, import_same_s) = timed("import wiki, same brain", || {
        Ok(engine.import_wiki(&wiki, &WikiImportOptions::default())?)
    })?;
    drop(engine);
    let fresh_db = work.path().join("fresh.db");
    let mut fresh = open(&fresh_db, work.path())?;
    let (restored, import_fresh_s) = timed("import wiki, fresh brain", || {
        Ok(fresh.import_wiki(&wiki, &WikiImportOptions::default())?)
    })?;
    let wiki_bytes: u64 = walk_bytes(&wiki);
    let result = json!({
        "benchmark": "wiki",
        "date": chrono::Utc::now().format("%Y-%m-%d").to_string(),
        "records": records,
        "machine": {"cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1), "os": std::env::consts::OS},
        "seed_import_s": round(seed_s),
        "export_full_s": round(export_s),
        "export_full_files": full.written,
        "export_unchanged_s": round(unchanged_s),
        "export_unchanged_written": again.written,
        "export_after_10_changes_s": round(incremental_s),
        "export_after_10_changes_written": incremental.written,
        "export_after_10_changes_paths": incremental.written_paths,
        "import_same_brain_s": round(import_same_s),
        "import_same_brain_unchanged": same.summary.unchanged,
        "import_fresh_brain_s": round(import_fresh_s),
        "import_fresh_brain_added": restored.summary.added,
        "import_fresh_brain_errors": restored.summary.errors,
        "wiki_mb": round(wiki_bytes as f64 / 1e6),
        "peak_rss_mb": round(peak_rss_kib() as f64 / 1024.0),
        "targets": {"export_full_s": 30, "export_after_10_changes_s": 1, "import_s": 60},
    });
    println!("{}", serde_json::to_string_pretty(&result)?);
    if let Some(out) = out {
        std::fs::create_dir_all(&out)?;
        let date = result["date"].as_str().unwrap_or("undated").to_string();
        let json_path = out.join(format!("wiki-{date}.json"));
        std::fs::write(&json_path, serde_json::to_string_pretty(&result)? + "\n")?;
        let mut md = std::fs::File::create(out.join(format!("wiki-{date}.md")))?;
        writeln!(md, "# Wiki benchmark, {date}\n")?;
        writeln!(
            md,
            "`cargo run --release -p cairn-bench-wiki -- --records {records} --out bench/results` on {} core(s); one process; fixed seed and clock.\n",
            result["machine"]["cores"]
        )?;
        writeln!(md, "| step | time | target | detail |\n|---|---|---|---|")?;
        writeln!(
            md,
            "| seed brain (JSONL import of {records}) | {seed_s:.2} s | — | |"
        )?;
        writeln!(
            md,
            "| full export | {export_s:.2} s | ≤ 30 s | {} files, {:.0} MB |",
            full.written,
            wiki_bytes as f64 / 1e6
        )?;
        writeln!(
            md,
            "| re-export, unchanged | {unchanged_s:.2} s | — | {} written |",
            again.written
        )?;
        writeln!(
            md,
            "| re-export after 10 changes | {incremental_s:.2} s | ≤ 1 s | {} written |",
            incremental.written
        )?;
        writeln!(
            md,
            "| import into the same brain | {import_same_s:.2} s | ≤ 60 s | {} unchanged |",
            same.summary.unchanged
        )?;
        writeln!(
            md,
            "| import into a fresh brain | {import_fresh_s:.2} s | ≤ 60 s | {} added, {} errors |",
            restored.summary.added, restored.summary.errors
        )?;
        writeln!(md, "\nPeak RSS {:.0} MB.", peak_rss_kib() as f64 / 1024.0)?;
        eprintln!("wrote {}", json_path.display());
    }
    Ok(())
}

fn walk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
