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
}

/// The router: `/healthz`, `/openapi.json`, the `/v1` endpoints, `/mcp` and the web UI (`/`,
/// `/ui/…`, with the sessions of `ui`). `loopback`: the server listens on a loopback address or
/// a Unix socket (MCP's `Host` check then admits loopback names only; elsewhere the token is
/// the protection and a proxy's name is the host).
pub fn router(service: Service, limits: Limits, loopback: bool, ui: ui::Ui) -> Router {
    let endpoints = api::endpoints();
    let openapi = Arc::new(openapi::document(&endpoints).to_string());
    let app = App {
        mcp: mcp::service(service.clone(), limits, loopback),
        service,
        limits,
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
        serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION"), "model": model})
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
    let router = router(service.clone(), options.limits, loopback, ui);
    let result = runtime.block_on(run(router, options, acceptor, ready));
    service.stop();
    result
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
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
            let listener = unix::bind(path)?;
            Ok((
                Listener::Unix(listener, path.clone()),
                format!("unix:{}", path.display()),
            ))
        }
    }
}

async fn run(
    router: Router,
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
    ready(&address);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.limits.header_timeout)
        .keep_alive(true);
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
        };
        let service = TowerToHyperService::new(router.clone());
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
    if let Listener::Unix(_, path) = &listener {
        let _ = std::fs::remove_file(path);
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
        Listener::Unix(listener, _) => {
            let (stream, _) = listener.accept().await?;
            Ok(Box::new(stream))
        }
    }
}

mod unix {
    //! The Unix socket: mode 0600, a stale file replaced, a live server's refused.
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    pub fn bind(path: &Path) -> Result<tokio::net::UnixListener, String> {
        if path.exists() {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "{} is the socket of a running server; nothing was started — stop it first, or pick another --socket",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display()))?;
        }
        let listener = tokio::net::UnixListener::bind(path)
            .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("cannot make {} private (0600): {e}", path.display()))?;
        Ok(listener)
    }
}
