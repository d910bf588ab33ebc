//! `cairn serve` (the HTTP API and web UI over the service layer), `cairn ui` (the web UI on
//! the local brain, signed in by a one-time link) and `cairn token` (access tokens).

use crate::output::print_json;
use crate::settings::Settings;
use anyhow::{Context as _, Result, bail};
use cairn_engine::tokens::{CreatedToken, NewToken, Role, TokenInfo};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; for any other address serve TLS with
    /// --tls-cert/--tls-key or put a TLS reverse proxy in front, see docs/service.md).
    #[arg(long, value_name = "ADDR", default_value = cairn_http::DEFAULT_LISTEN, conflicts_with = "socket")]
    listen: std::net::SocketAddr,
    /// Listen on this Unix socket instead (made mode 0600).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The warm local daemon: a Unix socket beside the brain (docs/service.md), no token, the
    /// owner's rights; exits after 30 idle minutes. The CLI starts it on first need.
    #[arg(long, conflicts_with_all = ["socket", "listen", "tls_cert"])]
    local: bool,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = cairn_http::DEFAULT_BODY_LIMIT)]
    max_body: usize,
    /// Seconds a client has to send its request headers.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    header_timeout: u64,
    /// Seconds a client has to send its request body.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    body_timeout: u64,
    /// Write recall's access records (use counts, last access, `recall` events) once per recall
    /// before it answers, instead of the default: buffered, written within a second or per 64
    /// recalls, so a crash loses at most the last second of them and a read sees a recall's
    /// use count up to that late (docs/service.md).
    #[arg(long)]
    no_buffer_accesses: bool,
    /// The default (buffered access records); kept so scripts that pass it keep working.
    #[arg(long, hide = true, conflicts_with = "no_buffer_accesses")]
    buffer_accesses: bool,
    /// MiB of the brain's file each connection reads through a memory map (0: plain reads).
    /// Default: 1024 for the HTTP server (a few % more throughput under many clients), 0 for
    /// the warm local daemon (--local), whose mapped pages would count in its resident memory
    /// (docs/service.md).
    #[arg(long, value_name = "MIB")]
    mmap_mib: Option<u64>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_key",
        conflicts_with = "socket"
    )]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token (its secret is printed once and never stored).
    Create(TokenCreateArgs),
    /// Every token, without secrets.
    List,
    /// Revoke a token by name, at once for every server on this brain.
    Revoke { name: String },
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// Who uses it (the actor recorded in events and history).
    #[arg(long)]
    name: String,
    /// The one project it works in.
    #[arg(
        long,
        value_name = "KEY",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    project: Option<String>,
    /// Every project (the client names it with the Cairn-Project header).
    #[arg(long)]
    all: bool,
    /// read (recall, show, list, brief), write (and every change) or admin (and repair, hard
    /// deletes).
    #[arg(long, value_parser = crate::values::role())]
    role: Role,
    /// When it stops working: an age ahead (30d, 12h) or a date.
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Print the sign-in link only; do not open a browser.
    #[arg(long)]
    no_open: bool,
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
}

/// The local daemon reads the brain with plain reads: a memory map's pages count in a
/// process's RSS (at 100,000 records 166–331 MB of them, `cairn-bench daemon`), and one
/// user's calls gain nothing measurable from it (bench/results/daemon-2026-12-06T0224Z and
/// T0227Z: hybrid recall and the prompt hook at the same p50 and p95 either way).
const LOCAL_MMAP_MIB: u64 = 0;

/// The local daemon's page cache per connection (the store's default is 16 MB; the daemon has
/// four or five connections, and without the map the file's pages are in the kernel's cache
/// anyway).
const LOCAL_PAGE_CACHE_BYTES: u64 = 4 << 20;

/// The service over the brain, opened now (a brain that cannot be opened is said at start, not
/// at the first request), with the model loading in the background.
fn open_service(
    settings: &Settings,
    who: &'static str,
    buffer_accesses: bool,
    mmap_mib: u64,
    page_cache_bytes: Option<u64>,
) -> Result<cairn_service::Service> {
    let mut options = cairn_service::ServiceOptions::new(settings.db.clone());
    options.mmap_bytes = mmap_mib.saturating_mul(1 << 20);
    options.page_cache_bytes = page_cache_bytes;
    options.read_only = settings.read_only;
    options.now = cairn_engine::test_clock_from_env()?;
    options.buffer_accesses = buffer_accesses;
    options.embedder_setup = Some(crate::commands::semantic::embedder_setup(settings));
    if let Ok(value) = std::env::var("CAIRN_MCP_INDEX_SECS") {
        options.index_interval = crate::commands::mcp::index_interval(&value)?;
    }
    let service = cairn_service::Service::new(options);
    // Open the brain now: a brain that cannot be opened is said at start, not at the first
    // request.
    let local = cairn_service::RequestContext::remote(
        String::new(),
        "serve".into(),
        cairn_engine::SuppliedGit::default(),
    );
    service
        .call(&local, "open", |engine| engine.stats().map(|_| ()))
        .with_context(|| format!("cannot serve {}", settings.db.display()))?;
    service.start_lexical_index(who);
    service.start_embedder(crate::embedder::loader(settings), who);
    Ok(service)
}

pub fn run_serve(settings: &Settings, args: &ServeArgs) -> Result<ExitCode> {
    // The local daemon: its socket and start lock first, so a second daemon for the same brain
    // stops before it loads anything.
    let daemon = if args.local {
        let socket = crate::daemon::socket_path(&settings.db, true)
            .map_err(|message| anyhow::anyhow!(message))?;
        let lock = crate::daemon::take_lock(&socket).map_err(|message| anyhow::anyhow!(message))?;
        let idle = crate::daemon::idle_secs().map_err(|message| anyhow::anyhow!(message))?;
        Some((socket, lock, Duration::from_secs(idle)))
    } else {
        None
    };
    // Buffered access records unless --no-buffer-accesses (`--buffer-accesses` is the default).
    let buffer_accesses = args.buffer_accesses || !args.no_buffer_accesses;
    let mmap_mib = args.mmap_mib.unwrap_or(if daemon.is_some() {
        LOCAL_MMAP_MIB
    } else {
        cairn_service::MMAP_BYTES >> 20
    });
    let page_cache = daemon.as_ref().map(|_| LOCAL_PAGE_CACHE_BYTES);
    let service = open_service(
        settings,
        "cairn serve",
        buffer_accesses,
        mmap_mib,
        page_cache,
    )?;
    if args.max_body == 0 {
        bail!("--max-body 0 would refuse every body; give a size in bytes (default 1048576)");
    }
    let options = cairn_http::ServeOptions {
        listen: match (&daemon, &args.socket) {
            (Some((socket, _, _)), _) => cairn_http::Listen::Unix(socket.clone()),
            (None, Some(path)) => cairn_http::Listen::Unix(path.clone()),
            (None, None) => cairn_http::Listen::Tcp(args.listen),
        },
        limits: cairn_http::Limits {
            body: args.max_body,
            header_timeout: Duration::from_secs(args.header_timeout.max(1)),
            body_timeout: Duration::from_secs(args.body_timeout.max(1)),
        },
        grace: Duration::from_secs(30),
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(cairn_http::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        local: daemon.is_some(),
        idle_exit: daemon.as_ref().map(|(_, _, idle)| *idle),
        // The daemon's brain deleted (a temporary directory removed) or replaced: it exits.
        watch: daemon.as_ref().map(|_| settings.db.clone()),
    };
    let json = settings.json;
    let db = settings.db.clone();
    cairn_http::serve(service, options, |address| {
        // The one line a supervisor (or a test) reads to learn the address; stderr, so stdout
        // stays free.
        let pid = std::process::id();
        if json {
            eprintln!(
                "{}",
                serde_json::json!({"status": "listening", "url": address, "db": db.display().to_string(), "pid": pid})
            );
        } else {
            eprintln!("cairn serve: listening on {address} ({}) as pid {pid}", db.display());
        }
    })
    .map_err(|message| anyhow::anyhow!(message))?;
    eprintln!("cairn serve: stopped");
    drop(daemon);
    Ok(ExitCode::SUCCESS)
}

/// `cairn ui`: a loopback server on this brain whose one-time link signs one browser in as the
/// local owner (admin, every project, this directory's project first).
pub fn run_ui(settings: &Settings, args: &UiArgs) -> Result<ExitCode> {
    let service = open_service(
        settings,
        "cairn ui",
        false,
        cairn_service::MMAP_BYTES >> 20,
        None,
    )?;
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let context = settings.context("ui", &cwd);
    let owner = cairn_http::ui::Identity::Owner {
        grant: cairn_engine::tokens::Grant {
            name: context.actor.clone(),
            project: None,
            role: Role::Admin,
        },
        request: cairn_service::RequestContext::local(&context),
    };
    let ui = cairn_http::ui::Ui::new(false);
    let code = ui
        .login_code(owner)
        .map_err(|message| anyhow::anyhow!(message))?;
    let options = cairn_http::ServeOptions {
        listen: cairn_http::Listen::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], args.port))),
        limits: cairn_http::Limits::default(),
        grace: Duration::from_secs(30),
        tls: None,
        local: false,
        idle_exit: None,
        watch: None,
    };
    let no_open = args.no_open;
    let db = settings.db.clone();
    cairn_http::serve_with_ui(service, options, ui, |address| {
        let link = format!("{address}/ui/login?code={code}");
        // stdout: the link alone, for a person or a script to open.
        outln!("{link}");
        eprintln!(
            "cairn ui: serving {} on {address}; the link signs one browser in, once, within 10 minutes; Ctrl-C stops",
            db.display()
        );
        if !no_open {
            open_browser(&link);
        }
    })
    .map_err(|message| anyhow::anyhow!(message))?;
    eprintln!("cairn ui: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Opens `link` with `$BROWSER`, else `xdg-open`; a failure is only a note (the link is printed).
fn open_browser(link: &str) {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "xdg-open".to_string());
    let mut words = browser.split_whitespace();
    let Some(program) = words.next() else {
        return;
    };
    let spawned = std::process::Command::new(program)
        .args(words)
        .arg(link)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            // Reaped in the background: the browser may outlive this call.
            let program = program.to_string();
            std::thread::spawn(move || {
                if let Ok(status) = child.wait()
                    && !status.success()
                {
                    eprintln!(
                        "cairn ui: note: {program} could not open the link ({status}); open it by hand"
                    );
                }
            });
        }
        Err(error) => eprintln!(
            "cairn ui: note: cannot start {program} ({error}); open the link above by hand"
        ),
    }
}

pub fn run_token(settings: &Settings, command: &TokenCommand) -> Result<ExitCode> {
    let mut engine = settings.open("cli")?;
    match command {
        TokenCommand::Create(args) => {
            print_token_created(settings, &engine.token_create(&args.request())?);
        }
        TokenCommand::List => print_tokens(settings, &engine.token_list()?),
        TokenCommand::Revoke { name } => print_token_revoked(settings, &engine.token_revoke(name)?),
    }
    Ok(ExitCode::SUCCESS)
}

impl TokenCreateArgs {
    /// The token these flags ask for.
    pub(crate) fn request(&self) -> NewToken {
        NewToken {
            name: self.name.clone(),
            project: if self.all { None } else { self.project.clone() },
            role: self.role,
            expires: self.expires.clone(),
        }
    }
}

/// `token create`'s answer (here and from a server): the secret on stdout, once.
pub(crate) fn print_token_created(settings: &Settings, created: &CreatedToken) {
    if settings.json {
        print_json(created);
        return;
    }
    outln!("{}", created.token);
    eprintln!(
        "token {:?} ({} role, {}{}): shown once, not stored — keep it now",
        created.info.name,
        created.info.role.as_str(),
        project_text(&created.info),
        created
            .info
            .expires_at
            .as_deref()
            .map(|at| format!(", expires {at}"))
            .unwrap_or_default()
    );
}

/// `token list`'s answer (here and from a server).
pub(crate) fn print_tokens(settings: &Settings, tokens: &[TokenInfo]) {
    if settings.json {
        print_json(&tokens);
    } else if tokens.is_empty() {
        outln!("no tokens; `cairn token create --name NAME --project KEY --role read` makes one");
    } else {
        for token in tokens {
            outln!(
                "{:<24} {:<6} {:<8} {}{}",
                token.name,
                token.role.as_str(),
                token.state,
                project_text(token),
                token
                    .expires_at
                    .as_deref()
                    .map(|at| format!(", expires {at}"))
                    .unwrap_or_default()
            );
        }
    }
}

/// `token revoke`'s answer (here and from a server).
pub(crate) fn print_token_revoked(settings: &Settings, revoked: &TokenInfo) {
    if settings.json {
        print_json(&serde_json::json!({"status": "revoked", "token": revoked}));
    } else {
        outln!("revoked token {:?}; it stops working at once", revoked.name);
    }
}

fn project_text(token: &TokenInfo) -> String {
    match &token.project {
        Some(project) => format!("project {project}"),
        None => "every project".to_string(),
    }
}
