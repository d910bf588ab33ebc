//! Who the browser is: sessions, one-time login codes, CSRF tokens.
//!
//! A session is a random 256-bit id (the cookie's value) naming an entry of a server-side map:
//! who signed in, the CSRF secret, and when it expires. Nothing about the identity is in the
//! cookie. A session signed in with a token keeps the token in that map (never sent back to the
//! browser) and checks it again at every request, so `cairn token revoke` ends the session at
//! once. A one-time login code (`cairn ui`) is another 256-bit secret, compared in constant
//! time, removed on first use, and dead after [`CODE_LIFETIME`].
//!
//! The map is bounded ([`SessionLimits`]): a session ends [`SESSION_LIFETIME`] after sign-in
//! whatever happens, or after [`SESSION_IDLE`] without a request, and at most [`MAX_SESSIONS`]
//! live at once — a sign-in beyond that signs out the session unused the longest. The map lives
//! in the server's memory only: a restart signs every browser out (sign in again).

use crate::App;
use crate::auth::{self, Caller};
use crate::problem::Problem;
use axum::http::{HeaderMap, HeaderValue, header};
use cairn_engine::tokens::Grant;
use cairn_service::RequestContext;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The session cookie's name.
pub const COOKIE: &str = "cairn_session";
/// How long a session lasts after sign-in, used or not.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// A session without a request for this long is signed out.
pub const SESSION_IDLE: Duration = Duration::from_secs(2 * 3600);
/// Most sessions alive at once; a sign-in past it signs out the one unused the longest.
pub const MAX_SESSIONS: usize = 256;

/// The bounds of the session map (the defaults are the constants above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Most sessions at once.
    pub max: usize,
    /// Signed out after this long without a request.
    pub idle: Duration,
    /// Signed out this long after sign-in.
    pub lifetime: Duration,
}

impl Default for SessionLimits {
    fn default() -> SessionLimits {
        SessionLimits {
            max: MAX_SESSIONS,
            idle: SESSION_IDLE,
            lifetime: SESSION_LIFETIME,
        }
    }
}
/// How long a one-time login code works (once).
pub const CODE_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The header htmx sends the CSRF token in (read from the page's `<meta name="csrf-token">`).
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The form field carrying the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// Who a session (or a login code) signs in as.
#[derive(Clone)]
pub enum Identity {
    /// A bearer token, checked again at every request (revocation ends the session). `project`
    /// is the project chosen at sign-in (needed for a token of every project).
    Token {
        secret: String,
        project: Option<String>,
    },
    /// The brain's local owner (`cairn ui`): a fixed grant and request context.
    Owner {
        grant: Grant,
        request: RequestContext,
    },
}

impl std::fmt::Debug for Identity {
    // Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Token { project, .. } => f
                .debug_struct("Token")
                .field("project", project)
                .finish_non_exhaustive(),
            Identity::Owner { grant, .. } => {
                f.debug_struct("Owner").field("name", &grant.name).finish()
            }
        }
    }
}

struct Session {
    identity: Identity,
    csrf: String,
    /// Sign-in plus the lifetime: over then, however busy.
    expires: Instant,
    /// The last request (or the sign-in): idle expiry and eviction go by it.
    last_seen: Instant,
}

impl Session {
    fn live(&self, now: Instant, limits: &SessionLimits) -> bool {
        self.expires > now && now.saturating_duration_since(self.last_seen) < limits.idle
    }
}

struct Code {
    secret: String,
    identity: Identity,
    expires: Instant,
}

/// The UI's state, shared by every connection: the sessions and the login codes.
#[derive(Clone)]
pub struct Ui {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui")
            .field("secure", &self.inner.secure)
            .finish_non_exhaustive()
    }
}

struct Inner {
    sessions: Mutex<HashMap<String, Session>>,
    limits: SessionLimits,
    codes: Mutex<Vec<Code>>,
    /// Served over TLS: the cookie is `Secure`.
    secure: bool,
}

/// A signed-in request: who, and the session's CSRF token (for the page's forms).
#[derive(Debug, Clone)]
pub struct Signed {
    pub caller: Caller,
    pub csrf: String,
    pub session: String,
}

impl Signed {
    /// The role allows changes (and the brain is writable): write controls are shown.
    pub fn may_write(&self, app: &App) -> bool {
        self.caller
            .grant
            .role
            .allows(cairn_engine::tokens::Role::Write)
            && !app.service.read_only()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// 256 random bits from the operating system, as 64 hex digits.
pub fn random_secret() -> Result<String, Problem> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        Problem::from_kind(
            cairn_engine::ErrorKind::Other,
            format!("the operating system gave no random bytes ({error}); nobody was signed in"),
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares two secrets in time that depends on their lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Ui {
    /// `secure`: the server speaks TLS (the cookie then carries `Secure`).
    pub fn new(secure: bool) -> Ui {
        Ui::with_limits(secure, SessionLimits::default())
    }

    /// [`Ui::new`] with other bounds on the sessions (`limits.max` at least 1).
    pub fn with_limits(secure: bool, limits: SessionLimits) -> Ui {
        Ui {
            inner: Arc::new(Inner {
                sessions: Mutex::new(HashMap::new()),
                limits: SessionLimits {
                    max: limits.max.max(1),
                    ..limits
                },
                codes: Mutex::new(Vec::new()),
                secure,
            }),
        }
    }

    /// A one-time login code for `identity`: it signs one browser in, once, within
    /// [`CODE_LIFETIME`].
    pub fn login_code(&self, identity: Identity) -> Result<String, String> {
        let secret = random_secret().map_err(|p| p.detail)?;
        let mut codes = lock(&self.inner.codes);
        let now = Instant::now();
        codes.retain(|code| code.expires > now);
        codes.push(Code {
            secret: secret.clone(),
            identity,
            expires: now + CODE_LIFETIME,
        });
        Ok(secret)
    }

    /// Takes the code (it never works again); `None` when it is unknown, used or expired.
    /// Every live code is compared, each in constant time.
    pub(crate) fn redeem(&self, given: &str) -> Option<Identity> {
        let mut codes = lock(&self.inner.codes);
        let now = Instant::now();
        codes.retain(|code| code.expires > now);
        let mut found = None;
        for (index, code) in codes.iter().enumerate() {
            if constant_time_eq(code.secret.as_bytes(), given.as_bytes()) {
                found = Some(index);
            }
        }
        found.map(|index| codes.swap_remove(index).identity)
    }

    /// Starts a session: its id (the cookie's value).
    pub(crate) fn start(&self, identity: Identity) -> Result<String, Problem> {
        self.start_at(identity, Instant::now())
    }

    /// [`Ui::start`] at `now`: the sessions past their time go, and while the map is full the
    /// one unused the longest is signed out.
    fn start_at(&self, identity: Identity, now: Instant) -> Result<String, Problem> {
        let id = random_secret()?;
        let csrf = random_secret()?;
        let limits = self.inner.limits;
        let mut sessions = lock(&self.inner.sessions);
        sessions.retain(|_, session| session.live(now, &limits));
        while sessions.len() >= limits.max {
            let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, session)| session.last_seen)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                identity,
                csrf,
                expires: now + limits.lifetime,
                last_seen: now,
            },
        );
        Ok(id)
    }

    /// Ends a session.
    pub(crate) fn end(&self, id: &str) {
        lock(&self.inner.sessions).remove(id);
    }

    /// The `Set-Cookie` value that signs the browser in with session `id`.
    pub(crate) fn cookie(&self, id: &str) -> HeaderValue {
        let secure = if self.inner.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            SESSION_LIFETIME.as_secs()
        ))
        .expect("hex digits and ASCII flags")
    }

    /// A `Set-Cookie` value for another short-lived cookie of the UI, with the same flags.
    pub(crate) fn named_cookie(&self, name: &str, value: &str, seconds: u64) -> HeaderValue {
        let secure = if self.inner.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{name}={value}; HttpOnly; SameSite=Strict; Path=/ui/login; Max-Age={seconds}{secure}"
        ))
        .expect("hex digits and ASCII flags")
    }

    /// The `Set-Cookie` value that removes the session cookie.
    pub(crate) fn cleared_cookie(&self) -> HeaderValue {
        let secure = if self.inner.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"
        ))
        .expect("ASCII")
    }

    /// The live session the request's cookie names: its id, identity and CSRF token.
    fn session(&self, headers: &HeaderMap) -> Option<(String, Identity, String)> {
        self.session_at(headers, Instant::now())
    }

    /// [`Ui::session`] at `now`; a live session's last use becomes `now`.
    fn session_at(&self, headers: &HeaderMap, now: Instant) -> Option<(String, Identity, String)> {
        let id = cookie_value(headers, COOKIE)?;
        let limits = self.inner.limits;
        let mut sessions = lock(&self.inner.sessions);
        match sessions.get_mut(&id) {
            Some(session) if session.live(now, &limits) => {
                session.last_seen = now;
                Some((id, session.identity.clone(), session.csrf.clone()))
            }
            Some(_) => {
                sessions.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Who the request is, or `None` when it has no live session (or its token stopped working:
    /// the session is then ended). Blocking (reads the brain for a token): call it from a
    /// blocking task.
    pub(crate) fn signed(&self, app: &App, headers: &HeaderMap) -> Result<Option<Signed>, Problem> {
        let Some((session, identity, csrf)) = self.session(headers) else {
            return Ok(None);
        };
        match caller_of(app, &identity) {
            Ok(caller) => Ok(Some(Signed {
                caller,
                csrf,
                session,
            })),
            Err(problem) if problem.status == axum::http::StatusCode::UNAUTHORIZED => {
                self.end(&session);
                Ok(None)
            }
            Err(problem) => Err(problem),
        }
    }
}

/// The caller an identity is now: a token is authenticated again.
pub(crate) fn caller_of(app: &App, identity: &Identity) -> Result<Caller, Problem> {
    match identity {
        Identity::Owner { grant, request } => Ok(Caller {
            grant: grant.clone(),
            request: request.clone(),
        }),
        Identity::Token { secret, project } => {
            auth::authorize_secret(app, secret, project.as_deref(), None)
        }
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// Whether a state-changing request may go on: the CSRF token it carries (form field or
/// header) equals the session's, compared in constant time, and its `Origin`, when sent, is
/// this server.
pub(crate) fn check_csrf(
    headers: &HeaderMap,
    given: Option<&str>,
    expected: &str,
) -> Result<(), Problem> {
    check_origin(headers)?;
    let given = given.or_else(|| headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()));
    match given {
        Some(given) if constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) => Ok(()),
        _ => Err(Problem::new(
            axum::http::StatusCode::FORBIDDEN,
            "csrf",
            "this form is stale or did not come from this page (its CSRF token is missing or wrong); nothing was done — reload the page and try again",
        )),
    }
}

/// A request whose `Origin` is another site is refused (a missing or `null` `Origin` passes:
/// the CSRF token still has to match, and the cookie is `SameSite=Strict`).
pub(crate) fn check_origin(headers: &HeaderMap) -> Result<(), Problem> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    // Under `Referrer-Policy: no-referrer` browsers send `Origin: null` with a form's POST:
    // no origin to compare, the CSRF token decides.
    if origin == "null" {
        return Ok(());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    if !host.is_empty() && origin_host.eq_ignore_ascii_case(host) {
        return Ok(());
    }
    Err(Problem::new(
        axum::http::StatusCode::FORBIDDEN,
        "cross-origin",
        format!(
            "a request from {origin:?} may not change this brain; nothing was done — use the pages this server serves"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once() {
        let ui = Ui::new(false);
        let identity = Identity::Token {
            secret: "x".into(),
            project: None,
        };
        let code = ui.login_code(identity).unwrap();
        assert_eq!(code.len(), 64);
        assert!(ui.redeem("nonsense").is_none());
        assert!(ui.redeem(&code).is_some());
        assert!(ui.redeem(&code).is_none());
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_under_tls() {
        let plain = Ui::new(false).cookie("ab").to_str().unwrap().to_string();
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"));
        let tls = Ui::new(true).cookie("ab").to_str().unwrap().to_string();
        assert!(tls.ends_with("; Secure"));
    }

    #[test]
    fn csrf_needs_the_token_and_a_matching_origin() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:7777"));
        assert!(check_csrf(&headers, None, "abc").is_err());
        assert!(check_csrf(&headers, Some("abd"), "abc").is_err());
        assert!(check_csrf(&headers, Some("abc"), "abc").is_ok());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(check_csrf(&headers, Some("abc"), "abc").is_err());
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:7777"),
        );
        assert!(check_csrf(&headers, Some("abc"), "abc").is_ok());
    }

    fn owner() -> Identity {
        Identity::Token {
            secret: "x".into(),
            project: None,
        }
    }

    fn cookie(id: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{COOKIE}={id}")).unwrap(),
        );
        headers
    }

    #[test]
    fn past_the_cap_the_session_unused_the_longest_is_signed_out() {
        let limits = SessionLimits {
            max: 3,
            ..SessionLimits::default()
        };
        let ui = Ui::with_limits(false, limits);
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let ids: Vec<String> = (0..3)
            .map(|i| ui.start_at(owner(), at(i)).unwrap())
            .collect();
        // The first one is used again: the second is now the one unused the longest.
        assert!(ui.session_at(&cookie(&ids[0]), at(10)).is_some());
        let fourth = ui.start_at(owner(), at(11)).unwrap();
        let fifth = ui.start_at(owner(), at(12)).unwrap();
        let live = |id: &str| ui.session_at(&cookie(id), at(13)).is_some();
        assert!(!live(&ids[1]), "the oldest unused one is signed out");
        assert!(!live(&ids[2]), "then the next oldest");
        assert!(
            live(&ids[0]) && live(&fourth) && live(&fifth),
            "the newest stay in"
        );
        assert_eq!(lock(&ui.inner.sessions).len(), 3, "never more than the cap");
    }

    #[test]
    fn a_session_ends_when_idle_and_at_its_lifetime_however_busy() {
        let ui = Ui::new(false);
        let start = Instant::now();
        let idle = ui.start_at(owner(), start).unwrap();
        let busy = ui.start_at(owner(), start).unwrap();
        let mut now = start;
        // A request every hour keeps `busy` in, `idle` goes after two hours without one.
        for _ in 0..7 {
            now += Duration::from_secs(3600);
            assert!(ui.session_at(&cookie(&busy), now).is_some());
        }
        assert!(
            ui.session_at(&cookie(&idle), now).is_none(),
            "idle two hours: out"
        );
        now += Duration::from_secs(3600);
        assert!(now >= start + SESSION_LIFETIME);
        assert!(
            ui.session_at(&cookie(&busy), now).is_none(),
            "eight hours after sign-in: out"
        );
        assert!(
            lock(&ui.inner.sessions).is_empty(),
            "ended sessions are removed"
        );
    }

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; cairn_session=beef; b=2"),
        );
        assert_eq!(cookie_value(&headers, COOKIE).as_deref(), Some("beef"));
        assert_eq!(cookie_value(&headers, "c"), None);
    }
}
