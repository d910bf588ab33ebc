//! Deterministic label propagation (docs/design.md §7): groups records that are tied together.
//!
//! Textbook label propagation visits nodes in random order and breaks ties at random, so two
//! runs disagree. Here every choice is fixed:
//!
//! - every node starts with its own id as label;
//! - rounds are synchronous: the labels of round `r + 1` are computed from round `r` only;
//! - nodes are visited in id order (ids are integers, so this is the lexicographic order of
//!   their zero-padded spelling);
//! - a node takes the label most of its neighbours carry; on a tie it keeps its own label when
//!   that is among the tied ones, else it takes the smallest tied label;
//! - a node that swaps between two labels (round `r + 1` gives back the labels of round
//!   `r - 1`) holds two groups together: every such node takes the smaller of its two labels;
//! - at most 20 rounds (it stops earlier when a round changes nothing);
//! - a cluster's id is its smallest member, and its `member_hash` is the SHA-256 over its
//!   sorted members and their content hashes, so an unchanged cluster provably hashes the same.
//!
//! The input is a set of nodes and undirected edges; the output depends on nothing else — not
//! on the order they are handed in — so the same graph gives byte-identical clusters.
//!
//! Synchronous rounds alone never settle where labels can swap back and forth: two nodes
//! joined only to each other swap labels every round, and so do a star's centre and leaves.
//! The swap rule above ends such a two-round cycle in one step (a pair becomes one cluster).

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Most rounds of propagation.
pub const MAX_ROUNDS: usize = 20;

/// A group of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The smallest member.
    pub id: i64,
    /// Sorted ascending.
    pub members: Vec<i64>,
    pub member_hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clustering {
    /// Largest first, then by id.
    pub clusters: Vec<Cluster>,
    pub rounds: usize,
    /// False when the round limit stopped a graph that was still changing.
    pub converged: bool,
}

/// Label of every node after propagation, and how many rounds it took.
pub fn label_propagation(nodes: &[i64], edges: &[(i64, i64)]) -> (BTreeMap<i64, i64>, usize, bool) {
    let mut ids: Vec<i64> = nodes.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let index = |id: i64| ids.binary_search(&id).ok();
    let mut adjacency: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for &(a, b) in edges {
        if let (Some(a), Some(b)) = (index(a), index(b))
            && a != b
        {
            adjacency[a].push(b);
            adjacency[b].push(a);
        }
    }
    for neighbours in &mut adjacency {
        neighbours.sort_unstable();
        neighbours.dedup();
    }
    let mut labels: Vec<i64> = ids.clone();
    // The labels of the round before `labels`, to see a two-round swap.
    let mut before: Option<Vec<i64>> = None;
    let mut rounds = 0;
    let mut converged = false;
    let mut seen: Vec<i64> = Vec::new();
    while rounds < MAX_ROUNDS {
        rounds += 1;
        let mut next = labels.clone();
        for (node, neighbours) in adjacency.iter().enumerate() {
            if neighbours.is_empty() {
                continue;
            }
            seen.clear();
            seen.extend(neighbours.iter().map(|&n| labels[n]));
            seen.sort_unstable();
            let mut best_count = 0;
            let mut tied: Vec<i64> = Vec::new();
            let mut start = 0;
            while start < seen.len() {
                let label = seen[start];
                let mut end = start;
                while end < seen.len() && seen[end] == label {
                    end += 1;
                }
                let count = end - start;
                if count > best_count {
                    best_count = count;
                    tied.clear();
                    tied.push(label);
                } else if count == best_count {
                    tied.push(label);
                }
                start = end;
            }
            let own = labels[node];
            // `tied` is ascending: its first element is the smallest tied label.
            next[node] = if tied.contains(&own) { own } else { tied[0] };
        }
        if next == labels {
            converged = true;
            break;
        }
        if before.as_ref() == Some(&next) {
            // A two-round cycle: the nodes that swap take the smaller of their two labels.
            for (label, &current) in next.iter_mut().zip(&labels) {
                *label = (*label).min(current);
            }
        }
        before = Some(std::mem::replace(&mut labels, next));
    }
    let labelled = ids.iter().copied().zip(labels).collect();
    (labelled, rounds, converged)
}

/// SHA-256 over `id:content_hash` lines of the sorted members.
pub fn member_hash(members: &[(i64, &str)]) -> String {
    let mut sorted: Vec<&(i64, &str)> = members.iter().collect();
    sorted.sort();
    let mut hasher = Sha256::new();
    for (id, content_hash) in sorted {
        hasher.update(format!("{id}:{content_hash}\n").as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Clusters `nodes` (id, content hash) joined by undirected `edges`. Edges naming a node that
/// is not in `nodes` are ignored.
pub fn clusters(nodes: &[(i64, String)], edges: &[(i64, i64)]) -> Clustering {
    let ids: Vec<i64> = nodes.iter().map(|(id, _)| *id).collect();
    let hashes: BTreeMap<i64, &str> = nodes.iter().map(|(id, h)| (*id, h.as_str())).collect();
    let (labels, rounds, converged) = label_propagation(&ids, edges);
    let mut groups: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (id, label) in labels {
        groups.entry(label).or_default().push(id);
    }
    let mut clusters: Vec<Cluster> = groups
        .into_values()
        .map(|members| {
            let with_hashes: Vec<(i64, &str)> = members
                .iter()
                .map(|id| (*id, hashes.get(id).copied().unwrap_or("")))
                .collect();
            Cluster {
                id: members[0],
                member_hash: member_hash(&with_hashes),
                members,
            }
        })
        .collect();
    clusters.sort_by(|a, b| b.members.len().cmp(&a.members.len()).then(a.id.cmp(&b.id)));
    Clustering {
        clusters,
        rounds,
        converged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nodes(ids: impl IntoIterator<Item = i64>) -> Vec<(i64, String)> {
        ids.into_iter()
            .map(|id| (id, format!("hash{id}")))
            .collect()
    }

    fn groups(clustering: &Clustering) -> Vec<Vec<i64>> {
        clustering
            .clusters
            .iter()
            .map(|c| c.members.clone())
            .collect()
    }

    #[test]
    fn two_triangles_joined_by_one_edge_stay_two_clusters() {
        let edges = [(1, 2), (2, 3), (1, 3), (4, 5), (5, 6), (4, 6), (3, 4)];
        let result = clusters(&nodes(1..=6), &edges);
        assert_eq!(groups(&result), vec![vec![1, 2, 3], vec![4, 5, 6]]);
        assert!(result.converged);
        assert_eq!(result.clusters[0].id, 1);
    }

    #[test]
    fn a_clique_becomes_one_cluster_named_by_its_smallest_member() {
        let ids = [7, 3, 9, 12, 5];
        let edges: Vec<_> = ids
            .iter()
            .flat_map(|a| ids.iter().map(move |b| (*a, *b)))
            .collect();
        let result = clusters(&nodes(ids), &edges);
        assert_eq!(groups(&result), vec![vec![3, 5, 7, 9, 12]]);
        assert_eq!(result.clusters[0].id, 3);
    }

    #[test]
    fn isolated_nodes_are_singletons_and_unknown_edges_are_ignored() {
        let result = clusters(&nodes([1, 2]), &[(1, 99), (2, 2)]);
        assert_eq!(groups(&result), vec![vec![1], vec![2]]);
        assert!(result.converged);
        assert_eq!(result.rounds, 1);
    }

    #[test]
    fn a_pair_and_a_star_that_swap_labels_settle_as_one_cluster() {
        // Regression: a pair swapped labels every round until the round limit and ended as
        // two singletons, `converged: false`.
        let result = clusters(&nodes([1, 2]), &[(1, 2)]);
        assert!(result.converged, "{result:?}");
        assert!(result.rounds < MAX_ROUNDS);
        assert_eq!(groups(&result), vec![vec![1, 2]]);
        let star = clusters(&nodes([1, 2, 3, 4]), &[(1, 2), (1, 3), (1, 4)]);
        assert!(star.converged, "{star:?}");
        assert_eq!(groups(&star), vec![vec![1, 2, 3, 4]]);
        // two pairs and a singleton stay three groups
        let apart = clusters(&nodes([1, 2, 3, 4, 5]), &[(1, 2), (3, 4)]);
        assert!(apart.converged);
        assert_eq!(groups(&apart), vec![vec![1, 2], vec![3, 4], vec![5]]);
    }

    #[test]
    fn member_hash_depends_on_members_and_their_content_only() {
        let a = member_hash(&[(1, "x"), (2, "y")]);
        assert_eq!(a, member_hash(&[(2, "y"), (1, "x")]));
        assert_ne!(a, member_hash(&[(1, "x"), (2, "z")]));
        assert_ne!(a, member_hash(&[(1, "x"), (3, "y")]));
        assert_eq!(a.len(), 64);
    }

    /// A seeded shuffle (Fisher–Yates over a SplitMix64 stream): no RandomState.
    fn shuffle<T>(items: &mut [T], seed: u64) {
        let mut state = seed;
        for i in (1..items.len()).rev() {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            items.swap(i, (z % (i as u64 + 1)) as usize);
        }
    }

    proptest! {
        #[test]
        fn shuffled_input_gives_identical_clusters(
            edges in prop::collection::vec((0i64..40, 0i64..40), 0..120),
            seed in any::<u64>(),
        ) {
            let node_list = nodes(0..40);
            let first = clusters(&node_list, &edges);
            let mut shuffled_nodes = node_list.clone();
            let mut shuffled_edges: Vec<(i64, i64)> = edges.iter().map(|&(a, b)| if seed % 2 == 0 { (a, b) } else { (b, a) }).collect();
            shuffle(&mut shuffled_nodes, seed);
            shuffle(&mut shuffled_edges, seed.rotate_left(17));
            let second = clusters(&shuffled_nodes, &shuffled_edges);
            prop_assert_eq!(format!("{first:?}"), format!("{second:?}"));
            // every node is in exactly one cluster
            let mut all: Vec<i64> = first.clusters.iter().flat_map(|c| c.members.clone()).collect();
            all.sort_unstable();
            prop_assert_eq!(all, (0..40).collect::<Vec<_>>());
        }
    }
}
