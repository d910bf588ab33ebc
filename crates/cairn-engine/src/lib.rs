//! cairn-engine: the library API every adapter calls (CLI, hooks, MCP, HTTP).
//!
//! It owns the rules of docs/design.md §4–§5 (the write path and recall) on top of `cairn-store`, reads
//! the clock and git, and returns plain data. Nothing here prints or knows about JSON on a wire.

mod agent;
mod brief;
mod capture;
mod codemap;
pub mod exchange;
mod exchange_state;
mod extract;
pub mod git;
pub mod graph;
pub mod importers;
pub mod lifecycle;
mod maintenance;
mod prompt;
mod recall;
mod records;
pub mod remember;
mod semantic;
pub mod share;
pub mod tokens;
pub mod wiki;

pub use agent::{
    AWARENESS_DEFAULT_HOURS, MAX_AWARENESS, MAX_IDENTITY_CHARS, MeasureSummary, ReviewReport,
};
pub use brief::{Brief, BriefRequest, DEFAULT_BRIEF_BUDGET, event_line, memory_item};
pub use cairn_store::LexicalIndex;
pub use capture::{CaptureReport, MAX_CAPTURE_BYTES, MAX_CAPTURE_TURNS, whole_lines};
pub use codemap::{
    CodeIndex, CodeMap, CodeMapRequest, CodeNeighbors, DEFAULT_CODEMAP_BUDGET,
    DEFAULT_REFRESH_BOUND, RefreshStats, mapped_paths_named,
};
pub use extract::{ExtractOptions, ExtractReport, ExtractTarget};
pub use maintenance::{DoctorReport, ScopeMap, VACUUM_FREE_RATIO, WAL_LIMIT_BYTES, recover_brain};
pub use prompt::{PROMPT_BUDGET, PromptContext};
pub use recall::{
    AccessBuffer, DEFAULT_FLOOR, MAX_BUFFERED_ACCESSES, Mode, RecallAnswer, RecallRequest,
    RecallResult, TermCutoff, Why,
};
pub use records::{ListRequest, UpdateRequest, Updated};
pub use remember::{GroupedRemember, RememberOutcome, RememberRequest, RememberStatus, Review};
pub use semantic::{
    BACKGROUND_BATCH, ConfidenceReference, EmbedderLoader, FeedbackSource, IndexReport,
    SemanticConfig, SemanticStatus, VECTOR_ONLY_FLOORS, WrittenVectors, embedding_text,
    vector_only_floor,
};

use cairn_core::record::UnknownValue;
use cairn_core::scope::InvalidScope;
use cairn_core::text::SanitizeError;
use cairn_core::time::InvalidTime;
use cairn_store::{Store, StoreError};
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// Everything that can go wrong in an engine call, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sanitize(#[from] SanitizeError),
    #[error(transparent)]
    Unknown(#[from] UnknownValue),
    #[error(transparent)]
    Scope(#[from] InvalidScope),
    #[error(transparent)]
    Time(#[from] InvalidTime),
    #[error(
        "{what} is {actual} {unit}, over the limit of {limit} {unit}; nothing was stored — shorten it or split it into several memories"
    )]
    TooLarge {
        what: &'static str,
        actual: usize,
        limit: usize,
        unit: &'static str,
    },
    #[error("{what} is empty; nothing was stored — give it some text")]
    Empty { what: &'static str },
    #[error("{0}")]
    Invalid(String),
    #[error("no record #{id} in this brain")]
    NotFound { id: i64 },
    /// The operation needs a decision; exit code 3.
    #[error("{message}")]
    Refused {
        message: String,
        existing: Option<i64>,
        ways_out: Vec<String>,
    },
    #[error(
        "this brain is opened read-only (CAIRN_READ_ONLY=1, or inside an LLM call cairn started: CAIRN_NESTED_RUN); {operation} was refused and nothing was written"
    )]
    ReadOnly { operation: &'static str },
    /// A service request without a valid credential. Deliberately says nothing about why
    /// (missing, wrong, revoked and expired tokens all read the same).
    #[error("authentication required: send a valid token as `Authorization: Bearer <token>`")]
    Unauthorized,
    /// A valid credential whose role does not allow the operation.
    #[error(
        "this token's role ({role}) does not allow {operation}; nothing was changed — use a token with the {needed} role"
    )]
    Forbidden {
        role: &'static str,
        operation: String,
        needed: &'static str,
    },
    /// An operation failed in a way the caller cannot act on (a panic caught by the service).
    #[error("{0}")]
    Internal(String),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What an [`EngineError`] means, for adapters that act on it (advice, exit codes) without
/// reading its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The brain file is damaged or is not a cairn database.
    Damaged,
    /// No brain file yet.
    Missing,
    /// Another process held the lock past the busy timeout.
    Locked,
    /// The file or the process (`CAIRN_READ_ONLY`) does not allow writing.
    ReadOnly,
    /// A newer schema, or one that needs migrating first.
    Schema,
    /// The disk filled up during a write.
    DiskFull,
    /// No such record.
    NotFound,
    /// The operation needs a decision (exit code 3).
    Refused,
    /// The input was refused: bad value, too large, empty, unknown word.
    Invalid,
    /// A service request without a valid credential (HTTP 401).
    Unauthorized,
    /// A valid credential whose role does not allow the operation (HTTP 403).
    Forbidden,
    /// Anything else (I/O, SQLite, malformed stored data, an internal failure).
    Other,
}

impl EngineError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Store(store) => match store {
                StoreError::Corrupt { .. } => ErrorKind::Damaged,
                StoreError::Missing { .. } => ErrorKind::Missing,
                StoreError::Locked { .. } => ErrorKind::Locked,
                StoreError::ReadOnly { .. } => ErrorKind::ReadOnly,
                StoreError::NewerSchema { .. } | StoreError::NeedsMigration { .. } => {
                    ErrorKind::Schema
                }
                StoreError::DiskFull { .. } => ErrorKind::DiskFull,
                StoreError::Io { .. }
                | StoreError::Sqlite { .. }
                | StoreError::Malformed { .. }
                | StoreError::Postgres { .. } => ErrorKind::Other,
                StoreError::Migration { .. } | StoreError::NotOnPostgres { .. } => {
                    ErrorKind::Invalid
                }
                StoreError::UnknownColumn { .. } | StoreError::MissingColumn { .. } => {
                    ErrorKind::Invalid
                }
            },
            EngineError::ReadOnly { .. } => ErrorKind::ReadOnly,
            EngineError::NotFound { .. } => ErrorKind::NotFound,
            EngineError::Refused { .. } => ErrorKind::Refused,
            EngineError::Sanitize(_)
            | EngineError::Unknown(_)
            | EngineError::Scope(_)
            | EngineError::Time(_)
            | EngineError::TooLarge { .. }
            | EngineError::Empty { .. }
            | EngineError::Invalid(_) => ErrorKind::Invalid,
            EngineError::Unauthorized => ErrorKind::Unauthorized,
            EngineError::Forbidden { .. } => ErrorKind::Forbidden,
            EngineError::Io { .. } | EngineError::Internal(_) => ErrorKind::Other,
        }
    }
}

pub type Result<T> = std::result::Result<T, EngineError>;

/// Who is asking, from where.
#[derive(Debug, Clone)]
pub struct Context {
    /// The project records are filed under and recalled from.
    pub project: String,
    /// The working directory: git questions are asked here.
    pub cwd: PathBuf,
    /// Written into history rows (`cli`, `mcp`, `hook`, `import`).
    pub actor: String,
    /// Refuse every write (CAIRN_READ_ONLY=1).
    pub read_only: bool,
    /// A fixed clock for tests and replays; the real clock when `None`.
    pub now: Option<DateTime<Utc>>,
}

impl Context {
    /// The context of a process working in `cwd`, its project derived from git.
    pub fn for_directory(cwd: &Path) -> Context {
        Context {
            project: git::project_key(cwd),
            cwd: cwd.to_path_buf(),
            actor: "cli".to_string(),
            read_only: false,
            now: None,
        }
    }
}

/// Where the engine's git questions (the commit a record is stamped with, the working tree a
/// brief shows, freshness verdicts) are answered.
#[derive(Debug, Clone, Default)]
pub enum GitSource {
    /// Ask git in `Context::cwd`: a process running in the user's checkout (CLI, hooks,
    /// `cairn mcp` over stdio).
    #[default]
    Local,
    /// Facts the client sent with its request (a service: its own directory is not the
    /// client's checkout, so git is never run). Freshness needs the client's repository, so
    /// recall gives no verdict.
    Supplied(SuppliedGit),
}

/// The git facts a remote client sends for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuppliedGit {
    /// The commit HEAD points at in the client's checkout (stamps decisions, gotchas, …).
    pub head: Option<String>,
    /// The client's working tree (the brief's working-tree section and its neighbourhood).
    pub working_tree: Option<git::WorkingTree>,
}

/// Where an engine's brain is. Recall reads either through the seam
/// ([`cairn_store::RecallRead`]); every other operation needs the SQLite store, and on a
/// PostgreSQL brain answers [`StoreError::NotOnPostgres`] instead of reading anything else.
pub(crate) enum Backend {
    Sqlite(Store),
    Postgres(Box<cairn_store::pg_read::PgReader>),
}

impl Backend {
    fn not_here(reader: &cairn_store::pg_read::PgReader) -> StoreError {
        StoreError::NotOnPostgres {
            url: reader.shown().to_string(),
        }
    }

    /// The SQLite store; the typed refusal on PostgreSQL.
    pub(crate) fn sqlite(&self) -> std::result::Result<&Store, StoreError> {
        match self {
            Backend::Sqlite(store) => Ok(store),
            Backend::Postgres(reader) => Err(Backend::not_here(reader)),
        }
    }

    pub(crate) fn sqlite_mut(&mut self) -> std::result::Result<&mut Store, StoreError> {
        match self {
            Backend::Sqlite(store) => Ok(store),
            Backend::Postgres(reader) => Err(Backend::not_here(reader)),
        }
    }

    /// Read access to the SQLite store (refused on PostgreSQL).
    pub(crate) fn reader(&self) -> std::result::Result<cairn_store::Reader<'_>, StoreError> {
        Ok(self.sqlite()?.reader())
    }

    /// [`Store::write`] (refused on PostgreSQL: nothing is written there yet).
    pub(crate) fn write<T, E>(
        &mut self,
        work: impl FnOnce(&cairn_store::WriteTx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        self.sqlite_mut().map_err(E::from)?.write(work)
    }

    /// What recall reads: the SQLite store (its full-text searches answered by `index` when
    /// given) or the PostgreSQL brain.
    pub(crate) fn recall_read<'a>(
        &'a self,
        index: Option<&'a cairn_store::LexicalIndex>,
    ) -> RecallSource<'a> {
        match self {
            Backend::Sqlite(store) => {
                RecallSource::Sqlite(cairn_store::SqliteRecall::new(store, index))
            }
            Backend::Postgres(reader) => RecallSource::Postgres(reader),
        }
    }

    /// Changes whenever the brain may have changed ([`Store::generation`]).
    pub(crate) fn generation(&self) -> std::result::Result<u64, StoreError> {
        match self {
            Backend::Sqlite(store) => store.generation(),
            Backend::Postgres(reader) => cairn_store::RecallRead::generation(reader.as_ref()),
        }
    }
}

/// Recall's reads on either backend, used as a `dyn RecallRead`.
pub(crate) enum RecallSource<'a> {
    Sqlite(cairn_store::SqliteRecall<'a>),
    Postgres(&'a cairn_store::pg_read::PgReader),
}

impl<'a> std::ops::Deref for RecallSource<'a> {
    type Target = dyn cairn_store::RecallRead + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            RecallSource::Sqlite(sqlite) => sqlite,
            RecallSource::Postgres(reader) => *reader,
        }
    }
}

/// An open brain plus the context calls are made in.
pub struct Engine {
    store: Backend,
    context: Context,
    git: GitSource,
    /// Link records to the entities their text mentions on write (docs/design.md §7); on by default.
    extract_entities: bool,
    semantic: semantic::Semantic,
    /// Records in the full-text index, with the store generation it was counted at: recall
    /// needs it on every query (frequent-term cut, incomplete-index warning) and it changes
    /// only with a write.
    indexed: std::cell::Cell<Option<(u64, usize)>>,
    /// Recall accesses waiting to be written (`None`: written at once, the default).
    accesses: Option<recall::AccessBuffer>,
    /// The full-text index kept in memory, shared by the engines of a long-lived process
    /// ([`Engine::set_shared_lexical_index`]); `None`: recall asks FTS5.
    lexical: Option<std::sync::Arc<cairn_store::LexicalIndex>>,
}

impl Engine {
    /// Opens (creating and migrating if needed) the brain at `path`.
    pub fn open(path: &Path, context: Context) -> Result<Engine> {
        let store = if context.read_only && path.exists() {
            Store::open_read_only(path)?
        } else {
            Store::open(path)?
        };
        Ok(Engine::with_backend(Backend::Sqlite(store), context))
    }

    /// Opens the brain `cairn migrate` copied to the PostgreSQL database of `target`, for
    /// recall: [`Engine::recall`] answers from it as from the brain file (the same records,
    /// scores and JSON), without recording accesses (nothing is written to PostgreSQL yet, as
    /// on a read-only brain). Every other operation answers [`StoreError::NotOnPostgres`].
    pub fn open_postgres(
        target: cairn_store::postgres::PgTarget,
        context: Context,
    ) -> Result<Engine> {
        let reader = cairn_store::pg_read::PgReader::open(target)?;
        Ok(Engine::with_backend(
            Backend::Postgres(Box::new(reader)),
            context,
        ))
    }

    fn with_backend(store: Backend, context: Context) -> Engine {
        Engine {
            store,
            context,
            git: GitSource::Local,
            extract_entities: true,
            semantic: semantic::Semantic::default(),
            indexed: std::cell::Cell::new(None),
            accesses: None,
            lexical: None,
        }
    }

    /// Recall's lexical search (and its term counts) answers from `index`, an in-memory copy
    /// of the full-text index shared with the other engines of this process (the service's):
    /// the same answer as FTS5's, kept current with every write to the brain, whoever made it.
    pub fn set_shared_lexical_index(&mut self, index: std::sync::Arc<cairn_store::LexicalIndex>) {
        self.lexical = Some(index);
    }

    pub fn context(&self) -> &Context {
        &self.context
    }

    /// Makes the following calls as `context` (a long-lived service serves many projects and
    /// actors over one open brain). The store stays open; what it caches is not per context.
    pub fn set_context(&mut self, context: Context) {
        self.context = context;
    }

    /// Where git questions are answered from now on ([`GitSource::Local`] when opened).
    pub fn set_git_source(&mut self, git: GitSource) {
        self.git = git;
    }

    /// The commit a record written now is stamped with.
    fn head_commit(&self) -> Option<String> {
        match &self.git {
            GitSource::Local => git::head_commit(&self.context.cwd),
            GitSource::Supplied(facts) => facts.head.clone(),
        }
    }

    /// The working tree the brief shows.
    fn working_tree(&self) -> Option<git::WorkingTree> {
        match &self.git {
            GitSource::Local => git::working_tree(&self.context.cwd),
            GitSource::Supplied(facts) => facts.working_tree.clone(),
        }
    }

    /// The freshness verdict recall shows for `memory` (the web UI's record page): `None` for a
    /// record without a commit, of another project, or when git is the client's.
    pub fn freshness_of(&self, memory: &cairn_core::memory::Memory) -> Option<String> {
        let stamped_in = match memory.project.as_deref() {
            None => git::StampedIn::Personal,
            Some(project) if project == self.context.project => git::StampedIn::ThisProject,
            Some(_) => return None,
        };
        self.freshness(memory.commit.as_deref()?, stamped_in)
    }

    /// A freshness verdict; none when the repository is the client's, not ours.
    fn freshness(&self, commit: &str, stamped_in: git::StampedIn) -> Option<String> {
        match &self.git {
            GitSource::Local => git::freshness(&self.context.cwd, commit, stamped_in),
            GitSource::Supplied(_) => None,
        }
    }

    /// The SQLite store (refused on a PostgreSQL brain: [`StoreError::NotOnPostgres`]).
    pub fn store(&self) -> Result<&Store> {
        Ok(self.store.sqlite()?)
    }

    pub fn store_mut(&mut self) -> Result<&mut Store> {
        Ok(self.store.sqlite_mut()?)
    }

    /// Whether the brain is on PostgreSQL (only recall answers there so far).
    pub fn is_postgres(&self) -> bool {
        matches!(self.store, Backend::Postgres(_))
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.context.now.unwrap_or_else(Utc::now)
    }

    fn ensure_writable(&self, operation: &'static str) -> Result<()> {
        if self.context.read_only {
            return Err(EngineError::ReadOnly { operation });
        }
        Ok(())
    }

    /// The projects a recall from this context sees: its own and personal.
    pub fn visible_projects(&self) -> Vec<Option<String>> {
        vec![Some(self.context.project.clone()), None]
    }
}

/// The default brain location: `$XDG_DATA_HOME/cairn/brain.db` (or `~/.local/share/…`).
pub fn default_brain_path() -> PathBuf {
    let data_home = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data_home.join("cairn").join("brain.db")
}

/// The environment variable of the test clock: an RFC 3339 time (`2026-11-30T12:00:00Z`) the
/// process works at instead of the real clock, so end-to-end tests order events (a newer
/// dream, an older record) by setting it rather than by sleeping. A test setting, not a user
/// one: everything the process stamps gets that time.
pub const TEST_CLOCK_ENV: &str = "CAIRN_NOW";

/// The fixed time [`TEST_CLOCK_ENV`] sets, `None` when it is unset or empty (the real clock).
pub fn test_clock_from_env() -> Result<Option<DateTime<Utc>>> {
    let Some(value) = std::env::var_os(TEST_CLOCK_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    DateTime::parse_from_rfc3339(&text)
        .map(|at| Some(at.with_timezone(&Utc)))
        .map_err(|error| {
            EngineError::Invalid(format!(
                "{TEST_CLOCK_ENV}={text:?} is not an RFC 3339 time ({error}); nothing was done. It is a test setting: unset it, or give a time like 2026-11-30T12:00:00Z"
            ))
        })
}
