//! `cairn-bench lifecycle`: the lifecycle's numbers (issue 6), seeded and with a fixed `now`.
//!
//! 1. `dream` on a 100,000-memory brain without an LLM (target ≤ 60 s), with entity extraction
//!    on so clustering has a real graph, and ~10 % near-duplicate variants and a year of ages so
//!    every phase has work.
//! 2. Near-duplicate candidates by LSH banding against the exact all-pairs answer on a seeded
//!    corpus with planted pairs across similarities (target recall ≥ 0.95), and the time of each.
//! 3. A simulated month: 30 days of captures with repeats (exact and near), a daily `dream` +
//!    accept; then the file size against the live text (target ≤ 3×) and the near-duplicate
//!    pairs that survive among active records (target 0). Run twice: with captures shaped like
//!    the turns the Stop hook stores (`User: …` of 5–80 words and `Assistant: …` of 20–500,
//!    under the capture's 2,000 / 3,000-character limits: ~1.7 KB on average), which is the
//!    target's measure, and with 40-word captures (~230 bytes), where the fixed cost of a
//!    record (metadata, its event, index entries) dominates.
//!
//! Usage: `cargo run --release -p cairn-bench -- lifecycle [--memories N] [--out DIR] [--dir DIR]
//! [--only dream|lsh|month] [--keep]`. Results go to `bench/results/lifecycle-<stamp>.json` and
//! `.md` (with `--only`, to `lifecycle-<part>-<stamp>.json` and `.md`); `--keep` leaves the
//! brains in the work directory for inspection (`sqlite3 DIR/month.db`).

use anyhow::{Result, bail};
use cairn_bench::machine;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::percentile;
use cairn_bench::work::WorkDir;
use cairn_core::lifecycle::{similar_pairs, similar_pairs_exhaustive};
use cairn_core::minhash::{Signature, signature};
use cairn_core::record::{MemoryType, Status};
use cairn_engine::lifecycle::DreamOptions;
use cairn_engine::{Context, Engine, ListRequest, RememberRequest};
use chrono::{DateTime, TimeZone, Utc};
use clap::{Args, ValueEnum};
use serde_json::json;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Part {
    Dream,
    Lsh,
    Month,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Dream => "dream",
            Part::Lsh => "lsh",
            Part::Month => "month",
        }
    }
}

#[derive(Debug, Args)]
pub struct LifecycleArgs {
    /// Memories in the dream brain.
    #[arg(long, default_value_t = 100_000)]
    memories: usize,
    /// Work directory for the brains (default: a new temporary directory, deleted at the end
    /// unless --keep).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Run one part only; the others are reported as not run.
    #[arg(long, value_enum)]
    only: Option<Part>,
    /// Keep the brains (the work directory) for inspection.
    #[arg(long)]
    keep: bool,
}

/// Seeds of the three parts (each part is reproducible alone with `--only`).
const DREAM_SEED: u64 = 0x6c69_6665;
const LSH_SEED: u64 = 0x6c73_6821;
const MONTH_SEED: u64 = 0x6d6f_6e74;

/// A vocabulary of made-up words: texts share few 3-shingles unless they are related.
fn vocabulary() -> Vec<String> {
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su", "do", "fa",
    ];
    let mut words = Vec::new();
    for a in syllables {
        for b in syllables {
            for c in ["", "n", "r", "s"] {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

fn text(rng: &mut Rng, words: &[String], length: usize) -> Vec<String> {
    (0..length)
        .map(|_| words[rng.below(words.len())].clone())
        .collect()
}

/// A copy of `base` with `edits` words replaced.
fn variant(rng: &mut Rng, words: &[String], base: &[String], edits: usize) -> Vec<String> {
    let mut copy = base.to_vec();
    for _ in 0..edits {
        let at = rng.below(copy.len());
        copy[at] = words[rng.below(words.len())].clone();
    }
    copy
}

fn engine_at(path: &Path, now: DateTime<Utc>) -> Engine {
    let context = Context {
        project: "bench".into(),
        cwd: std::env::temp_dir(),
        actor: "bench".into(),
        read_only: false,
        now: Some(now),
    };
    Engine::open(path, context).expect("brain opens")
}

fn file_bytes(path: &Path) -> u64 {
    let mut total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        total += std::fs::metadata(PathBuf::from(name))
            .map(|m| m.len())
            .unwrap_or(0);
    }
    total
}

fn bench_dream(args: &LifecycleArgs, dir: &Path, words: &[String]) -> serde_json::Value {
    let path = dir.join("dream-100k.db");
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let mut engine = engine_at(&path, now);
    let mut rng = Rng::new(DREAM_SEED);
    let mut jsonl = Vec::with_capacity(args.memories * 250);
    let mut bases: Vec<Vec<String>> = Vec::new();
    let types = [
        "note",
        "fact",
        "episode",
        "gotcha",
        "procedure",
        "decision",
        "state",
    ];
    let entities = [
        "src/deploy.rs",
        "src/queue.rs",
        "#billing",
        "@ops",
        "api.internal",
        "src/cache.rs",
    ];
    for n in 0..args.memories {
        let body_words = if n % 10 == 9 && !bases.is_empty() {
            let base = bases[rng.below(bases.len())].clone();
            let edits = 1 + rng.below(2);
            variant(&mut rng, words, &base, edits)
        } else {
            let length = 30 + rng.below(20);
            let fresh = text(&mut rng, words, length);
            if bases.len() < 5_000 {
                bases.push(fresh.clone());
            }
            fresh
        };
        let mut body = body_words.join(" ");
        if n % 3 == 0 {
            body.push_str(&format!(" see {}", entities[rng.below(entities.len())]));
        }
        let created = now - chrono::Duration::days(rng.below(365) as i64);
        let line = json!({
            "type": types[rng.below(types.len())],
            "project": "bench",
            "body": body,
            "created_at": cairn_core::time::format_ts(created),
        });
        writeln!(jsonl, "{line}").unwrap();
    }
    let started = Instant::now();
    let report = engine
        .import_jsonl(&mut std::io::Cursor::new(jsonl), &Default::default())
        .expect("import runs");
    let import_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "seeded {} memories in {import_seconds:.1} s",
        report.summary.added
    );
    let started = Instant::now();
    let outcome = engine.dream(&DreamOptions::default()).expect("dream runs");
    let dream_seconds = started.elapsed().as_secs_f64();
    eprintln!("dream in {dream_seconds:.1} s: {}", outcome.message);
    let report = &outcome.dream.report;
    json!({
        "memories": report["records"],
        "import_seconds": (import_seconds * 10.0).round() / 10.0,
        "dream_seconds": (dream_seconds * 100.0).round() / 100.0,
        "target_seconds": 60,
        "proposals": report["proposals"],
        "near_duplicate_pairs": report["near_duplicates"]["pairs"],
        "forget": report["forget"],
        "clusters_reported": report["clusters"].as_array().map_or(0, Vec::len),
        "brain_file_mb": (file_bytes(&path) as f64 / 1_048_576.0).round(),
    })
}

fn bench_lsh(words: &[String]) -> serde_json::Value {
    let mut rng = Rng::new(LSH_SEED);
    let mut results = Vec::new();
    for size in [5_000usize, 10_000] {
        let mut items: Vec<(i64, u8, Signature)> = Vec::with_capacity(size);
        let mut id = 0i64;
        while items.len() < size {
            let base = text(&mut rng, words, 40);
            id += 1;
            items.push((id, 0, signature(&base.join(" "))));
            // A third of the texts get a twin at a planted distance (0..6 words changed:
            // similarity from 1.0 down to about 0.5).
            if rng.below(3) == 0 && items.len() < size {
                let edits = rng.below(7);
                id += 1;
                items.push((
                    id,
                    0,
                    signature(&variant(&mut rng, words, &base, edits).join(" ")),
                ));
            }
        }
        let started = Instant::now();
        let fast = similar_pairs(&items, 0.7);
        let fast_ms = started.elapsed().as_secs_f64() * 1000.0;
        let started = Instant::now();
        let exact = similar_pairs_exhaustive(&items, 0.7);
        let exact_ms = started.elapsed().as_secs_f64() * 1000.0;
        let found: HashSet<(i64, i64)> = fast.iter().map(|p| (p.a, p.b)).collect();
        let hits = exact.iter().filter(|p| found.contains(&(p.a, p.b))).count();
        let recall = if exact.is_empty() {
            1.0
        } else {
            hits as f64 / exact.len() as f64
        };
        eprintln!(
            "LSH at {size}: recall {recall:.4} ({hits}/{}), {fast_ms:.0} ms vs all-pairs {exact_ms:.0} ms",
            exact.len()
        );
        results.push(json!({
            "signatures": size,
            "exact_pairs": exact.len(),
            "lsh_pairs": fast.len(),
            "recall": (recall * 10_000.0).round() / 10_000.0,
            "lsh_ms": fast_ms.round(),
            "all_pairs_ms": exact_ms.round(),
        }));
    }
    let bands = cairn_core::lifecycle::exact_bands(0.7);
    json!({"threshold": 0.7, "bands": bands, "rows": cairn_core::minhash::NUM_HASHES / bands, "target_recall": 0.95, "runs": results})
}

/// What one simulated capture looks like.
#[derive(Clone, Copy)]
enum Shape {
    /// A turn as the Stop hook stores it: `User: …\nAssistant: …`.
    Turns,
    /// 40 words.
    Short,
}

impl Shape {
    fn fresh(self, rng: &mut Rng, words: &[String]) -> Vec<String> {
        match self {
            Shape::Short => text(rng, words, 40),
            Shape::Turns => {
                let user = 5 + rng.below(76);
                let assistant = 20 + rng.below(481);
                let mut turn = vec!["User:".to_string()];
                turn.extend(text(rng, words, user));
                turn.push("\nAssistant:".to_string());
                turn.extend(text(rng, words, assistant));
                turn
            }
        }
    }
}

fn bench_month(dir: &Path, words: &[String], shape: Shape) -> serde_json::Value {
    let path = dir.join(match shape {
        Shape::Turns => "month.db",
        Shape::Short => "month-short.db",
    });
    let start = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
    let mut rng = Rng::new(MONTH_SEED);
    let mut seen: Vec<Vec<String>> = Vec::new();
    let (mut captured, mut exact_repeats, mut near_repeats) = (0usize, 0usize, 0usize);
    let mut dream_ms = Vec::new();
    let mut applied = 0usize;
    for day in 0..30i64 {
        let morning = start + chrono::Duration::days(day);
        let mut engine = engine_at(&path, morning);
        for turn in 0..200 {
            let roll = rng.below(10);
            let body_words = if roll < 3 && !seen.is_empty() {
                exact_repeats += 1;
                seen[rng.below(seen.len())].clone()
            } else if roll < 6 && !seen.is_empty() {
                near_repeats += 1;
                let base = seen[rng.below(seen.len())].clone();
                // One or two words changed in every 40 (similarity ~0.7–0.85).
                let edits = (1 + rng.below(2)) * base.len().div_ceil(40);
                variant(&mut rng, words, &base, edits)
            } else {
                let fresh = shape.fresh(&mut rng, words);
                seen.push(fresh.clone());
                fresh
            };
            let mut request = RememberRequest::new(MemoryType::Episode, body_words.join(" "));
            request.capture = true;
            request.at = Some(cairn_core::time::format_ts(
                morning + chrono::Duration::minutes(turn),
            ));
            engine.remember(&request).expect("capture stored");
            captured += 1;
        }
        drop(engine);
        let evening = morning + chrono::Duration::hours(10);
        let mut engine = engine_at(&path, evening);
        let started = Instant::now();
        let outcome = engine
            .dream(&DreamOptions {
                accept: true,
                ..DreamOptions::default()
            })
            .expect("dream runs");
        dream_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        applied += outcome.accepted.map_or(0, |a| a.applied.len());
    }
    let now = start + chrono::Duration::days(30);
    let mut engine = engine_at(&path, now);
    let active = engine
        .list(&ListRequest {
            status: Some(Status::Active),
            limit: 0,
            all_projects: true,
            ..ListRequest::default()
        })
        .expect("list");
    let live_text: usize = active.iter().map(|m| m.body.len()).sum();
    // Every record the design keeps (active, archived by merges, superseded): the second
    // denominator, so a reader sees what the file holds against all the text it must retain.
    let retained = engine
        .list(&ListRequest {
            limit: 0,
            all_projects: true,
            ..ListRequest::default()
        })
        .expect("list all");
    let retained_text: usize = retained.iter().map(|m| m.body.len()).sum();
    let items: Vec<(i64, u8, Signature)> = active
        .iter()
        .map(|m| (m.id, 0, signature(&m.body)))
        .collect();
    let surviving = similar_pairs_exhaustive(&items, 0.7).len();
    let before_repair = file_bytes(&path);
    let stats = engine.stats().expect("stats");
    let doctor = engine.doctor(true).expect("doctor runs");
    drop(engine);
    let after_repair = file_bytes(&path);
    let bytes_by_object = bytes_by_object(&path);
    let vacuumed = vacuumed_bytes(&path);
    let ratio = after_repair as f64 / live_text.max(1) as f64;
    let retained_ratio = after_repair as f64 / retained_text.max(1) as f64;
    eprintln!(
        "month: {captured} captures, {} active of {} records, live text {} KB, retained text {} KB, file {} KB ({ratio:.2}× live, {retained_ratio:.2}× retained), {surviving} duplicate pairs left",
        active.len(),
        retained.len(),
        live_text / 1024,
        retained_text / 1024,
        after_repair / 1024
    );
    dream_ms.sort_by(f64::total_cmp);
    json!({
        "days": 30,
        "captures": captured,
        "exact_repeats": exact_repeats,
        "near_repeats": near_repeats,
        "records": stats.records,
        "active": active.len(),
        "proposals_applied": applied,
        "live_text_bytes": live_text,
        "file_bytes_before_repair": before_repair,
        "file_bytes": after_repair,
        "file_to_live_text": (ratio * 100.0).round() / 100.0,
        "retained_records": retained.len(),
        "retained_text_bytes": retained_text,
        "file_to_retained_text": (retained_ratio * 100.0).round() / 100.0,
        "target_ratio": 3.0,
        "surviving_duplicate_pairs": surviving,
        "daily_dream_ms_p50": percentile(&dream_ms, 50.0).round(),
        "daily_dream_ms_max": dream_ms.last().copied().unwrap_or(0.0).round(),
        "doctor_repaired": doctor.repaired,
        "bytes_by_object": bytes_by_object,
        // The same brain rewritten by `VACUUM INTO` (space freed inside pages — a signature
        // dropped from an archived row — only leaves the file with a VACUUM, which `doctor
        // --repair` runs when over 20 % of the pages are free). Not the target's measure.
        "file_bytes_vacuumed": vacuumed,
        "file_vacuumed_to_live_text": vacuumed.map(|v| (v as f64 / live_text.max(1) as f64 * 100.0).round() / 100.0),
    })
}

/// Bytes per table and index (SQLite's `dbstat`), through the `sqlite3` CLI when it is
/// installed (the bundled SQLite is built without the `dbstat` table); empty otherwise.
fn bytes_by_object(path: &Path) -> serde_json::Value {
    let output = std::process::Command::new("sqlite3")
        .arg("-readonly")
        .arg(path)
        .arg("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC, 1")
        .output();
    let mut objects = Vec::new();
    if let Ok(output) = output
        && output.status.success()
    {
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if let Some((name, bytes)) = line.rsplit_once('|')
                && let Ok(bytes) = bytes.parse::<u64>()
            {
                objects.push(json!({"name": name, "bytes": bytes}));
            }
        }
    }
    serde_json::Value::Array(objects)
}

/// The size of a `VACUUM INTO` copy of the brain, through the `sqlite3` CLI when installed.
fn vacuumed_bytes(path: &Path) -> Option<u64> {
    let copy = path.with_extension("vacuumed.db");
    let _ = std::fs::remove_file(&copy);
    let status = std::process::Command::new("sqlite3")
        .arg(path)
        .arg(format!("VACUUM INTO '{}'", copy.display()))
        .status()
        .ok()?;
    let bytes = status.success().then(|| file_bytes(&copy));
    let _ = std::fs::remove_file(&copy);
    bytes
}

pub fn run(args: &LifecycleArgs) -> Result<()> {
    if args.memories < 10 {
        bail!("--memories must be at least 10 (every tenth memory is a near-duplicate variant)");
    }
    let name = match args.only {
        Some(part) => format!("lifecycle-{}", part.name()),
        None => "lifecycle".to_string(),
    };
    let mut run = Run::start(&name);
    let work_dir = WorkDir::new("lifecycle", args.dir.as_deref(), args.keep)?;
    let dir = work_dir.path().to_path_buf();
    let words = vocabulary();
    let runs = |part: Part| args.only.is_none_or(|only| only == part);
    let not_run = json!("not run (--only)");
    let lsh = if runs(Part::Lsh) {
        run.phase("lsh");
        bench_lsh(&words)
    } else {
        not_run.clone()
    };
    let (month, month_short) = if runs(Part::Month) {
        run.phase("month, turn-sized captures");
        let month = bench_month(&dir, &words, Shape::Turns);
        run.phase("month, 40-word captures");
        (month, bench_month(&dir, &words, Shape::Short))
    } else {
        (not_run.clone(), not_run.clone())
    };
    let dream = if runs(Part::Dream) {
        run.phase("dream");
        bench_dream(args, &dir, &words)
    } else {
        not_run.clone()
    };
    let parameters = json!({
        "memories": args.memories,
        "only": args.only.map(Part::name),
        "seeds": {"dream": format!("{DREAM_SEED:#x}"), "lsh": format!("{LSH_SEED:#x}"), "month": format!("{MONTH_SEED:#x}")},
    });
    let results = json!({
        "dream": dream,
        "lsh": lsh,
        "month": month,
        "month_short_captures": month_short,
        "peak_rss_mb": machine::peak_rss_mb(),
    });
    let mut md =
        String::from("Seeded, fixed now.\n\n| measure | result | target |\n|---|---|---|\n");
    if runs(Part::Dream) {
        md.push_str(&format!(
            "| `dream` on {} memories, no LLM | {} s | ≤ 60 s |\n",
            dream["memories"], dream["dream_seconds"]
        ));
    }
    if runs(Part::Lsh) {
        for run in lsh["runs"].as_array().cloned().unwrap_or_default() {
            md.push_str(&format!(
                "| LSH near-duplicate recall vs exact all-pairs, {} signatures | {} ({} LSH pairs, {} exact; {} ms vs {} ms) | ≥ 0.95 |\n",
                run["signatures"], run["recall"], run["lsh_pairs"], run["exact_pairs"], run["lsh_ms"], run["all_pairs_ms"]
            ));
        }
    }
    if runs(Part::Month) {
        for (label, month, target) in [
            ("turn-sized captures (~1.7 KB)", &month, "≤ 3×"),
            ("40-word captures (~230 B)", &month_short, "—"),
        ] {
            md.push_str(&format!(
                "| month of {label} ({} captures, {} exact and {} near repeats), daily dream + accept: file / live text (active records' bodies, {} bytes) | {}× | {target} |\n\
                 | the same file / bodies of all retained records ({} records: active, archived, superseded; {} bytes) | {}× | — |\n\
                 | near-duplicate pairs (≥ 0.7) surviving among active records | {} | 0 |\n\
                 | (for reference) the same brain after a full `VACUUM`: file / live text | {}× | — |\n",
                month["captures"], month["exact_repeats"], month["near_repeats"], month["live_text_bytes"],
                month["file_to_live_text"], month["retained_records"], month["retained_text_bytes"],
                month["file_to_retained_text"], month["surviving_duplicate_pairs"], month["file_vacuumed_to_live_text"]
            ));
        }
    }
    md.push('\n');
    if runs(Part::Dream) {
        md.push_str(&format!(
            "Dream proposals at 100k: {}. ",
            dream["proposals"]
        ));
    }
    md.push_str(&format!("Peak RSS {} MB.\n", results["peak_rss_mb"]));
    for (label, month) in [("turn-sized", &month), ("40-word", &month_short)] {
        let Some(objects) = month["bytes_by_object"].as_array() else {
            continue;
        };
        if objects.is_empty() {
            continue;
        }
        md.push_str(&format!(
            "\nWhere the {label} month brain's {} bytes go (`dbstat`, after `doctor --repair`; objects of 4 KB or less left out):\n\n| table or index | bytes |\n|---|---|\n",
            month["file_bytes"]
        ));
        for object in objects.iter().filter(|o| o["bytes"].as_u64() > Some(4096)) {
            md.push_str(&format!(
                "| {} | {} |\n",
                object["name"].as_str().unwrap_or("?"),
                object["bytes"]
            ));
        }
    }
    run.finish(&args.out, parameters, results, &md)?;
    work_dir.finish();
    Ok(())
}
