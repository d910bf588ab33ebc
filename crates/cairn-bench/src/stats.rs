//! Latency summaries: nearest-rank percentiles over milliseconds.

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

/// Nearest-rank percentile of sorted values.
fn rank(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[index.clamp(1, sorted.len()) - 1]
}

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
            p50: rank(&sorted, 50.0),
            p95: rank(&sorted, 95.0),
            p99: rank(&sorted, 99.0),
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }

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

pub fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let summary = Summary::of(&values);
        assert_eq!(summary.p50, 50.0);
        assert_eq!(summary.p95, 95.0);
        assert_eq!(summary.p99, 99.0);
        assert_eq!(summary.max, 100.0);
        assert_eq!(Summary::of(&[3.0]).p95, 3.0);
    }
}
