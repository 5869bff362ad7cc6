//! Windowed rates, averages and maxima as Java's metrics compute them (`SampledStat`, `Rate`):
//! `metrics.num.samples` samples of `metrics.sample.window.ms` each, from the `now` the
//! producer is given (no clock is read).
//!
//! Rather than one sampled statistic per metric, every windowed figure is derived from one
//! ring of checkpoints: when a sample ends (the first update at or after its start plus the
//! window), the totals at that instant are copied into a new sample. A rate over the window is
//! then the totals now minus the totals at the start of the oldest sample not yet expired,
//! divided by the time Java's `Rate` divides by; an average is the ratio of two such
//! differences (`batch-size-avg` = bytes sent / batches sent in the window). Maxima are kept
//! per sample. So an update costs what it did before (the counters are the producer's plain
//! totals) plus one comparison of `now` with the end of the current sample, made once per
//! request, response or batch, never per record.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The most samples a window keeps (`metrics.num.samples` above this is refused).
pub const MAX_SAMPLES: usize = 64;

/// The totals windowed figures are derived from: plain counters over the producer's life, or
/// (in a [`WindowedMetrics`]) their growth over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateTotals {
    /// Records carried by Produce requests (retries included): `record-send-*`.
    pub records_sent: u64,
    /// Records reported failed: `record-error-*`.
    pub records_failed: u64,
    /// Records put back to be sent again: `record-retry-*`.
    pub records_retried: u64,
    /// Produce requests sent: `request-*`.
    pub requests: u64,
    /// Record batch bytes carried by Produce requests (retries included): `outgoing-byte-*`.
    pub bytes_sent: u64,
    /// What those batches held before compression (header included).
    pub uncompressed_bytes_sent: u64,
    /// Batches carried by Produce requests (retries included).
    pub batches_sent: u64,
    /// Nanoseconds records waited for buffer space: `bufferpool-wait-*`.
    pub buffer_wait_ns: u64,
    /// Nanoseconds records were held back by the queue-delay limit (`queue.delay.target.ms`).
    pub queue_delay_wait_ns: u64,
    /// Produce responses received.
    pub responses: u64,
    /// Their round trips added up, in microseconds.
    pub latency_us: u64,
    /// Their `throttle_time_ms` added up, in milliseconds.
    pub throttle_ms: u64,
}

impl RateTotals {
    fn minus(&self, o: &RateTotals) -> RateTotals {
        RateTotals {
            records_sent: self.records_sent.saturating_sub(o.records_sent),
            records_failed: self.records_failed.saturating_sub(o.records_failed),
            records_retried: self.records_retried.saturating_sub(o.records_retried),
            requests: self.requests.saturating_sub(o.requests),
            bytes_sent: self.bytes_sent.saturating_sub(o.bytes_sent),
            uncompressed_bytes_sent: self
                .uncompressed_bytes_sent
                .saturating_sub(o.uncompressed_bytes_sent),
            batches_sent: self.batches_sent.saturating_sub(o.batches_sent),
            buffer_wait_ns: self.buffer_wait_ns.saturating_sub(o.buffer_wait_ns),
            queue_delay_wait_ns: self
                .queue_delay_wait_ns
                .saturating_sub(o.queue_delay_wait_ns),
            responses: self.responses.saturating_sub(o.responses),
            latency_us: self.latency_us.saturating_sub(o.latency_us),
            throttle_ms: self.throttle_ms.saturating_sub(o.throttle_ms),
        }
    }
}

/// The maxima kept per sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Maxima {
    /// The longest Produce round trip, in microseconds: `request-latency-max`.
    pub latency_us: u64,
    /// The longest `throttle_time_ms` of a Produce response: `produce-throttle-time-max`.
    pub throttle_ms: u64,
    /// The largest batch sent, in bytes: `batch-size-max`.
    pub batch_bytes: u64,
}

impl Maxima {
    fn max(self, o: Maxima) -> Maxima {
        Maxima {
            latency_us: self.latency_us.max(o.latency_us),
            throttle_ms: self.throttle_ms.max(o.throttle_ms),
            batch_bytes: self.batch_bytes.max(o.batch_bytes),
        }
    }
}

#[derive(Debug, Clone)]
struct Sample {
    start: Instant,
    /// The totals when the sample started.
    at_start: RateTotals,
    maxima: Maxima,
}

/// The ring of samples (the last is the current one).
#[derive(Debug, Clone)]
pub(crate) struct Windows {
    window: Duration,
    samples: usize,
    ring: VecDeque<Sample>,
    /// When the current sample ends: the first update at or after it starts a new one.
    next_roll: Instant,
}

impl Windows {
    /// Windows of `window` each, `samples` of them (1 to [`MAX_SAMPLES`]), the first starting
    /// at `now`.
    pub(crate) fn new(window: Duration, samples: usize, now: Instant) -> Self {
        let window = window.max(Duration::from_millis(1));
        let samples = samples.clamp(1, MAX_SAMPLES);
        let mut ring = VecDeque::with_capacity(samples + 1);
        ring.push_back(Sample {
            start: now,
            at_start: RateTotals::default(),
            maxima: Maxima::default(),
        });
        Windows {
            window,
            samples,
            ring,
            next_roll: now + window,
        }
    }

    /// Call before counting anything at `now`: ends the current sample if its window passed,
    /// starting the next one with `totals` (the counters as they are, before the update).
    #[cfg(test)]
    pub(crate) fn tick(&mut self, now: Instant, totals: impl FnOnce() -> RateTotals) {
        if self.due(now) {
            self.roll(now, totals());
        }
    }

    /// Whether the current sample's window passed at `now` ([`Windows::roll`] is then due
    /// before anything is counted).
    #[inline]
    pub(crate) fn due(&self, now: Instant) -> bool {
        now >= self.next_roll
    }

    /// Ends the current sample, starting the next one at `now` with `totals` (the counters as
    /// they are, before the update about to be counted).
    #[cold]
    pub(crate) fn roll(&mut self, now: Instant, totals: RateTotals) {
        self.ring.push_back(Sample {
            start: now,
            at_start: totals,
            maxima: Maxima::default(),
        });
        while self.ring.len() > self.samples {
            self.ring.pop_front();
        }
        self.next_roll = now + self.window;
    }

    /// The current sample's maxima, to raise (once [`Windows::roll`] ran if [`Windows::due`]).
    #[inline]
    pub(crate) fn maxima_mut(&mut self) -> &mut Maxima {
        &mut self.ring.back_mut().expect("never empty").maxima
    }

    /// The windowed figures at `now`, with `totals` the counters now. A sample that started
    /// `samples * window` or longer ago is expired (Java's `purgeObsoleteSamples`); the time a
    /// rate is divided by is Java's `Rate.windowSize`: from the oldest live sample's start to
    /// `now`, at least `samples - 1` whole windows, at least 1 ms.
    pub(crate) fn measure(&self, now: Instant, totals: RateTotals) -> WindowedMetrics {
        let horizon = self.window * self.samples as u32;
        let live = self
            .ring
            .iter()
            .position(|s| now.saturating_duration_since(s.start) < horizon);
        let (start, growth, maxima) = match live {
            Some(i) => {
                let oldest = &self.ring[i];
                let maxima = self
                    .ring
                    .range(i..)
                    .fold(Maxima::default(), |m, s| m.max(s.maxima));
                (oldest.start, totals.minus(&oldest.at_start), maxima)
            }
            // Every sample expired: Java's `oldest` is a fresh sample starting now.
            None => (now, RateTotals::default(), Maxima::default()),
        };
        let mut elapsed = now.saturating_duration_since(start);
        let full = (elapsed.as_nanos() / self.window.as_nanos()) as u64;
        let min_full = self.samples as u64 - 1;
        if full < min_full {
            elapsed += self.window * (min_full - full) as u32;
        }
        WindowedMetrics {
            elapsed: elapsed.max(Duration::from_millis(1)),
            growth,
            maxima,
        }
    }
}

/// The windowed part of a [`crate::MetricsSnapshot`]: what the totals grew by over the window
/// and the time they grew in, from which Java's `*-rate` and `*-avg` figures come (the methods
/// here), and the window's maxima.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowedMetrics {
    /// The time rates are divided by (Java's `Rate.windowSize`: at least
    /// `(metrics.num.samples - 1) * metrics.sample.window.ms`, at most
    /// `metrics.num.samples * metrics.sample.window.ms`).
    pub elapsed: Duration,
    /// What the totals grew by within the window.
    pub growth: RateTotals,
    /// The maxima within the window.
    pub maxima: Maxima,
}

impl Default for WindowedMetrics {
    fn default() -> Self {
        WindowedMetrics {
            elapsed: Duration::from_millis(1),
            growth: RateTotals::default(),
            maxima: Maxima::default(),
        }
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        f64::NAN
    } else {
        num as f64 / den as f64
    }
}

impl WindowedMetrics {
    /// `n` over the window, per second.
    pub fn per_second(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64()
    }
    /// `record-send-rate`: records sent per second (retries included).
    pub fn record_send_rate(&self) -> f64 {
        self.per_second(self.growth.records_sent)
    }
    /// `record-error-rate`: records reported failed per second.
    pub fn record_error_rate(&self) -> f64 {
        self.per_second(self.growth.records_failed)
    }
    /// `record-retry-rate`: records put back to be sent again, per second.
    pub fn record_retry_rate(&self) -> f64 {
        self.per_second(self.growth.records_retried)
    }
    /// `request-rate`: Produce requests per second.
    pub fn request_rate(&self) -> f64 {
        self.per_second(self.growth.requests)
    }
    /// `outgoing-byte-rate`: record batch bytes sent per second.
    pub fn outgoing_byte_rate(&self) -> f64 {
        self.per_second(self.growth.bytes_sent)
    }
    /// `batch-size-avg`: bytes per batch sent (NaN when none was).
    pub fn batch_size_avg(&self) -> f64 {
        ratio(self.growth.bytes_sent, self.growth.batches_sent)
    }
    /// `records-per-request-avg` (NaN when no request was sent).
    pub fn records_per_request_avg(&self) -> f64 {
        ratio(self.growth.records_sent, self.growth.requests)
    }
    /// `compression-rate-avg`: bytes sent over their size before compression (1 without
    /// compression; NaN when nothing was sent). Java averages the batches' ratios; this
    /// weighs each batch by its size.
    pub fn compression_rate_avg(&self) -> f64 {
        ratio(self.growth.bytes_sent, self.growth.uncompressed_bytes_sent)
    }
    /// `request-latency-avg`, in milliseconds (NaN without responses).
    pub fn request_latency_avg_ms(&self) -> f64 {
        ratio(self.growth.latency_us, self.growth.responses) / 1000.0
    }
    /// `request-latency-max`, in milliseconds (0 without responses).
    pub fn request_latency_max_ms(&self) -> f64 {
        self.maxima.latency_us as f64 / 1000.0
    }
    /// `produce-throttle-time-avg`, in milliseconds, over every Produce response (NaN
    /// without responses).
    pub fn produce_throttle_time_avg_ms(&self) -> f64 {
        ratio(self.growth.throttle_ms, self.growth.responses)
    }
    /// `produce-throttle-time-max`, in milliseconds.
    pub fn produce_throttle_time_max_ms(&self) -> f64 {
        self.maxima.throttle_ms as f64
    }
    /// `batch-size-max`, in bytes.
    pub fn batch_size_max(&self) -> f64 {
        self.maxima.batch_bytes as f64
    }
    /// `bufferpool-wait-ratio`: the fraction of the window records spent waiting for buffer
    /// space (waits are counted when they end: at the record's acceptance).
    pub fn bufferpool_wait_ratio(&self) -> f64 {
        self.growth.buffer_wait_ns as f64 / self.elapsed.as_nanos() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn sent(n: u64) -> RateTotals {
        RateTotals {
            records_sent: n,
            ..RateTotals::default()
        }
    }

    /// Java's defaults: 2 samples of 30 s.
    #[test]
    fn a_rate_divides_by_at_least_one_window_as_java_does() {
        let t0 = Instant::now();
        let mut w = Windows::new(30 * S, 2, t0);
        // 300 records in the first 10 s: Java's `Rate.windowSize` adds the whole windows
        // missing to make `samples - 1` of them: 10 s + 30 s.
        w.tick(t0 + 10 * S, || sent(0));
        let m = w.measure(t0 + 10 * S, sent(300));
        assert_eq!(m.elapsed, 40 * S);
        assert_eq!(m.record_send_rate(), 7.5);
        // At 45 s the first sample (started at 0) is still live: 45 s elapsed.
        w.tick(t0 + 45 * S, || sent(300));
        let m = w.measure(t0 + 45 * S, sent(750));
        assert_eq!(m.elapsed, 45 * S);
        assert_eq!(m.growth.records_sent, 750);
        // At 65 s the first sample expired (65 s old, past 2 x 30 s): the window starts at the
        // second sample's start (45 s): 20 s, plus one whole window.
        let m = w.measure(t0 + 65 * S, sent(750));
        assert_eq!(m.growth.records_sent, 450);
        assert_eq!(m.elapsed, 50 * S);
        assert_eq!(m.record_send_rate(), 9.0);
    }

    #[test]
    fn samples_roll_and_expire() {
        let t0 = Instant::now();
        let mut w = Windows::new(S, 3, t0);
        for i in 1..=10u64 {
            let now = t0 + S * i as u32;
            w.tick(now, || sent(i * 100 - 100));
            assert!(w.ring.len() <= 3, "at most `samples` samples");
        }
        // Samples start at 8, 9 and 10 s; at 10.5 s all three are live: 2.5 s elapsed, two
        // whole windows (3 samples - 1) or more, so nothing is added.
        let m = w.measure(t0 + S * 10 + S / 2, sent(1000));
        assert_eq!(m.elapsed, S * 2 + S / 2);
        assert_eq!(m.growth.records_sent, 1000 - 700);
        // Long after, everything expired: nothing counts and the rate is 0.
        let m = w.measure(t0 + S * 100, sent(1000));
        assert_eq!(m.growth, RateTotals::default());
        assert_eq!(m.elapsed, S * 2);
        assert_eq!(m.record_send_rate(), 0.0);
    }

    #[test]
    fn maxima_are_per_sample_and_expire_with_it() {
        let t0 = Instant::now();
        let mut w = Windows::new(S, 2, t0);
        w.tick(t0, RateTotals::default);
        w.maxima_mut().latency_us = 9000;
        w.tick(t0 + S, RateTotals::default);
        w.maxima_mut().latency_us = 2000;
        let m = w.measure(t0 + S + S / 2, RateTotals::default());
        assert_eq!(m.request_latency_max_ms(), 9.0, "both samples are live");
        let m = w.measure(t0 + S * 2 + S / 2, RateTotals::default());
        assert_eq!(m.request_latency_max_ms(), 2.0, "the first expired");
    }

    #[test]
    fn averages_and_ratios() {
        let t0 = Instant::now();
        let w = Windows::new(10 * S, 2, t0);
        let totals = RateTotals {
            records_sent: 1000,
            requests: 10,
            batches_sent: 20,
            bytes_sent: 40_000,
            uncompressed_bytes_sent: 80_000,
            responses: 10,
            latency_us: 25_000,
            throttle_ms: 50,
            buffer_wait_ns: 2_500_000_000,
            ..RateTotals::default()
        };
        let m = w.measure(t0 + 10 * S, totals);
        assert_eq!(m.elapsed, 10 * S);
        assert_eq!(m.records_per_request_avg(), 100.0);
        assert_eq!(m.batch_size_avg(), 2000.0);
        assert_eq!(m.compression_rate_avg(), 0.5);
        assert_eq!(m.request_latency_avg_ms(), 2.5);
        assert_eq!(m.produce_throttle_time_avg_ms(), 5.0);
        assert_eq!(m.bufferpool_wait_ratio(), 0.25);
        assert!(WindowedMetrics::default().batch_size_avg().is_nan());
    }
}
