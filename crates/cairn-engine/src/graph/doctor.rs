//! `doctor`'s graph check: the derived validity intervals must equal the fold of the edge log;
//! `--repair` rebuilds them from the log (the log itself is never changed).

use crate::maintenance::Check;
use crate::{Engine, EngineError, Result};
use cairn_core::graph::fold::{self, EdgeOp, Interval, LogEntry};
use cairn_store::EdgeKey;

impl Engine {
    /// Compares the derived intervals with a fresh fold of the log; with `repair`, replaces
    /// them. Returns the finding and, when it repaired, what it did.
    pub(crate) fn graph_check(&mut self, repair: bool) -> Result<(Check, Option<String>)> {
        let reader = self.store.reader()?;
        let log = reader.edge_log()?;
        let mut entries = Vec::with_capacity(log.len());
        let mut malformed = 0usize;
        for row in &log {
            let op = EdgeOp::parse(&row.op);
            let at = match op {
                Some(EdgeOp::Assert) => row.valid_from.clone(),
                Some(EdgeOp::Invalidate) => row.valid_to.clone(),
                None => None,
            };
            match (op, at) {
                (Some(op), Some(at)) => entries.push(LogEntry {
                    seq: row.seq,
                    op,
                    key: row.key.clone(),
                    at,
                    recorded_at: row.recorded_at.clone(),
                    confidence: row.confidence,
                }),
                _ => malformed += 1,
            }
        }
        let folded = fold::fold(&entries);
        let expected: Vec<(EdgeKey, Interval<String>)> = folded
            .intervals
            .into_iter()
            .flat_map(|(key, intervals)| intervals.into_iter().map(move |i| (key.clone(), i)))
            .collect();
        let mut actual: Vec<(EdgeKey, Interval<String>)> = reader
            .all_intervals()?
            .into_iter()
            .map(|row| (row.key.clone(), row.to_interval()))
            .collect();
        // The fold orders by key (records before entities), then by the asserting entry.
        actual.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.assert_seq.cmp(&b.1.assert_seq)));
        let (entities, _, _, quarantined) = reader.graph_counts()?;
        let ok = expected == actual;
        let mut repaired = None;
        if !ok && repair {
            self.store.write(|tx| {
                tx.replace_intervals(&expected)?;
                Ok::<_, EngineError>(())
            })?;
            repaired = Some(format!(
                "rebuilt {} edge intervals from the edge log ({} were stored)",
                expected.len(),
                actual.len()
            ));
        }
        let mut detail = format!(
            "{} log entries fold to {} intervals; {} stored; {entities} entities",
            log.len(),
            expected.len(),
            actual.len()
        );
        if malformed > 0 {
            detail.push_str(&format!(
                "; {malformed} log entries without their time were skipped"
            ));
        }
        if quarantined > 0 {
            detail.push_str(&format!(
                "; {quarantined} edge(s) wait in quarantine for an endpoint"
            ));
        }
        Ok((
            Check {
                name: "graph".into(),
                warning: false,
                ok,
                detail,
                fix: (!ok && !repair).then(|| "cairn doctor --repair".into()),
            },
            repaired,
        ))
    }
}
