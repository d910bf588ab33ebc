//! `/v1/hooks/…`: the agent hooks' work done by the server, for `cairn hook` calls that go to
//! the local daemon or to `CAIRN_URL` (crates/cairn-cli/src/hook.rs prints the client's JSON
//! around these answers; crates/cairn-cli/src/hook_server.rs is the client). The prompt hook's
//! recall is hybrid here once the model is resident.

use super::{Endpoint, Input, Op, WorkingTreeBody, blocking, caller, handle, ok, on_engine};
use crate::App;
use crate::body;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use cairn_engine::tokens::Role;
use cairn_engine::{BriefRequest, CaptureReport, Mode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// `POST /v1/hooks/user-prompt-submit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptBody {
    /// The prompt the user submitted.
    pub prompt: String,
    /// Byte budget of the injected text (default 2,048).
    #[serde(default)]
    pub budget: Option<usize>,
}

/// `POST /v1/hooks/session-start`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionStartBody {
    /// Byte budget of the brief (default 6,000).
    #[serde(default)]
    pub budget: Option<usize>,
    #[serde(default)]
    pub session: Option<String>,
    /// How the session started (the client's `source`: startup, resume, …).
    #[serde(default)]
    pub source: Option<String>,
    /// Which client (claude-code, codex, gemini, cursor).
    #[serde(default)]
    pub client: Option<String>,
    /// The client's working tree (a remote server never runs git in its own directory).
    #[serde(default)]
    pub working_tree: Option<WorkingTreeBody>,
}

/// `GET /v1/hooks/capture?session=S&transcript=T`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureQuery {
    pub session: String,
    /// The transcript's path on the client (its name: offsets are kept per session and path).
    pub transcript: String,
}

/// `POST /v1/hooks/capture`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureBody {
    pub session: String,
    /// The transcript's path on the client.
    pub transcript: String,
    /// The byte offset `text` starts at: the one `GET /v1/hooks/capture` answered (else 409).
    pub offset: u64,
    /// Whole lines of the transcript from `offset` (invalid UTF-8 blanked byte for byte, so
    /// lengths stay the file's).
    pub text: String,
}

/// `POST /v1/hooks/turn`: one turn a client hands over directly (Gemini's AfterAgent, Cursor's
/// afterAgentResponse).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    pub session: String,
    #[serde(default)]
    pub prompt: String,
    pub response: String,
}

/// `POST /v1/hooks/session-end`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEndBody {
    pub session: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub client: Option<String>,
    /// Transcript bytes the hook could not send within its deadline.
    #[serde(default)]
    pub uncaptured_bytes: Option<u64>,
}

/// `POST /v1/hooks/user-prompt-submit`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PromptAnswer {
    /// The fenced text to inject; `null` when nothing qualifies.
    pub text: Option<String>,
    /// The records the text shows.
    pub ids: Vec<i64>,
}

/// `POST /v1/hooks/session-start`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BriefTextAnswer {
    /// The brief's text.
    pub text: String,
}

/// `GET /v1/hooks/capture`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CaptureOffsetAnswer {
    pub session: String,
    pub transcript: String,
    /// Bytes of the transcript already captured: the next capture starts here.
    pub offset: u64,
}

/// `POST /v1/hooks/session-end`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionEndAnswer {
    /// `noted`.
    pub status: &'static str,
    pub session: String,
    /// The maintenance this end makes due (`cairn maintain --session`): `started` (on the
    /// server, in the background: this answer does not wait for it), `not_due`, or `read_only`
    /// (a read-only server starts none).
    pub maintenance: &'static str,
}

async fn user_prompt_submit(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let read_only = app.service.read_only();
    handle(
        app,
        headers,
        Op::read("hook user-prompt-submit"),
        Input::Body(body),
        move |engine, caller, args: PromptBody| {
            let budget = args.budget.unwrap_or(cairn_engine::PROMPT_BUDGET);
            let found = engine.prompt_context(&args.prompt, budget, Mode::Hybrid)?;
            if let Some(found) = &found
                && caller.grant.role.allows(Role::Write)
                && !read_only
            {
                // passive use, bookkeeping only: a failure must not cost the agent its context
                let _ = engine.note_surfaced(&found.ids);
            }
            Ok(match found {
                Some(found) => PromptAnswer {
                    text: Some(found.text),
                    ids: found.ids,
                },
                None => PromptAnswer {
                    text: None,
                    ids: Vec::new(),
                },
            })
        },
    )
    .await
}

async fn session_start(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // Not through `handle`: the body changes the request's context (the working tree), as in
    // `POST /v1/brief`.
    let mut caller = caller(&app, &headers, Role::Read, "hook session-start").await?;
    let args: SessionStartBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    if let (Some(tree), cairn_engine::GitSource::Supplied(facts)) =
        (args.working_tree, &mut caller.request.git)
    {
        facts.working_tree = Some(cairn_engine::git::WorkingTree {
            branch: tree.branch,
            changed: tree.changed,
        });
    }
    let may_write = caller.grant.role.allows(Role::Write) && !app.service.read_only();
    blocking(move || {
        let request = BriefRequest {
            budget: args.budget.unwrap_or(cairn_engine::DEFAULT_BRIEF_BUDGET),
            sections: Vec::new(),
        };
        let text = on_engine(&app, &caller, "hook session-start", |engine| {
            let brief = engine.brief(&request)?;
            if may_write {
                // bookkeeping only: a failure here must not cost the agent its brief
                let _ = engine.note_event(
                    "session_start",
                    json!({"session": args.session.as_deref().unwrap_or("unknown"), "source": args.source, "client": args.client}),
                );
                let _ = engine.note_surfaced(&cairn_core::brief::record_ids_shown(
                    &brief.assembled.text,
                ));
            }
            Ok(brief.assembled.text)
        })?;
        ok(&BriefTextAnswer { text })
    })
    .await
}

async fn capture_offset(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("hook capture"),
        Input::Query(query),
        |engine, _, args: CaptureQuery| {
            let offset = engine.capture_offset(&args.session, &args.transcript)?;
            Ok(CaptureOffsetAnswer {
                session: args.session,
                transcript: args.transcript,
                offset,
            })
        },
    )
    .await
}

async fn capture(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("hook capture"),
        Input::Body(body),
        |engine, _, args: CaptureBody| {
            Ok(engine.capture_transcript_text(
                &args.session,
                &args.transcript,
                args.offset,
                &args.text,
            )?)
        },
    )
    .await
}

async fn turn(State(app): State<App>, headers: HeaderMap, body: Body) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("hook capture"),
        Input::Body(body),
        |engine, _, args: TurnBody| {
            Ok(engine.capture_turn(&args.session, &args.prompt, &args.response)?)
        },
    )
    .await
}

async fn session_end(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let server = app.clone();
    handle(
        app,
        headers,
        Op::write("hook session-end"),
        Input::Body(body),
        move |engine, caller, args: SessionEndBody| {
            let mut detail =
                json!({"session": args.session, "reason": args.reason, "client": args.client});
            if let Some(bytes) = args.uncaptured_bytes {
                detail["uncaptured_bytes"] = bytes.into();
            }
            engine.note_event("session_end", detail)?;
            let maintenance = start_maintenance(&server, engine, caller, &args.session)?;
            Ok(SessionEndAnswer {
                status: "noted",
                session: args.session,
                maintenance,
            })
        },
    )
    .await
}

/// What a local session end does (`spawn_after_session` in the CLI), on the server: when
/// anything is due (cheap reads), `cairn maintain --session ID` runs on a thread and an engine
/// of its own, not waited for — the hook's answer goes out at once whatever the LLM takes. One
/// run at a time per brain is the maintenance's own lock; what it did is in `GET /v1/maintain`,
/// a failure in the server's log.
fn start_maintenance(
    app: &App,
    engine: &cairn_engine::Engine,
    caller: &crate::auth::Caller,
    session: &str,
) -> Result<&'static str, Problem> {
    if app.service.read_only() {
        return Ok("read_only");
    }
    let options = super::lifecycle::maintain_options(engine)?;
    if !engine.maintenance_due(&options, Some(session))? {
        return Ok("not_due");
    }
    let (service, request, ended) = (
        app.service.clone(),
        caller.request.clone(),
        session.to_string(),
    );
    let started = std::thread::Builder::new()
        .name("cairn-maintain".into())
        .spawn(move || {
            let session = ended;
            let run = service.call_alone(&request, "maintain", |engine| {
                engine.maintain(&options, Some(&session))
            });
            match run {
                Ok(report) => {
                    for step in &report.steps {
                        if let Some(run) = step.run.as_ref().filter(|r| r.outcome == "error") {
                            eprintln!(
                                "cairn serve: maintenance after session {session}: {} failed: {}",
                                step.step, run.summary
                            );
                        }
                    }
                }
                Err(error) => {
                    eprintln!("cairn serve: maintenance after session {session} failed: {error}")
                }
            }
        });
    match started {
        Ok(_) => Ok("started"),
        Err(error) => Err(Problem::from_kind(
            cairn_engine::ErrorKind::Other,
            format!(
                "the session's end was noted, but its maintenance could not start ({error}); run `cairn maintain --session {session}`"
            ),
        )),
    }
}

/// The hook endpoints, listed in `/openapi.json` with the rest.
pub fn endpoints() -> Vec<Endpoint> {
    let write = Some(Role::Write);
    let read = Some(Role::Read);
    vec![
        Endpoint::new(
            "post",
            "/v1/hooks/user-prompt-submit",
            read,
            "The prompt hook's recall (`cairn hook user-prompt-submit`): hybrid once the model is resident, fenced, within the budget; `text` is null when nothing qualifies. Notes what it shows as surfaced (a write token).",
            post(user_prompt_submit),
        )
        .body::<PromptBody>()
        .answers::<PromptAnswer>("`{\"text\": string | null, \"ids\": [record ids shown]}`"),
        Endpoint::new(
            "post",
            "/v1/hooks/session-start",
            read,
            "The session-start hook's brief (`cairn hook session-start`); notes the session's start and what the brief shows (a write token). Send the working tree: the server never runs git.",
            post(session_start),
        )
        .body::<SessionStartBody>()
        .answers::<BriefTextAnswer>("`{\"text\": the brief's text}`"),
        Endpoint::new(
            "get",
            "/v1/hooks/capture",
            write,
            "Where the next capture of a session's transcript starts (the Stop, PreCompact and SessionEnd hooks of a client whose transcript is on its own machine).",
            get(capture_offset),
        )
        .query::<CaptureQuery>()
        .answers::<CaptureOffsetAnswer>("`{\"session\", \"transcript\", \"offset\": bytes already captured}`"),
        Endpoint::new(
            "post",
            "/v1/hooks/capture",
            write,
            "Capture whole lines of a session's transcript sent from the client, starting at the offset `GET` answered: one transaction; another offset is 409 naming the stored one.",
            post(capture),
        )
        .body::<CaptureBody>()
        .answers::<CaptureReport>("the capture report (turns, episodes_added, inbox_added, offset_before, offset_after, more)"),
        Endpoint::new(
            "post",
            "/v1/hooks/turn",
            write,
            "Capture one turn a client hands over directly (Gemini AfterAgent, Cursor afterAgentResponse).",
            post(turn),
        )
        .body::<TurnBody>()
        .answers::<CaptureReport>("the capture report"),
        Endpoint::new(
            "post",
            "/v1/hooks/session-end",
            write,
            "Note a session's end, and start the maintenance it makes due (extraction of its turns, decay, a dream: `cairn maintain --session`) on the server in the background, as a local session end does; the answer does not wait for it.",
            post(session_end),
        )
        .body::<SessionEndBody>()
        .answers::<SessionEndAnswer>("`{\"status\": \"noted\", \"session\"}`"),
    ]
}
