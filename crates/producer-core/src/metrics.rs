//! Metrics: what [`crate::Producer::metrics`] reports, and how it is kept.
//!
//! Nothing here costs anything per record: counters are plain `u64` additions made once per
//! batch, request or report run, histograms are fixed arrays of log-spaced buckets updated
//! once per batch or response (no allocation, no hashing), and everything else (buffer use,
//! brokers, the producer id) is read from the producer's state when a snapshot is taken.
//!
//! # Metric names (Prometheus text, [`MetricsSnapshot::render_prometheus`])
//!
//! Every name starts with `kafka_producer_`. Counters (`_total`) only grow over the producer's
//! life; gauges are the state at the snapshot.
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `kafka_producer_records_sent_total` | counter | | records carried by Produce requests (each attempt counts: retries included) |
//! | `kafka_producer_bytes_sent_total` | counter | | bytes of the record batches carried by Produce requests (retries included) |
//! | `kafka_producer_records_delivered_total` | counter | | records reported delivered |
//! | `kafka_producer_records_failed_total` | counter | | records reported failed |
//! | `kafka_producer_invalid_records_total` | counter | | of the records reported failed, those a broker rejected themselves (named in a Produce response's record errors, KIP-467: [`crate::ProduceError::InvalidRecord`]) |
//! | `kafka_producer_produce_requests_total` | counter | | Produce requests sent (records per request = records sent / this) |
//! | `kafka_producer_batches_sent_total` | counter | | batches carried by Produce requests (retries included); batches per request = this / requests |
//! | `kafka_producer_retries_total` | counter | | batches put back to be sent again |
//! | `kafka_producer_errors_total` | counter | `code`, `name` | partition errors in Produce responses, by error code (one per batch: a batch rejected for its invalid records counts once, however many records it names) |
//! | `kafka_producer_disconnects_total` | counter | | connections lost or timed out |
//! | `kafka_producer_metadata_refreshes_total` | counter | | Metadata responses applied |
//! | `kafka_producer_topics_recreated_total` | counter | | topics seen with a new topic id (deleted and created again while in use) |
//! | `kafka_producer_rebootstraps_total` | counter | | returns to the bootstrap list (`metadata.recovery.strategy=rebootstrap`) |
//! | `kafka_producer_transactions_committed_total` | counter | | transactions committed (a transactional producer) |
//! | `kafka_producer_transactions_aborted_total` | counter | | transactions aborted |
//! | `kafka_producer_malformed_responses_total` | counter | | responses that could not be parsed |
//! | `kafka_producer_ignored_responses_total` | counter | | answers to acks=0 requests, ignored |
//! | `kafka_producer_buffered_records` | gauge | | records accepted and not yet reported |
//! | `kafka_producer_buffered_bytes` | gauge | | their bytes, as counted against `buffer.memory` |
//! | `kafka_producer_in_flight_requests` | gauge | `broker`, `node_id` | requests awaiting an answer on the broker's connection |
//! | `kafka_producer_connection_state` | gauge | `broker`, `node_id`, `state` | 1 for the broker connection's current [`ConnectionState`], 0 for the others |
//! | `kafka_producer_producer_id`, `kafka_producer_producer_epoch` | gauge | | the idempotent producer's id and epoch, once assigned (absent before) |
//! | `kafka_producer_request_latency_seconds` | histogram | | from a Produce request's send to its answer |
//! | `kafka_producer_delivery_latency_seconds` | histogram | | from a batch's first record to the batch's success report, counted once per record of the batch |
//! | `kafka_producer_batch_size_bytes` | histogram | | encoded size of each batch closed |
//!
//! `broker` is the broker's `host:port`; `node_id` is -1 for a bootstrap address not yet
//! known by its node id.
//!
//! # Under Java's names
//!
//! The same text carries the metrics Java's producer has, named after them (`-` as `_`):
//! totals (`record_send_total`, `record_error_total`, `record_retry_total`, `request_total`,
//! `outgoing_byte_total`, `bufferpool_wait_time_ns_total`), windowed figures over
//! `metrics.sample.window.ms` x `metrics.num.samples` ([`crate::windowed`]: `record_send_rate`,
//! `record_error_rate`, `record_retry_rate`, `request_rate`, `outgoing_byte_rate`,
//! `batch_size_avg`, `batch_size_max`, `records_per_request_avg`, `compression_rate_avg`,
//! `request_latency_avg`, `request_latency_max`, `produce_throttle_time_avg`,
//! `produce_throttle_time_max`, `bufferpool_wait_ratio`), gauges (`buffer_total_bytes`,
//! `buffer_available_bytes`, `requests_in_flight`, `metadata_age`), per topic in use (label
//! `topic`: `topic_record_send_total`, `topic_byte_total`, `topic_record_retry_total`,
//! `topic_record_error_total`, `topic_compression_rate`) and per broker (labels `broker`,
//! `node_id`: `node_request_total`, `node_outgoing_byte_total`, `node_request_latency_avg`,
//! `node_request_latency_max`, `node_request_latency_seconds` (histogram),
//! `node_throttle_time_ms_total`, `node_throttle_time_max`, `node_throttled_responses_total`).
//! Latencies and throttle times of the Java-named series are in milliseconds, as Java's.
//! `docs/metrics.md` maps each to the snapshot's field, Java's name and librdkafka's statistics
//! field, and says how each is measured.
//!
//! Delivery latency is recorded per batch, weighted by its record count: each record of a batch
//! counts with the age of the batch's first record, an upper bound of its own (records carry no
//! send time, which keeps `send` free of the clock).

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stats::Stats;
use crate::windowed::{RateTotals, WindowedMetrics, Windows};
use crate::ErrorCode;

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
    /// When the last Metadata answer was applied.
    last_metadata: Option<Instant>,
    /// Per topic, by topic number (a forgotten topic's entry is cleared for the next owner of
    /// its number): at most the topics in use.
    topics: Vec<TopicSeries>,
    /// Per broker, by broker slot (a retired slot's entry is cleared): at most the slots.
    brokers: Vec<BrokerSeries>,
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

/// 128 us .. 67 s.
fn latency_histogram() -> Histogram {
    Histogram::new(7)
}

/// 64 B .. 32 MiB.
fn size_histogram() -> Histogram {
    Histogram::new(6)
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
            last_metadata: None,
            topics: Vec::new(),
            brokers: Vec::new(),
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

    /// A Produce request of `bytes` batch bytes went to the broker in `slot`.
    #[inline]
    pub(crate) fn request_sent(&mut self, slot: u32, bytes: u64) {
        let b = entry(&mut self.brokers, slot);
        b.requests += 1;
        b.bytes_sent += bytes;
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

    /// The parts of a snapshot this keeps, at `now`, with `stats` the counters.
    pub(crate) fn snapshot_into(&self, s: &mut MetricsSnapshot, now: Instant, stats: &Stats) {
        s.request_latency = self.request_latency.clone();
        s.delivery_latency = self.delivery_latency.clone();
        s.batch_size = self.batch_size.clone();
        s.errors = self.errors.clone();
        s.windowed = self.windows.measure(now, self.totals(stats));
        s.metadata_age = self.last_metadata.map(|t| now.saturating_duration_since(t));
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

    /// Fills in the broker in `slot`'s series.
    pub(crate) fn broker_into(&self, slot: u32, b: &mut BrokerMetrics) {
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

/// One topic's part of a snapshot: the topics in use (a topic forgotten after
/// `metadata.max.idle.ms` drops out, its series with it). Java's `producer-topic-metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicMetrics {
    /// The topic's name.
    pub topic: Arc<str>,
    /// Records carried by Produce requests (retries included): `record-send-total`.
    pub records_sent: u64,
    /// Record batch bytes carried by Produce requests (retries included): `byte-total`.
    pub bytes_sent: u64,
    /// What those batches held before compression.
    pub uncompressed_bytes_sent: u64,
    /// Records put back to be sent again: `record-retry-total`.
    pub records_retried: u64,
    /// Records reported failed: `record-error-total`.
    pub records_failed: u64,
}

impl TopicMetrics {
    /// `compression-rate`: bytes sent over their size before compression (NaN before any
    /// batch was sent).
    pub fn compression_rate(&self) -> f64 {
        if self.uncompressed_bytes_sent == 0 {
            f64::NAN
        } else {
            self.bytes_sent as f64 / self.uncompressed_bytes_sent as f64
        }
    }
}

/// Where a broker's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// No connection, and none wanted or allowed yet.
    Disconnected,
    /// No connection; the reconnect backoff is running.
    BackingOff,
    /// Connecting (the driver was told to connect).
    Connecting,
    /// Connected, negotiating API versions.
    Negotiating,
    /// Authenticating with SASL.
    Authenticating,
    /// Ready for requests.
    Ready,
    /// Ready, authenticating again before the session ends.
    Reauthenticating,
}

impl ConnectionState {
    /// Every state, in the order the Prometheus text lists them.
    pub const ALL: [ConnectionState; 7] = [
        ConnectionState::Disconnected,
        ConnectionState::BackingOff,
        ConnectionState::Connecting,
        ConnectionState::Negotiating,
        ConnectionState::Authenticating,
        ConnectionState::Ready,
        ConnectionState::Reauthenticating,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Disconnected => "disconnected",
            ConnectionState::BackingOff => "backing_off",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Negotiating => "negotiating",
            ConnectionState::Authenticating => "authenticating",
            ConnectionState::Ready => "ready",
            ConnectionState::Reauthenticating => "reauthenticating",
        }
    }
}

/// One broker's part of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerMetrics {
    /// Node id, or -1 for a bootstrap address.
    pub node_id: i32,
    /// Host name.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Its connection's state.
    pub state: ConnectionState,
    /// Requests awaiting an answer on its connection (all kinds).
    pub in_flight_requests: usize,
    /// Of those, Produce requests.
    pub in_flight_produce: usize,
    /// Produce requests sent to it.
    pub requests_sent: u64,
    /// Record batch bytes those carried.
    pub bytes_sent: u64,
    /// Its Produce round trips, in microseconds (`request-latency-avg` of Java's
    /// `producer-node-metrics` is its sum over its count).
    pub request_latency: Histogram,
    /// The longest of them, in microseconds (over the broker's life).
    pub request_latency_max_us: u64,
    /// `throttle_time_ms` of its Produce responses, added up.
    pub throttle_time_ms: u64,
    /// The longest of them.
    pub throttle_time_max_ms: u64,
    /// Produce responses it throttled (`throttle_time_ms` above 0).
    pub throttled_responses: u64,
}

impl BrokerMetrics {
    /// A broker with no traffic counted yet.
    pub(crate) fn new(node_id: i32, host: String, port: u16, state: ConnectionState) -> Self {
        BrokerMetrics {
            node_id,
            host,
            port,
            state,
            in_flight_requests: 0,
            in_flight_produce: 0,
            requests_sent: 0,
            bytes_sent: 0,
            request_latency: latency_histogram(),
            request_latency_max_us: 0,
            throttle_time_ms: 0,
            throttle_time_max_ms: 0,
            throttled_responses: 0,
        }
    }
}

/// Everything the producer measures, at one instant: take one with
/// [`crate::Producer::metrics`] whenever you want to read or export them (it copies a few
/// hundred bytes and allocates one small vector per call, so call it per scrape, not per
/// record). Counters and histograms cover the producer's whole life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// The counters.
    pub counters: Stats,
    /// Partition errors of Produce responses by code (one per batch answered with the code),
    /// sorted by code.
    pub errors: Vec<(ErrorCode, u64)>,
    /// Records accepted and not yet reported.
    pub buffered_records: usize,
    /// Their bytes, as counted against `buffer_memory`.
    pub buffered_bytes: usize,
    /// Every broker the producer knows (bootstrap addresses and nodes from metadata).
    pub brokers: Vec<BrokerMetrics>,
    /// The producer id and epoch, once assigned (idempotent producers).
    pub producer_id: Option<(i64, i16)>,
    /// Produce request round trips, in microseconds.
    pub request_latency: Histogram,
    /// Delivery latency in microseconds: per successful batch, the age of its first record,
    /// counted once per record of the batch.
    pub delivery_latency: Histogram,
    /// Encoded sizes of closed batches, in bytes.
    pub batch_size: Histogram,
    /// The Java-named rates, averages and maxima over the sample window
    /// (`metrics.sample.window.ms` x `metrics.num.samples`).
    pub windowed: WindowedMetrics,
    /// Per topic in use (forgotten topics drop out).
    pub topics: Vec<TopicMetrics>,
    /// Time since the last Metadata answer was applied (`metadata-age`); `None` before the
    /// first.
    pub metadata_age: Option<Duration>,
    /// `buffer.memory`, in bytes (`buffer-total-bytes`).
    pub buffer_total_bytes: usize,
}

impl Default for MetricsSnapshot {
    fn default() -> Self {
        MetricsSnapshot {
            counters: Stats::default(),
            errors: Vec::new(),
            buffered_records: 0,
            buffered_bytes: 0,
            brokers: Vec::new(),
            producer_id: None,
            request_latency: latency_histogram(),
            delivery_latency: latency_histogram(),
            batch_size: size_histogram(),
            windowed: WindowedMetrics::default(),
            topics: Vec::new(),
            metadata_age: None,
            buffer_total_bytes: 0,
        }
    }
}

/// The prefix of every metric name.
pub const PREFIX: &str = "kafka_producer_";

impl MetricsSnapshot {
    /// How many batches were answered with `code`.
    pub fn errors_with(&self, code: ErrorCode) -> u64 {
        self.errors
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(0, |&(_, n)| n)
    }

    /// Appends the snapshot to `out` in the Prometheus text exposition format (version 0.0.4),
    /// with the names in the [module docs](self).
    pub fn render_prometheus(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = self.write_prometheus(out);
    }

    fn write_prometheus(&self, out: &mut String) -> fmt::Result {
        let c = &self.counters;
        let counters: [(&str, &str, u64); 16] = [
            (
                "records_sent_total",
                "Records carried by Produce requests, retries included.",
                c.records_sent,
            ),
            (
                "bytes_sent_total",
                "Record batch bytes carried by Produce requests, retries included.",
                c.bytes_sent,
            ),
            (
                "records_delivered_total",
                "Records reported delivered.",
                c.records_delivered,
            ),
            (
                "records_failed_total",
                "Records reported failed.",
                c.records_failed,
            ),
            (
                "invalid_records_total",
                "Records a broker rejected themselves (Produce record errors).",
                c.records_invalid,
            ),
            (
                "produce_requests_total",
                "Produce requests sent.",
                c.produce_requests,
            ),
            (
                "batches_sent_total",
                "Batches carried by Produce requests, retries included.",
                c.batches_sent,
            ),
            (
                "retries_total",
                "Batches put back to be sent again.",
                c.retries,
            ),
            (
                "disconnects_total",
                "Connections lost or timed out.",
                c.disconnects,
            ),
            (
                "metadata_refreshes_total",
                "Metadata responses applied.",
                c.metadata_refreshes,
            ),
            (
                "topics_recreated_total",
                "Topics seen with a new topic id (deleted and created again while in use).",
                c.topics_recreated,
            ),
            (
                "rebootstraps_total",
                "Returns to the bootstrap list.",
                c.rebootstraps,
            ),
            (
                "transactions_committed_total",
                "Transactions committed.",
                c.transactions_committed,
            ),
            (
                "transactions_aborted_total",
                "Transactions aborted.",
                c.transactions_aborted,
            ),
            (
                "malformed_responses_total",
                "Responses that could not be parsed.",
                c.malformed_responses,
            ),
            (
                "ignored_responses_total",
                "Answers to acks=0 requests, ignored.",
                c.ignored_responses,
            ),
        ];
        for (name, help, v) in counters {
            header(out, name, help, "counter")?;
            writeln!(out, "{PREFIX}{name} {v}")?;
        }
        header(
            out,
            "errors_total",
            "Partition errors in Produce responses, by error code.",
            "counter",
        )?;
        for &(code, n) in &self.errors {
            let name = code.name().unwrap_or("UNKNOWN");
            writeln!(
                out,
                "{PREFIX}errors_total{{code=\"{}\",name=\"{name}\"}} {n}",
                code.0
            )?;
        }
        header(
            out,
            "buffered_records",
            "Records accepted and not yet reported.",
            "gauge",
        )?;
        writeln!(out, "{PREFIX}buffered_records {}", self.buffered_records)?;
        header(
            out,
            "buffered_bytes",
            "Bytes of records accepted and not yet reported.",
            "gauge",
        )?;
        writeln!(out, "{PREFIX}buffered_bytes {}", self.buffered_bytes)?;
        header(
            out,
            "in_flight_requests",
            "Requests awaiting an answer, per broker.",
            "gauge",
        )?;
        for b in &self.brokers {
            write!(out, "{PREFIX}in_flight_requests{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", b.in_flight_requests)?;
        }
        header(
            out,
            "connection_state",
            "1 for the state of each broker's connection.",
            "gauge",
        )?;
        for b in &self.brokers {
            for s in ConnectionState::ALL {
                write!(out, "{PREFIX}connection_state{{")?;
                broker_labels(out, b)?;
                writeln!(
                    out,
                    ",state=\"{}\"}} {}",
                    s.as_str(),
                    u8::from(b.state == s)
                )?;
            }
        }
        if let Some((id, epoch)) = self.producer_id {
            header(out, "producer_id", "The idempotent producer's id.", "gauge")?;
            writeln!(out, "{PREFIX}producer_id {id}")?;
            header(
                out,
                "producer_epoch",
                "The idempotent producer's epoch.",
                "gauge",
            )?;
            writeln!(out, "{PREFIX}producer_epoch {epoch}")?;
        }
        histogram(
            out,
            "request_latency_seconds",
            "Produce request round trips.",
            &self.request_latency,
            1e6,
        )?;
        histogram(
            out,
            "delivery_latency_seconds",
            "Age of a batch's first record at its success report, once per record.",
            &self.delivery_latency,
            1e6,
        )?;
        histogram(
            out,
            "batch_size_bytes",
            "Encoded size of closed batches.",
            &self.batch_size,
            1.0,
        )?;
        self.write_java_named(out)
    }

    /// The series under Java's names (`docs/metrics.md` maps each to Java and librdkafka),
    /// except the per-broker latency histograms ([`BrokerMetrics::request_latency`]): what
    /// [`MetricsSnapshot::render_prometheus`] writes and a driver's metrics facade publishes.
    /// The samples of one name come together, in the order the text lists them.
    pub fn java_named(&self) -> Vec<Series> {
        let c = &self.counters;
        let w = &self.windowed;
        let mut v = Vec::new();
        let mut push = |name, help, kind, labels: Vec<(&'static str, String)>, value| {
            v.push(Series {
                name,
                help,
                kind,
                labels,
                value,
            })
        };
        let totals: [(&'static str, &'static str, u64); 6] = [
            (
                "record_send_total",
                "Records sent (record-send-total), retries included.",
                c.records_sent,
            ),
            (
                "record_error_total",
                "Records reported failed (record-error-total).",
                c.records_failed,
            ),
            (
                "record_retry_total",
                "Records put back to be sent again (record-retry-total).",
                c.records_retried,
            ),
            (
                "request_total",
                "Produce requests sent (request-total).",
                c.produce_requests,
            ),
            (
                "outgoing_byte_total",
                "Record batch bytes sent (outgoing-byte-total).",
                c.bytes_sent,
            ),
            (
                "bufferpool_wait_time_ns_total",
                "Nanoseconds records waited for buffer space (bufferpool-wait-time-ns-total).",
                c.buffer_wait_ns,
            ),
        ];
        for (name, help, n) in totals {
            push(
                name,
                help,
                SeriesKind::Counter,
                Vec::new(),
                SeriesValue::Count(n),
            );
        }
        let gauges: [(&'static str, &'static str, f64); 15] = [
            (
                "record_send_rate",
                "Records sent per second over the sample window (record-send-rate).",
                w.record_send_rate(),
            ),
            (
                "record_error_rate",
                "Records failed per second over the sample window (record-error-rate).",
                w.record_error_rate(),
            ),
            (
                "record_retry_rate",
                "Records retried per second over the sample window (record-retry-rate).",
                w.record_retry_rate(),
            ),
            (
                "request_rate",
                "Produce requests per second over the sample window (request-rate).",
                w.request_rate(),
            ),
            (
                "outgoing_byte_rate",
                "Record batch bytes sent per second over the sample window (outgoing-byte-rate).",
                w.outgoing_byte_rate(),
            ),
            (
                "batch_size_avg",
                "Bytes per batch sent over the sample window (batch-size-avg).",
                w.batch_size_avg(),
            ),
            (
                "batch_size_max",
                "Largest batch sent in the sample window, bytes (batch-size-max).",
                w.batch_size_max(),
            ),
            (
                "records_per_request_avg",
                "Records per Produce request over the sample window (records-per-request-avg).",
                w.records_per_request_avg(),
            ),
            (
                "compression_rate_avg",
                "Bytes sent over their size before compression, sample window (compression-rate-avg).",
                w.compression_rate_avg(),
            ),
            (
                "request_latency_avg",
                "Produce round trip in ms, sample window average (request-latency-avg).",
                w.request_latency_avg_ms(),
            ),
            (
                "request_latency_max",
                "Longest Produce round trip in ms in the sample window (request-latency-max).",
                w.request_latency_max_ms(),
            ),
            (
                "produce_throttle_time_avg",
                "Throttle time in ms per Produce response, sample window (produce-throttle-time-avg).",
                w.produce_throttle_time_avg_ms(),
            ),
            (
                "produce_throttle_time_max",
                "Longest throttle time in ms in the sample window (produce-throttle-time-max).",
                w.produce_throttle_time_max_ms(),
            ),
            (
                "bufferpool_wait_ratio",
                "Fraction of the sample window records waited for buffer space (bufferpool-wait-ratio).",
                w.bufferpool_wait_ratio(),
            ),
            (
                "buffer_available_bytes",
                "buffer.memory not taken by records (buffer-available-bytes).",
                self.buffer_total_bytes.saturating_sub(self.buffered_bytes) as f64,
            ),
        ];
        for (name, help, x) in gauges {
            push(
                name,
                help,
                SeriesKind::Gauge,
                Vec::new(),
                SeriesValue::Float(x),
            );
        }
        push(
            "buffer_total_bytes",
            "buffer.memory (buffer-total-bytes).",
            SeriesKind::Gauge,
            Vec::new(),
            SeriesValue::Count(self.buffer_total_bytes as u64),
        );
        let in_flight: usize = self.brokers.iter().map(|b| b.in_flight_requests).sum();
        push(
            "requests_in_flight",
            "Requests awaiting an answer, all brokers (requests-in-flight).",
            SeriesKind::Gauge,
            Vec::new(),
            SeriesValue::Count(in_flight as u64),
        );
        if let Some(age) = self.metadata_age {
            push(
                "metadata_age",
                "Seconds since the last Metadata answer was applied (metadata-age).",
                SeriesKind::Gauge,
                Vec::new(),
                SeriesValue::Float(age.as_secs_f64()),
            );
        }
        // Per topic (Java's producer-topic-metrics).
        type TopicFigure = fn(&TopicMetrics) -> SeriesValue;
        let per_topic: [(&'static str, &'static str, SeriesKind, TopicFigure); 5] = [
            (
                "topic_record_send_total",
                "Records sent, per topic (record-send-total).",
                SeriesKind::Counter,
                |t| SeriesValue::Count(t.records_sent),
            ),
            (
                "topic_byte_total",
                "Record batch bytes sent, per topic (byte-total).",
                SeriesKind::Counter,
                |t| SeriesValue::Count(t.bytes_sent),
            ),
            (
                "topic_record_retry_total",
                "Records retried, per topic (record-retry-total).",
                SeriesKind::Counter,
                |t| SeriesValue::Count(t.records_retried),
            ),
            (
                "topic_record_error_total",
                "Records failed, per topic (record-error-total).",
                SeriesKind::Counter,
                |t| SeriesValue::Count(t.records_failed),
            ),
            (
                "topic_compression_rate",
                "Bytes sent over their size before compression, per topic (compression-rate).",
                SeriesKind::Gauge,
                |t| SeriesValue::Float(t.compression_rate()),
            ),
        ];
        for (name, help, kind, f) in per_topic {
            for t in &self.topics {
                push(name, help, kind, vec![("topic", t.topic.to_string())], f(t));
            }
        }
        // Per broker (Java's producer-node-metrics).
        type BrokerFigure = fn(&BrokerMetrics) -> SeriesValue;
        let per_broker: [(&'static str, &'static str, SeriesKind, BrokerFigure); 7] = [
            (
                "node_request_total",
                "Produce requests sent, per broker (request-total).",
                SeriesKind::Counter,
                |b| SeriesValue::Count(b.requests_sent),
            ),
            (
                "node_outgoing_byte_total",
                "Record batch bytes sent, per broker (outgoing-byte-total).",
                SeriesKind::Counter,
                |b| SeriesValue::Count(b.bytes_sent),
            ),
            (
                "node_request_latency_avg",
                "Produce round trip in ms, per broker, over its life (request-latency-avg).",
                SeriesKind::Gauge,
                |b| {
                    SeriesValue::Float(match b.request_latency.count() {
                        0 => f64::NAN,
                        n => b.request_latency.sum() as f64 / n as f64 / 1000.0,
                    })
                },
            ),
            (
                "node_request_latency_max",
                "Longest Produce round trip in ms, per broker (request-latency-max).",
                SeriesKind::Gauge,
                |b| SeriesValue::Float(b.request_latency_max_us as f64 / 1000.0),
            ),
            (
                "node_throttle_time_ms_total",
                "Throttle time in ms of Produce responses, per broker.",
                SeriesKind::Counter,
                |b| SeriesValue::Count(b.throttle_time_ms),
            ),
            (
                "node_throttle_time_max",
                "Longest throttle time in ms, per broker (produce-throttle-time-max).",
                SeriesKind::Gauge,
                |b| SeriesValue::Count(b.throttle_time_max_ms),
            ),
            (
                "node_throttled_responses_total",
                "Produce responses throttled, per broker.",
                SeriesKind::Counter,
                |b| SeriesValue::Count(b.throttled_responses),
            ),
        ];
        for (name, help, kind, f) in per_broker {
            for b in &self.brokers {
                let labels = vec![
                    ("broker", format!("{}:{}", b.host, b.port)),
                    ("node_id", b.node_id.to_string()),
                ];
                push(name, help, kind, labels, f(b));
            }
        }
        v
    }

    /// Writes [`MetricsSnapshot::java_named`] and the per-broker latency histograms.
    fn write_java_named(&self, out: &mut String) -> fmt::Result {
        let mut last = "";
        for x in self.java_named() {
            if x.name != last {
                let kind = match x.kind {
                    SeriesKind::Counter => "counter",
                    SeriesKind::Gauge => "gauge",
                };
                header(out, x.name, x.help, kind)?;
                last = x.name;
            }
            out.push_str(PREFIX);
            out.push_str(x.name);
            if !x.labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in x.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(k);
                    out.push_str("=\"");
                    escape(out, v);
                    out.push('"');
                }
                out.push('}');
            }
            writeln!(out, " {}", x.value)?;
        }
        let name = "node_request_latency_seconds";
        header(
            out,
            name,
            "Produce request round trips, per broker.",
            "histogram",
        )?;
        for b in &self.brokers {
            let h = &b.request_latency;
            for (bound, n) in h.buckets() {
                write!(out, "{PREFIX}{name}_bucket{{")?;
                broker_labels(out, b)?;
                match bound {
                    Some(x) => writeln!(out, ",le=\"{}\"}} {n}", x as f64 / 1e6)?,
                    None => writeln!(out, ",le=\"+Inf\"}} {n}")?,
                }
            }
            write!(out, "{PREFIX}{name}_sum{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", h.sum() as f64 / 1e6)?;
            write!(out, "{PREFIX}{name}_count{{")?;
            broker_labels(out, b)?;
            writeln!(out, "}} {}", h.count())?;
        }
        Ok(())
    }
}

/// What kind of series a [`Series`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeriesKind {
    /// Only grows over the producer's life (a `metrics` counter's `absolute`).
    Counter,
    /// A value at the snapshot.
    Gauge,
}

/// A [`Series`]' value: a count, exact, or a measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeriesValue {
    /// A whole number (counters, sizes, counts).
    Count(u64),
    /// A measure (rates, averages, ratios, milliseconds; NaN for an average of nothing).
    Float(f64),
}

impl SeriesValue {
    /// As a float.
    pub fn as_f64(self) -> f64 {
        match self {
            SeriesValue::Count(n) => n as f64,
            SeriesValue::Float(x) => x,
        }
    }
}

impl fmt::Display for SeriesValue {
    /// As the Prometheus text writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SeriesValue::Count(n) => write!(f, "{n}"),
            SeriesValue::Float(x) => Float(x).fmt(f),
        }
    }
}

/// One sample of a series under Java's name ([`MetricsSnapshot::java_named`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Series {
    /// The name without [`PREFIX`] (`record_send_rate`).
    pub name: &'static str,
    /// Its help text (Java's name in parentheses).
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: SeriesKind,
    /// Its labels (`topic`; `broker` and `node_id`), unescaped.
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: SeriesValue,
}

/// A float as the Prometheus text writes it (`NaN`, `+Inf`, else Rust's shortest form).
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// A label value, escaped.
fn escape(out: &mut String, v: &str) {
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl fmt::Display for MetricsSnapshot {
    /// The Prometheus text, as [`MetricsSnapshot::render_prometheus`] writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.render_prometheus(&mut s);
        f.write_str(&s)
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) -> fmt::Result {
    writeln!(out, "# HELP {PREFIX}{name} {help}")?;
    writeln!(out, "# TYPE {PREFIX}{name} {kind}")
}

fn broker_labels(out: &mut String, b: &BrokerMetrics) -> fmt::Result {
    out.push_str("broker=\"");
    escape(out, &b.host);
    write!(out, ":{}\",node_id=\"{}\"", b.port, b.node_id)
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    h: &Histogram,
    per_unit: f64,
) -> fmt::Result {
    header(out, name, help, "histogram")?;
    for (bound, n) in h.buckets() {
        match bound {
            Some(b) => writeln!(
                out,
                "{PREFIX}{name}_bucket{{le=\"{}\"}} {n}",
                b as f64 / per_unit
            )?,
            None => writeln!(out, "{PREFIX}{name}_bucket{{le=\"+Inf\"}} {n}")?,
        }
    }
    writeln!(out, "{PREFIX}{name}_sum {}", h.sum() as f64 / per_unit)?;
    writeln!(out, "{PREFIX}{name}_count {}", h.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_log_spaced_and_inclusive() {
        let mut h = Histogram::new(7); // 128, 256, 512, ...
        for v in [0, 1, 128, 129, 256, 257, 1 << 30, u64::MAX] {
            h.record(v);
        }
        let b: Vec<_> = h.buckets().collect();
        assert_eq!(b.len(), HISTOGRAM_BUCKETS + 1);
        assert_eq!(b[0], (Some(128), 3), "0, 1 and 128 are <= 128");
        assert_eq!(b[1], (Some(256), 5), "129 and 256 are <= 256");
        assert_eq!(b[2], (Some(512), 6), "257");
        assert_eq!(b[HISTOGRAM_BUCKETS - 1], (Some(128 << 19), 6));
        assert_eq!(
            b[HISTOGRAM_BUCKETS],
            (None, 8),
            "2^30 and u64::MAX overflow"
        );
        assert_eq!(h.count(), 8);
        assert_eq!(h.sum(), u64::MAX, "the sum saturates");
    }

    #[test]
    fn weighted_records_count_n_times() {
        let mut h = Histogram::new(6);
        h.record_n(100, 7);
        assert_eq!(h.count(), 7);
        assert_eq!(h.sum(), 700);
        assert_eq!(h.buckets().nth(1), Some((Some(128), 7)));
        assert_eq!(h.buckets().next(), Some((Some(64), 0)));
    }

    #[test]
    fn errors_are_counted_by_code_in_code_order() {
        let mut m = Metrics::new(Duration::from_secs(30), 2, Instant::now());
        for code in [ErrorCode(19), ErrorCode(6), ErrorCode(19), ErrorCode(-1)] {
            m.partition_error(code);
        }
        let mut s = MetricsSnapshot::default();
        m.snapshot_into(&mut s, Instant::now(), &Stats::default());
        assert_eq!(
            s.errors,
            vec![(ErrorCode(-1), 1), (ErrorCode(6), 1), (ErrorCode(19), 2)]
        );
        assert_eq!(s.errors_with(ErrorCode(19)), 2);
        assert_eq!(s.errors_with(ErrorCode(7)), 0);
    }

    #[test]
    fn latencies_render_in_seconds_without_float_noise() {
        let mut s = MetricsSnapshot::default();
        s.request_latency.record(33_168);
        s.batch_size.record(100);
        let text = s.to_string();
        for line in [
            "kafka_producer_request_latency_seconds_bucket{le=\"0.000128\"} 0\n",
            "kafka_producer_request_latency_seconds_bucket{le=\"0.065536\"} 1\n",
            "kafka_producer_request_latency_seconds_bucket{le=\"+Inf\"} 1\n",
            "kafka_producer_request_latency_seconds_sum 0.033168\n",
            "kafka_producer_request_latency_seconds_count 1\n",
            "kafka_producer_batch_size_bytes_bucket{le=\"128\"} 1\n",
            "kafka_producer_batch_size_bytes_sum 100\n",
            "# TYPE kafka_producer_batch_size_bytes histogram\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        assert!(
            !text.contains("producer_id"),
            "no producer id before one is assigned"
        );
    }

    #[test]
    fn broker_labels_escape_the_host() {
        let b = BrokerMetrics::new(3, "a\"b\\c\n".into(), 9092, ConnectionState::Ready);
        let mut out = String::new();
        broker_labels(&mut out, &b).unwrap();
        assert_eq!(out, r#"broker="a\"b\\c\n:9092",node_id="3""#);
    }

    #[test]
    fn topic_and_broker_series_appear_with_traffic_and_go_when_forgotten() {
        let t0 = Instant::now();
        let mut m = Metrics::new(Duration::from_secs(30), 2, t0);
        m.batch_sent(3, 10, 500, 1000);
        m.batch_sent(3, 5, 250, 500);
        m.records_retried(3, 5);
        m.records_failed(3, 2);
        m.request_sent(1, 750);
        m.produce_answered(1, Duration::from_millis(4), 0);
        m.produce_answered(1, Duration::from_millis(2), 70);
        let t = m.topic_metrics(3, "t".into());
        assert_eq!((t.records_sent, t.bytes_sent), (15, 750));
        assert_eq!((t.records_retried, t.records_failed), (5, 2));
        assert_eq!(t.compression_rate(), 0.5);
        let mut b = BrokerMetrics::new(1, "h".into(), 1, ConnectionState::Ready);
        m.broker_into(1, &mut b);
        assert_eq!((b.requests_sent, b.bytes_sent), (1, 750));
        assert_eq!(b.request_latency.count(), 2);
        assert_eq!(b.request_latency_max_us, 4000);
        assert_eq!((b.throttle_time_ms, b.throttle_time_max_ms), (70, 70));
        assert_eq!(b.throttled_responses, 1);
        // Forgotten: the number's next owner starts from nothing.
        m.forget_topic(3);
        m.forget_broker(1);
        let t = m.topic_metrics(3, "next".into());
        assert_eq!((t.records_sent, t.bytes_sent, t.records_failed), (0, 0, 0));
        assert!(t.compression_rate().is_nan());
        let mut b = BrokerMetrics::new(1, "h".into(), 1, ConnectionState::Ready);
        m.broker_into(1, &mut b);
        assert_eq!(b.request_latency.count(), 0);
        assert_eq!((b.requests_sent, b.throttle_time_ms), (0, 0));
    }

    #[test]
    fn a_buffer_wait_counts_from_the_first_refusal_to_the_next_acceptance() {
        let t0 = Instant::now();
        let mut m = Metrics::new(Duration::from_secs(30), 2, t0);
        let mut stats = Stats::default();
        assert!(!m.waiting_for_buffer());
        m.buffer_full(t0 + Duration::from_millis(10));
        m.buffer_full(t0 + Duration::from_millis(20)); // the wait already runs
        assert!(m.waiting_for_buffer());
        m.buffer_wait_ended(t0 + Duration::from_millis(35), &mut stats);
        assert_eq!(stats.buffer_wait_ns, 25_000_000);
        assert!(!m.waiting_for_buffer());
        let mut s = MetricsSnapshot::default();
        m.snapshot_into(&mut s, t0 + Duration::from_secs(50), &stats);
        assert_eq!(s.windowed.growth.buffer_wait_ns, 25_000_000);
        assert_eq!(s.windowed.elapsed, Duration::from_secs(50));
        assert_eq!(s.windowed.bufferpool_wait_ratio(), 0.0005);
    }

    #[test]
    fn java_named_series_render_with_labels() {
        let mut s = MetricsSnapshot {
            buffer_total_bytes: 1000,
            buffered_bytes: 400,
            metadata_age: Some(Duration::from_millis(1500)),
            ..MetricsSnapshot::default()
        };
        s.counters.records_sent = 7;
        s.counters.buffer_wait_ns = 12;
        s.topics.push(TopicMetrics {
            topic: "a\"b".into(),
            records_sent: 7,
            bytes_sent: 300,
            uncompressed_bytes_sent: 600,
            records_retried: 0,
            records_failed: 1,
        });
        let mut b = BrokerMetrics::new(2, "h".into(), 9092, ConnectionState::Ready);
        b.throttle_time_ms = 40;
        b.request_latency.record(3000);
        b.request_latency_max_us = 3000;
        s.brokers.push(b);
        let text = s.to_string();
        for line in [
            "kafka_producer_record_send_total 7\n",
            "kafka_producer_bufferpool_wait_time_ns_total 12\n",
            "kafka_producer_batch_size_avg NaN\n",
            "kafka_producer_buffer_available_bytes 600\n",
            "kafka_producer_metadata_age 1.5\n",
            "kafka_producer_topic_byte_total{topic=\"a\\\"b\"} 300\n",
            "kafka_producer_topic_compression_rate{topic=\"a\\\"b\"} 0.5\n",
            "kafka_producer_topic_record_error_total{topic=\"a\\\"b\"} 1\n",
            "kafka_producer_node_throttle_time_ms_total{broker=\"h:9092\",node_id=\"2\"} 40\n",
            "kafka_producer_node_request_latency_avg{broker=\"h:9092\",node_id=\"2\"} 3\n",
            "kafka_producer_node_request_latency_seconds_count{broker=\"h:9092\",node_id=\"2\"} 1\n",
            "kafka_producer_node_request_latency_seconds_bucket{broker=\"h:9092\",node_id=\"2\",le=\"0.004096\"} 1\n",
            "# TYPE kafka_producer_record_send_rate gauge\n",
            // Today's series keep their names.
            "kafka_producer_records_sent_total 7\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
