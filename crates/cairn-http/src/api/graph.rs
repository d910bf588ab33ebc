//! `/v1/graph…`: the knowledge-graph commands (`cairn graph`, `edges`, `neighbors`, `entities`,
//! `entity add`, `clusters`, `relate`, `unrelate`), each the engine call its CLI command makes,
//! answering that command's `--json`. The engine answers in the request's project: records of
//! other projects are neither walked into nor listed, and naming one is refused as missing.

use super::{Endpoint, Input, NoQuery, Op, handle};
use crate::App;
use crate::problem::Problem;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use cairn_engine::graph::{
    ClustersAnswer, ClustersRequest, Direction, EdgesAnswer, EntitiesRequest, EntityAdded,
    EntityView, GraphAnswer, GraphRequest, NeighborsAnswer, NeighborsRequest, RelateOutcome,
    RelateRequest, UnrelateOutcome,
};
use cairn_engine::tokens::Role;
use cairn_store::RelationTypeRow;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `GET /v1/graph`: the graph valid at a time.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GraphQuery {
    /// The graph as it was then (RFC 3339, a date, or an age like 30d; default now).
    #[serde(default)]
    pub as_of: Option<String>,
    /// Only this relation type.
    #[serde(default)]
    pub relation: Option<String>,
    /// Edges listed (default 50; 0 all). The counts always cover every edge.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `GET /v1/graph/edges`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgesQuery {
    /// A record (`#42` or `42`) or an entity's name or alias.
    pub node: String,
    /// Every validity interval and every log entry, closed ones too.
    #[serde(default)]
    pub history: bool,
    #[serde(default)]
    pub as_of: Option<String>,
}

/// `GET /v1/graph/neighbors`: the blast radius.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NeighborsQuery {
    /// The origin: a record (`#42` or `42`) or an entity's name or alias.
    pub node: String,
    /// in: what depends on it (breaks if it changes); out: what it depends on; both (default).
    #[serde(default)]
    pub direction: Option<String>,
    /// Hops (default 2).
    #[serde(default)]
    pub depth: Option<u32>,
    #[serde(default)]
    pub as_of: Option<String>,
    /// Neighbours listed (default 20; 0 all reached).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `GET /v1/graph/entities`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntitiesQuery {
    /// Only this type (path, url, code, tag, handle, name, or one given by hand).
    #[serde(default, rename = "type")]
    pub entity_type: Option<String>,
    /// Most entities (default 100; 0 all).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `POST /v1/graph/entities` (`cairn entity add`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntityBody {
    pub name: String,
    /// Default `thing`.
    #[serde(default, rename = "type")]
    pub entity_type: Option<String>,
    /// Other names it goes by.
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// `GET /v1/graph/clusters`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClustersQuery {
    /// Smallest cluster shown (default 4).
    #[serde(default)]
    pub min_size: Option<usize>,
    /// Most clusters shown, largest first (default 8).
    #[serde(default)]
    pub max: Option<usize>,
}

/// `POST /v1/graph/relate`: assert `src relation dst`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelateBody {
    /// A record (`#42` or `42`) or an entity's name or alias.
    pub src: String,
    /// requires, affects, part_of, supersedes, relates, mentions, or a declared type.
    pub relation: String,
    pub dst: String,
    /// Valid from (default now): RFC 3339, a date, or an age like 7d.
    #[serde(default)]
    pub from: Option<String>,
    /// Valid until (exclusive).
    #[serde(default)]
    pub to: Option<String>,
    /// Keep the edge in quarantine when an end names nothing yet, instead of refusing it.
    #[serde(default)]
    pub allow_dangling: bool,
    /// 0..1 (default 1).
    #[serde(default)]
    pub confidence: Option<f64>,
}

/// `POST /v1/graph/unrelate`: close the open edge `src relation dst`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnrelateBody {
    pub src: String,
    pub relation: String,
    pub dst: String,
    /// When it stopped holding (default now).
    #[serde(default)]
    pub at: Option<String>,
}

/// `POST /v1/graph/relation-types`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelationTypeBody {
    /// The relation's name (lowercase words joined by `_`).
    pub name: String,
    /// Its blast-radius weight (0–1; default 0.5).
    #[serde(default)]
    pub weight: Option<f64>,
    /// `a rel b` also means `b rel a`.
    #[serde(default)]
    pub symmetric: bool,
    #[serde(default)]
    pub description: Option<String>,
}

/// `POST /v1/graph/relation-types` (`cairn relation-type declare --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeclaredAnswer {
    /// `declared`.
    pub status: &'static str,
    pub relation_type: RelationTypeRow,
}

/// `POST /v1/graph/relink` (`cairn entity relink --json`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RelinkedAnswer {
    /// `relinked`.
    pub status: &'static str,
    /// Records whose entities were extracted again.
    pub records: usize,
    /// Edge operations written.
    pub edges_written: usize,
}

async fn relation_types(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("relation-type list"),
        Input::Nothing,
        |engine, _, _: NoQuery| Ok(engine.relation_types()?),
    )
    .await
}

async fn relation_type_declare(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // One vocabulary for the whole brain: a project's token may not change it for the others.
    handle(
        app,
        headers,
        Op::write("relation-type declare").whole_brain(),
        Input::Body(body),
        |engine, _, args: RelationTypeBody| {
            let declared = engine.declare_relation_type(
                &args.name,
                args.weight,
                args.symmetric,
                args.description.as_deref(),
            )?;
            Ok(DeclaredAnswer {
                status: "declared",
                relation_type: declared,
            })
        },
    )
    .await
}

async fn relink(State(app): State<App>, headers: HeaderMap) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("entity relink").whole_brain(),
        Input::Nothing,
        |engine, _, _: NoQuery| {
            let (records, edges_written) = engine.relink_records()?;
            Ok(RelinkedAnswer {
                status: "relinked",
                records,
                edges_written,
            })
        },
    )
    .await
}

async fn graph(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("graph"),
        Input::Query(query),
        |engine, _, args: GraphQuery| {
            Ok(engine.graph(&GraphRequest {
                as_of: args.as_of,
                limit: args.limit.unwrap_or(50),
                relation: args.relation,
            })?)
        },
    )
    .await
}

async fn edges(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("edges"),
        Input::Query(query),
        |engine, _, args: EdgesQuery| {
            Ok(engine.edges(&args.node, args.history, args.as_of.as_deref())?)
        },
    )
    .await
}

async fn neighbors(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("neighbors"),
        Input::Query(query),
        |engine, _, args: NeighborsQuery| {
            let mut request = NeighborsRequest::new(args.node);
            if let Some(direction) = &args.direction {
                request.direction = direction.parse::<Direction>().map_err(|error| {
                    Problem::from(error).with("field", serde_json::json!("direction"))
                })?;
            }
            request.depth = args.depth.unwrap_or(2);
            request.as_of = args.as_of;
            request.limit = args.limit.unwrap_or(20);
            Ok(engine.neighbors(&request)?)
        },
    )
    .await
}

async fn entities(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("entities"),
        Input::Query(query),
        |engine, _, args: EntitiesQuery| {
            Ok(engine.entities(&EntitiesRequest {
                entity_type: args.entity_type,
                limit: args.limit.unwrap_or(100),
            })?)
        },
    )
    .await
}

async fn entity_add(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("entity add"),
        Input::Body(body),
        |engine, _, args: EntityBody| {
            Ok(engine.add_entity(
                &args.name,
                args.entity_type.as_deref().unwrap_or("thing"),
                &args.aliases,
            )?)
        },
    )
    .await
}

async fn clusters(
    State(app): State<App>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::read("clusters"),
        Input::Query(query),
        |engine, _, args: ClustersQuery| {
            Ok(engine.clusters(&ClustersRequest {
                min_size: args.min_size.unwrap_or(4),
                max: args.max.unwrap_or(8),
            })?)
        },
    )
    .await
}

async fn relate(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("relate"),
        Input::Body(body),
        |engine, _, args: RelateBody| {
            Ok(engine.relate(&RelateRequest {
                src: args.src,
                relation: args.relation,
                dst: args.dst,
                from: args.from,
                to: args.to,
                allow_dangling: args.allow_dangling,
                confidence: args.confidence,
            })?)
        },
    )
    .await
}

async fn unrelate(
    State(app): State<App>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    handle(
        app,
        headers,
        Op::write("unrelate"),
        Input::Body(body),
        |engine, _, args: UnrelateBody| {
            Ok(engine.unrelate(&args.src, &args.relation, &args.dst, args.at.as_deref())?)
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
            "/v1/graph",
            read,
            "The knowledge graph valid at a time (`cairn graph`): counts per relation and the first edges.",
            get(graph),
        )
        .query::<GraphQuery>()
        .answers::<GraphAnswer>("the JSON of `cairn graph --json`"),
        Endpoint::new(
            "get",
            "/v1/graph/edges",
            read,
            "The edges of one record or entity (`cairn edges`); `history` adds every interval and log entry.",
            get(edges),
        )
        .query::<EdgesQuery>()
        .answers::<EdgesAnswer>("the JSON of `cairn edges --json`"),
        Endpoint::new(
            "get",
            "/v1/graph/neighbors",
            read,
            "Blast radius: what is connected to a record or entity, scored (`cairn neighbors`).",
            get(neighbors),
        )
        .query::<NeighborsQuery>()
        .answers::<NeighborsAnswer>("the JSON of `cairn neighbors --json`"),
        Endpoint::new(
            "get",
            "/v1/graph/entities",
            read,
            "Entities, most mentioned first (`cairn entities`).",
            get(entities),
        )
        .query::<EntitiesQuery>()
        .answers::<Vec<EntityView>>("the JSON of `cairn entities --json`"),
        Endpoint::new(
            "post",
            "/v1/graph/entities",
            write,
            "Create an entity, or add aliases to the one with that name (`cairn entity add`).",
            post(entity_add),
        )
        .body::<EntityBody>()
        .answers::<EntityAdded>("the JSON of `cairn entity add --json`"),
        Endpoint::new(
            "get",
            "/v1/graph/clusters",
            read,
            "Groups of records tied together (`cairn clusters`).",
            get(clusters),
        )
        .query::<ClustersQuery>()
        .answers::<ClustersAnswer>("the JSON of `cairn clusters --json`"),
        Endpoint::new(
            "post",
            "/v1/graph/relate",
            write,
            "Assert an edge `src relation dst` (`cairn relate`).",
            post(relate),
        )
        .body::<RelateBody>()
        .answers::<RelateOutcome>("the JSON of `cairn relate --json`"),
        Endpoint::new(
            "post",
            "/v1/graph/unrelate",
            write,
            "End an edge: close its open validity interval (`cairn unrelate`).",
            post(unrelate),
        )
        .body::<UnrelateBody>()
        .answers::<UnrelateOutcome>("the JSON of `cairn unrelate --json`"),
        Endpoint::new(
            "get",
            "/v1/graph/relation-types",
            read,
            "The relation types, built-in and declared (`cairn relation-type list`).",
            get(relation_types),
        )
        .answers::<Vec<RelationTypeRow>>("the JSON of `cairn relation-type list --json`"),
        Endpoint::new(
            "post",
            "/v1/graph/relation-types",
            write,
            "Declare a relation type or change a declared one (`cairn relation-type declare`); one vocabulary for the whole brain, so a token for every project only.",
            post(relation_type_declare),
        )
        .body::<RelationTypeBody>()
        .answers::<DeclaredAnswer>("the JSON of `cairn relation-type declare --json`"),
        Endpoint::new(
            "post",
            "/v1/graph/relink",
            write,
            "Extract every record's entities again and link them (`cairn entity relink`); every project's records, so a token for every project only.",
            post(relink),
        )
        .answers::<RelinkedAnswer>("the JSON of `cairn entity relink --json`"),
    ]
}
