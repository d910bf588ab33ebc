//! cairn-service: the long-lived service layer every server adapter runs on (`cairn mcp` over
//! stdio, `cairn serve` over HTTP and its MCP endpoint).
//!
//! A [`Service`] is a `Sync` handle over one brain. It owns:
//! - **one writer engine** behind a mutex (opened on first use, and again after a failed open
//!   or a panic), so every request shares its caches: the vector matrix (brought up to date
//!   after writes by reading only the changed rows), its int8 copy, the full-text counts.
//!   SQLite serializes writers anyway;
//! - **reader engines** beside it, one per core, each on its own connection (WAL readers):
//!   token checks and lexical recalls ([`Service::read`], [`Service::recall`]) run there side
//!   by side and never wait for a write. A call takes whichever reader frees first, and calls
//!   that wait are served in the order they came;
//! - optionally, **buffered access records** ([`ServiceOptions::buffer_accesses`]): what
//!   recall records of each access is gathered from every engine into one buffer and written
//!   in batches by a thread of its own on the writer engine, so a recall never writes and a
//!   reader engine never does;
//! - **one embedder**, loaded on a background thread at start-up ([`Service::start_embedder`]),
//!   handed to the engine once it is there (until then recall answers lexical-only and says so);
//! - **one full-text index in memory** ([`LexicalIndex`]), shared by every engine, built on a
//!   background thread at start-up ([`Service::start_lexical_index`]; FTS5 answers until then)
//!   and kept current through the brain's change log;
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
pub mod memory;

use cairn_embed::Embedder;
use cairn_engine::{
    AccessBuffer, Context, EmbedderLoader, Engine, EngineError, GitSource, GroupedRemember,
    LexicalIndex, Mode, RecallAnswer, RecallRequest, RememberOutcome, RememberRequest,
};
use chrono::{DateTime, Utc};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

pub use cairn_engine::{ErrorKind, SuppliedGit};

/// How often the background indexer looks for records still without a vector, unless
/// [`ServiceOptions::index_interval`] says.
pub const INDEX_INTERVAL: Duration = Duration::from_secs(10);

/// With [`ServiceOptions::buffer_accesses`], recall accesses are written before the oldest has
/// waited longer than this (the flusher looks every quarter of it and writes what would be
/// older than this at its next look), so a crash loses at most the accesses of about the last
/// this long.
pub const ACCESS_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// With [`ServiceOptions::buffer_accesses`], this many buffered recall accesses are written at
/// once, whatever their age. Small enough that the write (on the writer engine, which the
/// remembers queue for) is short: a batch of 256 held the writer for about 70 ms of CPU under
/// the HTTP benchmark's load, the slowest remembers' wait; 64 cut the p99 from 165–187 to
/// 96–109 ms at the same throughput (README, `cairn serve`).
pub const ACCESS_BATCH: usize = 64;

/// How long the background indexer waits at most for the calls on the writer engine to end
/// before it embeds anyway ([`ServiceOptions::indexer_yield`]): a recall never shares the two
/// cores with an embedding the indexer started while it waited, and a steady stream of calls
/// still leaves the indexer a turn at least this often.
pub const INDEXER_YIELD: Duration = Duration::from_millis(500);

/// Most reader engines a service keeps by default ([`ServiceOptions::readers`] is one per core
/// up to this), so lexical recalls run side by side.
pub const MAX_READERS: usize = 4;

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
    /// Buffer what recall records of each access (use counts, last access, `recall` events)
    /// and write it in one transaction per [`ACCESS_BATCH`] accesses or [`ACCESS_FLUSH_INTERVAL`],
    /// and on [`Service::stop`] or when the last handle is dropped, instead of one write
    /// transaction per recall. A crash loses at most the accesses of about the last second;
    /// records and every other write are written before they are acknowledged as always.
    /// `cairn serve` (and its local daemon) turns this on unless `--no-buffer-accesses`;
    /// [`ServiceOptions::new`] leaves it off (`cairn mcp` over stdio writes each access).
    pub buffer_accesses: bool,
    /// Reader engines for calls that only read ([`Service::read`]): one per core, at most
    /// [`MAX_READERS`], by default.
    pub readers: usize,
    /// How long the background indexer holds back an embedding while calls wait for or run
    /// on the writer engine (hybrid recalls, writes), at most ([`INDEXER_YIELD`]).
    pub indexer_yield: Duration,
    /// What the embedder configuration says, as `cairn model status` reports it (`None`: not
    /// told).
    pub embedder_setup: Option<EmbedderSetup>,
    /// How much of the brain's file each engine's connection reads through a memory map
    /// ([`cairn_store::Store::map_memory`]; `0`: plain reads). [`MMAP_BYTES`] by default.
    pub mmap_bytes: u64,
    /// Each engine's page cache ([`cairn_store::Store::limit_page_cache`]; `None`: the
    /// store's default, 16 MB per connection).
    pub page_cache_bytes: Option<u64>,
}

/// The memory map of each engine's connection by default: 1 GiB, more than a brain of a
/// million records' pages that are read (the map is address space; what is resident is the
/// kernel's page cache, shared by every connection, not a copy per engine).
pub const MMAP_BYTES: u64 = 1 << 30;

/// The embedder configuration of the process that serves (`cairn model status` on a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderSetup {
    /// `local`, `http`, `none`, `hash` or `invalid`.
    pub provider: String,
    /// Why the configuration is invalid, when it is.
    pub config_error: Option<String>,
    /// Where the local model was found.
    pub model_dir: Option<PathBuf>,
}

impl ServiceOptions {
    pub fn new(db: PathBuf) -> ServiceOptions {
        ServiceOptions {
            db,
            read_only: false,
            index_interval: INDEX_INTERVAL,
            now: None,
            buffer_accesses: false,
            readers: std::thread::available_parallelism()
                .map_or(1, usize::from)
                .min(MAX_READERS),
            indexer_yield: INDEXER_YIELD,
            embedder_setup: None,
            mmap_bytes: MMAP_BYTES,
            page_cache_bytes: None,
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
    /// Engines on connections of their own for calls that only read ([`Service::read`]),
    /// each opened on first use, handed out first come, first served.
    readers: Readers,
    /// With [`ServiceOptions::buffer_accesses`]: the recall accesses every engine recorded,
    /// waiting for the flusher (woken when a batch is full) to write them on the writer
    /// engine.
    accesses: (Mutex<AccessBuffer>, Condvar),
    /// The embedding model once the background load finished (`None` inside: none
    /// configured, or it could not load).
    embedder: OnceLock<Option<Arc<dyn Embedder>>>,
    /// What the background indexer waits for: [`Service::stop`] (it ends its wait at once) or
    /// records a write stored without embedding them (it embeds them at once).
    signals: (Mutex<Signals>, Condvar),
    /// The indexer's last embedding failed: writes embed what they store themselves (and say
    /// so when they cannot) until one succeeds again.
    embedding_fails: AtomicBool,
    /// Calls waiting for or running on the writer engine ([`Service::call`]): while there are
    /// any, the indexer does not start an embedding (up to [`ServiceOptions::indexer_yield`]).
    calls: AtomicUsize,
    /// Times the indexer held an embedding back for calls (what the tests look at).
    yields: AtomicUsize,
    /// The full-text index in memory, shared by every engine (built on the first lexical
    /// search, kept current through the brain's change log whoever writes).
    lexical: Arc<LexicalIndex>,
    /// Remembers waiting for the writer engine ([`Service::remember`]): whoever gets the
    /// writer next stores all of them in one transaction.
    remembers: Mutex<Vec<Queued>>,
    /// Set after each call on the writer engine to wake the checkpointer thread
    /// ([`checkpointer`]), which copies the write-ahead log into the database on a connection
    /// of its own so that no write waits for a checkpoint.
    checkpoint: (Mutex<bool>, Condvar),
    /// Checkpoints the checkpointer ran (what the tests look at).
    checkpoints: AtomicUsize,
    /// Groups of remembers committed, and the remembers in them (what the tests look at).
    groups: AtomicUsize,
    grouped: AtomicUsize,
}

/// The reader engines, handed out first come, first served: a call takes whichever engine
/// frees first, and calls that wait are served in the order they came. (A lock per engine,
/// tried round robin, tied each waiting call to one engine and let newcomers overtake: under
/// 32 clients the slowest lexical recalls waited four times the median.)
struct Readers {
    slots: Vec<Mutex<Option<Engine>>>,
    queue: Mutex<ReaderQueue>,
}

struct ReaderQueue {
    /// Engines nobody holds (the one freed last at the end: its pages are the warmest).
    free: Vec<usize>,
    /// Calls waiting for an engine, oldest first; there are some only while none is free.
    waiting: std::collections::VecDeque<Arc<Waiter>>,
}

/// A call waiting for a reader engine: the engine's number is handed to it directly.
struct Waiter {
    thread: std::thread::Thread,
    given: AtomicUsize,
}

impl Waiter {
    const NONE: usize = usize::MAX;
}

impl Readers {
    fn new(count: usize) -> Readers {
        Readers {
            slots: (0..count).map(|_| Mutex::new(None)).collect(),
            queue: Mutex::new(ReaderQueue {
                free: (0..count).rev().collect(),
                waiting: std::collections::VecDeque::new(),
            }),
        }
    }

    /// A reader engine: the first to free up after every call that waited before this one.
    fn take(&self) -> Reader<'_> {
        let waiter = {
            let mut queue = lock(&self.queue);
            if let Some(index) = queue.free.pop() {
                return self.reader(index);
            }
            let waiter = Arc::new(Waiter {
                thread: std::thread::current(),
                given: AtomicUsize::new(Waiter::NONE),
            });
            queue.waiting.push_back(Arc::clone(&waiter));
            waiter
        };
        loop {
            let given = waiter.given.load(Ordering::Acquire);
            if given != Waiter::NONE {
                return self.reader(given);
            }
            std::thread::park();
        }
    }

    fn reader(&self, index: usize) -> Reader<'_> {
        Reader {
            readers: self,
            index,
            slot: Some(lock(&self.slots[index])),
        }
    }

    /// Gives engine `index` to the call that has waited longest, or marks it free.
    fn give_back(&self, index: usize) {
        let mut queue = lock(&self.queue);
        match queue.waiting.pop_front() {
            Some(waiter) => {
                waiter.given.store(index, Ordering::Release);
                waiter.thread.unpark();
            }
            None => queue.free.push(index),
        }
    }

    /// Calls waiting for a reader engine (what the tests look at).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.queue).waiting.len()
    }
}

/// A reader engine held by one call; given to the next when dropped.
struct Reader<'a> {
    readers: &'a Readers,
    index: usize,
    slot: Option<MutexGuard<'a, Option<Engine>>>,
}

impl Reader<'_> {
    fn slot(&mut self) -> &mut Option<Engine> {
        self.slot.as_mut().expect("held until dropped")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        drop(self.slot.take());
        self.readers.give_back(self.index);
    }
}

/// A remember waiting for the writer engine, and where its answer goes.
struct Queued {
    item: GroupedRemember,
    answer: Answer,
}

/// Where one queued remember's answer is put (by whichever call stored its group).
type Answer = Arc<Mutex<Option<Result<RememberOutcome, EngineError>>>>;

/// Counts a call in [`Inner::calls`] while it lives.
struct InCall<'a>(&'a AtomicUsize);

impl<'a> InCall<'a> {
    fn enter(calls: &'a AtomicUsize) -> InCall<'a> {
        calls.fetch_add(1, Ordering::SeqCst);
        InCall(calls)
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// See [`Inner::signals`].
#[derive(Default)]
struct Signals {
    stopped: bool,
    /// Records written on the writer engine, left to the indexer
    /// ([`Engine::leave_writes_to_indexer`]), oldest first.
    unembedded: Vec<i64>,
}

impl Drop for Inner {
    /// The last handle is gone: buffered accesses are written before the engines close.
    fn drop(&mut self) {
        let pending = std::mem::take(&mut *lock(&self.accesses.0));
        let count = pending.len();
        if let Err(error) = write_pending(&mut lock(&self.engine), self, pending) {
            eprintln!("cairn: {count} recall access(es) were not written ({error})");
        }
    }
}

impl Service {
    /// A lexical-only service until [`Service::start_embedder`] is called.
    pub fn new(options: ServiceOptions) -> Service {
        memory::limit_arenas();
        let buffer = options.buffer_accesses && !options.read_only;
        let readers = options.readers.max(1);
        let service = Service {
            inner: Arc::new(Inner {
                options,
                engine: Mutex::new(None),
                readers: Readers::new(readers),
                accesses: (Mutex::new(AccessBuffer::default()), Condvar::new()),
                embedder: OnceLock::new(),
                signals: (Mutex::new(Signals::default()), Condvar::new()),
                embedding_fails: AtomicBool::new(false),
                calls: AtomicUsize::new(0),
                yields: AtomicUsize::new(0),
                lexical: Arc::new(LexicalIndex::new()),
                remembers: Mutex::new(Vec::new()),
                checkpoint: (Mutex::new(false), Condvar::new()),
                checkpoints: AtomicUsize::new(0),
                groups: AtomicUsize::new(0),
                grouped: AtomicUsize::new(0),
            }),
        };
        if !service.inner.options.read_only {
            let weak = Arc::downgrade(&service.inner);
            std::thread::Builder::new()
                .name("cairn-checkpoint".into())
                .spawn(move || checkpointer(weak))
                .expect("start the checkpointer thread");
        }
        if buffer {
            let weak = Arc::downgrade(&service.inner);
            std::thread::Builder::new()
                .name("cairn-access-flush".into())
                .spawn(move || access_flusher(weak))
                .expect("start the access flusher thread");
        }
        service
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
            if let Some(embedder) = &embedder {
                // The indexer embeds stored texts in the background; a recall waits for its
                // query: the threads that embed stored texts give way.
                embedder.prefer_queries();
            }
            let _ = inner.embedder.set(embedder.clone());
            if let Some(embedder) = embedder {
                let weak = Arc::downgrade(&inner);
                drop(inner);
                background_pass(weak, embedder, who);
            }
        });
    }

    /// Builds the shared full-text index in memory on a background thread with a connection of
    /// its own (seconds at 100,000 records), so that no request waits for it: until it is
    /// built, lexical searches are answered by FTS5 (the same answer, slower). A failure is
    /// said on stderr, prefixed with `who`, and leaves searches to FTS5 until one builds it.
    pub fn start_lexical_index(&self, who: &'static str) {
        let lexical = Arc::clone(&self.inner.lexical);
        let db = self.inner.options.db.clone();
        let spawned = std::thread::Builder::new()
            .name("cairn-lexical-index".into())
            .spawn(move || {
                if !db.exists() {
                    // A brain not created yet: its first search builds the (empty) index.
                    return;
                }
                let built = cairn_store::Store::open_read_only(&db)
                    .and_then(|store| lexical.prepare(&store.reader()));
                if let Err(error) = built {
                    eprintln!(
                        "{who}: the full-text index was not built in memory, FTS5 answers: {error}"
                    );
                }
                // The build read every record; what it freed goes back to the kernel.
                memory::release_freed();
            });
        if let Err(error) = spawned {
            eprintln!("{who}: the full-text index is built by the first search instead: {error}");
        }
    }

    /// Whether the shared full-text index is built in memory ([`Service::start_lexical_index`]).
    pub fn lexical_index_built(&self) -> bool {
        self.inner.lexical.is_built()
    }

    /// Whether the model has finished loading (`Some(true)` loaded, `Some(false)` none or it
    /// failed, `None` still loading).
    pub fn embedder_state(&self) -> Option<bool> {
        self.inner.embedder.get().map(Option::is_some)
    }

    /// Ends the background indexer's wait (it finishes the batch it is embedding, if any) and
    /// writes the recall accesses still buffered.
    pub fn stop(&self) {
        let (signals, wake) = &self.inner.signals;
        lock(signals).stopped = true;
        wake.notify_all();
        self.inner.accesses.1.notify_all();
        self.inner.checkpoint.1.notify_all();
        if let Err(error) = self.write_accesses() {
            eprintln!(
                "cairn: recall accesses could not be written yet ({error}); they are tried again"
            );
        }
    }

    /// Writes the recall accesses buffered so far ([`ServiceOptions::buffer_accesses`]) and
    /// answers how many.
    pub fn flush_accesses(&self) -> Result<usize, EngineError> {
        self.write_accesses()
    }

    /// Writes the accesses every engine buffered (each call moves its engine's to
    /// [`Inner::accesses`] when it ends) on the writer engine, opened if no call has yet,
    /// with any the writer kept from a failed write. Answers how many; on failure they stay
    /// buffered in the writer engine for the next try.
    fn write_accesses(&self) -> Result<usize, EngineError> {
        let pending = std::mem::take(&mut *lock(&self.inner.accesses.0));
        self.on_writer(|slot, _| write_pending(slot, &self.inner, pending))
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
        self.on_writer(|slot, embedder| {
            run_on(slot, &self.inner, embedder, request, operation, work)
        })
    }

    /// Stores one memory through the whole write path on the writer engine, like
    /// `call(…, |engine| engine.remember(…))`, but committed together with the remembers that
    /// queued beside it (group commit): the call that gets the writer stores every queued
    /// remember in one transaction ([`Engine::remember_group`]: in the order they came, each
    /// in its own context, each seeing the ones before it, each with its own answer or error),
    /// so under load a remember waits for one commit instead of one per remember before it.
    /// The answer comes once its group is committed.
    pub fn remember(
        &self,
        request: &RequestContext,
        remember: RememberRequest,
    ) -> Result<RememberOutcome, EngineError> {
        let answer: Answer = Arc::new(Mutex::new(None));
        lock(&self.inner.remembers).push(Queued {
            item: GroupedRemember {
                context: context_for(request, &self.inner.options),
                git: request.git.clone(),
                request: remember,
            },
            answer: Arc::clone(&answer),
        });
        self.on_writer(|slot, embedder| {
            // The call that had the writer before may have stored this one with its group.
            if let Some(done) = lock(&answer).take() {
                return done;
            }
            let queued = std::mem::take(&mut *lock(&self.inner.remembers));
            let group: Vec<GroupedRemember> = queued.iter().map(|q| q.item.clone()).collect();
            let stored = run_on(slot, &self.inner, embedder, request, "remember", |engine| {
                Ok(engine.remember_group(&group))
            });
            match stored {
                Ok(answers) => {
                    self.inner.groups.fetch_add(1, Ordering::Relaxed);
                    self.inner
                        .grouped
                        .fetch_add(answers.len(), Ordering::Relaxed);
                    for (queued, done) in queued.iter().zip(answers) {
                        *lock(&queued.answer) = Some(done);
                    }
                    lock(&answer)
                        .take()
                        .expect("a remember is queued until the writer answers it")
                }
                Err(error) => {
                    // The engine did not open, or the group panicked (nothing of it was
                    // committed): this call answers the error; the others queue again, each
                    // to be stored by the next call that gets the writer.
                    let mut waiting = lock(&self.inner.remembers);
                    let others = queued
                        .into_iter()
                        .filter(|q| !Arc::ptr_eq(&q.answer, &answer));
                    waiting.splice(0..0, others);
                    Err(error)
                }
            }
        })
    }

    /// How many checkpoints the checkpointer thread ran.
    pub fn checkpoints_run(&self) -> usize {
        self.inner.checkpoints.load(Ordering::Relaxed)
    }

    /// How many groups [`Service::remember`] committed and how many remembers they held.
    pub fn remember_groups(&self) -> (usize, usize) {
        (
            self.inner.groups.load(Ordering::Relaxed),
            self.inner.grouped.load(Ordering::Relaxed),
        )
    }

    /// Runs `work` with the writer engine's slot and the embedder to give it, counted as a
    /// call while it waits and runs; hands what it stored to the indexer after.
    fn on_writer<T>(
        &self,
        work: impl FnOnce(&mut Option<Engine>, Option<(&Arc<dyn Embedder>, bool)>) -> T,
    ) -> T {
        let in_call = InCall::enter(&self.inner.calls);
        let mut slot = lock(&self.inner.engine);
        let embedder = match self.inner.embedder.get() {
            Some(Some(embedder)) => Some(embedder),
            _ => None,
        };
        let defer_writes = !self.inner.embedding_fails.load(Ordering::Relaxed);
        let answer = work(&mut slot, embedder.map(|embedder| (embedder, defer_writes)));
        // What the call stored is acknowledged now; the indexer embeds it right after.
        let written = slot
            .as_mut()
            .map(Engine::take_unembedded_writes)
            .unwrap_or_default();
        drop(slot);
        drop(in_call);
        let (wanted, wake) = &self.inner.checkpoint;
        *lock(wanted) = true;
        wake.notify_one();
        if !written.is_empty() {
            let (signals, wake) = &self.inner.signals;
            lock(signals).unembedded.extend(written);
            wake.notify_all();
        }
        answer
    }

    /// Runs `work` on an engine of its own (its own connection, opened for this call and
    /// closed after it), for long work that must not hold the writer engine: a maintenance run
    /// or an extraction waits for an LLM for minutes while every other call goes on (SQLite
    /// serializes its write transactions with the writer's, one at a time). It has no
    /// embedder: what it stores waits for the background indexer's next pass.
    pub fn call_alone<T>(
        &self,
        request: &RequestContext,
        operation: &str,
        work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut slot = None;
        run_on(&mut slot, &self.inner, None, request, operation, work)
    }

    /// Runs `work` like [`Service::call`], but on one of the reader engines (their own
    /// connections, WAL readers beside the writer), so calls that only read answer side by side
    /// and never wait for a write. A reader has no embedder: semantic work goes to
    /// [`Service::call`]. A write made here is still safe (SQLite serializes it with the
    /// writer's), only not what a reader is for.
    pub fn read<T>(
        &self,
        request: &RequestContext,
        operation: &str,
        work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut reader = self.inner.readers.take();
        run_on(reader.slot(), &self.inner, None, request, operation, work)
    }

    /// A recall, on a reader engine when it is lexical (asked so, or no model is resident), on
    /// the engine with the model and the vectors otherwise.
    pub fn recall(
        &self,
        request: &RequestContext,
        recall: &RecallRequest,
    ) -> Result<RecallAnswer, EngineError> {
        let lexical = recall.mode == Mode::Lexical || self.embedder_state() != Some(true);
        if lexical {
            return self.read(request, "recall", |engine| engine.recall(recall));
        }
        // The query is embedded before the engine with the vectors is taken: that engine is
        // one, behind a mutex, and with the embedding inside it concurrent hybrid recalls ran
        // one at a time on one core (README, `cairn serve`, 2026-12-07). A failed embedding
        // leaves it to the engine, which says why in its answer.
        let embedded = self
            .inner
            .embedder
            .get()
            .and_then(Option::as_ref)
            .and_then(|embedder| embedder.embed_query(&recall.query).ok());
        self.call(request, "recall", |engine| match embedded {
            Some(vector) => engine.recall_with_query_vector(recall, vector),
            None => engine.recall(recall),
        })
    }
}

/// Runs `work` on the engine in `slot` (opened first if needed) in `request`'s context: see
/// [`Service::call`].
fn run_on<T>(
    slot: &mut Option<Engine>,
    inner: &Inner,
    embedder: Option<(&Arc<dyn Embedder>, bool)>,
    request: &RequestContext,
    operation: &str,
    work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
) -> Result<T, EngineError> {
    let context = context_for(request, &inner.options);
    let engine = opened(slot, inner, &context)?;
    engine.set_context(context);
    engine.set_git_source(request.git.clone());
    if let Some((embedder, defer_writes)) = embedder {
        if !engine.embedder_is_loaded() {
            engine.set_shared_embedder(Arc::clone(embedder));
        }
        // The background pass (started with the model) embeds what is pending and, right
        // after each write, what it wrote: a write here only stores — unless the indexer's
        // embeddings fail, then a write tries itself and warns.
        if defer_writes {
            engine.leave_writes_to_indexer();
        } else {
            engine.embed_writes_here();
        }
    }
    match std::panic::catch_unwind(AssertUnwindSafe(|| work(engine))) {
        Ok(answer) => {
            hand_over_accesses(inner, engine);
            answer
        }
        Err(_) => {
            // Its transaction (if any) rolled back; what it had buffered is still whole.
            if let Some(mut engine) = slot.take() {
                hand_over_accesses(inner, &mut engine);
            }
            Err(EngineError::Internal(format!(
                "`{operation}` failed unexpectedly (an internal error, logged on stderr); nothing is known to have changed — try again"
            )))
        }
    }
}

/// The engine in `slot`, opened in `context` first if no call has yet, with the service's
/// settings (buffered accesses, the shared full-text index) whoever opens it.
fn opened<'s>(
    slot: &'s mut Option<Engine>,
    inner: &Inner,
    context: &Context,
) -> Result<&'s mut Engine, EngineError> {
    if slot.is_none() {
        let mut engine = open_engine(&inner.options, context.clone())?;
        if inner.options.buffer_accesses && !inner.options.read_only {
            engine.buffer_accesses();
        }
        engine.set_shared_lexical_index(Arc::clone(&inner.lexical));
        *slot = Some(engine);
    }
    Ok(slot.as_mut().expect("opened just above"))
}

/// Writes `pending` and whatever the writer engine in `slot` kept from a failed write, on that
/// engine (opened if no call has yet); answers how many. On failure they stay buffered there.
fn write_pending(
    slot: &mut Option<Engine>,
    inner: &Inner,
    pending: AccessBuffer,
) -> Result<usize, EngineError> {
    if pending.is_empty() && slot.as_ref().is_none_or(|e| e.pending_accesses().0 == 0) {
        return Ok(0);
    }
    let engine = opened(slot, inner, &flusher_context(&inner.options))?;
    engine.add_accesses(pending);
    engine.flush_accesses()
}

/// Moves the accesses `engine` buffered in its call to the service's buffer, and wakes the
/// flusher when a batch is full: they are written on the writer engine, never by a reader
/// (whose call would then wait for SQLite's write lock while other calls wait for it).
fn hand_over_accesses(inner: &Inner, engine: &mut Engine) {
    let taken = engine.take_accesses();
    if taken.is_empty() {
        return;
    }
    let (buffer, wake) = &inner.accesses;
    let mut buffer = lock(buffer);
    buffer.append(taken);
    if buffer.len() >= ACCESS_BATCH {
        wake.notify_one();
    }
}

/// The context the flusher opens the writer engine in when no call has yet (accesses carry
/// their own project and actor).
fn flusher_context(options: &ServiceOptions) -> Context {
    context_for(
        &RequestContext::remote(String::new(), String::new(), SuppliedGit::default()),
        options,
    )
}

/// The engine's context for `request`.
fn context_for(request: &RequestContext, options: &ServiceOptions) -> Context {
    Context {
        project: request.project.clone(),
        cwd: request.cwd.clone(),
        actor: request.actor.clone(),
        read_only: options.read_only,
        now: options.now,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes the buffered recall accesses ([`Inner::accesses`]) on the writer engine when a batch
/// is full or the oldest has waited [`ACCESS_FLUSH_INTERVAL`] (checked every quarter of it).
/// Stops when the service is stopped or gone.
fn access_flusher(inner: Weak<Inner>) {
    let tick = ACCESS_FLUSH_INTERVAL / 4;
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let due = {
            let (buffer, wake) = &strong.accesses;
            let mut buffer = lock(buffer);
            if buffer.len() < ACCESS_BATCH {
                buffer = wake
                    .wait_timeout(buffer, tick)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
            buffer.len() >= ACCESS_BATCH
                || buffer
                    .since()
                    .is_some_and(|since| since.elapsed() + tick >= ACCESS_FLUSH_INTERVAL)
        };
        if lock(&strong.signals.0).stopped {
            return;
        }
        let writer_due = || {
            lock(&strong.engine).as_ref().is_some_and(|engine| {
                let (pending, since) = engine.pending_accesses();
                pending > 0 && since.is_some_and(|s| s.elapsed() + tick >= ACCESS_FLUSH_INTERVAL)
            })
        };
        if due || writer_due() {
            let service = Service {
                inner: Arc::clone(&strong),
            };
            if let Err(error) = service.write_accesses() {
                eprintln!(
                    "cairn: recall accesses could not be written yet ({error}); they are tried again"
                );
            }
        }
    }
}

/// How often the checkpointer looks at the write-ahead log when no call woke it.
const CHECKPOINT_TICK: Duration = Duration::from_millis(250);

/// Copies the write-ahead log into the database whenever it has grown past
/// [`cairn_store::WAL_TRUNCATE_BYTES`], on a connection of its own, without waiting for or
/// holding up any reader or writer ([`cairn_store::Store::checkpoint_passive`]); the engines
/// leave checkpoints to it ([`cairn_store::Store::leave_checkpoints`]). On the writer engine a
/// checkpoint (two syncs, 6–40 ms each under the HTTP benchmark's load) held every remember
/// queued behind it: the slowest tenth of them, and so the p99 of the whole mix (issue 14).
/// Woken after each call on the writer engine, and every [`CHECKPOINT_TICK`] for writes made
/// elsewhere (the indexer, other processes). Stops when the service is stopped or gone.
fn checkpointer(inner: Weak<Inner>) {
    let mut store: Option<cairn_store::Store> = None;
    // Whether the last pass left frames behind (readers still on them): look again soon.
    let mut behind = false;
    // Whether the last pass failed (said once, not every tick).
    let mut failing = false;
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        {
            let (wanted, wake) = &strong.checkpoint;
            let mut wanted = lock(wanted);
            if !*wanted {
                let wait = if behind {
                    CHECKPOINT_TICK / 25
                } else {
                    CHECKPOINT_TICK
                };
                wanted = wake
                    .wait_timeout(wanted, wait)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
            *wanted = false;
        }
        if lock(&strong.signals.0).stopped {
            return;
        }
        behind = false;
        // Asked of the file before any connection is opened: a brain that does not exist yet
        // is not created here.
        if cairn_store::wal_bytes_of(&strong.options.db) <= cairn_store::WAL_TRUNCATE_BYTES {
            continue;
        }
        if store.is_none() {
            match cairn_store::Store::open(&strong.options.db) {
                Ok(opened) => {
                    // Its cache serves no reads; the engines' limit holds for it too.
                    if let Some(bytes) = strong.options.page_cache_bytes {
                        let _ = opened.limit_page_cache(bytes);
                    }
                    store = Some(opened);
                }
                // Not there yet, or locked: the writes checkpoint themselves past their cap.
                Err(_) => continue,
            }
        }
        let Some(checkpointing) = store.as_ref() else {
            continue;
        };
        strong.checkpoints.fetch_add(1, Ordering::Relaxed);
        match checkpointing.checkpoint_passive() {
            Ok(pass) => {
                behind = pass.copied < pass.frames;
                failing = false;
            }
            Err(error) => {
                if !failing {
                    eprintln!(
                        "cairn: the write-ahead log could not be checkpointed ({error}); writes checkpoint it themselves past {} MB",
                        cairn_store::WAL_WRITER_CAP_BYTES >> 20
                    );
                }
                failing = true;
                store = None;
            }
        }
    }
}

/// Once the model is resident: embeds the records still waiting for a vector, then reads the
/// vectors into the shared engine so the first hybrid recall is warm; afterwards embeds what
/// each write on the writer engine stored as soon as it is acknowledged, and every
/// `index_interval` whatever else is pending (what hooks captured, what a write's new turn
/// took the context vector from). The embedding runs on its own connection, so calls never
/// wait for it (the shared engine picks the new vectors up on its next recall, reading only
/// the changed rows). Stops when the service is stopped or gone.
fn background_pass(inner: Weak<Inner>, embedder: Arc<dyn Embedder>, who: &'static str) {
    let mut indexer: Option<Engine> = None;
    let mut first = true;
    // When the last sweep for every pending record ran (`None`: not yet).
    let mut swept: Option<std::time::Instant> = None;
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let written = std::mem::take(&mut lock(&strong.signals.0).unembedded);
        // Whether this pass embedded or read the vectors (then what it freed is trimmed before
        // the thread sleeps; an idle sweep every `index_interval` trims nothing, so requests
        // never share the allocator's locks with a trim for nothing).
        let mut worked = first;
        if !strong.options.read_only {
            if !written.is_empty() {
                index_written(&strong, &mut indexer, &embedder, who, &written);
                worked = true;
            }
            if swept.is_none_or(|at| at.elapsed() >= strong.options.index_interval) {
                worked |= index_pending(&strong, &mut indexer, &embedder, who);
                swept = Some(std::time::Instant::now());
            }
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
        if worked {
            memory::release_freed();
        }
        let (signals, wake) = &strong.signals;
        let waiting = lock(signals);
        if waiting.stopped {
            return;
        }
        if !waiting.unembedded.is_empty() {
            continue;
        }
        let next_sweep = strong
            .options
            .index_interval
            .saturating_sub(swept.map_or(Duration::ZERO, |at| at.elapsed()));
        let (waiting, _) = wake
            .wait_timeout_while(waiting, next_sweep, |s| {
                !s.stopped && s.unembedded.is_empty()
            })
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if waiting.stopped {
            return;
        }
    }
}

/// An engine of the service on a connection of its own, read as the options say (memory map,
/// page cache): the writer's, the readers' and the indexer's alike.
fn open_engine(options: &ServiceOptions, context: Context) -> Result<Engine, EngineError> {
    let mut engine = Engine::open(&options.db, context)?;
    // The checkpointer thread copies the log into the database (`checkpointer`).
    if !options.read_only {
        engine.store_mut()?.leave_checkpoints()?;
    }
    engine.store()?.map_memory(options.mmap_bytes)?;
    if let Some(bytes) = options.page_cache_bytes {
        engine.store()?.limit_page_cache(bytes)?;
    }
    Ok(engine)
}

/// The indexer's engine (opened on first use; after an error it is opened again next time).
fn indexer_engine<'a>(
    inner: &Inner,
    indexer: &'a mut Option<Engine>,
    embedder: &Arc<dyn Embedder>,
    who: &str,
) -> Option<&'a mut Engine> {
    if indexer.is_none() {
        let context = Context {
            project: String::new(),
            cwd: PathBuf::new(),
            actor: who.to_string(),
            read_only: false,
            now: inner.options.now,
        };
        match open_engine(&inner.options, context) {
            Ok(mut engine) => {
                engine.set_git_source(GitSource::Supplied(SuppliedGit::default()));
                engine.set_shared_embedder(Arc::clone(embedder));
                // What it embeds goes straight into the writer engine's matrix (`hand_over`).
                engine.keep_written_vectors();
                *indexer = Some(engine);
            }
            Err(error) => {
                eprintln!("{who}: cannot open the brain to embed pending records: {error}");
                return None;
            }
        }
    }
    indexer.as_mut()
}

/// Holds the indexer's next embedding back while calls wait for or run on the writer engine
/// (a hybrid recall embeds its query on both cores: an embedding beside it would take half of
/// them), for at most [`ServiceOptions::indexer_yield`].
fn yield_to_calls(inner: &Inner) {
    if inner.calls.load(Ordering::SeqCst) == 0 {
        return;
    }
    inner.yields.fetch_add(1, Ordering::Relaxed);
    let deadline = std::time::Instant::now() + inner.options.indexer_yield;
    while inner.calls.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Hands the vectors the indexer just stored to the writer engine, which answers hybrid
/// recalls: it takes them into the matrix it holds ([`Engine::absorb_vectors`]) instead of
/// finding the changed rows among every stored vector on its next recall (a scan of all of
/// their fingerprints: at 100,000 vectors most of a recall's time after each write).
fn hand_over(inner: &Inner, indexer: &mut Option<Engine>) {
    let Some(engine) = indexer.as_mut() else {
        return;
    };
    let written = engine.take_written_vectors();
    if written.is_empty() {
        return;
    }
    if let Some(writer) = lock(&inner.engine).as_mut() {
        writer.absorb_vectors(&written);
    }
}

/// Embeds what writes just stored (those of `ids` still without a vector). A failure is said
/// on stderr; the records stay pending for the next sweep.
fn index_written(
    inner: &Inner,
    indexer: &mut Option<Engine>,
    embedder: &Arc<dyn Embedder>,
    who: &str,
    ids: &[i64],
) {
    let Some(engine) = indexer_engine(inner, indexer, embedder, who) else {
        return;
    };
    yield_to_calls(inner);
    let failed = match engine.index_records(ids) {
        Ok(report) if report.failed == 0 => false,
        Ok(report) => {
            eprintln!(
                "{who}: {} new record(s) could not be embedded yet ({}); they stay pending",
                report.failed,
                report.errors.join("; ")
            );
            true
        }
        Err(error) => {
            eprintln!("{who}: new records stay pending, embedding them stopped: {error}");
            *indexer = None;
            true
        }
    };
    hand_over(inner, indexer);
    inner.embedding_fails.store(failed, Ordering::Relaxed);
}

/// Embeds every pending record, a batch at a time, on the indexer's own engine (opened on
/// first use; after an error it is opened again next time). Returns whether it embedded or
/// took over any vector.
fn index_pending(
    inner: &Inner,
    indexer: &mut Option<Engine>,
    embedder: &Arc<dyn Embedder>,
    who: &str,
) -> bool {
    let mut worked = false;
    loop {
        let Some(engine) = indexer_engine(inner, indexer, embedder, who) else {
            return worked;
        };
        yield_to_calls(inner);
        let indexed = engine.index_pending(Some(cairn_engine::BACKGROUND_BATCH), &mut |_, _| {});
        hand_over(inner, indexer);
        if let Ok(report) = &indexed {
            worked |= report.embedded + report.reused > 0;
        }
        match indexed {
            Ok(report)
                if report.failed == 0
                    && report.pending > 0
                    && report.embedded + report.reused > 0 =>
            {
                inner.embedding_fails.store(false, Ordering::Relaxed);
                continue;
            }
            Ok(report) if report.failed == 0 => {
                if report.embedded + report.reused > 0 {
                    inner.embedding_fails.store(false, Ordering::Relaxed);
                }
                return worked;
            }
            Ok(report) => {
                eprintln!(
                    "{who}: {} record(s) could not be embedded ({}); `cairn reindex` retries",
                    report.failed,
                    report.errors.join("; ")
                );
                inner.embedding_fails.store(true, Ordering::Relaxed);
                return worked;
            }
            Err(error) => {
                eprintln!("{who}: embedding pending records stopped: {error}");
                inner.embedding_fails.store(true, Ordering::Relaxed);
                *indexer = None;
                return worked;
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

    /// A read-only context in project `alpha` for an engine of its own beside the service's.
    fn check_context() -> Context {
        Context {
            project: "alpha".into(),
            cwd: PathBuf::new(),
            actor: "check".into(),
            read_only: true,
            now: None,
        }
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

    /// The engines leave the write-ahead log's checkpoints to the checkpointer thread: under
    /// writes the writer never checkpoints (a checkpoint's syncs held every queued write), and
    /// the log is still copied and cut back.
    #[test]
    fn the_checkpointer_keeps_the_log_bounded_and_no_write_waits_for_it() {
        let (dir, service) = service();
        let db = dir.path().join("brain.db");
        let wal = dir.path().join("brain.db-wal");
        let wal_bytes = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let mut written = 0;
        while service.checkpoints_run() == 0 {
            let body: Vec<String> = (0..400).map(|j| format!("w{written}x{j}")).collect();
            remember(&service, &body.join(" "));
            written += 1;
            assert!(written < 3_000, "no checkpoint after {written} remembers");
        }
        assert!(written > 1, "a checkpoint before the log grew");
        let writer_checkpoints = service
            .call(&request("alpha", "a"), "check", |engine| {
                Ok(engine.store()?.checkpoints_run())
            })
            .unwrap();
        assert_eq!(
            writer_checkpoints, 0,
            "the writer engine never checkpointed"
        );
        // Once the checkpointer copied it all, a write starts the log over and cuts it back.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while wal_bytes() > cairn_store::WAL_TRUNCATE_BYTES {
            assert!(
                std::time::Instant::now() < deadline,
                "the log stayed at {} bytes",
                wal_bytes()
            );
            std::thread::sleep(Duration::from_millis(50));
            remember(&service, &format!("a small note number {written}"));
            written += 1;
        }
        service.stop();
        drop(service);
        let check = Engine::open(&db, check_context()).unwrap();
        assert_eq!(check.stats().unwrap().records, written);
    }

    /// The checkpointer looks at the log's file, never opening the brain to do so: a service
    /// over a brain that does not exist yet creates nothing until a call opens it.
    #[test]
    fn the_checkpointer_creates_no_brain() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("later").join("brain.db");
        let service = Service::new(ServiceOptions::new(db.clone()));
        std::thread::sleep(CHECKPOINT_TICK * 3);
        assert!(!db.exists() && !dir.path().join("later").exists());
        assert_eq!(service.checkpoints_run(), 0);
        service.stop();
    }

    /// The full-text index is built at start on a thread of its own, and recall then answers
    /// from it what it answered before (FTS5's answer).
    #[test]
    fn the_lexical_index_is_built_at_start_and_answers_as_before() {
        let (dir, service) = service();
        let id = remember(&service, "the cache listens on port 7000");
        remember(&service, "the queue drains every night at two");
        remember(&service, "the cache port moved to 7001 for the staging box");
        assert!(!service.lexical_index_built(), "writes do not build it");
        // FTS5's answer, from an engine without the shared index.
        let before = Engine::open(&dir.path().join("brain.db"), check_context())
            .unwrap()
            .recall(&cairn_engine::RecallRequest::new("cache port"))
            .unwrap();
        service.start_lexical_index("test");
        let waited = std::time::Instant::now();
        while !service.lexical_index_built() {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(120),
                "the index was not built"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let after = recall(&service, "cache port");
        assert_eq!(after.results[0].id, id);
        let ids = |answer: &cairn_engine::RecallAnswer| {
            answer.results.iter().map(|r| r.id).collect::<Vec<_>>()
        };
        assert_eq!(ids(&after), ids(&before));
    }

    /// The remembers of the group tests: near duplicates of earlier ones (refused), an exact
    /// repeat (a no-op), a supersession of a record that does not exist (an error inside the
    /// transaction), an empty body (an error before it), and distinct ones.
    fn group_requests() -> Vec<RememberRequest> {
        let base = [
            "The nightly export job for the billing warehouse runs at two in the morning and writes parquet files to the cold bucket",
            "The staging cluster rotates its TLS certificates every sixty days through the internal ACME responder on port 9443",
            "Release builds of the mobile app are signed on the dedicated mac runner because the keychain cannot leave that host",
        ];
        let mut requests = Vec::new();
        for body in base {
            requests.push(RememberRequest::new(MemoryType::Note, body));
            requests.push(RememberRequest::new(
                MemoryType::Note,
                format!("{body}. Daily."),
            ));
        }
        requests.push(RememberRequest::new(MemoryType::Note, base[1]));
        let mut missing = RememberRequest::new(MemoryType::Note, "the queue moved to port 7002");
        missing.supersedes = Some(999_999);
        requests.push(missing);
        requests.push(RememberRequest::new(MemoryType::Note, "   "));
        for body in [
            "We chose PostgreSQL over MySQL for the ledger because of transactional DDL",
            "Frontend state lives in the URL so that every screen can be bookmarked",
            "Deploys happen from the main branch only after the smoke suite passes",
            "Customer exports are capped at one million rows to protect the replica",
            "The search service answers in under fifty milliseconds at the ninety-ninth percentile",
        ] {
            requests.push(RememberRequest::new(MemoryType::Decision, body));
        }
        requests
    }

    /// What a remember answered, comparable across brains.
    fn summary(answer: &Result<RememberOutcome, EngineError>) -> String {
        match answer {
            Ok(outcome) => format!(
                "{:?} {:?} {:?}",
                outcome.status, outcome.id, outcome.existing
            ),
            Err(error) => format!("error: {error}"),
        }
    }

    /// Remembers queued while the writer is busy are stored in one group, in the order they
    /// came, and each answers exactly what it answers when the same remembers run one after
    /// the other on a single engine (same statuses, same ids, the same near duplicates
    /// refused); the two that fail, fail alone.
    #[test]
    fn a_group_of_remembers_answers_what_one_after_the_other_answers() {
        let (_dir, service) = service();
        let requests = group_requests();
        let queued = std::sync::Barrier::new(2);
        let (order, answers) = std::thread::scope(|scope| {
            // Holds the writer until every remember is queued behind it; answers the order
            // they queued in (by their actors, `agent-N` for the N-th request).
            let holder = scope.spawn(|| {
                service
                    .call(&request("alpha", "hold"), "hold", |_| {
                        queued.wait();
                        loop {
                            let waiting = lock(&service.inner.remembers);
                            if waiting.len() == requests.len() {
                                return Ok(waiting
                                    .iter()
                                    .map(|q| q.item.context.actor["agent-".len()..].parse())
                                    .collect::<Result<Vec<usize>, _>>()
                                    .unwrap());
                            }
                            drop(waiting);
                            std::thread::sleep(Duration::from_millis(5));
                        }
                    })
                    .unwrap()
            });
            queued.wait();
            let callers: Vec<_> = requests
                .iter()
                .enumerate()
                .map(|(n, remember)| {
                    let service = &service;
                    scope.spawn(move || {
                        service.remember(&request("alpha", &format!("agent-{n}")), remember.clone())
                    })
                })
                .collect();
            let order = holder.join().unwrap();
            let answers: Vec<_> = callers
                .into_iter()
                .map(|caller| caller.join().unwrap())
                .collect();
            (order, answers)
        });
        assert_eq!(service.remember_groups(), (1, requests.len()), "one group");

        // The same remembers one after the other, in the order the group stored them, on one
        // engine of a brain of its own.
        let (_serial_dir, serial) = super::tests::service();
        let mut expected = Vec::new();
        for &n in &order {
            let answer = serial.call(
                &request("alpha", &format!("agent-{n}")),
                "remember",
                |engine| engine.remember(&requests[n]),
            );
            expected.push(summary(&answer));
        }
        let got: Vec<String> = order.iter().map(|&n| summary(&answers[n])).collect();
        assert_eq!(got, expected);
        let count = |status: RememberStatus| {
            answers
                .iter()
                .filter(|a| a.as_ref().is_ok_and(|o| o.status == status))
                .count()
        };
        assert_eq!(count(RememberStatus::Added), 8, "{got:#?}");
        // The repeat of a text is a no-op after it, refused after its near duplicate.
        assert_eq!(
            count(RememberStatus::Refused) + count(RememberStatus::Noop),
            4,
            "{got:#?}"
        );
        assert_eq!(answers.iter().filter(|a| a.is_err()).count(), 2);
    }

    /// Many threads remembering at once: every remember is answered, grouped or not, and of
    /// each near-duplicate pair exactly one is stored, as a single writer would.
    #[test]
    fn concurrent_remembers_store_no_near_duplicate_pair() {
        let (dir, service) = service();
        let pairs: Vec<(String, String)> = (0..12)
            .map(|n| {
                let body = format!(
                    "Worker pool {n} drains the invoice queue every {n} minutes and retries failed payments against the ledger service twice"
                );
                (body.clone(), format!("{body}. Daily."))
            })
            .collect();
        let answers: Vec<(usize, RememberOutcome)> = std::thread::scope(|scope| {
            let callers: Vec<_> = (0..8)
                .map(|thread| {
                    let (service, pairs) = (&service, &pairs);
                    scope.spawn(move || {
                        let mut answers = Vec::new();
                        for (n, (first, second)) in pairs.iter().enumerate() {
                            // Half the threads send the pair's second text first.
                            let body = if (thread + n) % 2 == 0 { first } else { second };
                            let remember = RememberRequest::new(MemoryType::Note, body.clone());
                            let answer = service
                                .remember(&request("alpha", &format!("agent-{thread}")), remember)
                                .unwrap();
                            answers.push((n, answer));
                        }
                        answers
                    })
                })
                .collect();
            callers
                .into_iter()
                .flat_map(|caller| caller.join().unwrap())
                .collect()
        });
        assert_eq!(answers.len(), 8 * pairs.len());
        assert_eq!(service.remember_groups().1, answers.len());
        for n in 0..pairs.len() {
            let stored: std::collections::BTreeSet<i64> = answers
                .iter()
                .filter(|(pair, a)| *pair == n && a.status == RememberStatus::Added)
                .map(|(_, a)| a.id.unwrap())
                .collect();
            assert_eq!(stored.len(), 1, "pair {n}: {answers:#?}");
        }
        let engine = Engine::open(&dir.path().join("brain.db"), check_context()).unwrap();
        assert_eq!(engine.stats().unwrap().records, pairs.len() as i64);
    }

    fn buffering_service() -> (tempfile::TempDir, Service) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServiceOptions::new(dir.path().join("brain.db"));
        options.buffer_accesses = true;
        (dir, Service::new(options))
    }

    fn remember(service: &Service, body: &str) -> i64 {
        service
            .call(&request("alpha", "agent-a"), "remember", |engine| {
                engine.remember(&RememberRequest::new(MemoryType::Note, body))
            })
            .unwrap()
            .id
            .unwrap()
    }

    fn recall(service: &Service, query: &str) -> cairn_engine::RecallAnswer {
        service
            .call(&request("alpha", "agent-a"), "recall", |engine| {
                engine.recall(&cairn_engine::RecallRequest::new(query))
            })
            .unwrap()
    }

    /// `(use_count, recall events)` of `id`, read on a connection of its own.
    fn accesses_on_disk(db: &std::path::Path, id: i64) -> (u32, usize) {
        let engine = Engine::open(db, check_context()).unwrap();
        let uses = engine.get(id).unwrap().use_count;
        let events = engine.store().unwrap().reader().events(None, 0).unwrap();
        (uses, events.iter().filter(|e| e.op == "recall").count())
    }

    #[test]
    fn buffered_accesses_are_written_when_the_service_stops() {
        let (dir, service) = buffering_service();
        let id = remember(&service, "the cache listens on port 7000");
        for _ in 0..3 {
            let answer = recall(&service, "cache port");
            assert_eq!(answer.results[0].id, id);
            assert!(answer.warnings.is_empty(), "{:?}", answer.warnings);
        }
        service.stop();
        assert_eq!(accesses_on_disk(&dir.path().join("brain.db"), id), (3, 3));
        assert_eq!(service.flush_accesses().unwrap(), 0, "nothing is left");
    }

    #[test]
    fn buffered_accesses_are_written_when_the_last_handle_goes() {
        let (dir, service) = buffering_service();
        let id = remember(&service, "the queue drains every night at two");
        recall(&service, "queue drains");
        let clone = service.clone();
        drop(service);
        recall(&clone, "queue night");
        drop(clone);
        // Dropped here, or on the flusher's thread if it held the service at that moment
        // (after which nothing else would ever write them): allow a moment for that.
        let db = dir.path().join("brain.db");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while accesses_on_disk(&db, id) != (2, 2) {
            assert!(
                std::time::Instant::now() < deadline,
                "the accesses were not written when the service went"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn buffered_accesses_are_written_within_the_flush_interval() {
        let (dir, service) = buffering_service();
        let id = remember(&service, "backups are kept for ninety days");
        recall(&service, "backups kept");
        // Generous: the flusher writes after one interval; allow many.
        let deadline = std::time::Instant::now() + ACCESS_FLUSH_INTERVAL * 20;
        let db = dir.path().join("brain.db");
        while accesses_on_disk(&db, id) != (1, 1) {
            assert!(
                std::time::Instant::now() < deadline,
                "the access was not written by the flusher"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(service.flush_accesses().unwrap(), 0);
    }

    /// An engine on a connection of its own in project `alpha`, as another process's.
    fn other_writer(db: &std::path::Path) -> Engine {
        Engine::open(
            db,
            Context {
                project: "alpha".into(),
                cwd: PathBuf::new(),
                actor: "writer".into(),
                read_only: false,
                now: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn recall_answers_while_another_connection_holds_the_write_lock() {
        let (dir, service) = buffering_service();
        let id = remember(&service, "the deploy needs the staging key");
        let db = dir.path().join("brain.db");
        let mut writer = other_writer(&db);
        // Inside another connection's write transaction: recall neither waits for the lock
        // nor loses the access.
        writer
            .store_mut()
            .unwrap()
            .write(|_| {
                let answer = recall(&service, "deploy staging key");
                assert_eq!(answer.results[0].id, id);
                assert!(answer.warnings.is_empty(), "{:?}", answer.warnings);
                Ok::<_, EngineError>(())
            })
            .unwrap();
        service.stop();
        assert_eq!(accesses_on_disk(&db, id), (1, 1));
    }

    #[test]
    fn a_lexical_recall_answers_while_a_long_call_holds_the_writer_engine() {
        let (_dir, service) = buffering_service();
        let id = remember(&service, "the release train leaves on thursdays");
        let (started, wait_started) = std::sync::mpsc::channel();
        let (answered, wait_answered) = std::sync::mpsc::channel();
        let long = {
            let service = service.clone();
            std::thread::spawn(move || {
                service
                    .call(&request("alpha", "agent-a"), "long", |_| {
                        started.send(()).unwrap();
                        // Generous: a recall queued behind this call would never arrive.
                        Ok(wait_answered.recv_timeout(Duration::from_secs(60)).is_ok())
                    })
                    .unwrap()
            })
        };
        wait_started.recv().unwrap();
        let mut lexical = cairn_engine::RecallRequest::new("release train");
        lexical.mode = Mode::Lexical;
        let answer = service
            .recall(&request("alpha", "agent-a"), &lexical)
            .unwrap();
        let _ = answered.send(());
        assert_eq!(answer.results[0].id, id);
        assert!(
            long.join().unwrap(),
            "the recall waited for the writer engine"
        );
    }

    /// A service with `readers` reader engines, accesses buffered.
    fn service_with_readers(readers: usize) -> (tempfile::TempDir, Service) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServiceOptions::new(dir.path().join("brain.db"));
        options.buffer_accesses = true;
        options.readers = readers;
        (dir, Service::new(options))
    }

    /// Starts a read on `service` that holds its reader engine until `release` says, after
    /// sending on `started`; it answers the engine's address (which engine it was).
    fn holding_read(
        service: &Service,
        started: std::sync::mpsc::Sender<()>,
        release: std::sync::mpsc::Receiver<()>,
    ) -> std::thread::JoinHandle<usize> {
        let service = service.clone();
        std::thread::spawn(move || {
            service
                .read(&request("alpha", "agent-a"), "hold", |engine| {
                    started.send(()).unwrap();
                    // Generous: only a broken queue leaves it waiting this long.
                    let _ = release.recv_timeout(Duration::from_secs(60));
                    Ok(std::ptr::from_mut(engine) as usize)
                })
                .unwrap()
        })
    }

    /// Waits until `count` calls wait for a reader engine.
    fn until_waiting(service: &Service, count: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while service.inner.readers.waiting() != count {
            assert!(std::time::Instant::now() < deadline, "no call queued");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_read_takes_whichever_reader_frees_first() {
        let (_dir, service) = service_with_readers(2);
        remember(&service, "the first reader call opens the brain");
        let (started_a, wait_a) = std::sync::mpsc::channel();
        let (release_a, hold_a) = std::sync::mpsc::channel();
        let a = holding_read(&service, started_a, hold_a);
        wait_a.recv().unwrap();
        let (started_b, wait_b) = std::sync::mpsc::channel();
        let (release_b, hold_b) = std::sync::mpsc::channel();
        let b = holding_read(&service, started_b, hold_b);
        wait_b.recv().unwrap();
        // Both engines held: a third read waits, and gets B's engine when B ends, while A
        // still holds its own until the third read has answered.
        let (started_c, wait_c) = std::sync::mpsc::channel();
        let (_release_c, hold_c) = std::sync::mpsc::channel::<()>();
        let c = {
            let service = service.clone();
            std::thread::spawn(move || {
                service
                    .read(&request("alpha", "agent-a"), "third", |engine| {
                        started_c.send(()).unwrap();
                        drop(hold_c);
                        Ok(std::ptr::from_mut(engine) as usize)
                    })
                    .unwrap()
            })
        };
        until_waiting(&service, 1);
        release_b.send(()).unwrap();
        let engine_b = b.join().unwrap();
        assert!(
            wait_c.recv_timeout(Duration::from_secs(60)).is_ok(),
            "the waiting read did not get the engine that freed"
        );
        assert_eq!(c.join().unwrap(), engine_b);
        release_a.send(()).unwrap();
        assert_ne!(a.join().unwrap(), engine_b);
    }

    #[test]
    fn waiting_reads_are_served_in_the_order_they_came() {
        let (_dir, service) = service_with_readers(1);
        let (started, wait) = std::sync::mpsc::channel();
        let (release, hold) = std::sync::mpsc::channel();
        let first = holding_read(&service, started, hold);
        wait.recv().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut queued = Vec::new();
        for (position, name) in ["second", "third", "fourth", "fifth"]
            .into_iter()
            .enumerate()
        {
            let caller = service.clone();
            let order = Arc::clone(&order);
            queued.push(std::thread::spawn(move || {
                caller
                    .read(&request("alpha", "agent-a"), name, |_| {
                        lock(&order).push(name);
                        Ok(())
                    })
                    .unwrap();
            }));
            until_waiting(&service, position + 1);
        }
        release.send(()).unwrap();
        first.join().unwrap();
        for call in queued {
            call.join().unwrap();
        }
        assert_eq!(*lock(&order), ["second", "third", "fourth", "fifth"]);
    }

    #[test]
    fn readers_never_write_a_batch_of_accesses_themselves() {
        let (dir, service) = buffering_service();
        let id = remember(&service, "the nightly export lands in the archive bucket");
        let db = dir.path().join("brain.db");
        let mut writer = other_writer(&db);
        let mut lexical = cairn_engine::RecallRequest::new("nightly export archive");
        lexical.mode = Mode::Lexical;
        let recalls = ACCESS_BATCH + 44;
        // Another connection holds the write lock the whole time: more than a batch of
        // recalls answer at once (a reader that wrote its batch would wait for the lock).
        writer
            .store_mut()
            .unwrap()
            .write(|_| {
                let started = std::time::Instant::now();
                for _ in 0..recalls {
                    let answer = service
                        .recall(&request("alpha", "agent-a"), &lexical)
                        .unwrap();
                    assert_eq!(answer.results[0].id, id);
                    assert!(answer.warnings.is_empty(), "{:?}", answer.warnings);
                }
                // Generous, and below the store's busy timeout (15 s) that a reader's write of
                // its batch would wait out.
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "{:?}",
                    started.elapsed()
                );
                Ok::<_, EngineError>(())
            })
            .unwrap();
        drop(writer);
        service.stop();
        assert_eq!(
            accesses_on_disk(&db, id),
            (u32::try_from(recalls).unwrap(), recalls)
        );
    }

    #[test]
    fn an_unbuffered_service_writes_each_access_at_once() {
        let (dir, service) = service();
        let id = remember(&service, "the linter runs before every commit");
        recall(&service, "linter commit");
        assert_eq!(accesses_on_disk(&dir.path().join("brain.db"), id), (1, 1));
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

    /// An embedder that embeds nothing until the test opens its gate.
    struct Gated {
        inner: cairn_embed::HashEmbedder,
        open: Arc<(Mutex<bool>, Condvar)>,
    }

    impl Embedder for Gated {
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, cairn_embed::EmbedError> {
            let (open, opened) = &*self.open;
            let guard = lock(open);
            drop(
                opened
                    .wait_while(guard, |open| !*open)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            );
            self.inner.embed_batch(texts)
        }
    }

    /// Polls `done` until it holds, failing after a generous bound.
    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within 60 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// With the model resident, a write is acknowledged once stored — even while the model
    /// cannot embed anything — and the indexer gives it its vector right after, long before
    /// its periodic sweep.
    #[test]
    fn a_write_is_acknowledged_before_its_vector_and_the_indexer_embeds_it_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServiceOptions::new(dir.path().join("brain.db"));
        options.index_interval = Duration::from_secs(3600);
        let service = Service::new(options);
        let open = Arc::new((Mutex::new(false), Condvar::new()));
        let gated = Gated {
            inner: cairn_embed::HashEmbedder::new(64),
            open: Arc::clone(&open),
        };
        service.start_embedder(Box::new(move || Ok(Some(Box::new(gated)))), "test");
        eventually("the model is resident", || {
            service.embedder_state() == Some(true)
        });
        let pending = || {
            service
                .call(&request("alpha", "agent-a"), "status", |engine| {
                    engine.semantic_status()
                })
                .unwrap()
                .counts
                .pending()
        };

        let stored = service
            .call(&request("alpha", "agent-a"), "remember", |engine| {
                engine.remember(&RememberRequest::new(
                    MemoryType::Note,
                    "the kiln fires at night",
                ))
            })
            .unwrap();
        assert_eq!(stored.status, RememberStatus::Added, "{stored:?}");
        assert!(stored.warnings.is_empty(), "{:?}", stored.warnings);
        assert_eq!(pending(), 1, "acknowledged while the model is held back");

        let (flag, opened) = &*open;
        *lock(flag) = true;
        opened.notify_all();
        eventually("the indexer embeds the write", || pending() == 0);
        let mut semantic = cairn_engine::RecallRequest::new("kiln fires night");
        semantic.mode = Mode::Semantic;
        let answer = service
            .call(&request("alpha", "agent-a"), "recall", |engine| {
                engine.recall(&semantic)
            })
            .unwrap();
        assert_eq!(answer.results[0].id, stored.id.unwrap(), "{answer:?}");
        service.stop();
    }
    /// The indexer's new vectors go straight into the matrix the writer engine holds: a hybrid
    /// recall after a write embedded by the indexer reads nothing of the brain's vectors (not
    /// even their fingerprints) and finds the new record semantically.
    #[test]
    fn the_indexers_vectors_go_into_the_recalling_engines_matrix_without_a_reread() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServiceOptions::new(dir.path().join("brain.db"));
        options.index_interval = Duration::from_secs(3600);
        let service = Service::new(options);
        let embedder = cairn_embed::HashEmbedder::new(64);
        service.start_embedder(Box::new(move || Ok(Some(Box::new(embedder)))), "test");
        let on_writer = |work: &dyn Fn(&mut Engine) -> usize| {
            service
                .call(&request("alpha", "agent-a"), "probe", |engine| {
                    Ok(work(engine))
                })
                .unwrap()
        };
        let remember = |body: &str| {
            service
                .call(&request("alpha", "agent-a"), "remember", |engine| {
                    engine.remember(&RememberRequest::new(MemoryType::Note, body))
                })
                .unwrap()
                .id
                .unwrap()
        };
        let semantic_top = |query: &str| {
            let mut semantic = cairn_engine::RecallRequest::new(query);
            semantic.mode = Mode::Semantic;
            // Untouched: what an earlier recall found gains nothing from being found.
            semantic.touch = false;
            service
                .recall(&request("alpha", "agent-a"), &semantic)
                .unwrap()
                .results[0]
                .id
        };
        eventually("the model is resident", || {
            service.embedder_state() == Some(true)
        });
        let first = remember("the glaze cracks in a cold kiln");
        remember("clay dries slowly under plastic");
        remember("the wheel needs a new belt");
        eventually("the first three are embedded", || {
            on_writer(&|engine| engine.semantic_status().unwrap().counts.pending() as usize) == 0
        });
        // This recall brings the matrix up to date, whatever the indexer handed over so far.
        assert_eq!(semantic_top("glaze cracks cold kiln"), first);
        assert_eq!(on_writer(&|engine| engine.held_vectors().unwrap_or(0)), 3);
        let reads = on_writer(&|engine| engine.vector_reads());

        let fresh = remember("the kiln fires at night");
        eventually("the indexer's vector is in the writer's matrix", || {
            on_writer(&|engine| engine.held_vectors().unwrap_or(0)) == 4
        });
        assert_eq!(semantic_top("kiln fires night"), fresh);
        assert_eq!(
            on_writer(&|engine| engine.vector_reads()),
            reads,
            "the recall after the indexer's write read the brain's vectors again"
        );
        service.stop();
    }
    /// An embedder that counts its calls.
    struct Counting {
        inner: cairn_embed::HashEmbedder,
        calls: Arc<AtomicUsize>,
    }

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            self.inner.model_id()
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, cairn_embed::EmbedError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.inner.embed_batch(texts)
        }
    }

    /// While a call runs on the writer engine (a hybrid recall), the indexer does not start
    /// embedding what is pending; it does once the call is over.
    #[test]
    fn the_indexer_holds_its_embedding_back_while_a_call_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ServiceOptions::new(dir.path().join("brain.db"));
        options.index_interval = Duration::from_secs(3600);
        // Longer than the test: only the end of the call lets the indexer go on.
        options.indexer_yield = Duration::from_secs(3600);
        let service = Service::new(options);
        // Stored before any model is there: pending.
        service
            .call(&request("alpha", "agent-a"), "remember", |engine| {
                engine.remember(&RememberRequest::new(
                    MemoryType::Note,
                    "the kiln fires at night",
                ))
            })
            .unwrap();
        let (entered, running) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let shared = &service;
        std::thread::scope(|scope| {
            let call = scope.spawn(move || {
                shared
                    .call(&request("alpha", "agent-a"), "slow recall", move |_| {
                        entered.send(()).unwrap();
                        released.recv().unwrap();
                        Ok(())
                    })
                    .unwrap()
            });
            running.recv().unwrap();
            let embeddings = Arc::new(AtomicUsize::new(0));
            let counting = Counting {
                inner: cairn_embed::HashEmbedder::new(64),
                calls: Arc::clone(&embeddings),
            };
            service.start_embedder(Box::new(move || Ok(Some(Box::new(counting)))), "test");
            eventually("the indexer finds a call running", || {
                service.inner.yields.load(Ordering::Relaxed) > 0
            });
            assert_eq!(
                embeddings.load(Ordering::SeqCst),
                0,
                "embedded beside the call"
            );
            release.send(()).unwrap();
            call.join().unwrap();
            eventually("the indexer embeds once the call is over", || {
                embeddings.load(Ordering::SeqCst) > 0
            });
        });
        eventually("the pending record is embedded", || {
            service
                .call(&request("alpha", "agent-a"), "status", |engine| {
                    engine.semantic_status()
                })
                .unwrap()
                .counts
                .pending()
                == 0
        });
        service.stop();
    }
}
