//! The blast radius (docs/design.md §7): a breadth-first walk from one node that scores everything it
//! reaches by how strongly it is tied to the start.
//!
//! A node reached over an edge scores `parent score × edge weight`, times the per-hop decay
//! 0.3 for every hop after the first, where the edge weight is the relation type's weight
//! (requires/affects 1.0, part_of 0.8, supersedes 0.6, relates 0.5, mentions 0.3) times the
//! edge's confidence. So a direct `requires` scores 1.0, a `requires` of a `requires` 0.3.
//! Each node keeps the hop at which it was first reached and the best score at that hop.
//!
//! The walk visits every node once, so cycles terminate; it stops after `depth` hops, when
//! `max_nodes` have been reached, or when it has examined `max_edges` edges (the answer says
//! it was cut). Within a hop, parents are
//! expanded strongest first, and once the hop has filled the budget, parents too weak to place
//! a child in it are not expanded at all: the answer is the same, the work on hubs is not. Which edges count — incoming,
//! outgoing, as of when — is the caller's business: it hands in `adjacent`, which is where the
//! store is read. Everything is ordered (frontier by node, ties by node then relation), so the
//! same graph always gives the same answer.

use super::Node;
use std::collections::{BTreeMap, HashSet};

/// Score kept per hop after the first.
pub const HOP_DECAY: f64 = 0.3;

/// An edge leaving a node during the walk.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjacent {
    pub node: Node,
    pub relation: String,
    /// Relation weight × confidence.
    pub weight: f64,
    /// True when the stored edge points from the walked node to `node` (src → dst).
    pub forward: bool,
}

/// One node the walk reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub node: Node,
    pub hop: u32,
    pub score: f64,
    /// The node it was reached from, and over which relation, in which direction.
    pub via: Node,
    pub relation: String,
    pub forward: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlastRadius {
    /// Best score first, then nearest, then node order.
    pub reached: Vec<Reached>,
    /// True when `max_nodes` cut the walk short.
    pub truncated: bool,
}

/// How much a walk may do before it stops and says it was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nodes reached.
    pub max_nodes: usize,
    /// Edges examined (a hub's edges count even when few of them make the answer).
    pub max_edges: usize,
}

/// Walks up to `depth` hops from `origin`; `adjacent(node)` lists the edges to follow.
pub fn blast_radius<E>(
    origin: Node,
    depth: u32,
    limits: Limits,
    mut adjacent: impl FnMut(Node) -> Result<Vec<Adjacent>, E>,
) -> Result<BlastRadius, E> {
    let max_nodes = limits.max_nodes;
    let mut examined = 0usize;
    let mut visited: HashSet<Node> = HashSet::from([origin]);
    let mut scores: BTreeMap<Node, f64> = BTreeMap::from([(origin, 1.0)]);
    let mut frontier = vec![origin];
    let mut reached = Vec::new();
    let mut truncated = false;
    for hop in 1..=depth {
        if frontier.is_empty() || truncated {
            break;
        }
        let budget = max_nodes.saturating_sub(reached.len());
        if budget == 0 {
            truncated = true;
            break;
        }
        let decay = if hop == 1 { 1.0 } else { HOP_DECAY };
        // Strongest parents first: once the level holds `budget` candidates, a parent whose
        // best possible child (weights are at most 1) scores below the weakest of them cannot
        // change the answer, and neither can any weaker parent — the walk stops there.
        frontier.sort_by(|a, b| scores[b].total_cmp(&scores[a]).then_with(|| a.cmp(b)));
        // Best candidate per new node at this hop.
        let mut candidates: BTreeMap<Node, Reached> = BTreeMap::new();
        let mut threshold: Option<f64> = None;
        let mut last_parent_score = f64::INFINITY;
        for &node in &frontier {
            let parent_score = scores[&node];
            if candidates.len() >= budget && parent_score < last_parent_score {
                last_parent_score = parent_score;
                let mut best: Vec<f64> = candidates.values().map(|r| r.score).collect();
                best.select_nth_unstable_by(budget - 1, |a, b| b.total_cmp(a));
                threshold = Some(best[budget - 1]);
            }
            if threshold.is_some_and(|t| parent_score * decay < t) || examined >= limits.max_edges {
                truncated = true;
                break;
            }
            let mut edges = adjacent(node)?;
            examined += edges.len();
            edges.sort_by(|a, b| {
                a.node
                    .cmp(&b.node)
                    .then_with(|| a.relation.cmp(&b.relation))
                    .then_with(|| a.forward.cmp(&b.forward))
            });
            for edge in edges {
                if visited.contains(&edge.node) {
                    continue;
                }
                let score = parent_score * edge.weight * decay;
                let better = candidates
                    .get(&edge.node)
                    .is_none_or(|current| score > current.score);
                if better {
                    candidates.insert(
                        edge.node,
                        Reached {
                            node: edge.node,
                            hop,
                            score,
                            via: node,
                            relation: edge.relation,
                            forward: edge.forward,
                        },
                    );
                }
            }
        }
        let mut level: Vec<Reached> = candidates.into_values().collect();
        if level.len() > budget {
            level.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then_with(|| a.node.cmp(&b.node))
            });
            level.truncate(budget);
            truncated = true;
        }
        level.sort_by_key(|r| r.node);
        frontier = level.iter().map(|r| r.node).collect();
        for r in &level {
            visited.insert(r.node);
            scores.insert(r.node, r.score);
        }
        reached.extend(level);
    }
    reached.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.hop.cmp(&b.hop))
            .then_with(|| a.node.cmp(&b.node))
    });
    Ok(BlastRadius { reached, truncated })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    /// Edges `(src, relation, weight, dst)` between records; the walk follows them backwards
    /// ("what depends on the origin"), like `--direction in`.
    fn walk(
        edges: &[(i64, &str, f64, i64)],
        origin: i64,
        depth: u32,
        max: usize,
    ) -> (Vec<String>, bool) {
        let radius = blast_radius(
            Node::record(origin),
            depth,
            Limits {
                max_nodes: max,
                max_edges: usize::MAX,
            },
            |node| {
                Ok::<_, Infallible>(
                    edges
                        .iter()
                        .filter(|(_, _, _, dst)| Node::record(*dst) == node)
                        .map(|(src, relation, weight, _)| Adjacent {
                            node: Node::record(*src),
                            relation: relation.to_string(),
                            weight: *weight,
                            forward: false,
                        })
                        .collect(),
                )
            },
        )
        .unwrap();
        let shown = radius
            .reached
            .iter()
            .map(|r| {
                format!(
                    "{} hop {} score {:.3} via {} {}",
                    r.node, r.hop, r.score, r.via, r.relation
                )
            })
            .collect();
        (shown, radius.truncated)
    }

    #[test]
    fn scores_decay_per_hop_and_weigh_by_type() {
        // 2 requires 1; 3 part_of 2; 4 relates 1
        let edges = [
            (2, "requires", 1.0, 1),
            (3, "part_of", 0.8, 2),
            (4, "relates", 0.5, 1),
        ];
        let (got, truncated) = walk(&edges, 1, 3, 100);
        assert_eq!(
            got,
            vec![
                "#2 hop 1 score 1.000 via #1 requires",
                "#4 hop 1 score 0.500 via #1 relates",
                "#3 hop 2 score 0.240 via #2 part_of",
            ]
        );
        assert!(!truncated);
    }

    #[test]
    fn cycles_terminate_and_the_origin_is_never_reached() {
        let edges = [
            (1, "requires", 1.0, 2),
            (2, "requires", 1.0, 3),
            (3, "requires", 1.0, 1),
            (1, "requires", 1.0, 1),
        ];
        let (got, _) = walk(&edges, 1, 50, 100);
        assert_eq!(
            got,
            vec![
                "#3 hop 1 score 1.000 via #1 requires",
                "#2 hop 2 score 0.300 via #3 requires",
            ]
        );
    }

    #[test]
    fn depth_limits_the_walk() {
        let edges = [
            (2, "requires", 1.0, 1),
            (3, "requires", 1.0, 2),
            (4, "requires", 1.0, 3),
        ];
        assert_eq!(walk(&edges, 1, 2, 100).0.len(), 2);
        assert_eq!(walk(&edges, 1, 0, 100).0.len(), 0);
    }

    #[test]
    fn the_best_edge_at_the_first_hop_wins() {
        // two routes to #5 at hop 2: via #2 (requires, 1.0) and via #3 (relates, 0.5)
        let edges = [
            (2, "requires", 1.0, 1),
            (3, "requires", 1.0, 1),
            (5, "relates", 0.5, 2),
            (5, "requires", 1.0, 3),
        ];
        let (got, _) = walk(&edges, 1, 3, 100);
        assert_eq!(got[2], "#5 hop 2 score 0.300 via #3 requires");
    }

    #[test]
    fn weak_parents_are_not_expanded_once_the_budget_is_full() {
        // hop 1: #2 (1.0) and #3 (0.1); hop 2: #2 brings three strong children, #3 one weak one
        let edges = [
            (2, "requires", 1.0, 1),
            (3, "relates", 0.1, 1),
            (4, "requires", 1.0, 2),
            (5, "requires", 1.0, 2),
            (6, "requires", 1.0, 2),
            (7, "requires", 1.0, 3),
        ];
        let mut expanded = Vec::new();
        let radius = blast_radius(
            Node::record(1),
            2,
            Limits {
                max_nodes: 5,
                max_edges: usize::MAX,
            },
            |node| {
                expanded.push(node);
                Ok::<_, Infallible>(
                    edges
                        .iter()
                        .filter(|(_, _, _, dst)| Node::record(*dst) == node)
                        .map(|(src, relation, weight, _)| Adjacent {
                            node: Node::record(*src),
                            relation: relation.to_string(),
                            weight: *weight,
                            forward: false,
                        })
                        .collect(),
                )
            },
        )
        .unwrap();
        assert!(radius.truncated);
        assert_eq!(expanded, vec![Node::record(1), Node::record(2)]);
        let ids: Vec<i64> = radius.reached.iter().map(|r| r.node.id).collect();
        assert_eq!(ids, vec![2, 4, 5, 6, 3]);
    }

    #[test]
    fn the_edge_budget_stops_the_walk_and_says_so() {
        let mut calls = 0;
        let radius = blast_radius(
            Node::record(0),
            3,
            Limits {
                max_nodes: 1000,
                max_edges: 10,
            },
            |node| {
                calls += 1;
                Ok::<_, Infallible>(
                    (1..=6)
                        .map(|i| Adjacent {
                            node: Node::record(node.id * 10 + i),
                            relation: "requires".into(),
                            weight: 1.0,
                            forward: true,
                        })
                        .collect(),
                )
            },
        )
        .unwrap();
        assert!(radius.truncated);
        assert_eq!(
            calls, 2,
            "the origin's 6 edges, then one child's 6: over the budget of 10"
        );
        assert_eq!(radius.reached.len(), 12);
    }

    #[test]
    fn the_node_budget_cuts_deterministically() {
        let edges: Vec<_> = (2..12)
            .map(|i| (i, "requires", 1.0 - i as f64 / 100.0, 1))
            .collect();
        let (got, truncated) = walk(&edges, 1, 3, 3);
        assert!(truncated);
        assert_eq!(
            got,
            vec![
                "#2 hop 1 score 0.980 via #1 requires",
                "#3 hop 1 score 0.970 via #1 requires",
                "#4 hop 1 score 0.960 via #1 requires",
            ]
        );
    }
}
