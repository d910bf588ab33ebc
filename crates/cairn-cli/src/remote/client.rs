//! The client of a cairn server: one JSON request, one parsed answer — or a [`RemoteError`]
//! built from the server's problem document (`application/problem+json`: status, title,
//! detail), its kind read back through the table the server answers with
//! (`cairn_service::errors`), so a remote error exits with the code the same local error has.
//!
//! Transports: `http://HOST:PORT`, `https://HOST:PORT` (rustls and the roots of
//! `cairn_embed::tls`, so `CAIRN_CA_FILE` is honoured), and `unix:/path/to.sock` (the local
//! daemon). HTTP itself is ureq's; `unix.rs` only moves its bytes over the socket. Nothing here
//! opens a brain, loads a model or runs git: a call costs one connection and one request.

use super::unix::{NoResolver, UnixConnector};
use cairn_engine::ErrorKind;
use cairn_service::errors;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;
use ureq::http::{self, Method};

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `http://HOST:PORT[/prefix]` or `https://…`, without a trailing `/`.
    Http(String),
    /// `unix:/path/to.sock`.
    Unix(PathBuf),
}

impl Target {
    /// Reads a server address (`CAIRN_URL`).
    pub fn parse(text: &str) -> Result<Target, RemoteError> {
        let text = text.trim();
        let refuse = |why: &str| {
            RemoteError::local(
                ErrorKind::Invalid,
                format!(
                    "{:?} is not a cairn server address ({why}); nothing was sent — use http://HOST:PORT, https://HOST:PORT or unix:/path/to.sock, or unset CAIRN_URL to use the local brain file",
                    without_credentials(text)
                ),
            )
        };
        if let Some(path) = text.strip_prefix("unix:") {
            // `unix:/run/cairn.sock`, and the `unix:///run/cairn.sock` spelling of URLs.
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(refuse("a socket path must be absolute"));
            }
            return Ok(Target::Unix(PathBuf::from(path)));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(refuse("no scheme"));
        };
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(refuse("the scheme must be http, https or unix"));
        }
        if rest.contains(['?', '#']) {
            return Err(refuse("a query or fragment has no place in it"));
        }
        let uri: http::Uri = text.parse().map_err(|_| refuse("not a URL"))?;
        if uri.host().is_none_or(str::is_empty) {
            return Err(refuse("no host"));
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(refuse(
                "credentials do not go in the URL: put the token in CAIRN_TOKEN",
            ));
        }
        Ok(Target::Http(text.trim_end_matches('/').to_string()))
    }

    /// The address as errors name it.
    pub fn display(&self) -> String {
        match self {
            Target::Http(base) => base.clone(),
            Target::Unix(path) => format!("unix:{}", path.display()),
        }
    }

    fn is_https(&self) -> bool {
        matches!(self, Target::Http(base) if base.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://")))
    }

    fn is_loopback(&self) -> bool {
        match self {
            Target::Unix(_) => true,
            Target::Http(base) => base
                .parse::<http::Uri>()
                .ok()
                .and_then(|uri| uri.host().map(str::to_ascii_lowercase))
                .is_some_and(|host| {
                    let host = host.trim_start_matches('[').trim_end_matches(']');
                    host == "localhost"
                        || host
                            .parse::<std::net::IpAddr>()
                            .is_ok_and(|ip| ip.is_loopback())
                }),
        }
    }
}

/// `scheme://user:pass@host…` with the credentials cut, for messages.
fn without_credentials(text: &str) -> String {
    if let Some((scheme, rest)) = text.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            return format!("{scheme}://…@{}", &rest[at + 1..]);
        }
    }
    text.to_string()
}

/// A bearer token: never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// How a [`Client`] talks: who it is, for which project, and how long it waits.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `Authorization: Bearer …` (`CAIRN_TOKEN`); `None` sends none (the local daemon's socket).
    pub token: Option<Secret>,
    /// `Cairn-Project`: the project a token for every project works in.
    pub project: Option<String>,
    /// `Cairn-Commit`: the client's HEAD, stamped on what it writes.
    pub commit: Option<String>,
    /// How long connecting may take (TLS included).
    pub connect_timeout: Duration,
    /// How long the server may stay silent while the request is sent or its answer read.
    pub read_timeout: Duration,
    /// The whole call, connect included (a hook's deadline); `None`: no bound beyond the two
    /// above.
    pub deadline: Option<Duration>,
    /// Extra roots to trust for https (default: `CAIRN_CA_FILE`, else `SSL_CERT_FILE`).
    pub ca_file: Option<PathBuf>,
    /// Headers sent with every request (the local daemon's `Cairn-Cwd` and `Cairn-Actor`).
    pub headers: Vec<(String, String)>,
}

impl ClientOptions {
    /// 5 s to connect, 120 s of silence at most, no overall deadline, the CA file the
    /// environment names.
    pub fn new(token: Option<Secret>) -> ClientOptions {
        ClientOptions {
            token,
            project: None,
            commit: None,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(120),
            deadline: None,
            ca_file: cairn_embed::tls::ca_file_from_env(),
            headers: Vec::new(),
        }
    }
}

/// A failed call: a problem document the server answered, or no answer at all.
#[derive(Debug, Clone)]
pub struct RemoteError {
    /// What it means, the kind of the server's label (exit codes follow it).
    pub kind: ErrorKind,
    /// The HTTP status; `None` when no answer came (server down, timeout, TLS).
    pub status: Option<u16>,
    /// The status's title (`Not Found`), or what went wrong on the way.
    pub title: String,
    /// The message to print: what happened, what was kept, what to do.
    pub detail: String,
    /// The problem document's other members (`existing`, `ways_out`, `outcome`, `limit`,
    /// `field`); empty when there was none.
    pub members: Map<String, Value>,
}

impl RemoteError {
    /// No server was reached (nothing was sent): refused, missing, or no connection in time.
    pub fn unreachable(&self) -> bool {
        self.status.is_none() && self.detail.starts_with("cannot reach")
    }

    fn local(kind: ErrorKind, detail: String) -> RemoteError {
        RemoteError {
            kind,
            status: None,
            title: "no answer".into(),
            detail,
            members: Map::new(),
        }
    }

    /// The exit code the CLI ends with (the service's table, by kind).
    pub fn exit_code(&self) -> u8 {
        errors::exit_code(self.kind)
    }

    /// A member of the problem document.
    pub fn member(&self, key: &str) -> Option<&Value> {
        self.members.get(key)
    }

    /// From an error answer: its problem document when it has one, else its status and the
    /// start of its text (a reverse proxy's page).
    fn from_answer(target: &Target, status: u16, text: &str) -> RemoteError {
        let problem = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|value| match value {
                Value::Object(map) if map.get("detail").is_some_and(Value::is_string) => Some(map),
                _ => None,
            });
        let reason = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        let Some(mut members) = problem else {
            let start: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let start: String = start.chars().take(200).collect();
            return RemoteError {
                kind: errors::kind_of_status(status),
                status: Some(status),
                title: reason.to_string(),
                detail: format!(
                    "the server at {} answered {status} {reason} without a problem document ({}); it may not be a cairn server, or a proxy in front of it failed",
                    target.display(),
                    if start.is_empty() {
                        "empty body"
                    } else {
                        &start
                    }
                ),
                members: Map::new(),
            };
        };
        let label = members
            .get("type")
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("urn:cairn:problem:"))
            .map(str::to_string);
        let kind = label
            .as_deref()
            .and_then(errors::kind_of_label)
            .unwrap_or_else(|| errors::kind_of_status(status));
        let title = members
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(reason)
            .to_string();
        let mut detail = members
            .get("detail")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind == ErrorKind::Unauthorized {
            detail = format!(
                "the server at {} refused the credential (401): CAIRN_TOKEN is unset, wrong, revoked or expired; nothing was done — set CAIRN_TOKEN to a token from `cairn token create` on the server's brain",
                target.display()
            );
        }
        for key in ["type", "title", "status", "detail"] {
            members.remove(key);
        }
        RemoteError {
            kind,
            status: Some(status),
            title,
            detail,
            members,
        }
    }

    /// From a failure before any answer.
    fn from_transport(target: &Target, options: &ClientOptions, error: ureq::Error) -> RemoteError {
        let at = target.display();
        let unreachable = |why: String| {
            RemoteError::local(
                ErrorKind::Other,
                format!(
                    "cannot reach the cairn server at {at} ({why}); nothing was done — start it (`cairn serve`), or fix CAIRN_URL, or unset CAIRN_URL to use the local brain file"
                ),
            )
        };
        match error {
            ureq::Error::Timeout(ureq::Timeout::Connect) => unreachable(format!(
                "no connection within {} ms",
                options.connect_timeout.as_millis()
            )),
            ureq::Error::Timeout(_) => RemoteError::local(
                ErrorKind::Other,
                format!(
                    "the cairn server at {at} did not answer in time ({}); a write may or may not have been applied — check (`cairn list`) before sending it again",
                    match options.deadline {
                        Some(deadline) => format!("deadline {} ms", deadline.as_millis()),
                        None => format!("silent for {} ms", options.read_timeout.as_millis()),
                    }
                ),
            ),
            ureq::Error::HostNotFound => unreachable("its host name does not resolve".into()),
            ureq::Error::Io(io) => match io.kind() {
                std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::NotFound
                | std::io::ErrorKind::AddrNotAvailable
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable
                | std::io::ErrorKind::PermissionDenied => unreachable(io.to_string()),
                // rustls reports a failed handshake (an untrusted certificate, a name that does
                // not match) as invalid data on the connection.
                std::io::ErrorKind::InvalidData if target.is_https() => unreachable(format!(
                    "TLS failed: {io}; for a private CA set CAIRN_CA_FILE to its PEM file"
                )),
                _ => RemoteError::local(
                    ErrorKind::Other,
                    format!(
                        "the connection to the cairn server at {at} failed ({io}); a write may or may not have been applied — check (`cairn list`) before sending it again"
                    ),
                ),
            },
            ureq::Error::Tls(why) => unreachable(format!(
                "TLS failed: {why}; for a private CA set CAIRN_CA_FILE to its PEM file"
            )),
            ureq::Error::Rustls(why) => unreachable(format!(
                "TLS failed: {why}; for a private CA set CAIRN_CA_FILE to its PEM file"
            )),
            ureq::Error::BodyExceedsLimit(limit) => RemoteError::local(
                ErrorKind::Other,
                format!(
                    "the answer of the cairn server at {at} is over {limit} bytes; nothing was printed"
                ),
            ),
            other => RemoteError::local(
                ErrorKind::Other,
                format!("the request to the cairn server at {at} failed ({other})"),
            ),
        }
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for RemoteError {}

/// What a JSON request accepts: the answer, or a problem document.
const JSON_ACCEPT: &str = "application/json, application/problem+json";

/// Which error answers an exchange hands back as answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relay {
    /// Only 2xx; every other status is a [`RemoteError`].
    Success,
    /// Also an error status with a JSON or event-stream body (a protocol's own error, such as
    /// MCP's JSON-RPC errors); a problem document is still a [`RemoteError`].
    Protocol,
}

/// An answer as it came ([`Client::send_raw`]).
#[derive(Debug, Clone)]
pub struct RawAnswer {
    pub status: u16,
    pub content_type: String,
    /// `Mcp-Session-Id`, when the server opened a session.
    pub session: Option<String>,
    pub body: Vec<u8>,
}

/// The largest JSON answer read into memory (a `list` of many records, a big brief).
const ANSWER_LIMIT: u64 = 256 * 1024 * 1024;

/// A connection to one server; cheap to keep (ureq pools the connection between calls).
#[derive(Debug)]
pub struct Client {
    target: Target,
    /// What URIs start with: the base URL, or `http://localhost` on a socket.
    base: String,
    agent: ureq::Agent,
    options: ClientOptions,
}

impl Client {
    pub fn new(target: Target, options: ClientOptions) -> Result<Client, RemoteError> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(options.connect_timeout))
            .timeout_per_read(Some(options.read_timeout))
            .timeout_per_write(Some(options.read_timeout))
            .timeout_global(options.deadline);
        if target.is_loopback() {
            // A proxy named by HTTP_PROXY cannot reach this machine's loopback.
            config = config.proxy(None);
        }
        let (base, agent) = match &target {
            Target::Http(base) => {
                let roots = cairn_embed::tls::root_certs(options.ca_file.as_deref())
                    .map_err(|why| RemoteError::local(ErrorKind::Invalid, why))?;
                let tls = ureq::tls::TlsConfig::builder().root_certs(roots).build();
                let agent = ureq::Agent::new_with_config(config.tls_config(tls).build());
                (base.clone(), agent)
            }
            Target::Unix(path) => {
                let connector = UnixConnector {
                    path: path.clone(),
                    connect_timeout: options.connect_timeout,
                };
                let agent = ureq::Agent::with_parts(config.build(), connector, NoResolver);
                ("http://localhost".to_string(), agent)
            }
        };
        Ok(Client {
            target,
            base,
            agent,
            options,
        })
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// `GET path` (with its query string), the JSON answer.
    pub fn get(&self, path: &str) -> Result<Value, RemoteError> {
        self.json(Method::GET, path, None)
    }

    /// `POST path` with a JSON body, the JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.json(Method::POST, path, Some(body))
    }

    /// `PATCH path` with a JSON body, the JSON answer.
    pub fn patch(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.json(Method::PATCH, path, Some(body))
    }

    /// `PUT path` with a JSON body (what the path names, replaced), the JSON answer.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.json(Method::PUT, path, Some(body))
    }

    /// `POST path` without a body (an action on what the path names), the JSON answer.
    pub fn post_empty(&self, path: &str) -> Result<Value, RemoteError> {
        self.json(Method::POST, path, None)
    }

    /// `DELETE path`, the JSON answer.
    pub fn delete(&self, path: &str) -> Result<Value, RemoteError> {
        self.json(Method::DELETE, path, None)
    }

    /// A JSON request (`body` or none), the JSON answer.
    pub fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, RemoteError> {
        let text = self.json_text(method, path, body)?;
        self.parse(&text)
    }

    /// A JSON request, the answer's text as the server wrote it (its keys in their order).
    pub fn json_text(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, RemoteError> {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let content_type = bytes.as_ref().map(|_| "application/json");
        let mut response = self.exchange(
            method,
            path,
            content_type,
            JSON_ACCEPT,
            &[],
            bytes.as_deref(),
        )?;
        let bytes = self.read_body(&mut response)?;
        String::from_utf8(bytes).map_err(|_| {
            RemoteError::local(
                ErrorKind::Other,
                format!(
                    "the server at {} answered with text that is not UTF-8; it may not be a cairn server",
                    self.target.display()
                ),
            )
        })
    }

    /// Any request: `accept` and `headers` as given; the answer's status, content type and
    /// body — a success, or an error status whose body is JSON or an event stream (a
    /// protocol's own error); a problem document or another body is a [`RemoteError`]
    /// (`cairn mcp`'s forwarder, which relays JSON-RPC messages as they are).
    pub fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        accept: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Result<RawAnswer, RemoteError> {
        let mut response = self.exchange_as(
            Relay::Protocol,
            method,
            path,
            Some(content_type),
            accept,
            headers,
            Some(body),
        )?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let session = header("mcp-session-id");
        let body = self.read_body(&mut response)?;
        Ok(RawAnswer {
            status,
            content_type,
            session,
            body,
        })
    }

    /// A request whose body is not JSON (`import`'s JSONL), the JSON answer.
    pub fn send_bytes(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<Value, RemoteError> {
        let mut response = self.exchange(
            method,
            path,
            Some(content_type),
            JSON_ACCEPT,
            &[],
            Some(body),
        )?;
        let bytes = self.read_body(&mut response)?;
        self.parse(&String::from_utf8_lossy(&bytes))
    }

    /// `GET path`, its body as it arrives (`export`'s JSONL, never held whole in memory).
    pub fn get_reader(&self, path: &str) -> Result<ureq::BodyReader<'static>, RemoteError> {
        let response = self.exchange(Method::GET, path, None, JSON_ACCEPT, &[], None)?;
        Ok(response.into_body().into_reader())
    }

    /// One exchange; a success answer, or the error the answer (or its absence) means.
    fn exchange(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        accept: &str,
        headers: &[(&str, String)],
        body: Option<&[u8]>,
    ) -> Result<http::Response<ureq::Body>, RemoteError> {
        self.exchange_as(
            Relay::Success,
            method,
            path,
            content_type,
            accept,
            headers,
            body,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn exchange_as(
        &self,
        relay: Relay,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        accept: &str,
        headers: &[(&str, String)],
        body: Option<&[u8]>,
    ) -> Result<http::Response<ureq::Body>, RemoteError> {
        let carries_body =
            ![Method::GET, Method::HEAD, Method::DELETE, Method::OPTIONS].contains(&method);
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(http::header::ACCEPT, accept);
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        for (name, value) in &self.options.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(Secret(token)) = &self.options.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(project) = &self.options.project {
            request = request.header("Cairn-Project", project.as_str());
        }
        if let Some(commit) = &self.options.commit {
            request = request.header("Cairn-Commit", commit.as_str());
        }
        if let Some(content_type) = content_type {
            request = request.header(http::header::CONTENT_TYPE, content_type);
        }
        if body.is_some() {
            // The body goes only once the server asks for it: a server that answers first (a
            // refused token, a handler that takes no body) and closes would otherwise leave
            // the client writing into a closed connection, its answer lost.
            request = request.header(http::header::EXPECT, "100-continue");
        }
        let invalid = |why: http::Error| {
            RemoteError::local(
                ErrorKind::Invalid,
                format!(
                    "the request to {}{path} could not be built ({why}); nothing was sent — a header value (the project, CAIRN_TOKEN) may hold characters HTTP refuses",
                    self.target.display()
                ),
            )
        };
        let sent = match body {
            Some(body) => self.agent.run(request.body(body).map_err(invalid)?),
            // A method that carries a body gets an empty one (`Content-Length: 0`): with none
            // ureq would announce a chunked body and send its end in a second write, into a
            // connection the server may have closed after answering.
            None if carries_body => self.agent.run(request.body(&[][..]).map_err(invalid)?),
            None => self.agent.run(request.body(()).map_err(invalid)?),
        };
        let mut response =
            sent.map_err(|e| RemoteError::from_transport(&self.target, &self.options, e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let protocol = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| {
                t.starts_with("application/json") || t.starts_with("text/event-stream")
            });
        if relay == Relay::Protocol && protocol {
            // A JSON-RPC error the protocol layer answered (not a problem of cairn's): the
            // forwarder hands it to its client as it is.
            return Ok(response);
        }
        let text = response
            .body_mut()
            .with_config()
            .limit(1024 * 1024)
            .read_to_string()
            .unwrap_or_default();
        Err(RemoteError::from_answer(&self.target, status, &text))
    }

    fn read_body(&self, response: &mut http::Response<ureq::Body>) -> Result<Vec<u8>, RemoteError> {
        response
            .body_mut()
            .with_config()
            .limit(ANSWER_LIMIT)
            .read_to_vec()
            .map_err(|e| RemoteError::from_transport(&self.target, &self.options, e))
    }

    fn parse(&self, text: &str) -> Result<Value, RemoteError> {
        serde_json::from_str(text).map_err(|error| {
            RemoteError::local(
                ErrorKind::Other,
                format!(
                    "the server at {} answered with something that is not JSON ({error}); it may not be a cairn server",
                    self.target.display()
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_bad_ones_say_what_to_use() {
        let cases = [
            (
                "http://127.0.0.1:7777",
                Ok(Target::Http("http://127.0.0.1:7777".into())),
            ),
            (
                "https://cairn.example.com/",
                Ok(Target::Http("https://cairn.example.com".into())),
            ),
            (
                "https://proxy.example.com/cairn",
                Ok(Target::Http("https://proxy.example.com/cairn".into())),
            ),
            (
                "unix:/run/cairn.sock",
                Ok(Target::Unix("/run/cairn.sock".into())),
            ),
            (
                "unix:///run/cairn.sock",
                Ok(Target::Unix("/run/cairn.sock".into())),
            ),
            ("unix:cairn.sock", Err("must be absolute")),
            ("127.0.0.1:7777", Err("no scheme")),
            ("ftp://host", Err("http, https or unix")),
            ("http://", Err("")),
            ("http://host/?token=x", Err("query")),
            ("https://me:secret@host", Err("CAIRN_TOKEN")),
        ];
        for (text, expected) in cases {
            match (Target::parse(text), expected) {
                (Ok(target), Ok(want)) => assert_eq!(target, want, "{text}"),
                (Err(error), Err(why)) => {
                    assert!(error.detail.contains(why), "{text}: {}", error.detail);
                    assert!(error.detail.contains("unset CAIRN_URL"), "{}", error.detail);
                    assert!(!error.detail.contains("secret"), "{}", error.detail);
                    assert_eq!(error.exit_code(), 1);
                }
                (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_problem_document_becomes_the_error_of_its_kind() {
        let target = Target::Http("http://127.0.0.1:9".into());
        let refused = RemoteError::from_answer(
            &target,
            409,
            r##"{"type":"urn:cairn:problem:refused","title":"Conflict","status":409,"detail":"#3 is already about this","existing":3}"##,
        );
        assert_eq!(refused.kind, ErrorKind::Refused);
        assert_eq!(refused.exit_code(), 3);
        assert_eq!(refused.detail, "#3 is already about this");
        assert_eq!(refused.member("existing"), Some(&Value::from(3)));
        assert!(refused.member("detail").is_none());

        let read_only = RemoteError::from_answer(
            &target,
            409,
            r#"{"type":"urn:cairn:problem:read-only","title":"Conflict","status":409,"detail":"read-only"}"#,
        );
        assert_eq!(read_only.kind, ErrorKind::ReadOnly);
        // a refusal, as locally (docs/cli.md: a write to a read-only brain exits 3)
        assert_eq!(read_only.exit_code(), 3);

        let too_large = RemoteError::from_answer(
            &target,
            413,
            r#"{"type":"urn:cairn:problem:too-large","title":"Payload Too Large","status":413,"detail":"over the limit of 10 bytes","limit":10}"#,
        );
        assert_eq!(too_large.kind, ErrorKind::Invalid);
        assert_eq!(too_large.member("limit"), Some(&Value::from(10)));

        let unauthorized = RemoteError::from_answer(
            &target,
            401,
            r#"{"type":"urn:cairn:problem:unauthorized","title":"Unauthorized","status":401,"detail":"authentication required"}"#,
        );
        assert_eq!(unauthorized.kind, ErrorKind::Unauthorized);
        assert!(
            unauthorized.detail.contains("CAIRN_TOKEN"),
            "{}",
            unauthorized.detail
        );
        assert!(
            unauthorized.detail.contains("127.0.0.1:9"),
            "{}",
            unauthorized.detail
        );

        let proxy = RemoteError::from_answer(&target, 502, "<html><body>Bad Gateway</body></html>");
        assert_eq!(proxy.kind, ErrorKind::Other);
        assert!(
            proxy.detail.contains("502 Bad Gateway") && proxy.detail.contains("<html>"),
            "{}",
            proxy.detail
        );
    }
}
