//! `cairn-bench wiki`: the numbers of the Markdown wiki (issue 7).
//!
//! Builds a seeded brain of `--records` records (default 100,000; fixed `now`, fixed word
//! lists), then times, in one process:
//!
//! 1. a full `export wiki` into an empty directory (target ≤ 30 s for 100k),
//! 2. a re-export of the unchanged brain (must write nothing),
//! 3. a re-export after 10 records changed (target ≤ 1 s),
//! 4. an import of the exported wiki into the same brain (every page unchanged),
//! 5. an import of the exported wiki into a fresh brain (every page restored; target ≤ 60 s),
//!
//! and writes `bench/results/wiki-<stamp>.json` and `.md`.

use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::round3;
use cairn_bench::work::WorkDir;
use cairn_engine::wiki::{WikiExportOptions, WikiImportOptions};
use cairn_engine::{Context, Engine, UpdateRequest};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::json;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

const NOW: &str = "2026-11-30T12:00:00Z";
const SEED: u64 = 7;

#[derive(Debug, Args)]
pub struct WikiArgs {
    /// Records in the brain.
    #[arg(long, default_value_t = 100_000)]
    records: usize,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = SEED)]
    seed: u64,
    /// Where the brains and the wiki are written (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the brains and the wiki instead of deleting them.
    #[arg(long)]
    keep: bool,
}

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

fn word(rng: &mut Rng) -> &'static str {
    WORDS[rng.below(WORDS.len())]
}

fn now() -> DateTime<Utc> {
    NOW.parse().expect("a fixed time")
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

fn seed(engine: &mut Engine, records: usize, rng: &mut Rng) -> Result<()> {
    let mut lines = String::with_capacity(records * 400);
    for index in 0..records {
        let title: Vec<&str> = (0..4).map(|_| word(rng)).collect();
        let body: Vec<&str> = (0..40).map(|_| word(rng)).collect();
        let tags: Vec<&str> = (0..2).map(|_| word(rng)).collect();
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

fn timed<T>(run: &mut Run, what: &str, work: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    run.phase(what);
    let start = Instant::now();
    let value = work().with_context(|| what.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    run.say(&format!("{what}: {seconds:.3} s"));
    Ok((value, seconds))
}

pub fn run(args: &WikiArgs) -> Result<()> {
    if args.records == 0 {
        bail!("--records must be at least 1");
    }
    let records = args.records;
    let mut run = Run::start("wiki");
    let work_dir = WorkDir::new("wiki", args.work_dir.as_deref(), args.keep)?;
    let work = work_dir.path().to_path_buf();
    let db = work.join("brain.db");
    let wiki = work.join("wiki");
    let mut rng = Rng::new(args.seed);
    let mut engine = open(&db, &work)?;
    let (_, seed_s) = timed(&mut run, "seed (JSONL import)", || {
        seed(&mut engine, records, &mut rng)
    })?;

    let options = WikiExportOptions::default();
    let (full, export_s) = timed(&mut run, "export wiki, full", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    let (again, unchanged_s) = timed(&mut run, "export wiki, unchanged", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    if again.written != 0 {
        bail!("an unchanged re-export wrote {} files", again.written);
    }
    for _ in 0..10 {
        let id = 1 + rng.below(records) as i64;
        engine.update(
            id,
            &UpdateRequest {
                body: Some(format!(
                    "Changed for the benchmark: {} {}.",
                    word(&mut rng),
                    word(&mut rng)
                )),
                ..UpdateRequest::default()
            },
        )?;
    }
    let (incremental, incremental_s) = timed(&mut run, "export wiki, 10 changed", || {
        Ok(engine.export_wiki(&wiki, &options)?)
    })?;
    let (same, import_same_s) = timed(&mut run, "import wiki, same brain", || {
        Ok(engine.import_wiki(&wiki, &WikiImportOptions::default())?)
    })?;
    drop(engine);
    let fresh_db = work.join("fresh.db");
    let mut fresh = open(&fresh_db, &work)?;
    let (restored, import_fresh_s) = timed(&mut run, "import wiki, fresh brain", || {
        Ok(fresh.import_wiki(&wiki, &WikiImportOptions::default())?)
    })?;
    drop(fresh);
    let wiki_bytes: u64 = walk_bytes(&wiki);
    let peak_rss = machine::peak_rss_mb();
    let parameters = json!({"records": records, "seed": args.seed, "now": NOW});
    let results = json!({
        "seed_import_s": round3(seed_s),
        "export_full_s": round3(export_s),
        "export_full_files": full.written,
        "export_unchanged_s": round3(unchanged_s),
        "export_unchanged_written": again.written,
        "export_after_10_changes_s": round3(incremental_s),
        "export_after_10_changes_written": incremental.written,
        "export_after_10_changes_paths": incremental.written_paths,
        "import_same_brain_s": round3(import_same_s),
        "import_same_brain_unchanged": same.summary.unchanged,
        "import_fresh_brain_s": round3(import_fresh_s),
        "import_fresh_brain_added": restored.summary.added,
        "import_fresh_brain_errors": restored.summary.errors,
        "wiki_mb": round3(wiki_bytes as f64 / 1e6),
        "peak_rss_mb": peak_rss,
        "targets": {"export_full_s": 30, "export_after_10_changes_s": 1, "import_s": 60},
    });
    let mut md = String::new();
    let _ = writeln!(md, "One process; seed {}, fixed clock.\n", args.seed);
    let _ = writeln!(md, "| step | time | target | detail |\n|---|---|---|---|");
    let _ = writeln!(
        md,
        "| seed brain (JSONL import of {records}) | {seed_s:.2} s | — | |"
    );
    let _ = writeln!(
        md,
        "| full export | {export_s:.2} s | ≤ 30 s | {} files, {:.0} MB |",
        full.written,
        wiki_bytes as f64 / 1e6
    );
    let _ = writeln!(
        md,
        "| re-export, unchanged | {unchanged_s:.2} s | — | {} written |",
        again.written
    );
    let _ = writeln!(
        md,
        "| re-export after 10 changes | {incremental_s:.2} s | ≤ 1 s | {} written |",
        incremental.written
    );
    let _ = writeln!(
        md,
        "| import into the same brain | {import_same_s:.2} s | ≤ 60 s | {} unchanged |",
        same.summary.unchanged
    );
    let _ = writeln!(
        md,
        "| import into a fresh brain | {import_fresh_s:.2} s | ≤ 60 s | {} added, {} errors |",
        restored.summary.added, restored.summary.errors
    );
    let _ = writeln!(
        md,
        "\nPeak RSS {} MB.",
        peak_rss.map_or("?".to_string(), |mb| format!("{mb:.0}"))
    );
    run.finish(&args.out, parameters, results, &md)?;
    work_dir.finish();
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
