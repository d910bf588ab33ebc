//! Measures the local MiniLM embedder: model load time, first call, single-sentence latency
//! (p50/p95) and batch-of-32 throughput, with CPU time per sentence (from /proc on Linux; less
//! sensitive to a busy machine than wall time) and peak RSS.
//!
//! ```text
//! cargo run -p cairn-embed --release --example embed_bench -- [--threads N] [--seconds S] [--model-dir DIR]
//! ```
//!
//! The corpus is fixed: 32 sentences of 17–22 words (~25 WordPiece tokens), typical memories.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_embed::{Embedder, MiniLmEmbedder, MiniLmOptions, locate_model_dir};

const CORPUS: [&str; 32] = [
    "The deploy script now runs database migrations before restarting the web workers to avoid schema errors.",
    "Alice prefers short code reviews with one focused change per pull request and clear commit messages.",
    "The flaky integration test was caused by a race between the cache warmer and the first request.",
    "We pinned the logging library to version two because version three changed the timestamp format.",
    "Customer invoices are generated on the first business day of each month by the billing cron job.",
    "The staging cluster runs on smaller machines, so load tests there underestimate real latency by half.",
    "Use the read replica for analytics queries; the primary database must only serve user-facing traffic.",
    "The mobile app caches the feature flags for ten minutes, so flag changes are not visible at once.",
    "Our style guide asks for explicit error types in libraries and anyhow only at the binary's edge.",
    "The search index is rebuilt nightly, and a manual rebuild takes about forty minutes on production.",
    "Bob owns the payment integration and should review any change touching refunds or currency conversion.",
    "Timeouts on the export endpoint were fixed by streaming rows instead of building the whole file.",
    "The design team wants dark mode to follow the system setting unless the user picks a theme explicitly.",
    "Secrets live in the vault; never commit them to the repository, not even in test fixtures or examples.",
    "The memory leak came from an unbounded channel between the parser thread and the indexing worker.",
    "We chose SQLite with write-ahead logging because the workload is mostly reads from a single machine.",
    "Release notes must mention every breaking change to the command line flags and the configuration file.",
    "The onboarding checklist includes access to the metrics dashboard, the pager rotation and the wiki.",
    "Image uploads larger than ten megabytes are rejected by the proxy before they ever reach the backend.",
    "The retry policy uses exponential backoff with jitter and gives up after five attempts or two minutes.",
    "Carol found that the slow page was caused by an N plus one query in the comments template rendering.",
    "All timestamps are stored in UTC and converted to the user's time zone only when they are displayed.",
    "The weekly planning meeting moved to Tuesday mornings so the remote team can join during their day.",
    "Rust builds are cached in CI by keying on the lockfile hash and the toolchain version together.",
    "The recommendation model is retrained every Sunday using the previous four weeks of interaction data.",
    "Password reset links expire after thirty minutes and can only be used once for security reasons.",
    "We deprecated the version one API last spring and will remove it after the customers finish migrating.",
    "The office network blocks outgoing SSH, so use the bastion host through the HTTPS tunnel instead.",
    "Dave suggested batching the notification emails to reduce the number of messages users receive daily.",
    "The nightly backup is encrypted, copied to a second region, and restored weekly to check that it works.",
    "Accessibility audits found missing labels on form inputs and low contrast on the secondary buttons.",
    "Product decided that free accounts keep their history for ninety days and paid accounts keep it forever.",
];

struct Args {
    threads: usize,
    seconds: f64,
    model_dir: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        threads: 1,
        seconds: 2.0,
        model_dir: None,
    };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        let value = iter
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--threads" => args.threads = value.parse().expect("--threads N"),
            "--seconds" => args.seconds = value.parse().expect("--seconds S"),
            "--model-dir" => args.model_dir = Some(PathBuf::from(value)),
            other => panic!("unknown flag {other}; use --threads, --seconds, --model-dir"),
        }
    }
    args
}

/// User + system CPU time of this process, from /proc/self/stat (Linux; None elsewhere).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every mainstream Linux configuration.
    Some(Duration::from_millis(ticks * 10))
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[index]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn main() {
    let args = parse_args();
    let dir = locate_model_dir(args.model_dir.as_deref()).unwrap_or_else(|error| panic!("{error}"));
    let options = MiniLmOptions {
        threads: args.threads,
        ..MiniLmOptions::default()
    };
    println!("model dir: {}", dir.display());
    println!(
        "threads: {}, corpus: {} sentences",
        args.threads,
        CORPUS.len()
    );

    let started = Instant::now();
    let model = MiniLmEmbedder::load_with(&dir, &options).unwrap_or_else(|error| panic!("{error}"));
    println!("load: {:.1} ms", ms(started.elapsed()));

    let started = Instant::now();
    model.embed_one(CORPUS[0]).unwrap();
    println!("first embed: {:.1} ms", ms(started.elapsed()));

    let budget = Duration::from_secs_f64(args.seconds);

    // Single sentences, one call each.
    let mut latencies = Vec::new();
    let cpu_before = cpu_time();
    let started = Instant::now();
    while started.elapsed() < budget {
        for sentence in CORPUS {
            let call = Instant::now();
            model.embed_one(sentence).unwrap();
            latencies.push(call.elapsed());
        }
    }
    let wall = started.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    latencies.sort();
    println!(
        "single: {} calls, p50 {:.2} ms, p95 {:.2} ms, {:.1} sentences/s, CPU {} ms/sentence",
        latencies.len(),
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.95)),
        latencies.len() as f64 / wall.as_secs_f64(),
        cpu.map_or("n/a".to_string(), |cpu| format!(
            "{:.2}",
            ms(cpu) / latencies.len() as f64
        )),
    );

    // Batches of 32.
    let mut batches = Vec::new();
    let cpu_before = cpu_time();
    let started = Instant::now();
    while started.elapsed() < budget {
        let call = Instant::now();
        let vectors = model.embed_batch(&CORPUS).unwrap();
        assert_eq!(vectors.len(), CORPUS.len());
        batches.push(call.elapsed());
    }
    let wall = started.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let sentences = batches.len() * CORPUS.len();
    batches.sort();
    println!(
        "batch32: {} batches, p50 {:.1} ms/batch, {:.1} sentences/s, CPU {} ms/sentence",
        batches.len(),
        ms(percentile(&batches, 0.5)),
        sentences as f64 / wall.as_secs_f64(),
        cpu.map_or("n/a".to_string(), |cpu| format!(
            "{:.2}",
            ms(cpu) / sentences as f64
        )),
    );
    if let Some(rss) = peak_rss_mb() {
        println!("peak RSS: {rss:.0} MB");
    }
}
