//! [`Histogram`]: fixed log-spaced buckets, no allocation, updated once per batch or response;
//! and the two shapes the producer keeps (latencies in microseconds, sizes in bytes).

/// How many finite buckets a [`Histogram`] has (the `+Inf` bucket comes on top).
pub const HISTOGRAM_BUCKETS: usize = 20;

/// A histogram of non-negative integer values with [`HISTOGRAM_BUCKETS`] log-spaced buckets:
/// bucket `i` counts values up to `first_bound * 2^i`, and one more bucket those above. It
/// maps one to one onto a Prometheus histogram (`le` bounds, cumulative counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// log2 of the first bucket's upper bound.
    shift: u32,
    /// Per-bucket counts (not cumulative); the last is `+Inf`.
    counts: [u64; HISTOGRAM_BUCKETS + 1],
    sum: u64,
    count: u64,
}

impl Histogram {
    /// An empty histogram whose first bucket ends at `2^shift`.
    pub(crate) const fn new(shift: u32) -> Self {
        Histogram {
            shift,
            counts: [0; HISTOGRAM_BUCKETS + 1],
            sum: 0,
            count: 0,
        }
    }

    /// Counts `value` `n` times.
    #[inline]
    pub(crate) fn record_n(&mut self, value: u64, n: u64) {
        // Bucket i holds (2^shift * 2^(i-1), 2^shift * 2^i]; bucket 0 everything up to 2^shift.
        let scaled = value.saturating_sub(1) >> self.shift;
        let i = (u64::BITS - scaled.leading_zeros()) as usize;
        self.counts[i.min(HISTOGRAM_BUCKETS)] += n;
        self.sum = self.sum.saturating_add(value.saturating_mul(n));
        self.count += n;
    }

    /// Counts `value` once.
    #[inline]
    pub(crate) fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// How many values were counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum of the values counted (saturating).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The upper bound of finite bucket `i` (`i < HISTOGRAM_BUCKETS`).
    pub fn bound(&self, i: usize) -> u64 {
        1u64 << (self.shift as usize + i)
    }

    /// The buckets in Prometheus form: `(upper bound, values counted up to it)` with cumulative
    /// counts; the last has bound `None` (`+Inf`) and counts everything.
    pub fn buckets(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        let mut acc = 0;
        self.counts.iter().enumerate().map(move |(i, &c)| {
            acc += c;
            ((i < HISTOGRAM_BUCKETS).then(|| self.bound(i)), acc)
        })
    }
}

/// 128 us .. 67 s.
pub(super) fn latency_histogram() -> Histogram {
    Histogram::new(7)
}

/// 64 B .. 32 MiB.
pub(super) fn size_histogram() -> Histogram {
    Histogram::new(6)
}
