//! `cairn-bench daemon`: the warm local daemon (`cairn serve --local`) as a client pays for it —
//! whole `cairn` processes (`remember`, hybrid `recall`, `hook user-prompt-submit`) through the
//! daemon's socket, their wall time and peak RSS, and the daemon's own RSS with the model and the
//! brain's vectors resident.
//!
//! The brain is seeded like `cairn-bench agent`'s (synthetic vocabulary, fixed project); its
//! vectors are written straight into the `vectors` table under the real model's id, each a mix
//! of two real e5 vectors of corpus sentences plus noise (as `cairn-bench semantic` does), so the
//! daemon scans 100,000 vectors of the real shape; queries and new records are embedded by the
//! real model in the daemon. Results go to `bench/results/daemon-<stamp>.json` and `.md`.

use super::agent::{PROJECT, SEED, seed_brain, sentence, sentence_n, vocabulary};
use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::process;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{Summary, round3};
use cairn_bench::work::WorkDir;
use cairn_embed::Embedder as _;
use clap::Args;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The cairn binary (default: `cargo build --release -p cairn-cli` and use its path).
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Brain size in memories.
    #[arg(long, default_value_t = 100_000)]
    size: usize,
    /// Samples per measurement.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = SEED)]
    seed: u64,
    /// Keep the work directory (brain, daemon log) for a look afterwards.
    #[arg(long)]
    keep: bool,
    /// One more argument for `cairn serve --local` (repeatable), e.g. `--daemon-arg=--mmap-mib=0`.
    #[arg(long = "daemon-arg", value_name = "ARG", allow_hyphen_values = true)]
    daemon_args: Vec<String>,
}

/// The targets (whole process, daemon warm).
const REMEMBER_P95_MS: f64 = 25.0;
const REMEMBER_RSS_MB: f64 = 20.0;
const RECALL_P95_MS: f64 = 40.0;
const HOOK_P95_MS: f64 = 50.0;
const DAEMON_RSS_MB: f64 = 350.0;

fn cairn(cairn: &Path, db: &Path, cwd: &Path) -> Command {
    let mut command = Command::new(cairn);
    command
        .current_dir(cwd)
        .env("CAIRN_DB", db)
        .env("CAIRN_PROJECT", PROJECT)
        .env_remove("CAIRN_DAEMON")
        .env_remove("CAIRN_URL")
        .env_remove("CAIRN_READ_ONLY")
        .env_remove("CAIRN_EMBEDDER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The daemon's resident memory from `/proc/PID/status`, MB: `VmRSS`, `VmHWM` (peak), and the
/// split of `VmRSS` into anonymous memory (the heap: model, vectors, indexes) and file pages
/// (the binary and the brain read through the memory map, which the kernel can drop).
#[derive(Debug, Clone, Copy, Default)]
struct Rss {
    now: Option<f64>,
    peak: Option<f64>,
    anon: Option<f64>,
    file: Option<f64>,
}

impl Rss {
    fn json(&self) -> Value {
        json!({"rss": self.now, "peak": self.peak, "anon": self.anon, "file": self.file})
    }
}

fn daemon_rss(pid: u32) -> Rss {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| round3(kb / 1024.0))
    };
    Rss {
        now: field("VmRSS:"),
        peak: field("VmHWM:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
    }
}

/// The daemon's CPU time so far (user + system), clock ticks, from `/proc/PID/stat`.
fn daemon_cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the `(comm)` field: state is the 1st, utime the 12th, stime the 13th.
    let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

/// Waits until every record of the brain has its vector: the daemon acknowledges a
/// `remember` once it is stored and its background indexer embeds it right after, so the
/// embedding's CPU belongs to the writes (and must not run into the next measurement). Read
/// from the file beside the daemon (no call to it). Returns how long it waited.
fn wait_for_embeddings(db: &Path) -> Result<Duration> {
    let started = Instant::now();
    let store = cairn_store::Store::open_read_only(db)?;
    loop {
        let pending = store.reader().vector_counts()?.pending();
        if pending == 0 {
            return Ok(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("{pending} record(s) still without a vector 300 s after the writes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Daemon {
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn row(name: &str, samples: &[f64], target: f64, cpu_ticks: u64, daemon_ticks: u64) -> Value {
    let summary = Summary::of(samples);
    let per_run =
        |ticks: u64| ticks as f64 * 1000.0 / machine::clock_ticks() / samples.len().max(1) as f64;
    let cpu_ms = per_run(cpu_ticks);
    let daemon_ms = per_run(daemon_ticks);
    eprintln!(
        "  {name:<44} p50 {:>7.2} ms  p95 {:>7.2} ms  CPU {cpu_ms:.1} ms/run, daemon {daemon_ms:.1} ms/run (p95 ≤ {target} ms{})",
        summary.p50,
        summary.p95,
        if summary.p95 <= target {
            ", met"
        } else {
            ", MISSED"
        }
    );
    json!({
        "name": name,
        "latency": summary.json(),
        "cpu_ms_per_run_mean": round3(cpu_ms),
        "daemon_cpu_ms_per_run_mean": round3(daemon_ms),
        "target": format!("p95 ≤ {target} ms"),
        "met": summary.p95 <= target,
    })
}

/// Gives every record of the brain at `db` a vector under the real e5 model's id: each a mix of
/// two real e5 vectors of corpus sentences plus noise (as `cairn-bench semantic` does), so a
/// server scans vectors of the real shape without embedding the whole brain. Answers the model
/// id and the dimension.
pub(super) fn seed_vectors(db: &Path, words: &[String], rng: &mut Rng) -> Result<(String, usize)> {
    let model_dir = cairn_embed::locate_model_dir_for(None, &cairn_embed::E5_SMALL)?;
    let model = cairn_embed::E5Embedder::load(&model_dir, &cairn_embed::E5Options::default())?;
    let pool_texts: Vec<String> = (0..64).map(|_| sentence(rng, words, 12)).collect();
    let refs: Vec<&str> = pool_texts.iter().map(String::as_str).collect();
    let pool = model.embed_batch(&refs)?;
    let dimension = model.dimension();
    let model_id = model.model_id().to_string();
    drop(model);
    let mut store = cairn_store::Store::open(db)?;
    store.write(|tx| {
        tx.set_vector_space(&cairn_store::VectorSpace {
            model: model_id.clone(),
            dimension,
        })?;
        for id in tx.reader().pending_vector_ids(0, usize::MAX)? {
            let a = &pool[rng.below(pool.len())];
            let b = &pool[rng.below(pool.len())];
            let mut vector: Vec<f32> = (0..dimension)
                .map(|d| a[d] + 0.5 * b[d] + 0.25 * rng.signed_f32())
                .collect();
            cairn_embed::l2_normalize(&mut vector);
            tx.put_vector(id, &format!("mixed-{id}"), &vector)?;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok((model_id, dimension))
}

pub fn run(args: &DaemonArgs) -> Result<()> {
    if args.size == 0 || args.runs == 0 {
        bail!("--size and --runs must be at least 1");
    }
    let mut run = Run::start("daemon");
    let binary = process::locate_cairn(args.cairn.as_deref())?;
    run.say(&format!("cairn binary {}", binary.display()));
    let work_dir = WorkDir::new("daemon", None, args.keep)?;
    let dir = work_dir.path().to_path_buf();
    let db = dir.join("brain.db");
    let words = vocabulary(args.seed);
    let mut rng = Rng::new(args.seed ^ 0xdae);

    run.phase(&format!("seed {}", args.size));
    let took = seed_brain(&db, args.size, &words, args.seed)?;
    run.say(&format!(
        "seeded {} memories in {:.1} s",
        args.size,
        took.as_secs_f64()
    ));

    run.phase("vectors");
    let clock = Instant::now();
    let (model_id, dimension) = seed_vectors(&db, &words, &mut rng)?;
    run.say(&format!(
        "{} vectors ({model_id}, {dimension} dims) made and written in {:.1} s",
        args.size,
        clock.elapsed().as_secs_f64()
    ));

    run.phase("daemon start");
    let clock = Instant::now();
    let mut child = cairn(&binary, &db, &dir)
        .args(["serve", "--local"])
        .args(&args.daemon_args)
        .stdout(Stdio::null())
        .spawn()
        .context("start cairn serve --local")?;
    let mut line = String::new();
    BufReader::new(child.stderr.take().context("the daemon's stderr")?).read_line(&mut line)?;
    let daemon = Daemon { child };
    if !line.contains("listening on unix:") {
        bail!("the daemon did not start: {line}");
    }
    // Warm: the model loaded and the vectors read (a hybrid recall without `degraded`).
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let output = cairn(&binary, &db, &dir)
            .args([
                "--json",
                "recall",
                "--no-touch",
                &sentence(&mut rng, &words, 5),
            ])
            .output()?;
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if output.status.success() && answer["degraded"].is_null() {
            break;
        }
        if Instant::now() > deadline {
            bail!("the daemon was not warm after 600 s: {answer}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    run.say(&format!(
        "daemon warm (model loaded, vectors read) {:.1} s after start",
        clock.elapsed().as_secs_f64()
    ));
    let warm = daemon_rss(daemon.child.id());
    let rss_warm = warm.now;
    // Settled: the int8 copy of the vectors and the full-text index are built on threads of
    // their own after the first hybrid recall can be answered; wait until the daemon's RSS
    // has not moved by more than 1 MB for 2 s (at most 60 s).
    let clock = Instant::now();
    let mut readings: Vec<f64> = Vec::new();
    let settled = loop {
        let now = daemon_rss(daemon.child.id());
        readings.push(now.now.unwrap_or(0.0));
        let last = &readings[readings.len().saturating_sub(5)..];
        let spread = last.iter().copied().fold(f64::MIN, f64::max)
            - last.iter().copied().fold(f64::MAX, f64::min);
        if (last.len() == 5 && spread <= 1.0) || clock.elapsed() > Duration::from_secs(60) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    run.say(&format!(
        "daemon RSS settled at {:?} MB {:.1} s after warm",
        settled.now,
        clock.elapsed().as_secs_f64()
    ));

    let mut rows = Vec::new();
    let runs = args.runs;
    let pid = daemon.child.id();
    run.phase("remember");
    let mut samples = Vec::new();
    let mut cpu = 0;
    let daemon_before = daemon_cpu_ticks(pid);
    for _ in 0..runs {
        let mut command = cairn(&binary, &db, &dir);
        command
            .args(["remember", "--type", "note", "--body"])
            .arg(format!(
                "{} (bench remember)",
                sentence_n(&mut rng, &words, 12, 10)
            ));
        let (ms, ticks, _) = process::timed(command)?;
        samples.push(ms);
        cpu += ticks;
    }
    // The daemon's CPU for the writes includes the indexer embedding them afterwards.
    let drained = wait_for_embeddings(&db)?;
    run.say(&format!(
        "the indexer embedded the last write {:.0} ms after it was acknowledged",
        drained.as_secs_f64() * 1000.0
    ));
    rows.push(row(
        "cli remember (through the daemon)",
        &samples,
        REMEMBER_P95_MS,
        cpu,
        daemon_cpu_ticks(pid).saturating_sub(daemon_before),
    ));
    // Peak RSS of the CLI process, under GNU time (separate runs: time's own exec is not timed).
    let scratch = dir.join("time.txt");
    let mut rss = Vec::new();
    for _ in 0..20 {
        let mut command = cairn(&binary, &db, &dir);
        command
            .args(["remember", "--type", "note", "--body"])
            .arg(format!(
                "{} (bench rss)",
                sentence_n(&mut rng, &words, 12, 10)
            ));
        if let (_, Some(mb)) = process::with_peak_rss(&command, &scratch)? {
            rss.push(mb);
        }
    }
    wait_for_embeddings(&db)?;
    let remember_rss = rss
        .iter()
        .copied()
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let after_remember = daemon_rss(pid);

    run.phase("recall");
    let mut samples = Vec::new();
    let mut cpu = 0;
    let daemon_before = daemon_cpu_ticks(pid);
    for _ in 0..runs {
        let mut command = cairn(&binary, &db, &dir);
        command.args(["recall", &sentence_n(&mut rng, &words, 4, 5)]);
        let (ms, ticks, _) = process::timed(command)?;
        samples.push(ms);
        cpu += ticks;
    }
    rows.push(row(
        "cli recall, hybrid (through the daemon)",
        &samples,
        RECALL_P95_MS,
        cpu,
        daemon_cpu_ticks(pid).saturating_sub(daemon_before),
    ));

    run.phase("hook user-prompt-submit");
    let mut samples = Vec::new();
    let mut cpu = 0;
    let mut injected = 0;
    let daemon_before = daemon_cpu_ticks(pid);
    for _ in 0..runs {
        let prompt = format!(
            "how do we handle {} again",
            sentence_n(&mut rng, &words, 6, 8)
        );
        let payload = json!({"session_id": "bench", "transcript_path": "/nonexistent", "cwd": dir, "hook_event_name": "UserPromptSubmit", "prompt": prompt}).to_string();
        let cpu_before = machine::children_cpu_ticks().unwrap_or(0);
        let started = Instant::now();
        let mut child = cairn(&binary, &db, &dir)
            .args(["hook", "user-prompt-submit"])
            .stdin(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .context("the hook's stdin")?
            .write_all(payload.as_bytes())?;
        let output = child.wait_with_output()?;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
        cpu += machine::children_cpu_ticks()
            .unwrap_or(0)
            .saturating_sub(cpu_before);
        injected += usize::from(!output.stdout.is_empty());
    }
    run.say(&format!("({injected} of {runs} prompts got an injection)"));
    rows.push(row(
        "hook user-prompt-submit, hybrid (through the daemon)",
        &samples,
        HOOK_P95_MS,
        cpu,
        daemon_cpu_ticks(pid).saturating_sub(daemon_before),
    ));
    let end = daemon_rss(daemon.child.id());
    let (rss_now, rss_peak) = (end.now, end.peak);
    let hook_errors = std::fs::read_to_string(dir.join("hook-errors.log")).unwrap_or_default();
    drop(daemon);

    let remember_rss_met = remember_rss.is_some_and(|mb| mb <= REMEMBER_RSS_MB);
    let daemon_rss_met = rss_peak.is_some_and(|mb| mb <= DAEMON_RSS_MB);
    eprintln!(
        "  cli remember peak RSS {:?} MB (≤ {REMEMBER_RSS_MB}); daemon RSS warm {:?}, now {:?}, peak {:?} MB (≤ {DAEMON_RSS_MB})",
        remember_rss, rss_warm, rss_now, rss_peak
    );
    let parameters = json!({
        "size": args.size,
        "runs": runs,
        "seed": format!("{:#x}", args.seed),
        "project": PROJECT,
        "binary": binary.display().to_string(),
        "daemon_args": args.daemon_args,
        "model": model_id,
    });
    let results = json!({
        "note": "whole-process wall time of each cairn call through the warm daemon's Unix socket (spawn, answer, exit) and its CPU time; the daemon holds the e5 model and the brain's vectors (synthetic: mixes of real e5 vectors, under the model's id), queries and new records are embedded by the real model; the daemon CPU of remember includes its background indexer embedding the writes (measured until every record has its vector), so the recall phases start with the indexer idle",
        "remember_embedded_after_ms": round3(drained.as_secs_f64() * 1000.0),
        "measurements": rows,
        "cli_remember_peak_rss_mb": remember_rss,
        "cli_remember_peak_rss_target": format!("≤ {REMEMBER_RSS_MB} MB"),
        "cli_remember_peak_rss_met": remember_rss_met,
        "daemon_rss_mb": {"warm": rss_warm, "end": rss_now, "peak": rss_peak},
        "daemon_memory_mb": {"warm": warm.json(), "settled": settled.json(), "after_remember": after_remember.json(), "end": end.json()},
        "daemon_rss_target": format!("≤ {DAEMON_RSS_MB} MB"),
        "daemon_rss_met": daemon_rss_met,
        "injected": injected,
        "hook_errors_logged": hook_errors.lines().collect::<Vec<_>>(),
    });
    let mut md = String::from(
        "Whole-process wall time of each `cairn` call through the warm daemon (`cairn serve --local`, \
         e5 resident, 100k synthetic vectors of the real model's shape); CPU is that process's user + system time, \
         daemon CPU the daemon's over the same runs (for remember, until its background indexer has embedded them all).\n\n\
         | measurement | runs | p50 ms | p95 ms | max ms | CPU ms/run | daemon CPU ms/run | target | met |\n|---|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for r in &rows {
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |\n",
            r["name"].as_str().unwrap_or(""),
            r["latency"]["count"],
            r["latency"]["p50_ms"].as_f64().unwrap_or(0.0),
            r["latency"]["p95_ms"].as_f64().unwrap_or(0.0),
            r["latency"]["max_ms"].as_f64().unwrap_or(0.0),
            r["cpu_ms_per_run_mean"].as_f64().unwrap_or(0.0),
            r["daemon_cpu_ms_per_run_mean"].as_f64().unwrap_or(0.0),
            r["target"].as_str().unwrap_or(""),
            if r["met"] == true { "yes" } else { "no" }
        ));
    }
    md.push_str(&format!(
        "\nThe background indexer had embedded the last of the {runs} remembers {:.0} ms after it was acknowledged.\n",
        drained.as_secs_f64() * 1000.0
    ));
    let mb = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
    md.push_str(&format!(
        "\nCLI `remember` peak RSS: {} MB (target ≤ {REMEMBER_RSS_MB} MB). Daemon RSS: warm {} MB, at the end {} MB, peak {} MB (target ≤ {DAEMON_RSS_MB} MB).\n",
        mb(remember_rss),
        mb(rss_warm),
        mb(rss_now),
        mb(rss_peak),
    ));
    md.push_str(&format!(
        "Of the daemon's RSS, anonymous (heap) / file pages (binary, memory-mapped brain): warm {} / {} MB, settled (the int8 copy and the full-text index built) {} / {} MB, after the remembers (and their embedding) {} / {} MB, at the end {} / {} MB.\n",
        mb(warm.anon),
        mb(warm.file),
        mb(settled.anon),
        mb(settled.file),
        mb(after_remember.anon),
        mb(after_remember.file),
        mb(end.anon),
        mb(end.file),
    ));
    run.finish(&args.out, parameters, results, &md)?;
    work_dir.finish();
    Ok(())
}
