//! `cairn-bench-semantic`: the speed numbers of semantic recall (issue 3), as a program.
//!
//! ```text
//! cargo build --release -p cairn-cli -p cairn-bench-semantic
//! nice target/release/cairn-bench-semantic [--records 100000] [--queries 200] [--out-dir bench/results]
//! ```
//!
//! What it measures, with a fixed seed and a fixed `now`:
//! 1. **Model batch throughput** vs **ingest throughput**: the same 512 synthetic texts embedded
//!    by the model directly (`embed_batch`, batches of 32), then imported through
//!    `Engine::import_jsonl` + `Engine::index_pending` (what `cairn import` does).
//! 2. **Exact vector scan** over N stored vectors (one query, all rows), and the **IVF index**
//!    (`cairn_core::vector::IvfIndex`): build time, latency and recall@10 against the exact scan
//!    for several probe counts, at 10k–N rows (where the index starts to pay), on two kinds of
//!    stored vectors (below).
//! 3. **Hybrid recall in process** at N memories, query embedding included.
//! 4. **Whole-process `cairn recall`** (hybrid: process start, model load, vector load, query),
//!    and the lexical-only process for comparison (the hook path), with peak RSS from
//!    `/usr/bin/time -v`.
//! 5. **MCP `recall` round trip on a warm `cairn mcp`** with the model resident (hybrid), and
//!    the recall right after a `remember` through the same server (the vectors follow the
//!    write).
//!
//! The N-record brain: records are imported lexically (synthetic sentences from a seeded
//! vocabulary); their stored vectors are written straight into the brain under the real model's
//! id and dimension — embedding 100k texts with the model would take tens of CPU-minutes. They
//! are **mixtures of real embeddings**: each is `a + 0.5·b + 0.25·r`, normalized, where `a`
//! and `b` are the model's vectors of two of the 512 texts of step 1 and `r` is a random unit
//! vector — they live where the model's vectors live (an approximate index is only as good as
//! the data's structure), unlike uniformly random vectors, on which the index's recall is also
//! reported as the worst case. The **query side is always the real model**.

use anyhow::{Context as _, Result, bail};
use cairn_embed::Embedder;
use cairn_engine::exchange::ImportOptions;
use cairn_engine::{Context, Engine, Mode, RecallRequest};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const SEED: u64 = 0x5eed_cafe;
const NOW: &str = "2026-12-01T00:00:00Z";
const WORDS: &[&str] = &[
    "deploy",
    "pipeline",
    "queue",
    "postgres",
    "redis",
    "cache",
    "lockfile",
    "migration",
    "schema",
    "index",
    "timeout",
    "retry",
    "worker",
    "cluster",
    "backup",
    "restore",
    "token",
    "rotate",
    "secret",
    "vault",
    "release",
    "branch",
    "merge",
    "review",
    "latency",
    "budget",
    "memory",
    "leak",
    "profile",
    "flame",
    "graph",
    "trace",
    "span",
    "metric",
    "alert",
    "pager",
    "incident",
    "rollback",
    "canary",
    "feature",
    "flag",
    "config",
    "yaml",
    "docker",
    "image",
    "registry",
    "kubernetes",
    "node",
    "pod",
    "volume",
    "disk",
    "quota",
    "billing",
    "invoice",
    "customer",
    "ticket",
    "support",
    "email",
    "webhook",
    "endpoint",
    "gateway",
    "proxy",
    "tls",
    "certificate",
    "renewal",
    "cron",
    "schedule",
    "batch",
    "stream",
    "kafka",
    "topic",
    "partition",
    "consumer",
    "offset",
    "lag",
    "replica",
    "primary",
    "failover",
    "vacuum",
    "analyze",
    "query",
    "plan",
    "join",
    "sort",
    "hash",
    "bloom",
    "filter",
    "shard",
    "tenant",
    "user",
    "session",
    "cookie",
    "login",
    "oauth",
    "scope",
    "role",
    "permission",
    "audit",
    "log",
];
const FILLER: &[&str] = &[
    "the", "a", "after", "before", "when", "because", "we", "it", "was", "is", "on", "for", "with",
    "fails", "works", "slow", "fast", "again", "never", "always", "since", "friday",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[(self.next() as usize) % list.len()]
    }
    fn unit(&mut self) -> f32 {
        (self.next() as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }
}

/// A seeded pseudo-word: the technical words above, or one of ~30k rarer made-up words with
/// a Zipf-like pick (short ranks common), so term frequencies look like real text rather
/// than every word being in 10 % of records.
fn word(rng: &mut Rng) -> String {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ter", "sun", "dra", "vel", "po", "rin", "ax", "zo", "quen", "bel",
        "tor", "fi", "gan", "hul", "ne", "os", "pra", "sel", "tu", "vor", "wen", "yal", "zer",
        "cri", "dom", "ep", "ful",
    ];
    if rng.next().is_multiple_of(4) {
        return rng.pick(WORDS).to_string();
    }
    // rank = u^3 × 30,000: small ranks far more often.
    let u = (rng.next() % 10_000) as f64 / 10_000.0;
    let rank = (u * u * u * 30_000.0) as usize;
    let mut n = rank;
    let mut word = String::new();
    loop {
        word.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
        if n == 0 {
            break;
        }
    }
    word
}

fn sentence(rng: &mut Rng, words: usize) -> String {
    (0..words)
        .map(|i| {
            if i % 3 == 2 {
                rng.pick(FILLER).to_string()
            } else {
                word(rng)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    if samples.is_empty() {
        return 0.0;
    }
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    (samples[index] * 1000.0).round() / 1000.0
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

fn context(project: &str) -> Context {
    let mut context = Context::for_directory(Path::new("/"));
    context.project = project.to_string();
    context.actor = "bench".into();
    context.now = chrono::DateTime::parse_from_rfc3339(NOW)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc));
    context
}

fn import_lines(rng: &mut Rng, count: usize) -> String {
    let mut lines = String::with_capacity(count * 160);
    for i in 0..count {
        let words = 10 + (rng.next() % 14) as usize;
        let line = json!({
            "type": "note",
            "body": format!("{} (#{i})", sentence(rng, words)),
            "created_at": NOW,
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    lines
}

struct Args {
    records: usize,
    queries: usize,
    out_dir: PathBuf,
    cairn: PathBuf,
    ingest_texts: usize,
}

fn parse_args() -> Result<Args> {
    let exe = std::env::current_exe()?;
    let mut args = Args {
        records: 100_000,
        queries: 200,
        out_dir: PathBuf::from("bench/results"),
        cairn: exe.with_file_name("cairn"),
        ingest_texts: 512,
    };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => args.records = value()?.parse()?,
            "--queries" => args.queries = value()?.parse()?,
            "--out-dir" => args.out_dir = PathBuf::from(value()?),
            "--cairn" => args.cairn = PathBuf::from(value()?),
            "--ingest-texts" => args.ingest_texts = value()?.parse()?,
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let work = tempfile::tempdir()?;
    let mut rng = Rng(SEED);
    let config = cairn_embed::EmbedderConfig::Local {
        model: cairn_embed::LocalModel::parse(
            &std::env::var("CAIRN_MODEL").unwrap_or_else(|_| "e5".into()),
        )
        .context("CAIRN_MODEL: e5 or minilm")?,
        model_dir: None,
        options: cairn_embed::MiniLmOptions::default(),
    };
    let load_clock = Instant::now();
    let embedder: Arc<dyn Embedder> =
        Arc::from(cairn_embed::open_embedder(&config)?.context("the local model is configured")?);
    let model_load_ms = load_clock.elapsed().as_secs_f64() * 1000.0;
    eprintln!(
        "model {} loaded in {model_load_ms:.0} ms",
        embedder.model_id()
    );

    // 1. Model batch throughput vs ingest throughput on the same texts.
    let texts: Vec<String> = (0..args.ingest_texts)
        .map(|_| sentence(&mut rng, 18))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let lines: String = texts
        .iter()
        .map(|t| json!({"type": "note", "body": t, "created_at": NOW}).to_string() + "\n")
        .collect();
    // Alternate the two measurements (best of 2 each) so load from other work on the machine
    // hits both alike.
    let mut model_per_sec: f64 = 0.0;
    let mut ingest_per_sec: f64 = 0.0;
    for round in 0..2 {
        let clock = Instant::now();
        embedder.embed_batch(&refs)?;
        model_per_sec = model_per_sec.max(texts.len() as f64 / clock.elapsed().as_secs_f64());
        let mut engine = Engine::open(
            &work.path().join(format!("ingest-{round}.db")),
            context("bench"),
        )?;
        engine.set_shared_embedder(embedder.clone());
        let clock = Instant::now();
        engine.import_jsonl(
            &mut std::io::Cursor::new(lines.clone()),
            &ImportOptions::default(),
        )?;
        let indexed = engine.index_pending(None, &mut |_, _| {})?;
        ingest_per_sec = ingest_per_sec.max(texts.len() as f64 / clock.elapsed().as_secs_f64());
        assert_eq!(indexed.embedded, texts.len());
    }
    eprintln!("model {model_per_sec:.1} texts/s, ingest {ingest_per_sec:.1} records/s");

    // The model's vectors of the step-1 texts: what the stored vectors are mixed from.
    let pool = embedder.embed_batch(&refs)?;

    // 2–3. The N-record brain: lexical import, mixed real vectors under the model's id.
    let brain = work.path().join("big.db");
    let mut engine = Engine::open(&brain, context("bench"))?;
    let clock = Instant::now();
    for chunk in 0..args.records.div_ceil(10_000) {
        let count = (args.records - chunk * 10_000).min(10_000);
        let lines = import_lines(&mut rng, count);
        engine.import_jsonl(&mut std::io::Cursor::new(lines), &ImportOptions::default())?;
    }
    let import_secs = clock.elapsed().as_secs_f64();
    let dimension = embedder.dimension();
    let clock = Instant::now();
    engine.store_mut().write(|tx| {
        tx.set_vector_space(&cairn_store::VectorSpace {
            model: embedder.model_id().to_string(),
            dimension,
        })?;
        let ids = tx.reader().pending_vector_ids(0, usize::MAX)?;
        for id in ids {
            let vector = mixed_vector(&mut rng, &pool, dimension);
            tx.put_vector(id, &format!("mixed-{id}"), &vector)?;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    let vectors_secs = clock.elapsed().as_secs_f64();
    eprintln!(
        "{} records imported in {import_secs:.1} s, random vectors written in {vectors_secs:.1} s",
        args.records
    );

    // Exact scan alone, with real query vectors.
    let queries: Vec<String> = (0..args.queries)
        .map(|_| {
            let words = 3 + (rng.next() % 5) as usize;
            sentence(&mut rng, words)
        })
        .collect();
    let query_vectors: Vec<Vec<f32>> = queries
        .iter()
        .take(100)
        .map(|q| embedder.embed_query(q))
        .collect::<std::result::Result<_, _>>()?;
    let matrix = engine.store().reader().load_vectors(dimension)?;
    let mut scans = Vec::new();
    for query in query_vectors.iter().take(50) {
        let clock = Instant::now();
        let found = cairn_core::vector::top_k(&matrix.data, query, 250);
        scans.push(clock.elapsed().as_secs_f64() * 1000.0);
        assert!(!found.is_empty());
    }
    let load_clock = Instant::now();
    let _ = engine.store().reader().load_vectors(dimension)?;
    let load_vectors_ms = load_clock.elapsed().as_secs_f64() * 1000.0;

    // The IVF index against the exact scan: on the brain's vectors at growing sizes, and on
    // uniformly random vectors (no structure: the worst case).
    let mut ann = Vec::new();
    let random: Vec<f32> = (0..args.records * dimension).map(|_| rng.unit()).collect();
    let random = normalized_rows(random, dimension);
    let mut sizes: Vec<usize> = [10_000, 20_000, 50_000]
        .into_iter()
        .filter(|&n| n < args.records)
        .collect();
    sizes.push(args.records);
    for (data, rows_list) in [
        ("mixed real embeddings", &sizes),
        ("uniform random", &vec![args.records]),
    ] {
        for &rows in rows_list.iter() {
            let slice = if data == "uniform random" {
                &random[..rows * dimension]
            } else {
                &matrix.data[..rows * dimension]
            };
            ann.push(measure_ann(slice, dimension, &query_vectors, data));
            eprintln!("ann {data} {rows}: {}", ann.last().unwrap());
        }
    }
    drop(random);
    drop(matrix);

    // Hybrid recall in process (model loaded, vectors cached after the first query).
    // Four alternated series: hybrid with the engine's defaults (the int8 first pass from
    // QUANTIZED_MIN_ROWS vectors, re-scored exactly), hybrid with the plain exact scan,
    // hybrid with the IVF index (enabled from IVF_MIN_ROWS vectors; off by default), and
    // lexical alone.
    let mut warm = RecallRequest::new(queries[0].clone());
    warm.touch = false;
    engine.set_shared_embedder(embedder.clone());
    engine.recall(&warm)?;
    let quantize_clock = Instant::now();
    let quantized = engine.prepare_quantized_vectors()?;
    let engine_quantize_ms = quantize_clock.elapsed().as_secs_f64() * 1000.0;
    let mut ivf_engine = Engine::open(&brain, context("bench"))?;
    ivf_engine.set_shared_embedder(embedder.clone());
    ivf_engine.set_semantic_config(cairn_engine::SemanticConfig {
        ann_min_rows: cairn_core::vector::IVF_MIN_ROWS,
        quantized_min_rows: usize::MAX,
        ..cairn_engine::SemanticConfig::default()
    });
    ivf_engine.recall(&warm)?;
    let index_clock = Instant::now();
    let indexed = ivf_engine.prepare_vector_index()?;
    let engine_index_ms = index_clock.elapsed().as_secs_f64() * 1000.0;
    let mut exact_engine = Engine::open(&brain, context("bench"))?;
    exact_engine.set_shared_embedder(embedder.clone());
    exact_engine.set_semantic_config(cairn_engine::SemanticConfig {
        ann_min_rows: usize::MAX,
        quantized_min_rows: usize::MAX,
        ..cairn_engine::SemanticConfig::default()
    });
    exact_engine.recall(&warm)?;
    let mut in_process = Vec::new();
    let mut exact_in_process = Vec::new();
    let mut ivf_in_process = Vec::new();
    let mut lexical_in_process = Vec::new();
    // How often the default answer (int8 first pass) differs from the exact scan's.
    let mut differing_answers = 0usize;
    for query in &queries {
        let mut request = RecallRequest::new(query.clone());
        request.touch = false;
        let clock = Instant::now();
        let exact_answer = exact_engine.recall(&request)?;
        exact_in_process.push(clock.elapsed().as_secs_f64() * 1000.0);
        let clock = Instant::now();
        ivf_engine.recall(&request)?;
        ivf_in_process.push(clock.elapsed().as_secs_f64() * 1000.0);
        let clock = Instant::now();
        let answer = engine.recall(&request)?;
        in_process.push(clock.elapsed().as_secs_f64() * 1000.0);
        let ids =
            |a: &cairn_engine::RecallAnswer| a.results.iter().map(|r| r.id).collect::<Vec<_>>();
        if ids(&answer) != ids(&exact_answer) {
            differing_answers += 1;
        }
        if answer.degraded.is_some() {
            bail!("hybrid recall was degraded: {:?}", answer.warnings);
        }
        let mut request = RecallRequest::new(query.clone());
        request.touch = false;
        request.mode = Mode::Lexical;
        let clock = Instant::now();
        engine.recall(&request)?;
        lexical_in_process.push(clock.elapsed().as_secs_f64() * 1000.0);
    }
    let mut embed_query = Vec::new();
    for query in queries.iter().take(50) {
        let clock = Instant::now();
        embedder.embed_query(query)?;
        embed_query.push(clock.elapsed().as_secs_f64() * 1000.0);
    }
    let in_process_rss = peak_rss_mb();
    drop(engine);
    drop(exact_engine);
    drop(ivf_engine);

    // 4. Whole process.
    let whole = |mode: &str, runs: usize| -> Result<(Vec<f64>, Option<f64>)> {
        let mut samples = Vec::new();
        let mut rss: Option<f64> = None;
        for query in queries.iter().take(runs) {
            let clock = Instant::now();
            let output = Command::new("/usr/bin/time")
                .arg("-v")
                .arg(&args.cairn)
                .args(["--db"])
                .arg(&brain)
                .args([
                    "--project",
                    "bench",
                    "--json",
                    "recall",
                    "--no-touch",
                    "--mode",
                    mode,
                ])
                .arg("--")
                .arg(query)
                .env("CAIRN_EMBEDDER", "local")
                .env("CAIRN_MODEL", embedder_name(embedder.model_id()))
                .output()
                .context("run cairn under /usr/bin/time")?;
            samples.push(clock.elapsed().as_secs_f64() * 1000.0);
            if !output.status.success() {
                bail!(
                    "cairn recall failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            let answer: Value = serde_json::from_slice(&output.stdout)?;
            if mode == "hybrid" && !answer["degraded"].is_null() {
                bail!(
                    "whole-process hybrid recall was degraded: {}",
                    answer["warnings"]
                );
            }
            let stderr = String::from_utf8_lossy(&output.stderr);
            if let Some(kb) = stderr
                .lines()
                .find(|l| l.contains("Maximum resident set size"))
                .and_then(|l| l.rsplit(':').next())
                .and_then(|v| v.trim().parse::<f64>().ok())
            {
                let mb = (kb / 1024.0 * 10.0).round() / 10.0;
                rss = Some(rss.map_or(mb, |r: f64| r.max(mb)));
            }
        }
        Ok((samples, rss))
    };
    let (mut hybrid_process, hybrid_rss) = whole("hybrid", 20)?;
    let (mut lexical_process, lexical_rss) = whole("lexical", 20)?;

    // 5. MCP round trips on a warm server with the model.
    let (mut mcp_recall, mut mcp_after_write) =
        measure_mcp(&args, &brain, embedder.as_ref(), &queries)?;

    let report = json!({
        "date": chrono::Utc::now().format("%Y-%m-%d").to_string(),
        "machine": "2 vCPU shared with other builds (see the .md for the load average)",
        "load_average": std::fs::read_to_string("/proc/loadavg").ok().map(|l| l.trim().to_string()),
        "model": embedder.model_id(),
        "model_load_ms": (model_load_ms * 10.0).round() / 10.0,
        "ingest": {
            "texts": texts.len(),
            "model_batch_texts_per_sec": (model_per_sec * 10.0).round() / 10.0,
            "ingest_records_per_sec": (ingest_per_sec * 10.0).round() / 10.0,
            "ratio": (ingest_per_sec / model_per_sec * 1000.0).round() / 1000.0,
        },
        "brain": {
            "records": args.records,
            "stored_vectors": "a + 0.5 b + 0.25 r, normalized: a, b the model's vectors of two of the step-1 texts, r a random unit vector (seeded)",
            "import_secs": (import_secs * 10.0).round() / 10.0,
            "load_vectors_ms": (load_vectors_ms * 10.0).round() / 10.0,
        },
        "exact_scan_ms": {"p50": percentile(&mut scans.clone(), 0.5), "p95": percentile(&mut scans, 0.95), "k": 250},
        "ann": {
            "index": "IVF-flat (cairn_core::vector::IvfIndex, default parameters: lists = sqrt(rows)/2, 6 k-means rounds on 40 rows per list, 2 build threads)",
            "queries": query_vectors.len(),
            "results": ann,
        },
        "engine_index_build_ms": (engine_index_ms * 10.0).round() / 10.0,
        "engine_uses_index": indexed,
        "engine_int8_build_ms": (engine_quantize_ms * 10.0).round() / 10.0,
        "engine_uses_int8": quantized,
        "hybrid_answers_differing_from_exact": differing_answers,
        "hybrid_exact_in_process_ms": {"p50": percentile(&mut exact_in_process.clone(), 0.5), "p95": percentile(&mut exact_in_process, 0.95)},
        "hybrid_ivf_in_process_ms": {"p50": percentile(&mut ivf_in_process.clone(), 0.5), "p95": percentile(&mut ivf_in_process, 0.95)},
        "query_embedding_ms": {"p50": percentile(&mut embed_query.clone(), 0.5), "p95": percentile(&mut embed_query, 0.95)},
        "hybrid_in_process_ms": {"p50": percentile(&mut in_process.clone(), 0.5), "p95": percentile(&mut in_process, 0.95), "queries": queries.len()},
        "lexical_in_process_ms": {"p50": percentile(&mut lexical_in_process.clone(), 0.5), "p95": percentile(&mut lexical_in_process, 0.95)},
        "in_process_peak_rss_mb": in_process_rss,
        "hybrid_whole_process_ms": {"p50": percentile(&mut hybrid_process.clone(), 0.5), "p95": percentile(&mut hybrid_process, 0.95), "runs": hybrid_process.len(), "peak_rss_mb": hybrid_rss},
        "mcp_hybrid_recall_round_trip_ms": {"p50": percentile(&mut mcp_recall.clone(), 0.5), "p95": percentile(&mut mcp_recall, 0.95), "runs": mcp_recall.len()},
        "mcp_hybrid_recall_after_remember_ms": {"p50": percentile(&mut mcp_after_write.clone(), 0.5), "p95": percentile(&mut mcp_after_write, 0.95), "runs": mcp_after_write.len()},
        "lexical_whole_process_ms": {"p50": percentile(&mut lexical_process.clone(), 0.5), "p95": percentile(&mut lexical_process, 0.95), "runs": lexical_process.len(), "peak_rss_mb": lexical_rss},
    });
    std::fs::create_dir_all(&args.out_dir)?;
    let stem = format!("semantic-{}", chrono::Utc::now().format("%Y-%m-%dT%H%MZ"));
    let json_path = args.out_dir.join(format!("{stem}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    eprintln!("wrote {}", json_path.display());
    Ok(())
}

/// A `cairn mcp` child spoken to in raw JSON-RPC lines.
struct McpClient {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: i64,
}

impl McpClient {
    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes())?;
        self.stdin.flush()?;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("cairn mcp closed its output");
            }
            let value: Value = serde_json::from_str(&line)?;
            if value["id"] == json!(id) {
                return Ok(value);
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if answer["result"]["isError"] != json!(false) {
            bail!("{tool} failed: {answer}");
        }
        Ok(answer["result"]["structuredContent"].clone())
    }
}

/// Recall round trips on a warm `cairn mcp` (model loaded, vectors read and their int8 copy
/// built), then recalls each right after a `remember` through the same server.
fn measure_mcp(
    args: &Args,
    brain: &Path,
    embedder: &dyn Embedder,
    queries: &[String],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut child = Command::new(&args.cairn)
        .arg("--db")
        .arg(brain)
        .args(["--project", "bench", "mcp"])
        .env("CAIRN_EMBEDDER", "local")
        .env("CAIRN_MODEL", embedder_name(embedder.model_id()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start cairn mcp")?;
    let mut mcp = McpClient {
        stdin: child.stdin.take().context("stdin")?,
        stdout: BufReader::new(child.stdout.take().context("stdout")?),
        child,
        next_id: 0,
    };
    mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    )?;
    let mut line = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    line.push('\n');
    mcp.stdin.write_all(line.as_bytes())?;
    mcp.stdin.flush()?;
    let started = Instant::now();
    loop {
        let answer = mcp.call("recall", json!({"query": queries[0]}))?;
        if answer["degraded"].is_null() {
            break;
        }
        if started.elapsed().as_secs() > 300 {
            bail!("the MCP server never turned hybrid: {answer}");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    eprintln!("mcp hybrid after {:.1} s", started.elapsed().as_secs_f64());
    // Let the int8 copy finish building in the background, then warm up.
    std::thread::sleep(std::time::Duration::from_secs(3));
    for query in queries.iter().take(20) {
        mcp.call("recall", json!({"query": query}))?;
    }
    let mut round_trips = Vec::new();
    for query in queries {
        let clock = Instant::now();
        let answer = mcp.call("recall", json!({"query": query}))?;
        round_trips.push(clock.elapsed().as_secs_f64() * 1000.0);
        if !answer["degraded"].is_null() {
            bail!("MCP recall was degraded: {answer}");
        }
    }
    let mut after_write = Vec::new();
    for (n, query) in queries.iter().take(20).enumerate() {
        mcp.call(
            "remember",
            json!({"type": "note", "body": format!("{query} (bench write {n})")}),
        )?;
        let clock = Instant::now();
        mcp.call("recall", json!({"query": query}))?;
        after_write.push(clock.elapsed().as_secs_f64() * 1000.0);
    }
    drop(mcp.stdin);
    let _ = mcp.child.wait();
    Ok((round_trips, after_write))
}

fn embedder_name(model_id: &str) -> &'static str {
    if model_id.contains("e5") {
        "e5"
    } else {
        "minilm"
    }
}

/// `a + 0.5·b + 0.25·r`, normalized (see the module docs).
fn mixed_vector(rng: &mut Rng, pool: &[Vec<f32>], dimension: usize) -> Vec<f32> {
    let a = &pool[(rng.next() as usize) % pool.len()];
    let b = &pool[(rng.next() as usize) % pool.len()];
    let mut noise: Vec<f32> = (0..dimension).map(|_| rng.unit()).collect();
    cairn_embed::l2_normalize(&mut noise);
    let mut vector: Vec<f32> = (0..dimension)
        .map(|d| a[d] + 0.5 * b[d] + 0.25 * noise[d])
        .collect();
    cairn_embed::l2_normalize(&mut vector);
    vector
}

fn normalized_rows(mut data: Vec<f32>, dimension: usize) -> Vec<f32> {
    for row in data.chunks_exact_mut(dimension) {
        cairn_embed::l2_normalize(row);
    }
    data
}

/// Build time, and for several probe counts the latency (k = 200, what recall asks for) and
/// recall@10 / recall@200 against the exact scan.
fn measure_ann(matrix: &[f32], dimension: usize, queries: &[Vec<f32>], data: &str) -> Value {
    use cairn_core::vector::{IvfIndex, IvfParams, QuantizedRows, recall_at, top_k};
    let rows = matrix.len() / dimension;
    let clock = Instant::now();
    let index = IvfIndex::build(matrix, dimension, IvfParams::default());
    let build_ms = clock.elapsed().as_secs_f64() * 1000.0;
    let mut exact_ms = Vec::new();
    let exact: Vec<_> = queries
        .iter()
        .map(|q| {
            let clock = Instant::now();
            let found = top_k(matrix, q, 200);
            exact_ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            found
        })
        .collect();
    let mut probes = Vec::new();
    for probe in [4, 8, 12, 16, 24] {
        let mut ms = Vec::new();
        let (mut r10, mut r200) = (0.0, 0.0);
        for (q, truth) in queries.iter().zip(&exact) {
            let clock = Instant::now();
            let found = index.search(matrix, q, 200, probe);
            ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            let mut found10 = found.clone();
            found10.truncate(10);
            r10 += recall_at(&truth[..10.min(truth.len())], &found10);
            r200 += recall_at(truth, &found);
        }
        let n = queries.len().max(1) as f64;
        probes.push(json!({
            "probe": probe,
            "default": probe == IvfParams::default().probe,
            "recall_at_10": (r10 / n * 1000.0).round() / 1000.0,
            "recall_at_200": (r200 / n * 1000.0).round() / 1000.0,
            "search_ms": {"p50": percentile(&mut ms.clone(), 0.5), "p95": percentile(&mut ms, 0.95)},
        }));
    }
    // The int8 first pass with exact re-scoring (the engine's default from 20k vectors).
    let clock = Instant::now();
    let quantized = QuantizedRows::build(matrix, dimension);
    let quantized_build_ms = clock.elapsed().as_secs_f64() * 1000.0;
    let mut ms = Vec::new();
    let (mut r10, mut r200, mut same) = (0.0, 0.0, 0usize);
    for (q, truth) in queries.iter().zip(&exact) {
        let clock = Instant::now();
        let found = quantized.search(matrix, q, 200);
        ms.push(clock.elapsed().as_secs_f64() * 1000.0);
        r10 += recall_at(&truth[..10.min(truth.len())], &found[..10.min(found.len())]);
        r200 += recall_at(truth, &found);
        same += usize::from(&found == truth);
    }
    let n = queries.len().max(1) as f64;
    let int8 = json!({
        "build_ms": (quantized_build_ms * 10.0).round() / 10.0,
        "recall_at_10": (r10 / n * 1000.0).round() / 1000.0,
        "recall_at_200": (r200 / n * 10000.0).round() / 10000.0,
        "identical_answers": same,
        "search_ms": {"p50": percentile(&mut ms.clone(), 0.5), "p95": percentile(&mut ms, 0.95)},
    });
    json!({
        "data": data,
        "rows": rows,
        "int8": int8,
        "lists": index.list_count(),
        "build_ms": (build_ms * 10.0).round() / 10.0,
        "exact_scan_ms": {"p50": percentile(&mut exact_ms.clone(), 0.5), "p95": percentile(&mut exact_ms, 0.95)},
        "probes": probes,
    })
}
