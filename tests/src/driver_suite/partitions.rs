//! A topic's partitions and the application's partitioner through the driver's handle,
//! against librdkafka's mock cluster: `partitions_for` tells the count and a leader for each
//! partition; the partitioner given to the builder routes every record sent without a
//! partition (each report's partition is its choice), and one that panics fails that record
//! alone, named by an event, while later records are still routed by it.

use std::time::Duration;

use producer_core::{
    Callback, Event, PartitionView, Partitioner, PartitionerError, ProduceError, Record, Route,
};
use producer_driver::PartitionsError;

use crate::drive::{Driver, Failure};
use crate::running::{Options, Running, HANG_GUARD};
use crate::MockKafka;

const TOPIC: &str = "routed";
const PARTITIONS: u32 = 5;

/// Partition = the value's first byte modulo the count; a value starting with 0xff panics.
pub struct FirstByte;

impl Partitioner for FirstByte {
    fn partition(
        &mut self,
        _topic: &str,
        _key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let first = value.and_then(|v| v.first()).copied().unwrap_or(0);
        assert!(first != 0xff, "0xff is not routed");
        Ok(Route::Partition(u32::from(first) % partitions.count()))
    }
}

/// The value of record `id`: its first byte chooses its partition (0xff for every 50th,
/// which panics the partitioner), the id follows.
fn value(id: u64) -> Vec<u8> {
    let first = if id % 50 == 49 {
        0xff
    } else {
        (id % 200) as u8
    };
    [&[first][..], &id.to_be_bytes()[..]].concat()
}

/// `partitions_for` before any record gives the mock's count and a broker (1..=3) leading each
/// partition, and an invalid name a typed error; 300 keyed records land where the partitioner
/// chose, except the six whose value panics it: those fail with
/// `ProduceError::Partitioner(Panicked)`, their records handed back, each named by
/// `CallbackPanicked { Partitioner }`. After `close`, `partitions_for` says closed.
pub fn a_custom_partitioner_routes_and_partitions_for_tells_the_count(driver: Driver) {
    let mock = MockKafka::new(3, &[(TOPIC, PARTITIONS as i32)]).expect("mock cluster");
    let mut options = Options::new(mock.producer_config().build().unwrap());
    options.partitioner = Some(Box::new(FirstByte));
    let p = Running::start(driver, options);

    let parts = p
        .partitions_for(TOPIC, HANG_GUARD)
        .expect("the topic's partitions");
    assert_eq!(parts.count(), PARTITIONS);
    assert_eq!(&**parts.topic(), TOPIC);
    for part in 0..PARTITIONS {
        let leader = parts.leader(part);
        assert!(
            (1..=3).contains(&leader),
            "partition {part}: leader {leader}"
        );
    }
    assert!(matches!(
        p.partitions_for("not a topic!", HANG_GUARD),
        Err(PartitionsError::InvalidTopic(_))
    ));

    const N: u64 = 300;
    for id in 0..N {
        let r = Record::new(TOPIC, value(id)).with_key(format!("k{}", id % 7));
        p.send(r, id).expect("the producer is open");
    }
    p.flush();
    let reports = super::reports_of(&p, 0..N);
    let mut panicked = 0;
    for (id, r) in &reports {
        let first = value(*id)[0];
        match &r.result {
            Ok(m) if first != 0xff => assert_eq!(
                m.partition as u32,
                u32::from(first) % PARTITIONS,
                "record {id}"
            ),
            Err(Failure::Produce(ProduceError::Partitioner(PartitionerError::Panicked(m))))
                if first == 0xff =>
            {
                assert!(m.contains("0xff is not routed"), "{m}");
                let back = r.record.as_ref().expect("handed back");
                assert_eq!(back.value.as_deref(), Some(&value(*id)[..]));
                panicked += 1;
            }
            other => panic!("record {id} (first byte {first:#x}): {other:?}"),
        }
    }
    assert_eq!(panicked, N / 50);
    p.close();
    let named = p
        .events()
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::CallbackPanicked {
                    callback: Callback::Partitioner,
                    ..
                }
            )
        })
        .count();
    assert_eq!(named as u64, N / 50, "each panic named by an event");
    assert_eq!(
        p.partitions_for(TOPIC, Duration::from_secs(5)),
        Err(PartitionsError::Closed)
    );
}
