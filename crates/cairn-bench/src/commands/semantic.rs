//! `cairn-bench semantic`: the speed numbers of semantic recall (issue 3).
//!
//! ```text
//! cargo run --release -p cairn-bench -- semantic [--records 100000] [--queries 200]
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
//!    and the lexical-only process for comparison (the hook path), with peak RSS from GNU
//!    time.
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
use cairn_bench::machine;
use cairn_bench::mcp::McpClient;
use cairn_bench::process;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{ms_json, round1, round3};
use cairn_bench::work::WorkDir;
use cairn_embed::Embedder;
use cairn_engine::exchange::ImportOptions;
use cairn_engine::{Context, Engine, Mode, RecallRequest};
use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const SEED: u64 = 0x5eed_cafe;

#[derive(Debug, Args)]
pub struct SemanticArgs {
    /// Records in the big brain.
    #[arg(long, default_value_t = 100_000)]
    records: usize,
    /// Recall queries measured in process and over MCP.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Texts embedded by the model and ingested, for the throughput comparison.
    #[arg(long, default_value_t = 512)]
    ingest_texts: usize,
    /// Whole-process runs of `cairn recall` per mode.
    #[arg(long, default_value_t = 20)]
    process_runs: usize,
    /// The cairn binary (default: `cargo build --release -p cairn-cli` and use its path).
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, visible_alias = "out-dir", default_value = "bench/results")]
    out: PathBuf,
    #[arg(long, default_value_t = SEED)]
    seed: u64,
    /// The local model: e5 or minilm (default: `CAIRN_MODEL`, else e5).
    #[arg(long, env = "CAIRN_MODEL", default_value = "e5")]
    model: String,
    /// Where the brains are written (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the brains instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// The LoCoMo file of the real-text ingest run (e5 only).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "../shared/eval/locomo/locomo-dev.json"
    )]
    locomo: PathBuf,
    /// LoCoMo turns embedded and imported in the real-text ingest run (0: skip the run).
    #[arg(long, default_value_t = 400)]
    locomo_turns: usize,
    /// An older cairn binary whose `cairn import` of the same turns runs right after this
    /// build's, for a side-by-side in one run.
    #[arg(long, value_name = "PATH")]
    baseline_cairn: Option<PathBuf>,
    /// Only the ingest runs (synthetic and LoCoMo) and query embedding; no N-record brain.
    #[arg(long)]
    ingest_only: bool,
}
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

/// A seeded pseudo-word: the technical words above, or one of ~30k rarer made-up words with
/// a Zipf-like pick (short ranks common), so term frequencies look like real text rather
/// than every word being in 10 % of records.
fn word(rng: &mut Rng) -> String {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ter", "sun", "dra", "vel", "po", "rin", "ax", "zo", "quen", "bel",
        "tor", "fi", "gan", "hul", "ne", "os", "pra", "sel", "tu", "vor", "wen", "yal", "zer",
        "cri", "dom", "ep", "ful",
    ];
    if rng.below(4) == 0 {
        return rng.pick(WORDS).to_string();
    }
    // rank = u^3 × 30,000: small ranks far more often.
    let rank = rng.skewed(30_000, 3);
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
        let words = 10 + rng.below(14);
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

pub fn run(args: &SemanticArgs) -> Result<()> {
    if args.records == 0 || args.queries == 0 || args.ingest_texts == 0 || args.process_runs == 0 {
        bail!("--records, --queries, --ingest-texts and --process-runs must be at least 1");
    }
    let mut run = Run::start("semantic");
    let cairn = process::locate_cairn(args.cairn.as_deref())?;
    let work = WorkDir::new("semantic", args.work_dir.as_deref(), args.keep)?;
    let mut rng = Rng::new(args.seed);
    run.phase("model load");
    let config = cairn_embed::EmbedderConfig::Local {
        model: cairn_embed::LocalModel::parse(&args.model)
            .with_context(|| format!("--model {:?}: e5 or minilm", args.model))?,
        model_dir: None,
        options: cairn_embed::MiniLmOptions::default(),
    };
    let load_clock = Instant::now();
    // e5 is loaded as itself (the real-text run counts its tokens and FLOPs), with the
    // options `open_embedder` gives it.
    let e5 = match cairn_embed::LocalModel::parse(&args.model) {
        Some(cairn_embed::LocalModel::E5Small) => {
            let dir = cairn_embed::locate_model_dir_for(None, &cairn_embed::E5_SMALL)?;
            Some(Arc::new(cairn_embed::E5Embedder::load(
                &dir,
                &cairn_embed::E5Options::default(),
            )?))
        }
        _ => None,
    };
    let embedder: Arc<dyn Embedder> = match &e5 {
        Some(e5) => e5.clone(),
        None => Arc::from(
            cairn_embed::open_embedder(&config)?.context("the local model is configured")?,
        ),
    };
    let model_load_ms = load_clock.elapsed().as_secs_f64() * 1000.0;
    eprintln!(
        "model {} loaded in {model_load_ms:.0} ms",
        embedder.model_id()
    );

    // 1. Model batch throughput vs ingest throughput on the same texts.
    run.phase("model vs ingest throughput");
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

    // 1b. Real text: LoCoMo turns with their context (e5).
    let locomo = match (&e5, args.locomo_turns) {
        (Some(e5), turns) if turns > 0 => {
            run.phase("real-text ingest (LoCoMo)");
            super::embed_ingest::run(
                e5,
                &cairn_bench::results::resolve_out(&args.locomo),
                turns,
                &cairn,
                args.baseline_cairn.as_deref(),
                work.path(),
            )?
        }
        _ => Value::Null,
    };
    let synthetic = json!({
        "texts": texts.len(),
        "model_batch_texts_per_sec": round1(model_per_sec),
        "ingest_records_per_sec": round1(ingest_per_sec),
        "ratio": round3(ingest_per_sec / model_per_sec),
        "method": "best of 2 alternated rounds each",
    });
    if args.ingest_only {
        let mut embed_query = Vec::new();
        for round in 0..50 {
            let query = sentence(&mut rng, 3 + round % 5);
            let clock = Instant::now();
            embedder.embed_query(&query)?;
            embed_query.push(clock.elapsed().as_secs_f64() * 1000.0);
        }
        let parameters = json!({
            "ingest_texts": args.ingest_texts,
            "locomo_turns": args.locomo_turns,
            "ingest_only": true,
            "seed": format!("{:#x}", args.seed),
            "model": embedder.model_id(),
            "cairn_binary": cairn.display().to_string(),
            "baseline_cairn_binary": args.baseline_cairn.as_ref().map(|p| p.display().to_string()),
        });
        let results = json!({
            "model_load_ms": round1(model_load_ms),
            "ingest": synthetic,
            "locomo_ingest": locomo,
            "query_embedding": ms_json(&embed_query),
        });
        let mut body = format!(
            "| measure | result |\n|---|---|\n| synthetic ingest (import + embedding) vs the model's own batch throughput | {} vs {} texts/s |\n| query embedding alone (synthetic queries) | p50 {} ms, p95 {} ms |\n",
            results["ingest"]["ingest_records_per_sec"],
            results["ingest"]["model_batch_texts_per_sec"],
            results["query_embedding"]["p50_ms"],
            results["query_embedding"]["p95_ms"],
        );
        if !results["locomo_ingest"].is_null() {
            body.push_str(&super::embed_ingest::markdown(&results["locomo_ingest"]));
        }
        run.finish(&args.out, parameters, results, &body)?;
        work.finish();
        return Ok(());
    }

    // The model's vectors of the step-1 texts: what the stored vectors are mixed from.
    let pool = embedder.embed_batch(&refs)?;

    // 2–3. The N-record brain: lexical import, mixed real vectors under the model's id.
    run.phase("build the brain");
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
    engine.store_mut()?.write(|tx| {
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
    run.phase("vector scans and indexes");
    let queries: Vec<String> = (0..args.queries)
        .map(|_| {
            let words = 3 + rng.below(5);
            sentence(&mut rng, words)
        })
        .collect();
    let query_vectors: Vec<Vec<f32>> = queries
        .iter()
        .take(100)
        .map(|q| embedder.embed_query(q))
        .collect::<std::result::Result<_, _>>()?;
    let matrix = engine.store()?.reader().load_vectors(dimension)?;
    // The matrix keeps bfloat16 rows: what that rounding does to the exact answer, against the
    // brain's own f32 vectors.
    let mut stored = Vec::with_capacity(matrix.data.len());
    for &id in &matrix.ids {
        let reader = engine.store()?.reader();
        stored.extend(reader.vector_of(id, dimension)?.unwrap_or_default());
    }
    let rounding = measure_rounding(&stored, dimension, &query_vectors);
    eprintln!("bfloat16 rows against f32: {rounding}");
    drop(stored);
    let mut scans = Vec::new();
    for query in query_vectors.iter().take(50) {
        let clock = Instant::now();
        let found = cairn_core::vector::top_k(&matrix.data, query, 250);
        scans.push(clock.elapsed().as_secs_f64() * 1000.0);
        assert!(!found.is_empty());
    }
    let load_clock = Instant::now();
    let _ = engine.store()?.reader().load_vectors(dimension)?;
    let load_vectors_ms = load_clock.elapsed().as_secs_f64() * 1000.0;

    // The IVF index against the exact scan: on the brain's vectors at growing sizes, and on
    // uniformly random vectors (no structure: the worst case).
    let mut ann = Vec::new();
    let random: Vec<f32> = (0..args.records * dimension)
        .map(|_| rng.signed_f32())
        .collect();
    let random = cairn_core::vector::to_bf16(&normalized_rows(random, dimension));
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

    run.phase("recall in process");
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
    let in_process_rss = machine::peak_rss_mb();
    drop(engine);
    drop(exact_engine);
    drop(ivf_engine);

    // 4. Whole process.
    run.phase("whole process");
    let model_name = embedder_name(embedder.model_id());
    let scratch = work.path().join("rss.txt");
    let whole = |mode: &str| -> Result<(Vec<f64>, u64, Vec<f64>)> {
        let mut samples = Vec::new();
        let mut rss = Vec::new();
        let cpu_before = machine::children_cpu_ticks().unwrap_or(0);
        for query in queries.iter().cycle().take(args.process_runs) {
            let mut command = Command::new(&cairn);
            command
                // The CLI's own hybrid recall, model loaded in the process: no warm daemon
                // (`cairn-bench daemon` measures that).
                .env("CAIRN_DAEMON", "off")
                .arg("--db")
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
                .env("CAIRN_MODEL", model_name)
                .env_remove("CAIRN_DB")
                .env_remove("CAIRN_READ_ONLY");
            let clock = Instant::now();
            let (output, peak) = process::with_peak_rss(&command, &scratch)?;
            samples.push(clock.elapsed().as_secs_f64() * 1000.0);
            let answer: Value = serde_json::from_slice(&output.stdout)
                .context("cairn recall --json printed no JSON")?;
            if mode == "hybrid" && !answer["degraded"].is_null() {
                bail!(
                    "whole-process hybrid recall was degraded: {}",
                    answer["warnings"]
                );
            }
            rss.extend(peak);
        }
        let cpu = machine::children_cpu_ticks()
            .unwrap_or(0)
            .saturating_sub(cpu_before);
        Ok((samples, cpu, rss))
    };
    let (hybrid_process, hybrid_cpu, hybrid_rss) = whole("hybrid")?;
    let (lexical_process, lexical_cpu, lexical_rss) = whole("lexical")?;
    let process_json = |samples: &[f64], cpu_ticks: u64, rss: &[f64]| {
        json!({
            "latency": ms_json(samples),
            "cpu_ms_per_run_mean": round3(cpu_ticks as f64 * 1000.0 / machine::clock_ticks() / samples.len().max(1) as f64),
            "peak_rss_mb_max": rss.iter().copied().reduce(f64::max).map(round1),
            "rss_method": "GNU time -f %M per run (the child's ru_maxrss)",
        })
    };

    // 5. MCP round trips on a warm server with the model.
    run.phase("mcp");
    let (mcp_recall, mcp_after_write) = measure_mcp(&cairn, &brain, model_name, &queries)?;

    let parameters = json!({
        "records": args.records,
        "queries": args.queries,
        "ingest_texts": args.ingest_texts,
        "locomo_turns": args.locomo_turns,
        "baseline_cairn_binary": args.baseline_cairn.as_ref().map(|p| p.display().to_string()),
        "process_runs": args.process_runs,
        "seed": format!("{:#x}", args.seed),
        "now": NOW,
        "model": embedder.model_id(),
        "cairn_binary": cairn.display().to_string(),
    });
    let results = json!({
        "model_load_ms": round1(model_load_ms),
        "ingest": synthetic,
        "locomo_ingest": locomo,
        "brain": {
            "records": args.records,
            "stored_vectors": "a + 0.5 b + 0.25 r, normalized: a, b the model's vectors of two of the step-1 texts, r a random unit vector (seeded)",
            "import_secs": round1(import_secs),
            "load_vectors_ms": round1(load_vectors_ms),
        },
        "exact_scan_k250": ms_json(&scans),
        "bf16_rows_against_f32": rounding,
        "ann": {
            "index": "IVF-flat (cairn_core::vector::IvfIndex, default parameters: lists = sqrt(rows)/2, 6 k-means rounds on 40 rows per list, 2 build threads)",
            "queries": query_vectors.len(),
            "results": ann,
        },
        "engine_index_build_ms": round1(engine_index_ms),
        "engine_uses_index": indexed,
        "engine_int8_build_ms": round1(engine_quantize_ms),
        "engine_uses_int8": quantized,
        "hybrid_answers_differing_from_exact": differing_answers,
        "hybrid_in_process": ms_json(&in_process),
        "hybrid_exact_in_process": ms_json(&exact_in_process),
        "hybrid_ivf_in_process": ms_json(&ivf_in_process),
        "lexical_in_process": ms_json(&lexical_in_process),
        "query_embedding": ms_json(&embed_query),
        "in_process_peak_rss_mb": in_process_rss,
        "hybrid_whole_process": process_json(&hybrid_process, hybrid_cpu, &hybrid_rss),
        "lexical_whole_process": process_json(&lexical_process, lexical_cpu, &lexical_rss),
        "mcp_hybrid_recall_round_trip": ms_json(&mcp_recall),
        "mcp_hybrid_recall_after_remember": ms_json(&mcp_after_write),
    });
    let mut body = markdown(&results);
    if !results["locomo_ingest"].is_null() {
        body.push_str(&super::embed_ingest::markdown(&results["locomo_ingest"]));
    }
    run.finish(&args.out, parameters, results, &body)?;
    work.finish();
    Ok(())
}

fn markdown(r: &Value) -> String {
    let cell = |v: &Value| {
        format!(
            "p50 {}, p95 {} ms",
            v["p50_ms"]
                .as_f64()
                .map_or("?".into(), |x| format!("{x:.1}")),
            v["p95_ms"]
                .as_f64()
                .map_or("?".into(), |x| format!("{x:.1}"))
        )
    };
    let mut s = String::from("| measure | result | target |\n|---|---|---|\n");
    s.push_str(&format!(
        "| ingest (import + embedding) vs the model's own batch throughput | {} vs {} texts/s ({:.0} %) | ≥ 80 % |\n",
        r["ingest"]["ingest_records_per_sec"],
        r["ingest"]["model_batch_texts_per_sec"],
        r["ingest"]["ratio"].as_f64().unwrap_or(0.0) * 100.0
    ));
    s.push_str(&format!(
        "| hybrid recall in process, query embedding included (engine defaults) | {} | p95 ≤ 30 ms |\n",
        cell(&r["hybrid_in_process"])
    ));
    s.push_str(&format!(
        "| same with the plain exact scan | {} | |\n",
        cell(&r["hybrid_exact_in_process"])
    ));
    s.push_str(&format!(
        "| same with the IVF index | {} | |\n",
        cell(&r["hybrid_ivf_in_process"])
    ));
    s.push_str(&format!(
        "| lexical recall in process | {} | |\n",
        cell(&r["lexical_in_process"])
    ));
    s.push_str(&format!(
        "| query embedding alone | {} | |\n",
        cell(&r["query_embedding"])
    ));
    for (label, key, target) in [
        (
            "whole-process `cairn recall` (hybrid: model and vectors loaded)",
            "hybrid_whole_process",
            "p95 ≤ 250 ms",
        ),
        (
            "whole-process `cairn recall --mode lexical`",
            "lexical_whole_process",
            "",
        ),
    ] {
        let v = &r[key];
        s.push_str(&format!(
            "| {label} | {}; CPU {} ms/run; peak RSS {} MB | {target} |\n",
            cell(&v["latency"]),
            v["cpu_ms_per_run_mean"],
            v["peak_rss_mb_max"]
        ));
    }
    s.push_str(&format!(
        "| MCP `recall` round trip on a warm `cairn mcp` with the model (hybrid) | {} | p95 ≤ 30 ms |\n",
        cell(&r["mcp_hybrid_recall_round_trip"])
    ));
    s.push_str(&format!(
        "| MCP `recall` right after a `remember` through the same server | {} | |\n",
        cell(&r["mcp_hybrid_recall_after_remember"])
    ));
    s.push_str(&format!(
        "| exact vector scan, top 250, all rows | {} | |\n",
        cell(&r["exact_scan_k250"])
    ));
    s.push_str(&format!(
        "\nPeak RSS of the benchmark process {} MB; hybrid answers differing from the exact scan's: {}.\n",
        r["in_process_peak_rss_mb"], r["hybrid_answers_differing_from_exact"]
    ));
    let rounding = &r["bf16_rows_against_f32"];
    s.push_str(&format!(
        "\nRows kept as bfloat16 against the brain's f32 vectors (exact scans, {} queries): recall@10 {}, recall@200 {}, largest similarity change {}; one pass of dot products over every row p50 {} ms in f32, {} ms in bfloat16 (alternated).\n",
        rounding["queries"],
        rounding["recall_at_10"],
        rounding["recall_at_200"],
        rounding["max_similarity_change"],
        rounding["dot_pass_f32"]["p50_ms"],
        rounding["dot_pass_bf16"]["p50_ms"]
    ));
    s.push_str("\n## Vector search (top 200) against the exact scan\n\n| data | rows | exact scan | int8 pass (recall@200) | IVF lists | IVF probe: recall@10, p50 |\n|---|---:|---|---|---:|---|\n");
    for run in r["ann"]["results"].as_array().into_iter().flatten() {
        let probes: Vec<String> = run["probes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{}{}: {}, {} ms",
                    p["probe"],
                    if p["default"] == json!(true) {
                        " (default)"
                    } else {
                        ""
                    },
                    p["recall_at_10"],
                    p["search"]["p50_ms"]
                )
            })
            .collect();
        s.push_str(&format!(
            "| {} | {} | p50 {} ms | p50 {} ms ({}) | {} | {} |\n",
            run["data"].as_str().unwrap_or(""),
            run["rows"],
            run["exact_scan"]["p50_ms"],
            run["int8"]["search"]["p50_ms"],
            run["int8"]["recall_at_200"],
            run["lists"],
            probes.join("; ")
        ));
    }
    s
}

/// Recall round trips on a warm `cairn mcp` (model loaded, vectors read and their int8 copy
/// built), then recalls each right after a `remember` through the same server.
fn measure_mcp(
    cairn: &Path,
    brain: &Path,
    model_name: &str,
    queries: &[String],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut command = Command::new(cairn);
    command
        .arg("--db")
        .arg(brain)
        .args(["--project", "bench", "mcp"])
        .env("CAIRN_EMBEDDER", "local")
        .env("CAIRN_MODEL", model_name)
        .env_remove("CAIRN_READ_ONLY")
        .stderr(Stdio::inherit());
    let mut mcp = McpClient::start(command)?;
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
    mcp.close()?;
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
    let a = &pool[rng.below(pool.len())];
    let b = &pool[rng.below(pool.len())];
    let mut noise: Vec<f32> = (0..dimension).map(|_| rng.signed_f32()).collect();
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

/// The exact top 200 over `rows` as bfloat16 (what the engine keeps) against the exact top 200
/// over the same rows in f32: recall@10, recall@200 and the largest change of a similarity;
/// and the time of one pass of dot products over every row, f32 and bfloat16 alternated.
fn measure_rounding(rows: &[f32], dimension: usize, queries: &[Vec<f32>]) -> Value {
    use cairn_core::vector::{Nearest, dot, dot_bf16, recall_at, to_bf16, top_k};
    let rounded = to_bf16(rows);
    let (mut r10, mut r200, mut largest) = (0.0, 0.0, 0.0f32);
    let (mut f32_ms, mut bf16_ms) = (Vec::new(), Vec::new());
    for query in queries {
        let clock = Instant::now();
        let total: f32 = rows
            .chunks_exact(dimension)
            .map(|row| dot(row, query))
            .sum();
        f32_ms.push(clock.elapsed().as_secs_f64() * 1000.0);
        let clock = Instant::now();
        let rounded_total: f32 = rounded
            .chunks_exact(dimension)
            .map(|row| dot_bf16(row, query))
            .sum();
        bf16_ms.push(clock.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box((total, rounded_total));
        let mut exact: Vec<Nearest> = rows
            .chunks_exact(dimension)
            .enumerate()
            .map(|(row, vector)| Nearest {
                row,
                similarity: dot(vector, query),
            })
            .collect();
        exact.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then(a.row.cmp(&b.row))
        });
        exact.truncate(200);
        let found = top_k(&rounded, query, 200);
        for hit in &found {
            let vector = &rows[hit.row * dimension..(hit.row + 1) * dimension];
            largest = largest.max((dot(vector, query) - hit.similarity).abs());
        }
        r10 += recall_at(&exact[..10.min(exact.len())], &found[..10.min(found.len())]);
        r200 += recall_at(&exact, &found);
    }
    let n = queries.len().max(1) as f64;
    json!({
        "queries": queries.len(),
        "rows": rows.len() / dimension.max(1),
        "recall_at_10": (r10 / n * 1000.0).round() / 1000.0,
        "recall_at_200": (r200 / n * 1000.0).round() / 1000.0,
        "max_similarity_change": (f64::from(largest) * 1e6).round() / 1e6,
        "dot_pass_f32": ms_json(&f32_ms),
        "dot_pass_bf16": ms_json(&bf16_ms),
    })
}

/// Build time, and for several probe counts the latency (k = 200, what recall asks for) and
/// recall@10 / recall@200 against the exact scan.
fn measure_ann(
    matrix: &[cairn_core::vector::Bf16],
    dimension: usize,
    queries: &[Vec<f32>],
    data: &str,
) -> Value {
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
            "search": ms_json(&ms),
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
        "build_ms": round1(quantized_build_ms),
        "recall_at_10": (r10 / n * 1000.0).round() / 1000.0,
        "recall_at_200": (r200 / n * 10000.0).round() / 10000.0,
        "identical_answers": same,
        "search": ms_json(&ms),
    });
    json!({
        "data": data,
        "rows": rows,
        "int8": int8,
        "lists": index.list_count(),
        "build_ms": round1(build_ms),
        "exact_scan": ms_json(&exact_ms),
        "probes": probes,
    })
}
