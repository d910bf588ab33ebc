//! cairn-service: the long-lived service layer every server adapter runs on (`cairn mcp` over
//! stdio, `cairn serve` over HTTP and its MCP endpoint).
//!
//! A [`Service`] is a `Sync` handle over one brain. It owns:
//! - **one engine** behind a mutex (opened on first use, and again after a failed open or a
//!   panic), so every request shares its caches: the vector matrix (brought up to date after
//!   writes by reading only the changed rows), its int8 copy, the full-text counts. SQLite
//!   serializes writers anyway; a read holds the engine for the length of one query;
//! - **one embedder**, loaded on a background thread at start-up ([`Service::start_embedder`]),
//!   handed to the engine once it is there (until then recall answers lexical-only and says so);
//! - **the background indexer**, on its own connection: embeds the records still without a
//!   vector (written before the model loaded, or by hooks, which never load it) every
//!   `index_interval`, so requests never wait for it.
//!
//! Each call runs in a [`RequestContext`] the adapter builds: the project, the actor, and where
//! git questions are answered — the caller's own checkout for a local process, or the facts a
//! remote client sent ([`GitSource::Supplied`]); the server's own directory is never asked.
//!
//! Errors stay [`EngineError`]s; [`errors`] maps their [`ErrorKind`] to a CLI exit code, an
//! MCP tool error label and an HTTP status, one table for all three.
//!
//! Requests and answers are the engine's plain structs: nothing here knows SQL or a wire format.

pub mod errors;

use cairn_embed::Embedder;
use cairn_engine::{Context, EmbedderLoader, Engine, EngineError, GitSource};
use chrono::{DateTime, Utc};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

pub use cairn_engine::{ErrorKind, SuppliedGit};

/// How often the background indexer looks for records still without a vector, unless
/// [`ServiceOptions::index_interval`] says.
pub const INDEX_INTERVAL: Duration = Duration::from_secs(10);

/// The brain a service serves and how.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    pub db: PathBuf,
    /// Refuse every write (`CAIRN_READ_ONLY=1`); the brain is opened read-only.
    pub read_only: bool,
    /// How often the background indexer embeds records still without a vector.
    pub index_interval: Duration,
    /// A fixed clock (`CAIRN_NOW`, tests); the real clock when `None`.
    pub now: Option<DateTime<Utc>>,
}

impl ServiceOptions {
    pub fn new(db: PathBuf) -> ServiceOptions {
        ServiceOptions {
            db,
            read_only: false,
            index_interval: INDEX_INTERVAL,
            now: None,
        }
    }
}

/// Who is asking, for which project, and where git questions are answered.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The project records are filed under and recalled from.
    pub project: String,
    /// Recorded in events and history (`mcp`, a token's name, …).
    pub actor: String,
    /// The caller's checkout ([`GitSource::Local`] only: a process on the same machine).
    pub cwd: PathBuf,
    pub git: GitSource,
}

impl RequestContext {
    /// A caller running in its own checkout on this machine (`cairn mcp` over stdio).
    pub fn local(context: &Context) -> RequestContext {
        RequestContext {
            project: context.project.clone(),
            actor: context.actor.clone(),
            cwd: context.cwd.clone(),
            git: GitSource::Local,
        }
    }

    /// A remote caller: git facts are what it sent, never read from the server's directory.
    pub fn remote(project: String, actor: String, git: SuppliedGit) -> RequestContext {
        RequestContext {
            project,
            actor,
            cwd: PathBuf::new(),
            git: GitSource::Supplied(git),
        }
    }
}

/// The service: `Clone` and `Sync`, shared by every connection of every adapter.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

struct Inner {
    options: ServiceOptions,
    /// Opened on first use (and again after a failed open or a panic), so a brain that is
    /// briefly locked or missing at start-up does not take the service down.
    engine: Mutex<Option<Engine>>,
    /// The embedding model once the background load finished (`None` inside: none
    /// configured, or it could not load).
    embedder: OnceLock<Option<Arc<dyn Embedder>>>,
    /// Set by [`Service::stop`]: the background indexer ends its wait at once.
    stopped: (Mutex<bool>, Condvar),
}

impl Service {
    /// A lexical-only service until [`Service::start_embedder`] is called.
    pub fn new(options: ServiceOptions) -> Service {
        Service {
            inner: Arc::new(Inner {
                options,
                engine: Mutex::new(None),
                embedder: OnceLock::new(),
                stopped: (Mutex::new(false), Condvar::new()),
            }),
        }
    }

    pub fn options(&self) -> &ServiceOptions {
        &self.inner.options
    }

    pub fn read_only(&self) -> bool {
        self.inner.options.read_only
    }

    /// Loads the model on a background thread (a model takes 100–300 ms; no caller waits for
    /// it), then reads the brain's vectors into memory so the first hybrid recall is warm, then
    /// runs the background indexer until [`Service::stop`] or the last handle is dropped.
    /// `who` prefixes what it logs on stderr (`cairn mcp`, `cairn serve`).
    pub fn start_embedder(&self, loader: EmbedderLoader, who: &'static str) {
        let inner = Arc::clone(&self.inner);
        std::thread::spawn(move || {
            let embedder = match loader() {
                Ok(Some(embedder)) => Some(Arc::<dyn Embedder>::from(embedder)),
                Ok(None) => None,
                Err(error) => {
                    eprintln!(
                        "{who}: semantic recall is off, recall answers lexical-only: {error}"
                    );
                    None
                }
            };
            let _ = inner.embedder.set(embedder.clone());
            if let Some(embedder) = embedder {
                let weak = Arc::downgrade(&inner);
                drop(inner);
                background_pass(weak, embedder, who);
            }
        });
    }

    /// Whether the model has finished loading (`Some(true)` loaded, `Some(false)` none or it
    /// failed, `None` still loading).
    pub fn embedder_state(&self) -> Option<bool> {
        self.inner.embedder.get().map(Option::is_some)
    }

    /// Ends the background indexer's wait (it finishes the batch it is embedding, if any).
    pub fn stop(&self) {
        let (flag, wake) = &self.inner.stopped;
        *lock(flag) = true;
        wake.notify_all();
    }

    /// Runs `work` on the engine in `request`'s context. Engine errors come back as they are;
    /// a panic in `work` comes back as [`EngineError::Internal`] naming `operation` (the engine
    /// is opened again for the next call, since it may have stopped mid-operation).
    pub fn call<T>(
        &self,
        request: &RequestContext,
        operation: &str,
        work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut slot = lock(&self.inner.engine);
        let options = &self.inner.options;
        let context = Context {
            project: request.project.clone(),
            cwd: request.cwd.clone(),
            actor: request.actor.clone(),
            read_only: options.read_only,
            now: options.now,
        };
        if slot.is_none() {
            *slot = Some(Engine::open(&options.db, context.clone())?);
        }
        let engine = slot.as_mut().expect("opened just above");
        engine.set_context(context);
        engine.set_git_source(request.git.clone());
        if !engine.embedder_is_loaded()
            && let Some(Some(embedder)) = self.inner.embedder.get()
        {
            engine.set_shared_embedder(Arc::clone(embedder));
            // The background pass (started with the model) embeds what is pending: a write
            // here embeds only what it wrote.
            engine.leave_backlog_to_indexer();
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| work(engine))) {
            Ok(answer) => answer,
            Err(_) => {
                *slot = None;
                Err(EngineError::Internal(format!(
                    "`{operation}` failed unexpectedly (an internal error, logged on stderr); nothing is known to have changed — try again"
                )))
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Once the model is resident: embeds the records still waiting for a vector, then reads the
/// vectors into the shared engine so the first hybrid recall is warm; afterwards, every
/// `index_interval`, embeds what hooks captured since. The embedding runs on its own
/// connection, so calls never wait for it (the shared engine picks the new vectors up on its
/// next recall, reading only the changed rows). Stops when the service is stopped or gone.
fn background_pass(inner: Weak<Inner>, embedder: Arc<dyn Embedder>, who: &'static str) {
    let mut indexer: Option<Engine> = None;
    let mut first = true;
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        if !strong.options.read_only {
            index_pending(&strong, &mut indexer, &embedder, who);
        }
        if first {
            let service = Service {
                inner: Arc::clone(&strong),
            };
            let request =
                RequestContext::remote(String::new(), who.to_string(), SuppliedGit::default());
            if let Err(error) = service.call(&request, "warm vectors", Engine::warm_vectors) {
                eprintln!("{who}: the vectors are read on the first recall instead: {error}");
            }
            first = false;
        }
        let (flag, wake) = &strong.stopped;
        let stopped = lock(flag);
        if *stopped {
            return;
        }
        let (stopped, _) = wake
            .wait_timeout(stopped, strong.options.index_interval)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *stopped {
            return;
        }
    }
}

/// Embeds every pending record, a batch at a time, on the indexer's own engine (opened on
/// first use; after an error it is opened again next time).
fn index_pending(
    inner: &Inner,
    indexer: &mut Option<Engine>,
    embedder: &Arc<dyn Embedder>,
    who: &str,
) {
    if indexer.is_none() {
        let context = Context {
            project: String::new(),
            cwd: PathBuf::new(),
            actor: who.to_string(),
            read_only: false,
            now: inner.options.now,
        };
        match Engine::open(&inner.options.db, context) {
            Ok(mut engine) => {
                engine.set_git_source(GitSource::Supplied(SuppliedGit::default()));
                engine.set_shared_embedder(Arc::clone(embedder));
                *indexer = Some(engine);
            }
            Err(error) => {
                eprintln!("{who}: cannot open the brain to embed pending records: {error}");
                return;
            }
        }
    }
    let engine = indexer.as_mut().expect("opened just above");
    loop {
        match engine.index_pending(Some(cairn_engine::BACKGROUND_BATCH), &mut |_, _| {}) {
            Ok(report)
                if report.failed == 0
                    && report.pending > 0
                    && report.embedded + report.reused > 0 =>
            {
                continue;
            }
            Ok(report) if report.failed == 0 => return,
            Ok(report) => {
                eprintln!(
                    "{who}: {} record(s) could not be embedded ({}); `cairn reindex` retries",
                    report.failed,
                    report.errors.join("; ")
                );
                return;
            }
            Err(error) => {
                eprintln!("{who}: embedding pending records stopped: {error}");
                *indexer = None;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::record::MemoryType;
    use cairn_engine::{RememberRequest, RememberStatus};

    fn request(project: &str, actor: &str) -> RequestContext {
        RequestContext::remote(project.into(), actor.into(), SuppliedGit::default())
    }

    fn service() -> (tempfile::TempDir, Service) {
        let dir = tempfile::tempdir().unwrap();
        let service = Service::new(ServiceOptions::new(dir.path().join("brain.db")));
        (dir, service)
    }

    #[test]
    fn each_call_runs_in_its_own_project_and_actor() {
        let (_dir, service) = service();
        let stored = service
            .call(&request("alpha", "agent-a"), "remember", |engine| {
                engine.remember(&RememberRequest::new(
                    MemoryType::Note,
                    "alpha uses port 7000 for the cache",
                ))
            })
            .unwrap();
        assert_eq!(stored.status, RememberStatus::Added);
        let id = stored.id.unwrap();
        let memory = service
            .call(&request("beta", "agent-b"), "show", |engine| engine.get(id))
            .unwrap();
        assert_eq!(memory.project.as_deref(), Some("alpha"));
        service
            .call(&request("alpha", "agent-a"), "forget", |engine| {
                engine.forget(id, false)
            })
            .unwrap();
        let history = service
            .call(&request("beta", "agent-b"), "history", |engine| {
                engine.history(id)
            })
            .unwrap();
        assert_eq!(
            history[0].actor, "agent-a",
            "the actor of the call that changed it"
        );
    }

    #[test]
    fn a_supplied_commit_stamps_a_gotcha_without_asking_git() {
        let (_dir, service) = service();
        let mut remote = request("alpha", "ci");
        remote.git = GitSource::Supplied(SuppliedGit {
            head: Some("0123456789abcdef0123456789abcdef01234567".into()),
            working_tree: None,
        });
        let gotcha = RememberRequest::new(
            MemoryType::Gotcha,
            "the queue stalls when WAL grows past a gigabyte",
        );
        let stored = service
            .call(&remote, "remember", |engine| engine.remember(&gotcha))
            .unwrap();
        let memory = service
            .call(&remote, "show", |engine| engine.get(stored.id.unwrap()))
            .unwrap();
        assert_eq!(
            memory.commit.as_deref(),
            Some("0123456789abcdef0123456789abcdef01234567")
        );
    }

    #[test]
    fn a_panic_is_an_internal_error_and_the_service_keeps_serving() {
        let (_dir, service) = service();
        let panicked: Result<(), EngineError> =
            service.call(&request("p", "a"), "boom", |_| panic!("boom"));
        let error = panicked.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Other);
        assert!(error.to_string().contains("`boom` failed unexpectedly"));
        let stats = service.call(&request("p", "a"), "stats", |engine| engine.stats());
        assert!(stats.is_ok());
    }

    #[test]
    fn a_read_only_service_refuses_writes_with_the_cli_message() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("brain.db");
        Service::new(ServiceOptions::new(db.clone()))
            .call(&request("p", "a"), "stats", |engine| engine.stats())
            .unwrap();
        let mut options = ServiceOptions::new(db);
        options.read_only = true;
        let service = Service::new(options);
        let error = service
            .call(&request("p", "a"), "remember", |engine| {
                engine.remember(&RememberRequest::new(
                    MemoryType::Note,
                    "nothing is written here",
                ))
            })
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ReadOnly);
        assert_eq!(errors::http_status(error.kind()), 409);
    }
}
