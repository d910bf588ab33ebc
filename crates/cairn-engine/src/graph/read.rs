//! Reading the graph: neighbours (the blast radius), the whole graph at a time, one node's
//! edges and their history, entities, clusters, and the neighbourhood of files for the brief.

use super::{EdgeView, NodeView, node_view, resolve_endpoint, unresolved};
use crate::{Engine, EngineError, Result};
use cairn_core::graph::blast::{self, Adjacent};
use cairn_core::graph::cluster;
use cairn_core::graph::extract::entity_key;
use cairn_core::graph::{DEFAULT_DECLARED_WEIGHT, Node, NodeKind};
use cairn_core::time::{format_ts, parse_time};
use cairn_store::{EdgeKey, Reader};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Most nodes a blast-radius walk reaches before it stops (and says it was cut).
pub const DEFAULT_MAX_NODES: usize = 500;

/// Most edges a blast-radius walk examines before it stops (and says it was cut).
pub const DEFAULT_MAX_EDGES: usize = 5_000;

/// Which edges a walk follows from a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Edges pointing at the node: what depends on it — what breaks if it changes.
    In,
    /// Edges leaving the node: what it depends on.
    Out,
    Both,
}

impl std::str::FromStr for Direction {
    type Err = EngineError;
    fn from_str(text: &str) -> Result<Direction> {
        match text.trim().to_ascii_lowercase().as_str() {
            "in" | "incoming" => Ok(Direction::In),
            "out" | "outgoing" => Ok(Direction::Out),
            "both" | "any" => Ok(Direction::Both),
            other => Err(EngineError::Invalid(format!(
                "unknown direction {other:?}: use in (what breaks if it changes), out (what it depends on) or both"
            ))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NeighborsRequest {
    /// `#42`, `42`, or an entity's name or alias.
    pub node: String,
    pub direction: Direction,
    /// Hops (default 2).
    pub depth: u32,
    /// The graph as of this time (default now).
    pub as_of: Option<String>,
    /// Most neighbours returned (default 20; 0 = all reached).
    pub limit: usize,
    /// Most nodes the walk reaches before it stops (default 500).
    pub max_nodes: usize,
    /// Most edges the walk examines before it stops (default 5,000): bounds the work a
    /// neighbourhood full of hubs costs, so a walk can sit in the hot path.
    pub max_edges: usize,
}

impl NeighborsRequest {
    pub fn new(node: impl Into<String>) -> NeighborsRequest {
        NeighborsRequest {
            node: node.into(),
            direction: Direction::Both,
            depth: 2,
            as_of: None,
            limit: 20,
            max_nodes: DEFAULT_MAX_NODES,
            max_edges: DEFAULT_MAX_EDGES,
        }
    }
}

/// One node the walk reached.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Neighbor {
    pub node: NodeView,
    pub hop: u32,
    /// Product of the edge weights along the path, × 0.3 per hop after the first.
    pub score: f64,
    /// The node it was reached from.
    pub via: NodeView,
    pub relation: String,
    /// `out` when the edge goes from `via` to `node`, `in` when from `node` to `via`.
    pub edge: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NeighborsAnswer {
    pub origin: NodeView,
    pub direction: Direction,
    pub depth: u32,
    pub as_of: String,
    /// Everything the walk reached (the list below may be cut by `limit`).
    pub reached: usize,
    /// True when the walk stopped at `max_nodes`.
    pub truncated: bool,
    pub neighbors: Vec<Neighbor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct GraphRequest {
    pub as_of: Option<String>,
    /// Edges listed (default 50; 0 = all). Counts always cover every edge.
    pub limit: usize,
    pub relation: Option<String>,
}

impl Default for GraphRequest {
    fn default() -> GraphRequest {
        GraphRequest {
            as_of: None,
            limit: 50,
            relation: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RelationCount {
    pub relation: String,
    pub edges: usize,
}

/// The graph valid at one time: the fold of the edge log, evaluated at `as_of`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphAnswer {
    pub as_of: String,
    pub edges: usize,
    pub records: usize,
    pub entities: usize,
    pub by_relation: Vec<RelationCount>,
    /// The first edges in (source, relation, destination) order, up to the limit.
    pub listed: Vec<EdgeView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One entry of the edge log, as shown.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogView {
    pub seq: i64,
    pub op: String,
    pub src: NodeView,
    pub relation: String,
    pub dst: NodeView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<String>,
    pub recorded_at: String,
    pub confidence: f64,
    pub origin: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EdgesAnswer {
    pub node: NodeView,
    pub as_of: String,
    /// Edges touching the node that are valid at `as_of`.
    pub edges: Vec<EdgeView>,
    /// With history: every validity interval, closed ones too…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Vec<EdgeView>>,
    /// …and every log entry touching the node, in the order the fold applies them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<LogView>>,
}

#[derive(Debug, Clone, Default)]
pub struct EntitiesRequest {
    pub entity_type: Option<String>,
    /// Default 100; 0 = all.
    pub limit: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntityView {
    pub id: i64,
    pub name: String,
    #[serde(rename = "type")]
    pub entity_type: String,
    pub key: String,
    pub aliases: Vec<String>,
    /// Records whose text mentions it now.
    pub mentions: i64,
    pub created_at: String,
}

#[derive(Debug, Clone)]
pub struct ClustersRequest {
    /// Smallest cluster shown (default 4).
    pub min_size: usize,
    /// Most clusters shown, largest first (default 8).
    pub max: usize,
}

impl Default for ClustersRequest {
    fn default() -> ClustersRequest {
        ClustersRequest {
            min_size: 4,
            max: 8,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterMember {
    pub id: i64,
    pub title: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClusterView {
    /// The smallest member's id.
    pub id: i64,
    pub size: usize,
    /// SHA-256 over the sorted members and their content hashes.
    pub member_hash: String,
    pub members: Vec<ClusterMember>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClustersAnswer {
    /// Records that went in (active, this project and personal, not generated).
    pub records: usize,
    /// Clusters of at least `min_size` (before `max` cut the list).
    pub found: usize,
    pub rounds: usize,
    pub converged: bool,
    pub clusters: Vec<ClusterView>,
}

/// What the graph knows about one file the working tree touches.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PathNeighbourhood {
    pub path: String,
    /// Path entities naming this file (same path, or one is a suffix of the other).
    pub entities: Vec<NodeView>,
    /// Records tied to them, best first.
    pub records: Vec<Neighbor>,
}

/// Entities linked to more records than this say little about which records belong together
/// (a tag on half the brain); clustering does not join records through them.
pub const CLUSTER_HUB_LIMIT: usize = 50;

/// Relation name → (blast-radius weight, symmetric).
fn relation_weights(reader: &Reader<'_>) -> Result<HashMap<String, (f64, bool)>> {
    Ok(reader
        .relation_types()?
        .into_iter()
        .map(|r| (r.name, (r.weight, r.symmetric)))
        .collect())
}

impl Engine {
    fn graph_time(&self, as_of: Option<&str>) -> Result<String> {
        let now = self.now();
        Ok(match as_of {
            Some(at) => format_ts(parse_time(at, now)?),
            None => format_ts(now),
        })
    }

    fn resolve_visible(&self, text: &str) -> Result<Node> {
        resolve_endpoint(&self.store.reader()?, text, Some(&self.context.project))?
            .ok_or_else(|| unresolved(text))
    }

    fn note_before_history(&self, at: &str) -> Result<Option<String>> {
        Ok(match self.store.reader()?.first_valid_from()? {
            None => Some("the graph is empty: nothing has been related yet".to_string()),
            Some(first) if at < first.as_str() => Some(format!(
                "nothing was valid at {at}: the earliest edge is valid from {first}"
            )),
            Some(_) => None,
        })
    }

    /// The blast radius of a record or entity (docs/design.md §7).
    pub fn neighbors(&self, request: &NeighborsRequest) -> Result<NeighborsAnswer> {
        let origin = self.resolve_visible(&request.node)?;
        self.neighbors_of(origin, request)
    }

    fn neighbors_of(&self, origin: Node, request: &NeighborsRequest) -> Result<NeighborsAnswer> {
        let at = self.graph_time(request.as_of.as_deref())?;
        let reader = self.store.reader()?;
        let weights = relation_weights(&reader)?;
        let project = self.context.project.clone();
        let mut visibility: HashMap<i64, bool> = HashMap::new();
        let direction = request.direction;
        let budget = request.max_nodes.max(1);
        // Relations heaviest first: when a hub has more edges than the walk can take, the
        // strong ones (requires, affects) are never crowded out by thousands of mentions.
        let mut by_weight: Vec<(&String, f64)> =
            weights.iter().map(|(name, (w, _))| (name, *w)).collect();
        by_weight.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let symmetric: Vec<&String> = by_weight
            .iter()
            .filter(|(name, _)| weights.get(*name).is_some_and(|(_, s)| *s))
            .map(|(name, _)| *name)
            .collect();
        let fetch = |node: Node, outgoing: bool| -> Result<Vec<cairn_store::AdjacentRow>> {
            let limit = budget + 1;
            let rows = reader.adjacent(node, &at, outgoing, None, limit)?;
            if rows.len() < limit {
                return Ok(rows);
            }
            let mut rows = Vec::with_capacity(limit);
            for (relation, _) in &by_weight {
                if rows.len() >= limit {
                    break;
                }
                rows.extend(reader.adjacent(
                    node,
                    &at,
                    outgoing,
                    Some(relation.as_str()),
                    limit - rows.len(),
                )?);
            }
            Ok(rows)
        };
        let limits = blast::Limits {
            max_nodes: budget,
            max_edges: request.max_edges.max(1),
        };
        let radius = blast::blast_radius(origin, request.depth, limits, |node| {
            let mut rows = Vec::new();
            if direction != Direction::In {
                rows.extend(fetch(node, true)?);
            }
            if direction != Direction::Out {
                rows.extend(fetch(node, false)?);
            }
            // Symmetric relations read the same both ways: walked whatever the direction.
            if direction != Direction::Both {
                for relation in &symmetric {
                    rows.extend(reader.adjacent(
                        node,
                        &at,
                        direction == Direction::In,
                        Some(relation.as_str()),
                        budget + 1,
                    )?);
                }
            }
            // Records of other projects are not walked into (looked up once per walk, in
            // one statement per batch of unknown ids).
            let unknown: Vec<i64> = rows
                .iter()
                .filter(|row| row.other.kind == NodeKind::Record)
                .map(|row| row.other.id)
                .filter(|id| !visibility.contains_key(id))
                .collect::<std::collections::BTreeSet<i64>>()
                .into_iter()
                .collect();
            if !unknown.is_empty() {
                let hidden: HashSet<i64> = reader
                    .hidden_among(&unknown, &project)?
                    .into_iter()
                    .collect();
                for id in unknown {
                    visibility.insert(id, !hidden.contains(&id));
                }
            }
            let kept: Vec<_> = rows
                .into_iter()
                .filter(|row| {
                    row.other.kind != NodeKind::Record
                        || visibility.get(&row.other.id).copied().unwrap_or(true)
                })
                .collect();
            Ok::<_, EngineError>(
                kept.into_iter()
                    .map(|row| {
                        let weight = weights
                            .get(&row.relation)
                            .map_or(DEFAULT_DECLARED_WEIGHT, |(w, _)| *w);
                        Adjacent {
                            node: row.other,
                            weight: weight * row.confidence,
                            relation: row.relation,
                            forward: row.outgoing,
                        }
                    })
                    .collect(),
            )
        })?;
        let reached = radius.reached.len();
        let take = if request.limit == 0 {
            reached
        } else {
            request.limit.min(reached)
        };
        let mut views: HashMap<Node, NodeView> = HashMap::new();
        let mut view = |node: Node| -> Result<NodeView> {
            if let Some(v) = views.get(&node) {
                return Ok(v.clone());
            }
            let v = node_view(&reader, node)?;
            views.insert(node, v.clone());
            Ok(v)
        };
        let origin_view = view(origin)?;
        let mut neighbors = Vec::with_capacity(take);
        for r in radius.reached.iter().take(take) {
            neighbors.push(Neighbor {
                node: view(r.node)?,
                hop: r.hop,
                score: (r.score * 1e6).round() / 1e6,
                via: view(r.via)?,
                relation: r.relation.clone(),
                edge: if r.forward { "out" } else { "in" }.to_string(),
            });
        }
        let note = if neighbors.is_empty() {
            let asked_about_the_past = request.as_of.is_some();
            let before = if asked_about_the_past {
                self.note_before_history(&at)?
            } else {
                None
            };
            before.or_else(|| {
                Some(format!(
                    "nothing is connected to {} ({}) as of {at}",
                    origin_view.name,
                    match direction {
                        Direction::In => "incoming edges",
                        Direction::Out => "outgoing edges",
                        Direction::Both => "either direction",
                    }
                ))
            })
        } else {
            None
        };
        Ok(NeighborsAnswer {
            origin: origin_view,
            direction,
            depth: request.depth,
            as_of: at,
            reached,
            truncated: radius.truncated,
            neighbors,
            note,
        })
    }

    /// The graph as it was at `as_of` (default now): counts, and the first edges listed.
    pub fn graph(&self, request: &GraphRequest) -> Result<GraphAnswer> {
        let at = self.graph_time(request.as_of.as_deref())?;
        let reader = self.store.reader()?;
        let relation = request
            .relation
            .as_deref()
            .map(cairn_core::graph::normalize_relation)
            .transpose()
            .map_err(|e| EngineError::Invalid(e.to_string()))?;
        // Records of other projects, as a bitset over ids.
        let mut hidden: Vec<u64> = Vec::new();
        for id in reader.hidden_record_ids(&self.context.project)? {
            set_bit(&mut hidden, id);
        }
        let take = if request.limit == 0 {
            usize::MAX
        } else {
            request.limit
        };
        let mut records_seen: Vec<u64> = Vec::new();
        let mut entities_seen: Vec<u64> = Vec::new();
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut listed_keys: Vec<(EdgeKey, i64)> = Vec::new();
        let mut last: Option<(Node, String, Node)> = None;
        let mut edges = 0usize;
        reader.for_each_valid_edge(&at, |src, rel, dst, id| {
            if relation.as_deref().is_some_and(|r| r != rel)
                || [src, dst]
                    .iter()
                    .any(|n| n.kind == NodeKind::Record && has_bit(&hidden, n.id))
            {
                return;
            }
            // Intervals of one edge can overlap (re-asserted from an earlier date after an
            // invalidate); they arrive together, and the edge counts once.
            if let Some((s, r, d)) = &last
                && *s == src
                && r == rel
                && *d == dst
            {
                if let Some(listed) = listed_keys.last_mut()
                    && listed.0.src == src
                    && listed.0.relation == rel
                    && listed.0.dst == dst
                {
                    listed.1 = listed.1.max(id);
                }
                return;
            }
            last = Some((src, rel.to_string(), dst));
            edges += 1;
            for node in [src, dst] {
                match node.kind {
                    NodeKind::Record => set_bit(&mut records_seen, node.id),
                    NodeKind::Entity => set_bit(&mut entities_seen, node.id),
                }
            }
            match counts.iter_mut().find(|(name, _)| name == rel) {
                Some((_, count)) => *count += 1,
                None => counts.push((rel.to_string(), 1)),
            }
            if listed_keys.len() < take {
                listed_keys.push((
                    EdgeKey {
                        src,
                        relation: rel.to_string(),
                        dst,
                    },
                    id,
                ));
            }
        })?;
        counts.sort();
        let by_relation = counts
            .into_iter()
            .map(|(relation, edges)| RelationCount { relation, edges })
            .collect();
        let popcount = |bits: &[u64]| bits.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        let records = popcount(&records_seen);
        let entities = popcount(&entities_seen);
        let mut listed = Vec::with_capacity(listed_keys.len());
        for (key, id) in &listed_keys {
            let row = reader.interval(*id)?;
            let (from, to, confidence) = row.map_or((String::new(), None, 1.0), |r| {
                (r.valid_from, r.valid_to, r.confidence)
            });
            listed.push(EdgeView::from_key(&reader, key, from, to, confidence)?);
        }
        let note = if edges == 0 {
            self.note_before_history(&at)?
        } else {
            None
        };
        Ok(GraphAnswer {
            as_of: at,
            edges,
            records,
            entities,
            by_relation,
            listed,
            note,
        })
    }

    /// The edges touching one node valid at `as_of`; with `history`, every interval and every
    /// log entry too.
    pub fn edges(&self, node: &str, history: bool, as_of: Option<&str>) -> Result<EdgesAnswer> {
        let origin = self.resolve_visible(node)?;
        let at = self.graph_time(as_of)?;
        let reader = self.store.reader()?;
        let project = self.context.project.clone();
        let visible = |key: &EdgeKey| {
            [key.src, key.dst].iter().all(|n| {
                n.kind != NodeKind::Record || reader.record_visible(n.id, &project).unwrap_or(false)
            })
        };
        let rows = reader.intervals_touching(origin)?;
        let mut edges = Vec::new();
        let mut intervals = Vec::new();
        for row in rows.iter().filter(|r| visible(&r.key)) {
            let view = EdgeView::from_key(
                &reader,
                &row.key,
                row.valid_from.clone(),
                row.valid_to.clone(),
                row.confidence,
            )?;
            // Overlapping intervals of one edge: the latest one stands for it.
            if row.to_interval().valid_at(&at) {
                if edges.last().is_some_and(|last: &EdgeView| {
                    last.src == view.src && last.relation == view.relation && last.dst == view.dst
                }) {
                    edges.pop();
                }
                edges.push(view.clone());
            }
            if history {
                intervals.push(view);
            }
        }
        let history = if history {
            let mut entries = Vec::new();
            for entry in reader
                .log_touching(origin)?
                .into_iter()
                .filter(|e| visible(&e.key))
            {
                entries.push(LogView {
                    seq: entry.seq,
                    op: entry.op,
                    src: node_view(&reader, entry.key.src)?,
                    relation: entry.key.relation,
                    dst: node_view(&reader, entry.key.dst)?,
                    valid_from: entry.valid_from,
                    valid_to: entry.valid_to,
                    recorded_at: entry.recorded_at,
                    confidence: entry.confidence,
                    origin: entry.origin,
                });
            }
            Some(entries)
        } else {
            None
        };
        Ok(EdgesAnswer {
            node: node_view(&reader, origin)?,
            as_of: at,
            edges,
            intervals: history.as_ref().map(|_| intervals),
            history,
        })
    }

    /// Entities, most mentioned first (then by name).
    pub fn entities(&self, request: &EntitiesRequest) -> Result<Vec<EntityView>> {
        let reader = self.store.reader()?;
        let entity_type = request
            .entity_type
            .as_deref()
            .map(|t| t.trim().to_lowercase());
        let rows = reader.entities(entity_type.as_deref(), 0)?;
        let counts = reader.mention_counts()?;
        let mut views: Vec<EntityView> = rows
            .into_iter()
            .map(|e| EntityView {
                mentions: counts.get(&e.id).copied().unwrap_or(0),
                id: e.id,
                name: e.name,
                entity_type: e.entity_type,
                key: e.key,
                aliases: Vec::new(),
                created_at: e.created_at,
            })
            .collect();
        views.sort_by(|a, b| b.mentions.cmp(&a.mentions).then_with(|| a.key.cmp(&b.key)));
        let limit = if request.limit == 0 {
            views.len()
        } else {
            request.limit
        };
        views.truncate(limit);
        for view in &mut views {
            view.aliases = reader.aliases(view.id)?;
        }
        Ok(views)
    }

    /// Deterministic label-propagation clusters of this project's active records (and personal
    /// ones), generated records excluded (docs/design.md §7).
    pub fn clusters(&self, request: &ClustersRequest) -> Result<ClustersAnswer> {
        let reader = self.store.reader()?;
        let at = format_ts(self.now());
        let nodes = reader.cluster_candidates(&self.context.project)?;
        let members: HashSet<i64> = nodes.iter().map(|(id, _)| *id).collect();
        let mut pairs: Vec<(i64, i64)> = Vec::new();
        let mut by_entity: HashMap<i64, Vec<i64>> = HashMap::new();
        for (src, _, dst) in reader.record_edges_valid_at(&at)? {
            match (src.kind, dst.kind) {
                (NodeKind::Record, NodeKind::Record)
                    if members.contains(&src.id) && members.contains(&dst.id) =>
                {
                    pairs.push((src.id, dst.id));
                }
                (NodeKind::Record, NodeKind::Entity) if members.contains(&src.id) => {
                    by_entity.entry(dst.id).or_default().push(src.id);
                }
                (NodeKind::Entity, NodeKind::Record) if members.contains(&dst.id) => {
                    by_entity.entry(src.id).or_default().push(dst.id);
                }
                _ => {}
            }
        }
        for records in by_entity.values_mut() {
            records.sort_unstable();
            records.dedup();
            if records.len() < 2 || records.len() > CLUSTER_HUB_LIMIT {
                continue;
            }
            for (i, a) in records.iter().enumerate() {
                for b in &records[i + 1..] {
                    pairs.push((*a, *b));
                }
            }
        }
        let clustering = cluster::clusters(&nodes, &pairs);
        let big: Vec<&cluster::Cluster> = clustering
            .clusters
            .iter()
            .filter(|c| c.members.len() >= request.min_size.max(1))
            .collect();
        let found = big.len();
        let mut clusters = Vec::new();
        for c in big.into_iter().take(request.max) {
            let mut shown = Vec::with_capacity(c.members.len());
            for id in &c.members {
                let title = reader
                    .record_node(*id)?
                    .map(|(_, _, _, t)| t)
                    .unwrap_or_default();
                let title: String = title.split_whitespace().collect::<Vec<_>>().join(" ");
                shown.push(ClusterMember {
                    id: *id,
                    title: title.chars().take(80).collect(),
                });
            }
            clusters.push(ClusterView {
                id: c.id,
                size: c.members.len(),
                member_hash: c.member_hash.clone(),
                members: shown,
            });
        }
        Ok(ClustersAnswer {
            records: nodes.len(),
            found,
            rounds: clustering.rounds,
            converged: clustering.converged,
            clusters,
        })
    }

    /// For the brief: what the graph ties to each of these files (paths relative to the
    /// repository root, as git prints them). A file matches path entities with the same path,
    /// or where one is a suffix of the other at a `/` (a note saying `src/lib.rs` matches
    /// `crates/x/src/lib.rs`). Up to `per_path` records each, best first; files the graph
    /// knows nothing about are left out. Each walk is small (depth 2, at most
    /// `max(4 × per_path, 20)` nodes and 500 edges), so a file mentioned by thousands of
    /// records costs about what a quiet one does.
    pub fn neighbourhood_of_paths(
        &self,
        paths: &[String],
        as_of: Option<&str>,
        per_path: usize,
    ) -> Result<Vec<PathNeighbourhood>> {
        let reader = self.store.reader()?;
        let known = reader.entity_keys_of_type("path")?;
        let as_of_text = self.graph_time(as_of)?;
        let mut answer = Vec::new();
        for path in paths {
            let key = entity_key(path);
            if key.is_empty() {
                continue;
            }
            let matched: Vec<i64> = known
                .iter()
                .filter(|(_, k)| *k == key || suffix_at_slash(&key, k) || suffix_at_slash(k, &key))
                .map(|(id, _)| *id)
                .collect();
            if matched.is_empty() {
                continue;
            }
            let mut best: BTreeMap<i64, Neighbor> = BTreeMap::new();
            let mut entities = Vec::new();
            for id in matched {
                entities.push(node_view(&reader, Node::entity(id))?);
                let mut request = NeighborsRequest::new(String::new());
                request.direction = Direction::In;
                request.depth = 2;
                request.as_of = Some(as_of_text.clone());
                request.limit = 0;
                // The brief calls this at session start for every changed file: a small walk
                // per file (the strongest relations are fetched first, so a file mentioned by
                // thousands of records still gives its `requires` before its `mentions`).
                request.max_nodes = (per_path * 4).max(NEIGHBOURHOOD_MIN_NODES);
                request.max_edges = NEIGHBOURHOOD_MAX_EDGES;
                let found = self.neighbors_of(Node::entity(id), &request)?;
                for neighbor in found
                    .neighbors
                    .into_iter()
                    .filter(|n| n.node.kind == NodeKind::Record)
                {
                    let better = best
                        .get(&neighbor.node.id)
                        .is_none_or(|b| neighbor.score > b.score);
                    if better {
                        best.insert(neighbor.node.id, neighbor);
                    }
                }
            }
            let mut records: Vec<Neighbor> = best.into_values().collect();
            records.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.node.id.cmp(&b.node.id)));
            records.truncate(per_path);
            answer.push(PathNeighbourhood {
                path: path.clone(),
                entities,
                records,
            });
        }
        Ok(answer)
    }
}

/// Nodes and edges one walk of [`Engine::neighbourhood_of_paths`] may take per matched file
/// entity (it runs in the session-start hook, once per changed file).
const NEIGHBOURHOOD_MIN_NODES: usize = 20;
const NEIGHBOURHOOD_MAX_EDGES: usize = 500;

/// Whether `short` is a `/`-aligned suffix of `long` (`src/lib.rs` of `crates/x/src/lib.rs`).
fn suffix_at_slash(long: &str, short: &str) -> bool {
    long.len() > short.len()
        && long.ends_with(short)
        && long.as_bytes()[long.len() - short.len() - 1] == b'/'
}

fn set_bit(bits: &mut Vec<u64>, id: i64) {
    let Ok(index) = usize::try_from(id) else {
        return;
    };
    let word = index / 64;
    if bits.len() <= word {
        bits.resize(word + 1, 0);
    }
    bits[word] |= 1 << (index % 64);
}

fn has_bit(bits: &[u64], id: i64) -> bool {
    usize::try_from(id).is_ok_and(|index| {
        bits.get(index / 64)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    })
}
