//! Batches that grow past `batch.size` while every in-flight slot is busy
//! (`batch.grow.max.bytes`) on Apache Kafka itself (a single KRaft node, 4.1.1), through both
//! threaded drivers. One Produce request in flight at a time, the fault proxy in front of the
//! broker holding every chunk 20 ms each way, and records offered as fast as the application
//! sends them (far more than one 4 KiB batch per 40 ms round trip): the slot is busy, so
//! batches grow.
//!
//! - A topic with Kafka's default `max.message.bytes`: Kafka takes the grown batches (the
//!   producer's largest batch went well past `batch.size`), every record is delivered, and a
//!   librdkafka consumer reads each back once, in send order.
//! - A topic whose `max.message.bytes` is below the growth cap: Kafka refuses the grown
//!   batches that pass it (MESSAGE_TOO_LARGE, counted in the producer's errors: the broker's
//!   own view that they were larger than its limit); they are split and resent, never failed,
//!   and the consumer again reads every record once, in order.

use std::time::Duration;

use producer_core::{ErrorCode, Record};
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec};
use producer_tests::running::{Options, Running};
use producer_tests::{read_back_all, Driver};

const RECORDS: u64 = 60_000;
const BATCH_SIZE: usize = 4096;
const GROW_MAX: usize = 256 * 1024;

/// Produces [`RECORDS`] records of about 100 bytes to partition 0 of `topic` with one request
/// in flight at most; returns the producer's metrics after every report came.
fn produce_saturated(
    kafka: &producer_tests::kafka::TestCluster,
    driver: Driver,
    topic: &str,
) -> producer_core::MetricsSnapshot {
    let config = producer_config(kafka)
        .batch_size(BATCH_SIZE)
        .batch_grow_max(GROW_MAX)
        .max_in_flight(1)
        .linger(Duration::ZERO)
        // Every record taken at once (6 MB, within `buffer.memory`): the queue-delay limit,
        // which would hold senders back behind the slow round trip, is off.
        .queue_delay_target(Duration::ZERO)
        .build()
        .unwrap();
    assert!(config.idempotence, "idempotence is the default");
    let mut options = Options::new(config);
    // Room in the driver's queue for every record: the threaded mio driver refuses a send
    // when its queue is full instead of waiting.
    options.queue_capacity = RECORDS as usize;
    let p = Running::start(driver, options);
    for id in 0..RECORDS {
        let value = format!("{id:08}-{}", "v".repeat(90));
        let r = Record::new(topic, value).with_partition(0);
        p.send(r, id).expect("the producer is open");
    }
    p.flush();
    let reports = producer_tests::driver_suite::reports_of(&p, 0..RECORDS);
    let mut offsets: Vec<(u64, i64)> = reports
        .iter()
        .map(|(id, r)| match &r.result {
            Ok(m) => (*id, m.offset),
            Err(e) => panic!("record {id}: {e:?}"),
        })
        .collect();
    offsets.sort_unstable();
    assert!(
        offsets.windows(2).all(|w| w[0].1 < w[1].1),
        "offsets follow send order"
    );
    let metrics = p.metrics().expect("metrics");
    p.close();
    metrics
}

/// Every record once, in send order, as a librdkafka consumer reads them.
fn read_back_in_order(kafka: &producer_tests::kafka::TestCluster, topic: &str) {
    let consumed = read_back_all(
        &kafka.internal_bootstrap(),
        topic,
        1,
        Duration::from_secs(60),
    );
    let ids: Vec<u64> = consumed
        .iter()
        .map(|c| {
            let v = c.value.as_deref().expect("a value");
            std::str::from_utf8(&v[..8]).unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(ids.len() as u64, RECORDS, "every record read back once");
    assert!(
        ids.iter().copied().eq(0..RECORDS),
        "records read back in send order, no duplicates"
    );
}

fn growth_on_kafka(driver: Driver) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::single) else {
        return;
    };
    let topic = kafka.topic("batch-growth", 1, 1, &[]);
    // A round trip of at least 40 ms, whatever the machine's speed.
    for proxy in kafka.proxies() {
        proxy.set_delay(Duration::from_millis(20));
    }
    let m = produce_saturated(&kafka, driver, &topic);
    let largest = m.windowed.batch_size_max() as usize;
    println!(
        "{driver:?}: {} batches grown, {} requests, largest batch {largest} bytes",
        m.counters.batches_grown, m.counters.produce_requests
    );
    assert!(m.counters.batches_grown > 0, "batches grew");
    assert!(
        largest > 4 * BATCH_SIZE && largest <= GROW_MAX,
        "the largest batch Kafka took was {largest} bytes"
    );
    assert!(
        m.errors.is_empty(),
        "Kafka took every batch: {:?}",
        m.errors
    );
    read_back_in_order(&kafka, &topic);

    // A topic that takes batches of 32 KiB at most: grown batches past it are refused by
    // Kafka, split and resent.
    const TOPIC_MAX: usize = 32 * 1024;
    let max = TOPIC_MAX.to_string();
    let small = kafka.topic(
        "batch-growth-limited",
        1,
        1,
        &[("max.message.bytes", max.as_str())],
    );
    let m = produce_saturated(&kafka, driver, &small);
    let refused = m
        .errors
        .iter()
        .find(|(code, _)| *code == ErrorCode::MESSAGE_TOO_LARGE)
        .map_or(0, |&(_, n)| n);
    println!(
        "{driver:?}: limited topic: {} batches grown, {refused} refused as too large, largest \
         batch {} bytes",
        m.counters.batches_grown,
        m.windowed.batch_size_max()
    );
    assert!(refused > 0, "Kafka refused grown batches past its limit");
    assert_eq!(m.counters.records_failed, 0, "no record failed");
    for proxy in kafka.proxies() {
        proxy.heal();
    }
    read_back_in_order(&kafka, &small);
}

#[test]
fn batch_growth_tokio() {
    growth_on_kafka(Driver::Tokio);
}

#[test]
fn batch_growth_mio_threaded() {
    growth_on_kafka(Driver::MioThreaded);
}
