//! The `/v1` endpoints. Each one is an [`Endpoint`]: its route, the role it needs, the schema of
//! its body and query, and its handler; the router and `/openapi.json` are both built from the
//! one list ([`endpoints`]), so the document cannot drift from what is served.
//!
//! Answers have the JSON shapes `cairn … --json` prints (docs/cli.md), described in
//! `/openapi.json` by the JSON Schema of the type the handler serializes; errors are problem
//! documents (`problem.rs`). Every handler has one shape, [`handle`]: authenticate first
//! (`auth::authorize`, on a blocking thread: it reads the brain) and check the role, then read
//! the arguments, then run the engine call on a blocking thread through the service. The
//! records endpoints are here; the agent surfaces, the graph, the lifecycle and the agent
//! hooks' work (`/v1/hooks/…`) are in `api/agent.rs`, `api/graph.rs`, `api/lifecycle.rs` and
//! `api/hooks.rs`.

use crate::App;
use crate::auth::{Caller, authorize};
use crate::body;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, patch, post};
use cairn_core::brief::SectionKind;
use cairn_core::memory::Memory;
use cairn_core::record::{Confidence, MemoryType, Sensitivity, Status, TrustZone};
use cairn_engine::exchange::ImportOptions;
use cairn_engine::tokens::Role;
use cairn_engine::{
    BriefRequest, Engine, EngineError, ErrorKind, ListRequest, Mode, RecallRequest,
    RememberOutcome, RememberRequest, RememberStatus, Review, UpdateRequest,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub(crate) mod admin;
pub(crate) mod agent;
pub(crate) mod graph;
mod hooks;
pub(crate) mod lifecycle;

/// One route of the API, with what `/openapi.json` says about it. Built with [`Endpoint::new`]
/// and the methods after it.
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    /// The role a token needs; `None`: no token needed.
    pub role: Option<Role>,
    /// Only a token for every project may call it (it covers the whole brain).
    pub every_project: bool,
    pub body: Option<fn() -> Value>,
    /// A body that is not JSON: its media type.
    pub raw_body: Option<&'static str>,
    pub query: Option<fn() -> Value>,
    /// What a success answers (media type, and which `--json` shape).
    pub answer: (&'static str, &'static str),
    /// The JSON Schema of a success, from the type the handler serializes.
    pub answer_schema: Option<fn() -> Value>,
    pub route: MethodRouter<App>,
}

impl Endpoint {
    /// An endpoint answering JSON, with no body and no query parameters.
    pub fn new(
        method: &'static str,
        path: &'static str,
        role: Option<Role>,
        summary: &'static str,
        route: MethodRouter<App>,
    ) -> Endpoint {
        Endpoint {
            method,
            path,
            summary,
            role,
            every_project: false,
            body: None,
            raw_body: None,
            query: None,
            answer: (JSON, "a JSON answer"),
            answer_schema: None,
            route,
        }
    }

    /// Its JSON body is a `T`.
    pub fn body<T: JsonSchema>(mut self) -> Endpoint {
        self.body = Some(schema::<T>);
        self
    }

    /// Its body is not JSON but `media`.
    pub fn raw_body(mut self, media: &'static str) -> Endpoint {
        self.raw_body = Some(media);
        self
    }

    /// Its query parameters are the fields of `T`.
    pub fn query<T: JsonSchema>(mut self) -> Endpoint {
        self.query = Some(schema::<T>);
        self
    }

    /// Only a token for every project may call it.
    pub fn every_project(mut self) -> Endpoint {
        self.every_project = true;
        self
    }

    /// A success answers a `T` as JSON: `what` says which `--json` shape.
    pub fn answers<T: JsonSchema>(mut self, what: &'static str) -> Endpoint {
        self.answer = (JSON, what);
        self.answer_schema = Some(answer_schema::<T>);
        self
    }

    /// A success answers `media`, described in words only.
    pub fn answers_text(mut self, media: &'static str, what: &'static str) -> Endpoint {
        self.answer = (media, what);
        self.answer_schema = None;
        self
    }
}

/// The JSON Schema of a request type (what the server parses).
fn schema<T: JsonSchema>() -> Value {
    root_schema::<T>(schemars::generate::SchemaSettings::draft2020_12().for_deserialize())
}

/// The JSON Schema of an answer type (what the server serializes).
fn answer_schema<T: JsonSchema>() -> Value {
    root_schema::<T>(schemars::generate::SchemaSettings::draft2020_12().for_serialize())
}

/// `T`'s schema with its subschemas inline and without `$schema` (the document's dialect
/// says it).
fn root_schema<T: JsonSchema>(settings: schemars::generate::SchemaSettings) -> Value {
    let mut value = settings
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    value
}

const JSON: &str = "application/json";

// ---- helpers ------------------------------------------------------------------------------

/// Authenticates on a blocking thread.
pub(crate) async fn caller(
    app: &App,
    headers: &HeaderMap,
    needed: Role,
    operation: &'static str,
) -> Result<Caller, Problem> {
    let app = app.clone();
    let headers = headers.clone();
    blocking(move || authorize(&app, &headers, needed, operation)).await
}

/// Runs blocking work (an engine call) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    match tokio::task::spawn_blocking(work).await {
        Ok(answer) => answer,
        Err(_) => Err(Problem::from_kind(
            ErrorKind::Other,
            "the request failed unexpectedly (an internal error, logged on stderr); nothing is known to have changed — try again",
        )),
    }
}

pub(crate) fn ok<T: Serialize>(value: &T) -> Result<Response, Problem> {
    let text = serde_json::to_string(value).map_err(|e| {
        Problem::from_kind(
            ErrorKind::Other,
            format!("the answer did not serialize: {e}"),
        )
    })?;
    let mut response = (StatusCode::OK, text).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    Ok(response)
}

/// Runs `work` on the engine as `caller`.
fn call<T>(
    app: &App,
    caller: &Caller,
    operation: &str,
    work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
) -> Result<T, Problem> {
    app.service
        .call(&caller.request, operation, work)
        .map_err(|e| Problem::from_engine(&e))
}

/// How a handler's arguments arrive.
pub(crate) enum Input {
    /// A JSON body (an empty one is `{}`).
    Body(Body),
    /// The query string.
    Query(Option<String>),
    /// Nothing: the arguments are `{}`.
    Nothing,
}

/// What a call is, for the token check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub needed: Role,
    /// The operation, as a refusal names it.
    pub name: &'static str,
    /// It covers the whole brain: a token for every project only.
    pub whole_brain: bool,
    /// It runs on an engine of its own ([`cairn_service::Service::call_alone`]): long work
    /// (an LLM's minutes) that must not hold every other call up.
    pub alone: bool,
}

impl Op {
    pub const fn read(name: &'static str) -> Op {
        Op {
            needed: Role::Read,
            name,
            whole_brain: false,
            alone: false,
        }
    }

    pub const fn write(name: &'static str) -> Op {
        Op {
            needed: Role::Write,
            name,
            whole_brain: false,
            alone: false,
        }
    }

    pub const fn admin(name: &'static str) -> Op {
        Op {
            needed: Role::Admin,
            name,
            whole_brain: false,
            alone: false,
        }
    }

    pub const fn alone(self) -> Op {
        Op {
            alone: true,
            ..self
        }
    }

    pub const fn whole_brain(self) -> Op {
        Op {
            whole_brain: true,
            ..self
        }
    }
}

/// The shape of almost every handler, once: the token checked for `op` (before anything of
/// the request is looked at), the arguments parsed as an `A` (the failing field named), then
/// `work` on the engine on a blocking thread, its answer serialized as JSON.
pub(crate) async fn handle<A, T>(
    app: App,
    headers: HeaderMap,
    op: Op,
    input: Input,
    work: impl FnOnce(&mut Engine, &Caller, A) -> Result<T, Problem> + Send + 'static,
) -> Result<Response, Problem>
where
    A: DeserializeOwned + Send + 'static,
    T: Serialize,
{
    let caller = caller(&app, &headers, op.needed, op.name).await?;
    if op.whole_brain {
        whole_brain(&caller, op.name)?;
    }
    let args: A = match input {
        Input::Body(body) => body::json(&body::bytes(&app, &headers, body).await?)?,
        Input::Query(query) => body::query(query.as_deref())?,
        Input::Nothing => body::json(b"")?,
    };
    blocking(move || {
        let answer = if op.alone {
            on_engine_alone(&app, &caller, op.name, |engine| work(engine, &caller, args))?
        } else {
            on_engine(&app, &caller, op.name, |engine| work(engine, &caller, args))?
        };
        ok(&answer)
    })
    .await
}

/// Runs `work` on the engine as `caller`; its own refusals (problems) pass through.
pub(crate) fn on_engine<T>(
    app: &App,
    caller: &Caller,
    operation: &str,
    work: impl FnOnce(&mut Engine) -> Result<T, Problem>,
) -> Result<T, Problem> {
    app.service
        .call(&caller.request, operation, |engine| Ok(work(engine)))
        .map_err(|e| Problem::from_engine(&e))?
}

/// [`on_engine`] on an engine of its own ([`Op::alone`]).
pub(crate) fn on_engine_alone<T>(
    app: &App,
    caller: &Caller,
    operation: &str,
    work: impl FnOnce(&mut Engine) -> Result<T, Problem>,
) -> Result<T, Problem> {
    app.service
        .call_alone(&caller.request, operation, |engine| Ok(work(engine)))
        .map_err(|e| Problem::from_engine(&e))?
}

/// A `remember` outcome as an answer: a refusal is a 409 carrying the outcome.
pub(crate) fn remembered(outcome: RememberOutcome) -> Result<RememberOutcome, Problem> {
    if outcome.status == RememberStatus::Refused {
        let value = serde_json::to_value(&outcome).unwrap_or(Value::Null);
        return Err(
            Problem::from_kind(ErrorKind::Refused, outcome.message.clone())
                .with("existing", json!(outcome.existing))
                .with("outcome", value),
        );
    }
    Ok(outcome)
}

/// The token's role allows `needed` for this particular call (checked once the arguments say
/// what the call is, e.g. a hard delete).
pub(crate) fn require(caller: &Caller, needed: Role, operation: &str) -> Result<(), Problem> {
    if caller.grant.role.allows(needed) {
        return Ok(());
    }
    Err(Problem::from_engine(&EngineError::Forbidden {
        role: caller.grant.role.as_str(),
        operation: operation.to_string(),
        needed: needed.as_str(),
    }))
}

/// 404 for an item (task, inbox item, dream) that is missing or that the token may not see:
/// the same answer for both.
pub(crate) fn item_not_found(what: &str, id: impl std::fmt::Display, listed_at: &str) -> Problem {
    Problem::from_kind(
        ErrorKind::NotFound,
        format!("no {what} {id} here; nothing was done — `GET {listed_at}` lists them"),
    )
}

/// The record `id`, or not-found when it is missing or the caller may not see it (the same
/// answer for both).
pub(crate) fn visible(engine: &Engine, caller: &Caller, id: i64) -> Result<Memory, EngineError> {
    let memory = engine.get(id)?;
    if caller.sees(memory.project.as_deref()) {
        Ok(memory)
    } else {
        Err(EngineError::NotFound { id })
    }
}

fn record_id(text: &str) -> Result<i64, Problem> {
    text.trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| {
            Problem::bad_request(format!(
                "`{text}` is not a record id (a positive number, as in #42); nothing was done"
            ))
            .with("field", json!("id"))
        })
}

pub(crate) fn whole_brain(caller: &Caller, what: &str) -> Result<(), Problem> {
    if caller.every_project() {
        return Ok(());
    }
    Err(Problem::from_engine(&EngineError::Forbidden {
        role: caller.grant.role.as_str(),
        operation: format!("{what} (it covers every project of the brain)"),
        needed: "token for every project (`cairn token create --all`), with the same",
    }))
}

fn parse_types(types: &[String]) -> Result<Vec<MemoryType>, EngineError> {
    types
        .iter()
        .map(|t| t.parse::<MemoryType>().map_err(EngineError::from))
        .collect()
}

// ---- request bodies -----------------------------------------------------------------------

/// `POST /v1/remember`: the fields of `cairn remember`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberBody {
    /// policy, constraint, preference, decision, incident, fact, procedure, gotcha, infra,
    /// access, note, episode or state.
    #[serde(rename = "type")]
    pub memory_type: String,
    /// The text to remember (≤ 64 KiB); secrets are redacted before storage.
    pub body: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    /// Scope path nesting on `:` (default `global`).
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// 1 (trivia) to 5 (critical); default 3.
    #[serde(default)]
    pub importance: Option<u8>,
    /// confirmed (needs `source`), reported (default) or inferred.
    #[serde(default)]
    pub confidence: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    /// The id of the record this one replaces (`cairn remember --supersedes`).
    #[serde(default)]
    pub supersedes: Option<i64>,
    #[serde(default)]
    pub fork_ok: bool,
    #[serde(default)]
    pub allow_duplicate: bool,
    #[serde(default)]
    pub pinned: bool,
    #[serde(default)]
    pub trust_zone: Option<String>,
    /// public_safe, normal (default) or do_not_export.
    #[serde(default)]
    pub sensitivity: Option<String>,
    /// When to review it (date or RFC 3339); `no_review` for never.
    #[serde(default)]
    pub review: Option<String>,
    #[serde(default)]
    pub no_review: bool,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub external_id: Option<String>,
    /// When it happened (RFC 3339); now when absent.
    #[serde(default)]
    pub at: Option<String>,
    /// File under no project: visible from every project.
    #[serde(default)]
    pub personal: bool,
}

impl RememberBody {
    fn request(self) -> Result<RememberRequest, EngineError> {
        let mut request = RememberRequest::new(self.memory_type.parse::<MemoryType>()?, self.body);
        request.title = self.title;
        request.summary = self.summary;
        request.scope = self.scope;
        request.tags = self.tags;
        request.importance = self.importance;
        request.confidence = self
            .confidence
            .as_deref()
            .map(str::parse::<Confidence>)
            .transpose()?;
        request.source = self.source;
        request.supersedes = self.supersedes;
        request.fork_ok = self.fork_ok;
        request.allow_duplicate = self.allow_duplicate;
        request.pinned = self.pinned;
        request.trust_zone = self
            .trust_zone
            .as_deref()
            .map(str::parse::<TrustZone>)
            .transpose()?;
        request.sensitivity = self
            .sensitivity
            .as_deref()
            .map(str::parse::<Sensitivity>)
            .transpose()?;
        request.review = match (self.review, self.no_review) {
            (_, true) => Review::Never,
            (Some(at), false) => Review::At(at),
            (None, false) => Review::Default,
        };
        request.expires_at = self.expires_at;
        request.external_id = self.external_id;
        request.at = self.at;
        request.personal = self.personal;
        Ok(request)
    }
}

/// `POST /v1/recall`: the options of `cairn recall`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBody {
    /// What to look for, in plain words.
    pub query: String,
    /// Most results (default 10, at most 200).
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub scope: Option<String>,
    /// Only these types.
    #[serde(default, rename = "type")]
    pub types: Vec<String>,
    /// Include superseded and archived versions instead of following them forward.
    #[serde(default)]
    pub all: bool,
    /// Do not record the access.
    #[serde(default)]
    pub no_touch: bool,
    #[serde(default)]
    pub as_of: Option<String>,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub until: Option<String>,
    /// hybrid (default), lexical or semantic. Meaning needs the model, loaded in the
    /// background when the server starts; until then the answer is lexical and says so.
    #[serde(default)]
    pub mode: Option<String>,
    /// Relevance floor relative to the best match (0 keeps every match).
    #[serde(default)]
    pub floor: Option<f64>,
    /// Answer as a reader in this trust zone sees it.
    #[serde(default)]
    pub zone: Option<String>,
}

impl RecallBody {
    pub(crate) fn request(self) -> Result<RecallRequest, EngineError> {
        let mut request = RecallRequest::new(self.query);
        request.limit = self.limit.unwrap_or(10).clamp(1, 200);
        request.scope = self.scope;
        request.types = parse_types(&self.types)?;
        request.all = self.all;
        request.touch = !self.no_touch;
        request.as_of = self.as_of;
        request.since = self.since;
        request.until = self.until;
        request.mode = match &self.mode {
            Some(mode) => mode.parse::<Mode>()?,
            None => Mode::Hybrid,
        };
        request.floor = self.floor;
        request.zone = self
            .zone
            .as_deref()
            .map(str::parse::<TrustZone>)
            .transpose()?;
        // Never wait for a model inside a request: meaning is used once it is resident.
        request.fast = true;
        Ok(request)
    }
}

/// `POST /v1/recall/batch`: several queries, answered in order.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallBatchBody {
    /// At most 100 queries.
    pub queries: Vec<RecallBody>,
}

/// `GET /v1/records/{id}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    /// Include every earlier version.
    #[serde(default)]
    pub history: bool,
}

/// `PATCH /v1/records/{id}`: the fields of `cairn update` (absent: unchanged).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBody {
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    pub importance: Option<u8>,
    #[serde(default)]
    pub confidence: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default, rename = "type")]
    pub memory_type: Option<String>,
    #[serde(default)]
    pub pinned: Option<bool>,
    #[serde(default)]
    pub review: Option<String>,
    #[serde(default)]
    pub expires: Option<String>,
}

impl UpdateBody {
    pub(crate) fn request(self) -> Result<UpdateRequest, EngineError> {
        Ok(UpdateRequest {
            title: self.title,
            body: self.body,
            summary: self.summary,
            tags: self.tags,
            importance: self.importance,
            confidence: self
                .confidence
                .as_deref()
                .map(str::parse::<Confidence>)
                .transpose()?,
            source: self.source,
            memory_type: self
                .memory_type
                .as_deref()
                .map(str::parse::<MemoryType>)
                .transpose()?,
            pinned: self.pinned,
            review_at: self.review,
            expires_at: self.expires,
        })
    }
}

/// `DELETE /v1/records/{id}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetQuery {
    /// Delete for good (its history keeps the last version); needs the admin role.
    #[serde(default)]
    pub hard: bool,
}

/// `POST /v1/records/{id}/verify`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyBody {
    /// Where it was checked: URL, file:line, "checked by hand".
    pub source: String,
}

/// `GET /v1/records`: the filters of `cairn list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Comma-separated types.
    #[serde(default, rename = "type")]
    pub types: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// Most records (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Every project, not only this one and personal (a token for every project only).
    #[serde(default)]
    pub all_projects: bool,
}

/// The client's working tree, as `git status --porcelain=v1 --branch` shows it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkingTreeBody {
    pub branch: String,
    /// `XY path` lines.
    #[serde(default)]
    pub changed: Vec<String>,
}

/// `POST /v1/brief`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BriefBody {
    /// Byte budget (default 6,000; 0 = no limit).
    #[serde(default)]
    pub budget: Option<usize>,
    /// Only these sections, in full.
    #[serde(default)]
    pub sections: Vec<String>,
    /// The client's working tree (the server never runs git in its own directory).
    #[serde(default)]
    pub working_tree: Option<WorkingTreeBody>,
}

/// No query parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoQuery {}

// ---- answers that are not an engine struct -------------------------------------------------

/// `PATCH /v1/records/{id}` (`cairn update --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct UpdatedAnswer {
    /// `updated`.
    pub status: &'static str,
    pub id: i64,
    /// Kinds of secret redacted from the new text.
    pub redacted: Vec<&'static str>,
    /// The record after the change.
    pub record: Memory,
    pub warnings: Vec<String>,
}

/// `GET /v1/records/{id}` (`cairn show --json`): the record and what `show` adds to it. The
/// answer is built by `Engine::show_document` (one builder for the CLI and the server); this
/// type describes it for `/openapi.json`.
#[derive(Debug, JsonSchema)]
#[allow(dead_code)]
pub struct ShowAnswer {
    #[serde(flatten)]
    pub record: Memory,
    /// The record a dream merged this one into, while it stays merged away.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<i64>,
    /// When the record was last handed to an agent (brief, prompt hook).
    pub surfaced_at: Option<String>,
    /// With `history=true`: every earlier version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<cairn_store::HistoryRow>>,
    /// Open conflicts involving the record.
    pub conflicts: Vec<cairn_store::ConflictRow>,
}

/// `DELETE /v1/records/{id}` (`cairn forget --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ForgottenAnswer {
    /// `archived`, or `deleted` with `hard`.
    pub status: &'static str,
    pub id: i64,
}

/// `POST /v1/records/{id}/restore` (`cairn restore --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RestoredAnswer {
    /// `restored`.
    pub status: &'static str,
    pub id: i64,
    /// The record's status afterwards.
    pub record_status: Status,
}

/// `POST /v1/records/{id}/verify` (`cairn verify --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct VerifiedAnswer {
    /// `verified`.
    pub status: &'static str,
    pub id: i64,
    pub review_at: Option<String>,
}

/// One answer of `POST /v1/recall/batch`: the recall, or why this query failed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum BatchItem {
    Answer(Box<cairn_engine::RecallAnswer>),
    Error {
        /// `error`.
        status: &'static str,
        error: String,
    },
}

/// `POST /v1/recall/batch`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BatchAnswer {
    /// One per query, in order.
    pub answers: Vec<BatchItem>,
}

// ---- handlers -----------------------------------------------------------------------------

async fn remember(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // `handle`'s shape, with the remember committed by the service together with the others
    // queued beside it (group commit).
    let op = Op::write("remember");
    let caller = caller(&app, &headers, op.needed, op.name).await?;
    let args: RememberBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let request = args.request()?;
        if let Some(old) = request.supersedes {
            app.service.read(&caller.request, op.name, |engine| {
                visible(engine, &caller, old)
            })?;
        }
        ok(&remembered(
            app.service.remember(&caller.request, request)?,
        )?)
    })
    .await
}

async fn recall(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // `handle`'s shape, with the recall routed by the service: a lexical one runs on a reader
    // engine, beside writes and other recalls.
    let op = Op::read("recall");
    let caller = caller(&app, &headers, op.needed, op.name).await?;
    let args: RecallBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let request = args.request()?;
        ok(&app.service.recall(&caller.request, &request)?)
    })
    .await
}

async fn recall_batch(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("recall"),
        Input::Body(body),
        |engine, _, args: RecallBatchBody| {
            if args.queries.len() > 100 {
                return Err(Problem::bad_request(format!(
                    "{} queries in one batch, over the limit of 100; nothing was done — split the batch",
                    args.queries.len()
                ))
                .with("field", json!("queries")));
            }
            let answers = args
                .queries
                .into_iter()
                .map(|query| {
                    match query
                        .request()
                        .and_then(|request| engine.recall(&request))
                    {
                        Ok(answer) => BatchItem::Answer(Box::new(answer)),
                        Err(error) => BatchItem::Error {
                            status: "error",
                            error: error.to_string(),
                        },
                    }
                })
                .collect();
            Ok(BatchAnswer { answers })
        },
    )
    .await
}

async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("show"),
        Input::Query(query),
        move |engine, caller, args: ShowQuery| {
            let id = record_id(&id)?;
            visible(engine, caller, id)?;
            Ok(engine.show_document(id, args.history)?)
        },
    )
    .await
}

async fn update(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("update"),
        Input::Body(body),
        move |engine, caller, args: UpdateBody| {
            update_record(engine, caller, record_id(&id)?, args)
        },
    )
    .await
}

async fn forget(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("forget"),
        Input::Query(query),
        move |engine, caller, args: ForgetQuery| {
            forget_record(engine, caller, record_id(&id)?, args.hard)
        },
    )
    .await
}

async fn restore(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("restore"),
        Input::Nothing,
        move |engine, caller, _: NoQuery| restore_record(engine, caller, record_id(&id)?),
    )
    .await
}

async fn verify(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("verify"),
        Input::Body(body),
        move |engine, caller, args: VerifyBody| {
            verify_record(engine, caller, record_id(&id)?, &args.source)
        },
    )
    .await
}

/// `POST /v1/records/{id}/supersede`: the new text of a claim that changed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SupersedeBody {
    /// The current text of the claim.
    pub body: String,
    /// Default: the old record's title.
    #[serde(default)]
    pub title: Option<String>,
    /// Type of the new record (default: the old record's type).
    #[serde(default, rename = "type")]
    pub memory_type: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    /// Allow a second successor of a record that was already superseded (forks the chain).
    #[serde(default)]
    pub fork_ok: bool,
}

async fn supersede(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("supersede"),
        Input::Body(body),
        move |engine, caller, args: SupersedeBody| {
            supersede_record(engine, caller, record_id(&id)?, args)
        },
    )
    .await
}

async fn list(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("list"),
        Input::Query(query),
        |engine, caller, args: ListQuery| {
            if args.all_projects {
                whole_brain(caller, "list all_projects")?;
            }
            let types = match &args.types {
                Some(types) => parse_types(
                    &types
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                )?,
                None => Vec::new(),
            };
            let status = args
                .status
                .as_deref()
                .map(str::parse::<Status>)
                .transpose()
                .map_err(EngineError::from)?;
            let request = ListRequest {
                types,
                scope: args.scope,
                status,
                limit: args.limit.unwrap_or(50),
                all_projects: args.all_projects,
            };
            Ok(engine.list(&request)?)
        },
    )
    .await
}

async fn brief(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // Not through `handle`: the body changes the request's context (the working tree).
    let mut caller = caller(&app, &headers, Role::Read, "brief").await?;
    let args: BriefBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    let mut sections = Vec::new();
    for (index, name) in args.sections.iter().enumerate() {
        let kind = SectionKind::parse(name).ok_or_else(|| {
            Problem::bad_request(format!(
                "field `sections[{index}]` is refused: unknown section {name:?}; nothing was done"
            ))
            .with("field", json!(format!("sections[{index}]")))
        })?;
        sections.push(kind);
    }
    if let (Some(tree), cairn_engine::GitSource::Supplied(facts)) =
        (args.working_tree, &mut caller.request.git)
    {
        facts.working_tree = Some(cairn_engine::git::WorkingTree {
            branch: tree.branch,
            changed: tree.changed,
        });
    }
    blocking(move || {
        let request = BriefRequest {
            budget: args.budget.unwrap_or(cairn_engine::DEFAULT_BRIEF_BUDGET),
            sections,
        };
        // What the brief shows is handed to an agent: marked surfaced, as `cairn brief` and
        // MCP's `brief` mark it — except for a read-only token, whose calls write nothing
        // (MCP over HTTP makes the same cut).
        let marks = caller.grant.role.allows(Role::Write);
        let brief = on_engine(&app, &caller, "brief", |engine| {
            Ok(if marks {
                engine.brief_for_agent(&request)?
            } else {
                engine.brief(&request)?
            })
        })?;
        ok(&brief)
    })
    .await
}

/// A call that covers the whole brain, answered as JSON: the token checked for `role` and for
/// every project.
async fn whole_brain_json<T: Serialize + 'static>(
    app: App,
    headers: HeaderMap,
    role: Role,
    operation: &'static str,
    work: impl FnOnce(&mut Engine) -> Result<T, EngineError> + Send + 'static,
) -> Result<Response, Problem> {
    let op = Op {
        needed: role,
        name: operation,
        whole_brain: true,
        alone: false,
    };
    handle(app, headers, op, Input::Nothing, |engine, _, _: NoQuery| {
        Ok(work(engine)?)
    })
    .await
}

async fn stats(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, headers, Role::Read, "stats", |engine| engine.stats()).await
}

async fn doctor(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, headers, Role::Read, "doctor", |engine| {
        engine.doctor(false)
    })
    .await
}

async fn doctor_repair(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, headers, Role::Admin, "doctor --repair", |engine| {
        engine.doctor(true)
    })
    .await
}

async fn export(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "export").await?;
    whole_brain(&caller, "export")?;
    blocking(move || {
        let mut out = Vec::new();
        call(&app, &caller, "export", |engine| {
            engine.export_jsonl(&mut out)
        })?;
        let mut response = (StatusCode::OK, out).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        );
        Ok(response)
    })
    .await
}

async fn import(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "import").await?;
    whole_brain(&caller, "import")?;
    let bytes = body::bytes(&app, &headers, body).await?;
    blocking(move || {
        let report = call(&app, &caller, "import", |engine| {
            engine.import_jsonl(&mut bytes.as_slice(), &ImportOptions::default())
        })?;
        ok(&report)
    })
    .await
}

// ---- the record changes, shared by the handlers above and the web UI ----------------------

/// `cairn update` of record `id` (after the caller's write role was checked).
pub(crate) fn update_record(
    engine: &mut Engine,
    caller: &Caller,
    id: i64,
    args: UpdateBody,
) -> Result<UpdatedAnswer, Problem> {
    let request = args.request()?;
    visible(engine, caller, id)?;
    let updated = engine.update_with_warnings(id, &request)?;
    Ok(UpdatedAnswer {
        status: "updated",
        id: updated.memory.id,
        redacted: updated.redacted,
        record: updated.memory,
        warnings: updated.warnings,
    })
}

/// `cairn forget` of record `id`; `hard` needs the admin role.
pub(crate) fn forget_record(
    engine: &mut Engine,
    caller: &Caller,
    id: i64,
    hard: bool,
) -> Result<ForgottenAnswer, Problem> {
    if hard {
        require(caller, Role::Admin, "forget")?;
    }
    visible(engine, caller, id)?;
    let memory = engine.forget(id, hard)?;
    Ok(ForgottenAnswer {
        status: if hard { "deleted" } else { "archived" },
        id: memory.id,
    })
}

/// `cairn restore` of record `id`.
pub(crate) fn restore_record(
    engine: &mut Engine,
    caller: &Caller,
    id: i64,
) -> Result<RestoredAnswer, Problem> {
    visible(engine, caller, id)?;
    let memory = engine.restore(id)?;
    Ok(RestoredAnswer {
        status: "restored",
        id: memory.id,
        record_status: memory.status,
    })
}

/// `cairn verify` of record `id` against `source`.
pub(crate) fn verify_record(
    engine: &mut Engine,
    caller: &Caller,
    id: i64,
    source: &str,
) -> Result<VerifiedAnswer, Problem> {
    visible(engine, caller, id)?;
    let memory = engine.verify(id, source)?;
    Ok(VerifiedAnswer {
        status: "verified",
        id: memory.id,
        review_at: memory.review_at,
    })
}

/// `cairn remember --supersedes ID`: the new text of record `id`'s claim, in the old record's
/// scope and filing.
pub(crate) fn supersede_record(
    engine: &mut Engine,
    caller: &Caller,
    id: i64,
    args: SupersedeBody,
) -> Result<RememberOutcome, Problem> {
    let old = visible(engine, caller, id)?;
    let memory_type = match args.memory_type.as_deref() {
        Some(given) => given.parse::<MemoryType>().map_err(EngineError::from)?,
        None => old.memory_type,
    };
    let mut request = RememberRequest::new(memory_type, args.body);
    request.title = args.title.or(old.title.clone());
    request.scope = Some(old.scope.clone());
    request.personal = old.project.is_none();
    request.source = args.source;
    request.supersedes = Some(id);
    request.fork_ok = args.fork_ok;
    remembered(engine.remember(&request)?)
}

// ---- the list -----------------------------------------------------------------------------

/// Every endpoint of `/v1`, in the order `/openapi.json` lists them.
pub fn endpoints() -> Vec<Endpoint> {
    let write = Some(Role::Write);
    let read = Some(Role::Read);
    let mut endpoints = vec![
        Endpoint::new(
            "post",
            "/v1/remember",
            write,
            "Store one memory through the write path (`cairn remember`). A near duplicate is refused with 409 and the outcome.",
            post(remember),
        )
        .body::<RememberBody>()
        .answers::<RememberOutcome>("the JSON of `cairn remember --json`"),
        Endpoint::new(
            "post",
            "/v1/recall",
            read,
            "Ranked memories for a query (`cairn recall`).",
            post(recall),
        )
        .body::<RecallBody>()
        .answers::<cairn_engine::RecallAnswer>("the JSON of `cairn recall --json`"),
        Endpoint::new(
            "post",
            "/v1/recall/batch",
            read,
            "Several queries in one request (`cairn recall --batch`): `{\"answers\": [...]}`, one answer line of `--batch` per query.",
            post(recall_batch),
        )
        .body::<RecallBatchBody>()
        .answers::<BatchAnswer>(
            "`{\"answers\": [...]}`, each the JSON of `cairn recall --json` or `{\"status\": \"error\", \"error\"}`",
        ),
        Endpoint::new(
            "get",
            "/v1/records",
            read,
            "Records of this project and personal ones (`cairn list`).",
            get(list),
        )
        .query::<ListQuery>()
        .answers::<Vec<Memory>>("the JSON of `cairn list --json`"),
        Endpoint::new(
            "get",
            "/v1/records/{id}",
            read,
            "One record in full (`cairn show`). A record the token may not see answers 404, like a missing one.",
            get(show),
        )
        .query::<ShowQuery>()
        .answers::<ShowAnswer>("the JSON of `cairn show --json`"),
        Endpoint::new(
            "patch",
            "/v1/records/{id}",
            write,
            "Change fields of a record in place (`cairn update`).",
            patch(update),
        )
        .body::<UpdateBody>()
        .answers::<UpdatedAnswer>("the JSON of `cairn update --json`"),
        Endpoint::new(
            "delete",
            "/v1/records/{id}",
            write,
            "Archive a record (`cairn forget`); `?hard=true` deletes it for good (admin role).",
            delete(forget),
        )
        .query::<ForgetQuery>()
        .answers::<ForgottenAnswer>("the JSON of `cairn forget --json`"),
        Endpoint::new(
            "post",
            "/v1/records/{id}/restore",
            write,
            "Bring back an archived record (`cairn restore`).",
            post(restore),
        )
        .answers::<RestoredAnswer>("the JSON of `cairn restore --json`"),
        Endpoint::new(
            "post",
            "/v1/records/{id}/verify",
            write,
            "Mark a record checked against its source (`cairn verify`).",
            post(verify),
        )
        .body::<VerifyBody>()
        .answers::<VerifiedAnswer>("the JSON of `cairn verify --json`"),
        Endpoint::new(
            "post",
            "/v1/records/{id}/supersede",
            write,
            "Record that a claim changed: store the new text and retire the record (`cairn remember --supersedes ID`, in the old record's scope and project). A record the token may not see answers 404.",
            post(supersede),
        )
        .body::<SupersedeBody>()
        .answers::<RememberOutcome>("the JSON of `cairn remember --supersedes ID --json`"),
        Endpoint::new(
            "post",
            "/v1/brief",
            read,
            "The brief an agent reads at the start of work (`cairn brief`); send the working tree, the server never runs git.",
            post(brief),
        )
        .body::<BriefBody>()
        .answers::<cairn_engine::Brief>("the JSON of `cairn brief --json`"),
        Endpoint::new(
            "get",
            "/v1/stats",
            read,
            "Counts and sizes of the whole brain (`cairn stats`).",
            get(stats),
        )
        .every_project()
        .answers::<cairn_store::Stats>("the JSON of `cairn stats --json`"),
        Endpoint::new(
            "get",
            "/v1/doctor",
            read,
            "Check the brain (`cairn doctor`).",
            get(doctor),
        )
        .every_project()
        .answers::<cairn_engine::DoctorReport>("the JSON of `cairn doctor --json`"),
        Endpoint::new(
            "post",
            "/v1/doctor/repair",
            Some(Role::Admin),
            "Check and repair the brain (`cairn doctor --repair`).",
            post(doctor_repair),
        )
        .every_project()
        .answers::<cairn_engine::DoctorReport>("the JSON of `cairn doctor --repair --json`"),
        Endpoint::new(
            "get",
            "/v1/export",
            read,
            "The whole brain as JSONL (`cairn export`).",
            get(export),
        )
        .every_project()
        .answers_text("application/x-ndjson", "the lines of `cairn export`"),
        Endpoint::new(
            "post",
            "/v1/import",
            write,
            "Import JSONL lines, the body (`cairn import FILE`).",
            post(import),
        )
        .every_project()
        .raw_body("application/x-ndjson")
        .answers::<cairn_engine::exchange::ImportReport>("the JSON of `cairn import FILE --json`"),
    ];
    endpoints.extend(agent::endpoints());
    endpoints.extend(graph::endpoints());
    endpoints.extend(lifecycle::endpoints());
    endpoints.extend(hooks::endpoints());
    endpoints.extend(admin::endpoints());
    endpoints
}
