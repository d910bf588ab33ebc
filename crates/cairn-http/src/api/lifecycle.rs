//! `/v1/decay`, `/v1/dream…`, `/v1/maintain` and `/v1/extract`: the lifecycle commands
//! (`cairn decay`, `decay --explain`, `dream`, `dream list|show|accept|reject`, `maintain`,
//! `maintain --status`, `extract`), each the engine call its CLI command makes, answering that
//! command's `--json`. Decay, dreams, the maintenance and the extraction look at every project
//! of the brain, so they need a token for every project; `decay --explain` of one record needs
//! only to see it. The maintenance and the extraction wait for the brain's LLM (run by the
//! server, as `dream` does): they run on an engine of their own, so other calls go on.

use super::{Endpoint, Input, NoQuery, Op, handle, item_not_found, record_id, visible};
use crate::App;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use cairn_engine::lifecycle::{
    AcceptReport, DecayExplanation, DecayReport, DreamOutcome, DreamView, EmbedStep,
    MaintainOptions, MaintainReport, StepState,
};
use cairn_engine::tokens::Role;
use cairn_engine::{Engine, ExtractReport};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `POST /v1/dream`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DreamBody {
    /// Apply the proposals right away (`cairn dream --accept`).
    #[serde(default)]
    pub accept: bool,
    /// Skip the LLM phases even when an LLM is configured (`--no-llm`). With an LLM, the
    /// server runs the brain's `llm.command` or calls `llm.url`, as the CLI would.
    #[serde(default)]
    pub no_llm: bool,
}

/// `GET /v1/dream`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DreamListQuery {
    /// Most sets, newest first (default 20; 0 all).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `POST /v1/dream/{dream}/accept`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DreamAcceptBody {
    /// Only these kinds: decay, merge, forget, summary, reflection (all when empty).
    #[serde(default)]
    pub only: Vec<String>,
}

/// `GET /v1/dream` (`cairn dream list --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct DreamListAnswer {
    /// Newest first, without their proposals.
    pub dreams: Vec<DreamView>,
}

/// `POST /v1/dream/{dream}/reject` (`cairn dream reject --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RejectedAnswer {
    /// `rejected`.
    pub status: &'static str,
    pub id: String,
}

/// `POST /v1/maintain`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaintainBody {
    /// The session that ended: its turns are extracted (`cairn maintain --session`); default:
    /// every captured session with turns not yet extracted.
    #[serde(default)]
    pub session: Option<String>,
}

/// `POST /v1/extract`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractBody {
    /// Only this session (`cairn extract --session`); default: every captured session with
    /// turns not yet extracted.
    #[serde(default)]
    pub session: Option<String>,
    /// Rules only, even when an LLM is configured (`--no-llm`).
    #[serde(default)]
    pub no_llm: bool,
}

/// `GET /v1/maintain` (`cairn maintain --status --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct MaintainStatusAnswer {
    pub steps: Vec<StepState>,
}

/// What a maintenance run on this server may do: the brain's settings as the server's
/// environment overrides them; the embedding is the background indexer's.
pub(crate) fn maintain_options(engine: &Engine) -> Result<MaintainOptions, Problem> {
    Ok(engine.maintain_options(&env, EmbedStep::Indexer)?)
}

/// A session id as a body names it: not empty (the field named).
fn session_of(session: Option<String>) -> Result<Option<String>, Problem> {
    match session {
        Some(session) if session.trim().is_empty() => Err(Problem::bad_request(
            "`session` is empty: give the client's session id, or leave it out for every captured session; nothing was done",
        )
        .with("field", serde_json::json!("session"))),
        other => Ok(other),
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// 404 for a dream id this brain does not have (before the engine's own 400 wording).
pub(crate) fn known_dream(engine: &Engine, id: &str) -> Result<(), Problem> {
    if engine.dream_list(0)?.iter().any(|dream| dream.id == id) {
        Ok(())
    } else {
        Err(item_not_found("dream", format!("{id:?}"), "/v1/dream"))
    }
}

async fn decay_plan(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("decay --dry-run").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.decay(true)?),
    )
    .await
}

async fn decay(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("decay").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.decay(false)?),
    )
    .await
}

async fn decay_explain(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("decay --explain"),
        Input::Nothing,
        move |engine, caller, _: NoQuery| {
            let id = record_id(&id)?;
            visible(engine, caller, id)?;
            Ok(engine.decay_explain(id)?)
        },
    )
    .await
}

async fn dream(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("dream").whole_brain(),
        Input::Body(body),
        |engine, _, args: DreamBody| {
            let mut options = engine.dream_options(&env, args.no_llm)?;
            options.accept = args.accept;
            Ok(engine.dream(&options)?)
        },
    )
    .await
}

async fn dream_list(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("dream list").whole_brain(),
        Input::Query(query),
        |engine, _, args: DreamListQuery| {
            Ok(DreamListAnswer {
                dreams: engine.dream_list(args.limit.unwrap_or(20))?,
            })
        },
    )
    .await
}

async fn dream_show(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("dream show").whole_brain(),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            known_dream(engine, &id)?;
            Ok(engine.dream_show(&id)?)
        },
    )
    .await
}

async fn dream_accept(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("dream accept").whole_brain(),
        Input::Body(body),
        move |engine, _, args: DreamAcceptBody| {
            known_dream(engine, &id)?;
            Ok(engine.dream_accept(&id, &args.only)?)
        },
    )
    .await
}

async fn dream_reject(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("dream reject").whole_brain(),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            known_dream(engine, &id)?;
            let view = engine.dream_reject(&id)?;
            Ok(RejectedAnswer {
                status: "rejected",
                id: view.id,
            })
        },
    )
    .await
}

async fn maintain(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("maintain").whole_brain().alone(),
        Input::Body(body),
        |engine, _, args: MaintainBody| {
            let session = session_of(args.session)?;
            let options = maintain_options(engine)?;
            Ok(engine.maintain(&options, session.as_deref())?)
        },
    )
    .await
}

async fn maintain_status(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("maintain --status").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| {
            let options = maintain_options(engine)?;
            Ok(MaintainStatusAnswer {
                steps: engine.maintenance_status(&options)?,
            })
        },
    )
    .await
}

async fn extract(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("extract").whole_brain().alone(),
        Input::Body(body),
        |engine, _, args: ExtractBody| {
            let session = session_of(args.session)?;
            let options = engine.extract_options(&env, session, args.no_llm)?;
            Ok(engine.extract(&options)?)
        },
    )
    .await
}

pub fn endpoints() -> Vec<Endpoint> {
    let read = Some(Role::Read);
    let write = Some(Role::Write);
    vec![
        Endpoint::new(
            "get",
            "/v1/decay",
            read,
            "What decay would change now, changing nothing (`cairn decay --dry-run`).",
            get(decay_plan),
        )
        .every_project()
        .answers::<DecayReport>("the JSON of `cairn decay --dry-run --json`"),
        Endpoint::new(
            "post",
            "/v1/decay",
            write,
            "Apply decay: archive expired records, demote and archive unused ones (`cairn decay`).",
            post(decay),
        )
        .every_project()
        .answers::<DecayReport>("the JSON of `cairn decay --json`"),
        Endpoint::new(
            "get",
            "/v1/records/{id}/decay",
            read,
            "What decay did to a record and why, and what it would do now (`cairn decay --explain ID`).",
            get(decay_explain),
        )
        .answers::<DecayExplanation>("the JSON of `cairn decay --explain ID --json`"),
        Endpoint::new(
            "post",
            "/v1/dream",
            write,
            "Consolidate on a snapshot: one proposal set of decay, merges, forgetting, summaries (`cairn dream`).",
            post(dream),
        )
        .every_project()
        .body::<DreamBody>()
        .answers::<DreamOutcome>("the JSON of `cairn dream --json`"),
        Endpoint::new(
            "get",
            "/v1/dream",
            read,
            "Proposal sets, newest first (`cairn dream list`).",
            get(dream_list),
        )
        .every_project()
        .query::<DreamListQuery>()
        .answers::<DreamListAnswer>("the JSON of `cairn dream list --json`"),
        Endpoint::new(
            "get",
            "/v1/dream/{dream}",
            read,
            "One proposal set with every proposal (`cairn dream show`).",
            get(dream_show),
        )
        .every_project()
        .answers::<DreamView>("the JSON of `cairn dream show --json`"),
        Endpoint::new(
            "post",
            "/v1/dream/{dream}/accept",
            write,
            "Apply a proposal set, or only some kinds (`cairn dream accept`).",
            post(dream_accept),
        )
        .every_project()
        .body::<DreamAcceptBody>()
        .answers::<AcceptReport>("the JSON of `cairn dream accept --json`"),
        Endpoint::new(
            "post",
            "/v1/dream/{dream}/reject",
            write,
            "Close a proposal set without applying anything (`cairn dream reject`).",
            post(dream_reject),
        )
        .every_project()
        .answers::<RejectedAnswer>("the JSON of `cairn dream reject --json`"),
        Endpoint::new(
            "post",
            "/v1/maintain",
            write,
            "Run the maintenance that is due — extraction, decay, an unattended dream; the background indexer embeds (`cairn maintain`). Waits for the run, one at a time per brain (`busy` otherwise).",
            post(maintain),
        )
        .every_project()
        .body::<MaintainBody>()
        .answers::<MaintainReport>("the JSON of `cairn maintain --json`"),
        Endpoint::new(
            "get",
            "/v1/maintain",
            read,
            "Each maintenance step's last run and when it is due next (`cairn maintain --status`).",
            get(maintain_status),
        )
        .every_project()
        .answers::<MaintainStatusAnswer>("the JSON of `cairn maintain --status --json`"),
        Endpoint::new(
            "post",
            "/v1/extract",
            write,
            "Turn captured session turns into candidate records, with the brain's LLM (run by the server) or by rules (`cairn extract`).",
            post(extract),
        )
        .every_project()
        .body::<ExtractBody>()
        .answers::<ExtractReport>("the JSON of `cairn extract --json`"),
    ]
}
