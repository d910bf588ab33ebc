//! The one percentile definition (and the one reader of `/proc`-style status text) shared by
//! the benchmarks (`cairn-bench`) and the evaluation the `cairn` binary ships (`cairn eval`),
//! so a p95 means the same statistic in every result file.
//!
//! **Nearest rank**: the p-th percentile of n sorted values is the value at 1-based rank
//! `ceil(p / 100 · n)` (rank 1 when that is 0). It is always one of the measured values, never
//! an interpolation, so "p95 of 200 runs" is the 190th fastest run in every result file.

/// The nearest-rank percentile `p` (0–100) of values sorted ascending; NaN when empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The nearest-rank percentile `p` (0–100) of values in any order; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    nearest_rank(&sorted, p)
}

/// The number on the line of `text` that starts with `name` (`/proc/self/status`'s
/// `VmHWM:   51200 kB`, `/proc/meminfo`'s `MemTotal: …`): the caller reads the file, this reads
/// the line.
pub fn status_kb(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|line| line.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_small_and_unsorted_inputs() {
        // 10 values: p50 is rank 5, p95 rank ceil(9.5) = 10, p0 rank 1.
        let values = [7.0, 1.0, 9.0, 3.0, 5.0, 2.0, 10.0, 4.0, 8.0, 6.0];
        assert_eq!(percentile(&values, 50.0), 5.0);
        assert_eq!(percentile(&values, 95.0), 10.0);
        assert_eq!(percentile(&values, 90.0), 9.0);
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&values, 100.0), 10.0);
        // 20 values: p95 is rank 19 — not the maximum, not an interpolation.
        let twenty: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!(percentile(&twenty, 95.0), 19.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn status_lines_are_read_by_name() {
        let text = "Name:\tcairn\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(status_kb(text, "VmHWM:"), Some(51200));
        assert_eq!(status_kb(text, "VmRSS:"), Some(40960));
        assert_eq!(status_kb(text, "VmSwap:"), None);
        assert_eq!(status_kb("VmHWM: lots", "VmHWM:"), None);
    }
}
