//! KIP-714 client telemetry in virtual time (issue 23, item 4): the producer's state machine
//! against the simulated brokers' telemetry receiver (Kafka's `ClientMetricsManager` rules:
//! subscription ids, the push interval enforced with THROTTLING_QUOTA_EXCEEDED, accepted
//! codecs, the size limit, one terminating push). The pushes are decoded as OTLP here, with the
//! `opentelemetry-proto` message types, and compared with the producer's own snapshot.

mod support;

use std::time::Duration;

use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, MetricsData};
use producer_core::{ErrorCode, TelemetryState};
use producer_sim::drive::Harness;
use producer_sim::{
    InjectedError, SimConfig, SimSubscription, SimTelemetryPush, API_GET_TELEMETRY_SUBSCRIPTIONS,
    API_PUSH_TELEMETRY,
};
use prost::Message;
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4), ("clicks", 3)];
const NAMES: &[&str] = &["orders", "clicks"];
const PREFIX: &str = "org.apache.kafka.producer.";
const INTERVAL: Duration = Duration::from_secs(1);

/// One decoded data point: (metric name, sum temporality or None for a gauge, attributes,
/// value).
#[derive(Debug, Clone)]
struct Point {
    name: String,
    temporality: Option<i32>,
    attributes: Vec<(String, String)>,
    value: f64,
    start: u64,
    time: u64,
}

fn decode(push: &SimTelemetryPush) -> Vec<Point> {
    let data = MetricsData::decode(push.metrics.as_ref()).expect("OTLP MetricsData");
    let mut out = Vec::new();
    for rm in data.resource_metrics {
        for sm in rm.scope_metrics {
            for m in sm.metrics {
                let (temporality, points) = match m.data {
                    Some(metric::Data::Sum(s)) => {
                        assert!(s.is_monotonic, "{}", m.name);
                        (Some(s.aggregation_temporality), s.data_points)
                    }
                    Some(metric::Data::Gauge(g)) => (None, g.data_points),
                    other => panic!("{}: unexpected data {other:?}", m.name),
                };
                for p in points {
                    let value = match p.value {
                        Some(number_data_point::Value::AsDouble(x)) => x,
                        Some(number_data_point::Value::AsInt(n)) => n as f64,
                        None => panic!("{}: a point without a value", m.name),
                    };
                    let attributes = p
                        .attributes
                        .iter()
                        .map(|kv| {
                            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                                Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => s.clone(),
                                other => format!("{other:?}"),
                            };
                            (kv.key.clone(), v)
                        })
                        .collect();
                    out.push(Point {
                        name: m.name.clone(),
                        temporality,
                        attributes,
                        value,
                        start: p.start_time_unix_nano,
                        time: p.time_unix_nano,
                    });
                }
            }
        }
    }
    out
}

/// `brokers` brokers with a telemetry receiver.
fn telemetry_cluster(brokers: usize, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::with_brokers(brokers, seed);
    cfg.telemetry_receiver = true;
    cfg
}

fn with_subscription(brokers: usize, seed: u64, sub: Option<SimSubscription>) -> Harness<u64> {
    let mut cluster = cluster_with(telemetry_cluster(brokers, seed), TOPICS);
    cluster.set_telemetry_subscription(sub);
    harness(cluster, |b| b.linger(Duration::from_millis(5)))
}

/// Sends `n` records, `per_step` at a time, `gap` apart in virtual time.
fn send_spread(h: &mut Harness<u64>, n: u64, per_step: u64, gap: Duration) {
    let mut id = 0;
    while id < n {
        let k = per_step.min(n - id);
        send_many(h, NAMES, id, k, true);
        id += k;
        h.run_for(gap);
    }
}

fn close(h: &mut Harness<u64>) {
    h.producer.close(h.now);
    assert!(
        h.run_until(secs(120), |h| h.producer.is_closed()),
        "the close did not complete"
    );
}

fn count_requests(h: &Harness<u64>, key: i16) -> usize {
    h.cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == key)
        .count()
}

/// The subscription's interval is kept (the broker throttles none), the first push comes
/// within 50-150% of it after the subscription, every name is a KIP-714 producer name, sums
/// are deltas as the broker asked and add up to the snapshot's totals, and the close's push
/// is the one terminating push, the last.
#[test]
fn pushes_keep_the_interval_and_their_deltas_add_up_to_the_snapshot() {
    let sub = SimSubscription::new([PREFIX], INTERVAL);
    let mut h = with_subscription(2, 3, Some(sub));
    send_spread(&mut h, 600, 20, Duration::from_millis(200));
    assert!(h.flush(secs(30)));
    let snapshot = h.producer.metrics();
    let status = h.producer.telemetry();
    assert_eq!(status.state, TelemetryState::PushNeeded, "{status:?}");
    close(&mut h);
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );

    let pushes = h.cluster.telemetry_pushes().to_vec();
    assert!(
        pushes.len() >= 5,
        "{} pushes in 6 s of 1 s interval",
        pushes.len()
    );
    assert_eq!(
        h.cluster
            .telemetry_refused(ErrorCode::THROTTLING_QUOTA_EXCEEDED.0),
        0
    );
    let instance = status.client_instance_id.expect("an instance id");
    assert!(pushes.iter().all(|p| p.client_instance_id == instance));
    // One terminating push, the last.
    let terminating: Vec<usize> = (0..pushes.len())
        .filter(|&i| pushes[i].terminating)
        .collect();
    assert_eq!(terminating, [pushes.len() - 1]);
    assert_eq!(h.producer.telemetry().state, TelemetryState::Terminated);
    // Zstd: the first codec the broker accepts that this build has.
    assert!(pushes.iter().all(|p| p.compression == 4));
    // Cadence: the first push 0.5-1.5 intervals after the subscription, the next ones an
    // interval apart (the broker refuses sooner ones).
    let subscribed = h
        .cluster
        .request_log()
        .iter()
        .find(|r| r.api_key == API_GET_TELEMETRY_SUBSCRIPTIONS)
        .unwrap()
        .at;
    let first = pushes[0].at - subscribed;
    assert!(
        first >= INTERVAL / 2 && first <= INTERVAL * 3 / 2 + Duration::from_millis(20),
        "first push {first:?} after the subscription"
    );
    for w in pushes.windows(2).filter(|w| !w[1].terminating) {
        assert!(w[1].at - w[0].at >= INTERVAL, "{:?}", w[1].at - w[0].at);
    }

    let decoded: Vec<Vec<Point>> = pushes.iter().map(decode).collect();
    let names: std::collections::BTreeSet<&str> =
        decoded.iter().flatten().map(|p| p.name.as_str()).collect();
    for n in &names {
        assert!(n.starts_with(PREFIX), "{n}");
    }
    for expected in [
        "record.queue.time.avg",
        "record.queue.time.max",
        "node.request.latency.avg",
        "node.request.latency.max",
        "produce.throttle.time.avg",
        "produce.throttle.time.max",
        "connection.creation.total",
        "connection.creation.rate",
        "record.send.total",
        "topic.record.send.total",
    ] {
        assert!(
            names.contains(format!("{PREFIX}{expected}").as_str()),
            "{expected} never pushed: {names:?}"
        );
    }
    // Sums are deltas (OTLP AGGREGATION_TEMPORALITY_DELTA = 1) and add up to the totals.
    let sum_of = |name: &str| -> f64 {
        decoded
            .iter()
            .flatten()
            .filter(|p| p.name == format!("{PREFIX}{name}") && p.attributes.is_empty())
            .inspect(|p| assert_eq!(p.temporality, Some(1), "{p:?}"))
            .map(|p| p.value)
            .sum()
    };
    assert_eq!(
        sum_of("record.send.total"),
        snapshot.counters.records_sent as f64
    );
    assert_eq!(sum_of("record.send.total"), 600.0);
    assert_eq!(
        sum_of("request.total"),
        snapshot.counters.produce_requests as f64
    );
    assert_eq!(
        sum_of("outgoing.byte.total"),
        snapshot.counters.bytes_sent as f64
    );
    // Per topic too.
    for t in NAMES {
        let per_topic: f64 = decoded
            .iter()
            .flatten()
            .filter(|p| p.name == format!("{PREFIX}topic.record.send.total"))
            .filter(|p| p.attributes == [("topic".to_string(), t.to_string())])
            .map(|p| p.value)
            .sum();
        assert_eq!(per_topic, 300.0, "{t}");
    }
    // Each delta covers the time since the previous push.
    for (i, points) in decoded.iter().enumerate().skip(1) {
        let prev_time = decoded[i - 1][0].time;
        for p in points.iter().filter(|p| p.temporality.is_some()) {
            assert_eq!(p.start, prev_time, "push {i}: {p:?}");
        }
    }
    // Per broker latencies name their node.
    assert!(decoded
        .iter()
        .flatten()
        .filter(|p| p.name == format!("{PREFIX}node.request.latency.avg"))
        .all(|p| p.attributes.len() == 1
            && p.attributes[0].0 == "node_id"
            && p.attributes[0].1.starts_with("node-")));
    assert_eq!(h.producer.telemetry().pushes_accepted, pushes.len() as u64);
}

/// A broker that asks for cumulative sums gets them: each push's `record.send.total` is the
/// total so far, the last one the snapshot's.
#[test]
fn cumulative_sums_when_the_broker_asks() {
    let mut sub = SimSubscription::new([PREFIX], INTERVAL);
    sub.delta_temporality = false;
    let mut h = with_subscription(1, 5, Some(sub));
    send_spread(&mut h, 200, 10, Duration::from_millis(200));
    assert!(h.flush(secs(30)));
    let sent = h.producer.metrics().counters.records_sent as f64;
    close(&mut h);
    let totals: Vec<f64> = h
        .cluster
        .telemetry_pushes()
        .iter()
        .map(|p| {
            let points = decode(p);
            let p = points
                .iter()
                .find(|x| x.name == format!("{PREFIX}record.send.total"))
                .expect("record.send.total");
            assert_eq!(p.temporality, Some(2), "cumulative: {p:?}");
            p.value
        })
        .collect();
    assert!(totals.len() >= 3, "{totals:?}");
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{totals:?}");
    assert_eq!(*totals.last().unwrap(), sent);
    // Cumulative points all start at the producer's start.
    let starts: std::collections::BTreeSet<u64> = h
        .cluster
        .telemetry_pushes()
        .iter()
        .flat_map(decode)
        .filter(|p| p.temporality.is_some())
        .map(|p| p.start)
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}");
}

/// Only the metrics the subscription names are pushed.
#[test]
fn only_the_requested_prefixes_are_pushed() {
    let prefix = "org.apache.kafka.producer.node.";
    let mut h = with_subscription(2, 7, Some(SimSubscription::new([prefix], INTERVAL)));
    send_spread(&mut h, 100, 10, Duration::from_millis(300));
    assert!(h.flush(secs(30)));
    close(&mut h);
    let pushes = h.cluster.telemetry_pushes();
    assert!(pushes.len() >= 2);
    let points: Vec<Point> = pushes.iter().flat_map(decode).collect();
    assert!(!points.is_empty());
    assert!(
        points.iter().all(|p| p.name.starts_with(prefix)),
        "{points:?}"
    );
}

/// A broker without a telemetry receiver hides both APIs: the producer never asks, and closes
/// as usual.
#[test]
fn hidden_apis_are_never_asked() {
    let cluster = cluster_with(SimConfig::with_brokers(2, 9), TOPICS);
    let mut h = harness(cluster, |b| b);
    send_spread(&mut h, 50, 10, Duration::from_millis(500));
    assert!(h.flush(secs(30)));
    close(&mut h);
    assert_eq!(count_requests(&h, API_GET_TELEMETRY_SUBSCRIPTIONS), 0);
    assert_eq!(count_requests(&h, API_PUSH_TELEMETRY), 0);
    assert!(
        h.cluster.violations().is_empty(),
        "{:?}",
        h.cluster.violations()
    );
}

/// `enable.metrics.push=false`: nothing asked, even of a broker with a receiver.
#[test]
fn enable_metrics_push_false_asks_nothing() {
    let mut cluster = cluster_with(telemetry_cluster(1, 11), TOPICS);
    cluster.set_telemetry_subscription(Some(SimSubscription::new([PREFIX], INTERVAL)));
    let mut h = harness(cluster, |b| b.enable_metrics_push(false));
    send_spread(&mut h, 50, 10, Duration::from_millis(500));
    close(&mut h);
    assert_eq!(count_requests(&h, API_GET_TELEMETRY_SUBSCRIPTIONS), 0);
    assert_eq!(h.producer.telemetry().state, TelemetryState::Off);
}

/// No subscription matches: no push, and the producer asks again at the broker's interval
/// (Kafka's 5 minutes), not sooner.
#[test]
fn no_subscription_no_pushes_and_asks_again_at_the_interval() {
    let mut h = with_subscription(1, 13, None);
    h.run_for(Duration::from_secs(650));
    close(&mut h);
    assert!(h.cluster.telemetry_pushes().is_empty());
    let asks: Vec<_> = h
        .cluster
        .request_log()
        .iter()
        .filter(|r| r.api_key == API_GET_TELEMETRY_SUBSCRIPTIONS)
        .map(|r| r.at)
        .collect();
    assert_eq!(asks.len(), 3, "at start, +300 s, +600 s");
    for w in asks.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_secs(300));
    }
    assert_eq!(count_requests(&h, API_PUSH_TELEMETRY), 0);
}

/// The subscription changes: the next push is answered UNKNOWN_SUBSCRIPTION_ID, the producer
/// asks again at once (keeping its client instance id) and pushes under the new one.
#[test]
fn a_changed_subscription_is_asked_for_again() {
    let mut h = with_subscription(2, 17, Some(SimSubscription::new([PREFIX], INTERVAL)));
    send_spread(&mut h, 100, 10, Duration::from_millis(300));
    let before = h.producer.telemetry();
    h.cluster
        .set_telemetry_subscription(Some(SimSubscription::new([PREFIX], INTERVAL * 2)));
    send_spread(&mut h, 100, 10, Duration::from_millis(600));
    assert!(h.flush(secs(30)));
    let after = h.producer.telemetry();
    close(&mut h);
    assert_eq!(
        h.cluster
            .telemetry_refused(ErrorCode::UNKNOWN_SUBSCRIPTION_ID.0),
        1
    );
    assert_eq!(after.client_instance_id, before.client_instance_id);
    assert_ne!(after.subscription_id, before.subscription_id);
    assert_eq!(after.push_interval, Some(INTERVAL * 2));
    let ids: Vec<i32> = h
        .cluster
        .telemetry_pushes()
        .iter()
        .map(|p| p.subscription_id)
        .collect();
    assert!(ids.contains(&before.subscription_id.unwrap()), "{ids:?}");
    assert_eq!(ids.last(), after.subscription_id.as_ref(), "{ids:?}");
    assert_eq!(
        h.cluster
            .telemetry_refused(ErrorCode::THROTTLING_QUOTA_EXCEEDED.0),
        0
    );
}

/// A codec the broker refuses is not used again: after UNSUPPORTED_COMPRESSION_TYPE the
/// producer asks again and pushes with the next codec it prefers (lz4 after zstd).
#[test]
fn a_refused_codec_is_dropped_for_the_next() {
    let mut h = with_subscription(1, 19, Some(SimSubscription::new([PREFIX], INTERVAL)));
    h.cluster.inject_error(InjectedError {
        api_key: API_PUSH_TELEMETRY,
        topic: None,
        partition: None,
        error_code: ErrorCode::UNSUPPORTED_COMPRESSION_TYPE.0,
        count: 1,
        persist: false,
    });
    send_spread(&mut h, 100, 10, Duration::from_millis(400));
    assert!(h.flush(secs(30)));
    close(&mut h);
    let pushes = h.cluster.telemetry_pushes();
    assert!(pushes.len() >= 2);
    assert!(
        pushes.iter().all(|p| p.compression == 3),
        "lz4 after zstd was refused"
    );
    assert_eq!(count_requests(&h, API_GET_TELEMETRY_SUBSCRIPTIONS), 2);
}

/// Pushes larger than the subscription's `telemetry_max_bytes` are not sent.
#[test]
fn pushes_over_the_size_limit_are_not_sent() {
    let mut sub = SimSubscription::new([PREFIX], INTERVAL);
    sub.max_bytes = 16;
    let mut h = with_subscription(1, 23, Some(sub));
    send_spread(&mut h, 50, 10, Duration::from_millis(500));
    close(&mut h);
    assert_eq!(count_requests(&h, API_PUSH_TELEMETRY), 0);
    let status = h.producer.telemetry();
    assert!(status.pushes_too_large >= 2, "{status:?}");
}

/// An answer retrying cannot fix (INVALID_REQUEST) turns telemetry off for good.
#[test]
fn an_invalid_request_answer_turns_telemetry_off() {
    let mut h = with_subscription(1, 29, Some(SimSubscription::new([PREFIX], INTERVAL)));
    h.cluster.inject_error(InjectedError {
        api_key: API_GET_TELEMETRY_SUBSCRIPTIONS,
        topic: None,
        partition: None,
        error_code: ErrorCode::INVALID_REQUEST.0,
        count: 1,
        persist: false,
    });
    send_spread(&mut h, 50, 10, Duration::from_millis(500));
    close(&mut h);
    let status = h.producer.telemetry();
    assert_eq!(status.state, TelemetryState::Off);
    assert_eq!(status.disabled_by, Some(ErrorCode::INVALID_REQUEST));
    assert_eq!(count_requests(&h, API_GET_TELEMETRY_SUBSCRIPTIONS), 1);
    assert_eq!(count_requests(&h, API_PUSH_TELEMETRY), 0);
}

/// The close waits for the terminating push's answer, but not past `close_within`'s deadline:
/// with the broker's answers held back, the close completes at the deadline.
#[test]
fn the_close_waits_for_the_terminating_push_within_its_deadline() {
    let mut h = with_subscription(1, 31, Some(SimSubscription::new([PREFIX], INTERVAL)));
    send_spread(&mut h, 50, 10, Duration::from_millis(400));
    assert!(h.flush(secs(30)));
    assert_eq!(h.producer.telemetry().state, TelemetryState::PushNeeded);
    // Every answer from now on takes 10 s.
    h.cluster
        .delay_responses(1, Duration::from_secs(10), 1000)
        .unwrap();
    let start = h.now;
    h.producer
        .close_within(h.now, h.now + Duration::from_secs(2));
    assert!(h.run_until(secs(60), |h| h.producer.is_closed()));
    assert!(h.now - start <= Duration::from_secs(2) + Duration::from_millis(1));
    assert_eq!(h.producer.telemetry().state, TelemetryState::Terminated);
    assert_eq!(count_requests(&h, API_PUSH_TELEMETRY) as u64, {
        // The terminating push was sent (the broker handled it) but its answer never came.
        h.cluster.telemetry_pushes().len() as u64
    });
    assert!(h.cluster.telemetry_pushes().last().unwrap().terminating);
}
