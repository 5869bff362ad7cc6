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
//! Delivery latency is recorded per batch, weighted by its record count: each record of a batch
//! counts with the age of the batch's first record, an upper bound of its own (records carry no
//! send time, which keeps `send` free of the clock).

use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::stats::Stats;
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
/// [`Stats`]). Updated where the event happens, once per batch or response.
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
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            // 128 us .. 67 s.
            request_latency: Histogram::new(7),
            delivery_latency: Histogram::new(7),
            // 64 B .. 32 MiB.
            batch_size: Histogram::new(6),
            errors: Vec::new(),
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl Metrics {
    /// A Produce request was answered `elapsed` after it was sent.
    pub(crate) fn produce_answered(&mut self, elapsed: Duration) {
        self.request_latency.record(micros(elapsed));
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

    /// The parts of a snapshot this keeps.
    pub(crate) fn snapshot_into(&self, s: &mut MetricsSnapshot) {
        s.request_latency = self.request_latency.clone();
        s.delivery_latency = self.delivery_latency.clone();
        s.batch_size = self.batch_size.clone();
        s.errors = self.errors.clone();
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
}

impl Default for MetricsSnapshot {
    fn default() -> Self {
        let m = Metrics::default();
        MetricsSnapshot {
            counters: Stats::default(),
            errors: Vec::new(),
            buffered_records: 0,
            buffered_bytes: 0,
            brokers: Vec::new(),
            producer_id: None,
            request_latency: m.request_latency,
            delivery_latency: m.delivery_latency,
            batch_size: m.batch_size,
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
        )
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
    for ch in b.host.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
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
        let mut m = Metrics::default();
        for code in [ErrorCode(19), ErrorCode(6), ErrorCode(19), ErrorCode(-1)] {
            m.partition_error(code);
        }
        let mut s = MetricsSnapshot::default();
        m.snapshot_into(&mut s);
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
        let b = BrokerMetrics {
            node_id: 3,
            host: "a\"b\\c\n".into(),
            port: 9092,
            state: ConnectionState::Ready,
            in_flight_requests: 2,
            in_flight_produce: 1,
        };
        let mut out = String::new();
        broker_labels(&mut out, &b).unwrap();
        assert_eq!(out, r#"broker="a\"b\\c\n:9092",node_id="3""#);
    }
}
