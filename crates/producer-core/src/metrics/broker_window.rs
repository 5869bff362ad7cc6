//! [`BrokerWindows`]: what each broker did over the sample window, for
//! [`crate::diagnosis`]: counters and clocks kept per broker slot as the producer runs (once
//! per request, response, batch sent or connection change, never per record), checkpointed
//! when a sample of `metrics.sample.window.ms` ends, and measured over the live samples as
//! [`BrokerWindow`], with each broker's usual round trip ([`BrokerWindow::baseline_latency_us`]).
//!
//! The samples roll at the same instants as the producer-wide windows ([`crate::windowed`]):
//! [`super::Metrics::tick`] rolls both.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::windowed::MAX_SAMPLES;
use crate::ErrorCode;

/// A closed sample needs at least this many answers before its average round trip may become
/// its broker's usual ([`BrokerWindow::baseline_latency_us`]).
pub const BASELINE_MIN_RESPONSES: u64 = 5;

/// One broker's totals over its life (in a [`BrokerWindow`]: their growth over the window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerTotals {
    /// Produce requests sent to it.
    pub requests: u64,
    /// Records those carried (retries included).
    pub records: u64,
    /// Record batch bytes those carried (retries included).
    pub bytes: u64,
    /// Produce answers received from it.
    pub responses: u64,
    /// Their round trips added up, in microseconds.
    pub latency_us: u64,
    /// Their `throttle_time_ms` added up.
    pub throttle_ms: u64,
    /// Of them, answers with `throttle_time_ms` above 0.
    pub throttled_responses: u64,
    /// Batches sent to it for the first time.
    pub batches: u64,
    /// Of those, batches sealed because they were full (`batch.size` reached, or the next
    /// record did not fit).
    pub batches_full: u64,
    /// Produce requests sent because a batch's `linger.ms` had passed: no batch in them was
    /// sealed full, and at least one sent for the first time had waited its `linger.ms`.
    pub requests_lingered: u64,
    /// Batches of partitions it leads put back to be sent again.
    pub batches_retried: u64,
    /// Nanoseconds every `max.in.flight.requests.per.connection` slot of its connection was
    /// busy with a Produce request.
    pub saturated_ns: u64,
    /// Nanoseconds at least one Produce request to it was in flight.
    pub busy_ns: u64,
    /// Nanoseconds the producer wanted a connection to it (to send, or to ask it something)
    /// and had no ready one: from a connection attempt, or from a lost connection while
    /// partitions it leads held records, to the connection's readiness.
    pub down_ns: u64,
}

impl BrokerTotals {
    fn minus(&self, o: &BrokerTotals) -> BrokerTotals {
        BrokerTotals {
            requests: self.requests.saturating_sub(o.requests),
            records: self.records.saturating_sub(o.records),
            bytes: self.bytes.saturating_sub(o.bytes),
            responses: self.responses.saturating_sub(o.responses),
            latency_us: self.latency_us.saturating_sub(o.latency_us),
            throttle_ms: self.throttle_ms.saturating_sub(o.throttle_ms),
            throttled_responses: self
                .throttled_responses
                .saturating_sub(o.throttled_responses),
            batches: self.batches.saturating_sub(o.batches),
            batches_full: self.batches_full.saturating_sub(o.batches_full),
            requests_lingered: self.requests_lingered.saturating_sub(o.requests_lingered),
            batches_retried: self.batches_retried.saturating_sub(o.batches_retried),
            saturated_ns: self.saturated_ns.saturating_sub(o.saturated_ns),
            busy_ns: self.busy_ns.saturating_sub(o.busy_ns),
            down_ns: self.down_ns.saturating_sub(o.down_ns),
        }
    }
}

/// One broker over the sample window: part of its [`super::BrokerMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerWindow {
    /// The time the window covers: from the start of the oldest live sample to the snapshot
    /// (at most `metrics.num.samples` x `metrics.sample.window.ms`; shorter early in the
    /// producer's life). Fractions of time are of this.
    pub span: Duration,
    /// What its totals grew by in the window (the clocks include a period still running).
    pub growth: BrokerTotals,
    /// Its usual Produce round trip, in microseconds: the lowest average of a closed sample
    /// with at least [`BASELINE_MIN_RESPONSES`] answers over its life; `None` before one.
    pub baseline_latency_us: Option<u64>,
    /// The error code of its partitions' last retried batch (`NONE` for a lost connection's).
    pub last_retry_error: Option<ErrorCode>,
}

impl BrokerWindow {
    /// `n` nanoseconds as a fraction of [`BrokerWindow::span`] (0 when the span is 0), at most 1.
    pub fn fraction(&self, ns: u64) -> f64 {
        let span = self.span.as_nanos();
        if span == 0 {
            0.0
        } else {
            (ns as f64 / span as f64).min(1.0)
        }
    }

    /// The average round trip in the window, in microseconds (`None` without answers).
    pub fn latency_avg_us(&self) -> Option<u64> {
        (self.growth.responses > 0).then(|| self.growth.latency_us / self.growth.responses)
    }

    /// `n` over the span, per second (0 for an empty span).
    pub fn per_second(&self, n: u64) -> f64 {
        let s = self.span.as_secs_f64();
        if s > 0.0 {
            n as f64 / s
        } else {
            0.0
        }
    }
}

/// A clock that runs while a condition holds: the total of the closed periods and when the
/// running one started.
#[derive(Debug, Clone, Copy, Default)]
struct Stopwatch {
    total_ns: u64,
    since: Option<Instant>,
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Stopwatch {
    /// Sets whether the condition holds at `now` (starting or stopping the clock; no change
    /// when it already is so).
    fn set(&mut self, on: bool, now: Instant) {
        match (on, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(t)) => {
                self.total_ns = self
                    .total_ns
                    .saturating_add(nanos(now.saturating_duration_since(t)));
                self.since = None;
            }
            _ => {}
        }
    }

    /// The time counted at `now`, the running period included.
    fn at(&self, now: Instant) -> u64 {
        let running = self
            .since
            .map_or(0, |t| nanos(now.saturating_duration_since(t)));
        self.total_ns.saturating_add(running)
    }
}

/// What is kept for one broker slot as the producer runs.
#[derive(Debug, Clone, Default)]
struct Live {
    counts: BrokerTotals,
    saturated: Stopwatch,
    busy: Stopwatch,
    down: Stopwatch,
    baseline_latency_us: Option<u64>,
    last_retry_error: Option<ErrorCode>,
}

impl Live {
    fn totals(&self, now: Instant) -> BrokerTotals {
        BrokerTotals {
            saturated_ns: self.saturated.at(now),
            busy_ns: self.busy.at(now),
            down_ns: self.down.at(now),
            ..self.counts
        }
    }
}

/// A checkpoint: the totals of every slot when a sample started.
#[derive(Debug, Clone)]
struct Checkpoint {
    start: Instant,
    totals: Vec<BrokerTotals>,
}

/// The per-broker series of the diagnosis: one [`Live`] per broker slot (at most the slots,
/// as the other per-broker tables) and a ring of at most `metrics.num.samples` checkpoints,
/// each a vector of one entry per slot (at most [`MAX_SAMPLES`] x the slots in all).
#[derive(Debug, Clone)]
pub(crate) struct BrokerWindows {
    window: Duration,
    samples: usize,
    live: Vec<Live>,
    ring: VecDeque<Checkpoint>,
}

impl BrokerWindows {
    /// Windows of `window`, `samples` of them (1 to [`MAX_SAMPLES`]), the first starting at
    /// `now` (as [`crate::windowed`]'s).
    pub(crate) fn new(window: Duration, samples: usize, now: Instant) -> Self {
        let samples = samples.clamp(1, MAX_SAMPLES);
        let mut ring = VecDeque::with_capacity(samples + 1);
        ring.push_back(Checkpoint {
            start: now,
            totals: Vec::new(),
        });
        BrokerWindows {
            window: window.max(Duration::from_millis(1)),
            samples,
            live: Vec::new(),
            ring,
        }
    }

    fn entry(&mut self, slot: u32) -> &mut Live {
        let i = slot as usize;
        if i >= self.live.len() {
            self.live.resize_with(i + 1, Live::default);
        }
        &mut self.live[i]
    }

    /// A sample ended at `now` (called with the producer-wide roll): the closed sample's
    /// average round trip may lower each broker's usual, and the next sample starts from the
    /// totals now. The oldest checkpoint's vector is reused once the ring is full.
    #[cold]
    pub(crate) fn roll(&mut self, now: Instant) {
        if let Some(last) = self.ring.back() {
            for (i, l) in self.live.iter_mut().enumerate() {
                let before = last.totals.get(i).copied().unwrap_or_default();
                let closed = l.totals(now).minus(&before);
                if closed.responses >= BASELINE_MIN_RESPONSES {
                    let avg = closed.latency_us / closed.responses;
                    l.baseline_latency_us = Some(l.baseline_latency_us.map_or(avg, |b| b.min(avg)));
                }
            }
        }
        let mut totals = if self.ring.len() >= self.samples {
            self.ring.pop_front().map(|c| c.totals).unwrap_or_default()
        } else {
            Vec::new()
        };
        totals.clear();
        totals.extend(self.live.iter().map(|l| l.totals(now)));
        self.ring.push_back(Checkpoint { start: now, totals });
    }

    /// A Produce request carrying `records` records and `bytes` batch bytes went to `slot`;
    /// `lingered` says it went because a batch's `linger.ms` had passed.
    #[inline]
    pub(crate) fn request_sent(&mut self, slot: u32, records: u64, bytes: u64, lingered: bool) {
        let c = &mut self.entry(slot).counts;
        c.requests += 1;
        c.requests_lingered += u64::from(lingered);
        c.records += records;
        c.bytes += bytes;
    }

    /// A batch went to `slot` for the first time; `full` says it was sealed full.
    #[inline]
    pub(crate) fn batch_sent_first(&mut self, slot: u32, full: bool) {
        let c = &mut self.entry(slot).counts;
        c.batches += 1;
        c.batches_full += u64::from(full);
    }

    /// A Produce answer came from `slot` after `latency_us`, throttled `throttle_ms`.
    pub(crate) fn answered(&mut self, slot: u32, latency_us: u64, throttle_ms: u64) {
        let c = &mut self.entry(slot).counts;
        c.responses += 1;
        c.latency_us += latency_us;
        c.throttle_ms += throttle_ms;
        c.throttled_responses += u64::from(throttle_ms > 0);
    }

    /// A batch of a partition `slot` leads was put back to be sent again after `error`.
    pub(crate) fn batch_retried(&mut self, slot: u32, error: ErrorCode) {
        let l = self.entry(slot);
        l.counts.batches_retried += 1;
        l.last_retry_error = Some(error);
    }

    /// `slot`'s connection has `in_flight` Produce requests in flight at `now`, with room for
    /// `max` (call after each change: a request sent, answered or lost).
    pub(crate) fn produce_in_flight(
        &mut self,
        slot: u32,
        now: Instant,
        in_flight: usize,
        max: usize,
    ) {
        let l = self.entry(slot);
        l.saturated.set(in_flight >= max, now);
        l.busy.set(in_flight > 0, now);
    }

    /// Whether the producer wants a connection to `slot` and has no ready one, from `now`.
    pub(crate) fn connection_down(&mut self, slot: u32, down: bool, now: Instant) {
        self.entry(slot).down.set(down, now);
    }

    /// The slot was retired: its series go (the next broker in it starts afresh).
    pub(crate) fn forget(&mut self, slot: u32) {
        if let Some(l) = self.live.get_mut(slot as usize) {
            *l = Live::default();
        }
        for c in &mut self.ring {
            if let Some(t) = c.totals.get_mut(slot as usize) {
                *t = BrokerTotals::default();
            }
        }
    }

    /// `slot` over the window at `now`: the growth since the oldest checkpoint that started
    /// less than `samples` x `window` ago (or, when every one is older, since the newest: no
    /// sample rolled for that long, so nothing was counted in between but running clocks).
    pub(crate) fn measure(&self, slot: u32, now: Instant) -> BrokerWindow {
        let horizon = self.window * self.samples as u32;
        let from = self
            .ring
            .iter()
            .find(|c| now.saturating_duration_since(c.start) < horizon)
            .or(self.ring.back());
        let Some(from) = from else {
            return BrokerWindow::default();
        };
        let Some(l) = self.live.get(slot as usize) else {
            return BrokerWindow {
                span: now.saturating_duration_since(from.start),
                ..BrokerWindow::default()
            };
        };
        let before = from.totals.get(slot as usize).copied().unwrap_or_default();
        BrokerWindow {
            span: now.saturating_duration_since(from.start),
            growth: l.totals(now).minus(&before),
            baseline_latency_us: l.baseline_latency_us,
            last_retry_error: l.last_retry_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn clocks_count_running_periods_and_roll_with_the_samples() {
        let t0 = Instant::now();
        let mut w = BrokerWindows::new(100 * MS, 2, t0);
        w.produce_in_flight(1, t0 + 10 * MS, 5, 5);
        let m = w.measure(1, t0 + 50 * MS);
        assert_eq!(
            m.growth.saturated_ns,
            nanos(40 * MS),
            "the running period counts"
        );
        assert_eq!(m.growth.busy_ns, nanos(40 * MS));
        w.produce_in_flight(1, t0 + 60 * MS, 2, 5);
        w.roll(t0 + 100 * MS);
        w.roll(t0 + 200 * MS);
        // At 250 ms the first sample (0..100) expired: the window starts at 100 ms.
        let m = w.measure(1, t0 + 250 * MS);
        assert_eq!(m.span, 150 * MS);
        assert_eq!(m.growth.saturated_ns, 0, "saturated only before 60 ms");
        assert_eq!(m.growth.busy_ns, nanos(150 * MS), "busy since 10 ms");
        assert_eq!(m.fraction(m.growth.busy_ns), 1.0);
        w.connection_down(1, true, t0 + 230 * MS);
        assert_eq!(w.measure(1, t0 + 250 * MS).growth.down_ns, nanos(20 * MS));
    }

    #[test]
    fn the_baseline_is_the_lowest_sample_average_with_enough_answers() {
        let t0 = Instant::now();
        let mut w = BrokerWindows::new(100 * MS, 2, t0);
        for _ in 0..5 {
            w.answered(2, 4000, 0);
        }
        w.roll(t0 + 100 * MS);
        assert_eq!(w.measure(2, t0 + 150 * MS).baseline_latency_us, Some(4000));
        // Fewer answers than the minimum: no say.
        w.answered(2, 100, 0);
        w.roll(t0 + 200 * MS);
        for _ in 0..5 {
            w.answered(2, 50_000, 7);
        }
        w.roll(t0 + 300 * MS);
        let m = w.measure(2, t0 + 350 * MS);
        assert_eq!(m.baseline_latency_us, Some(4000));
        assert_eq!(m.growth.responses, 5);
        assert_eq!(m.latency_avg_us(), Some(50_000));
        assert_eq!(
            (m.growth.throttle_ms, m.growth.throttled_responses),
            (35, 5)
        );
    }

    #[test]
    fn batches_are_counted_by_how_they_were_sealed_and_forgotten_with_the_slot() {
        let t0 = Instant::now();
        let mut w = BrokerWindows::new(100 * MS, 2, t0);
        w.batch_sent_first(0, true);
        w.batch_sent_first(0, false);
        w.batch_sent_first(0, false);
        w.batch_retried(0, ErrorCode::NOT_ENOUGH_REPLICAS);
        w.request_sent(0, 30, 3000, true);
        let m = w.measure(0, t0 + 10 * MS);
        assert_eq!((m.growth.batches, m.growth.batches_full), (3, 1));
        assert_eq!(m.growth.requests_lingered, 1);
        assert_eq!(m.growth.batches_retried, 1);
        assert_eq!(m.last_retry_error, Some(ErrorCode::NOT_ENOUGH_REPLICAS));
        assert_eq!(
            (m.growth.requests, m.growth.records, m.growth.bytes),
            (1, 30, 3000)
        );
        w.roll(t0 + 100 * MS);
        w.forget(0);
        let m = w.measure(0, t0 + 150 * MS);
        assert_eq!(m.growth, BrokerTotals::default());
        assert_eq!(m.last_retry_error, None);
    }
}
