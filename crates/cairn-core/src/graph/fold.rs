//! The bi-temporal edge log and its fold (docs/design.md §7).
//!
//! An edge is a key (source, relation, destination). The log holds `assert` operations, which
//! open a validity interval at `valid_from`, and `invalidate` operations, which close the open
//! interval at `valid_to`. The state of the graph is the fold of the log in `recorded_at` order
//! (log sequence breaking ties): an assert only opens an interval — asserting an edge that is
//! already open changes nothing — and only an invalidate closes one; an invalidate with nothing
//! open changes nothing. Validity is half-open, `[from, to)`: an edge invalidated at `t` is not
//! valid at `t`. Nothing is ever removed, so any past state can be asked for.
//!
//! Generic over the key and the time type so the property tests can use small integers; the
//! engine uses canonical RFC 3339 text, which orders like the times it names.

use std::collections::BTreeMap;

/// What a log entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EdgeOp {
    Assert,
    Invalidate,
}

impl EdgeOp {
    pub fn as_str(self) -> &'static str {
        match self {
            EdgeOp::Assert => "assert",
            EdgeOp::Invalidate => "invalidate",
        }
    }

    pub fn parse(text: &str) -> Option<EdgeOp> {
        match text {
            "assert" => Some(EdgeOp::Assert),
            "invalidate" => Some(EdgeOp::Invalidate),
            _ => None,
        }
    }
}

/// One operation of the log. `at` is `valid_from` for an assert and `valid_to` for an
/// invalidate.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry<K, T> {
    pub seq: i64,
    pub op: EdgeOp,
    pub key: K,
    pub at: T,
    pub recorded_at: T,
    pub confidence: f64,
}

/// One validity interval of an edge: `[from, to)`, open-ended while `to` is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval<T> {
    pub from: T,
    pub to: Option<T>,
    pub confidence: f64,
    /// The log entry that opened it, and the one that closed it.
    pub assert_seq: i64,
    pub invalidate_seq: Option<i64>,
}

impl<T: Ord> Interval<T> {
    /// Half-open validity: `from <= at < to`.
    pub fn valid_at(&self, at: &T) -> bool {
        self.from <= *at && self.to.as_ref().is_none_or(|to| at < to)
    }

    /// Not yet closed by an invalidate.
    pub fn is_open(&self) -> bool {
        self.invalidate_seq.is_none()
    }
}

/// What applying one entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// An assert opened a new interval.
    Opened,
    /// An assert found the edge already open: nothing changed.
    AlreadyOpen,
    /// An invalidate closed the open interval.
    Closed,
    /// An invalidate found nothing open: nothing changed.
    NothingOpen,
}

impl Applied {
    pub fn changed(self) -> bool {
        matches!(self, Applied::Opened | Applied::Closed)
    }
}

/// Applies one entry to the intervals of its key (oldest first). The engine calls this when it
/// appends, the fold calls it when it replays, so both always agree.
pub fn apply<T: Clone>(
    intervals: &mut Vec<Interval<T>>,
    seq: i64,
    op: EdgeOp,
    at: &T,
    confidence: f64,
) -> Applied {
    let open = intervals
        .iter_mut()
        .rev()
        .find(|i| i.invalidate_seq.is_none());
    match (op, open) {
        (EdgeOp::Assert, Some(_)) => Applied::AlreadyOpen,
        (EdgeOp::Assert, None) => {
            intervals.push(Interval {
                from: at.clone(),
                to: None,
                confidence,
                assert_seq: seq,
                invalidate_seq: None,
            });
            Applied::Opened
        }
        (EdgeOp::Invalidate, Some(interval)) => {
            interval.to = Some(at.clone());
            interval.invalidate_seq = Some(seq);
            Applied::Closed
        }
        (EdgeOp::Invalidate, None) => Applied::NothingOpen,
    }
}

/// The folded log: every key's intervals, and the entries that changed nothing.
#[derive(Debug, Clone)]
pub struct Folded<K, T> {
    pub intervals: BTreeMap<K, Vec<Interval<T>>>,
    /// Sequence numbers of asserts of an already open edge and invalidates with nothing open.
    pub no_ops: Vec<(i64, Applied)>,
}

impl<K: Ord, T: Ord> Folded<K, T> {
    /// The keys valid at `at`, in key order, with the interval that makes each valid.
    pub fn valid_at<'a>(
        &'a self,
        at: &'a T,
    ) -> impl Iterator<Item = (&'a K, &'a Interval<T>)> + 'a {
        self.intervals.iter().filter_map(move |(key, intervals)| {
            intervals.iter().find(|i| i.valid_at(at)).map(|i| (key, i))
        })
    }
}

/// Replays `entries` in `recorded_at` order (sequence breaking ties), whatever order they come in.
pub fn fold<K: Ord + Clone, T: Ord + Clone>(entries: &[LogEntry<K, T>]) -> Folded<K, T> {
    let mut order: Vec<&LogEntry<K, T>> = entries.iter().collect();
    order.sort_by(|a, b| a.recorded_at.cmp(&b.recorded_at).then(a.seq.cmp(&b.seq)));
    let mut intervals: BTreeMap<K, Vec<Interval<T>>> = BTreeMap::new();
    let mut no_ops = Vec::new();
    for entry in order {
        let applied = apply(
            intervals.entry(entry.key.clone()).or_default(),
            entry.seq,
            entry.op,
            &entry.at,
            entry.confidence,
        );
        if !applied.changed() {
            no_ops.push((entry.seq, applied));
        }
    }
    intervals.retain(|_, list| !list.is_empty());
    Folded { intervals, no_ops }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(seq: i64, op: EdgeOp, key: u8, at: i64, recorded_at: i64) -> LogEntry<u8, i64> {
        LogEntry {
            seq,
            op,
            key,
            at,
            recorded_at,
            confidence: 1.0,
        }
    }

    use EdgeOp::{Assert, Invalidate};

    /// `(op, at, recorded_at)` for key 0 → the times 0..12 at which the edge is valid.
    fn check(log: &[(EdgeOp, i64, i64)], valid: &[i64]) {
        let entries: Vec<_> = log
            .iter()
            .enumerate()
            .map(|(i, (op, at, rec))| entry(i as i64 + 1, *op, 0, *at, *rec))
            .collect();
        let folded = fold(&entries);
        let got: Vec<i64> = (0..12)
            .filter(|t| folded.valid_at(t).next().is_some())
            .collect();
        assert_eq!(got, valid, "{log:?}");
    }

    #[test]
    fn the_fold_follows_the_rules() {
        // an assert opens; validity is half-open
        check(&[(Assert, 2, 1), (Invalidate, 5, 2)], &[2, 3, 4]);
        // open-ended until invalidated
        check(&[(Assert, 9, 1)], &[9, 10, 11]);
        // a second assert of an open edge changes nothing (its earlier `from` is ignored)
        check(
            &[(Assert, 4, 1), (Assert, 1, 2)],
            &[4, 5, 6, 7, 8, 9, 10, 11],
        );
        // an invalidate with nothing open changes nothing
        check(&[(Invalidate, 3, 1), (Assert, 6, 2)], &[6, 7, 8, 9, 10, 11]);
        // re-assert after an invalidate opens a fresh interval
        check(
            &[
                (Assert, 1, 1),
                (Invalidate, 3, 2),
                (Assert, 7, 3),
                (Invalidate, 9, 4),
            ],
            &[1, 2, 7, 8],
        );
        // recorded_at order, not log order: the invalidate was recorded before the assert
        check(
            &[(Assert, 2, 5), (Invalidate, 4, 3)],
            &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
        );
        // an invalidate before the interval starts leaves it empty
        check(&[(Assert, 5, 1), (Invalidate, 3, 2)], &[]);
    }

    #[test]
    fn no_ops_are_reported() {
        let entries = vec![
            entry(1, Invalidate, 0, 1, 1),
            entry(2, Assert, 0, 1, 2),
            entry(3, Assert, 0, 2, 3),
        ];
        let folded = fold(&entries);
        assert_eq!(
            folded.no_ops,
            vec![(1, Applied::NothingOpen), (3, Applied::AlreadyOpen)]
        );
    }

    /// The simple model: is `key` valid at `t`? Replays the log pointwise without intervals.
    fn model_valid(entries: &[LogEntry<u8, i64>], key: u8, t: i64) -> bool {
        let mut sorted: Vec<_> = entries.iter().filter(|e| e.key == key).collect();
        sorted.sort_by_key(|e| (e.recorded_at, e.seq));
        let mut open_from: Option<i64> = None;
        let mut valid = false;
        for e in sorted {
            match (e.op, open_from) {
                (Assert, None) => open_from = Some(e.at),
                (Invalidate, Some(from)) => {
                    if from <= t && t < e.at {
                        valid = true;
                    }
                    open_from = None;
                }
                _ => {}
            }
        }
        valid || open_from.is_some_and(|from| from <= t)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_fold_matches_the_model_at_every_time_point(
            ops in prop::collection::vec((any::<bool>(), 0u8..3, 0i64..20, 0i64..10), 0..40),
        ) {
            let entries: Vec<_> = ops
                .iter()
                .enumerate()
                .map(|(i, (assert, key, at, rec))| {
                    entry(i as i64 + 1, if *assert { Assert } else { Invalidate }, *key, *at, *rec)
                })
                .collect();
            let folded = fold(&entries);
            for key in 0u8..3 {
                for t in -1i64..22 {
                    let got = folded.intervals.get(&key).is_some_and(|list| list.iter().any(|i| i.valid_at(&t)));
                    prop_assert_eq!(got, model_valid(&entries, key, t), "key {} at {}", key, t);
                }
            }
            // the fold is the same whatever order the entries are handed in
            let mut reversed = entries.clone();
            reversed.reverse();
            let again = fold(&reversed);
            prop_assert_eq!(format!("{:?}", again.intervals), format!("{:?}", folded.intervals));
        }
    }
}
