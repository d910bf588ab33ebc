//! cairn-bench-agent: latency of cairn's agent surfaces, measured whole-process the way a
//! client pays for them — spawn the real `cairn` binary, hand it the hook JSON on stdin, wait
//! for it to exit — and the MCP `recall` round trip on a warm `cairn mcp` server.
//!
//! Seeded data (a fixed xorshift seed, a synthetic vocabulary), a fixed project, brains of
//! 10,000 and 100,000 memories. Results go to `bench/results/agent-<date>.json` and `.md`.
//!
//! Usage: see [`USAGE`] (build both in release mode first:
//! `cargo build --release -p cairn-cli -p cairn-bench-agent`).

use cairn_core::record::MemoryType;
use cairn_engine::RememberRequest;
use cairn_engine::remember::prepare;
use cairn_store::Store;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: cairn-bench-agent [--cairn PATH] [--sizes 10000,100000] [--runs N] [--out DIR]
                         [--only prompt,start,stop,mcp] [--seed-cache DIR] [--keep]

  --cairn PATH       the cairn binary (default: next to this program)
  --sizes LIST       brain sizes in memories (default 10000,100000)
  --runs N           samples per measurement (default 200; session-start at most 100, stop 60)
  --out DIR          where agent-<date>.{json,md} go (default bench/results); a file of that
                     name is never overwritten: later runs of the day are agent-<date>b, c, ...
  --only LIST        measure only these: prompt (user-prompt-submit), start (session-start),
                     stop, mcp (the warm MCP recall)
  --seed-cache DIR   keep each seeded brain in DIR and start later runs from a copy of it
                     (the runs then start from identical files; delete DIR when the schema or
                     the seeding changes)
  --keep             keep the work directory (brains, transcript) for a look afterwards
";
const PROJECT: &str = "bench-project";
const SEED: u64 = 0x5EED_CA1B_2026_1130;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A synthetic vocabulary: pronounceable words, Zipf-ish use (low indexes are common).
fn vocabulary() -> Vec<String> {
    let syllables = [
        "ka", "lo", "mi", "ner", "tor", "qua", "zen", "ri", "sol", "vex", "dra", "pin", "gul",
        "fe", "mon", "tas", "bri", "cor", "dun", "hal",
    ];
    let mut rng = Rng(SEED);
    (0..6000)
        .map(|_| {
            let n = 2 + rng.below(3);
            (0..n)
                .map(|_| syllables[rng.below(syllables.len())])
                .collect::<String>()
        })
        .collect()
}

fn zipf_word<'a>(rng: &mut Rng, words: &'a [String]) -> &'a str {
    // squaring a uniform draw skews toward common words
    let u = (rng.next() % 1_000_000) as f64 / 1_000_000.0;
    &words[((u * u) * words.len() as f64) as usize % words.len()]
}

fn sentence(rng: &mut Rng, words: &[String], n: usize) -> String {
    (0..n)
        .map(|_| zipf_word(rng, words))
        .collect::<Vec<_>>()
        .join(" ")
}

fn sentence_n(rng: &mut Rng, words: &[String], base: usize, spread: usize) -> String {
    let n = base + rng.below(spread);
    sentence(rng, words, n)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[derive(Debug, Clone)]
struct Stat {
    name: String,
    size: usize,
    runs: usize,
    p50_ms: f64,
    p95_ms: f64,
    max_ms: f64,
    target: String,
    pass: bool,
}

fn stat(
    name: &str,
    size: usize,
    mut samples: Vec<f64>,
    target_p50: Option<f64>,
    target_p95: f64,
) -> Stat {
    samples.sort_by(f64::total_cmp);
    let p50 = percentile(&samples, 50.0);
    let p95 = percentile(&samples, 95.0);
    let mut target = format!("p95 ≤ {target_p95} ms");
    let mut pass = p95 <= target_p95;
    if let Some(t) = target_p50 {
        target = format!("p50 ≤ {t} ms, {target}");
        pass &= p50 <= t;
    }
    let stat = Stat {
        name: name.to_string(),
        size,
        runs: samples.len(),
        p50_ms: round(p50),
        p95_ms: round(p95),
        max_ms: round(samples.last().copied().unwrap_or(f64::NAN)),
        target,
        pass,
    };
    eprintln!(
        "  {:<40} n={:<6} p50 {:>7.2} ms  p95 {:>7.2} ms  ({}{})",
        stat.name,
        stat.size,
        stat.p50_ms,
        stat.p95_ms,
        stat.target,
        if stat.pass { ", met" } else { ", MISSED" }
    );
    stat
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Seeds a brain of `size` memories straight through the store (the write path's `prepare`,
/// then one insert per record in a few large transactions).
fn seed_brain(path: &Path, size: usize, words: &[String]) -> Duration {
    let started = Instant::now();
    let mut store = Store::open(path).expect("open the bench brain");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let mut rng = Rng(SEED ^ size as u64);
    let types = [
        MemoryType::Note,
        MemoryType::Fact,
        MemoryType::Gotcha,
        MemoryType::Decision,
        MemoryType::Episode,
        MemoryType::Procedure,
        MemoryType::Note,
        MemoryType::Episode,
    ];
    let batch = 5_000;
    let mut written = 0;
    while written < size {
        let end = (written + batch).min(size);
        store
            .write(|tx| {
                for i in written..end {
                    let memory_type = match i {
                        0..=19 => MemoryType::Policy,
                        20..=39 => MemoryType::Preference,
                        _ => types[rng.below(types.len())],
                    };
                    let mut request = RememberRequest::new(
                        memory_type,
                        format!("{} (record {i})", sentence_n(&mut rng, words, 25, 20)),
                    );
                    if i % 3 == 0 {
                        request.title = Some(sentence(&mut rng, words, 5));
                    }
                    request.at = Some(cairn_core::time::format_ts(
                        now - chrono::Duration::minutes((size - i) as i64),
                    ));
                    let prepared = prepare(&request, Some(PROJECT.to_string()), now, None)
                        .expect("seeded text is valid");
                    tx.insert_memory(&prepared.memory, prepared.title_norm.as_deref())?;
                }
                Ok::<_, cairn_store::StoreError>(())
            })
            .expect("seed batch");
        written = end;
    }
    store.optimize().expect("optimize");
    drop(store);
    started.elapsed()
}

fn cairn_command(cairn: &Path, db: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(cairn);
    cmd.current_dir(cwd)
        .env("CAIRN_DB", db)
        .env("CAIRN_PROJECT", PROJECT)
        // No embedder, whatever model is installed: the hooks never embed, and a `cairn mcp`
        // that finds a model embeds every seeded record in the background while it is timed.
        .env("CAIRN_EMBEDDER", "none")
        .env_remove("CAIRN_READ_ONLY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// Wall time of one whole-process hook: spawn, write the JSON, wait for exit.
fn time_hook(cairn: &Path, db: &Path, cwd: &Path, event: &str, payload: &str) -> (f64, String) {
    let started = Instant::now();
    let mut child = cairn_command(cairn, db, cwd)
        .args(["hook", event])
        .spawn()
        .expect("spawn cairn");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    assert!(output.status.success());
    (elapsed, String::from_utf8_lossy(&output.stdout).to_string())
}

fn error_log(db: &Path) -> String {
    std::fs::read_to_string(db.parent().unwrap().join("hook-errors.log")).unwrap_or_default()
}

/// A Claude Code transcript of about `bytes` bytes; returns it with the byte offset where its
/// last `tail_turns` turns begin.
fn transcript(words: &[String], bytes: usize, tail_turns: usize) -> (String, u64) {
    let mut rng = Rng(SEED ^ 0x7a);
    let mut turns: Vec<String> = Vec::new();
    let mut total = 0;
    while total < bytes {
        let user = json!({"type": "user", "sessionId": "bench", "uuid": format!("u{}", turns.len()),
            "timestamp": "2026-11-30T10:00:00.000Z",
            "message": {"role": "user", "content": sentence_n(&mut rng, words, 30, 40)}});
        let tool = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": sentence(&mut rng, words, 200)}]}});
        let assistant = json!({"type": "assistant", "requestId": "r", "uuid": format!("a{}", turns.len()),
            "message": {"role": "assistant", "model": "bench", "content": [
                {"type": "thinking", "thinking": sentence(&mut rng, words, 40)},
                {"type": "text", "text": sentence_n(&mut rng, words, 60, 80)},
                {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}}]}});
        let turn = format!("{user}\n{tool}\n{assistant}\n");
        total += turn.len();
        turns.push(turn);
    }
    let head: usize = turns[..turns.len() - tail_turns]
        .iter()
        .map(String::len)
        .sum();
    (turns.concat(), head as u64)
}

struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Mcp {
    fn start(cairn: &Path, db: &Path, cwd: &Path) -> Mcp {
        let mut child = cairn_command(cairn, db, cwd)
            .arg("mcp")
            .spawn()
            .expect("cairn mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
        };
        mcp.request(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}));
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "mcp closed");
            let value: Value = serde_json::from_str(&line).expect("protocol line");
            if value["id"] == json!(id) {
                return value;
            }
        }
    }
}

fn git_revision() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return;
    }
    let known = [
        "--cairn",
        "--sizes",
        "--runs",
        "--out",
        "--only",
        "--seed-cache",
    ];
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if known.contains(&arg.as_str()) {
            rest.next();
        } else if arg != "--keep" {
            eprint!("unknown argument {arg:?}\n{USAGE}");
            std::process::exit(2);
        }
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let exe_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let cairn = flag("--cairn")
        .map(PathBuf::from)
        .unwrap_or_else(|| exe_dir.join("cairn"));
    assert!(
        cairn.exists(),
        "no cairn binary at {} (build it: cargo build --release -p cairn-cli)",
        cairn.display()
    );
    // The hooks run in the brain's directory: a relative path would not be found from there.
    let cairn = cairn.canonicalize().expect("the cairn binary's path");
    let sizes: Vec<usize> = flag("--sizes")
        .unwrap_or_else(|| "10000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("--sizes 10000,100000"))
        .collect();
    let runs: usize = flag("--runs").map(|r| r.parse().unwrap()).unwrap_or(200);
    let out_dir = PathBuf::from(flag("--out").unwrap_or_else(|| "bench/results".into()));
    let only: Vec<String> = flag("--only")
        .unwrap_or_else(|| "prompt,start,stop,mcp".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    if let Some(unknown) = only
        .iter()
        .find(|o| !["prompt", "start", "stop", "mcp"].contains(&o.as_str()))
    {
        eprint!("--only {unknown:?}: expected prompt, start, stop or mcp\n{USAGE}");
        std::process::exit(2);
    }
    let measure = |what: &str| only.iter().any(|o| o == what);
    let seed_cache = flag("--seed-cache").map(PathBuf::from);
    let words = vocabulary();
    let work = std::env::temp_dir().join(format!("cairn-bench-agent-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let load_before = load_average();
    eprintln!(
        "cairn-bench-agent: {} (load {load_before})",
        cairn.display()
    );
    let mut stats: Vec<Stat> = Vec::new();
    let mut seeding = Vec::new();
    for &size in &sizes {
        let dir = work.join(format!("n{size}"));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("brain.db");
        let cached = seed_cache
            .as_ref()
            .map(|cache| cache.join(format!("agent-n{size}-{SEED:x}.db")));
        match cached.as_ref().filter(|c| c.exists()) {
            Some(cached) => {
                std::fs::copy(cached, &db).expect("copy the cached seeded brain");
                eprintln!("seeded {size} memories: copied {}", cached.display());
            }
            None => {
                let took = seed_brain(&db, size, &words);
                let bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
                eprintln!(
                    "seeded {size} memories in {:.1} s ({:.1} MB)",
                    took.as_secs_f64(),
                    bytes as f64 / 1e6
                );
                seeding.push(json!({"size": size, "seconds": round(took.as_secs_f64()), "file_mb": round(bytes as f64 / 1e6)}));
                if let Some(cached) = &cached {
                    std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
                    std::fs::copy(&db, cached).expect("keep the seeded brain in --seed-cache");
                }
            }
        }
        let mut rng = Rng(SEED ^ 0xbeef ^ size as u64);
        let cwd = dir.clone();

        if measure("prompt") {
            // user-prompt-submit: prompts made of the corpus's words
            let prompt_payload = |prompt: &str| {
                json!({"session_id": "bench", "transcript_path": "/nonexistent", "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": prompt}).to_string()
            };
            let mut injected = 0;
            for _ in 0..10 {
                time_hook(
                    &cairn,
                    &db,
                    &dir,
                    "user-prompt-submit",
                    &prompt_payload(&sentence(&mut rng, &words, 10)),
                );
            }
            let samples: Vec<f64> = (0..runs)
                .map(|_| {
                    let prompt = format!(
                        "how do we handle {} again",
                        sentence_n(&mut rng, &words, 6, 8)
                    );
                    let (ms, out) = time_hook(
                        &cairn,
                        &db,
                        &dir,
                        "user-prompt-submit",
                        &prompt_payload(&prompt),
                    );
                    if !out.is_empty() {
                        injected += 1;
                    }
                    ms
                })
                .collect();
            eprintln!("  ({injected} of {runs} prompts got an injection)");
            stats.push(stat(
                "hook user-prompt-submit",
                size,
                samples.clone(),
                Some(60.0),
                150.0,
            ));
            stats.push(stat(
                "hook user-prompt-submit (lexical-only)",
                size,
                samples,
                None,
                30.0,
            ));
        }
        if measure("start") {
            // session-start: the brief
            let start_payload = json!({"session_id": "bench", "cwd": cwd, "hook_event_name": "SessionStart", "source": "startup"}).to_string();
            let samples: Vec<f64> = (0..runs.min(100))
                .map(|_| {
                    let (ms, out) = time_hook(&cairn, &db, &dir, "session-start", &start_payload);
                    assert!(
                        out.contains("cairn brief for project"),
                        "session-start gave no brief: {out}"
                    );
                    ms
                })
                .collect();
            stats.push(stat("hook session-start", size, samples, None, 200.0));
        }
        if measure("stop") {
            // stop: a 5 MB transcript already captured up to its last 20 turns
            let (text, head) = transcript(&words, 5 * 1024 * 1024, 20);
            let transcript_path = dir.join("session.jsonl");
            std::fs::write(&transcript_path, &text).unwrap();
            let stop_payload = json!({"session_id": "bench-stop", "transcript_path": transcript_path, "cwd": cwd, "hook_event_name": "Stop", "stop_hook_active": false}).to_string();
            let connection = rusqlite::Connection::open(&db).unwrap();
            let max_id: i64 = connection
                .query_row("SELECT max(id) FROM memories", [], |r| r.get(0))
                .unwrap();
            let reset = |connection: &rusqlite::Connection| {
                connection
                .execute_batch(&format!(
                    "DELETE FROM memories WHERE id > {max_id}; DELETE FROM inbox;
                     INSERT INTO capture_offsets (session_id, transcript_path, byte_offset, turns, updated_at)
                     VALUES ('bench-stop', '{}', {head}, 0, '2026-11-30T00:00:00Z')
                     ON CONFLICT (session_id) DO UPDATE SET byte_offset = excluded.byte_offset, transcript_path = excluded.transcript_path;",
                    transcript_path.display()
                ))
                .unwrap();
            };
            let mut captured = 0;
            let samples: Vec<f64> = (0..runs.min(60))
                .map(|_| {
                    reset(&connection);
                    let (ms, _) = time_hook(&cairn, &db, &dir, "stop", &stop_payload);
                    let n: i64 = connection
                        .query_row(
                            &format!("SELECT count(*) FROM memories WHERE id > {max_id}"),
                            [],
                            |r| r.get(0),
                        )
                        .unwrap();
                    captured = n;
                    ms
                })
                .collect();
            eprintln!("  (each stop captured {captured} episodes)");
            assert_eq!(
                captured,
                20,
                "the stop hook captured the last 20 turns: {}",
                error_log(&db)
            );
            stats.push(stat(
                "hook stop (5 MB transcript, 20 new turns)",
                size,
                samples,
                None,
                100.0,
            ));
            // and the common case: nothing new since the last capture
            let samples: Vec<f64> = (0..runs.min(60))
                .map(|_| time_hook(&cairn, &db, &dir, "stop", &stop_payload).0)
                .collect();
            stats.push(stat("hook stop (nothing new)", size, samples, None, 100.0));
            drop(connection);
        }
        if measure("mcp") {
            // MCP recall round trip on a warm server
            let mut mcp = Mcp::start(&cairn, &db, &dir);
            for id in 1..=20 {
                mcp.request(
                id,
                "tools/call",
                json!({"name": "recall", "arguments": {"query": sentence(&mut rng, &words, 6)}}),
            );
            }
            let samples: Vec<f64> = (0..runs.max(100))
                .map(|i| {
                    let query = sentence_n(&mut rng, &words, 4, 8);
                    let started = Instant::now();
                    let answer = mcp.request(
                        100 + i as i64,
                        "tools/call",
                        json!({"name": "recall", "arguments": {"query": query}}),
                    );
                    let ms = started.elapsed().as_secs_f64() * 1000.0;
                    assert_eq!(answer["result"]["isError"], false, "{answer}");
                    ms
                })
                .collect();
            drop(mcp.stdin);
            let _ = mcp.child.wait();
            stats.push(stat(
                "mcp recall round trip (warm)",
                size,
                samples,
                None,
                30.0,
            ));
        }
        let log = error_log(&db);
        assert!(
            log.is_empty(),
            "hooks logged errors during the benchmark: {log}"
        );
    }
    let load_after = load_average();
    let date = Utc::now().format("%Y-%m-%d").to_string();
    let results = json!({
        "program": "cairn-bench-agent",
        "date": date,
        "git": git_revision(),
        "binary": cairn.display().to_string(),
        "machine": {"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                    "load_before": load_before, "load_after": load_after},
        "seed": format!("{SEED:#x}"),
        "runs": runs,
        "seeding": seeding,
        "note": "whole-process wall time (spawn, hook JSON on stdin, exit); no embedder is wired in, so every recall is lexical (FTS5) and the lexical-only row is the same measurement checked against its own target",
        "results": stats.iter().map(|s| json!({
            "name": s.name, "memories": s.size, "runs": s.runs, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms,
            "max_ms": s.max_ms, "target": s.target, "met": s.pass})).collect::<Vec<_>>(),
    });
    std::fs::create_dir_all(&out_dir).unwrap();
    // Never overwrite an earlier result: a later run of the same day is agent-<date>b, c, …
    let name = std::iter::once(String::new())
        .chain(('b'..='z').map(String::from))
        .map(|suffix| format!("agent-{date}{suffix}"))
        .find(|name| {
            !out_dir.join(format!("{name}.json")).exists()
                && !out_dir.join(format!("{name}.md")).exists()
        })
        .expect("fewer than 26 results a day");
    let json_path = out_dir.join(format!("{name}.json"));
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&results).unwrap() + "\n",
    )
    .unwrap();
    let mut md = format!(
        "# cairn-bench-agent {date} ({name})\n\nGit {} · {} CPUs · load {load_before} → {load_after} · seed {SEED:#x} · release build\n\n\
         Whole-process wall time: spawn `cairn hook …`, write the hook JSON to stdin, wait for exit. \
         No embedder is wired in, so recall is lexical-only (FTS5).\n\n\
         | measurement | memories | runs | p50 ms | p95 ms | max ms | target | met |\n|---|---:|---:|---:|---:|---:|---|---|\n",
        git_revision(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    for s in &stats {
        md.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {} |\n",
            s.name,
            s.size,
            s.runs,
            s.p50_ms,
            s.p95_ms,
            s.max_ms,
            s.target,
            if s.pass { "yes" } else { "no" }
        ));
    }
    let given: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    md.push_str(&format!(
        "\nReproduce: `cargo build --release -p cairn-cli -p cairn-bench-agent && target/release/cairn-bench-agent {}`\n",
        given.join(" ")
    ));
    std::fs::write(out_dir.join(format!("{name}.md")), md).unwrap();
    if args.iter().any(|a| a == "--keep") {
        eprintln!("kept {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    eprintln!("wrote {}", json_path.display());
}
