//! The embeddable `MioDriver`'s partitions and partitioner against librdkafka's mock cluster:
//! `request_partitions` is answered by `PartitionsKnown` out of `poll_event`, after which
//! `partitions` names the mock's count; a partitioner set on the driver routes every record
//! sent without a partition (each report's partition is its choice).

mod support;

use mio::{Events, Poll, Token};
use producer_core::{Config, Event, PartitionView, Partitioner, PartitionerError, Record, Route};
use producer_mio::{MioDriver, TokenRange};

use support::{with_hang_guard, Cluster, PARTITIONS};

/// Every record to the partition its value's first byte names (modulo the count).
struct FirstByte;

impl Partitioner for FirstByte {
    fn partition(
        &mut self,
        _topic: &str,
        _key: Option<&[u8]>,
        value: Option<&[u8]>,
        partitions: &PartitionView<'_>,
    ) -> Result<Route, PartitionerError> {
        let first = value.and_then(|v| v.first()).copied().unwrap_or(0);
        Ok(Route::Partition(u32::from(first) % partitions.count()))
    }
}

#[test]
fn embedded_driver_asks_partitions_and_routes_with_its_partitioner() {
    with_hang_guard(run);
}

fn run() {
    const N: usize = 120;
    let topic = "embedded-partitions";
    let cluster = Cluster::start(topic);
    let config = Config::builder(cluster.servers(false)).build().unwrap();
    let mut poll = Poll::new().unwrap();
    let range = TokenRange::new(Token(100), 16);
    let mut driver = MioDriver::<usize>::new(config, poll.registry(), range).unwrap();
    driver.set_partitioner(Box::new(FirstByte));
    assert!(driver.partitions(topic).is_none(), "not known yet");
    driver.request_partitions(topic).unwrap();
    assert!(driver.request_partitions("no good!").is_err());
    let mut events = Events::with_capacity(256);
    let mut turn = |driver: &mut MioDriver<usize>| {
        poll.poll(&mut events, driver.next_timeout()).unwrap();
        for event in events.iter() {
            driver.handle_event(event);
        }
        driver.handle_timeout();
    };
    let mut known = None;
    while known.is_none() {
        turn(&mut driver);
        while let Some(e) = driver.poll_event() {
            if let Event::PartitionsKnown { topic: t, count } = &e {
                assert_eq!(&**t, topic);
                known = Some(*count);
            }
            assert!(!matches!(e, Event::PartitionsUnavailable { .. }), "{e:?}");
        }
    }
    assert_eq!(known, Some(PARTITIONS as u32));
    let parts = driver.partitions(topic).expect("known now");
    assert_eq!(parts.count(), PARTITIONS as u32);
    assert!(parts.leaders().iter().all(|&l| l >= 0), "{parts:?}");

    for i in 0..N {
        let value = vec![(i * 7 % 256) as u8, 1, 2, 3];
        driver
            .send(Record::new(topic, value).with_key("same key"), i)
            .unwrap();
    }
    driver.flush();
    let mut reported = 0;
    while reported < N {
        turn(&mut driver);
        while let Some(d) = driver.poll_delivery() {
            let m = d.result.expect("delivered");
            let first = (d.opaque * 7 % 256) as u32;
            assert_eq!(
                m.partition as u32,
                first % PARTITIONS as u32,
                "record {}",
                d.opaque
            );
            reported += 1;
        }
    }
    driver.close();
    while !driver.is_closed() {
        turn(&mut driver);
    }
}
