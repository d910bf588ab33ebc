//! `cairn-bench ui`: the web UI at 100,000 memories. A seeded brain, the real `cairn ui
//! --no-open` on a loopback port, signed in through its one-time link, and a plain HTTP/1.1
//! keep-alive client on one connection (std's TcpStream: nothing between the measurement and
//! the server but loopback). It measures every page's time to the last byte (the server's
//! time plus a loopback round trip, so an upper bound on server time), a search keystroke
//! (each prefix of a query typed, sent as htmx sends it, lexical), and the first page's
//! transfer (the search page and every asset it loads, as a fresh browser fetches them).
//!
//! Targets (issue 16): every page p95 ≤ 100 ms, a keystroke p95 ≤ 50 ms, the first page
//! ≤ 200 KB. Results go to `bench/results/ui-<stamp>.json` and `.md`.

use super::agent::{seed_brain, sentence, vocabulary};
use anyhow::{Context as _, Result, bail};
use cairn_bench::machine;
use cairn_bench::process;
use cairn_bench::results::Run;
use cairn_bench::rng::Rng;
use cairn_bench::stats::{Summary, round3};
use cairn_bench::work::WorkDir;
use clap::Args;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// The cairn binary (default: `cargo build --release -p cairn-cli` and use its path).
    #[arg(long, value_name = "PATH")]
    cairn: Option<PathBuf>,
    /// Memories in the brain.
    #[arg(long, default_value_t = 100_000)]
    size: usize,
    /// Requests timed per page.
    #[arg(long, default_value_t = 60)]
    runs: usize,
    /// Queries typed, one keystroke at a time.
    #[arg(long, default_value_t = 20)]
    queries: usize,
    /// Where the results go (relative paths are taken from the workspace root).
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Keep the seeded brain in DIR and start later runs from a copy of it (shared with
    /// `cairn-bench serve`'s cache: the same seed gives the same brain).
    #[arg(long, value_name = "DIR")]
    seed_cache: Option<PathBuf>,
    #[arg(long, default_value_t = 0x5EED_CA1B_2026_1202)]
    seed: u64,
    #[arg(long)]
    keep: bool,
}

/// `cairn ui`, stopped with SIGTERM when dropped.
struct Server {
    child: Child,
    link: String,
    address: String,
}

impl Server {
    fn start(cairn: &Path, db: &Path, dir: &Path) -> Result<Server> {
        let mut child = Command::new(cairn)
            .args(["ui", "--no-open"])
            .current_dir(dir)
            .env("CAIRN_DB", db)
            .env("CAIRN_PROJECT", super::agent::PROJECT)
            .env("CAIRN_EMBEDDER", "none")
            .env_remove("CAIRN_URL")
            .env_remove("CAIRN_READ_ONLY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("start cairn ui")?;
        let mut link = String::new();
        BufReader::new(child.stdout.take().context("the server's stdout")?).read_line(&mut link)?;
        let link = link.trim().to_string();
        let Some(address) = link
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
        else {
            let _ = child.kill();
            bail!("cairn ui printed no link: {link:?}");
        };
        Ok(Server {
            address: address.to_string(),
            link,
            child,
        })
    }

    fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / machine::clock_ticks())
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

/// One answer: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A keep-alive HTTP/1.1 client on one connection (every answer of the UI has a
/// Content-Length).
struct Client {
    stream: BufReader<TcpStream>,
    address: String,
}

impl Client {
    fn connect(address: &str) -> Result<Client> {
        let stream = TcpStream::connect(address).with_context(|| format!("connect {address}"))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream: BufReader::new(stream),
            address: address.to_string(),
        })
    }

    fn get(&mut self, path: &str, cookie: Option<&str>, extra: &[(&str, &str)]) -> Result<Answer> {
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", self.address);
        if let Some(cookie) = cookie {
            request.push_str(&format!("Cookie: cairn_session={cookie}\r\n"));
        }
        for (name, value) in extra {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        self.stream.get_mut().write_all(request.as_bytes())?;
        let mut line = String::new();
        self.stream.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP status line: {line:?}"))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line)?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body)?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// Times `runs` GETs of `path`: milliseconds each, and the last body's size.
fn time_page(
    client: &mut Client,
    path: &str,
    cookie: &str,
    runs: usize,
    extra: &[(&str, &str)],
) -> Result<(Vec<f64>, usize)> {
    let mut times = Vec::with_capacity(runs);
    let mut bytes = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let answer = client.get(path, Some(cookie), extra)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        if answer.status != 200 {
            bail!(
                "GET {path} answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        bytes = answer.body.len();
    }
    Ok((times, bytes))
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn run(args: &UiArgs) -> Result<()> {
    if args.size == 0 || args.runs == 0 || args.queries == 0 {
        bail!("--size, --runs and --queries must be at least 1");
    }
    let mut run = Run::start("ui");
    let cairn = process::locate_cairn(args.cairn.as_deref())?;
    let words = vocabulary(args.seed);
    let work_dir = WorkDir::new("ui", None, args.keep)?;
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

    let server = Server::start(&cairn, &db, &dir)?;
    run.say(&format!("cairn ui at {}", server.address));
    let mut client = Client::connect(&server.address)?;
    let link_path = server
        .link
        .split_once(&server.address)
        .map(|(_, path)| path.to_string())
        .context("the link's path")?;
    let signed = client.get(&link_path, None, &[])?;
    let cookie = signed
        .header("set-cookie")
        .and_then(|c| c.strip_prefix("cairn_session="))
        .and_then(|c| c.split(';').next())
        .context("the one-time link set no session cookie")?
        .to_string();

    // A record to show and walk from: the first result of a common word.
    let mut rng = Rng::new(args.seed ^ 0x0517);
    let probe = sentence(&mut rng, &words, 2);
    let found = client.get(
        &format!("/?q={}&mode=lexical", encode(&probe)),
        Some(&cookie),
        &[],
    )?;
    let text = String::from_utf8_lossy(&found.body).to_string();
    let record: i64 = text
        .split("href=\"/ui/records/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or(1);

    let pages: Vec<(&str, String)> = vec![
        ("search (latest records)", "/".to_string()),
        (
            "search (lexical query)",
            format!("/?q={}&mode=lexical", encode(&probe)),
        ),
        ("record", format!("/ui/records/{record}")),
        ("tending", "/ui/tending".to_string()),
        ("graph", format!("/ui/graph?node=%23{record}")),
        ("graph (clusters)", "/ui/graph".to_string()),
        ("tasks", "/ui/tasks".to_string()),
        ("timeline", "/ui/timeline".to_string()),
        ("timeline (one actor)", "/ui/timeline?actor=cli".to_string()),
        ("health", "/ui/health".to_string()),
    ];
    // Whole-brain checks a page runs only when asked (a link on the page): timed apart, not
    // pages in the target's sense.
    let on_demand: Vec<(&str, String)> = vec![
        (
            "health with the doctor's checks",
            "/ui/health?doctor=1".to_string(),
        ),
        (
            "health with the size by table",
            "/ui/health?sizes=1".to_string(),
        ),
        (
            "graph with the clusters",
            "/ui/graph?clusters=1".to_string(),
        ),
    ];
    let cpu_before = server.cpu_seconds();
    let mut page_results = Vec::new();
    let mut worst_p95: f64 = 0.0;
    for (name, path) in &pages {
        run.phase(&format!("page {name}"));
        // One untimed request first (the first read of a table pages it in).
        time_page(&mut client, path, &cookie, 1, &[])?;
        let (times, bytes) = time_page(&mut client, path, &cookie, args.runs, &[])?;
        let summary = Summary::of(&times);
        worst_p95 = worst_p95.max(summary.p95);
        page_results.push(json!({
            "page": name, "path": path, "bytes": bytes, "latency_ms": summary.json(),
        }));
    }

    let mut on_demand_results = Vec::new();
    for (name, path) in &on_demand {
        run.phase(&format!("on demand: {name}"));
        let runs = args.runs.min(5);
        let (times, bytes) = time_page(&mut client, path, &cookie, runs, &[])?;
        on_demand_results.push(json!({
            "page": name, "path": path, "bytes": bytes, "latency_ms": Summary::of(&times).json(),
        }));
    }

    run.phase("keystrokes");
    let mut keystrokes = Vec::new();
    for _ in 0..args.queries {
        let n = 2 + rng.below(2);
        let query = sentence(&mut rng, &words, n);
        for end in 1..=query.len() {
            let prefix = &query[..end];
            if prefix.trim().is_empty() {
                continue;
            }
            let path = format!("/?q={}&mode=lexical", encode(prefix));
            let (times, _) = time_page(
                &mut client,
                &path,
                &cookie,
                1,
                &[("HX-Request", "true"), ("HX-Target", "results")],
            )?;
            keystrokes.extend(times);
        }
    }
    let keystroke = Summary::of(&keystrokes);
    let cpu_after = server.cpu_seconds();

    run.phase("first page");
    // A fresh browser: the search page, then every stylesheet and script it names.
    let landing = client.get("/", Some(&cookie), &[])?;
    let html = String::from_utf8_lossy(&landing.body).to_string();
    let mut first_bytes = landing.body.len();
    let mut assets = Vec::new();
    for piece in html.split("\"/ui/assets/").skip(1) {
        let path = format!("/ui/assets/{}", piece.split('"').next().unwrap_or(""));
        let answer = client.get(&path, None, &[])?;
        if answer.status != 200 {
            bail!("GET {path} answered {}", answer.status);
        }
        first_bytes += answer.body.len();
        assets.push(json!({"path": path, "bytes": answer.body.len()}));
    }
    drop(client);
    drop(server);

    let server_cpu = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => Some(round3(b - a)),
        _ => None,
    };
    let pages_met = worst_p95 <= 100.0;
    let keystroke_met = keystroke.p95 <= 50.0;
    let bytes_met = first_bytes <= 200 * 1024;
    let load = machine::load_json();
    let results = json!({
        "pages": page_results,
        "on_demand": on_demand_results,
        "worst_page_p95_ms": round3(worst_p95),
        "keystroke_ms": keystroke.json(),
        "first_page": {"html_bytes": landing.body.len(), "assets": assets, "total_bytes": first_bytes},
        "server_cpu_seconds": server_cpu,
        "targets": {
            "page_p95_ms": 100, "keystroke_p95_ms": 50, "first_page_bytes": 200 * 1024,
        },
        "met": {"pages": pages_met, "keystroke": keystroke_met, "first_page": bytes_met},
    });
    let parameters = json!({
        "memories": args.size, "runs_per_page": args.runs, "queries_typed": args.queries,
        "keystrokes": keystrokes.len(), "recall_mode": "lexical", "embedder": "none",
        "seed": args.seed, "cairn": cairn.display().to_string(),
        "client": "one keep-alive HTTP/1.1 connection on loopback; time to the last byte",
    });
    let mut body = format!(
        "\n## The web UI at {} memories\n\nOne keep-alive connection on loopback, time to the last byte of each answer ({} runs a page after one untimed run), lexical recall, no model.\n\n| page | bytes | p50 | p95 | max |\n|---|---|---|---|---|\n",
        args.size, args.runs
    );
    for page in &page_results {
        let l = &page["latency_ms"];
        body.push_str(&format!(
            "| {} | {} | {:.2} ms | {:.2} ms | {:.2} ms |\n",
            page["page"].as_str().unwrap_or(""),
            page["bytes"],
            l["p50_ms"].as_f64().unwrap_or(f64::NAN),
            l["p95_ms"].as_f64().unwrap_or(f64::NAN),
            l["max_ms"].as_f64().unwrap_or(f64::NAN),
        ));
    }
    body.push_str("\nOn demand (a link on the page; whole-brain work, at most 5 runs):\n\n| check | bytes | p50 | p95 | max |\n|---|---|---|---|---|\n");
    for page in &on_demand_results {
        let l = &page["latency_ms"];
        body.push_str(&format!(
            "| {} | {} | {:.0} ms | {:.0} ms | {:.0} ms |\n",
            page["page"].as_str().unwrap_or(""),
            page["bytes"],
            l["p50_ms"].as_f64().unwrap_or(f64::NAN),
            l["p95_ms"].as_f64().unwrap_or(f64::NAN),
            l["max_ms"].as_f64().unwrap_or(f64::NAN),
        ));
    }
    body.push_str(&format!(
        "\nWorst page p95: {:.2} ms (target ≤ 100 ms: {}). Search keystroke ({} keystrokes, htmx fragment): p50 {:.2} ms, p95 {:.2} ms (target ≤ 50 ms: {}). First page with its assets: {} bytes (target ≤ 200 KB: {}). Server CPU over the page and keystroke runs: {}. Load average at the end: {}.\n",
        worst_p95,
        if pages_met { "met" } else { "MISSED" },
        keystrokes.len(),
        keystroke.p50,
        keystroke.p95,
        if keystroke_met { "met" } else { "MISSED" },
        first_bytes,
        if bytes_met { "met" } else { "MISSED" },
        server_cpu.map_or("–".into(), |cpu| format!("{cpu:.1} s")),
        cairn_bench::results::load_text(&load),
    ));
    run.finish(&args.out, parameters, results, &body)?;
    Ok(())
}
