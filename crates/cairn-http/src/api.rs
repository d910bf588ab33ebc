//! The `/v1` endpoints. Each one is an [`Endpoint`]: its route, the role it needs, the schema of
//! its body and query, and its handler; the router and `/openapi.json` are both built from the
//! one list ([`endpoints`]), so the document cannot drift from what is served.
//!
//! Answers have the JSON shapes `cairn … --json` prints (docs/cli.md); errors are problem
//! documents (`problem.rs`). A handler authenticates first (`auth::authorize`, on a blocking
//! thread: it reads the brain), then reads its body, then runs the engine call on a blocking
//! thread through the service.

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
    RememberRequest, RememberStatus, Review, UpdateRequest,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One route of the API, with what `/openapi.json` says about it.
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
    pub route: MethodRouter<App>,
}

pub(crate) fn schema<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
    }
    value
}

pub(crate) const JSON: &str = "application/json";

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
pub(crate) fn call<T>(
    app: &App,
    caller: &Caller,
    operation: &str,
    work: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
) -> Result<T, Problem> {
    app.service
        .call(&caller.request, operation, work)
        .map_err(|e| Problem::from_engine(&e))
}

/// The record `id`, or not-found when it is missing or the caller may not see it (the same
/// answer for both).
fn visible(engine: &Engine, caller: &Caller, id: i64) -> Result<Memory, EngineError> {
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

fn whole_brain(caller: &Caller, what: &str) -> Result<(), Problem> {
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
    fn request(self) -> Result<RecallRequest, EngineError> {
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
    fn request(self) -> Result<UpdateRequest, EngineError> {
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

// ---- handlers -----------------------------------------------------------------------------

async fn remember(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "remember").await?;
    let args: RememberBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let request = args.request().map_err(Problem::from)?;
        let outcome = call(&app, &caller, "remember", |engine| {
            if let Some(old) = request.supersedes {
                visible(engine, &caller, old)?;
            }
            engine.remember(&request)
        })?;
        if outcome.status == RememberStatus::Refused {
            let value = serde_json::to_value(&outcome).unwrap_or(Value::Null);
            return Err(
                Problem::from_kind(ErrorKind::Refused, outcome.message.clone())
                    .with("existing", json!(outcome.existing))
                    .with("outcome", value),
            );
        }
        ok(&outcome)
    })
    .await
}

async fn recall(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "recall").await?;
    let args: RecallBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let request = args.request().map_err(Problem::from)?;
        let answer = call(&app, &caller, "recall", |engine| engine.recall(&request))?;
        ok(&answer)
    })
    .await
}

async fn recall_batch(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "recall").await?;
    let args: RecallBatchBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    if args.queries.len() > 100 {
        return Err(Problem::bad_request(format!(
            "{} queries in one batch, over the limit of 100; nothing was done — split the batch",
            args.queries.len()
        ))
        .with("field", json!("queries")));
    }
    blocking(move || {
        let answers: Vec<Value> = args
            .queries
            .into_iter()
            .map(|query| {
                let answer = query.request().and_then(|request| {
                    app.service
                        .call(&caller.request, "recall", |engine| engine.recall(&request))
                });
                match answer {
                    Ok(answer) => serde_json::to_value(&answer).unwrap_or(Value::Null),
                    Err(error) => json!({"status": "error", "error": error.to_string()}),
                }
            })
            .collect();
        ok(&json!({ "answers": answers }))
    })
    .await
}

async fn show(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "show").await?;
    let id = record_id(&id)?;
    let args: ShowQuery = body::query(query.as_deref())?;
    blocking(move || {
        let value = call(&app, &caller, "show", |engine| {
            visible(engine, &caller, id)?;
            engine.show_document(id, args.history)
        })?;
        ok(&value)
    })
    .await
}

async fn update(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "update").await?;
    let id = record_id(&id)?;
    let args: UpdateBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let request = args.request().map_err(Problem::from)?;
        let updated = call(&app, &caller, "update", |engine| {
            visible(engine, &caller, id)?;
            engine.update_with_warnings(id, &request)
        })?;
        ok(&json!({
            "status": "updated",
            "id": updated.memory.id,
            "redacted": updated.redacted,
            "record": updated.memory,
            "warnings": updated.warnings,
        }))
    })
    .await
}

async fn forget(
    State(app): State<App>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let args: ForgetQuery = body::query(query.as_deref())?;
    let needed = if args.hard { Role::Admin } else { Role::Write };
    let caller = caller(&app, &headers, needed, "forget").await?;
    let id = record_id(&id)?;
    blocking(move || {
        let memory = call(&app, &caller, "forget", |engine| {
            visible(engine, &caller, id)?;
            engine.forget(id, args.hard)
        })?;
        ok(&json!({"status": if args.hard { "deleted" } else { "archived" }, "id": memory.id}))
    })
    .await
}

async fn restore(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "restore").await?;
    let id = record_id(&id)?;
    blocking(move || {
        let memory = call(&app, &caller, "restore", |engine| {
            visible(engine, &caller, id)?;
            engine.restore(id)
        })?;
        ok(&json!({"status": "restored", "id": memory.id, "record_status": memory.status}))
    })
    .await
}

async fn verify(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Write, "verify").await?;
    let id = record_id(&id)?;
    let args: VerifyBody = body::json(&body::bytes(&app, &headers, body).await?)?;
    blocking(move || {
        let memory = call(&app, &caller, "verify", |engine| {
            visible(engine, &caller, id)?;
            engine.verify(id, &args.source)
        })?;
        ok(&json!({"status": "verified", "id": memory.id, "review_at": memory.review_at}))
    })
    .await
}

async fn list(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let caller = caller(&app, &headers, Role::Read, "list").await?;
    let args: ListQuery = body::query(query.as_deref())?;
    if args.all_projects {
        whole_brain(&caller, "list all_projects")?;
    }
    blocking(move || {
        let types = match &args.types {
            Some(types) => parse_types(
                &types
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            )
            .map_err(Problem::from)?,
            None => Vec::new(),
        };
        let status = args
            .status
            .as_deref()
            .map(str::parse::<Status>)
            .transpose()
            .map_err(|e| Problem::from(EngineError::from(e)))?;
        let request = ListRequest {
            types,
            scope: args.scope,
            status,
            limit: args.limit.unwrap_or(50),
            all_projects: args.all_projects,
        };
        let memories = call(&app, &caller, "list", |engine| engine.list(&request))?;
        ok(&memories)
    })
    .await
}

async fn brief(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
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
        let brief = call(&app, &caller, "brief", |engine| engine.brief(&request))?;
        ok(&brief)
    })
    .await
}

/// A call that covers the whole brain, answered as JSON: the token checked for `role` and for
/// every project, the engine call run on a blocking thread.
async fn whole_brain_json<T: Serialize + 'static>(
    app: App,
    headers: &HeaderMap,
    role: Role,
    operation: &'static str,
    work: impl FnOnce(&mut Engine) -> Result<T, EngineError> + Send + 'static,
) -> Result<Response, Problem> {
    let caller = caller(&app, headers, role, operation).await?;
    whole_brain(&caller, operation)?;
    blocking(move || ok(&call(&app, &caller, operation, work)?)).await
}

async fn stats(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, &headers, Role::Read, "stats", |engine| engine.stats()).await
}

async fn doctor(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, &headers, Role::Read, "doctor", |engine| {
        engine.doctor(false)
    })
    .await
}

async fn doctor_repair(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    whole_brain_json(app, &headers, Role::Admin, "doctor --repair", |engine| {
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

// ---- the list -----------------------------------------------------------------------------

/// Every endpoint of `/v1`, in the order `/openapi.json` lists them.
pub fn endpoints() -> Vec<Endpoint> {
    let write = Some(Role::Write);
    let read = Some(Role::Read);
    vec![
        Endpoint {
            method: "post",
            path: "/v1/remember",
            summary: "Store one memory through the write path (`cairn remember`). A near duplicate is refused with 409 and the outcome.",
            role: write,
            every_project: false,
            raw_body: None,
            body: Some(schema::<RememberBody>),
            query: None,
            answer: (JSON, "the JSON of `cairn remember --json`"),
            route: post(remember),
        },
        Endpoint {
            method: "post",
            path: "/v1/recall",
            summary: "Ranked memories for a query (`cairn recall`).",
            role: read,
            every_project: false,
            raw_body: None,
            body: Some(schema::<RecallBody>),
            query: None,
            answer: (JSON, "the JSON of `cairn recall --json`"),
            route: post(recall),
        },
        Endpoint {
            method: "post",
            path: "/v1/recall/batch",
            summary: "Several queries in one request (`cairn recall --batch`): `{\"answers\": [...]}`, one answer line of `--batch` per query.",
            role: read,
            every_project: false,
            raw_body: None,
            body: Some(schema::<RecallBatchBody>),
            query: None,
            answer: (
                JSON,
                "`{\"answers\": [...]}`, each the JSON of `cairn recall --json` or `{\"status\": \"error\", \"error\"}`",
            ),
            route: post(recall_batch),
        },
        Endpoint {
            method: "get",
            path: "/v1/records",
            summary: "Records of this project and personal ones (`cairn list`).",
            role: read,
            every_project: false,
            body: None,
            raw_body: None,
            query: Some(schema::<ListQuery>),
            answer: (JSON, "the JSON of `cairn list --json`"),
            route: get(list),
        },
        Endpoint {
            method: "get",
            path: "/v1/records/{id}",
            summary: "One record in full (`cairn show`). A record the token may not see answers 404, like a missing one.",
            role: read,
            every_project: false,
            body: None,
            raw_body: None,
            query: Some(schema::<ShowQuery>),
            answer: (JSON, "the JSON of `cairn show --json`"),
            route: get(show),
        },
        Endpoint {
            method: "patch",
            path: "/v1/records/{id}",
            summary: "Change fields of a record in place (`cairn update`).",
            role: write,
            every_project: false,
            raw_body: None,
            body: Some(schema::<UpdateBody>),
            query: None,
            answer: (JSON, "the JSON of `cairn update --json`"),
            route: patch(update),
        },
        Endpoint {
            method: "delete",
            path: "/v1/records/{id}",
            summary: "Archive a record (`cairn forget`); `?hard=true` deletes it for good (admin role).",
            role: write,
            every_project: false,
            body: None,
            raw_body: None,
            query: Some(schema::<ForgetQuery>),
            answer: (JSON, "the JSON of `cairn forget --json`"),
            route: delete(forget),
        },
        Endpoint {
            method: "post",
            path: "/v1/records/{id}/restore",
            summary: "Bring back an archived record (`cairn restore`).",
            role: write,
            every_project: false,
            body: None,
            raw_body: None,
            query: None,
            answer: (JSON, "the JSON of `cairn restore --json`"),
            route: post(restore),
        },
        Endpoint {
            method: "post",
            path: "/v1/records/{id}/verify",
            summary: "Mark a record checked against its source (`cairn verify`).",
            role: write,
            every_project: false,
            raw_body: None,
            body: Some(schema::<VerifyBody>),
            query: None,
            answer: (JSON, "the JSON of `cairn verify --json`"),
            route: post(verify),
        },
        Endpoint {
            method: "post",
            path: "/v1/brief",
            summary: "The brief an agent reads at the start of work (`cairn brief`); send the working tree, the server never runs git.",
            role: read,
            every_project: false,
            raw_body: None,
            body: Some(schema::<BriefBody>),
            query: None,
            answer: (JSON, "the JSON of `cairn brief --json`"),
            route: post(brief),
        },
        Endpoint {
            method: "get",
            path: "/v1/stats",
            summary: "Counts and sizes of the whole brain (`cairn stats`).",
            role: read,
            every_project: true,
            body: None,
            raw_body: None,
            query: None,
            answer: (JSON, "the JSON of `cairn stats --json`"),
            route: get(stats),
        },
        Endpoint {
            method: "get",
            path: "/v1/doctor",
            summary: "Check the brain (`cairn doctor`).",
            role: read,
            every_project: true,
            body: None,
            raw_body: None,
            query: None,
            answer: (JSON, "the JSON of `cairn doctor --json`"),
            route: get(doctor),
        },
        Endpoint {
            method: "post",
            path: "/v1/doctor/repair",
            summary: "Check and repair the brain (`cairn doctor --repair`).",
            role: Some(Role::Admin),
            every_project: true,
            body: None,
            raw_body: None,
            query: None,
            answer: (JSON, "the JSON of `cairn doctor --repair --json`"),
            route: post(doctor_repair),
        },
        Endpoint {
            method: "get",
            path: "/v1/export",
            summary: "The whole brain as JSONL (`cairn export`).",
            role: read,
            every_project: true,
            body: None,
            raw_body: None,
            query: None,
            answer: ("application/x-ndjson", "the lines of `cairn export`"),
            route: get(export),
        },
        Endpoint {
            method: "post",
            path: "/v1/import",
            summary: "Import JSONL lines, the body (`cairn import FILE`).",
            role: write,
            every_project: true,
            body: None,
            raw_body: Some("application/x-ndjson"),
            query: None,
            answer: (JSON, "the JSON of `cairn import FILE --json`"),
            route: post(import),
        },
    ]
}
