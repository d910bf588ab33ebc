//! Who is asking: the bearer token, checked at every request against the brain (so a revoked
//! token stops working at once), turned into a request context.
//!
//! A project token works in its project without naming it; a token for every project names
//! the project with the `Cairn-Project` header. The token's name is the actor of every write.
//! The client's commit (`Cairn-Commit`) stamps what it writes; the server never asks git.

use crate::App;
use crate::problem::Problem;
use axum::http::HeaderMap;
use cairn_engine::tokens::{Grant, Role};
use cairn_engine::{EngineError, SuppliedGit};
use cairn_service::RequestContext;

/// The header naming the project for a token of every project.
pub const PROJECT_HEADER: &str = "cairn-project";
/// The header carrying the client's HEAD commit.
pub const COMMIT_HEADER: &str = "cairn-commit";
/// Local daemon only: the client's working directory, percent-encoded ([`encode_path`]); git
/// questions (project, commit, freshness) are answered there, as the CLI would.
pub const CWD_HEADER: &str = "cairn-cwd";
/// Local daemon only: who is calling (`cli`, `hook`), the actor of its writes.
pub const ACTOR_HEADER: &str = "cairn-actor";

/// A path as header text: bytes outside `A-Z a-z 0-9 / . - _ ~` as `%XX`.
pub fn encode_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut text = String::new();
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/.-_~".contains(&byte) {
            text.push(byte as char);
        } else {
            text.push_str(&format!("%{byte:02X}"));
        }
    }
    text
}

/// The inverse of [`encode_path`]; `None` for a malformed escape.
pub fn decode_path(text: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    Some(std::path::PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// An authenticated request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub grant: Grant,
    pub request: RequestContext,
}

impl Caller {
    /// Whether this caller may see a record filed under `project` (`None`: personal).
    pub fn sees(&self, project: Option<&str>) -> bool {
        match (&self.grant.project, project) {
            (None, _) | (_, None) => true,
            (Some(mine), Some(theirs)) => mine == theirs,
        }
    }

    /// Whether the token is for every project (export, import, `all_projects`).
    pub fn every_project(&self) -> bool {
        self.grant.project.is_none()
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Problem> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(|v| Some(v.trim())).map_err(|_| {
            Problem::bad_request(format!(
                "header `{name}` is not ASCII text; nothing was done"
            ))
        }),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Authenticates the request and checks that its role allows `needed`. Blocking (reads the
/// brain): call it from a blocking task.
pub fn authorize(
    app: &App,
    headers: &HeaderMap,
    needed: Role,
    operation: &str,
) -> Result<Caller, Problem> {
    if app.local {
        return local_caller(headers);
    }
    let secret = bearer(headers).ok_or_else(Problem::unauthorized)?;
    let grant = grant_of(app, secret)?;
    if !grant.role.allows(needed) {
        return Err(Problem::from_engine(&EngineError::Forbidden {
            role: grant.role.as_str(),
            operation: operation.to_string(),
            needed: needed.as_str(),
        }));
    }
    let named = header(headers, PROJECT_HEADER)?;
    let commit = header(headers, COMMIT_HEADER)?;
    caller_in(grant, named, commit)
}

/// The caller a token `secret` is, in project `named` (needed for a token of every project;
/// another project than a project token's answers not-found), stamping writes with `commit`.
/// Blocking (reads the brain). Used by the bearer check above and by the web UI's sessions.
pub fn authorize_secret(
    app: &App,
    secret: &str,
    named: Option<&str>,
    commit: Option<&str>,
) -> Result<Caller, Problem> {
    caller_in(grant_of(app, secret)?, named, commit)
}

/// Who token `secret` is (missing, wrong, revoked and expired: the same 401).
fn grant_of(app: &App, secret: &str) -> Result<Grant, Problem> {
    let anonymous = RequestContext::remote(String::new(), String::new(), SuppliedGit::default());
    // On a reader engine: token checks never wait behind a write.
    app.service
        .read(&anonymous, "authenticate", |engine| {
            engine.authenticate(secret)
        })
        .map_err(|error| match error {
            EngineError::Unauthorized => Problem::unauthorized(),
            other => Problem::from_engine(&other),
        })
}

/// The request context of `grant` in project `named`, writes stamped with `commit`.
fn caller_in(grant: Grant, named: Option<&str>, commit: Option<&str>) -> Result<Caller, Problem> {
    let named = named.filter(|p| !p.is_empty());
    let project = match (&grant.project, named) {
        (Some(mine), None) => mine.clone(),
        (Some(mine), Some(named)) if named == mine => mine.clone(),
        // Another project is answered like a project that does not exist.
        (Some(_), Some(named)) => {
            return Err(Problem::from_kind(
                cairn_engine::ErrorKind::NotFound,
                format!("no project {named:?} here; nothing was done"),
            ));
        }
        (None, Some(named)) => named.to_string(),
        (None, None) => {
            return Err(Problem::bad_request(format!(
                "this token is for every project: name the project with the `{PROJECT_HEADER}` header; nothing was done"
            ))
            .with("field", serde_json::json!(PROJECT_HEADER)));
        }
    };
    let head = match commit {
        None | Some("") => None,
        Some(commit)
            if (7..=64).contains(&commit.len())
                && commit.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Some(commit.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(Problem::bad_request(format!(
                "header `{COMMIT_HEADER}` is not a commit id (7 to 64 hex digits); nothing was done"
            ))
            .with("field", serde_json::json!(COMMIT_HEADER)));
        }
    };
    let request = RequestContext::remote(
        project,
        grant.name.clone(),
        SuppliedGit {
            head,
            working_tree: None,
        },
    );
    Ok(Caller { grant, request })
}

/// The local daemon's caller: the owner, every right, git asked in the client's directory (the
/// same machine and user), the project named or else derived there — what the CLI would do.
fn local_caller(headers: &HeaderMap) -> Result<Caller, Problem> {
    let cwd = match header(headers, CWD_HEADER)? {
        Some(text) if !text.is_empty() => decode_path(text)
            .filter(|path| path.is_absolute())
            .ok_or_else(|| {
                Problem::bad_request(format!(
                    "header `{CWD_HEADER}` is not a percent-encoded absolute path; nothing was done"
                ))
                .with("field", serde_json::json!(CWD_HEADER))
            })?,
        _ => {
            return Err(Problem::bad_request(format!(
                "the local daemon needs the caller's directory in the `{CWD_HEADER}` header; nothing was done"
            ))
            .with("field", serde_json::json!(CWD_HEADER)));
        }
    };
    let actor = header(headers, ACTOR_HEADER)?
        .filter(|a| !a.is_empty())
        .unwrap_or("cli")
        .to_string();
    let project = match header(headers, PROJECT_HEADER)?.filter(|p| !p.is_empty()) {
        Some(project) => project.to_string(),
        None => cairn_engine::Context::for_directory(&cwd).project,
    };
    Ok(Caller {
        grant: Grant {
            name: actor.clone(),
            project: None,
            role: Role::Admin,
        },
        request: RequestContext {
            project,
            actor,
            cwd,
            git: cairn_engine::GitSource::Local,
        },
    })
}
