//! Latency summaries, with the one percentile definition every benchmark uses
//! (`cairn_core::stats`, which `cairn eval` uses too).
//!
//! **Nearest rank**: the p-th percentile of n sorted values is the value at 1-based rank
//! `ceil(p / 100 · n)` (rank 1 when that is 0). It is always one of the measured values, never
//! an interpolation, so "p95 of 200 runs" is the 190th fastest run in every result file.

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}

pub use cairn_core::stats::{nearest_rank, percentile};

impl Summary {
    pub fn of(values: &[f64]) -> Summary {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        Summary {
            count,
            mean: if count == 0 {
                f64::NAN
            } else {
                sorted.iter().sum::<f64>() / count as f64
            },
            p50: nearest_rank(&sorted, 50.0),
            p95: nearest_rank(&sorted, 95.0),
            p99: nearest_rank(&sorted, 99.0),
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// The summary of latencies in milliseconds, as every result file writes it.
    pub fn json(&self) -> Value {
        json!({
            "count": self.count,
            "mean_ms": round3(self.mean),
            "p50_ms": round3(self.p50),
            "p95_ms": round3(self.p95),
            "p99_ms": round3(self.p99),
            "min_ms": round3(self.min),
            "max_ms": round3(self.max),
        })
    }
}

/// Milliseconds summary of `values` as JSON (`Summary::of(values).json()`).
pub fn ms_json(values: &[f64]) -> Value {
    Summary::of(values).json()
}

/// Three decimals; NaN (an empty summary) becomes JSON null through serde_json.
pub fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// One decimal.
pub fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let summary = Summary::of(&values);
        assert_eq!(summary.p50, 50.0);
        assert_eq!(summary.p95, 95.0);
        assert_eq!(summary.p99, 99.0);
        assert_eq!(summary.min, 1.0);
        assert_eq!(summary.max, 100.0);
        assert_eq!(summary.mean, 50.5);
    }

    #[test]
    fn summaries_of_small_inputs_use_the_nearest_rank() {
        // The percentile itself is tested in cairn_core::stats.
        assert_eq!(Summary::of(&[3.0]).p95, 3.0);
        assert_eq!(Summary::of(&[3.0, 1.0]).p50, 1.0);
    }

    #[test]
    fn empty_input_is_nan_and_null_in_json() {
        let summary = Summary::of(&[]);
        assert!(summary.p50.is_nan());
        assert_eq!(summary.json()["p95_ms"], Value::Null);
        assert_eq!(summary.json()["count"], 0);
    }
}
