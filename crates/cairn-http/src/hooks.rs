//! `/v1/hooks/…`: the agent hooks' work done by the server, for `cairn hook` calls that go to the
//! local daemon or to `CAIRN_URL` (crates/cairn-cli/src/hook.rs prints the client's JSON around
//! these answers). The prompt hook's recall is hybrid here: the model is resident.

use crate::App;
use crate::api::Endpoint;
use crate::api::{JSON, WorkingTreeBody, blocking, call, caller, ok, schema};
use crate::body;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use cairn_engine::tokens::Role;
use cairn_engine::{BriefRequest, Mode};
use schemars::JsonSchema;
use serde::Deserialize;
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

async fn capture_offset(
    State(app): State<App>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "hook capture").await?;
    let args: CaptureQuery = body::query(query.as_deref())?;
    blocking(move || {
        let offset = call(&app, &caller, "hook capture", |engine| {
            engine.capture_offset(&args.session, &args.transcript)
        })?;
        ok(&json!({"session": args.session, "transcript": args.transcript, "offset": offset}))
    })
    .await
}

async fn capture(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "hook capture").await?;
    let args: CaptureBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let report = call(&app, &caller, "hook capture", |engine| {
            engine.capture_transcript_text(&args.session, &args.transcript, args.offset, &args.text)
        })?;
        ok(&report)
    })
    .await
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

async fn turn(State(app): State<App>, headers: HeaderMap, body: Body) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "hook capture").await?;
    let args: TurnBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let report = call(&app, &caller, "hook capture", |engine| {
            engine.capture_turn(&args.session, &args.prompt, &args.response)
        })?;
        ok(&report)
    })
    .await
}

async fn session_end(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "hook session-end").await?;
    let args: SessionEndBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let mut detail =
            json!({"session": args.session, "reason": args.reason, "client": args.client});
        if let Some(bytes) = args.uncaptured_bytes {
            detail["uncaptured_bytes"] = bytes.into();
        }
        call(&app, &caller, "hook session-end", |engine| {
            engine.note_event("session_end", detail)
        })?;
        ok(&json!({"status": "noted", "session": args.session}))
    })
    .await
}

async fn user_prompt_submit(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "hook user-prompt-submit").await?;
    let args: PromptBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    let may_write = caller.grant.role.allows(Role::Write) && !app.service.read_only();
    blocking(move || {
        let budget = args.budget.unwrap_or(cairn_engine::PROMPT_BUDGET);
        let found = call(&app, &caller, "hook user-prompt-submit", |engine| {
            let found = engine.prompt_context(&args.prompt, budget, Mode::Hybrid)?;
            if let Some(found) = &found
                && may_write
            {
                // passive use, bookkeeping only: a failure must not cost the agent its context
                let _ = engine.note_surfaced(&found.ids);
            }
            Ok(found)
        })?;
        ok(&match found {
            Some(found) => json!({"text": found.text, "ids": found.ids}),
            None => json!({"text": null, "ids": []}),
        })
    })
    .await
}

async fn session_start(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
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
        let text = call(&app, &caller, "hook session-start", |engine| {
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
        ok(&json!({"text": text}))
    })
    .await
}

/// The hook endpoints, listed in `/openapi.json` with the rest.
pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint {
            method: "post",
            path: "/v1/hooks/user-prompt-submit",
            summary: "The prompt hook's recall (`cairn hook user-prompt-submit`): hybrid, fenced, within the budget; `text` is null when nothing qualifies. Notes what it shows as surfaced (a write token).",
            role: Some(Role::Read),
            every_project: false,
            raw_body: None,
            body: Some(schema::<PromptBody>),
            query: None,
            answer: (
                JSON,
                "{\"text\": string | null, \"ids\": [record ids shown]}",
            ),
            route: post(user_prompt_submit),
        },
        Endpoint {
            method: "post",
            path: "/v1/hooks/session-start",
            summary: "The session-start hook's brief (`cairn hook session-start`); notes the session's start and what the brief shows (a write token).",
            role: Some(Role::Read),
            every_project: false,
            raw_body: None,
            body: Some(schema::<SessionStartBody>),
            query: None,
            answer: (JSON, "{\"text\": the brief's text}"),
            route: post(session_start),
        },
        Endpoint {
            method: "get",
            path: "/v1/hooks/capture",
            summary: "Where the next capture of a session's transcript starts (the Stop, PreCompact and SessionEnd hooks of a client whose transcript is on its own machine).",
            role: Some(Role::Write),
            every_project: false,
            raw_body: None,
            body: None,
            query: Some(schema::<CaptureQuery>),
            answer: (
                JSON,
                "{\"session\", \"transcript\", \"offset\": bytes already captured}",
            ),
            route: axum::routing::get(capture_offset),
        },
        Endpoint {
            method: "post",
            path: "/v1/hooks/capture",
            summary: "Capture whole lines of a session's transcript sent from the client, starting at the offset `GET` answered: one transaction; another offset is 409 naming the stored one.",
            role: Some(Role::Write),
            every_project: false,
            raw_body: None,
            body: Some(schema::<CaptureBody>),
            query: None,
            answer: (
                JSON,
                "the capture report (turns, episodes_added, inbox_added, offset_before, offset_after, more)",
            ),
            route: post(capture),
        },
        Endpoint {
            method: "post",
            path: "/v1/hooks/turn",
            summary: "Capture one turn a client hands over directly (Gemini AfterAgent, Cursor afterAgentResponse).",
            role: Some(Role::Write),
            every_project: false,
            raw_body: None,
            body: Some(schema::<TurnBody>),
            query: None,
            answer: (JSON, "the capture report"),
            route: post(turn),
        },
        Endpoint {
            method: "post",
            path: "/v1/hooks/session-end",
            summary: "Note a session's end (the extraction a local session end starts is not started by the server: run `cairn extract` where the brain is).",
            role: Some(Role::Write),
            every_project: false,
            raw_body: None,
            body: Some(schema::<SessionEndBody>),
            query: None,
            answer: (JSON, "{\"status\": \"noted\", \"session\"}"),
            route: post(session_end),
        },
    ]
}
