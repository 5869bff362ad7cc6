//! Delivery latencies: an HDR histogram in microseconds (3 significant digits), up to an hour.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Delivery latencies seen so far.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies::new()
    }
}

impl Latencies {
    /// An empty histogram.
    pub fn new() -> Latencies {
        Latencies {
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }

    /// Counts one latency (clamped to the histogram's range: 1 µs to an hour).
    pub fn record(&mut self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        self.histogram.saturating_record(us);
    }

    /// How many latencies were counted.
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether none was counted.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The latency at quantile `q` (0.0-1.0), in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        self.histogram.value_at_quantile(q) as f64 / 1000.0
    }

    /// The mean, in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        self.histogram.mean() / 1000.0
    }

    /// The largest, in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.histogram.max() as f64 / 1000.0
    }

    /// `p50 3.01  p90 10.57  p99 24.78  p99.9 38.57  max 43.61` (milliseconds).
    pub fn summary(&self) -> String {
        format!(
            "p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
            self.quantile_ms(0.5),
            self.quantile_ms(0.9),
            self.quantile_ms(0.99),
            self.quantile_ms(0.999),
            self.max_ms()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_known_latencies() {
        let mut l = Latencies::new();
        for ms in 1..=100u64 {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.len(), 100);
        assert!(
            (l.quantile_ms(0.5) - 50.0).abs() < 0.1,
            "{}",
            l.quantile_ms(0.5)
        );
        assert!((l.max_ms() - 100.0).abs() < 0.1, "{}", l.max_ms());
        assert!(l.summary().starts_with("p50 50.0"), "{}", l.summary());
    }
}
