//! The global settings of one `cairn` process, built once from the global flags and the
//! environment, and the one way to open the brain: every command, the hooks and the MCP server
//! get their path, project, read-only flag and actor from here.

use anyhow::{Context as _, Result};
use cairn_engine::{Context, Engine, EngineError};
use clap::Args;
use std::path::{Path, PathBuf};

/// The flags every command accepts (clap reads their environment variables too), listed under
/// their own heading in every command's help.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// The brain: a SQLite file (default: $XDG_DATA_HOME/cairn/brain.db).
    #[arg(long, global = true, env = "CAIRN_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Where the brain is stored: a SQLite file's path (like --db, which wins when both are
    /// given), or a postgres:// URL — which `cairn migrate` fills and `cairn recall` reads; no
    /// other command runs on PostgreSQL yet (docs/postgres.md).
    #[arg(long, global = true, env = "CAIRN_STORE", value_name = "PATH|URL")]
    pub store: Option<String>,
    /// Project key (default: derived from the git root of the working directory).
    #[arg(long, global = true, env = "CAIRN_PROJECT", value_name = "KEY")]
    pub project: Option<String>,
    /// Print the JSON contract instead of human text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Directory of the local embedding model (default: the cache dir; see `cairn model`).
    #[arg(long, global = true, env = "CAIRN_MODEL_DIR", value_name = "DIR")]
    pub model_dir: Option<PathBuf>,
}

/// What every command needs to know about this process, resolved once.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The brain's file (`--db`, `CAIRN_DB`, else the default location).
    pub db: PathBuf,
    /// The project given with `--project` / `CAIRN_PROJECT` (trimmed; `None` when empty):
    /// without one, the project is derived from git in the working directory.
    pub project: Option<String>,
    /// `--json`: print the JSON contract.
    pub json: bool,
    /// `--model-dir` / `CAIRN_MODEL_DIR` (`None` when empty).
    pub model_dir: Option<PathBuf>,
    /// `CAIRN_READ_ONLY=1` (or `true`), or a nested run: every write is refused.
    pub read_only: bool,
    /// This process runs inside an LLM call cairn started (`CAIRN_NESTED_RUN`): read-only
    /// whatever `CAIRN_READ_ONLY` says, and the hooks neither capture nor start maintenance.
    pub nested_run: bool,
    /// `CAIRN_EMBEDDER` (trimmed, lower case; `None` when unset or empty): which embedder
    /// (`local`, `http`, `none`, or the test-only `hash`); see `crate::embedder`.
    pub embedder: Option<String>,
    /// `CAIRN_MODEL` (trimmed; `None` when unset or empty): which local model.
    pub model: Option<String>,
    /// Use the warm local daemon (crate::daemon), starting it on first need: unless
    /// `CAIRN_DAEMON=off` (or `0`, `false`), `CAIRN_URL` names a server, or writes are refused
    /// (a read-only process must not start the daemon every later call would use).
    pub daemon: bool,
    /// `CAIRN_URL` (and `CAIRN_TOKEN`): a cairn server every brain command talks to instead of
    /// the file; `None` when unset or empty.
    pub remote: Option<RemoteSettings>,
    /// `--store` / `CAIRN_STORE` naming PostgreSQL (the URL as given, never printed as is):
    /// `cairn migrate` fills it, `cairn recall` (and `cairn eval locomo --store`) read it,
    /// every other command refuses it until the PostgreSQL backend does more.
    pub store_url: Option<String>,
}

/// The exit code of a configuration the process cannot run with (as clap's usage errors).
pub const EXIT_CONFIG: u8 = 2;

/// `--store postgres://…` for a command that does not run on PostgreSQL yet.
#[derive(Debug)]
pub struct PostgresNotServed {
    shown: String,
    command: String,
}

impl PostgresNotServed {
    pub fn new(url: &str, command: &str) -> PostgresNotServed {
        PostgresNotServed {
            shown: cairn_store::postgres::redact(url.trim()),
            command: command.to_string(),
        }
    }
}

impl std::fmt::Display for PostgresNotServed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`cairn {}` cannot use the PostgreSQL store {} yet: PostgreSQL can hold a brain copied there by `cairn migrate`, and `cairn recall` reads it, but no other command runs on PostgreSQL yet (docs/postgres.md). Unset CAIRN_STORE / drop --store to use the brain file, or copy the brain back with `cairn migrate --from <url> --to <file>`",
            self.command, self.shown
        )
    }
}

impl std::error::Error for PostgresNotServed {}

/// Where the server is and the credential to show it (`CAIRN_URL`, `CAIRN_TOKEN`).
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// The address as given (read by `remote::Target::parse` when a command runs, so a bad one
    /// is reported like any other error).
    pub url: String,
    /// `CAIRN_TOKEN`; never printed (not even by `Debug`).
    pub token: Option<crate::remote::Secret>,
}

impl Settings {
    /// Reads the global flags and the environment variables no flag covers.
    pub fn new(globals: &GlobalArgs) -> Settings {
        let store = globals
            .store
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let store_url = store
            .filter(|s| cairn_store::postgres::is_postgres_url(s))
            .map(str::to_string);
        let store_path = store
            .filter(|s| !cairn_store::postgres::is_postgres_url(s))
            .map(PathBuf::from);
        Settings {
            db: globals
                .db
                .clone()
                .or(store_path)
                .unwrap_or_else(cairn_engine::default_brain_path),
            project: globals
                .project
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string),
            json: globals.json,
            model_dir: globals
                .model_dir
                .clone()
                .filter(|dir| !dir.as_os_str().is_empty()),
            read_only: std::env::var("CAIRN_READ_ONLY")
                .is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
                || cairn_engine::lifecycle::llm::in_nested_run(),
            nested_run: cairn_engine::lifecycle::llm::in_nested_run(),
            embedder: env_word("CAIRN_EMBEDDER").map(|v| v.to_ascii_lowercase()),
            model: env_word("CAIRN_MODEL"),
            daemon: false,
            remote: env_word("CAIRN_URL").map(|url| RemoteSettings {
                url,
                token: env_word("CAIRN_TOKEN").map(crate::remote::Secret::new),
            }),
            store_url,
        }
        .with_daemon()
    }

    fn with_daemon(mut self) -> Settings {
        let off = env_word("CAIRN_DAEMON").is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            )
        });
        self.daemon = !off && self.remote.is_none() && !self.read_only;
        self
    }

    /// The context of calls made as `actor` by a process working in `cwd`. An explicit project
    /// skips asking git (a process spawn).
    pub fn context(&self, actor: &str, cwd: &Path) -> Context {
        let mut context = match &self.project {
            Some(project) => Context {
                project: project.clone(),
                cwd: cwd.to_path_buf(),
                actor: String::new(),
                read_only: false,
                now: None,
            },
            None => Context::for_directory(cwd),
        };
        context.actor = actor.to_string();
        context.read_only = self.read_only;
        context
    }

    /// Opens the brain as seen from `cwd`, without an embedder (the hooks never load a model).
    pub fn open_in(&self, actor: &str, cwd: &Path) -> Result<Engine, EngineError> {
        Engine::open(&self.db, self.context(actor, cwd))
    }

    /// Opens the brain for a command run in the working directory; the embedding model the
    /// configuration names is loaded only if a call needs it.
    pub fn open(&self, actor: &str) -> Result<Engine> {
        let cwd = std::env::current_dir().context("cannot read the working directory")?;
        let mut context = self.context(actor, &cwd);
        // `CAIRN_NOW`: a test setting, so tests order events without sleeping.
        context.now = cairn_engine::test_clock_from_env()?;
        // Only the commands that run on PostgreSQL get this far with a postgres:// store
        // (`cli::run` refuses the others): recall.
        let mut engine = match &self.store_url {
            Some(url) => {
                let target =
                    cairn_store::postgres::PgTarget::parse(url).map_err(EngineError::from)?;
                Engine::open_postgres(target, context)?
            }
            None => Engine::open(&self.db, context)?,
        };
        engine.set_embedder_loader(crate::embedder::loader(self));
        Ok(engine)
    }
}

impl Settings {
    /// [`Settings::open`] without the model: a write answered here while the daemon starts
    /// stays pending, and the daemon's indexer embeds it.
    pub fn open_without_model(&self, actor: &str) -> Result<Engine> {
        let cwd = std::env::current_dir().context("cannot read the working directory")?;
        let mut context = self.context(actor, &cwd);
        context.now = cairn_engine::test_clock_from_env()?;
        Ok(Engine::open(&self.db, context)?)
    }
}

/// An environment variable's value, trimmed; `None` when unset or blank.
fn env_word(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}
