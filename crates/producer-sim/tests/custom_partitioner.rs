//! The application's partitioner against the simulated cluster: its choices are where the
//! records land (every report's partition and the cluster's log agree with it), its failures
//! fail only their records, and a topic's partitions are asked for and told by events
//! (`request_partitions`, `partitions`). Virtual time, no sleeps.

mod support;

use std::time::Duration;

use producer_core::{
    Config, Event, PartitionView, Partitioner, PartitionerError, ProduceError, Producer, Record,
    Route,
};
use producer_sim::drive::Harness;
use support::run::*;

const TOPIC: &str = "routed";
const PARTITIONS: u32 = 5;

/// Partition = the value's first byte modulo the count; a value starting with 0xff is
/// refused.
struct FirstByte;

impl Partitioner for FirstByte {
    fn partition(
        &mut self,
        _topic: &str,
        _key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        match value.and_then(|v| v.first()) {
            Some(0xff) => Err(PartitionerError::Failed("0xff is not routed".into())),
            Some(&b) => Ok(Route::Partition(u32::from(b) % partitions.count())),
            None => Ok(Route::Sticky),
        }
    }
}

fn with_partitioner(seed: u64, max_block: Duration) -> Harness<u64> {
    let cluster = cluster(3, &[(TOPIC, PARTITIONS as i32)], seed);
    let now = cluster.now();
    let config = Config::builder(cluster.bootstrap())
        .linger(Duration::from_millis(5))
        .max_block(max_block)
        .build()
        .unwrap();
    let producer = Producer::with_partitioner(config, now, Box::new(FirstByte));
    Harness::new(producer, cluster, now)
}

/// 500 records whose first value byte spreads them, keyed (the key must not matter), some
/// sent before the topic's metadata arrived (held, then routed by the partitioner), and every
/// tenth refused by the partitioner: each delivered record's partition is the partitioner's
/// choice, the cluster's log per partition holds exactly those records in send order, and the
/// refused ones come back with their typed error.
#[test]
fn every_record_lands_where_the_partitioner_chose() {
    let mut h = with_partitioner(11, Duration::from_secs(60));
    let mut expected: Vec<Vec<u64>> = vec![Vec::new(); PARTITIONS as usize];
    let mut refused = Vec::new();
    for id in 0..500u64 {
        let first = if id % 10 == 9 {
            0xff
        } else {
            (id * 7 % 251) as u8
        };
        let value = [&[first][..], format!("{id:08}").as_bytes()].concat();
        let r = Record::new(TOPIC, value).with_key(format!("k{}", id % 3));
        h.send(r, id).unwrap();
        if first == 0xff {
            refused.push(id);
        } else {
            expected[(u32::from(first) % PARTITIONS) as usize].push(id);
        }
        if id == 100 {
            // The first 101 were held for the topic's metadata.
            h.run_for(Duration::from_millis(50));
        }
    }
    assert!(h.flush(Duration::from_secs(60)), "every record reported");
    assert_eq!(h.deliveries.len(), 500);
    let mut failed = Vec::new();
    for d in &h.deliveries {
        match &d.result {
            Ok(m) => {
                let p = m.partition as usize;
                assert!(
                    expected[p].contains(&d.opaque),
                    "record {} in {p}",
                    d.opaque
                );
            }
            Err(f) => {
                assert_eq!(
                    f.error,
                    ProduceError::Partitioner(PartitionerError::Failed(
                        "0xff is not routed".into()
                    ))
                );
                assert_eq!(f.record.value.as_ref().unwrap()[0], 0xff, "handed back");
                failed.push(d.opaque);
            }
        }
    }
    failed.sort_unstable();
    assert_eq!(failed, refused);
    for (p, ids) in expected.iter().enumerate() {
        let logged: Vec<u64> = h
            .cluster
            .log(TOPIC, p as i32)
            .iter()
            .map(|r| {
                let v = r.value.as_ref().unwrap();
                std::str::from_utf8(&v[1..]).unwrap().parse().unwrap()
            })
            .collect();
        assert_eq!(
            &logged, ids,
            "partition {p}: the log holds the chosen records"
        );
    }
    assert!(
        h.contract_violations.is_empty(),
        "{:?}",
        h.contract_violations
    );
}

/// `request_partitions` before any record: the topic is asked for in Metadata, and
/// `PartitionsKnown` comes with the count once it arrives; `partitions` then names a leader
/// for each partition, the cluster's. Asked again when known, the answer comes at once.
#[test]
fn partitions_are_known_once_metadata_arrives() {
    let mut h = with_partitioner(12, Duration::from_secs(60));
    assert!(h.producer.partitions(TOPIC).is_none());
    h.producer.request_partitions(h.now, TOPIC).unwrap();
    let known = |h: &Harness<u64>| {
        h.events
            .iter()
            .filter(|e| matches!(e, Event::PartitionsKnown { topic, count: PARTITIONS } if &**topic == TOPIC))
            .count()
    };
    assert!(h.run_until(Duration::from_secs(10), |h| known(h) == 1));
    let parts = h.producer.partitions(TOPIC).expect("known now");
    assert_eq!(parts.count(), PARTITIONS);
    for p in 0..PARTITIONS {
        let leader = h.cluster.leader(TOPIC, p as i32).map(|(l, _)| l);
        assert_eq!(Some(parts.leader(p)), leader, "partition {p}");
    }
    h.producer.request_partitions(h.now, TOPIC).unwrap();
    h.drain();
    assert_eq!(known(&h), 2, "answered at once");
    assert!(
        !h.events
            .iter()
            .any(|e| matches!(e, Event::PartitionsUnavailable { .. })),
        "{:?}",
        h.events
    );
}

/// A topic that does not exist (the cluster creates none): `PartitionsUnavailable` with
/// `UnknownTopic` at `max_block`, not before; `partitions` stays `None`.
#[test]
fn a_topic_that_does_not_exist_is_unavailable_at_max_block() {
    let max_block = Duration::from_secs(3);
    let mut h = with_partitioner(13, max_block);
    let start = h.now;
    h.producer.request_partitions(h.now, "missing").unwrap();
    let unavailable = |h: &Harness<u64>| {
        h.events
            .iter()
            .filter(|e| matches!(e, Event::PartitionsUnavailable { .. }))
            .count()
    };
    assert!(h.run_until(Duration::from_secs(10), |h| unavailable(h) > 0));
    assert!(h.now >= start + max_block, "not before max_block");
    let e = h
        .events
        .iter()
        .find(|e| matches!(e, Event::PartitionsUnavailable { .. }))
        .unwrap();
    assert_eq!(
        e,
        &Event::PartitionsUnavailable {
            topic: "missing".into(),
            error: ProduceError::UnknownTopic
        }
    );
    assert!(h.producer.partitions("missing").is_none());
    h.run_for(Duration::from_secs(5));
    assert_eq!(unavailable(&h), 1, "answered once");
}
