//! The knowledge graph and the lifecycle over a server (`graph`, `edges`, `neighbors`,
//! `entities`, `entity add|relink`, `relation-type list|declare`, `clusters`, `relate`, `unrelate`, `decay`, `dream`): each handler
//! sends the command's request to its `/v1` endpoint, reads the answer back into the engine's
//! struct and prints it with the local command's printer (`commands::graph::print_*`,
//! `commands::lifecycle::print_*`).

use super::commands::{Remote, read, with_query, writable};
use crate::commands::graph::{
    self as local, ClustersArgs, EdgesArgs, EntitiesArgs, GraphArgs, NeighborsArgs, RelateArgs,
    UnrelateArgs,
};
use crate::commands::lifecycle::{self, DecayArgs, DreamArgs, DreamCommand};
use anyhow::Result;
use cairn_engine::EngineError;
use cairn_engine::graph::{
    ClustersAnswer, Direction, EdgesAnswer, EntityAdded, EntityView, GraphAnswer, NeighborsAnswer,
    RelateOutcome, UnrelateOutcome,
};
use cairn_engine::lifecycle::{
    AcceptReport, DecayExplanation, DecayReport, DreamOutcome, DreamView,
};
use cairn_store::RelationTypeRow;
use serde_json::json;
use std::process::ExitCode;

/// An optional value as a query value (nothing when absent: the server's default).
fn given<T: ToString>(value: &Option<T>) -> String {
    value.as_ref().map(ToString::to_string).unwrap_or_default()
}

pub fn relate(remote: &Remote<'_>, args: &RelateArgs) -> Result<ExitCode> {
    writable(remote, "relate")?;
    let client = remote.client()?;
    let body = json!({
        "src": args.src,
        "relation": args.relation,
        "dst": args.dst,
        "from": args.from,
        "to": args.to,
        "allow_dangling": args.allow_dangling,
        "confidence": args.confidence,
    });
    let answer = client.post("/v1/graph/relate", &body)?;
    let outcome: RelateOutcome = read(&client, answer, "a relate outcome")?;
    local::print_related(remote.settings, &outcome);
    Ok(ExitCode::SUCCESS)
}

pub fn unrelate(remote: &Remote<'_>, args: &UnrelateArgs) -> Result<ExitCode> {
    writable(remote, "unrelate")?;
    let client = remote.client()?;
    let body = json!({"src": args.src, "relation": args.relation, "dst": args.dst, "at": args.at});
    let answer = client.post("/v1/graph/unrelate", &body)?;
    let outcome: UnrelateOutcome = read(&client, answer, "an unrelate outcome")?;
    local::print_unrelated(remote.settings, &outcome);
    Ok(ExitCode::SUCCESS)
}

pub fn graph(remote: &Remote<'_>, args: &GraphArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query(
        "/v1/graph",
        &[
            ("as_of", given(&args.as_of)),
            ("relation", given(&args.relation)),
            ("limit", args.limit.to_string()),
        ],
    );
    let answer: GraphAnswer = read(&client, client.get(&path)?, "a graph summary")?;
    local::print_graph(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

pub fn edges(remote: &Remote<'_>, args: &EdgesArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query(
        "/v1/graph/edges",
        &[
            ("node", args.node.clone()),
            (
                "history",
                if args.history {
                    "true".into()
                } else {
                    String::new()
                },
            ),
            ("as_of", given(&args.as_of)),
        ],
    );
    let answer: EdgesAnswer = read(&client, client.get(&path)?, "a node's edges")?;
    local::print_edges(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

pub fn neighbors(remote: &Remote<'_>, args: &NeighborsArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let direction = match args.direction {
        Direction::In => "in",
        Direction::Out => "out",
        Direction::Both => "both",
    };
    let path = with_query(
        "/v1/graph/neighbors",
        &[
            ("node", args.node.clone()),
            ("direction", direction.into()),
            ("depth", args.depth.to_string()),
            ("as_of", given(&args.as_of)),
            ("limit", args.limit.to_string()),
        ],
    );
    let answer: NeighborsAnswer = read(&client, client.get(&path)?, "a neighbourhood")?;
    local::print_neighbors(remote.settings, &answer);
    Ok(ExitCode::SUCCESS)
}

pub fn entities(remote: &Remote<'_>, args: &EntitiesArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query(
        "/v1/graph/entities",
        &[
            ("type", given(&args.entity_type)),
            ("limit", args.limit.to_string()),
        ],
    );
    let list: Vec<EntityView> = read(&client, client.get(&path)?, "entities")?;
    local::print_entities(remote.settings, &list);
    Ok(ExitCode::SUCCESS)
}

pub fn entity_add(
    remote: &Remote<'_>,
    name: &str,
    entity_type: &str,
    aliases: &[String],
) -> Result<ExitCode> {
    writable(remote, "entity add")?;
    let client = remote.client()?;
    let body = json!({"name": name, "type": entity_type, "aliases": aliases});
    let added: EntityAdded = read(
        &client,
        client.post("/v1/graph/entities", &body)?,
        "an added entity",
    )?;
    local::print_entity_added(remote.settings, &added);
    Ok(ExitCode::SUCCESS)
}

/// `POST /v1/graph/relink`'s answer.
#[derive(serde::Deserialize)]
struct Relinked {
    records: usize,
    edges_written: usize,
}

pub fn relink(remote: &Remote<'_>) -> Result<ExitCode> {
    writable(remote, "entity relink")?;
    let client = remote.client()?;
    let answer: Relinked = read(
        &client,
        client.post_empty("/v1/graph/relink")?,
        "a relink report",
    )?;
    local::print_relinked(remote.settings, answer.records, answer.edges_written);
    Ok(ExitCode::SUCCESS)
}

pub fn relation_types(remote: &Remote<'_>) -> Result<ExitCode> {
    let client = remote.client()?;
    let types: Vec<RelationTypeRow> = read(
        &client,
        client.get("/v1/graph/relation-types")?,
        "relation types",
    )?;
    local::print_relation_types(remote.settings, &types);
    Ok(ExitCode::SUCCESS)
}

/// `POST /v1/graph/relation-types`'s answer.
#[derive(serde::Deserialize)]
struct Declared {
    relation_type: RelationTypeRow,
}

pub fn declare_relation_type(
    remote: &Remote<'_>,
    name: &str,
    weight: Option<f64>,
    symmetric: bool,
    description: Option<&str>,
) -> Result<ExitCode> {
    writable(remote, "relation-type declare")?;
    let client = remote.client()?;
    let body =
        json!({"name": name, "weight": weight, "symmetric": symmetric, "description": description});
    let answer: Declared = read(
        &client,
        client.post("/v1/graph/relation-types", &body)?,
        "a declared relation type",
    )?;
    local::print_declared(remote.settings, &answer.relation_type);
    Ok(ExitCode::SUCCESS)
}

pub fn clusters(remote: &Remote<'_>, args: &ClustersArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let path = with_query(
        "/v1/graph/clusters",
        &[
            ("min_size", args.min_size.to_string()),
            ("max", args.max.to_string()),
        ],
    );
    let answer: ClustersAnswer = read(&client, client.get(&path)?, "clusters")?;
    local::print_clusters(remote.settings, &answer, args.min_size);
    Ok(ExitCode::SUCCESS)
}

pub fn decay(remote: &Remote<'_>, args: &DecayArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    if let Some(id) = &args.explain {
        let id = lifecycle::parse_id(id)?;
        let answer = client.get(&format!("/v1/records/{id}/decay"))?;
        let explanation: DecayExplanation = read(&client, answer, "a decay explanation")?;
        lifecycle::print_decay_explanation(remote.settings, &explanation);
        return Ok(ExitCode::SUCCESS);
    }
    let answer = if args.dry_run {
        client.get("/v1/decay")?
    } else {
        writable(remote, "decay")?;
        client.post_empty("/v1/decay")?
    };
    let report: DecayReport = read(&client, answer, "a decay report")?;
    lifecycle::print_decay(remote.settings, &report);
    Ok(ExitCode::SUCCESS)
}

/// `GET /v1/dream`'s answer.
#[derive(serde::Deserialize)]
struct DreamList {
    dreams: Vec<DreamView>,
}

pub fn dream(remote: &Remote<'_>, args: &DreamArgs) -> Result<ExitCode> {
    let client = remote.client()?;
    let settings = remote.settings;
    let path_of = |id: &str| format!("/v1/dream/{}", urlencoding(id));
    match &args.command {
        Some(DreamCommand::Show { id }) => {
            let view: DreamView = read(&client, client.get(&path_of(id))?, "a dream")?;
            lifecycle::print_dream_view(settings, &view);
        }
        Some(DreamCommand::List { limit }) => {
            let path = with_query("/v1/dream", &[("limit", limit.to_string())]);
            let list: DreamList = read(&client, client.get(&path)?, "dreams")?;
            lifecycle::print_dreams(settings, &list.dreams);
        }
        Some(DreamCommand::Reject { id }) => {
            writable(remote, "dream reject")?;
            let answer = client.post_empty(&format!("{}/reject", path_of(id)))?;
            let id = answer["id"].as_str().unwrap_or(id).to_string();
            lifecycle::print_dream_rejected(settings, &id);
        }
        Some(DreamCommand::Accept { id, only }) => {
            writable(remote, "dream accept")?;
            let answer =
                client.post(&format!("{}/accept", path_of(id)), &json!({ "only": only }))?;
            let report: AcceptReport = read(&client, answer, "a dream's accept report")?;
            lifecycle::print_dream_accepted(settings, &report);
        }
        None => {
            if args.unattended {
                // The scheduler's run belongs on the machine of the brain: the server's own
                // `cairn maintain` (a session end starts it) or its cron.
                return Err(EngineError::Invalid(
                    "`cairn dream --unattended` is not served by a cairn server: an unattended dream runs where the brain is (its `cairn maintain` or cron job); nothing was done — run `cairn dream` (with `--accept` to apply) for a dream on the server".into(),
                )
                .into());
            }
            writable(remote, "dream")?;
            let body = json!({"accept": args.accept, "no_llm": args.no_llm});
            let outcome: DreamOutcome =
                read(&client, client.post("/v1/dream", &body)?, "a dream outcome")?;
            lifecycle::print_dream_outcome(settings, &outcome);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A dream id (a token's name, a setting's key) as one path segment (plain words stay as they
/// are; anything else is escaped).
pub(super) fn urlencoding(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}
