//! The knowledge-graph commands (docs/design.md §7): relate, unrelate, graph, edges, neighbors,
//! entities, entity add, clusters, relation-type. Glue: each calls one engine function and
//! prints its answer as text or, with `--json`, as JSON.

use crate::output::{print_json, snippet};
use crate::settings::Settings;
use crate::values;
use anyhow::Result;
use cairn_engine::graph::{
    ClustersAnswer, ClustersRequest, Direction, EdgesAnswer, EntitiesRequest, EntityAdded,
    EntityView, GraphAnswer, GraphRequest, NeighborsAnswer, NeighborsRequest, RelateOutcome,
    RelateRequest, RelateStatus, UnrelateOutcome, UnrelateStatus,
};
use cairn_store::RelationTypeRow;
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum GraphCommand {
    /// Assert an edge A TYPE B (records: #42 or 42; entities: by name or alias).
    Relate(RelateArgs),
    /// End an edge: close its open validity interval (history is kept).
    Unrelate(UnrelateArgs),
    /// The graph valid at a time: counts per relation and the first edges.
    Graph(GraphArgs),
    /// The edges of one record or entity; --history shows every interval and log entry.
    Edges(EdgesArgs),
    /// Blast radius: what is connected to X, scored; --direction in = what breaks if X changes.
    #[command(alias = "neighbours")]
    Neighbors(NeighborsArgs),
    /// Entities, most mentioned first.
    Entities(EntitiesArgs),
    /// Create entities and give them aliases.
    Entity {
        #[command(subcommand)]
        command: EntityCommand,
    },
    /// Groups of records tied together (deterministic label propagation).
    Clusters(ClustersArgs),
    /// Declare and list relation types.
    RelationType {
        #[command(subcommand)]
        command: RelationTypeCommand,
    },
}

#[derive(Debug, Args)]
pub struct RelateArgs {
    /// Source: #42 / 42 (a record) or an entity name.
    pub(crate) src: String,
    /// Relation type: requires, affects, part_of, supersedes, relates, mentions, or a declared one.
    pub(crate) relation: String,
    /// Destination: #42 / 42 (a record) or an entity name.
    pub(crate) dst: String,
    /// Valid from (default now): RFC 3339, a date, or an age like 7d.
    #[arg(long, value_name = "TIME")]
    pub(crate) from: Option<String>,
    /// Valid until (exclusive).
    #[arg(long, value_name = "TIME")]
    pub(crate) to: Option<String>,
    /// Keep the edge in quarantine when an end does not resolve yet, instead of refusing it.
    #[arg(long)]
    pub(crate) allow_dangling: bool,
    /// 0..1 (default 1).
    #[arg(long)]
    pub(crate) confidence: Option<f64>,
}

#[derive(Debug, Args)]
pub struct UnrelateArgs {
    pub(crate) src: String,
    pub(crate) relation: String,
    pub(crate) dst: String,
    /// When it stopped holding (default now).
    #[arg(long, value_name = "TIME")]
    pub(crate) at: Option<String>,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The graph as it was then (default now).
    #[arg(long, value_name = "TIME")]
    pub(crate) as_of: Option<String>,
    /// Only this relation type.
    #[arg(long)]
    pub(crate) relation: Option<String>,
    /// Edges listed (0 = all; counts always cover every edge).
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
}

#[derive(Debug, Args)]
pub struct EdgesArgs {
    pub(crate) node: String,
    /// Every validity interval and every log entry, closed ones too.
    #[arg(long)]
    pub(crate) history: bool,
    #[arg(long, value_name = "TIME")]
    pub(crate) as_of: Option<String>,
}

#[derive(Debug, Args)]
pub struct NeighborsArgs {
    pub(crate) node: String,
    /// in: what depends on X (breaks if it changes); out: what X depends on; both.
    #[arg(long, default_value = "both", value_parser = values::direction())]
    pub(crate) direction: Direction,
    #[arg(long, default_value_t = 2)]
    pub(crate) depth: u32,
    #[arg(long, value_name = "TIME")]
    pub(crate) as_of: Option<String>,
    /// Neighbours shown (0 = all reached).
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
}

#[derive(Debug, Args)]
pub struct EntitiesArgs {
    /// Only this type (path, url, code, tag, handle, name, or one you gave).
    #[arg(long = "type")]
    pub(crate) entity_type: Option<String>,
    /// 0 = all.
    #[arg(long, default_value_t = 100)]
    pub(crate) limit: usize,
}

#[derive(Debug, Subcommand)]
pub enum EntityCommand {
    /// Create an entity (or add aliases to the one with that name).
    Add {
        name: String,
        #[arg(long = "type", default_value = "thing")]
        entity_type: String,
        /// Other names it goes by (repeatable, or comma-separated).
        #[arg(long = "alias", value_delimiter = ',')]
        aliases: Vec<String>,
    },
    /// Re-extract the entities of every record (once after upgrading a brain from before the
    /// graph; idempotent).
    Relink,
}

#[derive(Debug, Args)]
pub struct ClustersArgs {
    /// Smallest cluster shown.
    #[arg(long, default_value_t = 4)]
    pub(crate) min_size: usize,
    /// Most clusters shown, largest first.
    #[arg(long, default_value_t = 8)]
    pub(crate) max: usize,
}

#[derive(Debug, Subcommand)]
pub enum RelationTypeCommand {
    /// Allow a new relation type in `relate`.
    Declare {
        name: String,
        /// Weight in the blast radius, 0..1 (default 0.5).
        #[arg(long)]
        weight: Option<f64>,
        /// A TYPE B means B TYPE A too (walked both ways).
        #[arg(long)]
        symmetric: bool,
        #[arg(long)]
        description: Option<String>,
    },
    /// Every relation type with its weight.
    List,
}

pub fn run(settings: &Settings, command: &GraphCommand) -> Result<ExitCode> {
    match command {
        GraphCommand::Relate(relate) => {
            let mut engine = settings.open("cli")?;
            let outcome = engine.relate(&RelateRequest {
                src: relate.src.clone(),
                relation: relate.relation.clone(),
                dst: relate.dst.clone(),
                from: relate.from.clone(),
                to: relate.to.clone(),
                allow_dangling: relate.allow_dangling,
                confidence: relate.confidence,
            })?;
            print_related(settings, &outcome);
        }
        GraphCommand::Unrelate(unrelate) => {
            let mut engine = settings.open("cli")?;
            let outcome = engine.unrelate(
                &unrelate.src,
                &unrelate.relation,
                &unrelate.dst,
                unrelate.at.as_deref(),
            )?;
            print_unrelated(settings, &outcome);
        }
        GraphCommand::Graph(graph) => {
            let engine = settings.open("cli")?;
            let answer = engine.graph(&GraphRequest {
                as_of: graph.as_of.clone(),
                limit: graph.limit,
                relation: graph.relation.clone(),
            })?;
            print_graph(settings, &answer);
        }
        GraphCommand::Edges(edges) => {
            let engine = settings.open("cli")?;
            let answer = engine.edges(&edges.node, edges.history, edges.as_of.as_deref())?;
            print_edges(settings, &answer);
        }
        GraphCommand::Neighbors(neighbors) => {
            let engine = settings.open("cli")?;
            let mut request = NeighborsRequest::new(neighbors.node.clone());
            request.direction = neighbors.direction;
            request.depth = neighbors.depth;
            request.as_of = neighbors.as_of.clone();
            request.limit = neighbors.limit;
            print_neighbors(settings, &engine.neighbors(&request)?);
        }
        GraphCommand::Entities(entities) => {
            let engine = settings.open("cli")?;
            let list = engine.entities(&EntitiesRequest {
                entity_type: entities.entity_type.clone(),
                limit: entities.limit,
            })?;
            print_entities(settings, &list);
        }
        GraphCommand::Entity { command } => match command {
            EntityCommand::Relink => {
                let mut engine = settings.open("cli")?;
                let (records, written) = engine.relink_records()?;
                print_relinked(settings, records, written);
            }
            EntityCommand::Add {
                name,
                entity_type,
                aliases,
            } => {
                let mut engine = settings.open("cli")?;
                print_entity_added(settings, &engine.add_entity(name, entity_type, aliases)?);
            }
        },
        GraphCommand::Clusters(clusters) => {
            let engine = settings.open("cli")?;
            let answer = engine.clusters(&ClustersRequest {
                min_size: clusters.min_size,
                max: clusters.max,
            })?;
            print_clusters(settings, &answer, clusters.min_size);
        }
        GraphCommand::RelationType { command } => match command {
            RelationTypeCommand::Declare {
                name,
                weight,
                symmetric,
                description,
            } => {
                let mut engine = settings.open("cli")?;
                let declared = engine.declare_relation_type(
                    name,
                    *weight,
                    *symmetric,
                    description.as_deref(),
                )?;
                print_declared(settings, &declared);
            }
            RelationTypeCommand::List => {
                let engine = settings.open("cli")?;
                print_relation_types(settings, &engine.relation_types()?);
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

// The printers, shared with the remote client (`remote::graph`): one answer, one way to print.

pub(crate) fn print_related(settings: &Settings, outcome: &RelateOutcome) {
    if settings.json {
        print_json(outcome);
        return;
    }
    match outcome.status {
        RelateStatus::Asserted => outln!("related: {}", outcome.message),
        RelateStatus::AlreadyAsserted | RelateStatus::Quarantined => {
            outln!("{}", outcome.message)
        }
    }
}

pub(crate) fn print_unrelated(settings: &Settings, outcome: &UnrelateOutcome) {
    if settings.json {
        print_json(outcome);
        return;
    }
    match outcome.status {
        UnrelateStatus::Invalidated => outln!("unrelated: {}", outcome.message),
        UnrelateStatus::NothingOpen => outln!("{}", outcome.message),
    }
}

pub(crate) fn print_graph(settings: &Settings, answer: &GraphAnswer) {
    if settings.json {
        print_json(answer);
        return;
    }
    outln!(
        "graph as of {}: {} edges between {} records and {} entities",
        answer.as_of,
        answer.edges,
        answer.records,
        answer.entities
    );
    for count in &answer.by_relation {
        outln!("  {:<14} {}", count.relation, count.edges);
    }
    if let Some(note) = &answer.note {
        outln!("{note}");
    }
    if !answer.listed.is_empty() {
        if answer.listed.len() < answer.edges {
            outln!(
                "first {} of {} edges (--limit 0 lists all):",
                answer.listed.len(),
                answer.edges
            );
        } else {
            outln!("edges:");
        }
        for edge in &answer.listed {
            outln!("  {}", edge.line());
        }
    }
}

pub(crate) fn print_edges(settings: &Settings, answer: &EdgesAnswer) {
    if settings.json {
        print_json(answer);
        return;
    }
    outln!(
        "{}: {} edge(s) valid as of {}",
        answer.node.describe(),
        answer.edges.len(),
        answer.as_of
    );
    for edge in &answer.edges {
        outln!("  {}", edge.line());
    }
    if let Some(intervals) = &answer.intervals {
        outln!("every interval ({}):", intervals.len());
        for edge in intervals {
            outln!("  {}", edge.line());
        }
    }
    if let Some(history) = &answer.history {
        outln!("edge log ({} entries, in fold order):", history.len());
        for entry in history {
            let when = match (&entry.valid_from, &entry.valid_to) {
                (Some(from), _) => format!("valid from {from}"),
                (_, Some(to)) => format!("valid until {to}"),
                _ => String::new(),
            };
            outln!(
                "  #{:<5} {} {:<10} {} {} {}  {when} ({})",
                entry.seq,
                entry.recorded_at,
                entry.op,
                entry.src.name,
                entry.relation,
                entry.dst.name,
                entry.origin
            );
        }
    }
}

pub(crate) fn print_neighbors(settings: &Settings, answer: &NeighborsAnswer) {
    if settings.json {
        print_json(answer);
        return;
    }
    let direction = match answer.direction {
        Direction::In => "incoming edges: what depends on it",
        Direction::Out => "outgoing edges: what it depends on",
        Direction::Both => "both directions",
    };
    outln!(
        "{} — {direction}, depth {}, as of {}: {} reached{}",
        answer.origin.describe(),
        answer.depth,
        answer.as_of,
        answer.reached,
        if answer.truncated {
            " (walk cut at the node budget)"
        } else {
            ""
        }
    );
    for n in &answer.neighbors {
        let edge = if n.edge == "out" {
            format!("{} {} {}", n.via.name, n.relation, n.node.name)
        } else {
            format!("{} {} {}", n.node.name, n.relation, n.via.name)
        };
        outln!(
            "  {:.3}  hop {}  {}   via: {}",
            n.score,
            n.hop,
            n.node.describe(),
            edge
        );
    }
    if answer.neighbors.len() < answer.reached {
        outln!(
            "  … {} more (--limit 0 shows all)",
            answer.reached - answer.neighbors.len()
        );
    }
    if let Some(note) = &answer.note {
        outln!("{note}");
    }
}

pub(crate) fn print_entities(settings: &Settings, list: &[EntityView]) {
    if settings.json {
        print_json(&list);
    } else if list.is_empty() {
        outln!(
            "no entities yet (they are extracted from what you remember, or added with `cairn entity add`)"
        );
    } else {
        for entity in list {
            let aliases = if entity.aliases.is_empty() {
                String::new()
            } else {
                format!("  aliases: {}", entity.aliases.join(", "))
            };
            outln!(
                "{:>6} mentions  {:<8} {}{aliases}",
                entity.mentions,
                entity.entity_type,
                snippet(&entity.name, 80)
            );
        }
    }
}

pub(crate) fn print_entity_added(settings: &Settings, added: &EntityAdded) {
    if settings.json {
        print_json(added);
    } else {
        outln!("{}", added.message);
    }
}

/// `clusters`' answer (`min_size`: the size asked for, said in the text's first line).
pub(crate) fn print_clusters(settings: &Settings, answer: &ClustersAnswer, min_size: usize) {
    if settings.json {
        print_json(answer);
        return;
    }
    outln!(
        "{} cluster(s) of {}+ records among {} records (label propagation {} after {} round(s))",
        answer.found,
        min_size,
        answer.records,
        if answer.converged {
            "converged"
        } else {
            "stopped at the round limit"
        },
        answer.rounds
    );
    for cluster in &answer.clusters {
        outln!(
            "cluster #{} · {} records · member_hash {}",
            cluster.id,
            cluster.size,
            cluster
                .member_hash
                .get(..16)
                .unwrap_or(&cluster.member_hash)
        );
        for member in &cluster.members {
            outln!("  #{:<6} {}", member.id, snippet(&member.title, 80));
        }
    }
    if answer.found > answer.clusters.len() {
        outln!(
            "… {} more (--max shows more)",
            answer.found - answer.clusters.len()
        );
    }
}

/// `entity relink`'s answer.
pub(crate) fn print_relinked(settings: &Settings, records: usize, written: usize) {
    if settings.json {
        print_json(
            &serde_json::json!({"status": "relinked", "records": records, "edges_written": written}),
        );
    } else {
        outln!("re-extracted the entities of {records} records: {written} edge operations written");
    }
}

/// `relation-type declare`'s answer.
pub(crate) fn print_declared(settings: &Settings, declared: &RelationTypeRow) {
    if settings.json {
        print_json(&serde_json::json!({"status": "declared", "relation_type": declared}));
    } else {
        outln!(
            "declared relation type {} (weight {}{})",
            declared.name,
            declared.weight,
            if declared.symmetric {
                ", symmetric"
            } else {
                ""
            }
        );
    }
}

/// `relation-type list`'s answer.
pub(crate) fn print_relation_types(settings: &Settings, types: &[RelationTypeRow]) {
    if settings.json {
        print_json(&types);
        return;
    }
    for t in types {
        outln!(
            "{:<14} weight {:.1}{}{}  {}",
            t.name,
            t.weight,
            if t.symmetric { " symmetric" } else { "" },
            if t.builtin { " built-in" } else { " declared" },
            t.description.as_deref().unwrap_or("")
        );
    }
}
