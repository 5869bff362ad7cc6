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

// This file: `MetricsSnapshot`, `PREFIX` and the re-exports (the public paths stay
// `producer_core::metrics::*`). `histogram.rs`: `Histogram`; `recording.rs`: `Metrics`, what the
// producer keeps as it runs (with the bounded per-topic and per-broker tables); `per_topic.rs`:
// `TopicMetrics`; `per_broker.rs`: `BrokerMetrics`, `ConnectionState`; `broker_window.rs`: each
// broker over the sample window (`BrokerWindow`, for `crate::diagnosis`); `java_named.rs`: the
// Java-named `Series`; `prometheus.rs`: the text rendering. The tests are at the end.

mod broker_window;
mod histogram;
mod java_named;
mod per_broker;
mod per_topic;
mod prometheus;
mod recording;

use std::time::Duration;

pub use broker_window::{BrokerTotals, BrokerWindow, BASELINE_MIN_RESPONSES};
pub use histogram::{Histogram, HISTOGRAM_BUCKETS};
pub use java_named::{Series, SeriesKind, SeriesValue};
pub use per_broker::{BrokerMetrics, ConnectionState};
pub use per_topic::TopicMetrics;
pub(crate) use recording::Metrics;

use crate::stats::Stats;
use crate::windowed::WindowedMetrics;
use crate::ErrorCode;
use histogram::{latency_histogram, size_histogram};

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
    /// The queue-delay limit now ([`crate::Producer::queue_delay_limit`]): the unacknowledged
    /// bytes `send` accepts records up to; `None` when it is off.
    pub queue_delay_limit_bytes: Option<usize>,
    /// How long the wait for buffer space running at the snapshot has run (zero when `send`
    /// accepts records): a wait is counted in the totals only when it ends.
    pub buffer_wait_running: Duration,
    /// How long the wait by the queue-delay limit running at the snapshot has run (zero when
    /// none runs), in the producer or in a driver's queue in front of it.
    pub queue_delay_wait_running: Duration,
    /// Bytes of records accepted and not yet acknowledged
    /// ([`crate::Producer::unacknowledged_bytes`]: what the queue-delay limit counts).
    pub unacknowledged_bytes: usize,
    /// The settings the diagnosis weighs the figures against.
    pub settings: SettingsInUse,
}

/// Which limit held a sender back (for a driver that holds senders back in its own queue in
/// front of the producer, [`crate::Producer::note_send_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendWaitCause {
    /// `buffer.memory` or `buffer.max.records` (or a driver's own bound on queued commands):
    /// counted in [`Stats::buffer_wait_ns`] (`bufferpool-wait-time-ns-total`).
    BufferMemory,
    /// The queue-delay limit (`queue.delay.target.ms`): counted in
    /// [`Stats::queue_delay_wait_ns`].
    QueueDelay,
}

/// The settings in use that [`crate::diagnosis`] weighs a snapshot's figures against (and
/// names in its advice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SettingsInUse {
    /// `linger.ms`.
    pub linger: Duration,
    /// `batch.size`, in bytes.
    pub batch_size: usize,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// `buffer.max.records`: the most records buffered at once.
    pub buffer_max_records: usize,
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
            buffer_wait_running: Duration::ZERO,
            queue_delay_wait_running: Duration::ZERO,
            unacknowledged_bytes: 0,
            settings: SettingsInUse::default(),
            queue_delay_limit_bytes: None,
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
}

#[cfg(test)]
mod tests {
    use super::prometheus::broker_labels;
    use super::*;
    use std::time::Instant;

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
        m.snapshot_into(&mut s, Instant::now(), &Stats::default(), None);
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
        m.request_sent(1, 15, 750, false);
        m.produce_answered(1, Duration::from_millis(4), 0);
        m.produce_answered(1, Duration::from_millis(2), 70);
        let t = m.topic_metrics(3, "t".into());
        assert_eq!((t.records_sent, t.bytes_sent), (15, 750));
        assert_eq!((t.records_retried, t.records_failed), (5, 2));
        assert_eq!(t.compression_rate(), 0.5);
        let mut b = BrokerMetrics::new(1, "h".into(), 1, ConnectionState::Ready);
        m.broker_into(1, &mut b, t0);
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
        m.broker_into(1, &mut b, t0);
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
        m.snapshot_into(&mut s, t0 + Duration::from_secs(50), &stats, None);
        assert_eq!(s.windowed.growth.buffer_wait_ns, 25_000_000);
        assert_eq!(s.windowed.elapsed, Duration::from_secs(50));
        assert_eq!(s.windowed.bufferpool_wait_ratio(), 0.0005);
    }

    /// A driver's waits count with the producer's own, by cause: ended ones in the totals and
    /// the window (`bufferpool-wait-ratio` for buffer space), a running one as running (the
    /// longer of the driver's and the producer's when both run).
    #[test]
    fn a_driver_queue_wait_counts_by_cause() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut m = Metrics::new(Duration::from_secs(30), 2, t0);
        let mut stats = Stats::default();
        m.send_wait_ended(t0 + ms(40), ms(30), SendWaitCause::BufferMemory, &mut stats);
        m.send_wait_ended(t0 + ms(60), ms(7), SendWaitCause::QueueDelay, &mut stats);
        assert_eq!(stats.buffer_wait_ns, 30_000_000);
        assert_eq!(stats.queue_delay_wait_ns, 7_000_000);
        m.send_wait_running(Some((t0 + ms(100), SendWaitCause::QueueDelay)));
        m.buffer_full(t0 + ms(150));
        let mut s = MetricsSnapshot::default();
        m.snapshot_into(&mut s, t0 + ms(1000), &stats, Some(t0 + ms(500)));
        assert_eq!(s.windowed.growth.buffer_wait_ns, 30_000_000);
        assert_eq!(s.windowed.growth.queue_delay_wait_ns, 7_000_000);
        assert!(s.windowed.bufferpool_wait_ratio() > 0.0);
        assert_eq!(s.buffer_wait_running, ms(850), "the producer's own");
        assert_eq!(s.queue_delay_wait_running, ms(900), "the driver's, longer");
        m.send_wait_running(None);
        m.snapshot_into(&mut s, t0 + ms(1000), &stats, None);
        assert_eq!(s.queue_delay_wait_running, Duration::ZERO);
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
