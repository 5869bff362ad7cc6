//! What a push carries: the producer's metrics under the names KIP-714 gives producer metrics
//! (`org.apache.kafka.producer.` and Java's metric name with `.` for `-`: Java's
//! `ClientTelemetryReporter` naming of its `producer-metrics`, `producer-node-metrics` and
//! `producer-topic-metrics` groups), filtered by the subscription's prefixes, sums as deltas or
//! cumulative values as it asks, encoded as OTLP `MetricsData` (protobuf, with the
//! `opentelemetry-proto` message types and `prost`).
//!
//! The values come from the metrics snapshot ([`crate::MetricsSnapshot::java_named`]), plus
//! what only telemetry counts here: connections created (`connection.creation.total`,
//! `connection.creation.rate`) and the time batches waited from their first record until drained into a
//! Produce request, each send counted as Java counts it (`record.queue.time.avg`,
//! `record.queue.time.max`, in ms, over the interval since the last push),
//! each updated once per connection or batch.
//!
//! The resource has no attributes, as Java's producer sends it (without `metrics.context.*`
//! settings): the broker knows the client by the request's header and the instance id.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Metric, MetricsData, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use crate::metrics::{MetricsSnapshot, SeriesKind};

use super::state::Subscription;

/// The prefix of every producer metric KIP-714 names.
const PRODUCER_PREFIX: &str = "org.apache.kafka.producer.";

/// One value of a push.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    name: String,
    sum: bool,
    attributes: Vec<(&'static str, String)>,
    value: f64,
}

impl Point {
    /// The key of its series, for the delta of a sum.
    fn key(&self) -> String {
        let mut k = self.name.clone();
        for (a, v) in &self.attributes {
            k.push('\0');
            k.push_str(a);
            k.push('=');
            k.push_str(v);
        }
        k
    }
}

/// What telemetry counts itself, and the values of the last push (for deltas).
///
/// Bounds: `previous` holds one entry per sum series of the last push (the snapshot's series:
/// a few per topic in use and per broker, both tables capped by [`crate::limits`]).
#[derive(Debug)]
pub(crate) struct Collector {
    /// Connections that finished their setup, over the producer's life.
    connections_created: u64,
    /// `connections_created` at the last push.
    connections_at_last: u64,
    /// Time batches waited until drained into a request, since the last push: sum, count,
    /// max.
    queue_sum: Duration,
    queue_count: u64,
    queue_max: Duration,
    /// Each sum series' cumulative value at the last push.
    previous: HashMap<String, f64>,
    /// When the producer started (cumulative sums count from here).
    started: Instant,
    /// When the last push took its values (deltas count from here).
    last: Instant,
}

impl Collector {
    pub(crate) fn new(now: Instant) -> Self {
        Collector {
            connections_created: 0,
            connections_at_last: 0,
            queue_sum: Duration::ZERO,
            queue_count: 0,
            queue_max: Duration::ZERO,
            previous: HashMap::new(),
            started: now,
            last: now,
        }
    }

    /// A connection finished its setup.
    pub(crate) fn connection_created(&mut self) {
        self.connections_created += 1;
    }

    /// A batch is drained into a Produce request `waited` after its first record.
    pub(crate) fn batch_drained(&mut self, waited: Duration) {
        self.queue_sum += waited;
        self.queue_count += 1;
        self.queue_max = self.queue_max.max(waited);
    }

    /// The points of a push taken at `now`: every series the subscription asks for, sums as
    /// deltas since the last push when it asks for deltas; the deltas' base moves to now.
    fn points(
        &mut self,
        now: Instant,
        snapshot: &MetricsSnapshot,
        sub: &Subscription,
    ) -> Vec<Point> {
        let mut points = Vec::new();
        for s in snapshot.java_named() {
            let value = s.value.as_f64();
            if !value.is_finite() {
                continue; // an average of nothing
            }
            let attributes = s
                .labels
                .into_iter()
                // Java's attributes: `node_id` as `node-<id>` (`node--1` for a bootstrap
                // address), `topic` as is.
                .filter_map(|(k, v)| match k {
                    "node_id" => Some(("node_id", format!("node-{v}"))),
                    "topic" => Some(("topic", v)),
                    _ => None,
                })
                .collect();
            points.push(Point {
                name: format!("{PRODUCER_PREFIX}{}", s.name.replace('_', ".")),
                sum: s.kind == SeriesKind::Counter,
                attributes,
                value,
            });
        }
        let since_last = now.saturating_duration_since(self.last).as_secs_f64();
        let created_since = self.connections_created - self.connections_at_last;
        let mut own = vec![
            (
                "connection.creation.total",
                true,
                self.connections_created as f64,
            ),
            (
                "connection.creation.rate",
                false,
                if since_last > 0.0 {
                    created_since as f64 / since_last
                } else {
                    0.0
                },
            ),
        ];
        if self.queue_count > 0 {
            let avg = self.queue_sum.as_secs_f64() * 1000.0 / self.queue_count as f64;
            own.push(("record.queue.time.avg", false, avg));
            own.push((
                "record.queue.time.max",
                false,
                self.queue_max.as_secs_f64() * 1000.0,
            ));
        }
        for (name, sum, value) in own {
            points.push(Point {
                name: format!("{PRODUCER_PREFIX}{name}"),
                sum,
                attributes: Vec::new(),
                value,
            });
        }
        points.retain(|p| sub.metrics.matches(&p.name));
        // The deltas' base: every sum series' value now.
        let mut current = HashMap::with_capacity(points.iter().filter(|p| p.sum).count());
        for p in points.iter_mut().filter(|p| p.sum) {
            let key = p.key();
            let cumulative = p.value;
            if sub.delta {
                let before = self.previous.get(&key).copied().unwrap_or(0.0);
                p.value = (cumulative - before).max(0.0);
            }
            current.insert(key, cumulative);
        }
        self.previous = current;
        self.connections_at_last = self.connections_created;
        self.queue_sum = Duration::ZERO;
        self.queue_count = 0;
        self.queue_max = Duration::ZERO;
        points
    }

    /// The push's payload: OTLP `MetricsData` of the points the subscription asks for at
    /// `now`, uncompressed. `unix_nanos` turns an instant into Unix time in nanoseconds.
    pub(crate) fn encode(
        &mut self,
        now: Instant,
        snapshot: &MetricsSnapshot,
        sub: &Subscription,
        unix_nanos: impl Fn(Instant) -> u64,
    ) -> Vec<u8> {
        let start = if sub.delta { self.last } else { self.started };
        let points = self.points(now, snapshot, sub);
        self.last = now;
        let (start_ns, now_ns) = (unix_nanos(start), unix_nanos(now));
        let temporality = if sub.delta {
            AggregationTemporality::Delta
        } else {
            AggregationTemporality::Cumulative
        };
        let mut metrics: Vec<Metric> = Vec::new();
        for p in points {
            let point = NumberDataPoint {
                attributes: p
                    .attributes
                    .into_iter()
                    .map(|(k, v)| key_value(k, v))
                    .collect(),
                start_time_unix_nano: if p.sum { start_ns } else { 0 },
                time_unix_nano: now_ns,
                value: Some(number_data_point::Value::AsDouble(p.value)),
                ..Default::default()
            };
            // The points of one name come together (the snapshot lists them so).
            if let Some(m) = metrics.last_mut().filter(|m| m.name == p.name) {
                match &mut m.data {
                    Some(metric::Data::Sum(s)) => s.data_points.push(point),
                    Some(metric::Data::Gauge(g)) => g.data_points.push(point),
                    _ => {}
                }
                continue;
            }
            let data = if p.sum {
                metric::Data::Sum(Sum {
                    data_points: vec![point],
                    aggregation_temporality: temporality as i32,
                    is_monotonic: true,
                })
            } else {
                metric::Data::Gauge(Gauge {
                    data_points: vec![point],
                })
            };
            metrics.push(Metric {
                name: p.name,
                data: Some(data),
                ..Default::default()
            });
        }
        let data = MetricsData {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource::default()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "producer-core".to_string(),
                        version: env!("CARGO_PKG_VERSION").to_string(),
                        ..Default::default()
                    }),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        data.encode_to_vec()
    }
}

fn key_value(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..Default::default()
    }
}
