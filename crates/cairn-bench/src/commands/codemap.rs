//! `cairn-bench codemap`: the numbers of the code map (issue 17), whole process, on a tree of
//! real code.
//!
//! Copies the first `--files` source files (`.rs .c .h .py .js`, by path, outside `tests/`,
//! `benches/`, `target/`, `vendor/`, `build/`, at most 1 MiB) of `--source` (default: the
//! cargo registry's source cache) into a new git repository with one commit, then times the
//! real `cairn` binary:
//!
//! 1. the first full map into a fresh brain (target ≤ 15 s; its peak RSS ≤ 500 MB),
//! 2. an up-to-date map, `--runs` times,
//! 3. the map after one file changed (a function appended to a different file each time, so
//!    its definitions change too: target ≤ 150 ms), `--edits` times; with `--baseline`, that
//!    binary is timed on the same edits too, alternating, on a brain of its own,
//! 4. `hook session-start` with the code map section on the up-to-date map, `--runs` times
//!    (target p95 ≤ 200 ms; a hook that gave up at its deadline on a loaded machine is
//!    counted, not fatal),
//! 5. determinism: a second fresh brain maps the same tree; the two maps (`text`, `files`) and
//!    the two stored indexes (every file's row and its parse's graph part) must be
//!    byte-identical,
//!
//! and writes `bench/results/codemap-<stamp>.json` and `.md`.

use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::process;
use cairn_bench::results::Run;
use cairn_bench::stats::{Summary, round1};
use cairn_bench::work::WorkDir;
use cairn_store::Store;
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const PROJECT: &str = "bench";
const EXTENSIONS: &[&str] = &["rs", "c", "h", "py", "js"];
const SKIPPED: &[&str] = &["tests", "benches", "target", "vendor", "build"];
const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Args)]
pub struct CodemapArgs {
    /// Source files in the tree.
    #[arg(long, default_value_t = 5_000)]
    files: usize,
    /// Where the files are copied from (default: ~/.cargo/registry/src).
    #[arg(long, value_name = "DIR")]
    source: Option<PathBuf>,
    /// Samples of the up-to-date map and of `hook session-start`.
    #[arg(long, default_value_t = 30)]
    runs: usize,
    /// One-file changes, each timed.
    #[arg(long, default_value_t = 15)]
    edits: usize,
    /// The map's budget in tokens.
    #[arg(long, default_value_t = 1024)]
    budget: usize,
    /// The cairn binary (default: `cargo build --release -p cairn-cli` and use its path).
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Another cairn binary (say, the head's) timed on the same edits, alternating with
    /// `--cairn`, each on a brain of its own: before and after side by side in one run.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Where the tree and the brains are written (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep the tree and the brains instead of deleting them.
    #[arg(long)]
    keep: bool,
}

/// Every file under `dir` (symlinks not followed), depth first in name order.
fn collect(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>, want: usize) {
    if out.len() >= want {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= want {
            return;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED.contains(&name.as_str()) {
                collect(&entry.path(), &path, out, want);
            }
        } else if kind.is_file()
            && name
                .rsplit_once('.')
                .is_some_and(|(_, ext)| EXTENSIONS.contains(&ext))
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_BYTES)
        {
            out.push((path, entry.path()));
        }
    }
}

fn git(tree: &Path, args: &[&str]) -> Result<()> {
    let output = Command::new("git")
        .args(args)
        .current_dir(tree)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .env("GIT_AUTHOR_DATE", "2026-11-30T12:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-11-30T12:00:00Z")
        .output()
        .context("cannot run git")?;
    if !output.status.success() {
        bail!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The tree: the first `want` source files of `source`, copied, committed once.
fn build_tree(source: &Path, tree: &Path, want: usize) -> Result<(usize, u64)> {
    let mut files = Vec::new();
    collect(source, "", &mut files, want);
    if files.len() < want {
        bail!(
            "{} holds only {} source files ({}) outside {:?}; give --source DIR or fewer --files",
            source.display(),
            files.len(),
            EXTENSIONS.join(" "),
            SKIPPED
        );
    }
    let mut bytes = 0;
    for (rel, from) in &files {
        let to = tree.join(rel);
        std::fs::create_dir_all(to.parent().expect("a file's parent"))?;
        bytes += std::fs::copy(from, &to).with_context(|| format!("copy {}", from.display()))?;
    }
    git(tree, &["init", "-q"])?;
    // The copied crates carry their own .gitignore files: commit what was copied, all of it.
    git(tree, &["add", "-A", "-f", "."])?;
    git(tree, &["commit", "-q", "-m", "the benchmark tree"])?;
    Ok((files.len(), bytes))
}

fn cairn(cairn: &Path, db: &Path, tree: &Path) -> Command {
    let mut command = Command::new(cairn);
    command
        .current_dir(tree)
        .env("CAIRN_DB", db)
        .env("CAIRN_PROJECT", PROJECT)
        .env("CAIRN_EMBEDDER", "none")
        // The file's own latency: no warm daemon (`cairn-bench daemon` measures that).
        .env("CAIRN_DAEMON", "off")
        .env_remove("CAIRN_READ_ONLY")
        .stdin(Stdio::null());
    command
}

/// One whole-process `cairn codemap --json`: wall ms, CPU ms, the answer.
fn map_once(
    binary: &Path,
    db: &Path,
    tree: &Path,
    budget: usize,
    refresh_ms: u64,
) -> Result<(f64, f64, Value)> {
    let mut command = cairn(binary, db, tree);
    command.args([
        "--json",
        "codemap",
        "--budget",
        &budget.to_string(),
        "--refresh-ms",
        &refresh_ms.to_string(),
    ]);
    let (wall, ticks, output) = process::timed(command)?;
    let answer: Value = serde_json::from_slice(&output.stdout).context("codemap's JSON")?;
    Ok((wall, ticks_ms(ticks), answer))
}

fn ticks_ms(ticks: u64) -> f64 {
    ticks as f64 * 1000.0 / machine::clock_ticks()
}

/// The full map under GNU time: wall ms, CPU ms, peak RSS MB, the answer.
fn full_map(
    binary: &Path,
    db: &Path,
    tree: &Path,
    budget: usize,
    scratch: &Path,
) -> Result<(f64, f64, Option<f64>, Value)> {
    let mut command = cairn(binary, db, tree);
    command.args([
        "--json",
        "codemap",
        "--budget",
        &budget.to_string(),
        "--refresh-ms",
        "600000",
    ]);
    let cpu_before = machine::children_cpu_ticks().unwrap_or(0);
    let started = Instant::now();
    let (output, rss) = process::with_peak_rss(&command, scratch)?;
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    let cpu = machine::children_cpu_ticks()
        .unwrap_or(0)
        .saturating_sub(cpu_before);
    let answer: Value = serde_json::from_slice(&output.stdout).context("codemap's JSON")?;
    if answer["stale"] != false {
        bail!("the full map came back stale: {}", answer["refresh"]);
    }
    Ok((wall, ticks_ms(cpu), rss, answer))
}

fn session_start(binary: &Path, db: &Path, tree: &Path) -> Result<(f64, f64, String)> {
    let payload = json!({"session_id": "bench", "transcript_path": "/nonexistent",
        "cwd": tree, "hook_event_name": "SessionStart", "source": "startup"})
    .to_string();
    let cpu_before = machine::children_cpu_ticks().unwrap_or(0);
    let started = Instant::now();
    let mut child = cairn(binary, db, tree)
        .args(["hook", "session-start"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn cairn hook session-start")?;
    child
        .stdin
        .take()
        .context("the hook's stdin")?
        .write_all(payload.as_bytes())?;
    let output = child.wait_with_output()?;
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    let cpu = machine::children_cpu_ticks()
        .unwrap_or(0)
        .saturating_sub(cpu_before);
    if !output.status.success() {
        bail!("cairn hook session-start exited with {}", output.status);
    }
    Ok((
        wall,
        ticks_ms(cpu),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ))
}

fn summary_json(wall: &[f64], cpu: &[f64]) -> Value {
    let w = Summary::of(wall);
    let c = Summary::of(cpu);
    json!({"n": w.count, "wall_ms": w.json(), "cpu_ms": c.json()})
}

/// Appends a function to the `i`-th Rust file of the tree (a different one each time): its
/// definitions change, so do its references.
/// The Rust files the first full map kept (a file the content checks left out — generated,
/// minified — would re-parse nothing when changed).
fn mapped_rust_files(db: &Path) -> Result<Vec<String>> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("open {}", db.display()))?;
    let mut statement =
        conn.prepare("SELECT path FROM codemap_files WHERE lang = 'rust' ORDER BY path")?;
    let paths = statement
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(paths)
}

fn edit_one(tree: &Path, rust_files: &[String], i: usize) -> Result<String> {
    let rel = &rust_files[(i * 7919) % rust_files.len()];
    let path = tree.join(rel);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    writeln!(
        file,
        "\npub fn bench_edit_{i}(value: usize) -> usize {{\n    value.saturating_add({i})\n}}"
    )?;
    Ok(rel.clone())
}

pub fn run(args: &CodemapArgs) -> Result<()> {
    if args.files == 0 || args.runs == 0 || args.edits == 0 {
        bail!("--files, --runs and --edits need at least 1");
    }
    let mut run = Run::start("codemap");
    let binary = process::locate_cairn(args.cairn.as_deref())?;
    let source = match &args.source {
        Some(dir) => dir.clone(),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set: give --source DIR")?;
            PathBuf::from(home).join(".cargo/registry/src")
        }
    };
    let work_dir = WorkDir::new("codemap", args.work_dir.as_deref(), args.keep)?;
    let work = work_dir.path().to_path_buf();
    let tree = work.join("tree");
    std::fs::create_dir_all(&tree)?;
    run.say(&format!("cairn binary {}", binary.display()));

    run.phase("building the tree");
    let (copied, bytes) = build_tree(&source, &tree, args.files)?;
    run.say(&format!(
        "{copied} files, {:.1} MB, from {}",
        bytes as f64 / 1e6,
        source.display()
    ));
    let db = work.join("a.db");

    run.phase("first full map");
    let (full_wall, full_cpu, full_rss, first) =
        full_map(&binary, &db, &tree, args.budget, &work.join("time-a.txt"))?;
    run.say(&format!(
        "full map: {:.0} ms wall, {:.0} ms CPU, peak RSS {:?} MB, {}",
        full_wall, full_cpu, full_rss, first["refresh"]
    ));

    run.phase("up-to-date map");
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    let mut up_to_date_text = String::new();
    for _ in 0..args.runs {
        let (w, c, answer) = map_once(&binary, &db, &tree, args.budget, 20_000)?;
        if answer["refresh"]["parsed"] != 0 || answer["stale"] != false {
            bail!(
                "an up-to-date map parsed or was stale: {}",
                answer["refresh"]
            );
        }
        up_to_date_text = answer["text"].as_str().unwrap_or_default().to_string();
        wall.push(w);
        cpu.push(c);
    }
    let up_to_date = summary_json(&wall, &cpu);
    run.say(&format!("up to date: {up_to_date}"));

    run.phase("hook session-start");
    let (mut hook_wall, mut hook_cpu) = (Vec::new(), Vec::new());
    let mut briefs = Vec::new();
    for _ in 0..args.runs {
        let (w, c, out) = session_start(&binary, &db, &tree)?;
        hook_wall.push(w);
        hook_cpu.push(c);
        briefs.push(out);
    }
    // On a loaded machine the hook can give up at its internal deadline (an empty brief, in
    // hook-errors.log): counted and reported, not fatal; a brief without the section is.
    let has_map =
        |brief: &str| brief.contains("## Code map") && !brief.contains("over the brief's");
    let gave_up = briefs.iter().filter(|b| b.trim().is_empty()).count();
    if let Some(brief) = briefs.iter().find(|b| !b.trim().is_empty() && !has_map(b)) {
        bail!("the session-start brief has no code map section: {brief}");
    }
    if gave_up == briefs.len() {
        run.say("every session-start hook gave up at its deadline (see hook-errors.log)");
    }
    let mut hook = summary_json(&hook_wall, &hook_cpu);
    hook["gave_up"] = json!(gave_up);
    run.say(&format!("session-start: {hook}"));

    // The baseline's brain, filled from the same tree before the edits.
    let db_base = work.join("base.db");
    if let Some(baseline) = &args.baseline {
        run.phase("the baseline's full map");
        full_map(
            baseline,
            &db_base,
            &tree,
            args.budget,
            &work.join("time-base.txt"),
        )?;
    }

    run.phase("one file changed");
    let rust_files = mapped_rust_files(&db)?;
    if rust_files.is_empty() {
        bail!("the tree holds no Rust file to change");
    }
    let (mut edit_wall, mut edit_cpu) = (Vec::new(), Vec::new());
    let (mut base_wall, mut base_cpu) = (Vec::new(), Vec::new());
    let mut same_maps = true;
    for i in 0..args.edits {
        let changed = edit_one(&tree, &rust_files, i)?;
        // Alternating: the baseline first on odd edits, so neither always runs second.
        let mut order: Vec<(&Path, &Path, bool)> = vec![(&binary, &db, false)];
        if let Some(baseline) = &args.baseline {
            order.push((baseline, &db_base, true));
            if i % 2 == 1 {
                order.reverse();
            }
        }
        let mut texts = Vec::new();
        for (bin, brain, is_base) in order {
            let (w, c, answer) = map_once(bin, brain, &tree, args.budget, 20_000)?;
            if answer["refresh"]["parsed"] != 1 || answer["stale"] != false {
                bail!(
                    "changing {changed} re-parsed {} files (stale {})",
                    answer["refresh"]["parsed"],
                    answer["stale"]
                );
            }
            texts.push(answer["text"].clone());
            if is_base {
                base_wall.push(w);
                base_cpu.push(c);
            } else {
                edit_wall.push(w);
                edit_cpu.push(c);
            }
        }
        same_maps &= texts.windows(2).all(|t| t[0] == t[1]);
    }
    let one_file = summary_json(&edit_wall, &edit_cpu);
    run.say(&format!("one file changed: {one_file}"));
    let baseline_one_file = args.baseline.as_ref().map(|_| {
        let summary = summary_json(&base_wall, &base_cpu);
        run.say(&format!(
            "one file changed, baseline: {summary} (same map text: {same_maps})"
        ));
        summary
    });

    run.phase("determinism");
    // Undo the edits, so the second brain sees the committed tree.
    git(&tree, &["checkout", "-q", "--", "."])?;
    let (_, _, again_a) = map_once(&binary, &db, &tree, args.budget, 600_000)?;
    let db_b = work.join("b.db");
    let (_, _, _, first_b) =
        full_map(&binary, &db_b, &tree, args.budget, &work.join("time-b.txt"))?;
    let (_, _, again_b) = map_once(&binary, &db_b, &tree, args.budget, 600_000)?;
    let same_text = again_a["text"] == again_b["text"] && first["text"] == first_b["text"];
    let same_files =
        serde_json::to_string(&again_a["files"])? == serde_json::to_string(&again_b["files"])?;
    // Every stored file, in path order: its path, language, content hash and graph part.
    let index_of = |db: &Path| -> Result<Vec<u8>> {
        let store = Store::open(db)?;
        let mut out = Vec::new();
        for (meta, graph) in store.reader().codemap_graphs(PROJECT)? {
            for part in [&meta.path, &meta.lang, &meta.content_hash] {
                out.extend_from_slice(part.as_bytes());
                out.push(0);
            }
            out.extend_from_slice(&graph.unwrap_or_default());
        }
        Ok(out)
    };
    let (index_a, index_b) = (index_of(&db)?, index_of(&db_b)?);
    let same_index = !index_a.is_empty() && index_a == index_b;
    let identical = same_text && same_files && same_index && up_to_date_text == again_a["text"];
    run.say(&format!(
        "byte-identical: text {same_text}, files {same_files}, index {same_index} ({} bytes)",
        index_a.len()
    ));
    let db_bytes = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);

    let target = |value: f64, limit: f64| value <= limit;
    let results = json!({
        "tree": {"files": copied, "bytes": bytes, "source": source.display().to_string(),
                 "mapped": first["refresh"]["files"], "skipped": first["refresh"]["skipped"]},
        "full_map": {"wall_ms": round1(full_wall), "cpu_ms": round1(full_cpu),
                     "peak_rss_mb": full_rss.map(round1), "refresh": first["refresh"],
                     "target": "CPU and wall ≤ 15 s; peak RSS ≤ 500 MB"},
        "up_to_date": up_to_date,
        "one_file_changed": one_file,
        "baseline_one_file_changed": baseline_one_file,
        "baseline_same_map_text": args.baseline.as_ref().map(|_| same_maps),
        "session_start": hook,
        "deterministic": {"identical": identical, "text": same_text, "files": same_files,
                          "index": same_index, "index_bytes": index_a.len()},
        "brain_bytes": db_bytes,
        "targets": {
            "full_map_15s": target(full_wall.max(full_cpu), 15_000.0),
            "peak_rss_500mb": full_rss.is_some_and(|r| r <= 500.0),
            "one_file_150ms_p95": target(one_file["wall_ms"]["p95_ms"].as_f64().unwrap_or(f64::MAX), 150.0),
            "session_start_200ms_p95": target(hook["wall_ms"]["p95_ms"].as_f64().unwrap_or(f64::MAX), 200.0),
            "deterministic": identical,
        },
    });
    let parameters = json!({"files": args.files, "runs": args.runs, "edits": args.edits,
        "budget": args.budget, "cairn": binary.display().to_string(),
        "baseline": args.baseline.as_ref().map(|b| b.display().to_string())});
    let mut body = String::new();
    let row = |name: &str, v: &Value| -> String {
        format!(
            "| {name} | {} | {} | {} | {} | {} |\n",
            v["n"],
            v["wall_ms"]["p50_ms"],
            v["wall_ms"]["p95_ms"],
            v["cpu_ms"]["p50_ms"],
            v["cpu_ms"]["p95_ms"]
        )
    };
    writeln!(
        body,
        "\nTree: {copied} files ({:.1} MB) from `{}`; {} mapped, {} skipped.\n",
        bytes as f64 / 1e6,
        source.display(),
        first["refresh"]["files"],
        first["refresh"]["skipped"]
    )?;
    writeln!(
        body,
        "First full map: {:.2} s wall, {:.2} s CPU, peak RSS {} MB (targets ≤ 15 s, ≤ 500 MB).\n",
        full_wall / 1000.0,
        full_cpu / 1000.0,
        full_rss.map_or("–".to_string(), |r| format!("{r:.0}"))
    )?;
    body.push_str("| whole process | n | wall p50 ms | wall p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---:|---:|---:|---:|---:|\n");
    body.push_str(&row("`codemap`, up to date", &up_to_date));
    body.push_str(&row(
        "`codemap`, one file changed (target ≤ 150 ms)",
        &one_file,
    ));
    if let Some(base) = &baseline_one_file {
        body.push_str(&row(
            "`codemap`, one file changed, baseline (alternating)",
            base,
        ));
    }
    body.push_str(&row("`hook session-start` (target p95 ≤ 200 ms)", &hook));
    if args.baseline.is_some() {
        writeln!(
            body,
            "\nBaseline `{}` on a brain of its own, alternating with `--cairn` on every edit; the two maps' text {} on every edit.",
            args.baseline
                .as_ref()
                .map_or(String::new(), |b| b.display().to_string()),
            if same_maps {
                "was the same"
            } else {
                "DIFFERED"
            }
        )?;
    }
    writeln!(
        body,
        "\nSession-start hooks that gave up at their deadline (loaded machine): {gave_up} of {}.",
        briefs.len()
    )?;
    writeln!(
        body,
        "\nSame input, same map: {} (text {same_text}, files {same_files}, stored index {same_index}, {} bytes). Brain after the run: {:.1} MB.",
        if identical {
            "byte-identical"
        } else {
            "DIFFERENT"
        },
        index_a.len(),
        db_bytes as f64 / 1e6
    )?;
    run.finish(&args.out, parameters, results, &body)?;
    work_dir.finish();
    Ok(())
}
