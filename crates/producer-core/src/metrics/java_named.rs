//! The series under Java's names: [`MetricsSnapshot::java_named`] and its [`Series`] (what the
//! Prometheus text writes and a driver's metrics facade publishes; `docs/metrics.md` maps each
//! to Java and librdkafka).

use super::per_broker::BrokerMetrics;
use super::per_topic::TopicMetrics;
use super::MetricsSnapshot;

impl MetricsSnapshot {
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
        let totals: [(&'static str, &'static str, u64); 7] = [
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
            (
                "queue_delay_wait_time_ns_total",
                "Nanoseconds records were held back by the queue-delay limit, queue.delay.target.ms (queue-delay-wait-time-ns-total).",
                c.queue_delay_wait_ns,
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
        if let Some(limit) = self.queue_delay_limit_bytes {
            push(
                "queue_delay_limit_bytes",
                "Unacknowledged bytes the queue-delay limit lets send reach now (queue-delay-limit-bytes).",
                SeriesKind::Gauge,
                Vec::new(),
                SeriesValue::Count(limit as u64),
            );
        }
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

/// One sample of a series under Java's name ([`MetricsSnapshot::java_named`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Series {
    /// The name without [`PREFIX`](super::PREFIX) (`record_send_rate`).
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
