//! The web UI end to end: the real binary (`cairn ui`, `cairn serve`) on an ephemeral port, a
//! real HTTP client (ureq, redirects not followed, cookies sent by hand as a browser would).
//! Every security property of issue 16 is tried here: hostile stored text renders as text, the
//! CSP and companion headers are on every answer, a POST without or with a wrong CSRF token
//! (or from another origin) is refused and changes nothing, the session cookie's flags, a
//! read-only token sees no write controls and its writes are refused by the server, and the
//! one-time login link works once.

mod common;

use common::Brain;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    url: String,
    /// `cairn ui`'s one-time link (empty for `cairn serve`).
    link: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(brain: &Brain, args: &[&str]) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.args(args)
        .current_dir(brain.dir.path())
        .env("CAIRN_DB", &brain.db)
        .env("CAIRN_PROJECT", "test-project")
        .env_remove("CAIRN_READ_ONLY")
        .env_remove("CAIRN_NOW")
        .env_remove("CAIRN_URL")
        .env("CAIRN_EMBEDDER", "none")
        .env("XDG_DATA_HOME", brain.dir.path().join("data"))
        .stdin(Stdio::null());
    cmd
}

/// `cairn ui --no-open`: the link is the first line on stdout.
fn start_ui(brain: &Brain) -> Server {
    let mut child = command(brain, &["ui", "--no-open"])
        // A browser that must not be started: --no-open means none is.
        .env("BROWSER", "/bin/false")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn ui starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let link = line.trim().to_string();
    assert!(
        link.starts_with("http://127.0.0.1:") && link.contains("/ui/login?code="),
        "{link:?}"
    );
    let url = link.split("/ui/").next().unwrap().to_string();
    Server { child, url, link }
}

/// `cairn serve` on an ephemeral port (token sign-in).
fn start_serve(brain: &Brain) -> Server {
    let mut child = command(brain, &["serve", "--listen", "127.0.0.1:0"])
        .env_remove("CAIRN_PROJECT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cairn serve starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address: {first:?}"))
        .to_string();
    std::thread::spawn(move || for _ in stderr.lines() {});
    Server {
        child,
        url,
        link: String::new(),
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

struct Answer {
    status: u16,
    headers: ureq::http::HeaderMap,
    text: String,
}

impl Answer {
    fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }

    /// The session id the answer's `Set-Cookie` gives.
    fn session(&self) -> String {
        let cookie = self.header("set-cookie");
        cookie
            .strip_prefix("cairn_session=")
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("no session cookie: {cookie:?}"))
            .to_string()
    }

    /// The CSRF token of the page (its `<meta name="csrf-token">`).
    fn csrf(&self) -> String {
        let marker = r#"<meta name="csrf-token" content=""#;
        let at = self.text.find(marker).expect("the page has a CSRF token") + marker.len();
        self.text[at..].split('"').next().unwrap().to_string()
    }
}

fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut response = response.expect("the server answers");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: response.body_mut().read_to_string().unwrap_or_default(),
    }
}

fn get(url: &str, session: Option<&str>) -> Answer {
    let mut request = agent().get(url);
    if let Some(session) = session {
        request = request.header("Cookie", format!("cairn_session={session}"));
    }
    answer(request.call())
}

fn post(url: &str, session: Option<&str>, form: &[(&str, &str)], origin: Option<&str>) -> Answer {
    let cookie = session.map(|session| format!("cairn_session={session}"));
    post_with_cookie(url, cookie.as_deref(), form, origin)
}

fn post_with_cookie(
    url: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> Answer {
    let mut request = agent()
        .post(url)
        .header("Content-Type", "application/x-www-form-urlencoded");
    if let Some(cookie) = cookie {
        request = request.header("Cookie", cookie);
    }
    if let Some(origin) = origin {
        request = request.header("Origin", origin);
    }
    let body: String = form_urlencoded(form);
    answer(request.send(body))
}

/// Signs in at `/ui/login` as a browser does: the form's page first (its nonce, in a field
/// and a cookie), then the POST with both.
fn token_login(server: &Server, token: &str, origin: Option<&str>) -> Answer {
    let login = format!("{}/ui/login", server.url);
    let page = get(&login, None);
    assert_eq!(page.status, 200, "{}", page.text);
    let cookie = page.header("set-cookie");
    let nonce = cookie
        .strip_prefix("cairn_login=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no login cookie: {cookie:?}"))
        .to_string();
    assert!(page.text.contains(&format!("value=\"{nonce}\"")));
    post_with_cookie(
        &login,
        Some(&format!("cairn_login={nonce}")),
        &[("token", token), ("nonce", &nonce)],
        origin,
    )
}

fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap()
}

fn assert_secure_headers(answer: &Answer) {
    let csp = answer.header("content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(directive), "CSP {csp:?} lacks {directive}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(answer.header("x-content-type-options"), "nosniff");
    assert_eq!(answer.header("referrer-policy"), "no-referrer");
}

/// Signs in through `cairn ui`'s link: the session id.
fn owner_session(server: &Server) -> String {
    let signed = get(&server.link, None);
    assert_eq!(signed.status, 303, "{}", signed.text);
    assert_eq!(signed.header("location"), "/");
    signed.session()
}

fn remember(brain: &Brain, args: &[&str]) -> i64 {
    let mut all = vec!["remember"];
    all.extend_from_slice(args);
    brain.json(&all, 0)["id"].as_i64().unwrap()
}

#[test]
fn the_login_link_works_once_and_the_cookie_is_http_only_strict_and_path_root() {
    let brain = Brain::new();
    let server = start_ui(&brain);
    // Not signed in: every page sends the browser to the sign-in page.
    let anonymous = get(&format!("{}/", server.url), None);
    assert_eq!(anonymous.status, 303);
    assert_eq!(anonymous.header("location"), "/ui/login");
    assert_secure_headers(&anonymous);
    let first = get(&server.link, None);
    assert_eq!(first.status, 303, "{}", first.text);
    assert_secure_headers(&first);
    let cookie = first.header("set-cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(cookie.contains("Path=/"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let session = first.session();
    assert_eq!(session.len(), 64);
    // The link is spent: a second browser gets the sign-in form with a 401, and no cookie.
    let second = get(&server.link, None);
    assert_eq!(second.status, 401);
    assert!(!second.header("set-cookie").contains("cairn_session"));
    assert!(second.text.contains("used already or has expired"));
    // A made-up code is the same.
    let guessed = get(
        &format!("{}/ui/login?code={}", server.url, "0".repeat(64)),
        None,
    );
    assert_eq!(guessed.status, 401);
    // The first browser is signed in; the page has the CSP and no inline script or style.
    let page = get(&format!("{}/", server.url), Some(&session));
    assert_eq!(page.status, 200, "{}", page.text);
    assert_secure_headers(&page);
    assert!(page.header("content-type").starts_with("text/html"));
    assert!(!page.text.contains("<script>"), "no inline script");
    assert!(!page.text.contains("style="), "no inline style");
    assert!(page.text.contains("Skip to content"));
    // Assets: the vendored htmx and its license, cached for long, with the same headers.
    let htmx = get(
        &format!("{}/ui/assets/htmx-2.0.11.min.js", server.url),
        None,
    );
    assert_eq!(htmx.status, 200);
    assert!(htmx.header("cache-control").contains("immutable"));
    assert_secure_headers(&htmx);
    let license = get(&format!("{}/ui/assets/htmx-LICENSE.txt", server.url), None);
    assert!(license.text.contains("BSD"));
    // Signing out ends the session on the server, whatever the browser keeps.
    let csrf = page.csrf();
    let out = post(
        &format!("{}/ui/logout", server.url),
        Some(&session),
        &[("csrf", &csrf)],
        None,
    );
    assert_eq!(out.status, 303, "{}", out.text);
    assert!(out.header("set-cookie").contains("Max-Age=0"));
    assert_eq!(get(&format!("{}/", server.url), Some(&session)).status, 303);
}

#[test]
fn hostile_titles_bodies_and_links_render_as_text() {
    let brain = Brain::new();
    let id = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--title",
            "<script>alert('title')</script> hostile",
            "--body",
            "\"><img src=x onerror=alert(1)> and [click](javascript:alert(2)) hostile",
            "--source",
            "javascript:alert(3)",
        ],
    );
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let record = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert_eq!(record.status, 200, "{}", record.text);
    let search = get(&format!("{}/?q=hostile", server.url), Some(&session));
    assert_eq!(search.status, 200, "{}", search.text);
    assert!(
        search.text.contains(&format!("/ui/records/{id}")),
        "the search finds it: {}",
        search.text
    );
    for page in [&record, &search] {
        assert!(!page.text.contains("<script>alert"), "{}", page.text);
        assert!(!page.text.contains("<img src=x"), "{}", page.text);
        assert!(!page.text.contains("href=\"javascript:"), "{}", page.text);
        assert!(page.text.contains("&lt;script&gt;alert"), "{}", page.text);
        assert!(page.text.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert_secure_headers(page);
    }
    // The source is shown, as text, not as a link.
    assert!(record.text.contains("javascript:alert(3)"));
}

#[test]
fn a_post_without_or_with_a_wrong_csrf_token_or_from_another_origin_changes_nothing() {
    let brain = Brain::new();
    let id = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--title",
            "port",
            "--body",
            "the api listens on 7777",
        ],
    );
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let page = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert!(page.text.contains("/edit"), "an admin sees the edit form");
    let csrf = page.csrf();
    let edit = format!("{}/ui/records/{id}/edit", server.url);
    let send = |token: Option<&str>, origin: Option<&str>, session: Option<&str>| {
        let mut pairs = vec![("title", "port"), ("body", "the api listens on 8080")];
        if let Some(token) = token {
            pairs.push(("csrf", token));
        }
        post(&edit, session, &pairs, origin)
    };
    let missing = send(None, None, Some(&session));
    assert_eq!(missing.status, 403, "{}", missing.text);
    assert_secure_headers(&missing);
    let wrong = send(Some(&"0".repeat(64)), None, Some(&session));
    assert_eq!(wrong.status, 403);
    let foreign = send(Some(&csrf), Some("http://evil.example"), Some(&session));
    assert_eq!(foreign.status, 403);
    let anonymous = send(Some(&csrf), None, None);
    assert_eq!(anonymous.status, 401);
    let shown = brain.json(&["show", &id.to_string()], 0);
    assert_eq!(shown["body"], "the api listens on 7777", "nothing changed");
    // With the token (and this server as the origin) the edit goes through the engine…
    let good = send(Some(&csrf), Some(&server.url), Some(&session));
    assert_eq!(good.status, 303, "{}", good.text);
    assert_eq!(good.header("location"), format!("/ui/records/{id}#history"));
    let shown = brain.json(&["show", &id.to_string()], 0);
    assert_eq!(shown["body"], "the api listens on 8080");
    // …and is in the history afterwards, with a word diff of the two versions.
    let after = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert!(after.text.contains("<del>7777</del>"), "{}", after.text);
    assert!(after.text.contains("<ins>8080</ins>"), "{}", after.text);
    assert!(after.text.contains(" by ui"), "the actor: {}", after.text);
}

#[test]
fn a_read_token_sees_no_write_controls_and_its_writes_are_refused_by_the_server() {
    let brain = Brain::new();
    let id = remember(
        &brain,
        &[
            "--type",
            "decision",
            "--title",
            "db",
            "--body",
            "we use sqlite",
        ],
    );
    let reader = brain.json(
        &[
            "token",
            "create",
            "--name",
            "reader",
            "--project",
            "test-project",
            "--role",
            "read",
        ],
        0,
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let server = start_serve(&brain);
    let login = format!("{}/ui/login", server.url);
    let form_page = get(&login, None);
    assert_eq!(form_page.status, 200);
    assert_secure_headers(&form_page);
    let wrong = format!("cairn_{}", "0".repeat(64));
    let refused = token_login(&server, &wrong, None);
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert!(!refused.header("set-cookie").contains("cairn_session"));
    let foreign = token_login(&server, &reader, Some("http://evil.example"));
    assert_eq!(foreign.status, 403);
    // A form another site made (no nonce, or one this browser never got) signs nobody in.
    let forged = post(&login, None, &[("token", &reader)], None);
    assert_eq!(forged.status, 403, "{}", forged.text);
    let mismatched = post_with_cookie(
        &login,
        Some(&format!("cairn_login={}", "1".repeat(64))),
        &[("token", &reader), ("nonce", &"2".repeat(64))],
        None,
    );
    assert_eq!(mismatched.status, 403);
    assert!(!mismatched.header("set-cookie").contains("cairn_session"));
    let signed = token_login(&server, &reader, None);
    assert_eq!(signed.status, 303, "{}", signed.text);
    let session = signed.session();
    let page = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("we use sqlite"));
    for control in [
        "/edit",
        "/supersede",
        "/forget",
        "/verify",
        "/restore",
        "<textarea",
    ] {
        assert!(
            !page.text.contains(control),
            "a read token sees no {control}: {}",
            page.text
        );
    }
    // The server refuses the write itself, CSRF token and all.
    let csrf = page.csrf();
    for action in ["edit", "forget", "verify", "supersede"] {
        let attempt = post(
            &format!("{}/ui/records/{id}/{action}", server.url),
            Some(&session),
            &[
                ("csrf", &csrf),
                ("body", "we use postgres"),
                ("source", "x"),
            ],
            None,
        );
        assert_eq!(attempt.status, 403, "{action}: {}", attempt.text);
        assert!(attempt.text.contains("read"), "{}", attempt.text);
    }
    let shown = brain.json(&["show", &id.to_string()], 0);
    assert_eq!(shown["body"], "we use sqlite");
    assert_eq!(shown["status"], "active");
    // Revoking the token ends the session at once.
    brain.json(&["token", "revoke", "reader"], 0);
    let after = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert_eq!(after.status, 303);
    assert_eq!(after.header("location"), "/ui/login");
}

#[test]
fn a_project_token_sees_only_its_project_in_the_ui() {
    let brain = Brain::new();
    let mine = remember(
        &brain,
        &["--type", "fact", "--title", "mine", "--body", "ours here"],
    );
    let mut other_project = brain.cmd();
    other_project.env("CAIRN_PROJECT", "other").args([
        "--json",
        "remember",
        "--type",
        "fact",
        "--title",
        "theirs",
        "--body",
        "not yours",
    ]);
    let output = other_project.output().unwrap();
    assert!(output.status.success());
    let theirs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let theirs = theirs["id"].as_i64().unwrap();
    let token = brain.json(
        &[
            "token",
            "create",
            "--name",
            "writer",
            "--project",
            "test-project",
            "--role",
            "write",
        ],
        0,
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let server = start_serve(&brain);
    let session = token_login(&server, &token, None).session();
    let own = get(&format!("{}/ui/records/{mine}", server.url), Some(&session));
    assert_eq!(own.status, 200);
    assert!(
        own.text.contains("/edit"),
        "a write token sees the edit form"
    );
    let other = get(
        &format!("{}/ui/records/{theirs}", server.url),
        Some(&session),
    );
    assert_eq!(other.status, 404, "{}", other.text);
    assert!(!other.text.contains("not yours"));
    let missing = get(&format!("{}/ui/records/999999", server.url), Some(&session));
    assert_eq!(missing.status, 404);
}

#[test]
fn timeline_and_health_show_the_log_the_doctor_and_the_degraded_state() {
    let brain = Brain::new();
    let id = remember(
        &brain,
        &["--type", "fact", "--title", "a", "--body", "first text"],
    );
    remember(
        &brain,
        &["--type", "note", "--title", "b", "--body", "second text"],
    );
    brain.json(&["update", &id.to_string(), "--body", "changed text"], 0);
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let timeline = get(&format!("{}/ui/timeline", server.url), Some(&session));
    assert_eq!(timeline.status, 200, "{}", timeline.text);
    assert_secure_headers(&timeline);
    assert!(timeline.text.contains(">remember<") && timeline.text.contains(">update<"));
    assert!(timeline.text.contains(&format!("/ui/records/{id}")));
    let updates = get(
        &format!("{}/ui/timeline?op=update", server.url),
        Some(&session),
    );
    assert!(
        updates.text.contains("1 of the latest 3 events"),
        "{}",
        updates.text
    );
    let health = get(&format!("{}/ui/health", server.url), Some(&session));
    assert_eq!(health.status, 200, "{}", health.text);
    // CAIRN_EMBEDDER=none: no model, said as a banner with the fix.
    assert!(
        health.text.contains("Degraded: no embedding model"),
        "{}",
        health.text
    );
    assert!(health.text.contains("cairn model install"));
    assert!(
        !health.text.contains("integrity"),
        "the doctor runs when asked"
    );
    assert!(health.text.contains("/ui/health?doctor=1"));
    let checked = get(
        &format!("{}/ui/health?doctor=1", server.url),
        Some(&session),
    );
    assert_eq!(checked.status, 200, "{}", checked.text);
    assert!(checked.text.contains("integrity"), "the doctor's checks");
    assert!(
        checked.text.contains("Every check passes."),
        "{}",
        checked.text
    );
    assert!(health.text.contains("<svg"), "the growth chart");
    // Size by table: measured (dbstat reads every page) when asked, like the doctor.
    assert!(health.text.contains("/ui/health?sizes=1"));
    assert!(!health.text.contains("table class=\"sizes\""));
    let sized = get(&format!("{}/ui/health?sizes=1", server.url), Some(&session));
    assert_eq!(sized.status, 200, "{}", sized.text);
    assert!(
        sized.text.contains("table class=\"sizes\""),
        "{}",
        sized.text
    );
    for btree in ["memories", "events", "history", "memories_fts_data"] {
        assert!(
            sized.text.contains(&format!(
                "<th scope=\"row\"><code>{btree}</code></th><td>table</td>"
            )),
            "{btree}: {}",
            sized.text
        );
    }
    assert!(
        sized.text.contains(
            "<th scope=\"row\"><code>events_actor</code></th><td>index of <code>events</code></td>"
        ),
        "{}",
        sized.text
    );
    assert!(sized.text.contains("free pages"));
    assert!(
        health.text.contains("<dt>records</dt><dd>2</dd>"),
        "{}",
        health.text
    );
}

#[test]
fn the_timeline_filters_by_the_actor_that_wrote_each_event() {
    let brain = Brain::new();
    remember(
        &brain,
        &[
            "--type",
            "fact",
            "--title",
            "local",
            "--body",
            "written by the cli",
        ],
    );
    let token = brain.json(
        &[
            "token",
            "create",
            "--name",
            "agent-a",
            "--project",
            "test-project",
            "--role",
            "write",
        ],
        0,
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let server = start_serve(&brain);
    // The same command through the server: its event is the token's.
    let output = brain
        .cmd()
        .env("CAIRN_URL", &server.url)
        .env("CAIRN_TOKEN", &token)
        .args([
            "--json",
            "remember",
            "--type",
            "fact",
            "--title",
            "remote",
            "--body",
            "written through the server by agent-a",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let session = token_login(&server, &token, None).session();
    let every = get(&format!("{}/ui/timeline", server.url), Some(&session));
    assert_eq!(every.status, 200, "{}", every.text);
    for actor in ["cli", "agent-a"] {
        assert!(
            every
                .text
                .contains(&format!("<option value=\"{actor}\">{actor}</option>")),
            "the actors present are offered: {}",
            every.text
        );
        assert!(
            every.text.contains(&format!("by {actor}")),
            "{}",
            every.text
        );
    }
    let mine = get(
        &format!("{}/ui/timeline?actor=agent-a", server.url),
        Some(&session),
    );
    assert_eq!(mine.status, 200, "{}", mine.text);
    assert!(
        mine.text
            .contains("1 of the latest 1 events by <strong>agent-a</strong>"),
        "{}",
        mine.text
    );
    assert!(mine.text.contains("by agent-a") && !mine.text.contains("by cli"));
    assert!(
        mine.text
            .contains(r#"<option value="agent-a" selected>agent-a</option>"#)
    );
    // Operation AND actor: the cli wrote a remember, agent-a none of the updates.
    let none = get(
        &format!("{}/ui/timeline?actor=agent-a&op=update", server.url),
        Some(&session),
    );
    assert!(
        none.text.contains("0 of the latest 1 events"),
        "{}",
        none.text
    );
    // `cairn log --actor`, locally and through the server, and the actor in the JSON.
    let log = brain.json(&["log", "--actor", "agent-a"], 0);
    let events = log.as_array().unwrap();
    assert_eq!(events.len(), 1, "{log}");
    assert_eq!(events[0]["actor"], "agent-a");
    assert_eq!(events[0]["op"], "remember");
    let cli = brain.json(&["log", "--actor", "cli"], 0);
    assert!(
        cli.as_array().unwrap().iter().all(|e| e["actor"] == "cli")
            && cli.as_array().unwrap().len() == 1,
        "{cli}"
    );
    let remote = brain
        .cmd()
        .env("CAIRN_URL", &server.url)
        .env("CAIRN_TOKEN", &token)
        .args(["--json", "log", "--actor", "cli"])
        .output()
        .unwrap();
    let remote: serde_json::Value = serde_json::from_slice(&remote.stdout).unwrap();
    assert_eq!(remote, cli, "the server answers the same filter");
}

#[test]
fn health_needs_a_session_of_every_project_as_the_api_does() {
    let brain = Brain::new();
    let token = brain.json(
        &[
            "token",
            "create",
            "--name",
            "one",
            "--project",
            "test-project",
            "--role",
            "read",
        ],
        0,
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let server = start_serve(&brain);
    let session = token_login(&server, &token, None).session();
    let health = get(&format!("{}/ui/health", server.url), Some(&session));
    assert_eq!(health.status, 403, "{}", health.text);
    assert!(health.text.contains("every project"));
}

const DEPLOY: &str =
    "deploys go out through the staging cluster and get promoted after smoke tests pass";

#[test]
fn tending_accepts_inbox_items_and_a_dream_merge_shown_as_a_diff() {
    let brain = Brain::new();
    let first = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("{DEPLOY} on fridays, see src/deploy.rs"),
        ],
    );
    let second = remember(
        &brain,
        &[
            "--type",
            "note",
            "--body",
            &format!("{DEPLOY} on mondays, see src/deploy.rs"),
            "--allow-duplicate",
        ],
    );
    brain.sql(
        "INSERT INTO inbox (project, kind, suggested_type, body, content_hash, source, created_at) VALUES \
         ('test-project', 'remember', 'fact', 'The glaze shelf is the top one.', 'h1', 'transcript of session s1', '2026-12-01T00:00:00Z'), \
         ('test-project', 'remember', 'fact', 'A <script>captured</script> line.', 'h2', 'transcript of session s1', '2026-12-01T00:00:00Z')",
    );
    let dream = brain.json(&["dream", "--no-llm"], 0);
    let dream_id = dream["dream"]["id"].as_str().unwrap().to_string();
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let tending = get(&format!("{}/ui/tending", server.url), Some(&session));
    assert_eq!(tending.status, 200, "{}", tending.text);
    assert!(tending.text.contains("The glaze shelf is the top one."));
    assert!(tending.text.contains("A &lt;script&gt;captured"));
    assert!(tending.text.contains(&format!("/ui/dreams/{dream_id}")));
    let csrf = tending.csrf();
    let items = brain.json(&["inbox", "list"], 0);
    let items: Vec<i64> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect();
    assert_eq!(items.len(), 2);
    let accepted = post(
        &format!("{}/ui/inbox/{}/accept", server.url, items[0]),
        Some(&session),
        &[("csrf", &csrf), ("type", "fact")],
        None,
    );
    assert_eq!(accepted.status, 303, "{}", accepted.text);
    let dismissed = post(
        &format!("{}/ui/inbox/{}/dismiss", server.url, items[1]),
        Some(&session),
        &[("csrf", &csrf)],
        None,
    );
    assert_eq!(dismissed.status, 303, "{}", dismissed.text);
    assert_eq!(brain.json(&["inbox", "list"], 0), serde_json::json!([]));
    assert_eq!(
        brain.recall_ids(&["glaze shelf"]).len(),
        1,
        "the accepted item is a record"
    );
    // The dream's merge, as a word diff of the two records.
    let page = get(
        &format!("{}/ui/dreams/{dream_id}", server.url),
        Some(&session),
    );
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("merge (1)"), "{}", page.text);
    let (kept, gone) = if page
        .text
        .contains(&format!("Keep <a href=\"/ui/records/{first}\">"))
    {
        (first, second)
    } else {
        (second, first)
    };
    assert!(
        page.text.contains("<del>") && page.text.contains("<ins>"),
        "{}",
        page.text
    );
    // Without the CSRF token nothing is applied.
    let refused = post(
        &format!("{}/ui/dreams/{dream_id}/accept", server.url),
        Some(&session),
        &[],
        None,
    );
    assert_eq!(refused.status, 403);
    assert_eq!(
        brain.json(&["show", &gone.to_string()], 0)["status"],
        "active"
    );
    let accept = post(
        &format!("{}/ui/dreams/{dream_id}/accept", server.url),
        Some(&session),
        &[("csrf", &csrf), ("only", "merge")],
        None,
    );
    assert_eq!(accept.status, 303, "{}", accept.text);
    assert_eq!(
        brain.json(&["show", &gone.to_string()], 0)["merged_into"],
        kept
    );
    let after = get(
        &format!("{}/ui/dreams/{dream_id}", server.url),
        Some(&session),
    );
    assert!(after.text.contains("applied"), "{}", after.text);
    assert!(
        !after.text.contains("/accept\""),
        "a decided set has no controls"
    );
}

#[test]
fn the_graph_page_draws_the_neighbourhood_and_tasks_show_a_measures_trend() {
    let brain = Brain::new();
    let decision = remember(
        &brain,
        &[
            "--type",
            "decision",
            "--title",
            "Queue before deploy",
            "--body",
            "drain the queue before a deploy",
        ],
    );
    let gotcha = remember(
        &brain,
        &[
            "--type",
            "gotcha",
            "--title",
            "Queue drains slowly",
            "--body",
            "the queue takes ten minutes to drain",
        ],
    );
    let third = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--title",
            "Deploy <window>",
            "--body",
            "deploys happen at noon",
        ],
    );
    brain.json(
        &[
            "relate",
            &format!("#{gotcha}"),
            "affects",
            &format!("#{decision}"),
        ],
        0,
    );
    brain.json(
        &[
            "relate",
            &format!("#{third}"),
            "requires",
            &format!("#{gotcha}"),
        ],
        0,
    );
    brain.json(
        &[
            "task",
            "add",
            "Rotate the staging keys",
            "--due",
            "2020-01-01",
        ],
        0,
    );
    for value in ["10", "12", "15"] {
        brain.json(&["measure", "record", "p95_ms", value, "--unit", "ms"], 0);
    }
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let graph = get(
        &format!("{}/ui/graph?node=%23{decision}&depth=2", server.url),
        Some(&session),
    );
    assert_eq!(graph.status, 200, "{}", graph.text);
    assert_secure_headers(&graph);
    assert!(
        graph.text.contains("<svg class=\"graph\""),
        "{}",
        graph.text
    );
    // The origin and both neighbours (one and two hops away) are drawn, each a link that
    // walks on from it.
    assert_eq!(graph.text.matches("<circle").count(), 3, "{}", graph.text);
    for id in [decision, gotcha, third] {
        assert!(
            graph.text.contains(&format!("/ui/graph?node=%23{id}")),
            "#{id} links on: {}",
            graph.text
        );
    }
    assert!(graph.text.contains(">affects<") && graph.text.contains(">requires<"));
    assert!(
        graph.text.contains("Deploy &lt;window&gt;"),
        "escaped in the SVG too"
    );
    let outward = get(
        &format!("{}/ui/graph?node=%23{decision}&direction=out", server.url),
        Some(&session),
    );
    assert_eq!(
        outward.text.matches("<circle").count(),
        1,
        "nothing leaves the decision"
    );
    let bad = get(
        &format!(
            "{}/ui/graph?node=%23{decision}&direction=sideways",
            server.url
        ),
        Some(&session),
    );
    assert_eq!(bad.status, 400, "{}", bad.text);
    let landing = get(&format!("{}/ui/graph", server.url), Some(&session));
    assert_eq!(landing.status, 200, "{}", landing.text);
    assert!(landing.text.contains("Find the clusters"));
    let clusters = get(
        &format!("{}/ui/graph?clusters=1", server.url),
        Some(&session),
    );
    assert_eq!(clusters.status, 200, "{}", clusters.text);
    assert!(
        clusters.text.contains("records went in"),
        "{}",
        clusters.text
    );
    let tasks = get(&format!("{}/ui/tasks", server.url), Some(&session));
    assert_eq!(tasks.status, 200, "{}", tasks.text);
    assert!(tasks.text.contains("Rotate the staging keys"));
    assert!(
        tasks.text.contains("<strong>due 2020-01-01"),
        "{}",
        tasks.text
    );
    assert!(tasks.text.contains("p95_ms"));
    assert!(tasks.text.contains("last 15 ms"), "{}", tasks.text);
    assert_eq!(
        tasks.text.matches("<rect").count(),
        3,
        "one bar per reading"
    );
}

#[test]
fn a_record_page_gives_recalls_freshness_verdict_in_the_owners_checkout() {
    let brain = Brain::new();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(brain.dir.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.org")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.org")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "first"]);
    let id = remember(
        &brain,
        &[
            "--type",
            "fact",
            "--title",
            "port",
            "--body",
            "the api listens on 7777",
        ],
    );
    // Stamped at a commit this tree does not have (a rebase, another clone).
    brain.sql(&format!(
        "UPDATE memories SET commit_rev = 'deadbeefdeadbeefdeadbeefdeadbeefdeadbeef' WHERE id = {id}"
    ));
    let server = start_ui(&brain);
    let session = owner_session(&server);
    let page = get(&format!("{}/ui/records/{id}", server.url), Some(&session));
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text
            .contains("stored at deadbeef, which is not in this tree"),
        "{}",
        page.text
    );
}
