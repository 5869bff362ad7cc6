//! The producer's metrics against what the simulated cluster logged: records, requests,
//! batches, retries and errors by code counted by the producer must equal what the brokers saw,
//! histograms must hold what the run did, and the Prometheus text must parse back to the same
//! numbers.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use producer_core::classify::{classify, Action};
use producer_core::metrics::{ConnectionState, MetricsSnapshot, HISTOGRAM_BUCKETS};
use producer_core::ErrorCode;
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, API_PRODUCE};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4), ("clicks", 3)];
const NAMES: &[&str] = &["orders", "clicks"];

fn inject(
    code: ErrorCode,
    topic: &str,
    partition: i32,
    count: u32,
    persist: bool,
) -> InjectedError {
    InjectedError {
        api_key: API_PRODUCE,
        topic: Some(topic.to_string()),
        partition: Some(partition),
        error_code: code.0,
        count,
        persist,
    }
}

/// What the brokers' request log says about Produce.
#[derive(Debug, Default)]
struct Logged {
    requests: u64,
    answered: u64,
    batches: u64,
    records: u64,
    errors: BTreeMap<i16, u64>,
    retried: u64,
}

fn logged(h: &Harness<u64>) -> Logged {
    let mut l = Logged::default();
    for r in h.cluster.request_log() {
        if r.api_key != API_PRODUCE {
            continue;
        }
        l.requests += 1;
        l.answered += u64::from(r.responded);
        for p in &r.produce {
            l.batches += 1;
            l.records += p.record_count as u64;
            if p.error_code != 0 {
                *l.errors.entry(p.error_code).or_default() += 1;
                let action = classify(ErrorCode(p.error_code));
                if matches!(
                    action,
                    Action::Refresh | Action::Backoff | Action::Unsure | Action::Reset
                ) {
                    l.retried += 1;
                }
            }
        }
    }
    l
}

/// A run with errors of every retrying kind and one that fails its batch, no lost
/// connections: every request reached a broker and every answer reached the producer, so the
/// producer's counts must equal the brokers' exactly.
#[test]
fn counters_equal_the_brokers_request_log() {
    let mut h = harness(cluster(3, TOPICS, 7), |b| {
        b.linger(Duration::from_millis(2)).batch_size(2048)
    });
    h.cluster.inject_error(inject(
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        "orders",
        0,
        3,
        false,
    ));
    h.cluster.inject_error(inject(
        ErrorCode::NOT_ENOUGH_REPLICAS,
        "orders",
        1,
        2,
        false,
    ));
    h.cluster.inject_error(inject(
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        "clicks",
        0,
        2,
        true,
    ));
    h.cluster
        .inject_error(inject(ErrorCode::INVALID_RECORD, "clicks", 1, 1, false));
    let mut sent = send_many(&mut h, NAMES, 0, 1500, true);
    sent.extend(send_many(&mut h, NAMES, 1500, 1500, false));
    assert!(h.flush(secs(60)), "not everything was reported");
    check_run(&h, &sent, TOPICS, true);

    let m = h.producer.metrics();
    let l = logged(&h);
    let c = &m.counters;
    assert_eq!(l.requests, l.answered, "the brokers answered every Produce");
    assert_eq!(c.produce_requests, l.requests, "Produce requests");
    assert_eq!(c.batches_sent, l.batches, "batches carried");
    assert_eq!(c.records_sent, l.records, "records carried");
    let errors: BTreeMap<i16, u64> = m.errors.iter().map(|&(code, n)| (code.0, n)).collect();
    assert_eq!(errors, l.errors, "errors by code");
    for code in [
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        ErrorCode::NOT_ENOUGH_REPLICAS,
        ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode::INVALID_RECORD,
    ] {
        assert!(m.errors_with(code) > 0, "{code} was injected and counted");
    }
    assert_eq!(
        c.retries, l.retried,
        "retries: the retried errors in the log"
    );
    let retry_events = h
        .events
        .iter()
        .filter(|e| matches!(e, producer_core::Event::Retry { .. }))
        .count() as u64;
    assert_eq!(c.retries, retry_events, "one Retry event per retry");

    let reports = reports(&h);
    let delivered = reports.values().filter(|r| r.is_ok()).count() as u64;
    let failed = reports.values().filter(|r| r.is_err()).count() as u64;
    assert!(failed > 0, "the INVALID_RECORD batch failed");
    assert_eq!(c.records_delivered, delivered);
    assert_eq!(c.records_failed, failed);
    let in_logs: u64 = TOPICS
        .iter()
        .flat_map(|&(t, n)| (0..n).map(move |p| (t, p)))
        .map(|(t, p)| h.cluster.log(t, p).len() as u64)
        .sum();
    assert_eq!(
        c.records_delivered, in_logs,
        "every delivered record is in a log once"
    );

    // Histograms: one request latency per answer, one delivery latency per delivered record,
    // one batch size per batch closed (each batch is sent once plus once per retry; none split).
    assert_eq!(m.request_latency.count(), l.answered);
    assert_eq!(m.delivery_latency.count(), delivered);
    assert_eq!(m.batch_size.count(), c.batches_sent - c.retries);
    assert!(m.batch_size.sum() <= c.bytes_sent && c.bytes_sent > 0);
    // Idle at the end: nothing buffered, nothing in flight, the brokers that led partitions
    // ready, the producer id the brokers logged.
    assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
    assert!(m.brokers.iter().all(|b| b.in_flight_requests == 0));
    for id in 1..=3 {
        let b = m
            .brokers
            .iter()
            .find(|b| b.node_id == id)
            .expect("broker known");
        assert_eq!(b.state, ConnectionState::Ready, "broker {id}");
    }
    let logged_pid = h.cluster.log("orders", 2)[0].producer_id;
    assert_eq!(m.producer_id.map(|(id, _)| id), Some(logged_pid));
}

/// Every answer waited at least 40 ms: the request-latency histogram has nothing in the
/// buckets below 40 ms and sums to at least 40 ms per answer; delivery latency (per batch,
/// weighted by its records) is at least the request latency of the batch's answer.
#[test]
fn latency_histograms_hold_the_delays() {
    let mut h = harness(cluster(1, TOPICS, 3), |b| b);
    h.cluster
        .delay_responses(1, Duration::from_millis(40), 1_000_000)
        .unwrap();
    let sent = send_many(&mut h, NAMES, 0, 800, false);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    let m = h.producer.metrics();
    let answered = m.counters.produce_requests;
    assert!(answered > 0);
    assert_eq!(m.request_latency.count(), answered);
    // Bucket bounds are 128 us * 2^i: 32.768 ms is the largest bound below 40 ms.
    let below: Vec<_> = m
        .request_latency
        .buckets()
        .filter(|(b, _)| b.is_some_and(|b| b < 40_000))
        .collect();
    assert_eq!(below.last().map(|&(b, _)| b), Some(Some(32_768)));
    assert!(below.iter().all(|&(_, n)| n == 0), "{below:?}");
    assert!(m.request_latency.sum() >= 40_000 * answered);
    assert_eq!(m.delivery_latency.count(), 800);
    assert!(m.delivery_latency.sum() >= 40_000 * 800);
    let first_delivery = m
        .delivery_latency
        .buckets()
        .find(|&(_, n)| n > 0)
        .and_then(|(b, _)| b);
    assert!(
        first_delivery.is_some_and(|b| b >= 65_536),
        "{first_delivery:?}"
    );
}

/// A broker stopped mid-run: its connection is counted lost and shown backing off or
/// disconnected while it is down (or not shown at all once a Metadata answer without it has
/// dropped it), and ready again after it is back.
#[test]
fn connection_state_follows_a_stopped_broker() {
    let mut h = harness(cluster(3, TOPICS, 11), |b| b);
    let sent = send_many(&mut h, NAMES, 0, 300, true);
    assert!(h.flush(secs(30)));
    let before = h.producer.metrics();
    let victim = h.cluster.leader("orders", 0).unwrap().0;
    let state = |m: &MetricsSnapshot| {
        m.brokers
            .iter()
            .find(|b| b.node_id == victim)
            .map(|b| b.state)
    };
    assert_eq!(state(&before), Some(ConnectionState::Ready));
    let now = h.now;
    h.cluster.stop_broker(victim, now).unwrap();
    let more = send_many(&mut h, NAMES, 300, 300, true);
    h.run_for(Duration::from_millis(200));
    let down = h.producer.metrics();
    assert!(down.counters.disconnects > before.counters.disconnects);
    assert!(
        matches!(
            state(&down),
            None | Some(
                ConnectionState::BackingOff
                    | ConnectionState::Disconnected
                    | ConnectionState::Connecting
            )
        ),
        "{:?}",
        state(&down)
    );
    assert_eq!(
        state(&down).is_none(),
        down.counters.brokers_dropped > before.counters.brokers_dropped
    );
    h.cluster.start_broker(victim).unwrap();
    assert!(h.flush(secs(60)));
    let mut all = sent;
    all.extend(more);
    check_run(&h, &all, TOPICS, true);
    let after = h.producer.metrics();
    assert_eq!(
        after.counters.records_delivered + after.counters.records_failed,
        600
    );
    assert_eq!(state(&after), Some(ConnectionState::Ready));
}

/// The Prometheus text parses back (with the prometheus-parse crate) to the snapshot's numbers.
#[test]
fn prometheus_text_parses_back_to_the_snapshot() {
    let mut h = harness(cluster(3, TOPICS, 5), |b| b);
    h.cluster.inject_error(inject(
        ErrorCode::NOT_ENOUGH_REPLICAS,
        "orders",
        1,
        2,
        false,
    ));
    let sent = send_many(&mut h, NAMES, 0, 1000, true);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    let m = h.producer.metrics();
    let mut text = String::new();
    m.render_prometheus(&mut text);
    assert_eq!(text, m.to_string(), "Display writes the same text");
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition text");

    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("{name} {labels:?} missing"));
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        }
    };
    let c = &m.counters;
    for (name, v) in [
        ("kafka_producer_records_sent_total", c.records_sent),
        ("kafka_producer_bytes_sent_total", c.bytes_sent),
        (
            "kafka_producer_records_delivered_total",
            c.records_delivered,
        ),
        ("kafka_producer_records_failed_total", c.records_failed),
        ("kafka_producer_produce_requests_total", c.produce_requests),
        ("kafka_producer_batches_sent_total", c.batches_sent),
        ("kafka_producer_retries_total", c.retries),
        ("kafka_producer_disconnects_total", c.disconnects),
        (
            "kafka_producer_metadata_refreshes_total",
            c.metadata_refreshes,
        ),
    ] {
        assert_eq!(value(name, &[]), v as f64, "{name}");
    }
    assert_eq!(c.records_delivered, 1000);
    assert_eq!(
        value(
            "kafka_producer_errors_total",
            &[("code", "19"), ("name", "NOT_ENOUGH_REPLICAS")]
        ),
        2.0
    );
    assert_eq!(value("kafka_producer_buffered_records", &[]), 0.0);
    let (pid, epoch) = m.producer_id.unwrap();
    assert_eq!(value("kafka_producer_producer_id", &[]), pid as f64);
    assert_eq!(value("kafka_producer_producer_epoch", &[]), epoch as f64);
    for b in &m.brokers {
        let broker = format!("{}:{}", b.host, b.port);
        let node = b.node_id.to_string();
        let labels = [("broker", broker.as_str()), ("node_id", node.as_str())];
        assert_eq!(
            value("kafka_producer_in_flight_requests", &labels),
            b.in_flight_requests as f64
        );
        for s in ConnectionState::ALL {
            let mut l = labels.to_vec();
            l.push(("state", s.as_str()));
            let want = if s == b.state { 1.0 } else { 0.0 };
            assert_eq!(value("kafka_producer_connection_state", &l), want);
        }
    }
    for (name, hist, per_unit) in [
        (
            "kafka_producer_request_latency_seconds",
            &m.request_latency,
            1e6,
        ),
        (
            "kafka_producer_delivery_latency_seconds",
            &m.delivery_latency,
            1e6,
        ),
        ("kafka_producer_batch_size_bytes", &m.batch_size, 1.0),
    ] {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let prometheus_parse::Value::Histogram(ref parsed) = s.value else {
            panic!("{name} is not a histogram: {:?}", s.value);
        };
        let want: Vec<(f64, f64)> = hist
            .buckets()
            .map(|(b, n)| (b.map_or(f64::INFINITY, |b| b as f64 / per_unit), n as f64))
            .collect();
        let got: Vec<(f64, f64)> = parsed.iter().map(|b| (b.less_than, b.count)).collect();
        assert_eq!(got.len(), HISTOGRAM_BUCKETS + 1, "{name}");
        for ((gb, gn), (wb, wn)) in got.iter().zip(&want) {
            assert!(
                (gb - wb).abs() <= wb.abs() * 1e-12 || gb == wb,
                "{name}: le {gb} vs {wb}"
            );
            assert_eq!(gn, wn, "{name} le {gb}");
        }
        assert_eq!(value(&format!("{name}_count"), &[]), hist.count() as f64);
        assert!(hist.count() > 0, "{name} recorded something");
    }
}

/// `producer_driver::metrics_facade::publish` hands a real run's snapshot to the installed
/// `metrics` recorder under the documented names, with the snapshot's values.
#[test]
fn the_metrics_facade_gets_the_snapshot() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let mut h = harness(cluster(3, TOPICS, 9), |b| b);
    h.cluster.inject_error(inject(
        ErrorCode::NOT_LEADER_OR_FOLLOWER,
        "clicks",
        2,
        1,
        false,
    ));
    let sent = send_many(&mut h, NAMES, 0, 500, false);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    let m = h.producer.metrics();

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || producer_driver::metrics_facade::publish(&m));
    type Published = (String, Vec<(String, String)>, DebugValue);
    let published: Vec<Published> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, v)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            (key.name().to_string(), labels, v)
        })
        .collect();
    let get = |name: &str, labels: &[(&str, &str)]| -> &DebugValue {
        &published
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels.len() == l.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .unwrap_or_else(|| panic!("{name} {labels:?} not published"))
            .2
    };
    let counter = |name: &str, labels: &[(&str, &str)]| match get(name, labels) {
        DebugValue::Counter(v) => *v,
        other => panic!("{name} is not a counter: {other:?}"),
    };
    let gauge = |name: &str, labels: &[(&str, &str)]| match get(name, labels) {
        DebugValue::Gauge(v) => v.into_inner(),
        other => panic!("{name} is not a gauge: {other:?}"),
    };
    let c = &m.counters;
    assert_eq!(counter("kafka_producer_records_delivered_total", &[]), 500);
    assert_eq!(
        counter("kafka_producer_records_sent_total", &[]),
        c.records_sent
    );
    assert_eq!(
        counter("kafka_producer_produce_requests_total", &[]),
        c.produce_requests
    );
    assert_eq!(counter("kafka_producer_retries_total", &[]), 1);
    assert_eq!(
        counter(
            "kafka_producer_errors_total",
            &[("code", "6"), ("name", "NOT_LEADER_OR_FOLLOWER")]
        ),
        1
    );
    assert_eq!(gauge("kafka_producer_buffered_records", &[]), 0.0);
    let (pid, _) = m.producer_id.unwrap();
    assert_eq!(gauge("kafka_producer_producer_id", &[]), pid as f64);
    for b in &m.brokers {
        let broker = format!("{}:{}", b.host, b.port);
        let node = b.node_id.to_string();
        let state = [
            ("broker", broker.as_str()),
            ("node_id", node.as_str()),
            ("state", b.state.as_str()),
        ];
        assert_eq!(gauge("kafka_producer_connection_state", &state), 1.0);
    }
    assert_eq!(
        counter("kafka_producer_request_latency_seconds_count", &[]),
        m.request_latency.count()
    );
    assert_eq!(
        counter(
            "kafka_producer_delivery_latency_seconds_bucket",
            &[("le", "+Inf")]
        ),
        500
    );
    let (bound, n) = m.batch_size.buckets().nth(8).unwrap();
    let le = (bound.unwrap() as f64).to_string();
    assert_eq!(
        counter(
            "kafka_producer_batch_size_bytes_bucket",
            &[("le", le.as_str())]
        ),
        n
    );
    // The series under Java's names (docs/metrics.md).
    assert_eq!(
        counter("kafka_producer_record_send_total", &[]),
        c.records_sent
    );
    assert_eq!(
        counter("kafka_producer_record_retry_total", &[]),
        c.records_retried
    );
    assert_eq!(
        gauge("kafka_producer_record_send_rate", &[]),
        m.windowed.record_send_rate()
    );
    for t in &m.topics {
        assert_eq!(
            counter("kafka_producer_topic_byte_total", &[("topic", &t.topic)]),
            t.bytes_sent
        );
    }
    for b in m.brokers.iter().filter(|b| b.requests_sent > 0) {
        let broker = format!("{}:{}", b.host, b.port);
        let node = b.node_id.to_string();
        let labels = [("broker", broker.as_str()), ("node_id", node.as_str())];
        assert_eq!(
            counter("kafka_producer_node_request_total", &labels),
            b.requests_sent
        );
        assert_eq!(
            counter("kafka_producer_node_request_latency_seconds_count", &labels),
            b.request_latency.count()
        );
    }
}
