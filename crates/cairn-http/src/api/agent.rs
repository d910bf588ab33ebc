//! `/v1` endpoints around the memory proper (`cairn review`, `inbox`, `task`, `measure`, `log`,
//! `identity`, `awareness`): each calls the engine function its CLI command calls and answers
//! that command's `--json`. An item id the token may not see (another project's task or
//! inbox item) answers 404, like a missing one.

use super::{Endpoint, Input, NoQuery, Op, handle, item_not_found, record_id, remembered};
use crate::App;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{delete, get, post, put};
use cairn_core::record::MemoryType;
use cairn_engine::tokens::Role;
use cairn_engine::{EngineError, MeasureSummary, RememberOutcome, ReviewReport};
use cairn_store::{AwarenessRow, EventRow, IdentityRow, InboxRow, TaskRow};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `GET /v1/review`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewQuery {
    /// List tier A/B records not verified for this many days (default 180; 0 leaves them out).
    #[serde(default)]
    pub stale_days: Option<u32>,
}

/// `GET /v1/inbox`, `GET /v1/tasks`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllQuery {
    /// Resolved (done) ones too.
    #[serde(default)]
    pub all: bool,
}

/// `POST /v1/inbox/{id}/accept`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxAcceptBody {
    /// Store it as this type instead of the suggested one.
    #[serde(default, rename = "type")]
    pub memory_type: Option<String>,
}

/// `POST /v1/tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskAddBody {
    /// What is owed, in one line.
    pub title: String,
    #[serde(default)]
    pub detail: Option<String>,
    /// Due date or time.
    #[serde(default)]
    pub due: Option<String>,
    /// A personal task, visible from every project.
    #[serde(default)]
    pub personal: bool,
}

/// `POST /v1/measures`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasureBody {
    /// The measure's name, e.g. `test-suite-seconds`.
    pub name: String,
    pub value: f64,
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// `GET /v1/measures`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasuresQuery {
    /// One measure; every one when absent.
    #[serde(default)]
    pub name: Option<String>,
}

/// `GET /v1/log`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// How many events, the newest kept (default 30).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only what happened since the last session started.
    #[serde(default)]
    pub last_session: bool,
    /// Only the events this actor wrote (a token's name, `cli`, `hook`, …).
    #[serde(default)]
    pub actor: Option<String>,
}

/// `PUT /v1/identity`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityBody {
    /// Who the agent is (under 500 tokens).
    pub text: String,
}

/// `POST /v1/awareness`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwarenessBody {
    /// The item, in one line.
    pub text: String,
    /// When it expires: a time, or a duration such as 2h or 3d (default 24h).
    #[serde(default)]
    pub expires: Option<String>,
}

/// `POST /v1/awareness` (`cairn awareness add --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AwareAnswer {
    pub item: AwarenessRow,
    /// The oldest live item, dropped to keep at most 10.
    pub dropped: Option<AwarenessRow>,
}

/// `DELETE /v1/awareness/{id}` (`cairn awareness drop --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct DroppedAnswer {
    pub id: i64,
    /// `false` when there was no such live item (nothing changed).
    pub dropped: bool,
}

/// The id in an item's path (a task, an inbox item, an awareness item).
fn item_id(text: &str) -> Result<i64, Problem> {
    record_id(text)
}

async fn review(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("review"),
        Input::Query(query),
        |engine, _, args: ReviewQuery| {
            Ok(match args.stale_days.unwrap_or(180) {
                0 => engine.review()?,
                days => engine.review_stale(days)?,
            })
        },
    )
    .await
}

async fn inbox(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("inbox"),
        Input::Query(query),
        |engine, _, args: AllQuery| Ok(engine.inbox(args.all)?),
    )
    .await
}

/// The inbox item `id` when this token sees it (the engine lists only visible ones).
pub(crate) fn visible_inbox_item(
    engine: &cairn_engine::Engine,
    id: i64,
) -> Result<InboxRow, Problem> {
    engine
        .inbox(true)?
        .into_iter()
        .find(|row| row.id == id)
        .ok_or_else(|| item_not_found("inbox item", id, "/v1/inbox?all=true"))
}

async fn inbox_accept(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("inbox accept"),
        Input::Body(body),
        move |engine, _, args: InboxAcceptBody| {
            let id = item_id(&id)?;
            let memory_type = args
                .memory_type
                .as_deref()
                .map(str::parse::<MemoryType>)
                .transpose()
                .map_err(EngineError::from)?;
            visible_inbox_item(engine, id)?;
            remembered(engine.inbox_accept(id, memory_type)?)
        },
    )
    .await
}

async fn inbox_dismiss(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("inbox dismiss"),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            let id = item_id(&id)?;
            visible_inbox_item(engine, id)?;
            Ok(engine.inbox_dismiss(id)?)
        },
    )
    .await
}

async fn tasks(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("task list"),
        Input::Query(query),
        |engine, _, args: AllQuery| Ok(engine.tasks(args.all)?),
    )
    .await
}

async fn task_add(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("task add"),
        Input::Body(body),
        |engine, _, args: TaskAddBody| {
            Ok(engine.task_add(
                &args.title,
                args.detail.as_deref(),
                args.due.as_deref(),
                args.personal,
            )?)
        },
    )
    .await
}

async fn task_done(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("task done"),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            let id = item_id(&id)?;
            if !engine.tasks(true)?.iter().any(|task| task.id == id) {
                return Err(item_not_found("task", id, "/v1/tasks?all=true"));
            }
            Ok(engine.task_done(id)?)
        },
    )
    .await
}

async fn measures(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("measure show"),
        Input::Query(query),
        |engine, _, args: MeasuresQuery| Ok(engine.measures(args.name.as_deref())?),
    )
    .await
}

async fn measure_record(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("measure record"),
        Input::Body(body),
        |engine, _, args: MeasureBody| {
            Ok(engine.measure_record(
                &args.name,
                args.value,
                args.unit.as_deref(),
                args.note.as_deref(),
            )?)
        },
    )
    .await
}

async fn log(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("log"),
        Input::Query(query),
        |engine, _, args: LogQuery| {
            Ok(engine.activity_by(
                args.limit.unwrap_or(30),
                args.last_session,
                args.actor.as_deref().filter(|actor| !actor.is_empty()),
            )?)
        },
    )
    .await
}

async fn identity(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("identity show"),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.identity()?),
    )
    .await
}

async fn identity_set(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // One identity for the whole brain: a project's token may not change it for the others.
    handle(
        app,
        headers,
        Op::write("identity set").whole_brain(),
        Input::Body(body),
        |engine, _, args: IdentityBody| Ok(Some(engine.set_identity(&args.text)?)),
    )
    .await
}

async fn awareness(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("awareness list"),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.awareness()?),
    )
    .await
}

async fn awareness_add(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("awareness add"),
        Input::Body(body),
        |engine, _, args: AwarenessBody| {
            let (item, dropped) = engine.aware(&args.text, args.expires.as_deref())?;
            Ok(AwareAnswer { item, dropped })
        },
    )
    .await
}

async fn awareness_drop(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("awareness drop"),
        Input::Nothing,
        move |engine, _, _: NoQuery| {
            let id = item_id(&id)?;
            // Another project's item is answered like one that is gone: nothing changes.
            let dropped =
                engine.awareness()?.iter().any(|row| row.id == id) && engine.awareness_drop(id)?;
            Ok(DroppedAnswer { id, dropped })
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
            "/v1/review",
            read,
            "Records past their review date, open conflicts, and tier A/B records nobody re-checked (`cairn review`).",
            get(review),
        )
        .query::<ReviewQuery>()
        .answers::<ReviewReport>("the JSON of `cairn review --json`"),
        Endpoint::new(
            "get",
            "/v1/inbox",
            read,
            "Candidate facts captured from transcripts, awaiting a decision (`cairn inbox list`).",
            get(inbox),
        )
        .query::<AllQuery>()
        .answers::<Vec<InboxRow>>("the JSON of `cairn inbox list --json`"),
        Endpoint::new(
            "post",
            "/v1/inbox/{id}/accept",
            write,
            "Keep a candidate as a memory, through the whole write path (`cairn inbox accept`); a refusal is 409 with the outcome.",
            post(inbox_accept),
        )
        .body::<InboxAcceptBody>()
        .answers::<RememberOutcome>("the JSON of `cairn inbox accept --json`"),
        Endpoint::new(
            "post",
            "/v1/inbox/{id}/dismiss",
            write,
            "Discard a candidate (`cairn inbox dismiss`).",
            post(inbox_dismiss),
        )
        .answers::<InboxRow>("the JSON of `cairn inbox dismiss --json`"),
        Endpoint::new(
            "get",
            "/v1/tasks",
            read,
            "Open tasks of this project and personal ones (`cairn task list`).",
            get(tasks),
        )
        .query::<AllQuery>()
        .answers::<Vec<TaskRow>>("the JSON of `cairn task list --json`"),
        Endpoint::new(
            "post",
            "/v1/tasks",
            write,
            "Add a task (`cairn task add`).",
            post(task_add),
        )
        .body::<TaskAddBody>()
        .answers::<TaskRow>("the JSON of `cairn task add --json`"),
        Endpoint::new(
            "post",
            "/v1/tasks/{id}/done",
            write,
            "Mark a task done (`cairn task done`).",
            post(task_done),
        )
        .answers::<TaskRow>("the JSON of `cairn task done --json`"),
        Endpoint::new(
            "get",
            "/v1/measures",
            read,
            "Last value and trend of every measure, or of one (`cairn measure show`).",
            get(measures),
        )
        .query::<MeasuresQuery>()
        .answers::<Vec<MeasureSummary>>("the JSON of `cairn measure show --json`"),
        Endpoint::new(
            "post",
            "/v1/measures",
            write,
            "Record one reading of a named value (`cairn measure record`).",
            post(measure_record),
        )
        .body::<MeasureBody>()
        .answers::<MeasureSummary>("the JSON of `cairn measure record --json`"),
        Endpoint::new(
            "get",
            "/v1/log",
            read,
            "The activity log of this project and personal events, oldest first (`cairn log`).",
            get(log),
        )
        .query::<LogQuery>()
        .answers::<Vec<EventRow>>("the JSON of `cairn log --json`"),
        Endpoint::new(
            "get",
            "/v1/identity",
            read,
            "Who the agent is (`cairn identity show`): the identity, or null.",
            get(identity),
        )
        .answers::<Option<IdentityRow>>("the JSON of `cairn identity show --json`"),
        Endpoint::new(
            "put",
            "/v1/identity",
            write,
            "Replace the identity (`cairn identity set`); one for the whole brain, so a token for every project only.",
            put(identity_set),
        )
        .every_project()
        .body::<IdentityBody>()
        .answers::<Option<IdentityRow>>("the JSON of `cairn identity set --json`"),
        Endpoint::new(
            "get",
            "/v1/awareness",
            read,
            "Live short-lived working items (`cairn awareness list`).",
            get(awareness),
        )
        .answers::<Vec<AwarenessRow>>("the JSON of `cairn awareness list --json`"),
        Endpoint::new(
            "post",
            "/v1/awareness",
            write,
            "Add a short-lived working item (`cairn awareness add`); at most 10 live.",
            post(awareness_add),
        )
        .body::<AwarenessBody>()
        .answers::<AwareAnswer>("the JSON of `cairn awareness add --json`"),
        Endpoint::new(
            "delete",
            "/v1/awareness/{id}",
            write,
            "Drop an item before it expires (`cairn awareness drop`); `dropped: false` when there was no such live item.",
            delete(awareness_drop),
        )
        .answers::<DroppedAnswer>("the JSON of `cairn awareness drop --json`"),
    ]
}
