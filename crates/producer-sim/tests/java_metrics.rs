//! The Java-named metrics (issue 23, item 1) after scripted runs in the simulated cluster:
//! totals, per-topic and per-broker series and the buffer wait must equal what the brokers
//! logged (or what the virtual clock says), in the snapshot and in the Prometheus text.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use producer_core::{ErrorCode, MetricsSnapshot, SendErrorReason};
use producer_sim::drive::Harness;
use producer_sim::{InjectedError, API_PRODUCE};
use support::run::*;

const TOPICS: &[(&str, i32)] = &[("orders", 4), ("clicks", 3)];
const NAMES: &[&str] = &["orders", "clicks"];

/// Per topic, from the brokers' request log: (records carried, batch bytes carried, records
/// retried), every attempt counted.
fn logged_per_topic(h: &Harness<u64>) -> BTreeMap<String, (u64, u64, u64)> {
    let mut m: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for r in h.cluster.request_log() {
        if r.api_key != API_PRODUCE {
            continue;
        }
        for p in &r.produce {
            let e = m.entry(p.topic.clone()).or_default();
            e.0 += p.record_count as u64;
            e.1 += p.batch_bytes as u64;
            if p.error_code == ErrorCode::NOT_ENOUGH_REPLICAS.0 {
                e.2 += p.record_count as u64;
            }
        }
    }
    m
}

fn text(m: &MetricsSnapshot) -> String {
    m.to_string()
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "{line:?} missing from:\n{text}"
    );
}

/// N records delivered: `record-send-total` is N, each topic's records and bytes are what the
/// brokers' logs hold, and the windowed figures are the totals over the window.
#[test]
fn sent_records_and_bytes_per_topic_equal_the_brokers_logs() {
    let mut h = harness(cluster(3, TOPICS, 11), |b| {
        b.linger(Duration::from_millis(2)).batch_size(2048)
    });
    let t0 = h.now;
    let n = 2000;
    let sent = send_many(&mut h, NAMES, 0, n, true);
    assert!(h.flush(secs(60)), "not everything was reported");
    check_run(&h, &sent, TOPICS, true);
    let m = h.producer.metrics();
    let c = &m.counters;
    assert_eq!(c.records_sent, n, "no retries: each record sent once");
    assert_eq!(c.records_retried, 0);
    assert_eq!(c.records_failed, 0);

    let logged = logged_per_topic(&h);
    assert_eq!(m.topics.len(), 2, "both topics in use: {:?}", m.topics);
    for t in &m.topics {
        let (records, bytes, _) = logged[&*t.topic];
        let held: u64 = (0..TOPICS.iter().find(|x| x.0 == &*t.topic).unwrap().1)
            .map(|p| h.cluster.log(&t.topic, p).len() as u64)
            .sum();
        assert_eq!(t.records_sent, records, "{}: records carried", t.topic);
        assert_eq!(t.records_sent, held, "{}: records the log holds", t.topic);
        assert_eq!(t.bytes_sent, bytes, "{}: batch bytes carried", t.topic);
        assert_eq!(t.compression_rate(), 1.0, "no compression");
        let text = text(&m);
        has(
            &text,
            &format!(
                "kafka_producer_topic_record_send_total{{topic=\"{}\"}} {records}",
                t.topic
            ),
        );
        has(
            &text,
            &format!(
                "kafka_producer_topic_byte_total{{topic=\"{}\"}} {bytes}",
                t.topic
            ),
        );
    }
    let text = text(&m);
    has(&text, &format!("kafka_producer_record_send_total {n}"));
    has(&text, "kafka_producer_record_error_total 0");
    has(
        &text,
        &format!("kafka_producer_request_total {}", c.produce_requests),
    );

    // The whole run fits in the first sample (30 s): the window's growth is the totals, and
    // the rate divides by Java's window size (the run's length plus one whole window).
    let w = &m.windowed;
    let run = h.now - t0;
    assert!(run < secs(30), "the run took {run:?}");
    assert_eq!(w.growth.records_sent, n);
    assert_eq!(w.elapsed, run + secs(30));
    assert_eq!(
        w.record_send_rate(),
        n as f64 / (run + secs(30)).as_secs_f64()
    );
    assert_eq!(
        w.records_per_request_avg(),
        n as f64 / c.produce_requests as f64
    );
    assert_eq!(
        w.batch_size_avg(),
        c.bytes_sent as f64 / c.batches_sent as f64
    );
    has(
        &text,
        &format!("kafka_producer_record_send_rate {}", w.record_send_rate()),
    );
    // Per broker: requests and bytes add up to the totals, latencies were measured.
    let requests: u64 = m.brokers.iter().map(|b| b.requests_sent).sum();
    let bytes: u64 = m.brokers.iter().map(|b| b.bytes_sent).sum();
    let answered: u64 = m.brokers.iter().map(|b| b.request_latency.count()).sum();
    assert_eq!(requests, c.produce_requests);
    assert_eq!(bytes, c.bytes_sent);
    assert_eq!(
        answered, c.produce_requests,
        "acks=all: every request answered"
    );
    assert!(m.metadata_age.is_some());
    assert!(text.contains("kafka_producer_metadata_age "));

    // Measured at a later instant (a driver's clock at a scrape): the same totals, the window
    // divided by the longer time; an instant before the latest input counts as it.
    let at = h.producer.metrics_at(h.now + secs(40));
    assert_eq!(at.counters, m.counters);
    assert_eq!(at.windowed.growth.records_sent, n);
    assert_eq!(at.windowed.elapsed, run + secs(40));
    assert_eq!(h.producer.metrics_at(t0), m);
    // Long after, the samples expired: the rates fall to zero, the totals stay.
    h.run_for(secs(120));
    let later = h.producer.metrics();
    assert_eq!(later.windowed.record_send_rate(), 0.0);
    assert_eq!(later.counters.records_sent, n);
}

/// Retries and their records, per topic: what the brokers refused with a retriable error.
#[test]
fn retried_records_per_topic_equal_the_refused_batches() {
    let mut h = harness(cluster(3, TOPICS, 5), |b| {
        b.linger(Duration::from_millis(2)).batch_size(2048)
    });
    for (topic, partition) in [("orders", 1), ("clicks", 2)] {
        h.cluster.inject_error(InjectedError {
            api_key: API_PRODUCE,
            topic: Some(topic.into()),
            partition: Some(partition),
            error_code: ErrorCode::NOT_ENOUGH_REPLICAS.0,
            count: 2,
            persist: false,
        });
    }
    let sent = send_many(&mut h, NAMES, 0, 600, true);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    let m = h.producer.metrics();
    let logged = logged_per_topic(&h);
    let mut retried = 0;
    for t in &m.topics {
        let (records, _, refused) = logged[&*t.topic];
        assert!(refused > 0, "{}: the injection hit", t.topic);
        assert_eq!(t.records_retried, refused, "{}", t.topic);
        assert_eq!(t.records_sent, records, "{}", t.topic);
        retried += refused;
    }
    assert_eq!(m.counters.records_retried, retried);
    assert_eq!(m.counters.records_sent, 600 + retried);
    has(
        &text(&m),
        &format!("kafka_producer_record_retry_total {retried}"),
    );
}

/// Throttle time per broker equals what each simulated broker put in its Produce responses.
#[test]
fn throttle_time_per_broker_equals_what_the_broker_throttled() {
    let mut h = harness(cluster(3, TOPICS, 3), |b| {
        b.linger(Duration::from_millis(2))
    });
    let warm = send_many(&mut h, NAMES, 0, 20, true);
    assert!(h.flush(secs(30)));
    h.cluster.set_throttle(1, 40, 3).unwrap();
    h.cluster.set_throttle(2, 15, 2).unwrap();
    let mut sent = send_many(&mut h, NAMES, 20, 400, true);
    sent.extend(warm);
    assert!(h.flush(secs(60)));
    check_run(&h, &sent, TOPICS, true);
    let mut logged: BTreeMap<i32, (u64, u64)> = BTreeMap::new();
    for r in h.cluster.request_log() {
        if r.api_key == API_PRODUCE && r.responded {
            let e = logged.entry(r.broker_id).or_default();
            e.0 += r.throttle_time_ms as u64;
            e.1 = e.1.max(r.throttle_time_ms as u64);
        }
    }
    assert!(logged.values().any(|&(ms, _)| ms > 0), "a broker throttled");
    let m = h.producer.metrics();
    let text = text(&m);
    let mut total = 0;
    for b in m.brokers.iter().filter(|b| b.node_id >= 0) {
        let (ms, max) = logged.get(&b.node_id).copied().unwrap_or_default();
        assert_eq!(b.throttle_time_ms, ms, "broker {}", b.node_id);
        assert_eq!(b.throttle_time_max_ms, max, "broker {}", b.node_id);
        has(
            &text,
            &format!(
                "kafka_producer_node_throttle_time_ms_total{{broker=\"{}:{}\",node_id=\"{}\"}} {ms}",
                b.host, b.port, b.node_id
            ),
        );
        total += ms;
    }
    assert_eq!(m.windowed.growth.throttle_ms, total);
    assert_eq!(m.windowed.produce_throttle_time_max_ms(), 40.0);
}

/// A `Full` refusal followed, later, by an acceptance: the buffer wait is the virtual time
/// between the two.
#[test]
fn buffer_wait_is_the_time_from_a_full_refusal_to_the_next_acceptance() {
    let mut h = harness(cluster(3, TOPICS, 9), |b| {
        b.linger(Duration::from_millis(5)).buffer_max_records(5)
    });
    let t0 = h.now;
    send_many(&mut h, NAMES, 0, 5, true);
    let refused = h.send(record(5, "orders", true), 5).unwrap_err();
    assert!(matches!(refused.reason, SendErrorReason::Full));
    let full_at = h.now;
    h.run_for(Duration::from_millis(3));
    // Refused again: the wait still runs from the first refusal.
    assert!(h.send(record(5, "orders", true), 5).is_err());
    assert!(h.run_until(secs(30), |h| h.producer.buffered_records() == 0));
    assert_eq!(h.producer.metrics().counters.buffer_wait_ns, 0, "not yet");
    let accepted_at = h.now;
    h.send(record(5, "orders", true), 5).unwrap();
    let waited = (accepted_at - full_at).as_nanos() as u64;
    assert!(waited > 0);
    let m = h.producer.metrics();
    assert_eq!(m.counters.buffer_wait_ns, waited);
    assert_eq!(m.windowed.growth.buffer_wait_ns, waited);
    let elapsed = (h.now - t0) + secs(30);
    assert_eq!(m.windowed.elapsed, elapsed);
    assert_eq!(
        m.windowed.bufferpool_wait_ratio(),
        waited as f64 / elapsed.as_nanos() as f64
    );
    let text = text(&m);
    has(
        &text,
        &format!("kafka_producer_bufferpool_wait_time_ns_total {waited}"),
    );
    has(
        &text,
        &format!(
            "kafka_producer_bufferpool_wait_ratio {}",
            m.windowed.bufferpool_wait_ratio()
        ),
    );
    assert!(h.flush(secs(30)));
}

/// A topic's series go when the topic is forgotten (`metadata.max.idle.ms`), and come back
/// afresh when it is used again.
#[test]
fn a_forgotten_topics_series_go() {
    let mut h = harness(cluster(3, TOPICS, 4), |b| {
        b.linger(Duration::from_millis(2))
            .metadata_max_idle(secs(10))
            .metadata_max_age(secs(5))
    });
    send_many(&mut h, &["clicks"], 0, 10, true);
    assert!(h.flush(secs(30)));
    let m = h.producer.metrics();
    assert_eq!(m.topics.len(), 1);
    assert!(text(&m).contains("topic=\"clicks\""));
    h.run_for(secs(30));
    let m = h.producer.metrics();
    assert_eq!(m.counters.topics_forgotten, 1);
    assert!(m.topics.is_empty(), "{:?}", m.topics);
    assert!(!text(&m).contains("topic=\"clicks\""));
    // Another topic takes the number: it starts from nothing.
    send_many(&mut h, &["orders"], 100, 3, true);
    assert!(h.flush(secs(30)));
    let m = h.producer.metrics();
    assert_eq!(m.topics.len(), 1);
    assert_eq!(&*m.topics[0].topic, "orders");
    assert_eq!(m.topics[0].records_sent, 3);
    assert_eq!(m.counters.records_sent, 13, "the producer's totals stay");
}
