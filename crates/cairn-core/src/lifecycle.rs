//! The pure rules of the lifecycle (docs/design.md §8): what decay does to a record, how structurally
//! important a record is, and which records are near duplicates of each other (LSH banding over
//! MinHash signatures, sub-quadratic). Everything takes `now` and plain data; the engine reads
//! the store and applies the verdicts.

use crate::minhash::{NUM_HASHES, Signature, lsh_bands};
use crate::record::{Confidence, MemoryType, Tier};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

/// Confidence half-life of a record nobody accessed (docs/design.md §8), in days. A tier whose own
/// recency half-life is shorter (C: 45 d, D: 4 d) decays at that pace instead: a `state` record
/// nobody looked at for two weeks is not worth keeping active for five months.
pub const CONFIDENCE_HALF_LIFE_DAYS: f64 = 60.0;
/// Below this decayed strength an unaccessed record is archived (reversibly).
pub const ARCHIVE_FLOOR: f64 = 0.15;
/// Below this strength a `confirmed` claim is only `reported`.
pub const DEMOTE_TO_REPORTED: f64 = 0.5;
/// Below this strength a claim is only `inferred`.
pub const DEMOTE_TO_INFERRED: f64 = 0.25;

/// What decay needs to know about one record.
#[derive(Debug, Clone, PartialEq)]
pub struct DecayInput {
    pub memory_type: MemoryType,
    pub pinned: bool,
    pub confidence: Confidence,
    pub created_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// What decay does to one active record, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum DecayVerdict {
    /// Never decays: tier A, pinned, or a guardrail. `expired` says an expiry date passed but
    /// the record is kept anyway.
    Exempt { reason: &'static str, expired: bool },
    /// Past its `expires_at`: archived.
    Expired,
    /// Nobody accessed it for so long that its strength fell below [`ARCHIVE_FLOOR`].
    Archive { strength: f64, idle_days: f64 },
    /// Its confidence is lowered to `to`.
    Demote {
        from: Confidence,
        to: Confidence,
        strength: f64,
        idle_days: f64,
    },
    /// Nothing to do yet.
    Keep { strength: f64, idle_days: f64 },
}

impl DecayVerdict {
    /// Whether applying the verdict changes the record.
    pub fn changes(&self) -> bool {
        matches!(
            self,
            DecayVerdict::Expired | DecayVerdict::Archive { .. } | DecayVerdict::Demote { .. }
        )
    }

    /// A short name for reports and events: `expired`, `archive`, `demote`, `keep`, `exempt`.
    pub fn action(&self) -> &'static str {
        match self {
            DecayVerdict::Exempt { .. } => "exempt",
            DecayVerdict::Expired => "expired",
            DecayVerdict::Archive { .. } => "archive",
            DecayVerdict::Demote { .. } => "demote",
            DecayVerdict::Keep { .. } => "keep",
        }
    }

    /// One sentence a person can read.
    pub fn explain(&self) -> String {
        match self {
            DecayVerdict::Exempt { reason, expired } => {
                if *expired {
                    format!("never decays ({reason}); its expiry date passed but it is kept")
                } else {
                    format!("never decays ({reason})")
                }
            }
            DecayVerdict::Expired => "its expiry date passed: archived".to_string(),
            DecayVerdict::Archive {
                strength,
                idle_days,
            } => format!(
                "nobody accessed it for {idle_days:.0} days: strength {strength:.3} is below the floor {ARCHIVE_FLOOR}, archived"
            ),
            DecayVerdict::Demote {
                from,
                to,
                strength,
                idle_days,
            } => format!(
                "nobody accessed it for {idle_days:.0} days: strength {strength:.3}, confidence lowered from {from} to {to}"
            ),
            DecayVerdict::Keep {
                strength,
                idle_days,
            } => format!("accessed {idle_days:.0} days ago: strength {strength:.3}, nothing to do"),
        }
    }
}

/// The half-life decay applies to a tier, `None` for tier A.
pub fn confidence_half_life(tier: Tier) -> Option<f64> {
    tier.half_life_days()
        .map(|own| own.min(CONFIDENCE_HALF_LIFE_DAYS))
}

/// Decay's verdict on one active record at `now`.
pub fn decay_verdict(record: &DecayInput, now: DateTime<Utc>) -> DecayVerdict {
    let expired = record.expires_at.is_some_and(|at| at <= now);
    let tier = record.memory_type.tier();
    if record.memory_type.is_guardrail() {
        return DecayVerdict::Exempt {
            reason: "guardrail",
            expired,
        };
    }
    if record.pinned {
        return DecayVerdict::Exempt {
            reason: "pinned",
            expired,
        };
    }
    let Some(half_life) = confidence_half_life(tier) else {
        return DecayVerdict::Exempt {
            reason: "tier A",
            expired,
        };
    };
    if expired {
        return DecayVerdict::Expired;
    }
    let anchor = record
        .last_accessed_at
        .map_or(record.created_at, |at| at.max(record.created_at));
    let idle_days = ((now - anchor).num_seconds() as f64 / 86_400.0).max(0.0);
    let strength = 0.5f64.powf(idle_days / half_life);
    if strength < ARCHIVE_FLOOR {
        return DecayVerdict::Archive {
            strength,
            idle_days,
        };
    }
    let ceiling = if strength < DEMOTE_TO_INFERRED {
        Confidence::Inferred
    } else if strength < DEMOTE_TO_REPORTED {
        Confidence::Reported
    } else {
        Confidence::Confirmed
    };
    if confidence_rank(record.confidence) > confidence_rank(ceiling) {
        return DecayVerdict::Demote {
            from: record.confidence,
            to: ceiling,
            strength,
            idle_days,
        };
    }
    DecayVerdict::Keep {
        strength,
        idle_days,
    }
}

fn confidence_rank(confidence: Confidence) -> u8 {
    match confidence {
        Confidence::Inferred => 0,
        Confidence::Reported => 1,
        Confidence::Confirmed => 2,
    }
}

/// What structural importance is computed from: never usage counts, never recency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StructureInput {
    pub memory_type: MemoryType,
    /// Links pointing at the record: graph edges from other records, supersession.
    pub inbound_links: u32,
    /// Body length in bytes (a stub is a short body).
    pub body_bytes: usize,
    /// The importance a person gave it (1–5).
    pub importance: u8,
}

/// Below this structural importance a redundantly covered record may be forgotten.
pub const FORGET_IMPORTANCE_BELOW: f64 = 0.45;

/// Structural importance in 0..=1: type weight (0.4), inbound links (0.3, saturating at 3),
/// stub size (0.2, saturating at 400 bytes), stated importance (0.1).
pub fn structural_importance(input: &StructureInput) -> f64 {
    let type_weight = match input.memory_type.tier() {
        Tier::A => 1.0,
        Tier::B => 0.6,
        Tier::C => 0.3,
        Tier::D => 0.1,
    };
    let links = f64::from(input.inbound_links.min(3)) / 3.0;
    let size = (input.body_bytes as f64 / 400.0).min(1.0);
    let stated = f64::from(input.importance.clamp(1, 5) - 1) / 4.0;
    0.4 * type_weight + 0.3 * links + 0.2 * size + 0.1 * stated
}

/// How many LSH bands make banding **exact** at `threshold`: every pair whose estimated
/// similarity (agreeing positions / 128) is at least `threshold` shares a band.
///
/// Such a pair disagrees on at most `d = 128 − ⌈128·threshold⌉` positions; each disagreement
/// spoils at most one band, so with `d + 1` disjoint bands at least one band agrees entirely and
/// the pair lands in its bucket. At 0.7: at most 38 disagreements, 39 bands of 3 rows (117 of
/// the 128 positions). Fixed-probability banding (the earlier 25 bands × 5 rows caught a pair at
/// 0.70 with probability ≈ 0.99) misses the same pair on every run, because signatures are
/// deterministic: a missed near duplicate would never be merged.
pub fn exact_bands(threshold: f64) -> usize {
    let least_agreeing = (0..=NUM_HASHES)
        .find(|agreeing| *agreeing as f64 / NUM_HASHES as f64 >= threshold)
        .unwrap_or(NUM_HASHES);
    (NUM_HASHES - least_agreeing + 1).clamp(1, NUM_HASHES)
}

/// Buckets larger than this are compared as a star (each member against the first) plus a
/// chain (each against the next), so a thousand copies of one text cost a thousand
/// comparisons, not half a million. Members are ordered by signature first, so identical
/// copies are neighbours in the chain.
const BUCKET_PAIR_LIMIT: usize = 64;

/// One near-duplicate pair, `a < b`, with its estimated Jaccard similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimilarPair {
    pub a: i64,
    pub b: i64,
    pub similarity: f64,
}

/// Every pair of `items` (id, partition key, signature) in the same partition whose MinHash
/// similarity is at least `threshold`, found through LSH buckets (sub-quadratic) with
/// [`exact_bands`], so nothing the all-pairs comparison finds is missed (outside buckets over
/// [`BUCKET_PAIR_LIMIT`], which are compared as a star plus a chain), sorted by (a, b). Items
/// must have distinct ids.
pub fn similar_pairs<K: Ord + Clone + std::hash::Hash>(
    items: &[(i64, K, Signature)],
    threshold: f64,
) -> Vec<SimilarPair> {
    let bands = exact_bands(threshold);
    // Partitions by number: bucket keys stay small however long the partition key is.
    let mut partitions: HashMap<&K, u32> = HashMap::new();
    let mut buckets: HashMap<(u32, u64), Vec<usize>> = HashMap::new();
    for (index, (_, key, signature)) in items.iter().enumerate() {
        let next = partitions.len() as u32;
        let partition = *partitions.entry(key).or_insert(next);
        for band in lsh_bands(signature, bands) {
            buckets.entry((partition, band)).or_default().push(index);
        }
    }
    let mut candidates: Vec<(usize, usize)> = Vec::new();
    for members in buckets.values_mut() {
        if members.len() < 2 {
            continue;
        }
        if members.len() <= BUCKET_PAIR_LIMIT {
            for (i, a) in members.iter().enumerate() {
                for b in &members[i + 1..] {
                    candidates.push(((*a).min(*b), (*a).max(*b)));
                }
            }
        } else {
            members.sort_by(|a, b| items[*a].2.0.cmp(&items[*b].2.0).then(a.cmp(b)));
            let first = members[0];
            for window in members.windows(2) {
                candidates.push((window[0].min(window[1]), window[0].max(window[1])));
            }
            for other in &members[1..] {
                candidates.push((first.min(*other), first.max(*other)));
            }
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    let mut pairs: Vec<SimilarPair> = candidates
        .into_iter()
        .filter_map(|(i, j)| {
            let similarity = items[i].2.jaccard(&items[j].2);
            (similarity >= threshold).then(|| {
                let (a, b) = (items[i].0.min(items[j].0), items[i].0.max(items[j].0));
                SimilarPair { a, b, similarity }
            })
        })
        .collect();
    pairs.sort_by_key(|x| (x.a, x.b));
    pairs
}

/// The exact all-pairs answer [`similar_pairs`] approximates (quadratic: for tests and the
/// benchmark's recall measurement).
pub fn similar_pairs_exhaustive<K: Ord + Clone>(
    items: &[(i64, K, Signature)],
    threshold: f64,
) -> Vec<SimilarPair> {
    let mut pairs = Vec::new();
    for (i, x) in items.iter().enumerate() {
        for y in &items[i + 1..] {
            if x.1 != y.1 {
                continue;
            }
            let similarity = x.2.jaccard(&y.2);
            if similarity >= threshold {
                pairs.push(SimilarPair {
                    a: x.0.min(y.0),
                    b: x.0.max(y.0),
                    similarity,
                });
            }
        }
    }
    pairs.sort_by_key(|x| (x.a, x.b));
    pairs
}

/// Groups ids joined by `pairs` (union-find), each group sorted, groups sorted by first id.
pub fn groups(pairs: &[SimilarPair]) -> Vec<Vec<i64>> {
    let mut parent: BTreeMap<i64, i64> = BTreeMap::new();
    fn find(parent: &mut BTreeMap<i64, i64>, id: i64) -> i64 {
        let mut root = id;
        while let Some(&up) = parent.get(&root) {
            if up == root {
                break;
            }
            root = up;
        }
        let mut node = id;
        while node != root {
            let up = parent[&node];
            parent.insert(node, root);
            node = up;
        }
        root
    }
    for pair in pairs {
        parent.entry(pair.a).or_insert(pair.a);
        parent.entry(pair.b).or_insert(pair.b);
        let (ra, rb) = (find(&mut parent, pair.a), find(&mut parent, pair.b));
        if ra != rb {
            // The smaller id is the root: deterministic.
            let (low, high) = (ra.min(rb), ra.max(rb));
            parent.insert(high, low);
        }
    }
    let ids: Vec<i64> = parent.keys().copied().collect();
    let mut grouped: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for id in ids {
        let root = find(&mut parent, id);
        grouped.entry(root).or_default().push(id);
    }
    grouped.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::signature;
    use chrono::TimeZone;

    fn day(n: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::days(n)
    }

    fn input(memory_type: MemoryType, confidence: Confidence) -> DecayInput {
        DecayInput {
            memory_type,
            pinned: false,
            confidence,
            created_at: day(0),
            last_accessed_at: None,
            expires_at: None,
        }
    }

    fn check(record: DecayInput, now_day: i64, expect: &str) {
        let verdict = decay_verdict(&record, day(now_day));
        assert_eq!(verdict.action(), expect, "{verdict:?}");
    }

    #[test]
    fn decay_follows_the_half_life_and_the_floor() {
        use Confidence::*;
        use MemoryType::*;
        check(input(Fact, Confirmed), 10, "keep");
        check(input(Fact, Confirmed), 61, "demote"); // strength < 0.5
        check(input(Fact, Reported), 61, "keep");
        check(input(Fact, Reported), 121, "demote"); // < 0.25 → inferred
        check(input(Fact, Inferred), 121, "keep");
        check(input(Fact, Inferred), 165, "archive"); // < 0.15 after ~164 days
        check(input(Note, Reported), 124, "archive"); // 45-day half-life
        check(input(State, Reported), 11, "archive"); // 4-day half-life
        check(input(Decision, Reported), 5000, "exempt");
        check(input(Policy, Reported), 5000, "exempt");
        let mut pinned = input(Note, Reported);
        pinned.pinned = true;
        check(pinned, 5000, "exempt");
    }

    #[test]
    fn an_access_restarts_the_clock_and_expiry_archives_except_tier_a() {
        let mut accessed = input(MemoryType::Fact, Confidence::Inferred);
        accessed.last_accessed_at = Some(day(150));
        check(accessed, 165, "keep");
        let mut expiring = input(MemoryType::Note, Confidence::Reported);
        expiring.expires_at = Some(day(3));
        check(expiring.clone(), 2, "keep");
        check(expiring, 3, "expired");
        let mut decision = input(MemoryType::Decision, Confidence::Reported);
        decision.expires_at = Some(day(3));
        assert_eq!(
            decay_verdict(&decision, day(4)),
            DecayVerdict::Exempt {
                reason: "tier A",
                expired: true
            }
        );
    }

    #[test]
    fn structural_importance_weighs_type_links_and_size_never_usage() {
        let stub = StructureInput {
            memory_type: MemoryType::Note,
            inbound_links: 0,
            body_bytes: 30,
            importance: 3,
        };
        assert!(structural_importance(&stub) < FORGET_IMPORTANCE_BELOW);
        let linked = StructureInput {
            inbound_links: 3,
            ..stub
        };
        assert!(structural_importance(&linked) > FORGET_IMPORTANCE_BELOW);
        let decision = StructureInput {
            memory_type: MemoryType::Decision,
            ..stub
        };
        assert!(structural_importance(&decision) > FORGET_IMPORTANCE_BELOW);
    }

    #[test]
    fn banding_finds_what_all_pairs_finds_within_partitions() {
        let base = "the deploy script needs the staging flag before the production flag and the queue must drain first";
        let texts = [
            (1, "p", base.to_string()),
            (2, "p", format!("{base} always")),
            (3, "q", base.to_string()),
            (
                4,
                "p",
                "completely different words about lunch menus and cats".to_string(),
            ),
            (5, "p", base.to_string()),
        ];
        let items: Vec<(i64, &str, Signature)> = texts
            .iter()
            .map(|(id, key, text)| (*id, *key, signature(text)))
            .collect();
        let fast = similar_pairs(&items, 0.7);
        let exact = similar_pairs_exhaustive(&items, 0.7);
        assert_eq!(fast, exact);
        let ids: Vec<(i64, i64)> = fast.iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(ids, vec![(1, 2), (1, 5), (2, 5)]);
        assert_eq!(groups(&fast), vec![vec![1, 2, 5]]);
    }

    #[test]
    fn exact_bands_leave_no_pair_above_the_threshold_out() {
        assert_eq!(exact_bands(0.7), 39);
        assert_eq!(exact_bands(0.8), 26);
        assert_eq!(exact_bands(1.0), 1);
        assert_eq!(exact_bands(0.0), NUM_HASHES);
        // The month benchmark's surviving pair: 90 of 128 positions agree (0.703), and the 38
        // disagreements spoil every one of the old 25 bands of 5 rows, so LSH never proposed
        // it. Build such pairs on purpose, the disagreements spread to hit as many bands as
        // possible, and check banding still finds them.
        let base: [u32; NUM_HASHES] =
            std::array::from_fn(|i| (i as u32).wrapping_mul(2_654_435_761));
        for disagreements in [1usize, 10, 25, 38] {
            for stride in [1usize, 3, 5, 7, 127] {
                let mut other = base;
                // An odd stride visits distinct positions.
                for k in 0..disagreements {
                    other[(k * stride) % NUM_HASHES] ^= 0x8000_0000;
                }
                let items = vec![(1, 0u8, Signature(base)), (2, 0u8, Signature(other))];
                let exact = similar_pairs_exhaustive(&items, 0.7);
                assert_eq!(exact.len(), 1, "{disagreements} disagreements at 0.7");
                assert_eq!(
                    similar_pairs(&items, 0.7),
                    exact,
                    "{disagreements} disagreements, stride {stride}"
                );
            }
        }
        // The old banding missed exactly this shape: one disagreement in each 5-row band.
        let mut spoiled = base;
        for band in 0..25 {
            spoiled[band * 5] ^= 1;
        }
        let old_bands_shared = lsh_bands(&Signature(base), 25)
            .iter()
            .zip(lsh_bands(&Signature(spoiled), 25))
            .filter(|(a, b)| **a == *b)
            .count();
        assert_eq!(old_bands_shared, 0);
        let items = vec![(1, 0u8, Signature(base)), (2, 0u8, Signature(spoiled))];
        assert_eq!(similar_pairs(&items, 0.7).len(), 1);
    }

    #[test]
    fn a_huge_bucket_stays_linear_and_connected() {
        let text = "one two three four five six seven eight nine ten";
        let items: Vec<(i64, u8, Signature)> =
            (1..=500).map(|id| (id, 0u8, signature(text))).collect();
        let pairs = similar_pairs(&items, 0.7);
        assert!(pairs.len() < 2_000, "{} pairs", pairs.len());
        let grouped = groups(&pairs);
        assert_eq!(grouped.len(), 1);
        assert_eq!(grouped[0].len(), 500);
    }
}
