//! The warm local daemon (`cairn serve --local`, docs/service.md): where its socket is, whether
//! one is live, and starting it in the background on first need.
//!
//! **The socket's path** is the brain's path with `.sock` appended (`brain.db` →
//! `brain.db.sock`, next to it). A Unix socket's path holds at most 107 bytes (`sun_path` is 108
//! with its NUL); a longer one is `cairn/<hash>.sock` under `$XDG_RUNTIME_DIR`, or else
//! `/tmp/cairn-<uid>/<hash>.sock`, where `<hash>` is the first 16 hex digits of the SHA-256 of the
//! brain's absolute path; that directory is made mode 0700 and must belong to the user.
//!
//! **One start for many callers**: `<socket>.lock` is locked (flock) by the daemon for its whole
//! life, and by the CLI that starts one until that CLI exits (the daemon takes it over then,
//! trying for [`LOCK_WAIT`]); a CLI that finds it locked knows a daemon is running or starting
//! and answers from the file. So eight CLIs arriving together start one daemon — one started
//! in the instant between the two holders exits before loading anything — and a dead daemon's
//! lock is gone with it.
//!
//! **Detached**: the started daemon is its own session (`setsid`, so a closing terminal does not
//! end it), its stdin is `/dev/null`, its stdout and stderr go to `<brain>.daemon.log`, and it
//! inherits no other descriptor (everything the CLI opens is close-on-exec), so a caller waiting
//! for the CLI's output to end never waits for the daemon. It exits after [`IDLE_SECS`] without
//! a request, and as soon as its brain file is gone or replaced (a deleted temporary directory
//! leaves no daemon behind).

use crate::settings::Settings;
use sha2::{Digest as _, Sha256};
use std::fs::File;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The longest socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
pub const SOCKET_PATH_MAX: usize = 107;
/// The daemon's idle exit, unless `CAIRN_DAEMON_IDLE_SECS` says.
pub const IDLE_SECS: u64 = 30 * 60;
/// Set by the CLI on the daemon it starts: leave the CLI's session, wait a moment for the lock.
pub const STARTED_ENV: &str = "CAIRN_DAEMON_STARTED";
/// How long a daemon a CLI started tries to take the start lock over from it (the CLI holds
/// it until it has answered and exits).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(60);
/// The start lock this process took to start a daemon: held until it exits.
static START_LOCK: std::sync::OnceLock<File> = std::sync::OnceLock::new();
/// The daemon's log rolls over (to `.1`) past this size, at a start.
const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// The brain's path, absolute (its directory resolved when it exists), so one brain named two
/// ways has one daemon.
pub fn absolute_brain(db: &Path) -> PathBuf {
    let joined = if db.is_absolute() {
        db.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(db))
            .unwrap_or_else(|_| db.to_path_buf())
    };
    match (joined.parent(), joined.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or(joined),
        _ => joined,
    }
}

/// Where the daemon of `db` listens (see the module doc). `create`: make the fallback directory
/// when it is missing (the daemon and a starting CLI do; a mere look does not).
pub fn socket_path(db: &Path, create: bool) -> Result<PathBuf, String> {
    let db = absolute_brain(db);
    let mut beside = db.clone().into_os_string();
    beside.push(".sock");
    let beside = PathBuf::from(beside);
    if beside.as_os_str().len() <= SOCKET_PATH_MAX {
        return Ok(beside);
    }
    let digest = Sha256::digest(db.as_os_str().as_encoded_bytes());
    let name = format!("{}.sock", &hex_prefix(&digest, 8));
    let dir = private_dir(create)?;
    let path = dir.join(name);
    if path.as_os_str().len() > SOCKET_PATH_MAX {
        return Err(format!(
            "no socket path short enough for {}: {} is over {SOCKET_PATH_MAX} bytes too; set XDG_RUNTIME_DIR to a short directory",
            db.display(),
            path.display()
        ));
    }
    Ok(path)
}

fn hex_prefix(bytes: &[u8], count: usize) -> String {
    bytes
        .iter()
        .take(count)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `$XDG_RUNTIME_DIR/cairn`, else `/tmp/cairn-<uid>`: mode 0700 and the user's own.
fn private_dir(create: bool) -> Result<PathBuf, String> {
    let uid = rustix::process::geteuid().as_raw();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir()) {
        Some(runtime) => PathBuf::from(runtime).join("cairn"),
        None => PathBuf::from(format!("/tmp/cairn-{uid}")),
    };
    if create && !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| format!("cannot make the socket directory {}: {e}", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(&dir) {
        if !meta.is_dir() || meta.uid() != uid {
            return Err(format!(
                "the socket directory {} is not a directory of yours (it belongs to user {}); refused — remove it or set XDG_RUNTIME_DIR",
                dir.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(format!(
                "the socket directory {} is open to other users (mode {:o}); refused — `chmod 700` it",
                dir.display(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(dir)
}

/// What is at the socket's path.
#[derive(Debug)]
pub enum Probe {
    /// A daemon answers there.
    Live(PathBuf),
    /// Nothing, or a stale socket file (a daemon that died).
    NotRunning(PathBuf),
    /// Something cairn must not talk to: another user's socket or directory, or no socket.
    Refused(String),
}

/// Looks at `db`'s socket without starting anything.
pub fn probe(db: &Path) -> Probe {
    let path = match socket_path(db, false) {
        Ok(path) => path,
        Err(message) => return Probe::Refused(message),
    };
    let uid = rustix::process::geteuid().as_raw();
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(_) => return Probe::NotRunning(path),
    };
    if meta.uid() != uid {
        return Probe::Refused(format!(
            "the daemon socket {} belongs to user {}, not to you (user {uid}); it was not used — remove it",
            path.display(),
            meta.uid()
        ));
    }
    if !meta.file_type().is_socket() {
        return Probe::Refused(format!(
            "{} is not a socket; it was not used — remove it",
            path.display()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        // A daemon makes its socket 0600 from the bind: this one is not a daemon's.
        return Probe::Refused(format!(
            "the daemon socket {} is open to other users (mode {:o}), which a cairn daemon never makes; it was not used — remove it",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    if let Some(dir) = path.parent()
        && let Ok(dir_meta) = std::fs::metadata(dir)
        && dir_meta.uid() != uid
    {
        return Probe::Refused(format!(
            "the daemon socket's directory {} belongs to user {}, not to you; the socket was not used",
            dir.display(),
            dir_meta.uid()
        ));
    }
    match std::os::unix::net::UnixStream::connect(&path) {
        Ok(_) => Probe::Live(path),
        Err(_) => Probe::NotRunning(path),
    }
}

/// How a hot command (remember, recall, the prompt hook) is answered.
#[derive(Debug)]
pub enum Route {
    /// Through the live daemon at this socket.
    Daemon(PathBuf),
    /// From the file in this process. `starting`: the daemon is being started (by this call or
    /// another), so a write leaves its embedding to the daemon's indexer.
    Local { starting: bool },
}

/// Where a hot command goes: the live daemon, else this process — after starting the daemon in
/// the background when none runs (never waited for). Problems are said on stderr, and the
/// command is answered from the file.
pub fn route(settings: &Settings) -> Route {
    if !settings.daemon {
        return Route::Local { starting: false };
    }
    match probe(&settings.db) {
        Probe::Live(path) => Route::Daemon(path),
        Probe::Refused(message) => {
            eprintln!(
                "cairn: {message}; answered from the file instead (CAIRN_DAEMON=off stops using the daemon)"
            );
            Route::Local { starting: false }
        }
        Probe::NotRunning(path) => match start(settings, &path) {
            Ok(_) => Route::Local { starting: true },
            Err(message) => {
                eprintln!(
                    "cairn: the daemon was not started ({message}); answered from the file instead (CAIRN_DAEMON=off stops trying)"
                );
                Route::Local { starting: false }
            }
        },
    }
}

/// The hot commands (`remember`, `recall`) when the daemon is on: through the live daemon, or
/// from the file while it starts (a `remember` then without the model). `None`: not a hot
/// command, or the daemon is off — the caller runs it as ever.
pub fn answer(
    settings: &Settings,
    command: &crate::cli::Command,
) -> Option<anyhow::Result<std::process::ExitCode>> {
    use crate::cli::Command;
    use crate::commands::records::RecordsCommand as R;
    if !settings.daemon || !matches!(command, Command::Records(R::Remember(_) | R::Recall(_))) {
        return None;
    }
    match route(settings) {
        Route::Daemon(socket) => {
            let crate::remote::commands::Route::Server(handler) =
                crate::remote::commands::route(command)
            else {
                return None;
            };
            let remote = match local_remote(settings, &socket) {
                Ok(remote) => remote,
                Err(error) => return Some(Err(error)),
            };
            match handler(&remote) {
                // Gone between the look and the call (an idle exit): nothing was sent, so the
                // file answers.
                Err(error)
                    if error
                        .downcast_ref::<crate::remote::RemoteError>()
                        .is_some_and(crate::remote::RemoteError::unreachable) =>
                {
                    None
                }
                answered => Some(answered),
            }
        }
        Route::Local { starting: true } => match command {
            Command::Records(R::Remember(args)) => Some(crate::commands::records::run_remember(
                settings, args, false,
            )),
            _ => None,
        },
        Route::Local { starting: false } => None,
    }
}

/// The daemon as a server the remote commands talk to: no token, the caller's directory and
/// actor sent along, timeouts of a local call.
fn local_remote<'a>(
    settings: &'a Settings,
    socket: &Path,
) -> anyhow::Result<crate::remote::commands::Remote<'a>> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the working directory: {e}"))?;
    Ok(crate::remote::commands::Remote {
        settings,
        target: crate::remote::Target::Unix(socket.to_path_buf()),
        options: local_options(settings, &cwd, "cli"),
        local: true,
    })
}

/// Client options for the daemon: no token, `Cairn-Cwd` and `Cairn-Actor`, the project when
/// one was given.
pub fn local_options(settings: &Settings, cwd: &Path, actor: &str) -> crate::remote::ClientOptions {
    let mut options = crate::remote::ClientOptions::new(None);
    options.project = settings.project.clone();
    options.connect_timeout = std::time::Duration::from_secs(2);
    options.headers.push((
        cairn_http::auth::CWD_HEADER.to_string(),
        cairn_http::auth::encode_path(cwd),
    ));
    options.headers.push((
        cairn_http::auth::ACTOR_HEADER.to_string(),
        actor.to_string(),
    ));
    options
}

/// Like [`route`] for a hook: never waits, never prints (a hook's stderr reaches the agent);
/// a problem comes back for hook-errors.log.
pub fn route_quietly(settings: &Settings) -> (Route, Option<String>) {
    if !settings.daemon {
        return (Route::Local { starting: false }, None);
    }
    match probe(&settings.db) {
        Probe::Live(path) => (Route::Daemon(path), None),
        Probe::Refused(message) => (Route::Local { starting: false }, Some(message)),
        Probe::NotRunning(path) => match start(settings, &path) {
            Ok(_) => (Route::Local { starting: true }, None),
            Err(message) => (
                Route::Local { starting: false },
                Some(format!("the daemon was not started: {message}")),
            ),
        },
    }
}

/// The start lock's path for `socket`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut path = socket.as_os_str().to_os_string();
    path.push(".lock");
    PathBuf::from(path)
}

/// The daemon's log: `<brain>.daemon.log`, next to the brain.
pub fn log_path(db: &Path) -> PathBuf {
    let mut path = absolute_brain(db).into_os_string();
    path.push(".daemon.log");
    PathBuf::from(path)
}

fn open_lock(socket: &Path) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = lock_path(socket);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| {
            format!(
                "cannot open the daemon's start lock {}: {e}",
                path.display()
            )
        })
}

/// Whether a start was made.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// This call started the daemon (it is loading; nobody waits for it).
    Started,
    /// Another process holds the start lock: a daemon is starting or running.
    AlreadyStarting,
}

/// Starts `cairn serve --local` for the brain in the background — its own session, its output
/// to [`log_path`], not waited for — unless another process holds the start lock.
pub fn start(settings: &Settings, socket: &Path) -> Result<Start, String> {
    if let Some(dir) = socket.parent()
        && !dir.exists()
    {
        // The fallback directory, made 0700 (the brain's own directory exists).
        socket_path(&settings.db, true)?;
    }
    let lock = open_lock(socket)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(Start::AlreadyStarting),
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("cannot take the daemon's start lock: {e}"));
        }
    }
    let db = absolute_brain(&settings.db);
    let log = open_log(&db)?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("cannot share the daemon's log: {e}"))?;
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the cairn binary to start the daemon: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg("--db")
        .arg(&db)
        .args(["serve", "--local"])
        .env(STARTED_ENV, "1")
        // The daemon serves every project: each request names its own; and it writes.
        .env_remove("CAIRN_PROJECT")
        .env_remove("CAIRN_READ_ONLY")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err));
    if let Some(dir) = db.parent() {
        command.current_dir(dir);
    }
    // Not waited for: when this process exits the daemon is reparented (and never a zombie of
    // ours for long: the CLI exits right after answering).
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start the daemon: {e}"))?;
    drop(child);
    // Held until this process exits (close-on-exec: no later child inherits it); the daemon
    // takes it over then. A second start in this process finds it taken above.
    let _ = START_LOCK.set(lock);
    Ok(Start::Started)
}

fn open_log(db: &Path) -> Result<File, String> {
    let path = log_path(db);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let mut rolled = path.clone().into_os_string();
        rolled.push(".1");
        let _ = std::fs::rename(&path, rolled);
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot open the daemon's log {}: {e}", path.display()))
}

/// What the daemon itself holds while it runs: the start lock, for its whole life.
#[derive(Debug)]
pub struct DaemonLock {
    _held: File,
}

/// Takes the start lock for the daemon's life. A daemon a CLI started ([`STARTED_ENV`]) first
/// leaves the CLI's session, then waits up to [`LOCK_WAIT`] for the CLI to exit and let the
/// lock go (and gives up at once when another daemon answers on `socket` meanwhile); one
/// started by hand takes it at once or not at all.
pub fn take_lock(socket: &Path) -> Result<DaemonLock, String> {
    let started = std::env::var_os(STARTED_ENV).is_some_and(|v| v == "1");
    if started {
        // Nothing of the starter's kept open (a caller waiting for its output to end must not
        // wait for the daemon), and its own session: a terminal closing does not end it.
        let closed = close_inherited();
        if !closed.is_empty() {
            eprintln!(
                "cairn serve: closed descriptors {closed:?} inherited from the starting process"
            );
        }
        let _ = rustix::process::setsid();
    }
    let lock = open_lock(socket)?;
    let since = std::time::Instant::now();
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(DaemonLock { _held: lock }),
            Err(std::fs::TryLockError::WouldBlock)
                if started
                    && since.elapsed() < LOCK_WAIT
                    && std::os::unix::net::UnixStream::connect(socket).is_err() =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(format!(
                    "a daemon for this brain is already running or starting (it holds {}); nothing was started",
                    lock_path(socket).display()
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("cannot take the daemon's start lock: {e}"));
            }
        }
    }
}

/// Closes every descriptor beyond stdin, stdout and stderr that this process inherited: those
/// without close-on-exec (everything cairn opens itself has it, so before the daemon opens
/// anything the others are its starter's leaks: a pipe a caller waits on to end, say).
/// Returns the ones closed. Called first thing by a daemon a CLI started ([`STARTED_ENV`]).
#[allow(unsafe_code)]
pub fn close_inherited() -> Vec<i32> {
    const O_CLOEXEC: u32 = 0o2_000_000;
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let listed: Vec<i32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    let mut closed = Vec::new();
    for fd in listed {
        // The listing's own descriptor is closed by now (or its number reused by this read,
        // which is close-on-exec): only a descriptor still open without the flag qualifies.
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .and_then(|value| u32::from_str_radix(value.trim(), 8).ok());
        if flags.is_some_and(|flags| flags & O_CLOEXEC == 0) {
            use std::os::fd::FromRawFd as _;
            // SAFETY: `fd` is open (its fdinfo was just read) and nothing in this process owns
            // it: it was inherited across exec (no close-on-exec flag), and this runs before
            // the daemon opens anything, on its only thread. Taking ownership and dropping it
            // closes it once.
            drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
            closed.push(fd);
        }
    }
    closed
}

/// `CAIRN_DAEMON_IDLE_SECS`, else [`IDLE_SECS`].
pub fn idle_secs() -> Result<u64, String> {
    match std::env::var("CAIRN_DAEMON_IDLE_SECS") {
        Err(_) => Ok(IDLE_SECS),
        Ok(value) => value
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|secs| *secs > 0)
            .ok_or_else(|| {
                format!(
                    "CAIRN_DAEMON_IDLE_SECS={value:?} is not a whole number of seconds above 0; nothing was started"
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_brain_path_has_its_socket_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("brain.db");
        let socket = socket_path(&db, false).unwrap();
        assert_eq!(
            socket,
            std::fs::canonicalize(dir.path())
                .unwrap()
                .join("brain.db.sock")
        );
    }

    #[test]
    fn a_long_brain_path_falls_back_to_a_short_private_directory_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let db = deep.join("brain.db");
        let socket = socket_path(&db, true).unwrap();
        assert!(socket.as_os_str().len() <= SOCKET_PATH_MAX, "{socket:?}");
        let name = socket.file_name().unwrap().to_str().unwrap();
        assert_eq!(name.len(), "0123456789abcdef.sock".len(), "{name}");
        assert_eq!(socket, socket_path(&db, false).unwrap(), "stable");
        let other = socket_path(&deep.join("other.db"), false).unwrap();
        assert_ne!(socket, other, "one socket per brain");
        let meta = std::fs::metadata(socket.parent().unwrap()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
    }
}
