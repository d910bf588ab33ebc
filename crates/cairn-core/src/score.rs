//! Ranking: Reciprocal Rank Fusion of candidate lists and the bounded final score (docs/design.md §5).
//!
//! Every factor here is bounded: relevance maps onto 0.35..1 so a matched record never scores
//! as if it had not matched, stakes is clamped to 0.70..1.43, and recency never drops below a
//! floor, so what a record *is* breaks ties between matches without overriding what matched.

use crate::record::{Confidence, Tier};

/// The RRF constant: only ranks matter, raw scores of different scales never mix. The
/// textbook 60 comes from fusing long web-search lists; on a brain's few hundred to few
/// thousand candidates it flattens the top so much that a record ranked 5th by both sources
/// beats the first of each, and the bounded boosts reorder the rest. Measured on LoCoMo
/// (docs/retrieval.md): hybrid recall@10 0.669 at 60, 0.703 at 20, 0.724 at 10, 0.727 at 5,
/// the same direction in each conversation; 10 keeps some agreement bonus.
pub const RRF_K: f64 = 10.0;
/// Lowest relevance a matched record can have.
pub const RELEVANCE_MIN: f64 = 0.35;
pub const STAKES_MIN: f64 = 0.70;
pub const STAKES_MAX: f64 = 1.43;
/// Recency never falls below this: an old record that matches still competes (decay never
/// deletes; it only stops outranking what still matters). Measured on LoCoMo (lexical mode,
/// docs/retrieval.md): a floor of 0.5 lets age override what matched (recall@10 0.413 against
/// 0.612 for pure BM25 order); 0.9 keeps recency a tie-breaker (0.615).
pub const RECENCY_FLOOR: f64 = 0.9;

/// One candidate from one source, best first within its list; `strength` is the source's own
/// score, higher is better (BM25 negated, cosine similarity).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub id: i64,
    pub strength: f64,
}

/// A fused candidate: its RRF score and its 1-based rank in each input list.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub id: i64,
    pub fused: f64,
    pub ranks: Vec<Option<u32>>,
    /// The candidate's strength in each list it appears in.
    pub strengths: Vec<Option<f64>>,
}

/// Keeps the hits whose strength is at least `floor` × the list's top strength.
///
/// The relevance floor of docs/design.md §5: a candidate that matched far worse than the best match of
/// its own source is dropped before fusion. `floor` 0 keeps everything.
pub fn apply_floor(hits: &[Hit], floor: f64) -> Vec<Hit> {
    let Some(top) = hits.first().map(|hit| hit.strength) else {
        return Vec::new();
    };
    if floor <= 0.0 || top <= 0.0 {
        return hits.to_vec();
    }
    hits.iter()
        .copied()
        .filter(|hit| hit.strength >= floor * top)
        .collect()
}

/// Reciprocal Rank Fusion of ranked lists: each list adds `1 / (RRF_K + rank)`. Ties break on
/// the best single rank, then the id, so the order is total and deterministic.
pub fn rrf(lists: &[Vec<Hit>]) -> Vec<Fused> {
    rrf_weighted(lists, &vec![1.0; lists.len()])
}

/// Weighted RRF: list `s` contributes `weights[s] / (K + rank)`. Still rank-only (raw scores of
/// different scales never mix); a weight says how much one source's ranks are trusted, as
/// measured on the evaluation set. A missing weight counts as 1.
pub fn rrf_weighted(lists: &[Vec<Hit>], weights: &[f64]) -> Vec<Fused> {
    rrf_weighted_k(lists, weights, RRF_K)
}

/// [`rrf_weighted`] with another constant `k` (experiments, the evaluation).
pub fn rrf_weighted_k(lists: &[Vec<Hit>], weights: &[f64], k: f64) -> Vec<Fused> {
    let mut by_id: std::collections::BTreeMap<i64, Fused> = std::collections::BTreeMap::new();
    for (source, list) in lists.iter().enumerate() {
        for (position, hit) in list.iter().enumerate() {
            let rank = position as u32 + 1;
            let entry = by_id.entry(hit.id).or_insert_with(|| Fused {
                id: hit.id,
                fused: 0.0,
                ranks: vec![None; lists.len()],
                strengths: vec![None; lists.len()],
            });
            if entry.ranks[source].is_none() {
                entry.ranks[source] = Some(rank);
                entry.strengths[source] = Some(hit.strength);
                let weight = weights.get(source).copied().unwrap_or(1.0);
                entry.fused += weight / (k + rank as f64);
            }
        }
    }
    let mut fused: Vec<Fused> = by_id.into_values().collect();
    let best_rank = |f: &Fused| f.ranks.iter().flatten().min().copied().unwrap_or(u32::MAX);
    fused.sort_by(|a, b| {
        b.fused
            .total_cmp(&a.fused)
            .then_with(|| best_rank(a).cmp(&best_rank(b)))
            .then_with(|| a.id.cmp(&b.id))
    });
    fused
}

/// Relevance of each fused candidate, in RELEVANCE_MIN..1.
///
/// When candidates came from several sources, the fused (rank-only) score relative to the best
/// one: scales of different sources never mix. When only one source found anything there is
/// nothing to mix, and RRF's rank curve (rank 1 → 1/11, rank 2 → 1/12) would let a bounded
/// boost override a much better match; so that source's own strength relative to its best
/// match is used instead — but only for a source whose strengths are on a ratio scale
/// (`ratio_scale[source]`: BM25, where half the score means half the evidence). Cosine
/// similarities are not: every e5 similarity lies within 0.75..0.9, so "0.8 of the best" would
/// flatten the whole list to within the recency bound and let age reorder it (measured on
/// LoCoMo: semantic recall@10 0.092 instead of 0.598). Such a source keeps the rank curve.
pub fn relevances(fused: &[Fused], ratio_scale: &[bool]) -> Vec<f64> {
    let Some(first) = fused.first() else {
        return Vec::new();
    };
    let width = first.strengths.len();
    let active: Vec<usize> = (0..width)
        .filter(|&s| fused.iter().any(|f| f.strengths[s].is_some()))
        .collect();
    if let [source] = active[..]
        && ratio_scale.get(source).copied().unwrap_or(false)
    {
        let top = fused
            .iter()
            .filter_map(|f| f.strengths[source])
            .fold(f64::MIN, f64::max);
        return fused
            .iter()
            .map(|f| match f.strengths[source] {
                Some(strength) if top > 0.0 => {
                    RELEVANCE_MIN + (1.0 - RELEVANCE_MIN) * (strength / top).clamp(0.0, 1.0)
                }
                _ => relevance(f.fused, first.fused),
            })
            .collect();
    }
    fused
        .iter()
        .map(|f| relevance(f.fused, first.fused))
        .collect()
}

/// Maps a fused score onto RELEVANCE_MIN..1 relative to the best fused score.
pub fn relevance(fused: f64, top_fused: f64) -> f64 {
    if top_fused <= 0.0 {
        return RELEVANCE_MIN;
    }
    RELEVANCE_MIN + (1.0 - RELEVANCE_MIN) * (fused / top_fused).clamp(0.0, 1.0)
}

/// 0.5^(age / half-life), 1.0 for tier A, never below RECENCY_FLOOR.
pub fn recency(tier: Tier, age_days: f64) -> f64 {
    match tier.half_life_days() {
        None => 1.0,
        Some(half_life) => 0.5f64
            .powf(age_days.max(0.0) / half_life)
            .max(RECENCY_FLOOR),
    }
}

/// 1 + min(0.15·ln(1+uses), 0.5).
pub fn usage(use_count: u32) -> f64 {
    1.0 + (0.15 * (1.0 + use_count as f64).ln()).min(0.5)
}

/// tier weight × importance/3 × usage × confidence, clamped to STAKES_MIN..STAKES_MAX.
pub fn stakes(tier: Tier, importance: u8, use_count: u32, confidence: Confidence) -> f64 {
    let raw = tier.weight() * (importance as f64 / 3.0) * usage(use_count) * confidence.weight();
    raw.clamp(STAKES_MIN, STAKES_MAX)
}

/// What the final score of one record is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreParts {
    pub relevance: f64,
    pub recency: f64,
    pub stakes: f64,
}

impl ScoreParts {
    pub fn score(&self) -> f64 {
        self.relevance * self.recency * self.stakes
    }
}

/// Diversity in the head of a ranked list (maximal marginal relevance, Carbonell & Goldstein
/// 1998): the first `places` positions are filled greedily, each time with the candidate of
/// the `scores`-ordered pool that maximizes `score / best score − lambda × redundancy`, where
/// redundancy is its highest cosine to a candidate already placed. Returns the new order as
/// indices into the pool; positions after `places` keep their order.
///
/// Cosines of one embedding model crowd in a narrow band (e5: 0.75–0.95 for any two texts), so
/// redundancy is measured above the pool's own median pairwise cosine:
/// `max(0, (cos − median) / (1 − median))` — 0 for a pair as alike as a typical pair, 1 for
/// identical vectors. This needs no per-model constant. A candidate without a vector is never
/// redundant. `lambda` 0 (or a pool of fewer than three vectors) keeps the order.
pub fn diversify(
    scores: &[f64],
    vectors: &[Option<&[f32]>],
    lambda: f64,
    places: usize,
) -> Vec<usize> {
    let n = scores.len().min(vectors.len());
    let mut order: Vec<usize> = (0..scores.len()).collect();
    let with_vector: Vec<usize> = (0..n).filter(|&i| vectors[i].is_some()).collect();
    if lambda <= 0.0 || places == 0 || with_vector.len() < 3 {
        return order;
    }
    let cosine = |a: usize, b: usize| -> f64 {
        match (vectors[a], vectors[b]) {
            (Some(x), Some(y)) => f64::from(crate::vector::dot(x, y)),
            _ => 0.0,
        }
    };
    let mut pairs: Vec<f64> = Vec::with_capacity(with_vector.len() * with_vector.len() / 2);
    for (position, &a) in with_vector.iter().enumerate() {
        for &b in &with_vector[position + 1..] {
            pairs.push(cosine(a, b));
        }
    }
    pairs.sort_by(f64::total_cmp);
    let median = pairs[pairs.len() / 2];
    if median >= 1.0 {
        return order;
    }
    let best = scores.iter().take(n).copied().fold(f64::MIN, f64::max);
    if best <= 0.0 {
        return order;
    }
    let mut left: Vec<usize> = (0..n).collect();
    let mut placed: Vec<usize> = Vec::with_capacity(places.min(n));
    // Each left candidate's redundancy with what is placed so far (updated per placement).
    let mut redundancy = vec![0.0_f64; n];
    while placed.len() < places && !left.is_empty() {
        let (slot, _) = left
            .iter()
            .enumerate()
            .map(|(slot, &i)| (slot, scores[i] / best - lambda * redundancy[i]))
            .fold((0, f64::MIN), |chosen, candidate| {
                if candidate.1 > chosen.1 {
                    candidate
                } else {
                    chosen
                }
            });
        let chosen = left.remove(slot);
        placed.push(chosen);
        for &i in &left {
            let alike = ((cosine(i, chosen) - median) / (1.0 - median)).max(0.0);
            redundancy[i] = redundancy[i].max(alike);
        }
    }
    placed.extend(left);
    placed.extend(n..scores.len());
    order.clear();
    order.extend(placed);
    order
}

/// The cosine between `query` and the mean direction of `members` (the normalized sum of their
/// vectors): how well a passage of several records, taken together, matches the query.
/// `None` when there is no member or a vector is zero or of another length.
pub fn mean_cosine(query: &[f32], members: &[&[f32]]) -> Option<f64> {
    if members.is_empty() || members.iter().any(|m| m.len() != query.len()) {
        return None;
    }
    let mut sum = vec![0.0_f32; query.len()];
    for member in members {
        for (total, value) in sum.iter_mut().zip(member.iter()) {
            *total += value;
        }
    }
    let norm = |v: &[f32]| f64::from(crate::vector::dot(v, v)).sqrt();
    let (sum_norm, query_norm) = (norm(&sum), norm(query));
    if sum_norm == 0.0 || query_norm == 0.0 {
        return None;
    }
    Some(f64::from(crate::vector::dot(query, &sum)) / (sum_norm * query_norm))
}

#[cfg(test)]
mod tests {
    fn unit(v: &[f32]) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }

    #[test]
    fn diversity_moves_a_near_copy_below_a_different_match() {
        // Three near-copies of one hop (a, a', a'') score best; b, a different hop, fourth;
        // c, d and e are unrelated fillers. Diversity puts b second.
        let a = unit(&[1.0, 0.0, 0.0, 0.1]);
        let a1 = unit(&[1.0, 0.02, 0.0, 0.1]);
        let a2 = unit(&[1.0, 0.0, 0.03, 0.1]);
        let b = unit(&[0.3, 1.0, 0.0, 0.1]);
        let c = unit(&[0.2, 0.2, 1.0, 0.1]);
        let d = unit(&[0.2, 0.5, 0.5, 1.0]);
        let e = unit(&[0.5, 0.2, 0.5, 1.0]);
        let vectors: Vec<Option<&[f32]>> = [&a, &a1, &a2, &b, &c, &d, &e]
            .into_iter()
            .map(|v| Some(v.as_slice()))
            .collect();
        let scores = [1.0, 0.98, 0.97, 0.9, 0.6, 0.5, 0.4];
        let order = diversify(&scores, &vectors, 0.3, 4);
        assert_eq!(order[0], 0, "the best match stays first");
        assert_eq!(
            order[1], 3,
            "the other hop comes before the copies: {order:?}"
        );
        assert_eq!(order.len(), 7);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..7).collect::<Vec<_>>(), "a permutation");
        // Without diversity, or with too few vectors, the order is kept.
        assert_eq!(
            diversify(&scores, &vectors, 0.0, 4),
            (0..7).collect::<Vec<_>>()
        );
        let none: Vec<Option<&[f32]>> = vec![None; 7];
        assert_eq!(
            diversify(&scores, &none, 0.3, 4),
            (0..7).collect::<Vec<_>>()
        );
    }

    #[test]
    fn diversity_never_lifts_a_weak_match_over_a_strong_distinct_one() {
        // Every candidate is as different as every other: the order is the score order.
        let rows: Vec<Vec<f32>> = (0..6)
            .map(|i| {
                let mut v = vec![0.1_f32; 6];
                v[i] = 1.0;
                unit(&v)
            })
            .collect();
        let vectors: Vec<Option<&[f32]>> = rows.iter().map(|v| Some(v.as_slice())).collect();
        let scores = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5];
        assert_eq!(
            diversify(&scores, &vectors, 0.5, 6),
            (0..6).collect::<Vec<_>>()
        );
    }

    use super::*;

    fn hits(ids: &[i64]) -> Vec<Hit> {
        ids.iter()
            .enumerate()
            .map(|(i, &id)| Hit {
                id,
                strength: 10.0 - i as f64,
            })
            .collect()
    }

    #[test]
    fn rrf_rewards_agreement_and_breaks_ties_deterministically() {
        let fused = rrf(&[hits(&[1, 2, 3]), hits(&[3, 2, 9])]);
        let order: Vec<i64> = fused.iter().map(|f| f.id).collect();
        // 2 and 3 appear in both lists; 2 is rank 2+2, 3 is rank 3+1: 3 wins on its best rank.
        assert_eq!(order, [3, 2, 1, 9]);
        assert_eq!(fused[0].ranks, [Some(3), Some(1)]);
        assert_eq!(fused[3].ranks, [None, Some(3)]);
        let single = rrf(&[hits(&[5, 4])]);
        assert!((single[0].fused - 1.0 / (RRF_K + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn weights_scale_each_list_and_equal_weights_are_plain_rrf() {
        let lists = [hits(&[1, 2]), hits(&[2, 3])];
        assert_eq!(rrf_weighted(&lists, &[1.0, 1.0]), rrf(&lists));
        // Agreement still wins at weight 0.1; at 0.01 the first list's top rank decides.
        let order = |weights: &[f64]| -> Vec<i64> {
            rrf_weighted(&lists, weights).iter().map(|f| f.id).collect()
        };
        assert_eq!(order(&[1.0, 0.1]), [2, 1, 3]);
        assert_eq!(order(&[1.0, 0.01]), [1, 2, 3]);
        let fused = rrf_weighted(&lists, &[1.0, 0.01]);
        assert!((fused[1].fused - (1.0 / (RRF_K + 2.0) + 0.01 / (RRF_K + 1.0))).abs() < 1e-12);
        // A zero-weight list still reports its ranks but adds nothing.
        let fused = rrf_weighted(&lists, &[1.0, 0.0]);
        assert_eq!(fused.iter().find(|f| f.id == 3).unwrap().fused, 0.0);
        assert_eq!(
            fused.iter().find(|f| f.id == 3).unwrap().ranks,
            [None, Some(2)]
        );
    }

    #[test]
    fn a_duplicate_id_in_one_list_counts_once() {
        let fused = rrf(&[vec![
            Hit {
                id: 1,
                strength: 2.0,
            },
            Hit {
                id: 1,
                strength: 1.0,
            },
        ]]);
        assert_eq!(fused.len(), 1);
        assert_eq!(fused[0].ranks, [Some(1)]);
    }

    #[test]
    fn a_single_source_keeps_its_strength_gaps() {
        let list = vec![
            Hit {
                id: 1,
                strength: 10.0,
            },
            Hit {
                id: 2,
                strength: 4.0,
            },
        ];
        let fused = rrf(std::slice::from_ref(&list));
        let single = relevances(&fused, &[true, true]);
        assert_eq!(single[0], 1.0);
        assert!((single[1] - (RELEVANCE_MIN + 0.65 * 0.4)).abs() < 1e-12);
        // a much weaker match cannot overtake through the bounded recency alone
        assert!(single[1] < RECENCY_FLOOR * single[0]);
        // a second source that found nothing leaves the one that did in charge
        let with_empty = rrf(&[list.clone(), Vec::new()]);
        assert_eq!(relevances(&with_empty, &[true, true]), single);
        let only_second = rrf(&[Vec::new(), list.clone()]);
        assert_eq!(relevances(&only_second, &[true, true]), single);
        let two = rrf(&[list.clone(), list]);
        let fused_relevance = relevances(&two, &[true, true]);
        assert_eq!(fused_relevance[0], 1.0);
        assert!(
            fused_relevance[1] > single[1],
            "rank-only fusion is flatter"
        );
    }

    #[test]
    fn a_single_source_without_a_ratio_scale_keeps_the_rank_curve() {
        // cosine similarities: close together, not proportional to how much matched
        let list = vec![
            Hit {
                id: 1,
                strength: 0.86,
            },
            Hit {
                id: 2,
                strength: 0.85,
            },
        ];
        let fused = rrf(&[Vec::new(), list]);
        let by_rank = relevances(&fused, &[true, false]);
        assert_eq!(by_rank[0], 1.0);
        assert_eq!(
            by_rank[1],
            relevance(1.0 / (RRF_K + 2.0), 1.0 / (RRF_K + 1.0))
        );
        // the same list on a ratio scale would use the strengths
        let by_strength = relevances(&fused, &[true, true]);
        assert!((by_strength[1] - (RELEVANCE_MIN + 0.65 * 0.85 / 0.86)).abs() < 1e-12);
    }

    #[test]
    fn relevance_stays_within_its_band() {
        assert_eq!(relevance(1.0, 1.0), 1.0);
        assert_eq!(relevance(0.0, 1.0), RELEVANCE_MIN);
        assert!(relevance(0.5, 1.0) > RELEVANCE_MIN);
        assert_eq!(relevance(1.0, 0.0), RELEVANCE_MIN);
    }

    #[test]
    fn stakes_are_clamped() {
        assert_eq!(stakes(Tier::A, 5, 1000, Confidence::Confirmed), STAKES_MAX);
        assert_eq!(stakes(Tier::D, 1, 0, Confidence::Inferred), STAKES_MIN);
        assert!((stakes(Tier::B, 3, 0, Confidence::Reported) - 1.0).abs() < 1e-12);
        assert!((usage(0) - 1.0).abs() < 1e-12);
        assert!((usage(u32::MAX) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn recency_halves_per_half_life_down_to_the_floor() {
        assert_eq!(recency(Tier::A, 10_000.0), 1.0);
        assert!((recency(Tier::D, 0.0) - 1.0).abs() < 1e-12);
        assert!((recency(Tier::C, 4.5) - 0.5f64.powf(0.1)).abs() < 1e-12);
        assert_eq!(recency(Tier::D, 400.0), RECENCY_FLOOR);
        assert_eq!(recency(Tier::B, -5.0), 1.0);
    }

    #[test]
    fn the_floor_drops_weak_matches_relative_to_the_top() {
        let list = vec![
            Hit {
                id: 1,
                strength: 10.0,
            },
            Hit {
                id: 2,
                strength: 3.0,
            },
            Hit {
                id: 3,
                strength: 0.5,
            },
        ];
        let kept: Vec<i64> = apply_floor(&list, 0.2).iter().map(|h| h.id).collect();
        assert_eq!(kept, [1, 2]);
        assert_eq!(apply_floor(&list, 0.0).len(), 3);
        assert!(apply_floor(&[], 0.5).is_empty());
    }

    #[test]
    fn a_matched_record_always_outscores_the_bounds_of_an_unmatched_one() {
        // The weakest possible match still keeps a positive score that boosts cannot zero.
        let weakest = ScoreParts {
            relevance: RELEVANCE_MIN,
            recency: RECENCY_FLOOR,
            stakes: STAKES_MIN,
        };
        assert!(weakest.score() > 0.1);
        let strongest = ScoreParts {
            relevance: 1.0,
            recency: 1.0,
            stakes: STAKES_MAX,
        };
        // Boosts can move a record by at most this factor relative to another match.
        assert!(strongest.score() / weakest.score() < 12.0);
    }

    #[test]
    fn mean_cosine_matches_a_pair_that_together_covers_the_query() {
        // The query is about x and y; one turn says x, the next says y: the pair matches it
        // better than either turn alone.
        let query = unit(&[1.0, 1.0, 0.0]);
        let x = unit(&[1.0, 0.0, 0.3]);
        let y = unit(&[0.0, 1.0, 0.3]);
        let alone = f64::from(crate::vector::dot(&query, &x));
        let pair = mean_cosine(&query, &[&x, &y]).unwrap();
        assert!(pair > alone + 0.1, "pair {pair} vs alone {alone}");
        // One member is its own cosine.
        assert!((mean_cosine(&query, &[&x]).unwrap() - alone).abs() < 1e-6);
        // An unrelated neighbour lowers the mean.
        let z = unit(&[0.0, 0.0, 1.0]);
        assert!(mean_cosine(&query, &[&x, &z]).unwrap() < alone);
        assert_eq!(mean_cosine(&query, &[]), None);
        assert_eq!(
            mean_cosine(&query, &[&[1.0, 0.0][..]]),
            None,
            "another length"
        );
        assert_eq!(
            mean_cosine(&query, &[&[0.0, 0.0, 0.0][..]]),
            None,
            "a zero vector"
        );
    }
}
