//! `cairn-bench graph`: the knowledge-graph benchmark of issue 5.
//!
//! Seeded data, a fixed engine clock, release build. It builds a brain of `--memories` notes
//! (default 100,000, spread over 10 projects of 10,000) whose text mentions entities drawn
//! from skewed pools (file paths, identifiers, URLs, #tags, @names, capitalized names), writes
//! them through `import` with entity extraction on, adds explicit edges (requires / affects /
//! part_of, a tenth of them later invalidated) until the brain holds `--edges` validity
//! intervals (default 500,000), then measures:
//!
//! - write with extraction: import throughput (batches of 1,000 per transaction), and the
//!   one-transaction-per-record `remember` path, each with extraction on and off;
//! - `neighbors` depth 3 (in-process engine call) p50 / p95 over 200 origins;
//! - `graph --as-of` (the fold evaluated at a time) p50 / p95 over 25 times, plus the pure
//!   in-memory fold of the whole log and `doctor`'s full check;
//! - clustering one project of 10,000 records;
//! - peak RSS.
//!
//! Results go to `bench/results/graph-<stamp>.json` and `.md`.

use anyhow::{Result, bail};
use cairn_bench::machine;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{ms_json, percentile};
use cairn_bench::work::WorkDir;
use cairn_core::record::MemoryType;
use cairn_engine::graph::{
    ClustersRequest, Direction, GraphRequest, NeighborsRequest, RelateRequest,
};
use cairn_engine::{Context, Engine, RememberRequest};
use chrono::{TimeZone, Utc};
use clap::Args;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The seed of the big brain and its edges; the write-throughput brains and the origins use
/// seeds derived from it.
const SEED: u64 = 0x6361_6972_6e5f_6772; // "cairn_gr"

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Memories in the big brain (10 projects).
    #[arg(long, default_value_t = 100_000)]
    memories: usize,
    /// Edge validity intervals to reach (extracted plus explicit).
    #[arg(long, default_value_t = 500_000)]
    edges: usize,
    /// Work directory for the brains (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = SEED)]
    seed: u64,
    /// Keep the brains after the run (to look at them with the CLI).
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The brain.
    db: PathBuf,
    /// The project whose view is read.
    project: String,
    /// The depth of `neighbors`.
    depth: u32,
    /// Origins (`#id`, entity names).
    #[arg(required = true)]
    origins: Vec<String>,
}

const WORDS: &[&str] = &[
    "deploy",
    "cache",
    "retry",
    "timeout",
    "queue",
    "index",
    "schema",
    "token",
    "session",
    "latency",
    "backup",
    "replica",
    "shard",
    "lock",
    "build",
    "release",
    "config",
    "secret",
    "metric",
    "alert",
    "budget",
    "review",
    "rollback",
    "migration",
    "worker",
    "job",
    "batch",
    "stream",
    "parser",
    "client",
    "server",
    "bucket",
    "region",
    "quota",
    "limit",
    "pool",
    "pipeline",
    "flag",
    "canary",
    "gateway",
    "proxy",
    "certificate",
    "dns",
    "webhook",
    "payload",
    "consumer",
];
const CAPS: &[&str] = &[
    "Aurora", "Beacon", "Cobalt", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Indigo",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Orchid", "Pioneer", "Quartz", "Raven",
    "Summit", "Tundra", "Umber", "Vertex", "Willow", "Zephyr",
];

struct Pools {
    paths: Vec<String>,
    idents: Vec<String>,
    urls: Vec<String>,
    tags: Vec<String>,
    handles: Vec<String>,
    names: Vec<String>,
}

fn pools() -> Pools {
    let camel = |i: usize| {
        let a = CAPS[i % CAPS.len()];
        let b = WORDS[(i / CAPS.len()) % WORDS.len()];
        let mut b_cap = b.to_string();
        b_cap[..1].make_ascii_uppercase();
        format!("{a}{b_cap}{}", i / (CAPS.len() * WORDS.len()))
    };
    Pools {
        paths: (0..4000)
            .map(|i| {
                format!(
                    "src/{}/{}_{i}.rs",
                    WORDS[i % WORDS.len()],
                    WORDS[(i / 7) % WORDS.len()]
                )
            })
            .collect(),
        idents: (0..4000)
            .map(|i| {
                if i % 2 == 0 {
                    camel(i)
                } else {
                    format!(
                        "{}_{}_{i}",
                        WORDS[i % WORDS.len()],
                        WORDS[(i / 3) % WORDS.len()]
                    )
                }
            })
            .collect(),
        urls: (0..1000)
            .map(|i| format!("https://docs.example.com/{}/{i}", WORDS[i % WORDS.len()]))
            .collect(),
        tags: (0..400)
            .map(|i| format!("#{}{}", WORDS[i % WORDS.len()], i / WORDS.len()))
            .collect(),
        handles: (0..200).map(|i| format!("@dev{i}")).collect(),
        names: (0..CAPS.len() * CAPS.len())
            .map(|i| {
                format!(
                    "{} {}",
                    CAPS[i % CAPS.len()],
                    CAPS[(i / CAPS.len() + 1 + i % 5) % CAPS.len()]
                )
            })
            .collect(),
    }
}

fn note(rng: &mut Rng, pools: &Pools, n: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    let words = 12 + rng.below(20);
    for _ in 0..words {
        parts.push(WORDS[rng.below(WORDS.len())].to_string());
    }
    let mentions = 2 + rng.below(5);
    for _ in 0..mentions {
        let entity = match rng.below(6) {
            0 => pools.paths[rng.skewed(pools.paths.len(), 3)].clone(),
            1 => pools.idents[rng.skewed(pools.idents.len(), 3)].clone(),
            2 => pools.urls[rng.skewed(pools.urls.len(), 3)].clone(),
            3 => pools.tags[rng.skewed(pools.tags.len(), 3)].clone(),
            4 => pools.handles[rng.skewed(pools.handles.len(), 3)].clone(),
            _ => pools.names[rng.skewed(pools.names.len(), 3)].clone(),
        };
        let at = rng.below(parts.len() + 1);
        parts.insert(at, entity);
    }
    format!("note {n}: {}.", parts.join(" "))
}

fn engine_at(path: &Path, project: &str) -> Engine {
    let context = Context {
        project: project.to_string(),
        cwd: std::env::temp_dir(),
        actor: "bench".into(),
        read_only: false,
        now: Some(Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()),
    };
    Engine::open(path, context).expect("brain opens")
}

/// Import `count` notes (starting at note number `first`) and return memories per second.
fn import_notes(
    engine: &mut Engine,
    rng: &mut Rng,
    pools: &Pools,
    first: usize,
    count: usize,
) -> f64 {
    let mut jsonl = Vec::with_capacity(count * 300);
    for n in first..first + count {
        let days_ago = rng.below(365);
        let created = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
            - chrono::Duration::days(days_ago as i64);
        let line = json!({
            "type": "note",
            "project": format!("proj-{}", n % 10),
            "body": note(rng, pools, n),
            "created_at": cairn_core::time::format_ts(created),
        });
        writeln!(jsonl, "{line}").unwrap();
    }
    let started = Instant::now();
    let report = engine
        .import_jsonl(&mut std::io::Cursor::new(jsonl), &Default::default())
        .expect("import runs");
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(report.summary.error, 0, "import errors");
    report.summary.added as f64 / seconds
}

fn remember_notes(
    engine: &mut Engine,
    rng: &mut Rng,
    pools: &Pools,
    first: usize,
    count: usize,
) -> f64 {
    let started = Instant::now();
    for n in first..first + count {
        let request = RememberRequest::new(MemoryType::Note, note(rng, pools, n));
        engine.remember(&request).expect("remember runs");
    }
    count as f64 / started.elapsed().as_secs_f64()
}

/// Notes written through `remember` (one transaction each) per extraction setting.
const REMEMBERED: usize = 500;

/// `cairn-bench graph-probe DB PROJECT DEPTH ORIGIN…`: times `neighbors` in one process on an
/// existing brain, each origin twice (cold, then warm), both directions.
pub fn probe(args: &ProbeArgs) -> Result<()> {
    if !args.db.is_file() {
        bail!("{} is not a brain file", args.db.display());
    }
    let engine = engine_at(&args.db, &args.project);
    for origin in &args.origins {
        for direction in [Direction::Both, Direction::In] {
            for round in ["cold", "warm"] {
                let mut request = NeighborsRequest::new(origin.clone());
                request.depth = args.depth;
                request.direction = direction;
                let started = Instant::now();
                let answer = engine.neighbors(&request);
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                let reached = answer.map(|a| a.reached).unwrap_or(0);
                println!("{origin:<28} {direction:?} {round}: {ms:7.2} ms, {reached} reached");
            }
        }
    }
    Ok(())
}

pub fn run(args: &GraphArgs) -> Result<()> {
    if args.memories < 10 || args.edges < 10 {
        bail!("--memories and --edges must be at least 10 (the brain has 10 projects)");
    }
    let mut run = Run::start("graph");
    let work_dir = WorkDir::new("graph", args.dir.as_deref(), args.keep)?;
    let dir = work_dir.path().to_path_buf();
    let pools = pools();
    let mut rng = Rng::new(args.seed);
    let mut results = serde_json::Map::new();
    let mut lines: Vec<String> = Vec::new();
    let mut say = |line: String| {
        eprintln!("{line}");
        lines.push(line);
    };

    run.phase("write throughput");
    // Write throughput, extraction on vs off, on fresh brains.
    let sample = 10_000.min(args.memories);
    let mut off = engine_at(&dir.join("off.db"), "proj-0");
    off.set_entity_extraction(false);
    let import_off = import_notes(&mut off, &mut Rng::new(args.seed ^ 7), &pools, 0, sample);
    let remember_off = remember_notes(
        &mut off,
        &mut Rng::new(args.seed ^ 8),
        &pools,
        sample,
        REMEMBERED,
    );
    let mut on = engine_at(&dir.join("on.db"), "proj-0");
    let import_on = import_notes(&mut on, &mut Rng::new(args.seed ^ 7), &pools, 0, sample);
    let remember_on = remember_notes(
        &mut on,
        &mut Rng::new(args.seed ^ 8),
        &pools,
        sample,
        REMEMBERED,
    );
    drop((on, off));
    // Extraction alone (the pure function), per note.
    let mut texts_rng = Rng::new(args.seed ^ 7);
    let texts: Vec<String> = (0..sample)
        .map(|n| note(&mut texts_rng, &pools, n))
        .collect();
    let started = Instant::now();
    let mut found = 0usize;
    for text in &texts {
        found += cairn_core::graph::extract::extract(None, text, &[]).len();
    }
    let extract_us = started.elapsed().as_secs_f64() * 1e6 / sample as f64;
    say(format!(
        "extraction alone: {extract_us:.1} µs per note ({:.1} entities per note)",
        found as f64 / sample as f64
    ));
    results.insert(
        "extraction_alone_us_per_note".into(),
        json!((extract_us * 10.0).round() / 10.0),
    );
    say(format!(
        "write ({sample} imported in batches of 1,000, {REMEMBERED} remembered one transaction each, fresh brain):"
    ));
    say(format!(
        "  import   extraction on {import_on:>8.0}/s   off {import_off:>8.0}/s"
    ));
    say(format!(
        "  remember extraction on {remember_on:>8.0}/s   off {remember_off:>8.0}/s"
    ));
    results.insert("write".into(), json!({
        "sample": sample,
        "import_per_s": {"extraction_on": import_on.round(), "extraction_off": import_off.round()},
        "remember_per_s": {"extraction_on": remember_on.round(), "extraction_off": remember_off.round()},
    }));

    run.phase("build the big brain");
    let path = dir.join("brain.db");
    let mut engine = engine_at(&path, "proj-0");
    let started = Instant::now();
    let mut written = 0;
    let mut import_rates = Vec::new();
    while written < args.memories {
        let count = 10_000.min(args.memories - written);
        import_rates.push(import_notes(&mut engine, &mut rng, &pools, written, count));
        written += count;
    }
    let build_seconds = started.elapsed().as_secs_f64();
    let import_full = args.memories as f64 / build_seconds;
    say(format!(
        "built {} memories through import with extraction in {build_seconds:.1} s ({import_full:.0}/s)",
        args.memories
    ));
    // (entities, log entries, intervals, quarantined) over the whole brain, every project.
    let (entities, _, extracted_intervals, _) =
        engine.store().unwrap().reader().graph_counts().unwrap();
    let (entities, extracted_intervals) = (entities as usize, extracted_intervals as usize);

    // Explicit edges up to the target, in batches of 10,000 per transaction, across all
    // projects: relate runs in each project's context.
    // At least a tenth of the target is explicit edges, whatever extraction produced.
    let mut intervals = extracted_intervals.min(args.edges - args.edges / 10);
    let relations = ["requires", "affects", "part_of"];
    let started = Instant::now();
    let mut explicit = 0usize;
    let mut batch_number = 0usize;
    while intervals < args.edges {
        let project = format!("proj-{}", batch_number % 10);
        let mut batch_engine = engine_at(&path, &project);
        let want = 10_000.min(args.edges - intervals);
        let mut requests = Vec::with_capacity(want);
        for _ in 0..want {
            // records of this project have ids ≡ project number (mod 10), 1-based
            let record = |rng: &mut Rng| {
                ((rng.below(args.memories / 10)) * 10 + batch_number % 10 + 1).to_string()
            };
            let entity = |rng: &mut Rng| pools.paths[rng.skewed(pools.paths.len(), 3)].clone();
            let (src, dst) = match rng.below(3) {
                0 => (record(&mut rng), record(&mut rng)),
                1 => (record(&mut rng), entity(&mut rng)),
                _ => (
                    entity(&mut rng),
                    pools.idents[rng.skewed(pools.idents.len(), 3)].clone(),
                ),
            };
            let from_days = 30 + rng.below(330);
            let from = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
                - chrono::Duration::days(from_days as i64);
            let to = (rng.below(10) == 0).then(|| {
                cairn_core::time::format_ts(
                    from + chrono::Duration::days(1 + rng.below(from_days - 1) as i64),
                )
            });
            requests.push(RelateRequest {
                src,
                relation: relations[rng.below(3)].to_string(),
                dst,
                from: Some(cairn_core::time::format_ts(from)),
                to,
                allow_dangling: false,
                confidence: None,
            });
        }
        let answers = batch_engine.relate_many(&requests).expect("relate batch");
        let asserted = answers
            .iter()
            .filter(
                |a| matches!(a, Ok(o) if o.status == cairn_engine::graph::RelateStatus::Asserted),
            )
            .count();
        explicit += asserted;
        intervals += asserted;
        batch_number += 1;
        if asserted == 0 {
            break;
        }
    }
    let relate_rate = explicit as f64 / started.elapsed().as_secs_f64();
    let total = engine
        .graph(&GraphRequest {
            limit: 1,
            ..GraphRequest::default()
        })
        .unwrap();
    say(format!(
        "graph: {} entities; {} intervals from extraction, {explicit} explicit ({relate_rate:.0}/s in batches); {} edges valid now in proj-0's view",
        entities, extracted_intervals, total.edges
    ));
    let file_mb = std::fs::metadata(&path)
        .map(|m| m.len() as f64 / 1e6)
        .unwrap_or(0.0);
    results.insert(
        "brain".into(),
        json!({
            "memories": args.memories,
            "entities": entities,
            "intervals_from_extraction": extracted_intervals,
            "explicit_edges": explicit,
            "intervals_total": engine_at(&path, "proj-0").store().unwrap().reader().graph_counts().unwrap().2,
            "build_import_per_s": import_full.round(),
            "relate_many_per_s": relate_rate.round(),
            "file_mb": (file_mb * 10.0).round() / 10.0,
        }),
    );

    run.phase("neighbors depth 3");
    let engine = engine_at(&path, "proj-0");
    let mut samples = Vec::new();
    let mut reached = Vec::new();
    let mut origin_rng = Rng::new(args.seed ^ 99);
    for i in 0..200 {
        let origin = if i % 2 == 0 {
            format!("#{}", origin_rng.below(args.memories / 10) * 10 + 1)
        } else {
            pools.paths[origin_rng.below(pools.paths.len())].clone()
        };
        let mut request = NeighborsRequest::new(origin);
        request.depth = 3;
        request.direction = if i % 3 == 0 {
            Direction::In
        } else {
            Direction::Both
        };
        let started = Instant::now();
        let answer = engine.neighbors(&request);
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        if let Ok(answer) = answer {
            reached.push(answer.reached as f64);
        }
    }
    let n_p50 = percentile(&samples, 50.0);
    let n_p95 = percentile(&samples, 95.0);
    let reached_p50 = percentile(&reached, 50.0);
    say(format!(
        "neighbors depth 3: p50 {n_p50:.2} ms, p95 {n_p95:.2} ms (median {reached_p50:.0} nodes reached, budget 500)"
    ));
    results.insert(
        "neighbors_depth3_ms".into(),
        json!({"latency": ms_json(&samples), "median_reached": reached_p50}),
    );

    run.phase("graph --as-of");
    let mut samples = Vec::new();
    let mut as_of_rng = Rng::new(args.seed ^ 5);
    for _ in 0..25 {
        let at = Utc.with_ymd_and_hms(2026, 3, 1, 0, 0, 0).unwrap()
            - chrono::Duration::days(as_of_rng.below(400) as i64);
        let started = Instant::now();
        engine
            .graph(&GraphRequest {
                as_of: Some(cairn_core::time::format_ts(at)),
                limit: 50,
                relation: None,
            })
            .unwrap();
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let g_p50 = percentile(&samples, 50.0);
    let g_p95 = percentile(&samples, 95.0);
    say(format!(
        "graph --as-of (fold evaluated at a time, 25 times): p50 {g_p50:.1} ms, p95 {g_p95:.1} ms"
    ));
    let mut engine = engine;
    let started = Instant::now();
    let report = engine.doctor(false).unwrap();
    let doctor_ms = started.elapsed().as_secs_f64() * 1000.0;
    let graph_check = report
        .checks
        .iter()
        .find(|c| c.name == "graph")
        .map(|c| (c.ok, c.detail.clone()));
    say(format!(
        "doctor (full fold of the log compared with the stored intervals, plus the other checks): {doctor_ms:.0} ms — {graph_check:?}"
    ));
    results.insert("graph_as_of_ms".into(), ms_json(&samples));
    results.insert("doctor_full_fold_ms".into(), json!(doctor_ms.round()));

    run.phase("clusters");
    let engine = engine_at(&path, "proj-3");
    let started = Instant::now();
    let clusters = engine.clusters(&ClustersRequest::default()).unwrap();
    let cluster_seconds = started.elapsed().as_secs_f64();
    say(format!(
        "clusters of {} records: {cluster_seconds:.2} s, {} clusters of 4+, {} rounds, converged {}",
        clusters.records, clusters.found, clusters.rounds, clusters.converged
    ));
    results.insert(
        "clusters".into(),
        json!({
            "records": clusters.records, "seconds": cluster_seconds, "found": clusters.found,
            "rounds": clusters.rounds, "converged": clusters.converged,
        }),
    );
    let rss = machine::peak_rss_mb();
    say(format!(
        "peak RSS {} MB",
        rss.map_or("?".into(), |mb| format!("{mb:.0}"))
    ));
    results.insert("peak_rss_mb".into(), json!(rss));
    let parameters = json!({
        "memories": args.memories,
        "edges": args.edges,
        "seed": format!("{:#x}", args.seed),
        "remembered_per_setting": REMEMBERED,
    });
    let md = format!("Seeded, fixed clock.\n\n```\n{}\n```\n", lines.join("\n"));
    run.finish(
        &args.out,
        parameters,
        serde_json::Value::Object(results),
        &md,
    )?;
    work_dir.finish();
    Ok(())
}
