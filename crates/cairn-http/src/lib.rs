//! cairn-http: `cairn serve`, the HTTP JSON API over the service layer (`cairn-service`).
//!
//! hyper's HTTP/1 server, one connection per tokio task, axum's router; every engine call runs
//! on a blocking thread through the [`Service`] (one brain, one engine, one embedder). Each
//! request is authenticated with a bearer token (`auth.rs`), read within size and time limits
//! (`body.rs`), and answered with the JSON shape of the CLI's `--json` or a problem document
//! (`problem.rs`). `/openapi.json` is built from the same endpoint list as the router
//! (`openapi.rs`). SIGTERM or SIGINT stops accepting, lets every request in flight finish
//! (bounded by [`ServeOptions::grace`]), and returns. The web UI (`ui/`) is served at `/` and
//! under `/ui/` by the same router, on the same service.

pub mod api;
pub mod auth;
pub mod body;
pub mod mcp;
pub mod openapi;
pub mod problem;
pub mod tls;
pub mod ui;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn_service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use problem::Problem;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The default listening address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7777";
/// The default body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// How often [`ServeOptions::watch`] is looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// What a request may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request body, bytes.
    pub body: usize,
    /// Time to send the request line and headers (and the wait for the next request on a
    /// kept-alive connection).
    pub header_timeout: Duration,
    /// Time to send the body once the headers are in.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            body: DEFAULT_BODY_LIMIT,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// The state every handler gets.
#[derive(Clone)]
pub struct App {
    pub service: Service,
    pub limits: Limits,
    /// The local daemon (`cairn serve --local`): no token, the owner's full rights (the socket
    /// is the owner's alone, mode 0600 in a directory only the owner may write).
    pub local: bool,
    /// Requests answered since start (`/healthz` says how many).
    activity: Arc<idle::Activity>,
    openapi: Arc<String>,
    mcp: mcp::McpService,
    /// The web UI's sessions and one-time login codes.
    pub ui: ui::Ui,
}

/// Where to listen.
#[derive(Debug, Clone)]
pub enum Listen {
    Tcp(SocketAddr),
    /// A Unix socket (made mode 0600; a stale file from a dead server is replaced, a live
    /// server's is refused).
    Unix(PathBuf),
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: Listen,
    pub limits: Limits,
    /// After SIGTERM, how long requests in flight may take before the server stops anyway.
    pub grace: Duration,
    /// Serve HTTPS with this certificate and key (TCP only); plain HTTP when `None`.
    pub tls: Option<tls::TlsFiles>,
    /// The local daemon: no token needed (only on a Unix socket; see [`App::local`]).
    pub local: bool,
    /// Stop (as on SIGTERM) after this long without a request.
    pub idle_exit: Option<Duration>,
    /// Stop (as on SIGTERM) once this file is gone or replaced by another (the local daemon's
    /// brain: a daemon must not outlive it, nor serve a new file by that name from an old
    /// handle). Looked at every [`WATCH_EVERY`].
    pub watch: Option<PathBuf>,
}

/// The router: `/healthz`, `/openapi.json`, the `/v1` endpoints, `/mcp` and the web UI (`/`,
/// `/ui/…`, with the sessions of `ui`). `loopback`: the server listens on a loopback address or
/// a Unix socket (MCP's `Host` check then admits loopback names only; elsewhere the token is
/// the protection and a proxy's name is the host).
pub fn router(service: Service, limits: Limits, loopback: bool, ui: ui::Ui) -> Router {
    router_for(
        service,
        limits,
        loopback,
        false,
        Arc::new(idle::Activity::new()),
        ui,
    )
}

/// [`router`], for the local daemon when `local` (no token: see [`App::local`]); `activity`
/// counts the requests (the idle exit and `/healthz` read it).
fn router_for(
    service: Service,
    limits: Limits,
    loopback: bool,
    local: bool,
    activity: Arc<idle::Activity>,
    ui: ui::Ui,
) -> Router {
    let endpoints = api::endpoints();
    let openapi = Arc::new(openapi::document(&endpoints).to_string());
    let app = App {
        mcp: mcp::service(service.clone(), limits, loopback),
        service,
        limits,
        local,
        activity,
        openapi,
        ui,
    };
    let mut router: Router<App> = Router::new()
        .route("/healthz", axum::routing::get(healthz))
        .route("/openapi.json", axum::routing::get(openapi_json))
        .route("/mcp", axum::routing::any(mcp::endpoint));
    for endpoint in endpoints {
        router = router.route(endpoint.path, endpoint.route);
    }
    router
        .merge(ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
}

async fn healthz(axum::extract::State(app): axum::extract::State<App>) -> Response {
    let model = match app.service.embedder_state() {
        None => "loading",
        Some(true) => "ready",
        Some(false) => "off",
    };
    json_response(
        serde_json::json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "model": model,
            "local": app.local,
            "requests": app.activity.served(),
        })
        .to_string(),
    )
}

async fn openapi_json(axum::extract::State(app): axum::extract::State<App>) -> Response {
    json_response(app.openapi.as_str().to_string())
}

fn json_response(text: String) -> Response {
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no-route",
        format!("no endpoint at {}; /openapi.json lists them", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        format!(
            "{method} is not served at {}; /openapi.json lists the methods",
            uri.path()
        ),
    )
}

/// Serves until SIGTERM or SIGINT, then lets requests in flight finish. `ready` is called with
/// the address actually bound (port 0 picks one) before the first request is accepted.
pub fn serve(
    service: Service,
    options: ServeOptions,
    ready: impl FnOnce(&str),
) -> Result<(), String> {
    let ui = ui::Ui::new(options.tls.is_some());
    serve_with_ui(service, options, ui, ready)
}

/// [`serve`] with the web UI's state made by the caller (`cairn ui` makes its one-time login
/// code in it before the server starts).
pub fn serve_with_ui(
    service: Service,
    options: ServeOptions,
    ui: ui::Ui,
    ready: impl FnOnce(&str),
) -> Result<(), String> {
    let acceptor = match (&options.tls, &options.listen) {
        (None, _) => None,
        (Some(files), Listen::Tcp(_)) => Some(files.acceptor()?),
        (Some(_), Listen::Unix(_)) => {
            return Err(
                "TLS is for TCP: a Unix socket is already private to this machine; nothing was started — drop --tls-cert/--tls-key or listen with --listen".into(),
            );
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the server's runtime: {e}"))?;
    let loopback = match &options.listen {
        Listen::Tcp(address) => address.ip().is_loopback(),
        Listen::Unix(_) => true,
    };
    if options.local && !matches!(options.listen, Listen::Unix(_)) {
        return Err(
            "the local mode (no token) serves a Unix socket only; nothing was started".into(),
        );
    }
    let activity = Arc::new(idle::Activity::new());
    let router = router_for(
        service.clone(),
        options.limits,
        loopback,
        options.local,
        Arc::clone(&activity),
        ui,
    );
    let result = runtime.block_on(run(router, activity, options, acceptor, ready));
    service.stop();
    result
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    /// The listener, its path, and the socket file's identity (device, inode): at the end the
    /// file is removed only if it is still ours.
    Unix(tokio::net::UnixListener, PathBuf, (u64, u64)),
}

async fn bind(listen: &Listen, scheme: &str) -> Result<(Listener, String), String> {
    match listen {
        Listen::Tcp(address) => {
            let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
                format!("cannot listen on {address}: {e}; nothing was started — pick another address with --listen")
            })?;
            let bound = listener
                .local_addr()
                .map_err(|e| format!("cannot read the bound address: {e}"))?;
            Ok((Listener::Tcp(listener), format!("{scheme}://{bound}")))
        }
        Listen::Unix(path) => {
            let (listener, identity) = unix::bind(path)?;
            Ok((
                Listener::Unix(listener, path.clone(), identity),
                format!("unix:{}", path.display()),
            ))
        }
    }
}

async fn run(
    router: Router,
    activity: Arc<idle::Activity>,
    options: ServeOptions,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    ready: impl FnOnce(&str),
) -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    let scheme = if acceptor.is_some() { "https" } else { "http" };
    let (listener, address) = bind(&options.listen, scheme).await?;
    // Before the server says it is ready: what it watches is the file as it was then.
    let gone = idle::gone(options.watch.clone());
    tokio::pin!(gone);
    ready(&address);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.limits.header_timeout)
        .keep_alive(true);
    let idle_exit = idle::wait(Arc::clone(&activity), options.idle_exit);
    tokio::pin!(idle_exit);
    loop {
        let stream: Box<dyn Io> = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(stream) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: say so, keep serving.
                    eprintln!("cairn serve: a connection was not accepted: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            () = &mut idle_exit => {
                eprintln!(
                    "cairn serve: no request for {} s; exiting (the next `cairn` call starts it again)",
                    options.idle_exit.map_or(0, |idle| idle.as_secs())
                );
                break;
            }
            () = &mut gone => {
                eprintln!(
                    "cairn serve: {} is gone or was replaced; exiting",
                    options.watch.as_deref().map_or_else(String::new, |p| p.display().to_string())
                );
                break;
            }
        };
        let service =
            TowerToHyperService::new(idle::Tracked::new(router.clone(), Arc::clone(&activity)));
        if let Some(acceptor) = &acceptor {
            // The handshake runs in the connection's own task, bounded like the headers, so a
            // client that stalls in it holds only its own connection.
            let acceptor = acceptor.clone();
            let http = http.clone();
            let watcher = graceful.watcher();
            let deadline = options.limits.header_timeout;
            tokio::spawn(async move {
                let Ok(Ok(stream)) = tokio::time::timeout(deadline, acceptor.accept(stream)).await
                else {
                    return;
                };
                let connection = http.serve_connection(TokioIo::new(stream), service);
                let _ = watcher.watch(connection).await;
            });
            continue;
        }
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    if let Listener::Unix(_, path, identity) = &listener {
        unix::remove_if_ours(path, *identity);
    }
    drop(listener);
    eprintln!("cairn serve: stopping: no new connections; requests in flight finish");
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(options.grace) => {
            eprintln!(
                "cairn serve: requests still running after {} s were cut off; every write acknowledged before is kept",
                options.grace.as_secs()
            );
        }
    }
    Ok(())
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

async fn accept(listener: &Listener) -> std::io::Result<Box<dyn Io>> {
    match listener {
        Listener::Tcp(listener) => {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream))
        }
        Listener::Unix(listener, _, _) => {
            let (stream, _) = listener.accept().await?;
            Ok(Box::new(stream))
        }
    }
}

mod unix {
    //! The Unix socket: mode 0600 from the moment it exists (the umask is 0177 around `bind`),
    //! in a directory only its owner may change, a stale file replaced, a live server's refused,
    //! a socket or directory of another user refused.
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
    use std::path::Path;

    pub fn bind(path: &Path) -> Result<(tokio::net::UnixListener, (u64, u64)), String> {
        let me = rustix::process::geteuid().as_raw();
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let meta = std::fs::metadata(dir).map_err(|e| {
            format!(
                "cannot use the socket directory {}: {e}; nothing was started",
                dir.display()
            )
        })?;
        if meta.uid() != me {
            return Err(format!(
                "the socket directory {} belongs to user {}, not to you (user {me}); nothing was started — use a directory of your own",
                dir.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(format!(
                "the socket directory {} is writable by other users (mode {:o}), who could replace the socket; nothing was started — `chmod go-w` it or use another directory",
                dir.display(),
                meta.mode() & 0o7777
            ));
        }
        if let Ok(existing) = std::fs::symlink_metadata(path) {
            if existing.uid() != me {
                return Err(format!(
                    "{} belongs to user {}, not to you (user {me}); nothing was started and it was left alone — remove it, or pick another --socket",
                    path.display(),
                    existing.uid()
                ));
            }
            if !existing.file_type().is_socket() {
                return Err(format!(
                    "{} exists and is not a socket; nothing was started and it was left alone — remove it, or pick another --socket",
                    path.display()
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "{} is the socket of a running server; nothing was started — stop it first, or pick another --socket",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display()))?;
        }
        // The umask is the process's: only tighter for the instant of the bind (a file another
        // thread creates meanwhile is made private too, never more open).
        let before = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
        let bound = tokio::net::UnixListener::bind(path);
        rustix::process::umask(before);
        let listener = bound.map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        // Already 0600 from the umask; said again in case the file system ignores it.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot make {} private (0600): {e}", path.display()))?;
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| format!("cannot read the new socket {}: {e}", path.display()))?;
        Ok((listener, (meta.dev(), meta.ino())))
    }

    /// Removes the socket file unless another server has replaced it since.
    pub fn remove_if_ours(path: &Path, identity: (u64, u64)) {
        if std::fs::symlink_metadata(path).is_ok_and(|meta| (meta.dev(), meta.ino()) == identity) {
            let _ = std::fs::remove_file(path);
        }
    }
}

mod idle {
    //! The idle exit: every request marks the time; the server stops once none is in flight
    //! and none came for the idle time.
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;
    use tokio::time::Instant;

    pub struct Activity {
        last: Mutex<Instant>,
        in_flight: AtomicUsize,
        served: AtomicU64,
    }

    impl Activity {
        pub fn new() -> Activity {
            Activity {
                last: Mutex::new(Instant::now()),
                in_flight: AtomicUsize::new(0),
                served: AtomicU64::new(0),
            }
        }

        /// Requests received since start (this one included).
        pub fn served(&self) -> u64 {
            self.served.load(Ordering::SeqCst)
        }

        fn touch(&self) {
            *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }

        fn last(&self) -> Instant {
            *self.last.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    /// Ends once `path` no longer names the file it named at the start (deleted, or replaced by
    /// another file; at once when it did not exist at the start); never when `None`.
    ///
    /// The file's identity is read when this is called, not when the future is first polled:
    /// a file removed between the call and the first poll (a loaded machine, a test that
    /// deletes it as soon as the server answers) is noticed, never mistaken for no file to watch.
    pub fn gone(path: Option<std::path::PathBuf>) -> impl std::future::Future<Output = ()> {
        use std::os::unix::fs::MetadataExt as _;
        let identity = |path: &std::path::Path| {
            std::fs::metadata(path)
                .ok()
                .map(|meta| (meta.dev(), meta.ino()))
        };
        let first = path.as_deref().and_then(identity);
        async move {
            let Some(path) = path else {
                return std::future::pending().await;
            };
            // Gone before serving began: nothing to serve.
            let Some(first) = first else { return };
            loop {
                tokio::time::sleep(super::WATCH_EVERY).await;
                if identity(&path) != Some(first) {
                    return;
                }
            }
        }
    }

    /// Ends once the server has been idle for `idle`; never when `None`.
    pub async fn wait(activity: Arc<Activity>, idle: Option<Duration>) {
        let Some(idle) = idle else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep_until(activity.last() + idle).await;
            if activity.in_flight.load(Ordering::SeqCst) == 0
                && activity.last() + idle <= Instant::now()
            {
                return;
            }
            if activity.in_flight.load(Ordering::SeqCst) > 0 {
                // A long request: look again once it could have gone idle.
                activity.touch();
            }
        }
    }

    /// The router, marking each request's start and end.
    #[derive(Clone)]
    pub struct Tracked<S> {
        inner: S,
        activity: Arc<Activity>,
    }

    impl<S> Tracked<S> {
        pub fn new(inner: S, activity: Arc<Activity>) -> Tracked<S> {
            Tracked { inner, activity }
        }
    }

    struct InFlight(Arc<Activity>);

    impl Drop for InFlight {
        fn drop(&mut self) {
            self.0.touch();
            self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }

    impl<S, R> tower_service::Service<R> for Tracked<S>
    where
        S: tower_service::Service<R>,
        S::Future: Send + 'static,
    {
        type Response = S::Response;
        type Error = S::Error;
        type Future = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>,
        >;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
            self.inner.poll_ready(cx)
        }

        fn call(&mut self, request: R) -> Self::Future {
            self.activity.in_flight.fetch_add(1, Ordering::SeqCst);
            self.activity.served.fetch_add(1, Ordering::SeqCst);
            self.activity.touch();
            let guard = InFlight(Arc::clone(&self.activity));
            let future = self.inner.call(request);
            Box::pin(async move {
                let answer = future.await;
                drop(guard);
                answer
            })
        }
    }
}
