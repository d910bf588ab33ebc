//! The knowledge graph as a candidate source of recall (`SemanticConfig::graph_weight`, issue
//! 20): the entities a question names, found by their keys in the graph, and the records whose
//! `mentions` edges point at them form a third ranked list, fused with the lexical and the
//! semantic one by the same weighted RRF. Two optional hops reach further: the entities one
//! `relates` edge away from the question's (`graph_neighbours`), and the "bridge" entities of
//! the best fused candidates that the question does not name (`graph_bridge`) — the second hop
//! of a multi-hop question ("where does Jon's sister live?": the best match names the sister,
//! the answer names only her).
//!
//! No model and no network: entity keys are looked up by index, each seed entity's records
//! read through its incoming edges. In a brain of 2,000 records or more, entities held by more
//! than a tenth of them say nothing about one record and are skipped, as a word that common is
//! (the lexical side's term cutoff, `TermCutoff::DEFAULT`).

use crate::recall::TermCutoff;
use crate::{Engine, Result};
use cairn_core::graph::extract::{self, entity_key};
use cairn_core::graph::{Node, NodeKind};
use cairn_core::score::{Fused, Hit};
use cairn_store::LexicalQuery;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Longest run of question words looked up as one entity key ("yosemite national park").
const MAX_KEY_WORDS: usize = 4;

/// Bridge entities are read from this many of the best fused candidates.
pub(crate) const BRIDGE_SOURCES: usize = 3;

/// A seed reached one hop from the question (a neighbour or a bridge) counts this much of a
/// named one: one hop further from what was asked, half as sure. A constant by reasoning, not
/// tuned.
const HOP_FACTOR: f64 = 0.5;

/// Most records read per seed entity (its rarity decides its weight; beyond the cutoff it is
/// skipped anyway).
const MAX_MENTIONS_READ: usize = 2_000;

/// How the graph list is built (from `SemanticConfig`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraphSources {
    pub(crate) bridge: bool,
    pub(crate) neighbours: bool,
}

/// One entity the list starts from, with how much a mention of it counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seed {
    pub(crate) entity: i64,
    pub(crate) factor: f64,
}

/// Records ranked by the seeds they mention: each mention adds the seed's factor × its
/// rarity, `ln(1 + records / mentions)`; with a `cutoff_share`, seeds mentioned by more than
/// that share of the records add nothing. Ties go to the record the turn-level lists placed higher (`prior`,
/// lower is better), then the lower id. `mentions` maps a seed entity to the records
/// mentioning it.
pub(crate) fn rank_by_entities(
    seeds: &[Seed],
    mentions: &HashMap<i64, Vec<i64>>,
    records: usize,
    cutoff_share: Option<f64>,
    prior: &HashMap<i64, usize>,
) -> Vec<Hit> {
    let records = records.max(1) as f64;
    let mut scores: BTreeMap<i64, f64> = BTreeMap::new();
    for seed in seeds {
        let Some(holders) = mentions.get(&seed.entity) else {
            continue;
        };
        let count = holders.len() as f64;
        let too_common = cutoff_share.is_some_and(|share| count > share * records);
        if holders.is_empty() || (holders.len() > 1 && too_common) {
            continue;
        }
        let weight = seed.factor * (1.0 + records / count).ln();
        for record in holders {
            *scores.entry(*record).or_insert(0.0) += weight;
        }
    }
    let mut ranked: Vec<Hit> = scores
        .into_iter()
        .map(|(id, strength)| Hit { id, strength })
        .collect();
    ranked.sort_by(|a, b| {
        b.strength
            .total_cmp(&a.strength)
            .then_with(|| {
                let (pa, pb) = (
                    prior.get(&a.id).unwrap_or(&usize::MAX),
                    prior.get(&b.id).unwrap_or(&usize::MAX),
                );
                pa.cmp(pb)
            })
            .then(a.id.cmp(&b.id))
    });
    ranked
}

/// The keys a question may name an entity by: what the write path's extractor finds in it,
/// and every run of 1–`MAX_KEY_WORDS` of its words (lowercased), so "grand canyon" written
/// in lower case still finds the entity `Grand Canyon`.
pub(crate) fn question_keys(question: &str) -> Vec<String> {
    let mut keys: Vec<String> = extract::extract(None, question, &[])
        .into_iter()
        .map(|e| e.key)
        .collect();
    let words = cairn_core::text::word_tokens(question);
    for length in 1..=MAX_KEY_WORDS {
        for run in words.windows(length) {
            keys.push(entity_key(&run.join(" ")));
        }
    }
    let mut seen = HashSet::new();
    keys.retain(|k| !k.is_empty() && seen.insert(k.clone()));
    keys
}

impl Engine {
    /// The graph's candidate list for `question` (see the module doc), at most `limit`
    /// records, each passing `filter`. `fused` is the turn-level lists' fusion (the bridge
    /// entities' source and the tie-break); edges are read as valid at `at`.
    pub(crate) fn graph_list(
        &self,
        question: &str,
        fused: &[Fused],
        filter: &LexicalQuery<'_>,
        at: &str,
        sources: GraphSources,
        limit: usize,
    ) -> Result<Vec<Hit>> {
        let reader = self.store.reader()?;
        let mut seeds: Vec<Seed> = Vec::new();
        let mut named: HashSet<i64> = HashSet::new();
        for key in question_keys(question) {
            if let Some(entity) = reader.entity_by_key(&key)?
                && named.insert(entity.id)
            {
                seeds.push(Seed {
                    entity: entity.id,
                    factor: 1.0,
                });
            }
        }
        let mut reached: HashSet<i64> = named.clone();
        if sources.neighbours {
            for &entity in &named {
                for outgoing in [true, false] {
                    for row in reader.adjacent(
                        Node::entity(entity),
                        at,
                        outgoing,
                        Some("relates"),
                        MAX_MENTIONS_READ,
                    )? {
                        if row.other.kind == NodeKind::Entity && reached.insert(row.other.id) {
                            seeds.push(Seed {
                                entity: row.other.id,
                                factor: HOP_FACTOR,
                            });
                        }
                    }
                }
            }
        }
        if sources.bridge {
            for candidate in fused.iter().take(BRIDGE_SOURCES) {
                for (target, _) in reader.open_targets(Node::record(candidate.id), "mentions")? {
                    if target.kind == NodeKind::Entity && reached.insert(target.id) {
                        seeds.push(Seed {
                            entity: target.id,
                            factor: HOP_FACTOR,
                        });
                    }
                }
            }
        }
        if seeds.is_empty() {
            return Ok(Vec::new());
        }
        let mut mentions: HashMap<i64, Vec<i64>> = HashMap::new();
        for seed in &seeds {
            let holders: Vec<i64> = reader
                .adjacent(
                    Node::entity(seed.entity),
                    at,
                    false,
                    Some("mentions"),
                    MAX_MENTIONS_READ,
                )?
                .into_iter()
                .filter(|row| row.other.kind == NodeKind::Record)
                .map(|row| row.other.id)
                .collect();
            mentions.insert(seed.entity, holders);
        }
        let prior: HashMap<i64, usize> = fused
            .iter()
            .enumerate()
            .map(|(rank, f)| (f.id, rank))
            .collect();
        let records = self.indexed_count()?;
        let cutoff = (records >= TermCutoff::MIN_RECORDS).then_some(TermCutoff::DEFAULT.share);
        let ranked = rank_by_entities(&seeds, &mentions, records, cutoff, &prior);
        // Records the turn-level lists found already passed the query's filters; the others
        // must pass them here (project, scope, type, status, dates, trust zone).
        let added: Vec<i64> = ranked
            .iter()
            .filter(|hit| !prior.contains_key(&hit.id))
            .map(|hit| hit.id)
            .collect();
        let allowed: HashSet<i64> = reader.filter_ids(&added, filter)?.into_iter().collect();
        Ok(ranked
            .into_iter()
            .filter(|hit| prior.contains_key(&hit.id) || allowed.contains(&hit.id))
            .take(limit)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(entity: i64, factor: f64) -> Seed {
        Seed { entity, factor }
    }

    #[test]
    fn rarer_entities_count_more_and_common_ones_nothing() {
        // 100 records: entity 1 in two of them, entity 2 in ten, entity 3 in 50 (past a
        // tenth: skipped).
        let mentions: HashMap<i64, Vec<i64>> = [
            (1, vec![10, 11]),
            (2, (20..30).collect()),
            (3, (30..80).collect()),
        ]
        .into_iter()
        .collect();
        let seeds = [seed(1, 1.0), seed(2, 1.0), seed(3, 1.0)];
        let ranked = rank_by_entities(&seeds, &mentions, 100, Some(0.1), &HashMap::new());
        let ids: Vec<i64> = ranked.iter().map(|h| h.id).collect();
        assert_eq!(&ids[..2], &[10, 11]);
        assert_eq!(ids.len(), 12, "entity 3's records are not listed: {ids:?}");
        assert!(ranked[0].strength > ranked[2].strength);
    }

    #[test]
    fn a_record_naming_two_seeds_outranks_one_naming_one_and_hops_count_half() {
        let mentions: HashMap<i64, Vec<i64>> = [(1, vec![5, 6]), (2, vec![6, 7]), (9, vec![8])]
            .into_iter()
            .collect();
        let seeds = [seed(1, 1.0), seed(2, 1.0), seed(9, HOP_FACTOR)];
        let ranked = rank_by_entities(&seeds, &mentions, 1000, Some(0.1), &HashMap::new());
        assert_eq!(ranked[0].id, 6);
        // Record 8 mentions the rarest entity, but one hop away: half its weight.
        let eight = ranked.iter().find(|h| h.id == 8).unwrap().strength;
        let five = ranked.iter().find(|h| h.id == 5).unwrap().strength;
        assert!((eight - 0.5 * (1.0f64 + 1000.0).ln()).abs() < 1e-9);
        assert!(five > eight);
    }

    #[test]
    fn ties_go_to_the_record_the_turn_level_lists_placed_higher() {
        let mentions: HashMap<i64, Vec<i64>> = [(1, vec![3, 4, 5])].into_iter().collect();
        let prior: HashMap<i64, usize> = [(5, 0), (4, 7)].into_iter().collect();
        let ranked = rank_by_entities(&[seed(1, 1.0)], &mentions, 100, None, &prior);
        let ids: Vec<i64> = ranked.iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![5, 4, 3]);
    }

    #[test]
    fn question_keys_hold_word_runs_and_extracted_names() {
        let keys = question_keys("Did Anna Lee's trip to yosemite national park go well?");
        assert!(
            keys.contains(&"yosemite national park".to_string()),
            "{keys:?}"
        );
        assert!(keys.contains(&"anna lee's".to_string()), "{keys:?}");
        assert!(keys.contains(&"anna".to_string()), "{keys:?}");
        assert!(
            !keys.contains(&"did anna lee s trip".to_string()),
            "{keys:?}"
        );
    }
}
