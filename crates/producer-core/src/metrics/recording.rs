//! [`Metrics`]: what the producer keeps as it runs (histograms, errors by code, the windows of
//! the Java-named rates, the per-topic and per-broker series, each table bounded by the topics
//! in use and the broker slots), updated where the event happens, and the parts of a snapshot
//! it fills in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::broker_window::BrokerWindows;
use super::histogram::{latency_histogram, size_histogram, Histogram};
use super::per_broker::BrokerMetrics;
use super::per_topic::TopicMetrics;
use super::{MetricsSnapshot, SendWaitCause};
use crate::stats::Stats;
use crate::windowed::{RateTotals, Windows};
use crate::ErrorCode;

/// The histograms and per-code error counts the producer keeps (the plain counters are in
/// [`Stats`]), the windows of the Java-named rates, and the per-topic and per-broker series.
/// Updated where the event happens, once per batch or response.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    /// Produce round trips, in microseconds.
    request_latency: Histogram,
    /// Age of a batch's first record at its success report, in microseconds, weighted by its
    /// records.
    delivery_latency: Histogram,
    /// Encoded size of closed batches, in bytes.
    batch_size: Histogram,
    /// Partition errors of Produce responses, sorted by code.
    errors: Vec<(ErrorCode, u64)>,
    /// The samples of the windowed rates (`metrics.sample.window.ms` x `metrics.num.samples`).
    windows: Windows,
    /// What the batches Produce requests carried held before compression.
    uncompressed_sent: u64,
    /// `throttle_time_ms` of every Produce response, added up.
    throttle_ms: u64,
    /// Since when `send` has refused records as `Full` without accepting one.
    full_since: Option<Instant>,
    /// A wait running in a driver's queue in front of the producer (since when, and why), as
    /// the driver last told ([`Metrics::send_wait_running`]).
    driver_wait: Option<(Instant, SendWaitCause)>,
    /// When the last Metadata answer was applied.
    last_metadata: Option<Instant>,
    /// Per topic, by topic number (a forgotten topic's entry is cleared for the next owner of
    /// its number): at most the topics in use.
    topics: Vec<TopicSeries>,
    /// Per broker, by broker slot (a retired slot's entry is cleared): at most the slots.
    brokers: Vec<BrokerSeries>,
    /// Per broker over the sample window, for the diagnosis (rolled with `windows`).
    broker_windows: BrokerWindows,
}

/// A topic's series, kept by topic number.
#[derive(Debug, Clone, Default)]
struct TopicSeries {
    records_sent: u64,
    bytes_sent: u64,
    uncompressed_bytes_sent: u64,
    records_retried: u64,
    records_failed: u64,
}

/// A broker's series, kept by broker slot.
#[derive(Debug, Clone)]
struct BrokerSeries {
    requests: u64,
    bytes_sent: u64,
    latency: Histogram,
    latency_max_us: u64,
    throttle_ms: u64,
    throttle_max_ms: u64,
    throttled_responses: u64,
}

impl Default for BrokerSeries {
    fn default() -> Self {
        BrokerSeries {
            requests: 0,
            bytes_sent: 0,
            latency: latency_histogram(),
            latency_max_us: 0,
            throttle_ms: 0,
            throttle_max_ms: 0,
            throttled_responses: 0,
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// The entry `i` of a table kept by number, grown to hold it.
#[inline]
fn entry<S: Default>(table: &mut Vec<S>, i: u32) -> &mut S {
    let i = i as usize;
    if i >= table.len() {
        table.resize_with(i + 1, S::default);
    }
    &mut table[i]
}

impl Metrics {
    /// Empty metrics whose first sample starts at `now`.
    pub(crate) fn new(window: Duration, samples: usize, now: Instant) -> Self {
        Metrics {
            request_latency: latency_histogram(),
            delivery_latency: latency_histogram(),
            batch_size: size_histogram(),
            errors: Vec::new(),
            windows: Windows::new(window, samples, now),
            uncompressed_sent: 0,
            throttle_ms: 0,
            full_since: None,
            driver_wait: None,
            last_metadata: None,
            topics: Vec::new(),
            brokers: Vec::new(),
            broker_windows: BrokerWindows::new(window, samples, now),
        }
    }

    /// The totals the windowed figures come from.
    fn totals(&self, stats: &Stats) -> RateTotals {
        RateTotals {
            records_sent: stats.records_sent,
            records_failed: stats.records_failed,
            records_retried: stats.records_retried,
            requests: stats.produce_requests,
            bytes_sent: stats.bytes_sent,
            uncompressed_bytes_sent: self.uncompressed_sent,
            batches_sent: stats.batches_sent,
            buffer_wait_ns: stats.buffer_wait_ns,
            queue_delay_wait_ns: stats.queue_delay_wait_ns,
            responses: self.request_latency.count(),
            latency_us: self.request_latency.sum(),
            throttle_ms: self.throttle_ms,
        }
    }

    /// Call before counting anything windowed at `now` (once per request, response or batch
    /// run): starts the next sample when the current one's window passed.
    #[inline]
    pub(crate) fn tick(&mut self, now: Instant, stats: &Stats) {
        if self.windows.due(now) {
            let totals = self.totals(stats);
            self.windows.roll(now, totals);
            self.broker_windows.roll(now);
        }
    }

    /// A Produce request carried a batch of `topic` (after [`Metrics::tick`]).
    #[inline]
    pub(crate) fn batch_sent(&mut self, topic: u32, records: u64, bytes: usize, raw: usize) {
        let (bytes, raw) = (bytes as u64, raw as u64);
        self.uncompressed_sent += raw;
        let m = self.windows.maxima_mut();
        m.batch_bytes = m.batch_bytes.max(bytes);
        let t = entry(&mut self.topics, topic);
        t.records_sent += records;
        t.bytes_sent += bytes;
        t.uncompressed_bytes_sent += raw;
    }

    /// A Produce request of `records` records in `bytes` batch bytes went to the broker in
    /// `slot` (after [`Metrics::tick`]); `lingered` says it went because a batch's `linger.ms`
    /// had passed (none in it sealed full).
    #[inline]
    pub(crate) fn request_sent(&mut self, slot: u32, records: u64, bytes: u64, lingered: bool) {
        let b = entry(&mut self.brokers, slot);
        b.requests += 1;
        b.bytes_sent += bytes;
        self.broker_windows
            .request_sent(slot, records, bytes, lingered);
    }

    /// A batch went to the broker in `slot` for the first time (after [`Metrics::tick`]):
    /// `full` says it was sealed full.
    #[inline]
    pub(crate) fn batch_sent_first(&mut self, slot: u32, full: bool) {
        self.broker_windows.batch_sent_first(slot, full);
    }

    /// A batch of a partition the broker in `slot` leads was put back to be sent again after
    /// `error` (after [`Metrics::tick`]).
    pub(crate) fn batch_retried(&mut self, slot: u32, error: ErrorCode) {
        self.broker_windows.batch_retried(slot, error);
    }

    /// The broker in `slot` has `in_flight` Produce requests in flight at `now`, with room for
    /// `max`: call after each change (a request sent, answered, or lost with its connection).
    pub(crate) fn produce_in_flight(
        &mut self,
        slot: u32,
        now: Instant,
        in_flight: usize,
        max: usize,
    ) {
        self.broker_windows
            .produce_in_flight(slot, now, in_flight, max);
    }

    /// Whether, from `now`, the producer wants a connection to the broker in `slot` and has no
    /// ready one: true at a connection attempt or at a loss while it leads partitions holding
    /// records, false once a connection is ready.
    pub(crate) fn connection_down(&mut self, slot: u32, down: bool, now: Instant) {
        self.broker_windows.connection_down(slot, down, now);
    }

    /// `records` of `topic` were put back to be sent again (after [`Metrics::tick`]; the
    /// producer-wide total is [`Stats::records_retried`]).
    pub(crate) fn records_retried(&mut self, topic: u32, records: u64) {
        entry(&mut self.topics, topic).records_retried += records;
    }

    /// `records` of `topic` were reported failed (after [`Metrics::tick`]).
    pub(crate) fn records_failed(&mut self, topic: u32, records: u64) {
        entry(&mut self.topics, topic).records_failed += records;
    }

    /// A Produce request to the broker in `slot` was answered `elapsed` after it was sent,
    /// throttled `throttle_time_ms` (after [`Metrics::tick`]).
    pub(crate) fn produce_answered(&mut self, slot: u32, elapsed: Duration, throttle_time_ms: i32) {
        let us = micros(elapsed);
        let throttle = u64::try_from(throttle_time_ms).unwrap_or(0);
        self.request_latency.record(us);
        self.throttle_ms += throttle;
        let m = self.windows.maxima_mut();
        m.latency_us = m.latency_us.max(us);
        m.throttle_ms = m.throttle_ms.max(throttle);
        self.broker_windows.answered(slot, us, throttle);
        let b = entry(&mut self.brokers, slot);
        b.latency.record(us);
        b.latency_max_us = b.latency_max_us.max(us);
        if throttle > 0 {
            b.throttle_ms += throttle;
            b.throttle_max_ms = b.throttle_max_ms.max(throttle);
            b.throttled_responses += 1;
        }
    }

    /// `send` refused a record as `Full` at `now`: a wait for buffer space starts, unless one
    /// already runs.
    #[cold]
    pub(crate) fn buffer_full(&mut self, now: Instant) {
        self.full_since.get_or_insert(now);
    }

    /// Whether a wait for buffer space runs (one branch on `send`'s path).
    #[inline(always)]
    pub(crate) fn waiting_for_buffer(&self) -> bool {
        self.full_since.is_some()
    }

    /// A record was accepted at `now` after refusals as `Full`: the wait ends, counted in
    /// [`Stats::buffer_wait_ns`].
    #[cold]
    pub(crate) fn buffer_wait_ended(&mut self, now: Instant, stats: &mut Stats) {
        if let Some(since) = self.full_since.take() {
            self.tick(now, stats);
            stats.buffer_wait_ns = stats
                .buffer_wait_ns
                .saturating_add(nanos(now.saturating_duration_since(since)));
        }
    }

    /// A driver let a sender through at `now` after holding senders back for `waited` in its
    /// own queue, by `cause`: counted in [`Stats::buffer_wait_ns`] or
    /// [`Stats::queue_delay_wait_ns`] as a wait that ends at `now` (and in the window that
    /// holds `now`), as the producer counts its own.
    #[cold]
    pub(crate) fn send_wait_ended(
        &mut self,
        now: Instant,
        waited: Duration,
        cause: SendWaitCause,
        stats: &mut Stats,
    ) {
        self.tick(now, stats);
        let total = match cause {
            SendWaitCause::BufferMemory => &mut stats.buffer_wait_ns,
            SendWaitCause::QueueDelay => &mut stats.queue_delay_wait_ns,
        };
        *total = total.saturating_add(nanos(waited));
    }

    /// What a driver's queue holds senders back by now: since when and why (`None`: nobody
    /// waits there). Snapshots count it as a wait running.
    pub(crate) fn send_wait_running(&mut self, since: Option<(Instant, SendWaitCause)>) {
        self.driver_wait = since;
    }

    /// A Metadata answer was applied at `now`.
    pub(crate) fn metadata_applied(&mut self, now: Instant) {
        self.last_metadata = Some(now);
    }

    /// Topic number `topic` was forgotten: its series go (the number's next owner starts
    /// afresh).
    pub(crate) fn forget_topic(&mut self, topic: u32) {
        if let Some(t) = self.topics.get_mut(topic as usize) {
            *t = TopicSeries::default();
        }
    }

    /// The broker slot `slot` was retired: its series go.
    pub(crate) fn forget_broker(&mut self, slot: u32) {
        if let Some(b) = self.brokers.get_mut(slot as usize) {
            *b = BrokerSeries::default();
        }
        self.broker_windows.forget(slot);
    }

    /// A batch of `records` records was acknowledged, `age` after its first record.
    pub(crate) fn batch_delivered(&mut self, age: Duration, records: usize) {
        self.delivery_latency.record_n(micros(age), records as u64);
    }

    /// A batch of `bytes` encoded bytes was closed.
    pub(crate) fn batch_closed(&mut self, bytes: usize) {
        self.batch_size.record(bytes as u64);
    }

    /// A Produce response gave `code` (not NONE) for one batch.
    pub(crate) fn partition_error(&mut self, code: ErrorCode) {
        match self.errors.binary_search_by_key(&code, |&(c, _)| c) {
            Ok(i) => self.errors[i].1 += 1,
            Err(i) => self.errors.insert(i, (code, 1)),
        }
    }

    /// The parts of a snapshot this keeps, at `now`, with `stats` the counters and
    /// `queue_delay_since` the start of the producer's own queue-delay wait running.
    pub(crate) fn snapshot_into(
        &self,
        s: &mut MetricsSnapshot,
        now: Instant,
        stats: &Stats,
        queue_delay_since: Option<Instant>,
    ) {
        s.request_latency = self.request_latency.clone();
        s.delivery_latency = self.delivery_latency.clone();
        s.batch_size = self.batch_size.clone();
        s.errors = self.errors.clone();
        s.windowed = self.windows.measure(now, self.totals(stats));
        s.metadata_age = self.last_metadata.map(|t| now.saturating_duration_since(t));
        // A wait runs in the producer, in a driver's queue in front of it, or both: the
        // longer counts (they overlap in time).
        let running = |since: Option<Instant>| {
            since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
        };
        let driver = |cause: SendWaitCause| {
            running(
                self.driver_wait
                    .filter(|&(_, c)| c == cause)
                    .map(|(since, _)| since),
            )
        };
        s.buffer_wait_running = running(self.full_since).max(driver(SendWaitCause::BufferMemory));
        s.queue_delay_wait_running =
            running(queue_delay_since).max(driver(SendWaitCause::QueueDelay));
    }

    /// Topic number `topic`'s series, named `name`.
    pub(crate) fn topic_metrics(&self, topic: u32, name: Arc<str>) -> TopicMetrics {
        let t = self.topics.get(topic as usize).cloned().unwrap_or_default();
        TopicMetrics {
            topic: name,
            records_sent: t.records_sent,
            bytes_sent: t.bytes_sent,
            uncompressed_bytes_sent: t.uncompressed_bytes_sent,
            records_retried: t.records_retried,
            records_failed: t.records_failed,
        }
    }

    /// Fills in the broker in `slot`'s series, its window measured at `now`.
    pub(crate) fn broker_into(&self, slot: u32, b: &mut BrokerMetrics, now: Instant) {
        b.window = self.broker_windows.measure(slot, now);
        if let Some(m) = self.brokers.get(slot as usize) {
            b.requests_sent = m.requests;
            b.bytes_sent = m.bytes_sent;
            b.request_latency = m.latency.clone();
            b.request_latency_max_us = m.latency_max_us;
            b.throttle_time_ms = m.throttle_ms;
            b.throttle_time_max_ms = m.throttle_max_ms;
            b.throttled_responses = m.throttled_responses;
        }
    }
}
