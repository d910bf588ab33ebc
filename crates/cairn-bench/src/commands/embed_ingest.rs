//! The real-text ingest run of `cairn-bench semantic` (issue 19): LoCoMo turns, each embedded
//! with the two turns before it in its session (what `cairn import` embeds for an `episode`).
//!
//! 1. **The machine's single-core GEMM rate**, measured in the same run with the kernel the
//!    encoder runs on (candle's f32 matmul, gemm's packed kernels) on one thread, at the shape
//!    of the encoder's feed-forward product (1024 tokens × 384 → 1536), from the thread's CPU
//!    time (so other work on the machine does not lower it).
//! 2. **The model on its own**: `embed_batch` over the turns' texts: texts/s and tokens/s
//!    (wall), CPU ms per text, and the achieved GFLOP/s (the encoder's matrix products,
//!    [`E5Embedder::forward_flops`]) per second of CPU — against the GEMM rate of (1); the
//!    shipped large-pass kernel (int8 on AVX-512 VNNI) and the f32 GEMM alternated batch by
//!    batch in the same run.
//! 3. **`cairn import` of the same turns** through the real binary (JSONL as `cairn eval
//!    locomo` writes it), with embedding: wall, CPU (the child's), peak RSS (GNU time), and
//!    what its `--json` says it embedded. With `--baseline-cairn` an older binary imports the
//!    same file right after, for a side-by-side in one run.
//! 4. **Query embedding** of LoCoMo questions (`query: ` prefix): p50/p95 and CPU per query,
//!    the shipped path beside the small passes in f32 and in int8 (beside the f32 GEMM) and
//!    every pass on the f32 GEMM, alternated question by question.

use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::process;
use cairn_bench::stats::{ms_json, round1, round3};
use cairn_embed::{E5Embedder, Embedder};
use candle_core::{Device, Tensor};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// One turn: its JSONL line for `cairn import` and the text the engine embeds for it.
struct Turn {
    line: String,
    text: String,
}

/// The first `limit` turns of the LoCoMo file, conversation by conversation, with the text
/// each is embedded as (the turn after up to two turns before it in the same session: the
/// sessions are days apart, beyond the engine's one-hour conversation window).
fn read_turns(path: &Path, limit: usize) -> Result<(Vec<Turn>, Vec<String>)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {} (the LoCoMo dev split: ../shared/eval/locomo/locomo-dev.json)",
            path.display()
        )
    })?;
    let data: Vec<Value> = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a LoCoMo JSON list", path.display()))?;
    let mut turns = Vec::new();
    let mut questions = Vec::new();
    let base = chrono::NaiveDate::from_ymd_opt(2023, 1, 1)
        .and_then(|d| d.and_hms_opt(10, 0, 0))
        .context("a valid base date")?;
    for sample in &data {
        let id = sample["sample_id"].as_str().unwrap_or("conv");
        let conversation = &sample["conversation"];
        for qa in sample["qa"].as_array().into_iter().flatten() {
            if let Some(question) = qa["question"].as_str() {
                questions.push(question.to_string());
            }
        }
        let mut session = 1;
        while let Some(list) = conversation[format!("session_{session}")].as_array() {
            let mut bodies: Vec<String> = Vec::new();
            for (index, turn) in list.iter().enumerate() {
                let mut body = format!(
                    "{}: {}",
                    turn["speaker"].as_str().unwrap_or("?"),
                    turn["text"].as_str().unwrap_or("")
                );
                if let Some(caption) = turn["blip_caption"].as_str() {
                    body.push_str(&format!(" [image: {caption}]"));
                }
                let mut text = String::new();
                for previous in &bodies[bodies.len().saturating_sub(2)..] {
                    text.push_str(previous);
                    text.push('\n');
                }
                text.push_str(&body);
                // Sessions on consecutive days, turns a second apart (the eval's times are the
                // session dates; only the gaps matter for the context).
                let line = json!({
                    "type": "episode",
                    "body": body,
                    "external_id": turn["dia_id"],
                    "created_at": (base + chrono::Duration::days(session) + chrono::Duration::seconds(index as i64))
                        .format("%Y-%m-%dT%H:%M:%SZ")
                        .to_string(),
                    "project": id,
                });
                turns.push(Turn {
                    line: line.to_string(),
                    text,
                });
                bodies.push(body);
                if turns.len() == limit {
                    return Ok((turns, questions));
                }
            }
            session += 1;
        }
    }
    Ok((turns, questions))
}

/// Single-core GFLOP/s of candle's f32 matmul at the encoder's feed-forward shape, from this
/// thread's CPU time: the best of three rounds of at least 0.3 s of CPU each.
fn gemm_rate() -> Result<Value> {
    let (m, k, n) = (1024usize, 384usize, 1536usize);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let device = Device::Cpu;
    let a = Tensor::from_vec(
        (0..m * k)
            .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
            .collect(),
        (m, k),
        &device,
    )?;
    let b = Tensor::from_vec(
        (0..k * n)
            .map(|i| ((i % 89) as f32 - 44.0) / 89.0)
            .collect(),
        (k, n),
        &device,
    )?;
    let flops = 2.0 * (m * k * n) as f64;
    let rounds: Vec<f64> = pool.install(|| -> Result<Vec<f64>> {
        a.matmul(&b)?; // warm-up
        let mut rounds = Vec::new();
        for _ in 0..3 {
            let start = machine::thread_cpu_ns().context("no per-thread CPU time (Linux only)")?;
            let mut products = 0usize;
            let mut spent = 0u64;
            while spent < 300_000_000 {
                a.matmul(&b)?;
                products += 1;
                spent = machine::thread_cpu_ns().unwrap_or(start) - start;
            }
            rounds.push(flops * products as f64 / spent as f64);
        }
        Ok(rounds)
    })?;
    let best = rounds.iter().copied().fold(0.0, f64::max);
    Ok(json!({
        "gflops_single_core": round1(best),
        "rounds_gflops": rounds.iter().map(|r| round1(*r)).collect::<Vec<_>>(),
        "shape": format!("({m} x {k}) . ({k} x {n}), f32"),
        "kernel": "candle_core::Tensor::matmul (gemm 0.19) on a one-thread rayon pool",
        "method": "best of 3 rounds of >= 0.3 s of the thread's CPU time",
    }))
}

/// `cairn --db DB --json import FILE` with the local e5 model: wall ms, CPU s, peak RSS MB,
/// and its JSON report. `kernel`: the `CAIRN_E5_KERNEL` it runs with (unset: the default).
fn import_run(
    cairn: &Path,
    db: &Path,
    file: &Path,
    scratch: &Path,
    kernel: Option<&str>,
) -> Result<Value> {
    let mut command = Command::new(cairn);
    match kernel {
        Some(kernel) => command.env("CAIRN_E5_KERNEL", kernel),
        None => command.env_remove("CAIRN_E5_KERNEL"),
    };
    command
        .arg("--db")
        .arg(db)
        .args(["--json", "import"])
        .arg(file)
        .env("CAIRN_EMBEDDER", "local")
        .env("CAIRN_MODEL", "e5")
        .env_remove("CAIRN_DB")
        .env_remove("CAIRN_READ_ONLY");
    let cpu_before = machine::children_cpu_seconds().unwrap_or(0.0);
    let clock = Instant::now();
    let (output, peak) = process::with_peak_rss(&command, scratch)?;
    let wall = clock.elapsed().as_secs_f64();
    let cpu = machine::children_cpu_seconds().unwrap_or(0.0) - cpu_before;
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("{} import --json printed no JSON", cairn.display()))?;
    Ok(json!({
        "binary": cairn.display().to_string(),
        "kernel": kernel.unwrap_or("default"),
        "wall_seconds": round1(wall),
        "cpu_seconds": round1(cpu),
        "peak_rss_mb": peak.map(round1),
        "added": report["summary"]["added"],
        "embedding": report.get("embedding").cloned().unwrap_or(Value::Null),
        "load_average_after": machine::load_json(),
    }))
}

/// The whole run; `model` is the e5 embedder the rest of the benchmark uses.
pub fn run(
    model: &E5Embedder,
    locomo: &Path,
    limit: usize,
    cairn: &Path,
    baseline: Option<&Path>,
    work: &Path,
) -> Result<Value> {
    let (turns, questions) = read_turns(locomo, limit)?;
    if turns.is_empty() {
        bail!("{} holds no turns", locomo.display());
    }
    let texts: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
    let token_counts: Vec<usize> = texts.iter().map(|t| model.passage_tokens(t)).collect();
    let tokens: usize = token_counts.iter().sum();
    let flops: f64 = token_counts.iter().map(|&t| model.forward_flops(t)).sum();
    eprintln!(
        "locomo: {} turns, {tokens} tokens ({:.1} per text)",
        texts.len(),
        tokens as f64 / texts.len() as f64
    );

    let gemm = gemm_rate()?;
    let gemm_single = gemm["gflops_single_core"].as_f64().unwrap_or(f64::NAN);
    eprintln!("single-core GEMM: {gemm_single} GFLOP/s");

    // The model on its own, the shipped large-pass kernel (int8 on AVX-512 VNNI when the CPU
    // has it) and the f32 GEMM alternated batch by batch (the order swapped every batch), so
    // both see the same machine.
    let dir = cairn_embed::locate_model_dir_for(None, &cairn_embed::E5_SMALL)?;
    let load = |options: cairn_embed::E5Options| E5Embedder::load(&dir, &options);
    let f32_large = load(cairn_embed::E5Options {
        large_pass_int8: false,
        ..cairn_embed::E5Options::default()
    })?;
    let kernels = [model, &f32_large];
    let load_before = machine::load_json();
    let mut wall = [0.0f64; 2];
    let mut cpu = [0.0f64; 2];
    let batch = cairn_embed::E5Options::default().batch_size;
    for (index, chunk) in texts.chunks(batch).enumerate() {
        for k in [index % 2, 1 - index % 2] {
            let cpu_before = machine::process_cpu_seconds().unwrap_or(0.0);
            let clock = Instant::now();
            let vectors = kernels[k].embed_batch(chunk)?;
            wall[k] += clock.elapsed().as_secs_f64();
            cpu[k] += machine::process_cpu_seconds().unwrap_or(0.0) - cpu_before;
            assert_eq!(vectors.len(), chunk.len());
        }
    }
    let load_after = machine::load_json();
    let model_json = |k: usize| {
        let (wall, cpu) = (wall[k], cpu[k]);
        let per_core = flops / cpu / 1e9;
        json!({
            "kernel": kernels[k].large_pass_kernel(),
            "texts": texts.len(),
            "tokens": tokens,
            "tokens_per_text": round1(tokens as f64 / texts.len() as f64),
            "threads": cairn_embed::E5Options::default().threads,
            "wall_seconds": round3(wall),
            "cpu_seconds": round3(cpu),
            "texts_per_sec": round1(texts.len() as f64 / wall),
            "tokens_per_sec": round1(tokens as f64 / wall),
            "cpu_ms_per_text": round3(cpu * 1000.0 / texts.len() as f64),
            "gflop": round3(flops / 1e9),
            "gflops_per_cpu_second": round1(per_core),
            "gflops_wall": round1(flops / wall / 1e9),
            "fraction_of_single_core_gemm": round3(per_core / gemm_single),
            "load_average_before": load_before,
            "load_average_after": load_after,
        })
    };
    let (model_json, f32_json) = (model_json(0), model_json(1));
    eprintln!("model alone: {model_json}");
    eprintln!("model alone, f32 GEMM: {f32_json}");

    let file = work.join("locomo-turns.jsonl");
    let lines: String = turns.iter().map(|t| t.line.clone() + "\n").collect();
    std::fs::write(&file, lines).with_context(|| format!("cannot write {}", file.display()))?;
    let scratch = work.join("import-rss.txt");
    let import = import_run(cairn, &work.join("locomo-import.db"), &file, &scratch, None)?;
    eprintln!("cairn import: {import}");
    let f32_import = import_run(
        cairn,
        &work.join("locomo-import-f32.db"),
        &file,
        &scratch,
        Some("f32"),
    )?;
    eprintln!("cairn import, CAIRN_E5_KERNEL=f32: {f32_import}");
    let baseline = match baseline {
        Some(binary) => {
            let db = work.join("locomo-baseline.db");
            let run = import_run(binary, &db, &file, &scratch, None)?;
            eprintln!("baseline cairn import: {run}");
            run
        }
        None => Value::Null,
    };

    // Query embedding: the shipped path (on AVX-512 VNNI every pass on the int8 GEMM; else
    // passes of up to `small_pass_tokens` on the 4-bit small-pass kernel), the small passes
    // on the f32 kernel and in int8 (`vnni.rs`) beside the f32 GEMM, and every pass on the
    // f32 GEMM (what ran before any of them), alternated question by question so all four see
    // the same machine.
    let f32_small = load(cairn_embed::E5Options {
        small_pass_int8: false,
        large_pass_int8: false,
        ..cairn_embed::E5Options::default()
    })?;
    let int8_small = load(cairn_embed::E5Options {
        large_pass_int8: false,
        ..cairn_embed::E5Options::default()
    })?;
    let f32_gemm_only = load(cairn_embed::E5Options {
        small_pass_tokens: 0,
        large_pass_int8: false,
        ..cairn_embed::E5Options::default()
    })?;
    let questions: Vec<&String> = questions.iter().take(200).collect();
    let mut query_tokens: Vec<f64> = Vec::new();
    let paths = [model, &f32_small, &int8_small, &f32_gemm_only];
    let mut ms: [Vec<f64>; 4] = Default::default();
    let mut cpu = [0.0f64; 4];
    for path in paths {
        path.embed_query("warm up")?;
    }
    for question in &questions {
        query_tokens.push(model.query_tokens(question) as f64);
        for ((path, ms), cpu) in paths.iter().zip(&mut ms).zip(&mut cpu) {
            let cpu_before = machine::process_cpu_seconds().unwrap_or(0.0);
            let clock = Instant::now();
            path.embed_query(question)?;
            ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            *cpu += machine::process_cpu_seconds().unwrap_or(0.0) - cpu_before;
        }
    }
    let per_query = |cpu: f64| round3(cpu * 1000.0 / questions.len().max(1) as f64);
    let [query_ms, f32_small_ms, int8_small_ms, gemm_ms] = ms;
    query_tokens.sort_by(f64::total_cmp);
    Ok(json!({
        "data": locomo.display().to_string(),
        "context": "each turn embedded after up to two turns before it in its session",
        "gemm": gemm,
        "model": model_json,
        "model_f32_gemm": f32_json,
        "cairn_import": import,
        "cairn_import_f32": f32_import,
        "baseline_cairn_import": baseline,
        "query_embedding": {
            "queries": query_ms.len(),
            "latency": ms_json(&query_ms),
            "cpu_ms_per_query": per_query(cpu[0]),
            "kernel": model.small_pass_kernel(),
            "large_kernel": model.large_pass_kernel(),
            "threads": cairn_embed::E5Options::default().query_threads,
            "texts": "LoCoMo dev questions (query: prefix)",
            "tokens_mean": round1(query_tokens.iter().sum::<f64>() / query_tokens.len().max(1) as f64),
            "tokens_max": query_tokens.last().copied(),
            "small_pass_tokens": cairn_embed::E5Options::default().small_pass_tokens,
            "f32_small_pass_latency": ms_json(&f32_small_ms),
            "f32_small_pass_cpu_ms_per_query": per_query(cpu[1]),
            "int8_small_pass_kernel": int8_small.small_pass_kernel(),
            "int8_small_pass_latency": ms_json(&int8_small_ms),
            "int8_small_pass_cpu_ms_per_query": per_query(cpu[2]),
            "f32_gemm_path_latency": ms_json(&gemm_ms),
            "f32_gemm_path_cpu_ms_per_query": per_query(cpu[3]),
        },
    }))
}

/// The Markdown rows of this run.
pub fn markdown(r: &Value) -> String {
    let m = &r["model"];
    let mut s = String::from("\n## Real text: LoCoMo turns with two turns of context\n\n");
    s.push_str(&format!(
        "{} turns, {} tokens per text on average; single-core GEMM rate in this run: {} GFLOP/s ({}).\n\n",
        m["texts"], m["tokens_per_text"], r["gemm"]["gflops_single_core"], r["gemm"]["shape"]
    ));
    s.push_str("| measure | result | target |\n|---|---|---|\n");
    for (key, target) in [("model", true), ("model_f32_gemm", false)] {
        let m = &r[key];
        if m.is_null() {
            continue;
        }
        let kernel = m["kernel"].as_str().unwrap_or("?");
        s.push_str(&format!(
            "| model alone ({} threads, {kernel} large passes): texts/s, tokens/s (wall) | {} texts/s, {} tokens/s | {} |\n",
            m["threads"], m["texts_per_sec"], m["tokens_per_sec"], if target { "≥ 25 texts/s on 2 cores" } else { "" }
        ));
        s.push_str(&format!(
            "| {kernel}: CPU per text | {} ms | |\n",
            m["cpu_ms_per_text"]
        ));
        s.push_str(&format!(
            "| {kernel}: achieved GFLOP/s per CPU second vs single-core GEMM | {} ({:.0} %) | {} |\n",
            m["gflops_per_cpu_second"],
            m["fraction_of_single_core_gemm"].as_f64().unwrap_or(0.0) * 100.0,
            if target { "≥ 40 %" } else { "" }
        ));
    }
    for (label, key) in [
        ("`cairn import` (this build)", "cairn_import"),
        (
            "`cairn import` (this build, `CAIRN_E5_KERNEL=f32`)",
            "cairn_import_f32",
        ),
        ("`cairn import` (baseline binary)", "baseline_cairn_import"),
    ] {
        let v = &r[key];
        if v.is_null() {
            continue;
        }
        s.push_str(&format!(
            "| {label}: wall, CPU, peak RSS | {} s, {} s CPU, {} MB | RSS ≤ 300 MB |\n",
            v["wall_seconds"], v["cpu_seconds"], v["peak_rss_mb"]
        ));
    }
    let e = &r["query_embedding"];
    let q = &e["latency"];
    s.push_str(&format!(
        "| query embedding (LoCoMo questions, {} tokens on average), shipped path (small passes: {}, large: {}) | p50 {} ms, p95 {} ms; {} ms CPU/query | p95 ≤ 10 ms |\n",
        e["tokens_mean"], e["kernel"].as_str().unwrap_or("?"), e["large_kernel"].as_str().unwrap_or("?"), q["p50_ms"], q["p95_ms"], e["cpu_ms_per_query"]
    ));
    let int8_small = format!(
        "small passes on the {} kernel beside the f32 GEMM",
        e["int8_small_pass_kernel"].as_str().unwrap_or("?")
    );
    for (label, latency, cpu) in [
        (
            "small passes on the f32 kernel",
            "f32_small_pass_latency",
            "f32_small_pass_cpu_ms_per_query",
        ),
        (
            int8_small.as_str(),
            "int8_small_pass_latency",
            "int8_small_pass_cpu_ms_per_query",
        ),
        (
            "every pass on the f32 GEMM",
            "f32_gemm_path_latency",
            "f32_gemm_path_cpu_ms_per_query",
        ),
    ] {
        let l = &e[latency];
        if l.is_null() {
            continue;
        }
        s.push_str(&format!(
            "| the same questions, {label} | p50 {} ms, p95 {} ms; {} ms CPU/query | |\n",
            l["p50_ms"], l["p95_ms"], e[cpu]
        ));
    }
    s
}
