//! The driver's metrics against librdkafka's mock cluster: the snapshot comes from the
//! producer's loop while it runs, and is its last one after it stopped.

use std::collections::HashSet;

use producer_core::metrics::ConnectionState;
use producer_core::Record;

use crate::drive::Driver;
use crate::running::{Options, Running, HANG_GUARD};
use crate::MockKafka;

const TOPIC: &str = "metrics";

/// 2,000 records sent and flushed: the snapshot counts each delivered, every request's and
/// every record's latency, no record or byte left buffered, a producer id and a ready broker;
/// after `close`, the last snapshot still counts the run and shows no connection ready.
pub fn the_metrics_count_the_run(driver: Driver) {
    const N: u64 = 2_000;
    let mock = MockKafka::new(1, &[(TOPIC, 3)]).expect("mock cluster");
    let p = Running::start(
        driver,
        Options::new(mock.producer_config().build().unwrap()),
    );
    let before = p.metrics().expect("a snapshot while the producer runs");
    assert_eq!(before.counters.records_delivered, 0);
    for id in 0..N {
        let r = Record::new(TOPIC, format!("value-{id}")).with_key(format!("k{}", id % 13));
        p.send(r, id).expect("the queue holds every record");
    }
    p.flush();
    let mut seen = HashSet::new();
    for _ in 0..N {
        let r = p
            .next_report(HANG_GUARD)
            .expect("a report for every record");
        assert!(
            r.result.is_ok(),
            "record {} delivered: {:?}",
            r.id,
            r.result
        );
        assert!(seen.insert(r.id), "two reports for record {}", r.id);
    }

    let m = p.metrics().expect("a snapshot");
    let c = &m.counters;
    assert_eq!(c.records_delivered, N);
    assert_eq!(c.records_failed, 0);
    assert!(c.records_sent >= N && c.bytes_sent > 0);
    assert!(c.produce_requests > 0 && c.batches_sent >= c.produce_requests);
    // Flushed: every request was answered, each answer is in the latency histogram.
    assert_eq!(m.request_latency.count(), c.produce_requests);
    assert_eq!(m.delivery_latency.count(), N);
    assert_eq!(m.batch_size.count(), c.batches_sent - c.retries);
    assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
    assert!(m.producer_id.is_some(), "idempotent by default");
    assert!(m.brokers.iter().any(|b| b.state == ConnectionState::Ready));
    assert!(m.brokers.iter().all(|b| b.in_flight_requests == 0));
    let mut text = String::new();
    m.render_prometheus(&mut text);
    assert!(text.contains(&format!("kafka_producer_records_delivered_total {N}\n")));

    p.close();
    let last = p.metrics().expect("the loop's last snapshot");
    assert_eq!(last.counters.records_delivered, N);
    assert_eq!(last.counters.produce_requests, c.produce_requests);
    assert!(
        last.brokers
            .iter()
            .all(|b| b.state != ConnectionState::Ready),
        "closed: no connection left: {:?}",
        last.brokers
    );
}
