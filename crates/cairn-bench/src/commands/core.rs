//! `cairn-bench core`: the core engine at N records (lexical only).
//!
//! Steps: a seeded corpus written as import JSONL; `Engine::import_jsonl` throughput; in-process
//! recall latency (and where it goes, store call by store call); whole-process `cairn recall`
//! against the bare `sqlite3` CLI on the same FTS table, alternated; peak RSS of those processes;
//! a JSON record and a Markdown summary in `bench/results/`.

use anyhow::{Context as _, Result, bail};
use cairn_bench::corpus::{self, Query, QueryClass};
use cairn_bench::machine;
use cairn_bench::process::{self, timed};
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{Summary, round3};
use cairn_bench::work::WorkDir;
use cairn_core::query::{fts_match_expression, query_terms};
use cairn_engine::exchange::ImportOptions;
use cairn_engine::{Context, Engine, Mode, RecallRequest, TermCutoff};
use cairn_store::LexicalQuery;
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The fixed clock every record and recall is dated against.
pub const NOW: &str = "2026-06-01T00:00:00Z";
pub const DEFAULT_SEED: u64 = 0xCA1B_2026_0601;
/// The project the corpus is imported into and recalled from.
const PROJECT: &str = "bench";

const TARGET_IMPORT_PER_S: f64 = 5_000.0;
const TARGET_RECALL_P50_MS: f64 = 5.0;
const TARGET_RECALL_P95_MS: f64 = 20.0;
const TARGET_PROCESS_RATIO: f64 = 2.0;
const TARGET_RSS_MB: f64 = 50.0;

/// The limit every measured recall asks for.
const LIMIT: usize = 10;

#[derive(Debug, Args)]
pub struct CoreArgs {
    /// Records in the corpus.
    #[arg(long, default_value_t = 100_000)]
    records: usize,
    /// Measured in-process recall queries (after the warm-up).
    #[arg(long, default_value_t = 1000)]
    queries: usize,
    /// In-process warm-up queries (a separate draw from the same distribution).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Whole-process runs of each command.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Whole-process warm-up runs of each command.
    #[arg(long, default_value_t = 5)]
    process_warmup: usize,
    /// Runs under `/usr/bin/time` for peak RSS.
    #[arg(long, default_value_t = 30)]
    rss_runs: usize,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Content words: `auto` (the dictionary when present), `dict` or `generated`.
    #[arg(long, default_value = "auto")]
    vocab: String,
    /// The `cairn` binary to run; default: `cargo build --release -p cairn-cli` and use its path.
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Where the corpus and the brain are written (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the corpus and brain instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// Skip the whole-process part (steps 4 and 5).
    #[arg(long)]
    skip_process: bool,
}

fn now() -> DateTime<Utc> {
    NOW.parse().expect("NOW is RFC 3339")
}

fn context(cwd: &Path) -> Context {
    Context {
        project: PROJECT.to_string(),
        cwd: cwd.to_path_buf(),
        actor: "bench".to_string(),
        read_only: false,
        now: Some(now()),
    }
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn progress(message: &str) {
    cairn_bench::results::progress("core", message);
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn mb(bytes: u64) -> f64 {
    round3(bytes as f64 / (1024.0 * 1024.0))
}

pub fn run(args: &CoreArgs) -> Result<()> {
    if args.records == 0 || args.queries == 0 {
        bail!("--records and --queries must be at least 1");
    }
    let mut run = Run::start("core");
    let work_dir = WorkDir::new("core", args.work_dir.as_deref(), args.keep)?;
    let work = work_dir.path().to_path_buf();
    progress(&format!("working in {}", work.display()));

    // The cairn binary is built first so the build does not run beside the measurements.
    let cairn_binary = if args.skip_process {
        None
    } else {
        Some(process::locate_cairn(args.cairn.as_deref())?)
    };

    // 1. Corpus.
    run.phase("generate");
    let mut rng = Rng::new(args.seed);
    let started = Instant::now();
    let vocabulary = corpus::vocabulary(&args.vocab, &mut rng)?;
    let corpus_path = work.join("corpus.jsonl");
    let corpus_stats =
        corpus::write_corpus(&corpus_path, args.records, &vocabulary, now(), &mut rng)?;
    let query_set = corpus::queries(
        args.warmup + args.queries,
        &vocabulary,
        &corpus_stats,
        &mut rng,
    )?;
    let (warmup, measured) = query_set.queries.split_at(args.warmup);
    let generate_s = started.elapsed().as_secs_f64();
    progress(&format!(
        "corpus: {} records, {:.1} MB JSONL in {generate_s:.1}s; vocabulary: {}",
        corpus_stats.records,
        mb(corpus_stats.bytes),
        vocabulary.source
    ));

    // 2. Import.
    run.phase("import");
    let brain = work.join("brain.db");
    let import = measure_import(&brain, &corpus_path, &work, args.records)?;
    progress(&format!(
        "import: {:.0} memories/s ({:.1}s)",
        import["memories_per_s"].as_f64().unwrap_or(0.0),
        import["seconds"].as_f64().unwrap_or(0.0)
    ));

    // 3. In-process recall, then the store calls it makes.
    run.phase("recall_in_process");
    let in_process = measure_in_process(&brain, &work, warmup, measured)?;
    progress(&format!(
        "in-process recall: p50 {:.2} ms, p95 {:.2} ms",
        in_process["all"]["p50_ms"].as_f64().unwrap_or(f64::NAN),
        in_process["all"]["p95_ms"].as_f64().unwrap_or(f64::NAN)
    ));
    run.phase("store_breakdown");
    let breakdown = measure_breakdown(&brain, &work, measured)?;

    // 4 and 5. Whole process.
    let process = match &cairn_binary {
        Some(cairn) => {
            run.phase("whole_process");
            let process = measure_processes(args, cairn, &brain, &work, measured)?;
            progress(&format!(
                "whole process: cairn p50 {:.2} ms vs sqlite3 p50 {:.2} ms",
                process["cairn_no_touch"]["p50_ms"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                process["sqlite3"]["p50_ms"].as_f64().unwrap_or(f64::NAN)
            ));
            process
        }
        None => json!({"skipped": true}),
    };

    // 6. Report.
    let parameters = json!({
        "records": args.records,
        "queries": args.queries,
        "warmup": args.warmup,
        "runs": args.runs,
        "process_warmup": args.process_warmup,
        "rss_runs": args.rss_runs,
        "seed": format!("{:#x}", args.seed),
        "now": NOW,
        "project": PROJECT,
        "limit": LIMIT,
        "mode": "lexical",
    });
    let results = json!({
        "vocabulary": {
            "source": vocabulary.source,
            "function_words": vocabulary.head,
            "content_words": vocabulary.words.len() - vocabulary.head,
            "zipf_s": corpus::ZIPF_S,
        },
        "corpus": corpus_stats.json(),
        "generate_seconds": round3(generate_s),
        "queries": query_set.json(measured, args.records),
        "import": import,
        "recall_in_process": in_process,
        "recall_store_breakdown": breakdown,
        "whole_process": process,
        "targets": targets(&import, &in_process, &process),
    });
    let body = markdown(&parameters, &results);
    run.finish(&args.out, parameters, results, &body)?;
    work_dir.finish();
    Ok(())
}

fn measure_import(brain: &Path, corpus_path: &Path, work: &Path, records: usize) -> Result<Value> {
    let mut engine = Engine::open(brain, context(work))?;
    let mut input = std::io::BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(corpus_path)
            .with_context(|| format!("cannot read {}", corpus_path.display()))?,
    );
    let rss_before = machine::rss_kb();
    let peak_reset = machine::reset_peak_rss();
    let cpu_before = machine::thread_cpu_ns();
    let started = Instant::now();
    let report = engine.import_jsonl(&mut input, &ImportOptions::default())?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = match (cpu_before, machine::thread_cpu_ns()) {
        (Some(a), Some(b)) => Some(round3((b - a) as f64 / 1e9)),
        _ => None,
    };
    let peak = machine::peak_rss_kb();
    drop(engine);
    let summary = &report.summary;
    let stored = summary.added + summary.updated;
    if summary.error > 0 || summary.refused > 0 {
        let first = report
            .lines
            .iter()
            .find(|l| l.message.is_some())
            .and_then(|l| l.message.clone());
        progress(&format!(
            "warning: import had {} errors and {} refusals (first: {first:?})",
            summary.error, summary.refused
        ));
    }
    Ok(json!({
        "seconds": round3(seconds),
        "memories_per_s": round3(records as f64 / seconds),
        "thread_cpu_seconds": cpu_seconds,
        "summary": summary,
        "stored": stored,
        "brain_mb": mb(file_size(brain)),
        "wal_mb_after_close": mb(file_size(&brain.with_extension("db-wal"))),
        "process_rss_mb_before": rss_before.map(|kb| round3(kb as f64 / 1024.0)),
        "process_peak_rss_mb_during": if peak_reset { peak.map(|kb| round3(kb as f64 / 1024.0)) } else { None },
        "peak_rss_method": "VmHWM of the bench process, reset with /proc/self/clear_refs just before the import (includes the bench's own ~vocabulary and corpus statistics)",
        "includes": "JSON parsing, the write path's checks per line, 1000-line transactions, the FTS5 rows, and the FTS optimize at the end",
    }))
}

fn recall_request(text: &str, touch: bool) -> RecallRequest {
    let mut request = RecallRequest::new(text);
    request.touch = touch;
    request.mode = Mode::Lexical;
    request.limit = LIMIT;
    request
}

fn measure_in_process(
    brain: &Path,
    work: &Path,
    warmup: &[Query],
    measured: &[Query],
) -> Result<Value> {
    let mut engine = Engine::open(brain, context(work))?;
    for query in warmup {
        engine.recall(&recall_request(&query.text, false))?;
    }
    let mut all = Vec::with_capacity(measured.len());
    let mut by_class: BTreeMap<QueryClass, Vec<f64>> = BTreeMap::new();
    let mut empty = 0usize;
    let mut results_total = 0usize;
    let cpu_before = machine::thread_cpu_ns();
    let loop_started = Instant::now();
    for query in measured {
        let request = recall_request(&query.text, false);
        let started = Instant::now();
        let answer = engine.recall(&request)?;
        let elapsed = ms(started);
        all.push(elapsed);
        by_class.entry(query.class).or_default().push(elapsed);
        results_total += answer.results.len();
        if answer.results.is_empty() {
            empty += 1;
        }
    }
    let loop_s = loop_started.elapsed().as_secs_f64();
    let cpu_ms_per_query = match (cpu_before, machine::thread_cpu_ns()) {
        (Some(a), Some(b)) => Some(round3((b - a) as f64 / 1e6 / measured.len() as f64)),
        _ => None,
    };
    let mut value = json!({
        "all": Summary::of(&all).json(),
        "queries_per_s": round3(measured.len() as f64 / loop_s),
        "thread_cpu_ms_per_query_mean": cpu_ms_per_query,
        "empty_answers": empty,
        "mean_results": round3(results_total as f64 / measured.len() as f64),
    });
    let mut classes = serde_json::Map::new();
    for (class, values) in by_class {
        classes.insert(class.name().to_string(), Summary::of(&values).json());
    }
    value["by_class"] = Value::Object(classes);
    Ok(value)
}

/// The store calls one lexical recall makes, each timed on its own over the same queries:
/// the record count, a frequency probe per term, the FTS search on the kept terms, and fetching
/// the candidates. Also the search on every term (what the `sqlite3` comparison runs).
fn measure_breakdown(brain: &Path, work: &Path, measured: &[Query]) -> Result<Value> {
    let engine = Engine::open(brain, context(work))?;
    let reader = engine.store()?.reader();
    let projects = vec![Some(PROJECT.to_string()), None];
    let mut count_ms = Vec::new();
    let mut probes_ms = Vec::new();
    let mut search_kept_ms = Vec::new();
    let mut search_all_ms = Vec::new();
    let mut fetch_ms = Vec::new();
    let mut dropped_terms = 0usize;
    let search = |expression: &str| {
        reader.lexical_search(&LexicalQuery {
            match_expression: expression,
            projects: &projects,
            scopes: None,
            types: None,
            include_archived: false,
            as_of: None,
            since: None,
            until: None,
            limit: (LIMIT * RecallRequest::CANDIDATES_PER_RESULT)
                .max(RecallRequest::MIN_CANDIDATES),
            visible_to: None,
        })
    };
    for (index, query) in measured.iter().enumerate() {
        let terms = query_terms(&query.text);
        let started = Instant::now();
        reader.indexed_count()?;
        count_ms.push(ms(started));
        // The engine's own selection (`TermCutoff::DEFAULT`, what `cairn recall` uses), called,
        // never restated: it probes each term's frequency when the brain is large.
        let started = Instant::now();
        let kept = engine.searchable_terms(&query.text, TermCutoff::DEFAULT)?;
        probes_ms.push(ms(started));
        dropped_terms += terms.len().saturating_sub(kept.len());
        let Some(expression) = fts_match_expression(&kept) else {
            continue;
        };
        // Alternate which search runs first: the second finds the first's pages cached.
        let all_expression = fts_match_expression(&terms).unwrap_or_default();
        let timed_search = |expression: &str, into: &mut Vec<f64>| {
            let started = Instant::now();
            let hits = search(expression);
            into.push(ms(started));
            hits
        };
        let hits = if index % 2 == 0 {
            let hits = timed_search(&expression, &mut search_kept_ms)?;
            timed_search(&all_expression, &mut search_all_ms)?;
            hits
        } else {
            timed_search(&all_expression, &mut search_all_ms)?;
            timed_search(&expression, &mut search_kept_ms)?
        };
        let ids: Vec<i64> = hits.iter().map(|h| h.id).collect();
        let started = Instant::now();
        reader.get_many(&ids)?;
        fetch_ms.push(ms(started));
    }
    Ok(json!({
        "note": "each store call recall makes, timed on its own over the measured queries (same connection settings); the two searches alternate which runs first",
        "indexed_count": Summary::of(&count_ms).json(),
        "term_frequency_probes_per_query": Summary::of(&probes_ms).json(),
        "lexical_search_kept_terms": Summary::of(&search_kept_ms).json(),
        "lexical_search_all_terms": Summary::of(&search_all_ms).json(),
        "get_many_candidates": Summary::of(&fetch_ms).json(),
        "terms_not_kept": dropped_terms,
    }))
}

fn cairn_command(cairn: &Path, brain: &Path, work: &Path, text: &str, touch: bool) -> Command {
    let mut command = Command::new(cairn);
    command
        .arg("--db")
        .arg(brain)
        .args(["--project", PROJECT, "recall"])
        .args(if touch { None } else { Some("--no-touch") })
        .args(["--json", "--mode", "lexical", text])
        .current_dir(work)
        // The file's own latency: no warm daemon (`cairn-bench daemon` measures that).
        .env("CAIRN_DAEMON", "off")
        .env_remove("CAIRN_DB")
        .env_remove("CAIRN_PROJECT")
        .env_remove("CAIRN_READ_ONLY")
        .stdin(Stdio::null());
    command
}

/// The FTS expression the sqlite3 comparison runs: the query's terms, quoted, OR-joined.
fn sqlite_sql(text: &str) -> String {
    let expression = fts_match_expression(&query_terms(text)).unwrap_or_default();
    format!(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '{}' ORDER BY rank LIMIT 10",
        expression.replace('\'', "''")
    )
}

fn sqlite_command(sqlite3: &Path, brain: &Path, work: &Path, text: &str) -> Command {
    let mut command = Command::new(sqlite3);
    command
        .arg(brain)
        .arg(sqlite_sql(text))
        .current_dir(work)
        .stdin(Stdio::null());
    command
}

#[derive(Default)]
struct Series {
    wall: Vec<f64>,
    cpu_ticks: u64,
    by_class: BTreeMap<QueryClass, Vec<f64>>,
    empty: usize,
}

impl Series {
    fn push(&mut self, class: QueryClass, wall: f64, cpu: u64) {
        self.wall.push(wall);
        self.cpu_ticks += cpu;
        self.by_class.entry(class).or_default().push(wall);
    }

    fn json(&self, ticks_per_s: f64) -> Value {
        let mut value = Summary::of(&self.wall).json();
        value["cpu_ms_per_run_mean"] = json!(round3(
            self.cpu_ticks as f64 * 1000.0 / ticks_per_s / self.wall.len().max(1) as f64
        ));
        value["empty_answers"] = json!(self.empty);
        let mut classes = serde_json::Map::new();
        for (class, values) in &self.by_class {
            let summary = Summary::of(values);
            classes.insert(
                class.name().to_string(),
                json!({"count": summary.count, "p50_ms": round3(summary.p50), "p95_ms": round3(summary.p95)}),
            );
        }
        value["by_class"] = Value::Object(classes);
        value
    }
}

fn cairn_results(output: &std::process::Output) -> usize {
    serde_json::from_slice::<Value>(&output.stdout)
        .ok()
        .and_then(|v| v["results"].as_array().map(Vec::len))
        .unwrap_or(0)
}

fn measure_processes(
    args: &CoreArgs,
    cairn: &Path,
    brain: &Path,
    work: &Path,
    measured: &[Query],
) -> Result<Value> {
    let ticks = machine::clock_ticks();
    let sqlite3 = machine::which("sqlite3");
    if sqlite3.is_none() {
        progress("sqlite3 is not installed (`apt-get install -y sqlite3`): no comparison");
    }
    let query = |i: usize| &measured[i % measured.len()];
    // Floors: process spawn, and the git lookup the CLI makes for the project key.
    let mut floor_true = Vec::new();
    let mut floor_git = Vec::new();
    for _ in 0..50 {
        let (wall, _, _) = timed({
            let mut c = Command::new("true");
            c.current_dir(work);
            c
        })?;
        floor_true.push(wall);
        let started = Instant::now();
        let _ = Command::new("git")
            .arg("-C")
            .arg(work)
            .args(["rev-parse", "--show-toplevel"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        floor_git.push(ms(started));
    }

    // No-touch cairn and sqlite3, alternated (and the order swapped every run).
    let mut cairn_series = Series::default();
    let mut sqlite_series = Series::default();
    progress(&format!(
        "whole process: {} warm-up + {} runs each of cairn --no-touch and sqlite3, alternated",
        args.process_warmup, args.runs
    ));
    for i in 0..args.process_warmup + args.runs {
        let q = query(i);
        let record = i >= args.process_warmup;
        let mut run_cairn = || -> Result<()> {
            let (wall, cpu, output) = timed(cairn_command(cairn, brain, work, &q.text, false))?;
            if record {
                cairn_series.push(q.class, wall, cpu);
                if cairn_results(&output) == 0 {
                    cairn_series.empty += 1;
                }
            }
            Ok(())
        };
        let mut run_sqlite = || -> Result<()> {
            if let Some(sqlite3) = &sqlite3 {
                let (wall, cpu, output) = timed(sqlite_command(sqlite3, brain, work, &q.text))?;
                if record {
                    sqlite_series.push(q.class, wall, cpu);
                    if output.stdout.is_empty() {
                        sqlite_series.empty += 1;
                    }
                }
            }
            Ok(())
        };
        if i % 2 == 0 {
            run_cairn()?;
            run_sqlite()?;
        } else {
            run_sqlite()?;
            run_cairn()?;
        }
    }

    // Peak RSS, each run on its own under GNU time.
    let gnu_time = Path::new("/usr/bin/time");
    let rss = if gnu_time.is_file() {
        let rss_file = work.join("rss.txt");
        let measure = |make: &dyn Fn(usize) -> Command, runs: usize| -> Result<Vec<f64>> {
            let mut values = Vec::new();
            for i in 0..runs {
                let inner = make(i);
                let mut command = Command::new(gnu_time);
                command
                    .args(["-f", "%M", "-o"])
                    .arg(&rss_file)
                    .arg(inner.get_program())
                    .args(inner.get_args())
                    .current_dir(work)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                for (key, value) in inner.get_envs() {
                    match value {
                        Some(value) => command.env(key, value),
                        None => command.env_remove(key),
                    };
                }
                let status = command.status()?;
                if !status.success() {
                    bail!("{command:?} failed");
                }
                let text = std::fs::read_to_string(&rss_file)?;
                let kb: f64 = text
                    .lines()
                    .last()
                    .and_then(|l| l.trim().parse().ok())
                    .context("no %M in GNU time's output")?;
                values.push(kb / 1024.0);
            }
            Ok(values)
        };
        let cairn_rss = measure(
            &|i| cairn_command(cairn, brain, work, &query(i).text, false),
            args.rss_runs,
        )?;
        let sqlite_rss = match &sqlite3 {
            Some(sqlite3) => Some(measure(
                &|i| sqlite_command(sqlite3, brain, work, &query(i).text),
                args.rss_runs,
            )?),
            None => None,
        };
        let rss_json = |values: &[f64]| {
            let s = Summary::of(values);
            json!({"runs": s.count, "p50_mb": round3(s.p50), "max_mb": round3(s.max)})
        };
        json!({
            "method": "GNU time -f %M (the child's ru_maxrss from wait4), one run per query",
            "cairn_no_touch": rss_json(&cairn_rss),
            "sqlite3": sqlite_rss.as_deref().map(rss_json),
        })
    } else {
        json!({"method": "not measured: /usr/bin/time is missing (`apt-get install -y time`)"})
    };

    // With touch (the default): each recall records the access, one write transaction.
    progress(&format!(
        "whole process: {} warm-up + {} runs of cairn recall with touch",
        args.process_warmup, args.runs
    ));
    let mut touch_series = Series::default();
    for i in 0..args.process_warmup + args.runs {
        let q = query(i);
        let (wall, cpu, output) = timed(cairn_command(cairn, brain, work, &q.text, true))?;
        if i >= args.process_warmup {
            touch_series.push(q.class, wall, cpu);
            if cairn_results(&output) == 0 {
                touch_series.empty += 1;
            }
        }
    }
    let touch_rss = if gnu_time.is_file() {
        let rss_file = work.join("rss-touch.txt");
        let mut values = Vec::new();
        for i in 0..args.rss_runs.div_ceil(3) {
            let inner = cairn_command(cairn, brain, work, &query(i).text, true);
            let status = Command::new(gnu_time)
                .args(["-f", "%M", "-o"])
                .arg(&rss_file)
                .arg(inner.get_program())
                .args(inner.get_args())
                .current_dir(work)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            if status.success()
                && let Some(kb) = std::fs::read_to_string(&rss_file)
                    .ok()
                    .and_then(|t| t.lines().last().and_then(|l| l.trim().parse::<f64>().ok()))
            {
                values.push(kb / 1024.0);
            }
        }
        let s = Summary::of(&values);
        json!({"runs": s.count, "p50_mb": round3(s.p50), "max_mb": round3(s.max)})
    } else {
        Value::Null
    };
    let mut rss = rss;
    rss["cairn_touch"] = touch_rss;

    let cairn_summary = Summary::of(&cairn_series.wall);
    let sqlite_summary = Summary::of(&sqlite_series.wall);
    let ratio = |a: f64, b: f64| {
        if b > 0.0 && sqlite3.is_some() {
            Some(round3(a / b))
        } else {
            None
        }
    };
    Ok(json!({
        "cairn_binary": cairn.display().to_string(),
        "cairn_binary_mb": mb(file_size(cairn)),
        "sqlite3_binary": sqlite3.as_ref().map(|p| p.display().to_string()),
        "sqlite3_version": sqlite3.as_ref().and_then(|_| machine::version_of("sqlite3", "--version")),
        "cairn_command": format!("cairn --db BRAIN --project {PROJECT} recall --no-touch --json --mode lexical QUERY"),
        "sqlite3_command": "sqlite3 BRAIN \"SELECT rowid FROM memories_fts WHERE memories_fts MATCH '<terms quoted, OR-joined>' ORDER BY rank LIMIT 10\"",
        "sqlite3_example": sqlite_sql(&measured[0].text),
        "cwd": "the work directory (not a git repository)",
        "floor_spawn_true": Summary::of(&floor_true).json(),
        "floor_git_rev_parse": Summary::of(&floor_git).json(),
        "cairn_no_touch": cairn_series.json(ticks),
        "sqlite3": sqlite_series.json(ticks),
        "ratio_p50": ratio(cairn_summary.p50, sqlite_summary.p50),
        "ratio_p95": ratio(cairn_summary.p95, sqlite_summary.p95),
        "cairn_touch": touch_series.json(ticks),
        "peak_rss": rss,
    }))
}

fn check(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "not measured",
    }
}

fn targets(import: &Value, in_process: &Value, process: &Value) -> Value {
    let import_rate = import["memories_per_s"].as_f64();
    let p50 = in_process["all"]["p50_ms"].as_f64();
    let p95 = in_process["all"]["p95_ms"].as_f64();
    let ratio = process["ratio_p50"].as_f64();
    let rss = process["peak_rss"]["cairn_no_touch"]["max_mb"]
        .as_f64()
        .into_iter()
        .chain(process["peak_rss"]["cairn_touch"]["max_mb"].as_f64())
        .reduce(f64::max);
    json!({
        "import_per_s": {"target": format!(">= {TARGET_IMPORT_PER_S}"), "value": import_rate, "status": check(import_rate.map(|v| v >= TARGET_IMPORT_PER_S))},
        "recall_p50_ms": {"target": format!("<= {TARGET_RECALL_P50_MS}"), "value": p50, "status": check(p50.map(|v| v <= TARGET_RECALL_P50_MS))},
        "recall_p95_ms": {"target": format!("<= {TARGET_RECALL_P95_MS}"), "value": p95, "status": check(p95.map(|v| v <= TARGET_RECALL_P95_MS))},
        "process_ratio_p50": {"target": format!("<= {TARGET_PROCESS_RATIO}"), "value": ratio, "status": check(ratio.map(|v| v <= TARGET_PROCESS_RATIO))},
        "peak_rss_mb": {"target": format!("<= {TARGET_RSS_MB}"), "value": rss, "status": check(rss.map(|v| v <= TARGET_RSS_MB))},
    })
}

fn f(value: &Value) -> String {
    match value.as_f64() {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
        None => "–".to_string(),
    }
}

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn markdown(parameters: &Value, results: &Value) -> String {
    let mut s = String::new();
    let r = results;
    let t = &r["targets"];
    let ip = &r["recall_in_process"];
    let wp = &r["whole_process"];
    let _ = writeln!(
        s,
        "**Data:** {} records (seed `{}`, now {}), {:.1} MB JSONL; {} titled; body words mean {:.1} (min {}, max {}). Vocabulary: {}.",
        thousands(parameters["records"].as_u64().unwrap_or(0)),
        parameters["seed"].as_str().unwrap_or(""),
        NOW,
        r["corpus"]["jsonl_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        format_args!(
            "{:.0}%",
            r["corpus"]["titled_fraction"].as_f64().unwrap_or(0.0) * 100.0
        ),
        r["corpus"]["body_words_mean"].as_f64().unwrap_or(0.0),
        r["corpus"]["body_words_min"],
        r["corpus"]["body_words_max"],
        r["vocabulary"]["source"].as_str().unwrap_or(""),
    );
    let _ = writeln!(
        s,
        "\n| measure | result | target | status |\n|---|---|---|---|"
    );
    let _ = writeln!(
        s,
        "| import (`Engine::import_jsonl`, lexical) | **{} memories/s** ({} s; brain {} MB) | ≥ 5,000/s | {} |",
        f(&r["import"]["memories_per_s"]),
        f(&r["import"]["seconds"]),
        f(&r["import"]["brain_mb"]),
        t["import_per_s"]["status"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "| recall in-process p50 / p95 / p99 / max | **{} / {}** / {} / {} ms | p50 ≤ 5, p95 ≤ 20 ms | {} / {} |",
        f(&ip["all"]["p50_ms"]),
        f(&ip["all"]["p95_ms"]),
        f(&ip["all"]["p99_ms"]),
        f(&ip["all"]["max_ms"]),
        t["recall_p50_ms"]["status"].as_str().unwrap_or(""),
        t["recall_p95_ms"]["status"].as_str().unwrap_or("")
    );
    if wp["skipped"].as_bool() != Some(true) {
        let _ = writeln!(
            s,
            "| `cairn recall --no-touch` whole process p50 / p95 | **{} / {} ms** (CPU {} ms/run) | | |",
            f(&wp["cairn_no_touch"]["p50_ms"]),
            f(&wp["cairn_no_touch"]["p95_ms"]),
            f(&wp["cairn_no_touch"]["cpu_ms_per_run_mean"])
        );
        let _ = writeln!(
            s,
            "| `sqlite3` CLI, same FTS table and terms, p50 / p95 | {} / {} ms (CPU {} ms/run) | | |",
            f(&wp["sqlite3"]["p50_ms"]),
            f(&wp["sqlite3"]["p95_ms"]),
            f(&wp["sqlite3"]["cpu_ms_per_run_mean"])
        );
        let _ = writeln!(
            s,
            "| ratio cairn / sqlite3, p50 (p95) | **{}×** ({}×) | ≤ 2× | {} |",
            f(&wp["ratio_p50"]),
            f(&wp["ratio_p95"]),
            t["process_ratio_p50"]["status"].as_str().unwrap_or("")
        );
        let _ = writeln!(
            s,
            "| `cairn recall` with touch (default) p50 / p95 | {} / {} ms (CPU {} ms/run) | | |",
            f(&wp["cairn_touch"]["p50_ms"]),
            f(&wp["cairn_touch"]["p95_ms"]),
            f(&wp["cairn_touch"]["cpu_ms_per_run_mean"])
        );
        let rss = &wp["peak_rss"];
        let _ = writeln!(
            s,
            "| peak RSS `cairn recall`, no-touch p50 / max (touch max) | **{} / {} MB** ({} MB); sqlite3 max {} MB | ≤ 50 MB | {} |",
            f(&rss["cairn_no_touch"]["p50_mb"]),
            f(&rss["cairn_no_touch"]["max_mb"]),
            f(&rss["cairn_touch"]["max_mb"]),
            f(&rss["sqlite3"]["max_mb"]),
            t["peak_rss_mb"]["status"].as_str().unwrap_or("")
        );
    }
    let _ = writeln!(
        s,
        "\n## In-process recall by query class (`touch: false`, lexical, limit 10)\n\n| class | queries | p50 | p95 | p99 | max |\n|---|---|---|---|---|---|"
    );
    for class in QueryClass::ALL {
        let c = &ip["by_class"][class.name()];
        if c.is_null() {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} ms |",
            class.name(),
            c["count"],
            f(&c["p50_ms"]),
            f(&c["p95_ms"]),
            f(&c["p99_ms"]),
            f(&c["max_ms"])
        );
    }
    let _ = writeln!(
        s,
        "\n{} queries/s on one thread; thread CPU {} ms/query (mean) against {} ms wall (mean); {} of {} answers empty.",
        f(&ip["queries_per_s"]),
        f(&ip["thread_cpu_ms_per_query_mean"]),
        f(&ip["all"]["mean_ms"]),
        ip["empty_answers"],
        ip["all"]["count"]
    );
    let b = &r["recall_store_breakdown"];
    let _ = writeln!(
        s,
        "\n## Where in-process recall time goes (each store call timed alone, same queries)\n\n| store call | p50 | p95 | max |\n|---|---|---|---|"
    );
    for (name, key) in [
        (
            "`indexed_count` (count of the FTS docsize table)",
            "indexed_count",
        ),
        (
            "term selection (`Engine::searchable_terms`: its frequency probes)",
            "term_frequency_probes_per_query",
        ),
        (
            "FTS search, kept terms (what recall runs)",
            "lexical_search_kept_terms",
        ),
        (
            "FTS search, every term (what sqlite3 runs)",
            "lexical_search_all_terms",
        ),
        ("`get_many` of the 50 candidates", "get_many_candidates"),
    ] {
        let v = &b[key];
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} ms |",
            f(&v["p50_ms"]),
            f(&v["p95_ms"]),
            f(&v["max_ms"])
        );
    }
    for (kind, v) in b["term_frequency_probe_single"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            s,
            "| one probe, {} ({}) | {} | {} | {} ms |",
            kind.replace('_', " "),
            v["count"],
            f(&v["p50_ms"]),
            f(&v["p95_ms"]),
            f(&v["max_ms"])
        );
    }
    if wp["skipped"].as_bool() != Some(true) {
        let _ = writeln!(
            s,
            "\n## Whole process by query class (p50 / p95 ms)\n\n| class | cairn --no-touch | sqlite3 | cairn (touch) |\n|---|---|---|---|"
        );
        for class in QueryClass::ALL {
            let cell = |series: &str| {
                let c = &wp[series]["by_class"][class.name()];
                if c.is_null() {
                    "–".to_string()
                } else {
                    format!(
                        "{} / {} (n={})",
                        f(&c["p50_ms"]),
                        f(&c["p95_ms"]),
                        c["count"]
                    )
                }
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                class.name(),
                cell("cairn_no_touch"),
                cell("sqlite3"),
                cell("cairn_touch")
            );
        }
        let _ = writeln!(
            s,
            "\nFloors on this machine: spawning `true` p50 {} ms; `git rev-parse --show-toplevel` (which the CLI runs to find the project even when `--project` is given) p50 {} ms. cairn binary {} MB; {}.",
            f(&wp["floor_spawn_true"]["p50_ms"]),
            f(&wp["floor_git_rev_parse"]["p50_ms"]),
            f(&wp["cairn_binary_mb"]),
            wp["sqlite3_version"]
                .as_str()
                .map(|v| format!("sqlite3 {}", v.split_whitespace().next().unwrap_or(v)))
                .unwrap_or_else(|| "no sqlite3".into())
        );
    }
    let _ = writeln!(
        s,
        "\nQueries: {} — {}. Mid-frequency words have a document frequency of {}–{} records; frequent words {:.0}–{:.0}% of records. The load average was sampled at each phase (see the JSON): on a shared 2-core machine, compare runs taken under similar load.",
        r["queries"]["count"],
        r["queries"]["classes"]
            .as_object()
            .map(|m| m
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
        r["queries"]["mid_band_document_frequency"][0],
        r["queries"]["mid_band_document_frequency"][1],
        r["queries"]["frequent_df_fraction_range"][0]
            .as_f64()
            .unwrap_or(0.0)
            * 100.0,
        r["queries"]["frequent_df_fraction_range"][1]
            .as_f64()
            .unwrap_or(0.0)
            * 100.0,
    );
    s
}
