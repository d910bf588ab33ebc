//! `cairn-bench serve`: `cairn serve` under load. A seeded brain, the real server on a loopback
//! port, and wrk (a real HTTP load generator, installed by `scripts/install-wrk.sh`) driving
//! keep-alive clients with a Lua script: 90 % lexical `POST /v1/recall`, 10 %
//! `POST /v1/remember` (every body unique, so none is refused as a duplicate). It reports
//! requests/s, latency percentiles from wrk's histogram, every error (sockets, timeouts, any
//! status but 200), the server's CPU time and the machine's load.
//!
//! Targets (issue 14): ≥ 800 requests/s, p99 ≤ 50 ms, zero errors, 32 clients, 100,000
//! memories. Results go to `bench/results/serve-<stamp>.json` and `.md`.
//!
//! `--recall-mode hybrid` measures the other number of the issue: hybrid recall throughput
//! against the model's own query throughput (≥ 80 %). The brain's records get vectors of the
//! real model's shape (`daemon::seed_vectors`), the server runs with the e5 model, and the
//! model's throughput is measured first in this process, alone on the machine: the same
//! queries embedded one after another for as long as the server will be measured.

use super::agent::{PROJECT, seed_brain, sentence, vocabulary};
use super::daemon::seed_vectors;
use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::process;
use cairn_bench::results::{Run, workspace_root};
use cairn_bench::rng::Rng;
use cairn_bench::stats::round3;
use cairn_bench::work::WorkDir;
use cairn_embed::Embedder as _;
use clap::Args;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The cairn binary (default: `cargo build --release -p cairn-cli` and use its path).
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Memories in the brain.
    #[arg(long, default_value_t = 100_000)]
    size: usize,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// wrk threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds measured (after a warm-up of a quarter of it, at least 3 s).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Share of requests that are `remember` writes, in percent.
    #[arg(long, default_value_t = 10)]
    write_percent: u32,
    /// How the recalls rank: `lexical` (the throughput target's mix) or `hybrid` (the server
    /// holds the e5 model and every record has a vector; compared with the model's own query
    /// throughput).
    #[arg(long, default_value = "lexical", value_parser = ["lexical", "hybrid"])]
    recall_mode: String,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Keep the seeded brain in DIR and start later runs from a copy of it.
    #[arg(long, value_name = "DIR")]
    seed_cache: Option<PathBuf>,
    #[arg(long, default_value_t = 0x5EED_CA1B_2026_1202)]
    seed: u64,
    /// Keep the work directory (brain, script) for a look afterwards.
    #[arg(long)]
    keep: bool,
    /// One more argument for `cairn serve` (repeatable), e.g. `--server-arg=--buffer-accesses`.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    server_args: Vec<String>,
}

/// The server, stopped with SIGTERM when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(cairn: &Path, db: &Path, dir: &Path, extra: &[String], model: bool) -> Result<Server> {
        let mut command = Command::new(cairn);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .current_dir(dir)
            .env("CAIRN_DB", db)
            .env_remove("CAIRN_READ_ONLY");
        if model {
            command.env_remove("CAIRN_EMBEDDER");
        } else {
            // lexical recall: the load mix is lexical, and a model would embed the writes
            command.env("CAIRN_EMBEDDER", "none");
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start cairn serve")?;
        let mut first = String::new();
        BufReader::new(child.stderr.take().context("the server's stderr")?)
            .read_line(&mut first)?;
        let Some(url) = first.split_whitespace().find(|w| w.starts_with("http://")) else {
            let _ = child.kill();
            bail!("cairn serve did not say where it listens: {first:?}");
        };
        Ok(Server {
            url: url.to_string(),
            child,
        })
    }

    /// The server's CPU time so far (user + system), seconds.
    fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / machine::clock_ticks())
    }

    fn rss_mb(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn lua_string(text: &str) -> String {
    format!("{text:?}")
}

/// The wrk script: the request mix, per-thread counts of every answer that is not a 200, and
/// one `CAIRN_RESULT {json}` line at the end.
fn script(token: &str, queries: &[String], write_percent: u32, seed: u64, mode: &str) -> String {
    let list: Vec<String> = queries.iter().map(|q| lua_string(q)).collect();
    format!(
        r#"-- generated by cairn-bench serve
local token = {token}
local queries = {{ {queries} }}
local write_share = {share}
local mode = {mode}
local threads = {{}}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed({seed} + id)
  counter = 0
  recalls = 0
  writes = 0
  bad = 0
  first_bad = ""
end

local headers = {{["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}}

function request()
  counter = counter + 1
  local words = queries[math.random(#queries)]
  if math.random() < write_share then
    writes = writes + 1
    local body = string.format('{{"type": "note", "body": "load run write %d-%d about %s"}}', id, counter, words)
    return wrk.format("POST", "/v1/remember", headers, body)
  end
  recalls = recalls + 1
  local body = string.format('{{"query": "%s", "mode": "%s", "limit": 10}}', words, mode)
  return wrk.format("POST", "/v1/recall", headers, body)
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
    if first_bad == "" then first_bad = status .. " " .. (string.gsub(string.sub(body, 1, 300), "%c", " ")) end
  end
end

function done(summary, latency, requests)
  local recalls, writes, bad, first_bad = 0, 0, 0, ""
  for _, thread in ipairs(threads) do
    recalls = recalls + thread:get("recalls")
    writes = writes + thread:get("writes")
    bad = bad + thread:get("bad")
    if first_bad == "" then first_bad = thread:get("first_bad") end
  end
  local e = summary.errors
  io.write(string.format(
    'CAIRN_RESULT {{"requests": %d, "duration_us": %d, "bytes": %d, "sent_recalls": %d, "sent_writes": %d, "not_200": %d, "first_not_200": %q, "errors": {{"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}, "latency_us": {{"min": %d, "mean": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, "p99_9": %d}}}}\n',
    summary.requests, summary.duration, summary.bytes, recalls, writes, bad, first_bad,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
"#,
        token = lua_string(token),
        queries = list.join(", "),
        share = f64::from(write_percent) / 100.0,
        seed = seed % 1_000_000,
        mode = lua_string(mode),
    )
}

/// The e5 model's own query throughput on this machine: `queries` embedded one after another
/// (as a hybrid recall embeds its query) for `seconds`, in queries per second.
fn model_throughput(queries: &[String], seconds: u64) -> Result<f64> {
    let model_dir = cairn_embed::locate_model_dir_for(None, &cairn_embed::E5_SMALL)?;
    let model = cairn_embed::E5Embedder::load(&model_dir, &cairn_embed::E5Options::default())?;
    // One untimed query: the first call sets up what later calls reuse.
    model.embed_query(&queries[0])?;
    let clock = Instant::now();
    let mut embedded = 0usize;
    while clock.elapsed() < Duration::from_secs(seconds) {
        model.embed_query(&queries[embedded % queries.len()])?;
        embedded += 1;
    }
    Ok(embedded as f64 / clock.elapsed().as_secs_f64())
}

/// Waits until the server answers a hybrid recall with its model (no `degraded` in the
/// answer), asked through the real CLI as a remote client.
fn wait_until_hybrid(cairn: &Path, url: &str, token: &str, dir: &Path, query: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let output = Command::new(cairn)
            .args(["--json", "recall", "--no-touch", "--mode", "hybrid", query])
            .current_dir(dir)
            .env("CAIRN_URL", url)
            .env("CAIRN_TOKEN", token)
            .env_remove("CAIRN_DB")
            .env_remove("CAIRN_DAEMON")
            .output()
            .context("cairn recall against the server")?;
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if output.status.success() && answer["degraded"].is_null() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the server answered no hybrid recall within 600 s: {answer} {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs wrk and returns its `CAIRN_RESULT` object.
fn wrk(args: &ServeArgs, url: &str, script: &Path, seconds: u64) -> Result<Value> {
    let output = Command::new("wrk")
        .arg(format!("-t{}", args.threads))
        .arg(format!("-c{}", args.clients))
        .arg(format!("-d{seconds}s"))
        .args(["--timeout", "10s", "--latency", "-s"])
        .arg(script)
        .arg(url)
        .output()
        .context("run wrk")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "wrk failed ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CAIRN_RESULT "))
        .with_context(|| format!("wrk printed no result line: {stdout}"))?;
    serde_json::from_str(line).with_context(|| format!("wrk's result line: {line}"))
}

pub fn run(args: &ServeArgs) -> Result<()> {
    if args.size == 0 || args.clients == 0 || args.threads == 0 || args.seconds == 0 {
        bail!("--size, --clients, --threads and --seconds must be at least 1");
    }
    if args.write_percent > 100 {
        bail!("--write-percent is a share of requests: 0 to 100");
    }
    let mut run = Run::start("serve");
    if machine::which("wrk").is_none() {
        let status = Command::new("bash")
            .arg(workspace_root().join("scripts/install-wrk.sh"))
            .status()
            .context("run scripts/install-wrk.sh")?;
        if !status.success() {
            bail!("wrk is not installed and scripts/install-wrk.sh could not install it");
        }
    }
    let wrk_version = machine::version_of("wrk", "-v").unwrap_or_default();
    let cairn = process::locate_cairn(args.cairn.as_deref())?;
    let words = vocabulary(args.seed);
    let work_dir = WorkDir::new("serve", None, args.keep)?;
    let dir = work_dir.path().to_path_buf();
    let db = dir.join("brain.db");

    run.phase(&format!("seed {}", args.size));
    let cached = args
        .seed_cache
        .as_ref()
        .map(|cache| cache.join(format!("serve-n{}-{:x}.db", args.size, args.seed)));
    match cached.as_ref().filter(|c| c.exists()) {
        Some(cached) => {
            std::fs::copy(cached, &db).context("copy the cached seeded brain")?;
        }
        None => {
            let took = seed_brain(&db, args.size, &words, args.seed)?;
            run.say(&format!(
                "seeded {} memories in {:.1} s",
                args.size,
                took.as_secs_f64()
            ));
            if let Some(cached) = &cached {
                if let Some(parent) = cached.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::copy(&db, cached)?;
            }
        }
    }
    let created = Command::new(&cairn)
        .args([
            "--json",
            "token",
            "create",
            "--name",
            "load",
            "--project",
            PROJECT,
        ])
        .args(["--role", "write"])
        .env("CAIRN_DB", &db)
        .current_dir(&dir)
        .output()
        .context("cairn token create")?;
    if !created.status.success() {
        bail!(
            "cairn token create failed: {}",
            String::from_utf8_lossy(&created.stderr)
        );
    }
    let created: Value = serde_json::from_slice(&created.stdout)?;
    let token = created["token"]
        .as_str()
        .context("no token in `cairn token create --json`")?
        .to_string();
    let mut rng = Rng::new(args.seed ^ 0x5e7e);
    let queries: Vec<String> = (0..500)
        .map(|_| {
            let n = 2 + rng.below(3);
            sentence(&mut rng, &words, n)
        })
        .collect();
    let script_path = dir.join("load.lua");
    std::fs::write(
        &script_path,
        script(
            &token,
            &queries,
            args.write_percent,
            args.seed,
            &args.recall_mode,
        ),
    )?;

    let hybrid = args.recall_mode == "hybrid";
    let model_rate = if hybrid {
        run.phase("vectors");
        let (model_id, dimension) = seed_vectors(&db, &words, &mut rng)?;
        run.say(&format!(
            "{} vectors ({model_id}, {dimension} dims)",
            args.size
        ));
        run.phase(&format!("the model alone, {} s", args.seconds));
        let rate = model_throughput(&queries, args.seconds)?;
        run.say(&format!("e5 alone: {rate:.1} queries/s"));
        Some(rate)
    } else {
        None
    };

    let server = Server::start(&cairn, &db, &dir, &args.server_args, hybrid)?;
    run.say(&format!("cairn serve at {}", server.url));
    if hybrid {
        run.phase("model load");
        wait_until_hybrid(&cairn, &server.url, &token, &dir, &queries[0])?;
    }
    let warmup = (args.seconds / 4).max(3);
    run.phase(&format!("warm-up {warmup} s"));
    let warm = wrk(args, &server.url, &script_path, warmup)?;
    if hybrid {
        // wrk leaves its last requests in flight when it stops; hybrid ones queue for the model
        // for seconds, so the measured run would start behind them. One more recall through
        // the CLI answers once they are done.
        wait_until_hybrid(&cairn, &server.url, &token, &dir, &queries[1])?;
    }
    run.phase(&format!(
        "measured {} s, {} clients",
        args.seconds, args.clients
    ));
    let cpu_before = server.cpu_seconds();
    let measured = wrk(args, &server.url, &script_path, args.seconds)?;
    let cpu_after = server.cpu_seconds();
    let server_rss = server.rss_mb();
    drop(server);

    let requests = measured["requests"].as_f64().unwrap_or(0.0);
    let seconds = measured["duration_us"].as_f64().unwrap_or(1.0) / 1e6;
    let rps = requests / seconds;
    let ms = |key: &str| measured["latency_us"][key].as_f64().unwrap_or(f64::NAN) / 1000.0;
    let errors = ["connect", "read", "write", "timeout"]
        .iter()
        .map(|k| measured["errors"][k].as_u64().unwrap_or(0))
        .sum::<u64>()
        + measured["not_200"].as_u64().unwrap_or(0);
    let server_cpu = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => Some(round3(b - a)),
        _ => None,
    };
    let share_of_model = model_rate.map(|rate| rps / rate);
    let (met, target) = match share_of_model {
        Some(share) => (
            share >= 0.8 && errors == 0,
            "hybrid requests/s ≥ 80 % of the model's own query throughput, zero errors",
        ),
        None => (
            rps >= 800.0 && ms("p99") <= 50.0 && errors == 0,
            "≥ 800 requests/s, p99 ≤ 50 ms, zero errors",
        ),
    };
    let load = machine::load_json();
    let results = json!({
        "requests_per_second": round3(rps),
        "latency_ms": {
            "p50": round3(ms("p50")), "p90": round3(ms("p90")), "p99": round3(ms("p99")),
            "p99_9": round3(ms("p99_9")), "mean": round3(ms("mean")), "max": round3(ms("max")),
        },
        "errors": errors,
        "wrk": measured,
        "warm_up": warm,
        "server_cpu_seconds": server_cpu,
        "server_cpu_per_request_ms": server_cpu.map(|cpu| round3(cpu * 1000.0 / requests.max(1.0))),
        "server_peak_rss_mb": server_rss.map(round3),
        "model_queries_per_second": model_rate.map(round3),
        "share_of_model_throughput": share_of_model.map(round3),
        "target": target,
        "met": met,
    });
    let parameters = json!({
        "memories": args.size, "clients": args.clients, "wrk_threads": args.threads,
        "seconds": args.seconds, "warm_up_seconds": warmup, "write_percent": args.write_percent,
        "recall_mode": args.recall_mode,
        "embedder": if hybrid { "e5 (the default model)" } else { "none" },
        "seed": args.seed,
        "load_generator": wrk_version, "cairn": cairn.display().to_string(),
        "server_args": args.server_args,
    });
    let body = format!(
        "\n## `cairn serve` under load\n\n{} memories, {} keep-alive clients (wrk, {} threads), {} s measured after a {} s warm-up; {} % `POST /v1/remember`, the rest {} `POST /v1/recall`.{}\n\n| requests/s | p50 | p90 | p99 | p99.9 | errors | server CPU | target |\n|---|---|---|---|---|---|---|---|\n| {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} | {} |\n\nLoad average at the end: {}.\n",
        args.size,
        args.clients,
        args.threads,
        args.seconds,
        warmup,
        args.write_percent,
        args.recall_mode,
        match (model_rate, share_of_model) {
            (Some(rate), Some(share)) => format!(
                " The e5 model alone embedded {rate:.1} queries/s (the same queries, one after another, in the benchmark process before the server started); the server answered {:.0} % of that (target ≥ 80 %).",
                share * 100.0
            ),
            _ => String::new(),
        },
        rps,
        ms("p50"),
        ms("p90"),
        ms("p99"),
        ms("p99_9"),
        errors,
        server_cpu.map_or("–".into(), |cpu| format!("{cpu:.1} s")),
        if met { "met" } else { "MISSED" },
        cairn_bench::results::load_text(&load),
    );
    run.finish(&args.out, parameters, results, &body)?;
    Ok(())
}
