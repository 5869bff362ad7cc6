//! The application's partitioner and `partitions_for` on Apache Kafka itself (a single KRaft
//! node, 4.1.1), through both threaded drivers: `partitions_for` gives the topic's real
//! partition count and its leader (the node) for each partition; a partitioner that routes
//! by a tenant number in the value spreads records unevenly on purpose, and a librdkafka
//! consumer reads back, per partition, exactly the records the partitioner chose for it
//! (counted, and each record checked), as the delivery reports said.

use std::collections::BTreeMap;
use std::time::Duration;

use producer_core::{PartitionView, Partitioner, PartitionerError, Record, Route};
use producer_tests::kafka::suite::producer_config;
use producer_tests::kafka::{shared_cluster, ClusterSpec};
use producer_tests::running::{Options, Running, HANG_GUARD};
use producer_tests::{read_back_all, Driver};

const PARTITIONS: u32 = 4;
const RECORDS: u64 = 600;

/// Tenant of record `id`: 0 for half of them, then 1..=5, so the partitions get uneven
/// counts (a partitioner that did nothing would not match them by chance).
fn tenant(id: u64) -> u8 {
    if id.is_multiple_of(2) {
        0
    } else {
        (id % 5 + 1) as u8
    }
}

/// Routes by the tenant number, the value's first byte: tenant `t` to partition
/// `(t * 3) % count`.
struct ByTenant;

impl Partitioner for ByTenant {
    fn partition(
        &mut self,
        _topic: &str,
        _key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let t = value
            .and_then(|v| v.first())
            .ok_or_else(|| PartitionerError::Failed("no tenant".into()))?;
        Ok(Route::Partition(u32::from(*t) * 3 % partitions.count()))
    }
}

fn chosen(t: u8) -> i32 {
    (u32::from(t) * 3 % PARTITIONS) as i32
}

fn partitioner_on_kafka(driver: Driver) {
    let Some(mut kafka) = shared_cluster(ClusterSpec::single) else {
        return;
    };
    let topic = kafka.topic("partitioner", PARTITIONS as i32, 1, &[]);
    let mut options = Options::new(producer_config(&kafka).build().unwrap());
    options.partitioner = Some(Box::new(ByTenant));
    let p = Running::start(driver, options);

    let parts = p
        .partitions_for(&topic, HANG_GUARD)
        .expect("the topic's partitions");
    assert_eq!(parts.count(), PARTITIONS, "the topic's real count");
    let nodes = kafka.node_ids();
    for part in 0..PARTITIONS {
        assert!(
            nodes.contains(&parts.leader(part)),
            "partition {part}: leader {} not among {nodes:?}",
            parts.leader(part)
        );
    }

    let mut want: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for id in 0..RECORDS {
        let t = tenant(id);
        let value = [&[t][..], format!("-{id:06}").as_bytes()].concat();
        // Keys that murmur2 would spread elsewhere: the partitioner alone decides.
        let r = Record::new(topic.as_str(), value).with_key(format!("key-{id}"));
        p.send(r, id).expect("the producer is open");
        want.entry(chosen(t)).or_default().push(id);
    }
    p.flush();
    let reports = producer_tests::driver_suite::reports_of(&p, 0..RECORDS);
    for (id, r) in &reports {
        match &r.result {
            Ok(m) => assert_eq!(m.partition, chosen(tenant(*id)), "record {id}"),
            Err(e) => panic!("record {id}: {e:?}"),
        }
    }
    p.close();

    let consumed = read_back_all(
        &kafka.internal_bootstrap(),
        &topic,
        PARTITIONS as i32,
        Duration::from_secs(30),
    );
    let mut got: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for c in &consumed {
        let v = c.value.as_deref().expect("a value");
        assert_eq!(
            c.partition,
            chosen(v[0]),
            "offset {} of {}",
            c.offset,
            c.partition
        );
        let id: u64 = std::str::from_utf8(&v[2..]).unwrap().parse().unwrap();
        got.entry(c.partition).or_default().push(id);
    }
    let counts = |m: &BTreeMap<i32, Vec<u64>>| -> Vec<(i32, usize)> {
        m.iter().map(|(p, ids)| (*p, ids.len())).collect()
    };
    assert_eq!(counts(&got), counts(&want), "records per partition");
    assert_eq!(
        got, want,
        "each partition holds its records once, in send order"
    );
    println!(
        "{driver:?}: {RECORDS} records read back by partition {:?}, leaders {:?}",
        counts(&got),
        parts.leaders()
    );
}

#[test]
fn partitioner_tokio() {
    partitioner_on_kafka(Driver::Tokio);
}

#[test]
fn partitioner_mio_threaded() {
    partitioner_on_kafka(Driver::MioThreaded);
}
