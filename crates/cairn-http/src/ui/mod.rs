//! The web UI (docs/ui.md): server-rendered HTML (maud) with vendored htmx, under `/` and
//! `/ui/`, on the same [`App`] and the same engine calls as the `/v1` handlers.
//!
//! - `session.rs`: sign-in by token (`/ui/login`) or one-time link (`cairn ui`), the
//!   server-side session map, CSRF;
//! - `layout.rs`: the page shell, the security headers (CSP, nosniff, no referrer), assets;
//! - one file per page: `search.rs` (`/`), `record.rs` (`/ui/records/{id}` and its actions),
//!   `timeline.rs`, `health.rs` (with `chart.rs`, SVG drawn on the server), `tending.rs`
//!   (inbox, review queue, dream proposal sets), `graph.rs` (neighbourhoods as SVG), `tasks.rs`
//!   (tasks, measures' trend charts).
//!
//! Every page is read with a plain GET (JavaScript off works for reading); htmx only swaps the
//! results in as you type. Every POST carries the session's CSRF token and is refused without
//! it; a session whose role cannot write sees no write controls and its writes are refused
//! by the same role check as the API's.

mod chart;
mod graph;
mod health;
pub mod layout;
mod record;
mod search;
pub mod session;
mod tasks;
mod tending;
mod timeline;

use crate::App;
use crate::api::blocking;
use crate::problem::Problem;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use layout::{html_response, page, problem_page, secure, see_other};
use maud::{Markup, html};
pub use session::{Identity, Signed, Ui};

/// The UI's routes, merged into the server's router.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/", get(search::handler))
        .route("/ui/login", get(login_page).post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/assets/{name}", get(asset))
        .route("/ui/records/{id}", get(record::handler))
        .route("/ui/records/{id}/{action}", post(record::action))
        .route("/ui/timeline", get(timeline::handler))
        .route("/ui/health", get(health::handler))
        .route("/ui/tending", get(tending::handler))
        .route("/ui/graph", get(graph::handler))
        .route("/ui/tasks", get(tasks::handler))
        .route("/ui/inbox/{id}/{action}", post(tending::inbox_action))
        .route("/ui/dreams/{id}", get(tending::dream))
        .route("/ui/dreams/{id}/{action}", post(tending::dream_action))
        .layer(axum::middleware::map_response(secure_headers))
}

async fn secure_headers(response: Response) -> Response {
    secure(response)
}

/// A form or query string: its pairs, in order (repeated names kept).
#[derive(Debug, Default)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    pub fn parse(raw: &[u8]) -> Form {
        Form(
            form_urlencoded::parse(raw)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn query(raw: Option<&str>) -> Form {
        Form::parse(raw.unwrap_or("").as_bytes())
    }

    /// The first value of `name`, trimmed; `None` when absent or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value of `name` as given (not trimmed), `None` when absent.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every non-empty value of `name`.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }

    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("1" | "on" | "true" | "yes"))
    }
}

/// A GET page: the signed-in session (or a 303 to the sign-in page), then `work` on a blocking
/// thread; a problem becomes an HTML page with its status.
pub(crate) async fn read_page(
    app: App,
    headers: HeaderMap,
    work: impl FnOnce(&App, &Signed) -> Result<Response, Problem> + Send + 'static,
) -> Response {
    blocking(move || {
        let Some(signed) = app.ui.signed(&app, &headers)? else {
            return Ok(see_other("/ui/login"));
        };
        Ok(work(&app, &signed).unwrap_or_else(|problem| problem_page(&problem, Some(&signed))))
    })
    .await
    .unwrap_or_else(|problem| problem_page(&problem, None))
}

/// A state-changing POST: the body read within the server's limits and parsed as a form, the
/// session required, its CSRF token and the request's `Origin` checked, then `work` on a
/// blocking thread. A refusal is an HTML page with its status (403 without CSRF, 401 without
/// a session).
pub(crate) async fn write_action(
    app: App,
    headers: HeaderMap,
    body: Body,
    work: impl FnOnce(&App, &Signed, &Form) -> Result<Response, Problem> + Send + 'static,
) -> Response {
    let bytes = match crate::body::bytes(&app, &headers, body).await {
        Ok(bytes) => bytes,
        Err(problem) => return problem_page(&problem, None),
    };
    let form = Form::parse(&bytes);
    blocking(move || {
        let Some(signed) = app.ui.signed(&app, &headers)? else {
            return Err(Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "you are not signed in (or the session ended); nothing was done — sign in again",
            ));
        };
        if let Err(problem) =
            session::check_csrf(&headers, form.raw(session::CSRF_FIELD), &signed.csrf)
        {
            return Ok(problem_page(&problem, Some(&signed)));
        }
        Ok(work(&app, &signed, &form)
            .unwrap_or_else(|problem| problem_page(&problem, Some(&signed))))
    })
    .await
    .unwrap_or_else(|problem| problem_page(&problem, None))
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some(asset) = layout::ASSETS.iter().find(|asset| asset.name == name) else {
        return problem_page(
            &Problem::new(
                StatusCode::NOT_FOUND,
                "no-asset",
                format!("no file {name:?} here"),
            ),
            None,
        );
    };
    let mut response = (StatusCode::OK, asset.bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.media));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}

/// The cookie and hidden field that tie a sign-in form to the browser that loaded it (a
/// double submit: a `SameSite=Strict` cookie another site's form cannot send).
const LOGIN_COOKIE: &str = "cairn_login";

fn login_form(app: &App, message: Option<&str>, status: StatusCode) -> Response {
    let nonce = match session::random_secret() {
        Ok(nonce) => nonce,
        Err(problem) => return problem_page(&problem, None),
    };
    let content = html! {
        h1 { "Sign in" }
        @if let Some(message) = message {
            p.problem role="alert" { (message) }
        }
        form.stack method="post" action="/ui/login" {
            input type="hidden" name="nonce" value=(nonce);
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="off" required
                placeholder="cairn_…" spellcheck="false";
            label for="project" { "Project " span.hint { "(only for a token of every project)" } }
            input #project type="text" name="project" autocomplete="off" spellcheck="false";
            button type="submit" { "Sign in" }
        }
        p.hint {
            "Make a token with " code { "cairn token create --name NAME --project KEY --role read" }
            ", or run " code { "cairn ui" } " on the machine of the brain for a one-time link."
        }
    };
    let mut response = html_response(status, page("Sign in", None, "", content));
    response.headers_mut().insert(
        header::SET_COOKIE,
        app.ui.named_cookie(LOGIN_COOKIE, &nonce, 600),
    );
    response
}

/// `GET /ui/login`: the form, or with `?code=` the one-time link of `cairn ui`.
async fn login_page(State(app): State<App>, RawQuery(query): RawQuery) -> Response {
    let form = Form::query(query.as_deref());
    let Some(code) = form.get("code") else {
        return login_form(&app, None, StatusCode::OK);
    };
    match app.ui.redeem(code) {
        Some(identity) => signed_in(&app, identity),
        None => login_form(
            &app,
            Some(
                "This sign-in link was used already or has expired: a link signs one browser in, once. Run `cairn ui` again for a new one, or sign in with a token.",
            ),
            StatusCode::UNAUTHORIZED,
        ),
    }
}

fn signed_in(app: &App, identity: Identity) -> Response {
    match app.ui.start(identity) {
        Ok(id) => {
            let mut response = see_other("/");
            response
                .headers_mut()
                .insert(header::SET_COOKIE, app.ui.cookie(&id));
            response
        }
        Err(problem) => problem_page(&problem, None),
    }
}

/// `POST /ui/login`: a token (and the project, for a token of every project).
async fn login(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    if let Err(problem) = session::check_origin(&headers) {
        return problem_page(&problem, None);
    }
    let bytes = match crate::body::bytes(&app, &headers, body).await {
        Ok(bytes) => bytes,
        Err(problem) => return problem_page(&problem, None),
    };
    let form = Form::parse(&bytes);
    // The form must come from a page this browser loaded from here.
    let nonce_ok = match (
        session::cookie_value(&headers, LOGIN_COOKIE),
        form.get("nonce"),
    ) {
        (Some(cookie), Some(field)) => {
            session::constant_time_eq(cookie.as_bytes(), field.as_bytes())
        }
        _ => false,
    };
    if !nonce_ok {
        return login_form(
            &app,
            Some(
                "This sign-in form is stale or did not come from this page; nobody was signed in — try again.",
            ),
            StatusCode::FORBIDDEN,
        );
    }
    let Some(secret) = form.get("token").map(str::to_string) else {
        return login_form(&app, Some("Give a token."), StatusCode::BAD_REQUEST);
    };
    let project = form.get("project").map(str::to_string);
    let identity = Identity::Token {
        secret,
        project: project.clone(),
    };
    let check = {
        let app = app.clone();
        let identity = identity.clone();
        blocking(move || session::caller_of(&app, &identity)).await
    };
    match check {
        Ok(_) => signed_in(&app, identity),
        Err(problem) if problem.status == StatusCode::UNAUTHORIZED => login_form(
            &app,
            Some("That token does not work here (wrong, revoked or expired)."),
            StatusCode::UNAUTHORIZED,
        ),
        Err(problem) if project.is_none() && problem.status == StatusCode::BAD_REQUEST => {
            login_form(
                &app,
                Some("This token is for every project: name the project to open."),
                StatusCode::BAD_REQUEST,
            )
        }
        Err(problem) => login_form(&app, Some(&problem.detail), problem.status),
    }
}

/// `POST /ui/logout`: ends the session (CSRF-checked like every POST).
async fn logout(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    write_action(app, headers, body, |app, signed, _| {
        app.ui.end(&signed.session);
        let mut response = see_other("/ui/login");
        response
            .headers_mut()
            .insert(header::SET_COOKIE, app.ui.cleared_cookie());
        Ok(response)
    })
    .await
}

/// The page's content or, for an htmx request aimed at `target`, that fragment alone.
pub(crate) fn full_or_fragment(
    headers: &HeaderMap,
    target: &str,
    fragment: Markup,
    full: impl FnOnce(Markup) -> Markup,
) -> Response {
    let htmx = headers
        .get("hx-target")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t == target);
    let mut response = if htmx {
        html_response(StatusCode::OK, fragment)
    } else {
        html_response(StatusCode::OK, full(fragment))
    };
    // The same URL answers a page or a fragment: caches must tell them apart.
    response.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("HX-Request, HX-Target"),
    );
    response
}
